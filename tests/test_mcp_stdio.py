"""The stdio transport against real child processes: servers that cannot start, crash,
print garbage or ignore their closed stdin; stderr forwarded to logging; a minimal
environment; the whole process group gone after close."""

import json
import logging
import os
import sys
import time

import pytest

import nacelle
from mcp_servers import BAD_SERVER
from nacelle.mcp import MCPError, connect_stdio
from nacelle.mcp_stdio import default_environment
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
    with caplog.at_level(logging.INFO, logger="nacelle.mcp_stdio.stderr"):
        with start():
            pass
    lines = [r.getMessage() for r in caplog.records if r.name == "nacelle.mcp_stdio.stderr"]
    assert any(line.endswith("bad_server starting in mode ok") for line in lines)


def test_the_server_gets_a_minimal_environment_plus_the_env_given(monkeypatch):
    monkeypatch.setenv("NACELLE_TEST_SECRET_KEY", "sk-do-not-leak")
    with start(env={"MY_SETTING": "1"}) as client:
        names = json.loads(client.call_tool("environment"))
    assert "NACELLE_TEST_SECRET_KEY" not in names
    assert "MY_SETTING" in names
    assert "PATH" in names
    assert "NACELLE_TEST_SECRET_KEY" not in default_environment()


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


def test_a_server_that_ignores_its_closed_stdin_is_terminated():
    client = start("linger")
    process = client._transport._process
    begin = time.monotonic()
    client.close()
    assert process.poll() is not None
    assert 1.5 < time.monotonic() - begin < 6  # waited the grace period, then signalled
