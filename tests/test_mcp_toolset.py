"""MCP tools as nacelle tools: live tool lists that follow the server on both protocol
generations, a removed tool's clear failure, the tools an Agent sees run after run,
the resource tools, and a server's input schema checked as data (nothing fetched,
bounded regex work) — against the official SDK's server (Python 3.10+), the
hand-written ``bad_server.py`` and a recording stand-in."""

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import nacelle
from mcp_servers import BAD_SERVER, SDK_SERVER, needs_sdk
from nacelle.mcp import LiveTools, MCPError, MCPTool, connect_stdio
from nacelle.mcp.toolset import tool_name
from nacelle.testing import ScriptedBackend
from nacelle.tools import ToolContext

pytestmark = pytest.mark.slow  # the official SDK's server, started per generation
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=[None, "2025-11-25"], ids=["2026-07-28", "2025-11-25"])
def sdk(request):
    if needs_sdk.args[0]:
        pytest.skip(needs_sdk.kwargs["reason"])
    with connect_stdio(sys.executable, [SDK_SERVER], timeout=20,
                       protocol_version=request.param) as client:
        yield client


def names(tools):
    return {tool.name for tool in tools}


def wait_for(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def calling(*calls):
    return nacelle.Message(nacelle.Role.ASSISTANT, tuple(
        nacelle.ToolCall(f"call_{i}", name, json.dumps(arguments))
        for i, (name, arguments) in enumerate(calls)))


def results(events):
    return {e.tool.id: e.tool for e in events if e.kind is nacelle.Kind.TOOL_RESULT}


def test_server_names_become_names_every_model_api_accepts():
    assert tool_name("dotted.name") == "dotted_name"
    assert tool_name("x" * 80) == "x" * 64
    assert tool_name("") == "_"


@needs_sdk
def test_a_live_tool_list_follows_tools_added_and_removed_on_either_generation(sdk):
    live = sdk.tools(live=True)
    assert isinstance(live, LiveTools) and "flip" not in names(live)
    snapshot = sdk.tools()
    sdk.call_tool("grow", {"name": "flip"})
    assert wait_for(lambda: "flip" in names(live))
    assert "flip" not in names(snapshot)  # a list is a snapshot
    sdk.call_tool("shrink", {"name": "flip"})
    assert wait_for(lambda: "flip" not in names(live))
    assert len(live) == len(list(live))


@needs_sdk
def test_a_removed_tool_called_by_the_model_gets_a_failed_result_saying_so(sdk):
    sdk.call_tool("grow", {"name": "gone"})
    assert wait_for(lambda: "gone" in names(sdk.tools(live=True)))
    # The list of this moment, so the model may still call a tool the server removed.
    agent = nacelle.Agent(ScriptedBackend([calling(("gone", {"text": "abc"})),
                                           calling(("gone", {"text": "abc"})),
                                           nacelle.assistant_text("done")]),
                          "Use the tools.", tools=sdk.tools())
    first = agent.stream([nacelle.user_text("go")])
    events = []
    for event in first:
        events.append(event)
        if event.kind is nacelle.Kind.TOOL_RESULT and "gone" in names(sdk.tools()):
            sdk.call_tool("shrink", {"name": "gone"})  # after the first call, before the second
            assert wait_for(lambda: "gone" not in names(sdk.tools(live=True)))
    outcome = [e.tool for e in events if e.kind is nacelle.Kind.TOOL_RESULT]
    assert (outcome[0].result, outcome[0].error) == ("cba", None)
    assert "no longer offers the tool 'gone': its tool list changed" in outcome[1].error
    assert events[-1].stop is nacelle.Stop.END


@needs_sdk
def test_a_tool_added_in_one_run_is_called_in_the_next_agent_run(sdk):
    live = sdk.tools(live=True)
    backend = ScriptedBackend([calling(("grow", {"name": "later"})), nacelle.assistant_text("ok")])
    first = nacelle.Agent(backend, "Use the tools.", tools=live).run([nacelle.user_text("grow")])
    assert wait_for(lambda: "later" in names(live))
    # An Agent copies its tools when made; a new one (an Agent is only configuration)
    # sees the list as it is now.
    backend = ScriptedBackend([calling(("later", {"text": "ab"})), nacelle.assistant_text("ok")])
    second = nacelle.Agent(backend, "Use the tools.", tools=live).stream(first.messages)
    outcome = results(list(second))
    assert (outcome["call_0"].result, outcome["call_0"].error) == ("ba", None)
    assert "later" in [t.name for t in backend.requests[0].tools]


@needs_sdk
@pytest.mark.parametrize("given", ["in a list", "bare"])
def test_a_tool_added_mid_run_is_offered_at_the_next_turn_of_the_same_run(sdk, given):
    live = sdk.tools(live=True)
    backend = ScriptedBackend([calling(("grow", {"name": "midrun"})),
                               calling(("midrun", {"text": "ab"})),
                               nacelle.assistant_text("ok")])
    # The toolset itself, not its tools of this moment: the loop asks it each turn.
    events = list(nacelle.Agent(backend, "Use the tools.",
                                tools=[live] if given == "in a list" else live)
                  .stream([nacelle.user_text("go")]))
    outcome = [e.tool for e in events if e.kind is nacelle.Kind.TOOL_RESULT]
    assert [(r.name, r.result, r.error) for r in outcome] == [
        ("grow", "added midrun", None), ("midrun", "ba", None)]
    assert "midrun" in [t.name for t in backend.requests[1].tools]


def test_a_live_list_of_a_2025_server_is_refreshed_after_list_changed():
    # bad_server announces a change during the first tools/list.
    with connect_stdio(sys.executable, [BAD_SERVER], timeout=10) as client:
        live = client.tools(prefix="bad", live=True)
        assert "bad__echo" in names(live)
        assert all(isinstance(tool, MCPTool) for tool in live)
        assert repr(live).startswith("<LiveTools from")


@needs_sdk
def test_resource_tools_let_the_model_list_and_read_resources(sdk):
    listing, reading = sdk.resource_tools(prefix="docs")
    assert (listing.name, reading.name) == ("docs__list_resources", "docs__read_resource")
    assert listing.run({}, ToolContext()).splitlines()[0] == (
        "note://readme readme (text/plain): A short note.")
    assert reading.run({"uri": "note://readme"}, ToolContext()) == "Read me first."
    [image] = reading.run({"uri": "image://dot"}, ToolContext())
    assert isinstance(image, nacelle.Image) and image.media_type == "image/png"
    [document] = reading.run({"uri": "doc://report"}, ToolContext())
    assert isinstance(document, nacelle.Document) and document.media_type == "application/pdf"
    assert listing.read_only and not listing.destructive
    nacelle.tools_by_name([listing, reading])  # valid nacelle tools


def test_resource_tools_refuse_a_bad_prefix():
    with connect_stdio(sys.executable, [BAD_SERVER], timeout=10) as client:
        with pytest.raises(nacelle.ConfigError, match="prefix"):
            client.resource_tools(prefix="no spaces")
        assert client.resources() == []  # the server declares no resources


def test_a_removed_tool_fails_before_anything_is_sent(monkeypatch):
    class Client:
        name = "fake"

        def offers(self, remote):
            return False

        def call_tool_parts(self, *args, **kwargs):
            raise AssertionError("must not be called")

    tool = MCPTool(Client(), {"name": "x", "inputSchema": {"type": "object"}}, "x")
    with pytest.raises(MCPError, match="no longer offers the tool 'x'"):
        tool.run({}, ToolContext())


class Recording:
    """A server-side of one MCP tool that records the calls that reach it."""

    name = "fake"

    def __init__(self):
        self.calls = []

    def offers(self, remote):
        return True

    def call_tool_parts(self, name, arguments=None, **kwargs):
        self.calls.append(arguments)
        return [nacelle.Text("done")]


def run_with_tool(schema, arguments):
    client = Recording()
    tool = MCPTool(client, {"name": "x", "inputSchema": schema}, "x")
    agent = nacelle.Agent(ScriptedBackend([calling(("x", arguments)),
                                           nacelle.assistant_text("ok")]),
                          "Use the tool.", tools=[tool])
    events = list(agent.stream([nacelle.user_text("go")]))
    calls = [e for e in events if e.kind is nacelle.Kind.TOOL_CALL]
    return client, calls, results(events)


def test_a_server_schema_with_a_remote_ref_fails_the_call_and_fetches_nothing():
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/defs.json"
        client, calls, done = run_with_tool(
            {"type": "object", "properties": {"q": {"$ref": url}}}, {"q": "x"})
    finally:
        server.shutdown()
        server.server_close()
    assert hits == [] and client.calls == []
    assert len(calls) == 1 and set(done) == {"call_0"}
    assert done["call_0"].error.startswith("x cannot be called: the schema's $ref")
    assert "defs.json" in done["call_0"].error


def test_a_server_pattern_that_backtracks_is_left_to_the_server_and_the_run_goes_on():
    script = (
        "import json, sys, time\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import test_mcp_toolset as t\n"
        "started = time.monotonic()\n"
        "client, calls, done = t.run_with_tool(\n"
        "    {'type': 'object', 'properties': {'s': {'type': 'string', 'pattern': '^(a+)+$'}}},\n"
        "    {'s': 'a' * 40 + '!'})\n"
        "print(json.dumps([time.monotonic() - started, client.calls, done['call_0'].error]))\n")
    # In a child: a match that backtracks holds the GIL, so this process could not time it out.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)],
                           capture_output=True, text=True, timeout=60, env=env)
    assert child.returncode == 0, child.stderr
    seconds, calls, error = json.loads(child.stdout)
    assert seconds < 5 and calls == [{"s": "a" * 40 + "!"}] and error is None
