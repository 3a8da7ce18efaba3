"""The README's Python examples run as written, against a scripted server on loopback.

Blocks that need the outside world (a stdio MCP server, a folder under /srv, a real
key) are left out by what they contain; every other block runs, in order, in one
namespace, as a reader would paste them.
"""

import re
from pathlib import Path

import pytest


from nacelle.backends import anthropic
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

README = Path(__file__).resolve().parent.parent / "README.rst"
NEEDS_THE_WORLD = ("connect_stdio", "connect_http", "/srv/", "os.environ", "sk-ant-",
                   "openrouter.Backend(", "nacelle.Retry(backend")


def python_blocks():
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^\.\. code-block:: python\n\n((?:(?:    .*)?\n)+)", text, re.M):
        lines = match.group(1).splitlines()
        blocks.append("\n".join(line[4:] for line in lines).strip() + "\n")
    return blocks


def test_the_readme_has_python_examples():
    assert len(python_blocks()) >= 5


def test_the_runnable_readme_examples_run(monkeypatch, capsys):
    runnable = [b for b in python_blocks() if not any(word in b for word in NEEDS_THE_WORLD)]
    assert any("agent.stream(" in b for b in runnable) and any("ScriptedBackend" in b for b in runnable)
    real = anthropic.Backend
    with FakeServer() as server:
        server.queue("/v1/messages",
                     Reply(chunks=anthropic_stream([], tool_calls=[
                         ("toolu_1", "word_count", '{"text": "to be or not"}')])),
                     *[Reply(chunks=anthropic_stream(["Four words."])) for _ in range(6)])
        # A block that brings its own FakeServer (a loopback base_url) keeps it.
        monkeypatch.setattr(anthropic, "Backend",
                            lambda *a, **k: real("readme-key", base_url=k["base_url"]
                                                 if str(k.get("base_url", "")).startswith(
                                                     "http://127.0.0.1:") else server.url,
                                                 **{n: v for n, v in k.items() if n != "base_url"}))
        namespace = {"__name__": "readme"}
        for block in runnable:
            exec(compile(block, str(README), "exec"), namespace)
        requests = [r.json() for r in server.requests]
    out = capsys.readouterr().out
    assert "calling word_count" in out and "Four words." in out
    # The quick start (a tool call, then the answer), then the notebook: run(), and a
    # stream carrying that conversation forward.
    assert len(requests) == 4
    last = [block.get("text") for m in requests[3]["messages"] for block in m["content"]]
    assert last == ["Summarise PEP 8 in one line.", "Four words.", "And PEP 20?"]


@pytest.mark.slow
def test_the_readme_examples_pass_mypy_strict(tmp_path, monkeypatch):
    # Every block, as a reader pastes them in order into one file, checked as a user's
    # strict mypy checks a script for the oldest Python the package supports. Each
    # example names its backend afresh, so a name may be bound again with another
    # type (allow_redefinition_new, for this file only). opentelemetry is not
    # followed: its SDK's source uses match statements, which a 3.9 target cannot read.
    # nacelle's own modules are read but not reported on, as for an installed package
    # (the package is checked on its own, with its stubs, by mypy --config-file setup.cfg).
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (pip install .[test])")
    (tmp_path / "readme.py").write_text("\n".join(python_blocks()), encoding="utf-8")
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\nstrict = True\npython_version = 3.9\n"
        "[mypy-opentelemetry.*]\nfollow_imports = skip\nfollow_imports_for_stubs = True\n"
        "ignore_missing_imports = True\n[mypy-nacelle.*]\nfollow_imports = silent\n"
        "[mypy-readme]\nallow_redefinition_new = True\nlocal_partial_types = True\n",
        encoding="utf-8")
    monkeypatch.chdir(README.parent)  # mypy finds this nacelle, not an installed one
    stdout, stderr, status = api.run([
        "--config-file", str(tmp_path / "mypy.ini"), "--cache-dir", str(tmp_path / "cache"),
        "--no-pretty", str(tmp_path / "readme.py")])
    assert status == 0, stderr + "\n".join(
        f"{line}    <- {source_line(tmp_path / 'readme.py', line)}" for line in stdout.splitlines())


def source_line(path, report):
    """The line of the pasted README a mypy report points at, to read beside it."""
    match = re.match(r"[^:]+:(\d+):", report)
    return path.read_text(encoding="utf-8").splitlines()[int(match[1]) - 1].strip() if match else ""
