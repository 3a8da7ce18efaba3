"""``nacelle eval``, run as a process: its exit codes (0 passed, 1 a failed case or a
regression, 2 a usage error), the report and page it writes, resuming --results."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test runs the nacelle command as a process

ROOT = Path(__file__).resolve().parent.parent

AGENT = textwrap.dedent("""
    import os
    from nacelle import Agent
    from nacelle.testing import ScriptedBackend

    def make_agent():
        answers = os.environ["ANSWERS"].split(",")
        return Agent(ScriptedBackend(answers * 20), "Answer in one word.")

    def judge_backend():
        return ScriptedBackend(['{"reasoning": "one word", "passed": true}'] * 50)
""")

DATA = ('{"name": "capital", "input": "Capital of France?", "expected": "Paris"}\n'
        '{"name": "polite", "input": "Say hi.", "checks": [{"judge": "Is one word."}]}\n')


def nacelle(tmp_path, *args, answers="Paris"):
    (tmp_path / "evalagent.py").write_text(AGENT)
    (tmp_path / "data.jsonl").write_text(DATA)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("NACELLE_", "ANTHROPIC_"))}
    environ.update({"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "NACELLE_CONFIG": os.devnull,
                    "ANSWERS": answers})
    return subprocess.run([sys.executable, "-m", "nacelle", "eval", "data.jsonl", "--agent",
                           "evalagent:make_agent", "--judge", "evalagent:judge_backend", *args],
                          capture_output=True, text=True, env=environ, timeout=120, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)


def test_every_case_passing_exits_0_and_writes_the_report_and_page(tmp_path):
    out = nacelle(tmp_path, "--repeat", "3", "-o", "report.json", "--html", "page.html")
    assert out.returncode == 0, out.stderr
    assert "PASS capital  3/3" in out.stdout and "PASS polite  3/3" in out.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["repeat"] == 3 and report["passes"] == 6
    assert (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")


def test_a_failed_case_exits_1_naming_its_reason(tmp_path):
    out = nacelle(tmp_path, answers="Lyon")
    assert out.returncode == 1, out.stderr
    assert "FAIL capital  0/1" in out.stdout
    assert "run 0: equals(): expected Paris, got Lyon" in out.stdout
    assert nacelle(tmp_path, "--min-rate", "0", answers="Lyon").returncode == 0


def test_a_regression_against_the_baseline_exits_1(tmp_path):
    assert nacelle(tmp_path, "--repeat", "10", "-o", "old.json").returncode == 0
    # The case passes 4 runs in 10 now: short of 100% (1), and beyond noise (regressed).
    out = nacelle(tmp_path, "--repeat", "10", "--baseline", "old.json", "--min-rate", "0",
                  "--workers", "1",  # one at a time: the capital runs take the first 10 answers
                  answers="Paris,Lyon,Lyon,Paris,Lyon,Lyon,Paris,Lyon,Lyon,Paris")
    assert out.returncode == 1, out.stderr
    assert "against old.json: 1 regressed (capital), 0 improved" in out.stdout
    same = nacelle(tmp_path, "--repeat", "10", "--baseline", "old.json")
    assert same.returncode == 0 and "0 regressed, 0 improved" in same.stdout


def test_a_rerun_with_results_resumes_and_exits_as_the_whole_eval_would(tmp_path):
    first = nacelle(tmp_path, "--results", "runs.jsonl", answers="Lyon")
    assert first.returncode == 1
    again = nacelle(tmp_path, "--results", "runs.jsonl", answers="Paris")
    assert again.returncode == 1  # the runs kept in the file are not run again
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("args,message", [
    (("--repeat", "0"), "--repeat and --workers must be at least 1"),
    (("--min-rate", "2"), "--min-rate must be between 0 and 1"),
    (("--baseline", "missing.json"), "cannot read the eval report missing.json"),
    (("--agent", "nowhere:make"), "cannot import 'nowhere'"),
])
def test_a_usage_error_exits_2_with_its_reason(tmp_path, args, message):
    out = nacelle(tmp_path, *args)
    assert out.returncode == 2, out.stdout
    assert message in out.stderr


def test_an_empty_dataset_is_a_usage_error_not_a_pass(tmp_path):
    (tmp_path / "evalagent.py").write_text(AGENT)
    (tmp_path / "empty.jsonl").write_text("\n")
    out = subprocess.run([sys.executable, "-m", "nacelle", "eval", "empty.jsonl", "--agent",
                          "evalagent:make_agent"], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "ANSWERS": "Paris"},
                         timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "empty.jsonl has no cases" in out.stderr


def test_a_judge_check_without_judge_is_a_usage_error(tmp_path):
    (tmp_path / "evalagent.py").write_text(AGENT)
    (tmp_path / "data.jsonl").write_text(DATA)
    out = subprocess.run([sys.executable, "-m", "nacelle", "eval", "data.jsonl", "--agent",
                          "evalagent:make_agent"], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "ANSWERS": "Paris"},
                         timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "a judge check needs its backend" in out.stderr
