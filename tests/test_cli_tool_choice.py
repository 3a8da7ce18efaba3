"""``--tools LIST``, ``--no-tools``, the ``tools`` setting and the smaller default for
local servers: what reaches the request body, run through ``nacelle.cli.app.main``
against a loopback FakeServer."""

import io
import os
import sys

import pytest

from nacelle.cli import app, run
from nacelle.cli.tool_choice import SMALL, UnknownTool, choose_tools
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream, openrouter_stream

ALL_FILE_TOOLS = sorted(["read_file", "write_file", "edit_file", "list_directory",
                         "find_files", "search_content"])


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith(("NACELLE_", "ANTHROPIC_", "OPENAI_", "OLLAMA_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("NACELLE_CONFIG", os.devnull)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-tools-0123456789")
    monkeypatch.setattr(run, "exit_now", lambda code: code)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))


def sent_tools(server, capsys, tmp_path, *args):
    """The tool names the one request of a run carried (None: no ``tools`` field)."""
    code = app.main(["--root", str(tmp_path), "--no-instructions", *args, "hi"])
    out, err = capsys.readouterr()
    assert code == 0, err
    body = server.requests[-1].json()
    if "tools" not in body:
        return None
    # The agent sends its tools sorted by name (a stable prefix for the cache).
    return sorted(tool.get("name") or tool["function"]["name"] for tool in body["tools"])


def anthropic(server, *args):
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(["ok"])))
    return ("--base-url", server.url, *args)


def ollama(server, *args):
    server.queue("/v1/chat/completions", Reply(chunks=openrouter_stream(["ok"], keepalives=0)))
    return ("--backend", "ollama", "--model", "qwen3", "--base-url", server.url + "/v1", *args)


def test_a_hosted_backend_is_offered_every_file_tool_by_default(server, capsys, tmp_path):
    assert sent_tools(server, capsys, tmp_path, *anthropic(server)) == ALL_FILE_TOOLS


def test_no_tools_sends_no_tools_in_the_request(server, capsys, tmp_path):
    assert sent_tools(server, capsys, tmp_path, *anthropic(server, "--no-tools")) is None
    assert sent_tools(server, capsys, tmp_path, *ollama(server, "--no-tools")) is None


def test_tools_offers_that_subset(server, capsys, tmp_path):
    assert sent_tools(server, capsys, tmp_path,
                      *anthropic(server, "--tools", "search_content, read_file")) == [
        "read_file", "search_content"]


def test_a_local_server_gets_the_small_read_only_set_unless_told(server, capsys, tmp_path):
    assert sent_tools(server, capsys, tmp_path, *ollama(server)) == sorted(SMALL)
    assert sent_tools(server, capsys, tmp_path,
                      *ollama(server, "--tools", ",".join(ALL_FILE_TOOLS))) == ALL_FILE_TOOLS


def test_the_tools_setting_comes_from_the_environment_and_the_flag_wins(
        server, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("NACELLE_TOOLS", "list_directory")
    assert sent_tools(server, capsys, tmp_path, *anthropic(server)) == ["list_directory"]
    assert sent_tools(server, capsys, tmp_path, *anthropic(server, "--tools", "find_files")) \
        == ["find_files"]
    monkeypatch.setenv("NACELLE_TOOLS", "none")
    assert sent_tools(server, capsys, tmp_path, *anthropic(server)) is None


def test_an_unknown_tool_is_a_usage_error_naming_the_tools(server, capsys, tmp_path):
    code = app.main(["--root", str(tmp_path), "--no-instructions", "--base-url", server.url,
                     "--tools", "read_file,list_files", "hi"])
    err = capsys.readouterr().err
    assert code == 2 and server.requests == []
    assert err.startswith("nacelle: error: unknown tool 'list_files' in --tools; this run's "
                          "tools: read_file, write_file, edit_file, list_directory, ")


def test_run_command_in_tools_says_it_needs_bash(server, capsys, tmp_path):
    code = app.main(["--root", str(tmp_path), "--base-url", server.url, "--tools",
                     "run_command", "hi"])
    assert code == 2 and "'run_command' in --tools (run_command needs --bash)" in \
        capsys.readouterr().err


def test_tools_and_no_tools_together_are_refused(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        app.main(["--tools", "read_file", "--no-tools", "hi"])
    assert exit_.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_help_lists_the_tools_flags(capsys):
    with pytest.raises(SystemExit):
        app.main(["--help"])
    out = capsys.readouterr().out
    assert "--tools LIST" in out and "--no-tools" in out


class Named:
    def __init__(self, name):
        self.name = name


def test_choose_tools_keeps_what_it_was_given_untouched():
    given = [Named("read_file"), Named("write_file"), Named("list_directory")]
    names = [tool.name for tool in given]
    assert [t.name for t in choose_tools(given, "", local=True)] == ["read_file",
                                                                     "list_directory"]
    assert choose_tools(given, "", local=False) == given
    assert choose_tools(given, "none", local=False) == []
    assert [t.name for t in choose_tools(given, "write_file,write_file", local=True)] == [
        "write_file"]
    assert [tool.name for tool in given] == names
    with pytest.raises(UnknownTool, match="web_fetch needs --search-url"):
        choose_tools(given, "web_fetch", local=False)
