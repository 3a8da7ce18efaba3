"""The stdio transport against real child processes: servers that cannot start, crash,
print garbage or ignore their closed stdin; stderr forwarded to logging; a minimal
environment; the whole process group gone after close."""

import json
import logging
import os
import re
import sys
import threading
import time

import pytest

import nacelle
from mcp_servers import BAD_SERVER
from nacelle.mcp import MCPError, connect_stdio
from nacelle.mcp.stdio import StdioTransport, decode_line, default_environment, readable_id
from nacelle.tools import ToolContext


def start(*args, **kwargs):
    kwargs.setdefault("timeout", 10)
    return connect_stdio(sys.executable, [BAD_SERVER, *args], **kwargs)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except FileNotFoundError:
        return False


def test_a_command_that_does_not_exist_cannot_start():
    with pytest.raises(MCPError, match=r"cannot start MCP server 'no-such-mcp-server-x': "):
        connect_stdio("no-such-mcp-server-x")


@pytest.mark.parametrize("command, args", [("", ()), (None, ()), ("python", "server.py"),
                                           ("python", ["ok", 3])])
def test_a_malformed_command_is_a_config_error(command, args):
    with pytest.raises(nacelle.ConfigError):
        connect_stdio(command, args)


def test_a_server_that_exits_at_start_fails_quoting_its_exit_code_and_stderr():
    start_time = time.monotonic()
    with pytest.raises(MCPError) as caught:
        start("exit-at-start")
    message = str(caught.value)
    assert "refused the handshake" in message and "(exit code 2)" in message
    assert "missing configuration file" in message
    assert time.monotonic() - start_time < 5


def test_a_server_that_crashes_mid_call_fails_that_call_and_every_later_one_at_once():
    with start() as client:
        tools = {tool.name: tool for tool in client.tools()}
        with pytest.raises(MCPError, match=r"closed its output \(exit code 3\)") as caught:
            tools["crash"].run({}, ToolContext())
        assert "boom: the server fell over" in str(caught.value)
        begin = time.monotonic()
        with pytest.raises(MCPError, match="exit code 3"):
            tools["echo"].run({"text": "x"}, ToolContext())
        assert time.monotonic() - begin < 0.5
        assert "broken" in repr(client)


def test_garbage_on_stdout_fails_the_connection_with_a_preview_of_it():
    with start() as client:
        with pytest.raises(MCPError, match=r"not JSON on stdout: 'Traceback \(most recent"):
            client.call_tool("garbage")
        with pytest.raises(MCPError, match="not JSON on stdout"):
            client.call_tool("echo", {"text": "x"})


def test_server_stderr_is_forwarded_to_logging(caplog):
    with caplog.at_level(logging.INFO, logger="nacelle.mcp.stdio.stderr"):
        with start():
            pass
    lines = [r.getMessage() for r in caplog.records if r.name == "nacelle.mcp.stdio.stderr"]
    assert any(line.endswith("bad_server starting in mode ok") for line in lines)


def test_the_server_gets_a_minimal_environment_plus_the_env_given(monkeypatch):
    monkeypatch.setenv("NACELLE_TEST_SECRET_KEY", "sk-do-not-leak")
    with start(env={"MY_SETTING": "1"}) as client:
        names = json.loads(client.call_tool("environment"))
    assert "NACELLE_TEST_SECRET_KEY" not in names
    assert "MY_SETTING" in names
    assert "PATH" in names
    assert "NACELLE_TEST_SECRET_KEY" not in default_environment()


@pytest.mark.slow
def test_the_server_runs_in_the_directory_given(tmp_path):
    script = tmp_path / "cwd_server.py"
    script.write_text(
        "import json, os, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if m.get('method') == 'initialize':\n"
        "        r = {'protocolVersion': '2025-11-25', 'capabilities': {},\n"
        "             'serverInfo': {'name': os.getcwd(), 'version': '0'}}\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n")
    with connect_stdio(sys.executable, [str(script)], cwd=str(tmp_path), timeout=10) as client:
        assert os.path.samefile(client.server_info["name"], tmp_path)
        assert client.tools() == []  # no tools capability: nothing to ask


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process state from /proc")
def test_close_kills_what_the_server_started_too():
    client = start()
    grandchild = int(client.call_tool("spawn"))
    assert alive(grandchild)
    client.close()
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(grandchild)


@pytest.mark.slow
def test_a_server_that_ignores_its_closed_stdin_is_terminated():
    client = start("linger")
    process = client._transport._process
    begin = time.monotonic()
    client.close()
    assert process.poll() is not None
    assert 1.5 < time.monotonic() - begin < 6  # waited the grace period, then signalled


# -- lines the reader cannot use ---------------------------------------------------------

# Every call below may wait 30 s; each failure must arrive long before that.
PATIENT = 30
PROMPT = 3


def pending_hang(client):
    """Start a call that the server never answers; return a function that waits for
    its outcome and returns (exception, seconds from the start)."""
    outcome = {}

    def call():
        begin = time.monotonic()
        try:
            client.call_tool("hang")
        except Exception as err:  # noqa: BLE001 - the outcome is what the test checks
            outcome["error"] = err
        outcome["seconds"] = time.monotonic() - begin

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not client._pending and time.monotonic() < deadline:
        time.sleep(0.01)

    def result():
        thread.join(PATIENT + 5)
        return outcome.get("error"), outcome.get("seconds")

    return result


@pytest.mark.slow
@pytest.mark.parametrize("line, problem", [
    ("deep-answer", r"JSON the client refuses \(JSON nested deeper than 128 levels\)"),
    ("deep-answer-id-last", r"JSON the client refuses \(JSON nested deeper than 128 levels\)"),
    ("not-utf8-answer", "a line that is not UTF-8"),
])
def test_a_line_the_reader_cannot_parse_fails_the_call_it_answers_at_once(line, problem):
    with start(timeout=PATIENT) as client:
        other = pending_hang(client)
        begin = time.monotonic()
        with pytest.raises(MCPError, match=rf"answered request \d+ with {problem}"):
            client.call_tool("emit", {"line": line})
        assert time.monotonic() - begin < PROMPT
        # The line still named its request, so nothing else is lost.
        assert client.call_tool("echo", {"text": "still here"}) == "still here"
        assert "open" in repr(client)
        client.close()
        error, _ = other()
        assert "was closed" in str(error)


@pytest.mark.slow
@pytest.mark.parametrize("line, problem", [
    ("deep-array", r"wrote JSON the client refuses \(JSON nested deeper than 128 levels\) on "
                   r"stdout"),
    ("junk-bytes", r"wrote a line that is not UTF-8 on stdout"),
    ("number", r"sent a message that is not a JSON object: 42"),
    ("string", r"sent a message that is not a JSON object: a string"),
    ("empty-batch", r"sent a message that is not a JSON object: \[\]"),
    ("batch-of-numbers", r"sent a message that is not a JSON object: 1"),
    ("list-id", r"sent a response whose id is not a string or an integer"),
    ("object-id", r"sent a response whose id is not a string or an integer"),
    ("boolean-id", r"sent a response whose id is not a string or an integer"),
    ("fractional-id", r"sent a response whose id is not a string or an integer"),
    ("null-id-error", r"sent a response whose id is not a string or an integer.*Parse error"),
])
def test_a_line_the_reader_cannot_tie_to_a_request_fails_every_call_at_once(line, problem):
    with start(timeout=PATIENT) as client:
        other = pending_hang(client)
        begin = time.monotonic()
        with pytest.raises(MCPError, match=problem):
            client.call_tool("emit", {"line": line})
        assert time.monotonic() - begin < PROMPT
        error, seconds = other()
        assert isinstance(error, MCPError) and re.search(problem, str(error))
        assert seconds < PROMPT + 1
        begin = time.monotonic()
        with pytest.raises(MCPError, match=problem):
            client.call_tool("echo", {"text": "x"})
        assert time.monotonic() - begin < 0.5
        assert "broken" in repr(client)


def test_a_failure_inside_the_reader_thread_fails_the_session_and_stops_the_server():
    failures = []
    failed = threading.Event()

    def deliver(message, answering=None):
        raise RuntimeError("a bug in whatever handles messages")

    def fail(request_id, error):
        failures.append((request_id, error))
        failed.set()

    transport = StdioTransport(sys.executable, [BAD_SERVER])
    transport.start(deliver, fail)
    try:
        transport.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert failed.wait(PROMPT)
        (request_id, error), = failures
        assert request_id is None and isinstance(error, MCPError)
        assert "RuntimeError: a bug in whatever handles messages" in str(error)
        process = transport._process
        process.wait(PROMPT)  # a server nobody reads any more is stopped
    finally:
        transport.close()


@pytest.mark.parametrize("line, expected", [
    (b'{"jsonrpc":"2.0","id":7,"result":' + b"[" * 5000 + b"]" * 5000 + b"}", 7),
    (b'{"result":' + b"[" * 5000 + b"]" * 5000 + b',"jsonrpc":"2.0","id":"a"}', "a"),
    (b'  {"id" : 12 , "result": {"text": "caf\xe9"}}\r\n', 12),
    (b'{"result":{"id":3,"x":"\\"id\\": 4"},"note":"id","id":5,', 5),  # nested ids skipped
    (b'{"result":{"id":3}}', None),
    (b'{"result":["id", 3]}', None),
    (b'{"id":true,"result":{}}', None),
    (b'{"id":1.5,"result":{}}', None),
    (b'{"id":[1],"result":{}}', None),
    (b'{"id":null,"error":{}}', None),
    (b'{"id":' + b"[" * 5000, None),
    (b'[{"id":1}]', None),
    (b'oops {"id": 3}', None),
    (b"\xff\xfe", None),
    (b"", None),
])
def test_readable_id_reads_only_the_top_level_id_of_a_line_that_would_not_parse(line, expected):
    assert readable_id(line) == expected


@pytest.mark.parametrize("line, problem", [
    (b"[" * 100000 + b"]" * 100000, "JSON the client refuses (JSON nested deeper than 128 "
                                    "levels)"),
    (b'{"jsonrpc":"2.0","id":1,"result":{"x":NaN}}',
     "JSON the client refuses (NaN is not a finite number; JSON has none)"),
    (b'{"text":"\xff"}', "a line that is not UTF-8"),
    (b"Traceback (most recent call last):", "something that is not JSON"),
    (b'\xef\xbb\xbf{"jsonrpc":"2.0"}', "something that is not JSON"),
])
def test_decode_line_names_what_is_wrong_with_a_line(line, problem):
    with pytest.raises(ValueError, match=f"^{re.escape(problem)}$"):
        decode_line(line)


def test_decode_line_reads_one_json_message_whatever_its_line_end():
    assert decode_line(b'{"jsonrpc":"2.0","id":1,"result":{}}\r\n') == {
        "jsonrpc": "2.0", "id": 1, "result": {}}


# -- a server that stops reading -----------------------------------------------------------

BIG = "x" * 2**20  # far more than a pipe holds, so writing it blocks


def stuck_call(client, **options):
    """Send a call too big for the pipe of a server that stopped reading; return a
    function that waits for its outcome and returns the exception it ended with."""
    outcome = {}

    def call():
        try:
            client.request("tools/call", {"name": "echo", "arguments": {"text": BIG}},
                           **options)
        except BaseException as err:  # noqa: BLE001 - the outcome is what the test checks
            outcome["error"] = err

    thread = threading.Thread(target=call, daemon=True)
    thread.start()

    def result(within):
        thread.join(within)
        return None if thread.is_alive() else outcome.get("error")

    return result


@pytest.mark.slow
@pytest.mark.parametrize("event_type", [threading.Event, nacelle.CancelEvent])
def test_a_call_stuck_sending_to_a_server_that_stopped_reading_is_cancelled_at_once(event_type):
    client = start(timeout=PATIENT)
    try:
        assert client.call_tool("deaf") == "not listening any more"
        cancelled = event_type()
        outcome = stuck_call(client, cancelled=cancelled)
        time.sleep(0.3)  # the write has filled the pipe by now
        begin = time.monotonic()
        cancelled.set()
        assert isinstance(outcome(PROMPT), nacelle.Cancelled)
        assert time.monotonic() - begin < PROMPT
    finally:
        client._transport._process.kill()  # nothing left for close() to wait for
        client.close()


@pytest.mark.slow
def test_a_call_stuck_sending_to_a_server_that_stopped_reading_times_out():
    client = start(timeout=PATIENT)
    try:
        client.call_tool("deaf")
        begin = time.monotonic()
        error = stuck_call(client, timeout=0.5)(PROMPT + 1)
        assert isinstance(error, MCPError) and "within 0.5s" in str(error)
        assert time.monotonic() - begin < PROMPT
    finally:
        client._transport._process.kill()
        client.close()


@pytest.mark.slow
def test_closing_a_client_whose_server_stopped_reading_does_not_hang():
    client = start(timeout=PATIENT)
    client.call_tool("deaf")
    stuck_call(client)
    time.sleep(0.3)
    begin = time.monotonic()
    client.close()
    assert client._transport._process.poll() is not None
    assert time.monotonic() - begin < 3 * 2.0 + 3  # the grace periods, then the signals
