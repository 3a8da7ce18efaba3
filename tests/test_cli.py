"""The nacelle command, run as a real process against a loopback FakeServer."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nacelle.cli import Approver
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream
from nacelle.tools import ToolContext

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-ant-cli-test-key-0123456789"


def nacelle(*args, server=None, stdin="", env=None, timeout=60, cwd=None):
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("NACELLE_", "ANTHROPIC_", "OPENROUTER_"))}
    environ.update({"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "ANTHROPIC_API_KEY": KEY,
                    "NACELLE_CONFIG": os.devnull})
    if server is not None:
        environ["ANTHROPIC_BASE_URL"] = server.url
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "nacelle", *args], input=stdin,
                          capture_output=True, text=True, env=environ, timeout=timeout,
                          cwd=cwd)


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def test_the_demo_runs_offline_and_exits_zero():
    out = nacelle("demo", env={"ANTHROPIC_API_KEY": ""})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "> What is this project, and what does its entry point do?"
    assert '-> list_directory {"path":"."}' in lines
    assert '-> read_file {"path":"greet.py"}' in lines
    assert any(line.startswith("   ok list_directory") for line in lines)
    assert any(line.startswith("   ok read_file") and "import sys" in line for line in lines)
    assert "This is **greeter**, a tiny command-line greeter." in out.stdout
    assert lines[-1].startswith("== done: ")


def test_one_prompt_streams_the_answer_and_exits_zero(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Hel", "lo ", "there."])))
    out = nacelle("Say hello", "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Hello there.\n")
    body = server.requests[0].json()
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Say hello", "cache_control": {"type": "ephemeral"}}]}] or \
        body["messages"][0]["content"][0]["text"] == "Say hello"
    assert server.requests[0].headers.get("x-api-key") == KEY


def test_one_prompt_uses_the_root_for_local_tools(server, tmp_path):
    (tmp_path / "notes.txt").write_text("the launch code is 42\n", encoding="utf-8")
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "read_file", '{"path": "notes.txt"}')])),
                 Reply(chunks=anthropic_stream(["It says 42."])))
    out = nacelle("What do the notes say?", "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    assert "   ok read_file" in out.stdout
    second = json.dumps(server.requests[1].json())
    assert "the launch code is 42" in second


def test_a_root_under_home_is_expanded(server, tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "a.txt").write_text("found me\n", encoding="utf-8")
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "read_file", '{"path": "a.txt"}')])),
                 Reply(chunks=anthropic_stream(["ok"])))
    out = nacelle("read it", "--root", "~/proj", server=server, env={"HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert "found me" in json.dumps(server.requests[1].json())


def test_a_write_asks_first_and_a_no_refuses_it(server, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "write_file", '{"path": "x.txt", "content": "hi"}')])),
                 Reply(chunks=anthropic_stream(["Understood."])))
    out = nacelle("Write x", "--root", str(tmp_path), server=server, stdin="n\n")
    assert out.returncode == 0, out.stderr
    assert "Allow write_file" in out.stderr
    assert "   refused write_file" in out.stdout
    assert not (tmp_path / "x.txt").exists()


def test_yes_approves_writes(server, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "write_file", '{"path": "x.txt", "content": "hi"}')])),
                 Reply(chunks=anthropic_stream(["Done."])))
    out = nacelle("Write x", "--root", str(tmp_path), "--yes", server=server)
    assert out.returncode == 0, out.stderr
    assert "Allow" not in out.stderr
    assert (tmp_path / "x.txt").read_text() == "hi"


def test_a_failure_exits_nonzero_with_a_one_line_reason_and_no_key(server, tmp_path):
    server.queue("/v1/messages", Reply.json(
        {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
        status=401))
    out = nacelle("hi", "--root", str(tmp_path), server=server)
    assert out.returncode == 1
    reason = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(reason) == 1 and reason[0].startswith("nacelle: error: APIError")
    assert KEY not in out.stderr + out.stdout


def test_an_incomplete_answer_exits_three(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["cut"], stop_reason="max_tokens")))
    out = nacelle("hi", "--root", str(tmp_path), server=server)
    assert out.returncode == 3
    assert "INCOMPLETE ANSWER" in out.stdout


def test_a_bad_setting_exits_nonzero_naming_it(tmp_path):
    out = nacelle("hi", env={"NACELLE_EFFORT": "extreme"})
    assert out.returncode == 1
    assert "unknown effort 'extreme'" in out.stderr


def test_openrouter_needs_a_model(tmp_path):
    out = nacelle("hi", "--backend", "openrouter")
    assert out.returncode == 1 and "needs a model" in out.stderr


def test_the_interactive_session_carries_the_conversation(server, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream(["Nice to meet you, Ada."])),
                 Reply(chunks=anthropic_stream(["Your name is Ada."])))
    out = nacelle("--root", str(tmp_path), server=server,
                  stdin="My name is Ada.\nWhat is my name?\nexit\n")
    assert out.returncode == 0, out.stderr
    assert "Nice to meet you, Ada." in out.stdout and "Your name is Ada." in out.stdout
    second = server.requests[1].json()["messages"]
    texts = [block.get("text") for m in second for block in m["content"]]
    assert texts[:3] == ["My name is Ada.", "Nice to meet you, Ada.", "What is my name?"]


def test_the_interactive_session_survives_a_failed_run(server, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], error=("invalid_request_error", "bad"))),
                 Reply(chunks=anthropic_stream(["Recovered."])))
    out = nacelle("--root", str(tmp_path), server=server, stdin="one\ntwo\n")
    assert out.returncode == 0, out.stderr
    assert "nacelle: error: StreamError" in out.stderr and "Recovered." in out.stdout


def test_ctrl_c_cancels_the_run_and_returns_to_the_prompt(server, tmp_path):
    import signal

    server.queue("/v1/messages",
                 Reply(chunks=[(anthropic_stream(["slow"])[0], 0.0), (b": wait\n\n", 30.0)]),
                 Reply(chunks=anthropic_stream(["Second answer."])))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NACELLE_")}
    environ.update({"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "ANTHROPIC_API_KEY": KEY,
                    "NACELLE_CONFIG": os.devnull, "ANTHROPIC_BASE_URL": server.url})
    proc = subprocess.Popen([sys.executable, "-m", "nacelle", "--root", str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environ)
    try:
        proc.stdin.write("first\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 20
        while len(server.requests) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.stdin.write("second\nexit\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "(cancelled)" in err
    assert "Second answer." in out


# -- approvals ---------------------------------------------------------------------

class Tool:
    def __init__(self, name, read_only):
        self.name, self.read_only = name, read_only


class Recorder:
    def __init__(self):
        self.parts = []
        self.lock = threading.Lock()

    def write(self, text):
        with self.lock:
            self.parts.append(text)

    def flush(self):
        pass


def test_read_only_tools_and_yes_never_ask():
    stderr = Recorder()
    approver = Approver([Tool("read_file", True), Tool("write_file", False)], stderr=stderr)
    assert approver("read_file", {}, ToolContext())
    assert Approver([Tool("write_file", False)], yes=True, stderr=stderr)("write_file", {}, ToolContext())
    assert stderr.parts == []


def test_concurrent_questions_are_asked_one_at_a_time():
    read_fd, write_fd = os.pipe()
    stdin = os.fdopen(read_fd, "r")
    stderr = Recorder()
    approver = Approver([Tool("write_file", False)], stdin=stdin, stderr=stderr)
    answers = {}

    def ask(i):
        answers[i] = approver("write_file", {"path": f"f{i}"}, ToolContext())

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    questions_seen = []
    for reply in ("y\n", "n\n", "y\n"):
        deadline = time.monotonic() + 5
        while len([p for p in stderr.parts if p.startswith("Allow")]) <= len(questions_seen):
            assert time.monotonic() < deadline, "no question was asked"
            time.sleep(0.01)
        time.sleep(0.1)  # a racing second question would show up now
        asked = [p for p in stderr.parts if p.startswith("Allow")]
        assert len(asked) == len(questions_seen) + 1, "two questions were open at once"
        questions_seen.append(asked[-1])
        os.write(write_fd, reply.encode())
    for t in threads:
        t.join(5)
    os.close(write_fd)
    stdin.close()
    assert sorted(answers.values()) == [False, True, True]


def test_a_cancelled_run_releases_a_waiting_question():
    read_fd, write_fd = os.pipe()
    stdin = os.fdopen(read_fd, "r")
    approver = Approver([Tool("write_file", False)], stdin=stdin, stderr=Recorder())
    ctx = ToolContext()
    threading.Timer(0.2, ctx.cancelled.set).start()
    started = time.monotonic()
    try:
        assert approver("write_file", {}, ctx) is False
        assert time.monotonic() - started < 2
    finally:
        os.close(write_fd)
        stdin.close()


def test_schema_prints_the_validated_json_value_on_stdout(server, tmp_path):
    schema = tmp_path / "weather report.json"
    schema.write_text(json.dumps({"type": "object", "properties": {
        "city": {"type": "string"}, "temp_c": {"type": "number"}},
        "required": ["city", "temp_c"]}))
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream(['{"city": "Paris"}'])),
                 Reply(chunks=anthropic_stream(['{"city": "Paris", ', '"temp_c": 21}'])))
    out = nacelle("--schema", str(schema), "Weather in Paris?", "--root", str(tmp_path),
                  server=server)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"city": "Paris", "temp_c": 21}
    first = server.requests[0].json()
    assert first["output_config"]["format"]["type"] == "json_schema"
    assert "temp_c" in json.dumps(server.requests[1].json()["messages"][-1])


def test_schema_without_a_value_exits_three_and_a_bad_file_or_no_prompt_fails(server, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, '
                      '"required": ["a"]}')
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["no"], stop_reason="refusal")))
    out = nacelle("--schema", str(schema), "x", "--root", str(tmp_path), server=server)
    assert out.returncode == 3 and out.stdout == "" and "refusal" in out.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    assert nacelle("--schema", str(bad), "x", server=server).returncode == 1
    assert nacelle("--schema", str(schema), server=server).returncode == 1
