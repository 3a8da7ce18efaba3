"""The nacelle command, run as a real process against a loopback FakeServer."""

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from nacelle.cli import Approver
from nacelle.messages import assistant_text, user_text
from nacelle.observe import load
from nacelle.sessions import FileStore
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream
from nacelle.tools import ToolContext

pytestmark = pytest.mark.slow  # every test runs the nacelle command as a process

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
    # A new session has no controlling terminal, so approvals cannot reach the
    # terminal pytest runs in: with stdin piped, every question is a no.
    return subprocess.run([sys.executable, "-m", "nacelle", *args], input=stdin,
                          capture_output=True, text=True, env=environ, timeout=timeout,
                          cwd=cwd, start_new_session=True)


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
    assert "   ok read_file" in out.stderr and out.stdout == "It says 42.\n"
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


def test_a_write_with_no_terminal_to_ask_is_refused_and_the_run_exits_3(server, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "write_file", '{"path": "x.txt", "content": "hi"}')])),
                 Reply(chunks=anthropic_stream(["Understood."])))
    out = nacelle("Write x", "--root", str(tmp_path), server=server)
    assert out.returncode == 3, out.stderr
    assert "Allow write_file" in out.stderr and "no (no terminal to ask; --yes approves)" in out.stderr
    assert out.stderr.rstrip().splitlines()[-1] == (
        "nacelle: refused with no terminal to ask: write_file (toolu_1); --yes approves "
        "such calls, or run on a terminal to answer")
    assert "   refused write_file" in out.stderr
    assert out.stdout == "Understood.\n"
    assert not (tmp_path / "x.txt").exists()


def test_on_a_pipe_the_first_words_are_readable_while_the_model_still_writes(server, tmp_path):
    import select
    import signal

    chunks = anthropic_stream(["First words. ", "the rest."])
    stall = next(i for i, c in enumerate(chunks) if b"the rest." in c)
    server.queue("/v1/messages", Reply(chunks=[
        (c, 60.0 if i == stall else 0.0) for i, c in enumerate(chunks)]))
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("NACELLE_", "ANTHROPIC_", "OPENROUTER_"))}
    environ.update({"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "ANTHROPIC_API_KEY": KEY,
                    "NACELLE_CONFIG": os.devnull, "ANTHROPIC_BASE_URL": server.url})
    proc = subprocess.Popen([sys.executable, "-m", "nacelle", "Say it", "--root", str(tmp_path)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=environ, start_new_session=True)
    try:
        seen, deadline = b"", time.monotonic() + 30
        while b"First words. " not in seen and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 0.5)[0]:
                seen += os.read(proc.stdout.fileno(), 4096)
        assert seen == b"First words. ", (seen, proc.poll())
        assert proc.poll() is None  # the answer is still being written
        proc.send_signal(signal.SIGINT)  # Ctrl-C keeps what was written
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and b"(cancelled)" in err
    assert (seen + rest).decode() == "First words. "


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


# What a hostile model, file or provider might send a terminal: up a line, erase it,
# back to its start (redrawing what was shown), OSC 52 (clipboard), clear screen,
# reset, the 8-bit CSI, a bidi override.
ESCAPES = "\x1b[1A\x1b[2K\r  $ ls -la\x1b]52;c;ZWNobw==\x07\x1b[2J\x1bc\x9b2J\u202e"
SHOWN = "\\x1b[1A\\x1b[2K\\r  $ ls -la\\x1b]52;c;ZWNobw==\\x07\\x1b[2J\\x1bc\\x9b2J\\u202e"
INTERPRETED = set(map(chr, [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0),
                            *range(0x202a, 0x202f), *range(0x2066, 0x206a)]))


def hostile_run(server, tmp_path):
    (tmp_path / "notes.txt").write_text("notes" + ESCAPES + "\n", encoding="utf-8")
    write = json.dumps({"path": "x.txt", "content": ESCAPES}, ensure_ascii=False)
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream(["Looking\x1b", ESCAPES[1:]], tool_calls=[
                     ("toolu_1", "read_file", '{"path": "notes.txt"}'),
                     ("toolu_2", "write_file", write)])),
                 Reply(chunks=anthropic_stream(["Done\x1b", ESCAPES[1:]])))


def test_model_and_tool_text_reaches_the_terminal_only_as_visible_escapes(server, tmp_path):
    hostile_run(server, tmp_path)
    out = nacelle("Look", "--root", str(tmp_path), server=server, env={"NO_COLOR": ""})
    assert out.returncode == 3, out.stderr  # its write was refused: no terminal
    assert not set(out.stdout + out.stderr) & INTERPRETED
    assert out.stdout == "Looking" + SHOWN + "\nDone" + SHOWN + "\n"
    assert "   ok read_file" in out.stderr
    assert "notes\\x1b[1A\\x1b[2K" in out.stderr and "Allow write_file" in out.stderr
    assert not (tmp_path / "x.txt").exists()


def test_jsonl_keeps_the_exact_text_in_escapes_a_terminal_does_not_act_on(server, tmp_path):
    hostile_run(server, tmp_path)
    out = nacelle("Look", "--jsonl", "--root", str(tmp_path), server=server)
    assert out.returncode == 3, out.stderr  # its write was refused: no terminal
    assert not set(out.stdout.replace("\n", "") + out.stderr) & INTERPRETED
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines[-1]["text"] == "Done" + ESCAPES
    read = next(line["tool"] for line in lines
                if line["kind"] == "tool_result" and line["tool"]["name"] == "read_file")
    assert "notes\x1b[1A\x1b[2K" in read["result"]


def test_an_error_quoting_a_providers_body_shows_its_escapes(server, tmp_path):
    server.queue("/v1/messages", Reply.json(
        {"type": "error", "error": {"type": "invalid_request_error", "message": "no" + ESCAPES}},
        status=400))
    out = nacelle("hi", "--root", str(tmp_path), server=server)
    assert out.returncode == 1
    assert "nacelle: error: APIError" in out.stderr and "no\\x1b[1A\\x1b[2K" in out.stderr
    assert not set(out.stderr) & INTERPRETED


def test_an_incomplete_answer_exits_three(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["cut"], stop_reason="max_tokens")))
    out = nacelle("hi", "--root", str(tmp_path), server=server)
    assert out.returncode == 3
    assert "INCOMPLETE ANSWER" in out.stderr and out.stdout == "cut\n"


def test_a_bad_setting_exits_nonzero_naming_it(tmp_path):
    out = nacelle("hi", env={"NACELLE_EFFORT": "extreme"})
    assert out.returncode == 1
    assert "unknown effort 'extreme'" in out.stderr


def test_openrouter_needs_a_model(tmp_path):
    out = nacelle("hi", "--backend", "openrouter")
    assert out.returncode == 1 and "needs a model" in out.stderr








# -- for scripts: stdin, stdout, --json, --jsonl, exit codes ------------------------

RESULT_SCHEMA = json.loads((ROOT / "nacelle" / "cli" / "result.schema.json").read_text())


def look_then_answer(*answer):
    return (Reply(chunks=anthropic_stream(["Let me look first."], tool_calls=[
                ("toolu_1", "list_directory", '{"path": "."}')])),
            Reply(chunks=anthropic_stream(list(answer))))


def test_a_piped_diff_and_a_prompt_print_the_models_text_alone_on_stdout(server, tmp_path):
    # Each turn's text streams to stdout as it comes, so the turn that looked first is
    # there too, on a line of its own; tool lines and totals stay on stderr.
    server.queue("/v1/messages", *look_then_answer("Fix the ", "greeting typo"))
    diff = "diff --git a/greet.py b/greet.py\n-print('helo')\n+print('hello')\n"
    out = nacelle("write a commit message", "--root", str(tmp_path), server=server, stdin=diff)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Let me look first.\nFix the greeting typo\n"
    assert "Let me look first." not in out.stderr and "-> list_directory" in out.stderr
    assert "== done:" in out.stderr and "$" in out.stderr
    sent = server.requests[0].json()["messages"][0]["content"][0]["text"]
    assert sent == "write a commit message\n\n" + diff


def test_piped_stdin_without_a_prompt_is_one_whole_prompt(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Two lines."])))
    out = nacelle("--root", str(tmp_path), server=server, stdin="first line\nsecond line\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Two lines.\n"
    assert len(server.requests) == 1
    assert request_texts(server.requests[0]) == ["first line\nsecond line\n"]


def test_a_dash_reads_the_prompt_from_stdin(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["ok"])))
    out = nacelle("-", "--root", str(tmp_path), server=server, stdin="from stdin")
    assert out.returncode == 0, out.stderr
    assert request_texts(server.requests[0]) == ["from stdin"]


def test_an_empty_prompt_is_a_usage_error(server):
    out = nacelle(server=server, stdin="  \n")
    assert out.returncode == 2 and "the prompt is empty" in out.stderr
    assert server.requests == []


def test_quiet_leaves_only_the_answer(server, tmp_path):
    server.queue("/v1/messages", *look_then_answer("Done."))
    out = nacelle("go", "-q", "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    assert (out.stdout, out.stderr) == ("Let me look first.\nDone.\n", "")


def test_json_prints_one_result_object_valid_against_the_schema(server, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    server.queue("/v1/messages", *look_then_answer("All ", "good."))
    out = nacelle("check", "--json", "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    jsonschema.validate(result, RESULT_SCHEMA)
    assert result["text"] == "All good." and result["stop"] == "end" and result["complete"]
    assert result["turns"] == 2 and result["usage"]["total"] == 74
    assert isinstance(result["cost"], float) and result["cost"] > 0
    [call] = result["tool_calls"]
    assert call["name"] == "list_directory" and call["input"] == {"path": "."}
    assert call["status"] == "ok" and call["error"] is None


def test_json_says_null_for_an_unknown_cost_and_the_summary_says_cost_unknown(server, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Hi."], model="claude-nopriced-9")))
    out = nacelle("hi", "--json", "--model", "claude-nopriced-9", "--root", str(tmp_path),
                  server=server)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    jsonschema.validate(result, RESULT_SCHEMA)
    assert result["cost"] is None
    assert "cost unknown" in out.stderr and "$0.0000" not in out.stderr


def test_an_incomplete_json_result_exits_three(server, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["cut"], stop_reason="max_tokens")))
    out = nacelle("hi", "--json", "--root", str(tmp_path), server=server)
    assert out.returncode == 3
    result = json.loads(out.stdout)
    jsonschema.validate(result, RESULT_SCHEMA)
    assert result["stop"] == "max_tokens" and result["complete"] is False


def test_jsonl_streams_one_event_per_line_and_ends_with_the_result(server, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    server.queue("/v1/messages", *look_then_answer("Fi", "ne."))
    out = nacelle("go", "--jsonl", "-q", "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    kinds = [line["kind"] for line in lines]
    assert kinds == ["text", "tool_call", "turn", "tool_result", "text", "text", "turn",
                     "done"] or kinds.index("tool_call") < kinds.index("tool_result")
    assert kinds[-1] == "done" and kinds.count("done") == 1
    assert [line["text"] for line in lines if line["kind"] == "text"] == [
        "Let me look first.", "Fi", "ne."]
    jsonschema.validate(lines[-1], RESULT_SCHEMA)
    assert lines[-1]["text"] == "Fine." and out.stderr == ""


DEEP = '{"path": ' + "[" * 1000 + "]" * 1000 + "}"


@pytest.mark.parametrize("mode", [(), ("--json",), ("--jsonl",)])
def test_a_tool_input_nested_a_thousand_deep_is_a_failed_call_in_every_output_mode(
        server, tmp_path, mode):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[("toolu_1", "read_file", DEEP)])),
                 Reply(chunks=anthropic_stream(["Sorry."])))
    out = nacelle("Read it", *mode, "--root", str(tmp_path), "--session", "deep",
                  "--record", str(tmp_path / "run.jsonl"), server=server)
    assert out.returncode == 0, out.stderr
    assert "RecursionError" not in out.stderr and "Traceback" not in out.stderr
    assert "nested deeper than 128 levels" in out.stdout + out.stderr
    assert load(tmp_path / "run.jsonl")


def test_a_structured_answer_nested_a_thousand_deep_is_no_value_not_a_crash(server, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {}}, "required": ["a"]}')
    deep = '{"a": ' + "[" * 1000 + "]" * 1000 + "}"
    server.queue("/v1/messages", *[Reply(chunks=anthropic_stream([deep])) for _ in range(3)])
    out = nacelle("--schema", str(schema), "x", "--root", str(tmp_path), server=server)
    assert out.returncode == 3 and out.stdout == "", out.stderr
    assert "Traceback" not in out.stderr


def test_a_schema_file_nested_five_thousand_deep_is_a_one_line_error(server, tmp_path):
    schema = tmp_path / "deep.json"
    schema.write_text('{"type": "object", "x": ' + "[" * 5000 + "]" * 5000 + "}")
    out = nacelle("--schema", str(schema), "x", "--root", str(tmp_path), server=server)
    assert out.returncode == 1 and "nested deeper than" in out.stderr
    assert "Traceback" not in out.stderr and server.requests == []


def test_system_replaces_the_system_prompt(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["ok"])))
    out = nacelle("hi", "--system", "You answer in French.", "--root", str(tmp_path),
                  server=server)
    assert out.returncode == 0, out.stderr
    assert "You answer in French." in json.dumps(server.requests[0].json()["system"])


def test_max_cost_stops_a_run_that_spent_it(server, tmp_path):
    server.queue("/v1/messages", *look_then_answer("never reached"))
    out = nacelle("go", "--max-cost", "0.0000001", "--root", str(tmp_path), server=server)
    assert out.returncode == 3
    assert "budget" in out.stderr and len(server.requests) == 1


def test_max_cost_without_prices_is_a_one_line_error(server, tmp_path):
    out = nacelle("hi", "--max-cost", "1", "--model", "claude-nopriced-9", server=server)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "--max-cost needs prices" in out.stderr
    assert server.requests == []


def test_help_documents_exit_codes_the_environment_and_the_defaults():
    out = nacelle("--help")
    assert out.returncode == 0
    for text in ("exit codes:", "130", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                 "NACELLE_CONFIG", "XDG_DATA_HOME", "defaults:", "--json", "--jsonl",
                 "--max-cost", "--system", "--schema", "--quiet", "sessions", "serve", "models",
                 "batch INPUT.jsonl"):
        assert text in out.stdout, text
    assert nacelle("help").stdout == out.stdout


def test_a_word_close_to_a_subcommand_asks_did_you_mean(server):
    out = nacelle("sesions", server=server)
    assert out.returncode == 2
    assert "did you mean 'sessions'?" in out.stderr and "nacelle -- sesions" in out.stderr
    assert server.requests == []


def test_a_double_dash_forces_a_prompt(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["A demo is..."])),
                 Reply(chunks=anthropic_stream(["Hi."])))
    out = nacelle("--root", str(tmp_path), "--", "demo", server=server)
    assert out.returncode == 0, out.stderr
    assert request_texts(server.requests[0]) == ["demo"]
    out = nacelle("--root", str(tmp_path), "--", "sesions", server=server)
    assert out.returncode == 0 and request_texts(server.requests[1]) == ["sesions"]


def test_a_prompt_that_is_no_command_word_runs(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Hello."])))
    out = nacelle("hello", "--root", str(tmp_path), server=server)
    assert out.returncode == 0 and out.stdout == "Hello.\n"


# -- approvals ---------------------------------------------------------------------

class Tool:
    def __init__(self, name, read_only, open_world=False):
        self.name, self.read_only, self.open_world = name, read_only, open_world


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
    assert nacelle("--schema", str(schema), server=server).returncode == 2


# -- y/n/always/never at the terminal -----------------------------------------------

def questions(stderr):
    return [p for p in stderr.parts if p.startswith("Allow")]


def test_yes_and_no_answer_one_call_each():
    stderr = Recorder()
    approver = Approver([Tool("write_file", False)], stdin=io.StringIO("y\nn\n"), stderr=stderr)
    assert approver("write_file", {"path": "a"}, ToolContext()) is True
    assert approver("write_file", {"path": "b"}, ToolContext()) is False
    assert len(questions(stderr)) == 2
    assert "[y]es/[n]o/[a]lways/ne[v]er" in questions(stderr)[0]


def test_always_approves_later_calls_of_that_tool_without_asking():
    stderr = Recorder()
    tools = [Tool("write_file", False), Tool("edit_file", False)]
    approver = Approver(tools, stdin=io.StringIO("always\nn\n"), stderr=stderr)
    assert approver("write_file", {"path": "a"}, ToolContext()) is True
    assert approver("write_file", {"path": "b"}, ToolContext()) is True
    assert len(questions(stderr)) == 1
    assert approver("edit_file", {"path": "a"}, ToolContext()) is False  # per tool name
    assert len(questions(stderr)) == 2


def test_never_refuses_later_calls_of_that_tool_without_asking():
    stderr = Recorder()
    approver = Approver([Tool("run_command", False)], stdin=io.StringIO("v\n"), stderr=stderr)
    assert approver("run_command", {"command": "ls"}, ToolContext()) is False
    assert approver("run_command", {"command": "pwd"}, ToolContext()) is False
    assert len(questions(stderr)) == 1


def test_end_of_input_counts_as_no():
    stderr = Recorder()
    approver = Approver([Tool("write_file", False)], stdin=io.StringIO(""), stderr=stderr)
    assert approver("write_file", {}, ToolContext()) is False


def test_read_only_tools_that_reach_the_network_still_ask():
    stderr = Recorder()
    approver = Approver([Tool("web_fetch", True, open_world=True), Tool("read_file", True)],
                        stdin=io.StringIO("n\n"), stderr=stderr)
    assert approver("read_file", {"path": "a"}, ToolContext()) is True
    assert approver("web_fetch", {"url": "http://x"}, ToolContext()) is False
    assert [q.split()[1] for q in questions(stderr)] == ["web_fetch"]


def test_a_tool_the_approver_was_not_told_about_asks():
    stderr = Recorder()
    approver = Approver([], stdin=io.StringIO("y\n"), stderr=stderr)
    assert approver("mystery", {}, ToolContext()) is True
    assert len(questions(stderr)) == 1


def two_writes():
    return (Reply(chunks=anthropic_stream([], tool_calls=[
                ("toolu_1", "write_file", '{"path": "a.txt", "content": "1"}')])),
            Reply(chunks=anthropic_stream([], tool_calls=[
                ("toolu_2", "write_file", '{"path": "b.txt", "content": "2"}')])),
            Reply(chunks=anthropic_stream(["Both written."])))




# -- sessions ------------------------------------------------------------------------

def sessions_env(tmp_path):
    return {"NACELLE_SESSIONS_DIR": str(tmp_path / "sessions")}


def request_texts(request):
    return [block.get("text") for m in request.json()["messages"] for block in m["content"]]


def test_a_session_is_saved_and_the_next_run_continues_it(server, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream(["Nice to meet you, Ada."])),
                 Reply(chunks=anthropic_stream(["Your name is Ada."])))
    env = sessions_env(tmp_path)
    first = nacelle("--session", "work", "My name is Ada.", "--root", str(tmp_path),
                    server=server, env=env)
    assert first.returncode == 0, first.stderr
    second = nacelle("--session", "work", "What is my name?", "--root", str(tmp_path),
                     server=server, env=env)
    assert second.returncode == 0, second.stderr
    assert request_texts(server.requests[1])[:3] == [
        "My name is Ada.", "Nice to meet you, Ada.", "What is my name?"]
    saved = FileStore(tmp_path / "sessions").load("work")
    assert [m.text for m in saved][-1] == "Your name is Ada."
    assert len(saved) == 4




def test_an_emoji_split_over_two_deltas_is_shown_and_saved_whole(server, tmp_path):
    high, low, emoji = "\ud83d", "\ude00", "\U0001f600"
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Hi " + high, low + "!"])))
    env = dict(sessions_env(tmp_path), PYTHONIOENCODING="utf-8")
    out = nacelle("--session", "work", "Smile", "--root", str(tmp_path), server=server, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Hi " + emoji + "!\n")
    assert FileStore(tmp_path / "sessions").load("work")[-1].text == "Hi " + emoji + "!"


def test_continue_picks_the_session_saved_last(server, tmp_path):
    store = FileStore(tmp_path / "sessions")
    store.save("older", [user_text("from older"), assistant_text("old answer")])
    store.save("newer", [user_text("from newer"), assistant_text("new answer")])
    now = time.time()
    os.utime(store.path("older"), (now, now))
    os.utime(store.path("newer"), (now - 60, now - 60))  # so "older" is the last saved
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Continued."])))
    out = nacelle("--continue", "go on", "--root", str(tmp_path), server=server,
                  env=sessions_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert request_texts(server.requests[0])[:3] == ["from older", "old answer", "go on"]
    assert [m.text for m in store.load("older")][-1] == "Continued."
    assert len(store.load("newer")) == 2


def test_continue_without_a_saved_session_fails_with_one_line(tmp_path):
    out = nacelle("--continue", "go on", env=sessions_env(tmp_path))
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert "no saved session to continue" in out.stderr


def test_a_corrupt_session_exits_one_and_the_file_is_left_untouched(server, tmp_path):
    store = FileStore(tmp_path / "sessions")
    path = Path(store.path("work"))
    path.write_text("{not json", encoding="utf-8")
    out = nacelle("--session", "work", "hi", "--root", str(tmp_path), server=server,
                  env=sessions_env(tmp_path))
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1
    assert "CorruptSession" in out.stderr and "work" in out.stderr
    assert path.read_text(encoding="utf-8") == "{not json"
    assert server.requests == []


def test_a_session_name_that_leaves_the_directory_is_refused(server, tmp_path):
    out = nacelle("--session", "../x", "hi", "--root", str(tmp_path), server=server,
                  env=sessions_env(tmp_path))
    assert out.returncode == 1
    assert "session name '../x' must be" in out.stderr
    assert not (tmp_path / "sessions").exists() and not (tmp_path / "x.json").exists()
    assert server.requests == []


def test_the_sessions_directory_defaults_under_xdg_data_home(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["ok"])))
    out = nacelle("--session", "s1", "hi", "--root", str(tmp_path), server=server,
                  env={"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "data" / "nacelle" / "sessions" / "s1.json").is_file()


def test_a_paused_run_saves_its_checkpoint_and_says_how_to_resume(monkeypatch, tmp_path, capsys):
    import nacelle
    from nacelle import cli
    from nacelle.cli import run
    from nacelle.testing import ScriptedBackend

    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    def paused_agent(settings, **options):
        backend = ScriptedBackend([nacelle.Message(nacelle.Role.ASSISTANT, (
            nacelle.ToolCall("c1", "lookup", '{"city": "Paris"}'),))])
        agent = nacelle.Agent(backend, "sys", tools=[nacelle.tool(lookup)],
                              approve=lambda *a: nacelle.PAUSE)
        return agent, type("Local", (), {"close": lambda self: None})()

    store = FileStore(tmp_path / "sessions")
    store.save("work", [user_text("before"), assistant_text("earlier")])
    monkeypatch.setattr(run, "build_agent", paused_agent)
    monkeypatch.setattr(run, "exit_now", lambda code: code)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setenv("NACELLE_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.setenv("NACELLE_CONFIG", os.devnull)
    assert cli.main(["--session", "work", "weather?"]) == 3
    err = capsys.readouterr().err
    assert "paused for approval of c1 (lookup)" in err and "nacelle resume work" in err
    assert "   paused lookup" in err
    assert [p.name for p in store.load_checkpoint("work").pending] == ["lookup"]
    assert [m.text for m in store.load("work")] == ["before", "earlier"]


# -- recordings and reports ------------------------------------------------------------

def test_record_writes_a_recording_that_load_reads(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Hello."])))
    run = tmp_path / "run.jsonl"
    out = nacelle("hi", "--record", str(run), "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    kinds = [record["kind"] for record in load(run)]
    assert kinds[0] == "run.start" and kinds[-1] == "run.end"
    assert "request.end" in kinds and "event" in kinds


def test_record_to_a_folder_that_does_not_exist_fails_before_the_run(server, tmp_path):
    out = nacelle("hi", "--record", str(tmp_path / "no" / "run.jsonl"), server=server)
    assert out.returncode == 1 and "--record" in out.stderr
    assert server.requests == []


def recorded(server, tmp_path, text):
    """A recording of a run whose model said ``text``, for the report command."""
    pytest.importorskip("nacelle.report")
    server.queue("/v1/messages", Reply(chunks=anthropic_stream([text])))
    run = tmp_path / "run.jsonl"
    assert nacelle("hi", "--record", str(run), "--root", str(tmp_path),
                   server=server).returncode == 0
    return run


def test_report_writes_an_html_page_beside_the_recording(server, tmp_path):
    run = recorded(server, tmp_path, "Hello from the run.")
    out = nacelle("report", str(run))
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "run.html").read_text(encoding="utf-8")
    assert out.stdout.strip() == str(tmp_path / "run.html")
    assert "<html" in page.lower() and "Hello from the run." in page
    out = nacelle("report", str(run), "-o", str(tmp_path / "other.html"))
    assert out.returncode == 0 and (tmp_path / "other.html").is_file()


def test_report_prints_the_page_s_path_through_the_sanitiser(server, tmp_path):
    run = recorded(server, tmp_path, "Hi.")
    page = tmp_path / "x\x1b[2Jy.html"
    out = nacelle("report", str(run), "-o", str(page))
    assert out.returncode == 0, out.stderr
    assert page.is_file() and "\x1b" not in out.stdout
    assert out.stdout.startswith(str(tmp_path / "x"))


def test_report_of_a_missing_or_malformed_recording_exits_one_with_one_line(tmp_path):
    pytest.importorskip("nacelle.report")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": 1}\n{"kind": 2}\n', encoding="utf-8")
    for path in (tmp_path / "absent.jsonl", bad):
        out = nacelle("report", str(path))
        assert out.returncode == 1
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert out.stderr.startswith("nacelle: error: ")
    assert not (tmp_path / "bad.html").exists()


def test_the_result_schema_ships_as_package_data():
    import configparser

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    shipped = [name.strip() for name in config["options.package_data"]["nacelle.cli"].split(",")]
    assert "result.schema.json" in shipped
    assert RESULT_SCHEMA["type"] == "object" and "tool_calls" in RESULT_SCHEMA["required"]


# -- subcommands ---------------------------------------------------------------------

def test_sessions_lists_shows_and_deletes_what_session_saved(server, tmp_path):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Saved."])))
    env = sessions_env(tmp_path)
    assert nacelle("--session", "work", "remember this", "--root", str(tmp_path),
                   server=server, env=env).returncode == 0
    listed = nacelle("sessions", env=env)
    assert listed.returncode == 0 and listed.stdout.startswith("work\t2 messages\tremember this")
    shown = nacelle("sessions", "show", "work", env=env)
    assert shown.stdout == "[user] remember this\n[assistant] Saved.\n"
    assert nacelle("sessions", "delete", "work", env=env).returncode == 0
    assert FileStore(tmp_path / "sessions").names() == []


def test_help_names_a_subcommand_and_shows_its_options():
    out = nacelle("help", "batch")
    assert out.returncode == 0 and "--workers" in out.stdout and "RESULTS.jsonl" in out.stdout


def test_batch_runs_every_line_into_the_results_file(server, tmp_path):
    server.queue("/v1/messages", *[Reply(chunks=anthropic_stream(["Answer."])) for _ in range(3)])
    prompts = tmp_path / "in.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"q{i}"}) + "\n" for i in range(3)))
    results = tmp_path / "out.jsonl"
    out = nacelle("batch", str(prompts), "-o", str(results), "--workers", "2",
                  "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(lines) == 3
    assert sorted(r.json()["messages"][0]["content"][0]["text"] for r in server.requests) == [
        "q0", "q1", "q2"]
    assert "3 runs, 0 failed" in out.stderr and "$0.0000" not in out.stderr


def test_batch_with_provider_batch_sends_the_prompts_as_one_message_batch(server, tmp_path):
    from nacelle.testing.batches import anthropic_message

    fake = server.batches(lambda endpoint, params: anthropic_message("Answer."), polls=1)
    prompts = tmp_path / "in.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"q{i}"}) + "\n" for i in range(3)))
    results = tmp_path / "out.jsonl"
    out = nacelle("batch", str(prompts), "-o", str(results), "--provider-batch", "--poll",
                  "0.01", "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    assert [len(b.requests) for b in fake.created] == [3]
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["text"] for r in rows if "index" in r) == ["Answer."] * 3
    assert "3 runs, 0 failed" in out.stderr and "streamed)" in out.stderr


def test_batch_of_a_malformed_input_is_a_one_line_error(tmp_path):
    bad = tmp_path / "in.jsonl"
    bad.write_text("not json\n")
    out = nacelle("batch", str(bad), "-o", str(tmp_path / "out.jsonl"))
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "line 1" in out.stderr


def test_batch_into_its_own_input_file_is_refused_and_the_input_kept(tmp_path):
    prompts = tmp_path / "in.jsonl"
    text = json.dumps({"prompt": "q0"}) + "\n" + json.dumps({"prompt": "q1"})
    prompts.write_text(text)
    out = nacelle("batch", str(prompts), "-o", str(prompts))
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "same file" in out.stderr
    assert prompts.read_text() == text


def test_serve_answers_the_page_and_a_run_over_http(server, tmp_path):
    import urllib.error
    import urllib.request

    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Served answer."])))
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("NACELLE_", "ANTHROPIC_", "OPENROUTER_"))}
    environ.update({"PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": KEY, "NACELLE_CONFIG": os.devnull,
                    "ANTHROPIC_BASE_URL": server.url, "XDG_DATA_HOME": str(tmp_path / "data")})
    proc = subprocess.Popen([sys.executable, "-m", "nacelle", "serve", "--port", "0",
                             "--allowed-host", "chat.example", "--root", str(tmp_path)],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environ, start_new_session=True)
    try:
        lines = []
        reader = threading.Thread(target=lambda: lines.append(proc.stderr.readline()), daemon=True)
        reader.start()
        reader.join(30)
        assert lines and "serving on http://" in lines[0], lines
        url = lines[0].split("serving on ")[1].split()[0]
        with urllib.request.urlopen(url, timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
        request = urllib.request.Request(url + "runs", data=json.dumps({"prompt": "hi"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as stream:
            body = stream.read().decode()
        assert "Served answer." in body
        # A write pauses for the page, whose card shows the diff it would make.
        (tmp_path / "notes.txt").write_text("old\n")
        server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Editing."], tool_calls=[
            ("toolu_w", "write_file", json.dumps({"path": "notes.txt", "content": "new\n"}))])))
        request = urllib.request.Request(url + "runs", data=json.dumps({"prompt": "edit"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as stream:
            events = [json.loads(line[6:]) for line in stream.read().decode().splitlines()
                      if line.startswith("data: ")]
        paused = [e for e in events if e["kind"] == "tool_result" and e["paused"]]
        assert paused and paused[0]["preview"].splitlines()[2:] == ["@@ -1 +1 @@", "-old", "+new"]
        assert (tmp_path / "notes.txt").read_text() == "old\n"
        for host, status in (("chat.example", 200), ("evil.example", 400)):
            asked = urllib.request.Request(url, headers={"Host": host})
            try:
                with urllib.request.urlopen(asked, timeout=30) as page:
                    assert (host, page.status) == (host, status)
            except urllib.error.HTTPError as refused:
                assert (host, refused.code) == (host, status)
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()


def test_serve_without_a_key_says_so_in_plain_words_and_does_not_start(tmp_path):
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("NACELLE_", "ANTHROPIC_", "OPENROUTER_"))}
    environ.update({"PYTHONPATH": str(ROOT), "NACELLE_CONFIG": os.devnull,
                    "XDG_DATA_HOME": str(tmp_path / "data")})
    for extra, variable in (((), "ANTHROPIC_API_KEY"),
                            (("--backend", "openrouter", "--model", "m"), "OPENROUTER_API_KEY")):
        out = subprocess.run([sys.executable, "-m", "nacelle", "serve", "--port", "0",
                              "--root", str(tmp_path), *extra], stdin=subprocess.DEVNULL,
                             env=environ, capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and out.stdout == ""
        assert f"{variable} is not set" in out.stderr and f"export {variable}=" in out.stderr
        assert "serving on" not in out.stderr
        # Words for the person at the command, not the library's hint to a programmer.
        assert "api_key=" not in out.stderr and "Backend" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "nacelle", "serve", "--port", "0"],
                         env={**environ, "ANTHROPIC_API_KEY": "  "}, capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 1 and "ANTHROPIC_API_KEY is not set" in out.stderr


def test_serve_module_factory_serves_that_factorys_agent_as_the_readme_says(tmp_path):
    import urllib.request

    (tmp_path / "myapp.py").write_text(textwrap.dedent("""
        import nacelle
        from nacelle.testing import ScriptedBackend

        def make_agent():
            return nacelle.Agent(ScriptedBackend(["Hello from myapp."]), "Be brief.")
    """))
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("NACELLE_", "ANTHROPIC_", "OPENROUTER_"))}
    environ.update({"PYTHONPATH": str(ROOT), "NACELLE_CONFIG": os.devnull,
                    "XDG_DATA_HOME": str(tmp_path / "data")})
    for bad, words in (("myapp", "MODULE:FACTORY"), ("nosuchmodule:make", "cannot import"),
                       ("myapp:nothing", "no 'nothing'"), ("myapp:make_agent --yes", "--yes")):
        out = subprocess.run([sys.executable, "-m", "nacelle", "serve", *bad.split(), "--port", "0"],
                             cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and words in out.stderr, (bad, out.stderr)
    proc = subprocess.Popen([sys.executable, "-m", "nacelle", "serve", "myapp:make_agent",
                             "--port", "0"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environ, start_new_session=True)
    try:
        lines = []
        reader = threading.Thread(target=lambda: lines.append(proc.stderr.readline()), daemon=True)
        reader.start()
        reader.join(30)
        assert lines and "serving on http://" in lines[0], lines
        url = lines[0].split("serving on ")[1].split()[0]
        request = urllib.request.Request(url + "runs", data=json.dumps({"prompt": "hi"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as stream:
            assert "Hello from myapp." in stream.read().decode()
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()


def test_version_names_the_distribution_and_the_import():
    import configparser

    from nacelle import __version__

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    name = config["metadata"]["name"]
    assert name == "nacelle-sdk"
    out = nacelle("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"{name} {__version__} (import nacelle)"
    assert "nacelle = nacelle.cli:main" in config["options.entry_points"]["console_scripts"]


def test_models_lists_the_backends_models_from_its_endpoint(server, tmp_path):
    server.queue("/v1/models", Reply.json({"data": [{"id": "claude-x-1", "display_name": "X"}],
                                           "has_more": False}))
    out = nacelle("models", server=server, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "claude-x-1\tX\n"
    assert list((tmp_path / "cache" / "nacelle").glob("models-anthropic-*.json"))


def test_the_librarys_warnings_reach_stderr_through_the_sanitiser():
    code = ("import logging, sys; from nacelle.cli.terminal import warnings_to_stderr; "
            "warnings_to_stderr(); warnings_to_stderr(); "
            "logging.getLogger('nacelle.mcp.client').warning('server said %s', sys.argv[1])")
    out = subprocess.run([sys.executable, "-c", code, "no" + ESCAPES], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert out.stderr == "server said no" + SHOWN + "\n"


# -- skills, memory and instructions ---------------------------------------------------

def test_skills_go_in_the_system_prompt_and_the_skill_tool_reads_a_body(server, tmp_path):
    folder = tmp_path / "skills" / "tea"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: tea\ndescription: Brew tea.\n---\n"
                                     "Steep for three minutes.\n")
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", "skill", '{"name": "tea"}')])),
                 Reply(chunks=anthropic_stream(["Three minutes."])))
    out = nacelle("How long?", "--root", str(tmp_path), "--skills", str(tmp_path / "skills"),
                  server=server)
    assert out.returncode == 0, out.stderr
    first = server.requests[0].json()
    assert "- tea: Brew tea." in json.dumps(first["system"])
    assert "skill" in [t["name"] for t in first["tools"]]
    assert "Steep for three minutes." in json.dumps(server.requests[1].json()["messages"])


def test_a_bad_skill_folder_is_a_one_line_error(tmp_path):
    out = nacelle("hi", "--skills", str(tmp_path / "missing"))
    assert out.returncode == 1
    assert "is not a folder" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_memory_is_the_native_memory_tool_and_its_writes_land_in_the_folder(server, tmp_path):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[(
                     "toolu_1", "memory",
                     '{"command": "create", "path": "/memories/me.md", "file_text": "tea"}')])),
                 Reply(chunks=anthropic_stream(["Noted."])))
    out = nacelle("Remember: tea", "--root", str(tmp_path), "--memory", str(tmp_path / "mem"),
                  "--yes", server=server)
    assert out.returncode == 0, out.stderr
    assert {"type": "memory_20250818", "name": "memory"} in server.requests[0].json()["tools"]
    assert (tmp_path / "mem" / "me.md").read_text() == "tea"


def test_agents_md_layers_follow_the_system_prompt_unless_no_instructions(server, tmp_path):
    config = tmp_path / "xdg" / "nacelle"
    config.mkdir(parents=True)
    (config / "AGENTS.md").write_text("User rule: be brief.")
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "AGENTS.md").write_text("Repo rule: use tabs.")
    (repo / "src" / "CLAUDE.md").write_text("Src rule: no globals.")
    server.queue("/v1/messages", *[Reply(chunks=anthropic_stream(["ok"])) for _ in range(2)])
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    out = nacelle("hi", "--root", str(repo / "src"), server=server, env=env)
    assert out.returncode == 0, out.stderr
    system = json.dumps(server.requests[0].json()["system"])
    assert system.index("User rule") < system.index("Repo rule") < system.index("Src rule")
    out = nacelle("hi", "--root", str(repo / "src"), "--no-instructions", server=server, env=env)
    assert out.returncode == 0, out.stderr
    assert "rule" not in json.dumps(server.requests[1].json()["system"])


def test_help_lists_the_skills_memory_and_instructions_flags():
    out = nacelle("--help")
    assert out.returncode == 0
    for flag in ("--skills DIR", "--memory DIR", "--no-instructions"):
        assert flag in out.stdout
