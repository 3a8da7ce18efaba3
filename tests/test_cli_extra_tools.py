"""``nacelle --mcp`` and ``nacelle --functions``: the real command against a loopback
FakeServer, with a real MCP server — the official SDK's over stdio
(tests/mcp_servers/sdk_server.py) and nacelle's own served over Streamable HTTP on
loopback — and a real Python file of functions; the scripted model calls a tool and
its result is read back from the next request."""

import json
import re
import sys
import textwrap
from pathlib import Path
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

from nacelle import tool
from nacelle.cli.extra_tools import load_functions, shown
from nacelle.mcp.server import wsgi_app
from nacelle.settings import SettingsError
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

from mcp_servers import BAD_SERVER, SDK_SERVER, needs_sdk
from test_cli import nacelle

pytestmark = pytest.mark.slow  # the command as a process, with MCP servers


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@tool
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper() + "!"


@tool(name="read_file")
def remote_read(path: str) -> str:
    """Read a file on the server (a name the CLI's own tools have)."""
    return f"the server's {path}"


class _Threaded(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def mcp_url():
    """nacelle's own MCP server (``shout``, ``read_file``) on 127.0.0.1, at /mcp."""
    httpd = make_server("127.0.0.1", 0, wsgi_app([shout, remote_read], name="shouter",
                                                 keepalive=1.0),
                        server_class=_Threaded, handler_class=_Quiet)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/mcp"
    httpd.shutdown()
    httpd.server_close()


def call_then_answer(server, name, arguments, answer="Done."):
    server.queue("/v1/messages",
                 Reply(chunks=anthropic_stream([], tool_calls=[
                     ("toolu_1", name, json.dumps(arguments))])),
                 Reply(chunks=anthropic_stream([answer])))


def offered(server):
    return [t["name"] for t in server.requests[0].json().get("tools", [])]


def tool_result(server):
    """The tool_result block the second request sends back."""
    blocks = server.requests[1].json()["messages"][-1]["content"]
    return next(b for b in blocks if b["type"] == "tool_result")


@needs_sdk
def test_an_mcp_server_over_stdio_gives_the_model_its_tools(server, tmp_path):
    call_then_answer(server, "echo", {"text": "over stdio"}, "It echoed.")
    out = nacelle("Echo it", "--mcp", f"{sys.executable} {SDK_SERVER}", "--yes",
                  "--root", str(tmp_path), server=server, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "It echoed.\n"
    assert {"echo", "add", "read_file"} <= set(offered(server))
    assert "over stdio" in json.dumps(tool_result(server)["content"])


@needs_sdk
def test_an_mcp_tool_asks_even_when_the_server_says_it_only_reads(server, tmp_path):
    call_then_answer(server, "add", {"a": 2, "b": 3}, "Could not add.")
    out = nacelle("Add", "--mcp", f"{sys.executable} {SDK_SERVER}", "--root", str(tmp_path),
                  server=server, timeout=120)
    assert out.returncode == 3, out.stderr  # refused for want of a terminal
    assert "Allow add" in out.stderr and "   refused add" in out.stderr
    assert tool_result(server).get("is_error") is True


def test_an_mcp_server_over_streamable_http_gives_the_model_its_tools(server, mcp_url, tmp_path):
    call_then_answer(server, "shout", {"text": "hello"}, "It shouted.")
    out = nacelle("Shout", "--mcp", mcp_url, "--yes", "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    assert "shout" in offered(server)
    assert "HELLO!" in json.dumps(tool_result(server)["content"])


def test_an_mcp_tool_whose_name_is_taken_is_offered_as_mcp__name(server, mcp_url, tmp_path):
    (tmp_path / "notes.txt").write_text("local notes\n", encoding="utf-8")
    call_then_answer(server, "mcp__read_file", {"path": "notes.txt"}, "Read remotely.")
    out = nacelle("Read", "--mcp", mcp_url, "--mcp", mcp_url, "--yes", "--root", str(tmp_path),
                  server=server)
    assert out.returncode == 0, out.stderr
    names = offered(server)
    assert names.count("read_file") == 1  # the CLI's own
    assert {"mcp__read_file", "mcp__shout", "mcp2__read_file"} <= set(names)
    assert "the server's notes.txt" in json.dumps(tool_result(server)["content"])


def test_an_mcp_server_that_exits_is_one_line_naming_it(server, tmp_path):
    command = f"{sys.executable} {BAD_SERVER} exit-at-start"
    out = nacelle("Hi", "--mcp", command, "--root", str(tmp_path), server=server, timeout=120)
    assert out.returncode == 1
    # The library's warning (the server's stderr) may come first; the error is the
    # last line, whole, and says why.
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"nacelle: error: SettingsError: --mcp {command}: the server did "
                           "not connect"), out.stderr
    assert "missing configuration file" in last
    assert server.requests == []


def test_an_mcp_url_nobody_serves_is_one_line_without_its_secrets(server, tmp_path):
    from servers import free_port

    url = f"http://user:hunter2@127.0.0.1:{free_port()}/mcp?token=s3cret"
    out = nacelle("Hi", "--mcp", url, "--root", str(tmp_path), server=server)
    assert out.returncode == 1
    assert "the server did not connect" in out.stderr
    assert "hunter2" not in out.stderr and "s3cret" not in out.stderr
    assert shown(url).startswith("http://127.0.0.1:") and shown(url).endswith("/mcp")


FUNCTIONS = '''\
"""Tools for counting."""
from os.path import join  # imported: not a tool

import nacelle


def word_count(text: str) -> int:
    """How many words the text has."""
    return len(text.split())


@nacelle.tool(read_only=True, open_world=False)
def letters(text: str) -> int:
    """How many letters the text has."""
    return sum(c.isalpha() for c in text)


def _helper() -> None:
    pass
'''


def test_a_functions_file_gives_the_model_its_public_functions(server, tmp_path):
    (tmp_path / "counting.py").write_text(FUNCTIONS, encoding="utf-8")
    call_then_answer(server, "word_count", {"text": "one two three"}, "Three words.")
    out = nacelle("Count", "--functions", str(tmp_path / "counting.py"), "--yes",
                  "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    names = offered(server)
    assert "word_count" in names and "letters" in names
    assert "join" not in names and "_helper" not in names
    spec = next(t for t in server.requests[0].json()["tools"] if t["name"] == "word_count")
    assert spec["description"] == "How many words the text has."
    assert tool_result(server)["content"] in ("3", [{"type": "text", "text": "3"}])


def test_functions_is_repeatable_and_a_name_the_cli_has_is_one_line_naming_it(
        server, tmp_path):
    (tmp_path / "counting.py").write_text(FUNCTIONS, encoding="utf-8")
    (tmp_path / "more.py").write_text(
        'def shout(text: str) -> str:\n    """The text in capitals."""\n'
        '    return text.upper()\n', encoding="utf-8")
    call_then_answer(server, "shout", {"text": "hi"}, "Shouted.")
    out = nacelle("Shout", "--functions", str(tmp_path / "counting.py"), "--functions",
                  str(tmp_path / "more.py"), "--yes", "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    assert {"word_count", "letters", "shout", "read_file"} <= set(offered(server))
    assert "HI" in json.dumps(tool_result(server)["content"])
    (tmp_path / "clash.py").write_text(
        'def read_file(path: str) -> str:\n    """Not the CLI\'s."""\n    return path\n',
        encoding="utf-8")
    out = nacelle("Hi", "--functions", str(tmp_path / "clash.py"), "--root", str(tmp_path),
                  server=server)
    assert out.returncode == 1 and len(server.requests) == 2  # no request for this run
    assert out.stderr == ("nacelle: error: --functions: a tool is already named 'read_file' "
                          "(one of the command's own, or an earlier file's or server's); "
                          "rename the function, or leave the other tool out with --tools\n")


def test_a_function_call_asks_even_when_the_file_says_it_only_reads(server, tmp_path):
    (tmp_path / "counting.py").write_text(FUNCTIONS, encoding="utf-8")
    call_then_answer(server, "letters", {"text": "abc"}, "Not allowed.")
    out = nacelle("Count", "--functions", str(tmp_path / "counting.py"),
                  "--root", str(tmp_path), server=server)
    assert out.returncode == 3, out.stderr  # refused for want of a terminal
    assert "Allow letters" in out.stderr and "   refused letters" in out.stderr


def test_the_readme_functions_file_works_as_shown(server, tmp_path):
    readme = (Path(__file__).resolve().parent.parent / "README.rst").read_text(encoding="utf-8")
    block = readme.split("with ``tools.py``:\n\n.. code-block:: python\n\n", 1)[1]
    block = block.split("\nBoth are", 1)[0]
    (tmp_path / "tools.py").write_text(textwrap.dedent(block), encoding="utf-8")
    call_then_answer(server, "days_until", {"day": "2999-01-01"}, "Many days.")
    out = nacelle("how many days until 2999-01-01?", "--functions", str(tmp_path / "tools.py"),
                  "--yes", "--root", str(tmp_path), server=server)
    assert out.returncode == 0, out.stderr
    result = tool_result(server)["content"]
    assert int(result if isinstance(result, str) else result[0]["text"]) > 300_000


def test_a_functions_file_that_raises_is_one_line_naming_the_file_and_line(server, tmp_path):
    (tmp_path / "bad.py").write_text("x = 1\n\nraise RuntimeError('no config')\n",
                                     encoding="utf-8")
    out = nacelle("Hi", "--functions", str(tmp_path / "bad.py"), "--root", str(tmp_path),
                  server=server)
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert f"--functions {tmp_path / 'bad.py'}, line 3: RuntimeError: no config" in out.stderr
    assert server.requests == []


def test_a_functions_file_with_a_syntax_error_names_its_line(tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"broken.py, line 1: SyntaxError"):
        load_functions(str(tmp_path / "broken.py"))


def test_a_missing_functions_file_or_one_without_functions_is_refused(tmp_path):
    with pytest.raises(SettingsError, match="no such file"):
        load_functions(str(tmp_path / "absent.py"))
    (tmp_path / "empty.py").write_text("VALUE = 1\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="defines no public functions"):
        load_functions(str(tmp_path / "empty.py"))


def test_a_functions_file_runs_under_a_private_name_and_its_claims_are_dropped(tmp_path):
    (tmp_path / "counting.py").write_text(FUNCTIONS, encoding="utf-8")
    tools = {t.name: t for t in load_functions(str(tmp_path / "counting.py"))}
    assert set(tools) == {"word_count", "letters"}
    assert tools["letters"].read_only is False and tools["letters"].open_world is True
    assert "counting" not in sys.modules
    assert tools["word_count"].fn.__module__.startswith("_nacelle_functions_")
    assert tools["word_count"]("a b") == 2


def test_the_help_lists_the_three_flags():
    out = nacelle("--help")
    assert out.returncode == 0
    # Python 3.13's argparse names a short option's value once ("-a, --attach FILE");
    # earlier versions after each spelling ("-a FILE, --attach FILE").
    assert re.search(r"-a( FILE)?, --attach FILE", out.stdout), out.stdout
    for flag in ("--mcp COMMAND_OR_URL", "--functions FILE.py"):
        assert flag in out.stdout, flag
    out = nacelle("resume", "--help")
    assert "--mcp COMMAND_OR_URL" in out.stdout and "--functions FILE.py" in out.stdout



def test_a_paused_function_call_runs_when_resume_is_given_the_same_file(server, tmp_path):
    (tmp_path / "counting.py").write_text(FUNCTIONS, encoding="utf-8")
    env = {"NACELLE_SESSIONS_DIR": str(tmp_path / "sessions")}
    server.queue("/v1/messages", Reply(chunks=anthropic_stream([], tool_calls=[
        ("toolu_1", "word_count", '{"text": "a b c d"}')])))
    functions = ("--functions", str(tmp_path / "counting.py"))
    out = nacelle("--session", "job", "--pause", "Count", *functions, "--root", str(tmp_path),
                  server=server, env=env)
    assert out.returncode == 3, out.stderr
    assert "paused for approval of toolu_1 (word_count)" in out.stderr
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["Four words."])))
    resumed = nacelle("resume", "job", "--approve", "all", *functions, "--root", str(tmp_path),
                      server=server, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "Four words.\n"
    assert tool_result(server)["content"] in ("4", [{"type": "text", "text": "4"}])
