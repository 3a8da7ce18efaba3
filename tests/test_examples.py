"""The examples run as written, against a scripted Anthropic server on loopback: in
this process, and as a user runs them, ``python examples/X.py --offline``."""

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from nacelle.backends import anthropic
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def server(monkeypatch):
    real = anthropic.Backend
    with FakeServer() as s:
        monkeypatch.setattr(anthropic, "Backend",
                            lambda *a, **k: real("example-key", base_url=s.url))
        yield s


def run_example(name):
    module = runpy.run_path(str(EXAMPLES / name), run_name="example")
    module["main"]()


def test_quickstart_streams_a_tool_call_and_an_answer(server, capsys):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "word_count", '{"text": "to be or not to be"}')])),
                 Reply(chunks=anthropic_stream(["Six ", "words."])))
    run_example("quickstart.py")
    out = capsys.readouterr().out
    assert '[calling word_count {"text": "to be or not to be"}]' in out
    assert "Six words." in out and "[end;" in out
    result = server.requests[1].json()["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["content"] == "6"


def test_custom_tool_runs_decorated_and_class_based_tools(server, capsys):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "glossary", '{"term": "Nacelle"}'),
                     ("toolu_2", "forecast", '{"city": "Lisbon", "days": 2, "unit": "fahrenheit"}'),
                     ("toolu_3", "slow_count", '{"to": 3}')])),
                 Reply(chunks=anthropic_stream(["An engine housing; warm in Lisbon."])))
    run_example("custom_tool.py")
    out = capsys.readouterr().out
    assert "An engine housing; warm in Lisbon." in out
    results = {r["tool_use_id"]: r for r in server.requests[1].json()["messages"][-1]["content"]}
    assert results["toolu_1"]["content"] == "the housing that holds an engine"
    assert '"high":70' in results["toolu_2"]["content"].replace(" ", "")
    assert results["toolu_3"]["content"] == "counted to 3"


def test_best_of_n_runs_the_drafts_concurrently_and_keeps_the_judged_best(server, capsys):
    drafts = [f"Draft number {i}." for i in range(4)]
    server.queue("/v1/messages", *[Reply(chunks=anthropic_stream([d])) for d in drafts],
                 Reply(chunks=anthropic_stream(["3"])))
    run_example("best_of_n.py")
    out = capsys.readouterr().out
    best = out.split("best: ")[1].splitlines()[0]
    listing = out.split("\n\nbest:")[0].splitlines()
    assert best == listing[2].split(". ", 1)[1]
    assert len(server.requests) == 5


def run_offline(name, *args):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    environ["PYTHONPATH"] = str(EXAMPLES.parent)
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, env=environ, timeout=60, cwd=str(EXAMPLES.parent))


OFFLINE = {
    "quickstart.py": ['[calling word_count {"text": "to be or not to be"}]', "Six words.",
                      "[end; "],
    "custom_tool.py": ["An engine housing; warm in Lisbon.", "Usage(input_tokens="],
    "best_of_n.py": ["best: Draft number ", "spent "],
}


@pytest.mark.parametrize("name", sorted(OFFLINE))
def test_each_example_runs_offline_against_the_loopback_fake_with_no_key(name):
    out = run_offline(name, "--offline")
    assert out.returncode == 0, out.stderr
    for wanted in OFFLINE[name]:
        assert wanted in out.stdout, out.stdout
    assert "--offline" in (EXAMPLES / name).read_text().split('"""')[1]  # the docstring says how


@pytest.mark.parametrize("name", sorted(OFFLINE))
def test_without_a_key_an_example_says_so_in_one_line_naming_the_offline_option(name):
    out = run_offline(name)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "ANTHROPIC_API_KEY" in out.stderr and "--offline" in out.stderr


@pytest.mark.slow
def test_the_examples_pass_mypy_strict(tmp_path, monkeypatch):
    # As a user's strict mypy checks a script, for the oldest Python the package
    # supports; nacelle's own modules are read but not reported on, as an installed
    # package's are (the package is checked on its own by mypy --config-file setup.cfg).
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (pip install .[test])")
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\nstrict = True\npython_version = 3.9\n"
        "[mypy-nacelle.*]\nfollow_imports = silent\n", encoding="utf-8")
    monkeypatch.chdir(EXAMPLES.parent)  # mypy finds this nacelle, not an installed one
    stdout, stderr, status = api.run([
        "--config-file", str(tmp_path / "mypy.ini"), "--cache-dir", str(tmp_path / "cache"),
        "--no-pretty", *sorted(str(p) for p in EXAMPLES.glob("*.py"))])
    assert status == 0, stderr + stdout
