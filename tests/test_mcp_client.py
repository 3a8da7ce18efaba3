"""The MCP client: era negotiation and the handshake, tools/list pages, tools/call
results and failures, list_changed, timeouts and cancellation, resources, prompts,
structured results, elicitation and progress — against real server processes: the
hand-written ``bad_server.py`` (any Python) and a server written with the official
MCP SDK (Python 3.10+ with ``mcp`` installed; skipped with a reason elsewhere), the
latter on both protocol generations: 2026-07-28 (negotiated) and 2025-11-25 (pinned)."""

import base64
import json
import logging
import pickle
import sys
import threading
import time

import pytest

import nacelle
from mcp_servers import BAD_SERVER, SDK_SERVER, ThreadPeak, needs_sdk
from nacelle.mcp import MCPClient, MCPError, MCPTool, connect_stdio
from nacelle.tools import ToolContext


@pytest.fixture(scope="module")
def bad():
    with connect_stdio(sys.executable, [BAD_SERVER], timeout=10) as client:
        yield client


GENERATIONS = [None, "2025-11-25"]  # None: negotiated, which is 2026-07-28 with this server


def answer_ada(request):
    return {"name": "Ada"} if "name" in request.message else "decline"


# The SDK's server is a process that takes a second or two to start: slow.
@pytest.fixture(scope="module", params=[pytest.param(g, marks=pytest.mark.slow) for g in GENERATIONS],
                ids=["2026-07-28", "2025-11-25"])
def sdk(request):
    if needs_sdk.args[0]:
        pytest.skip(needs_sdk.kwargs["reason"])
    with connect_stdio(sys.executable, [SDK_SERVER], timeout=20, on_elicit=answer_ada,
                       protocol_version=request.param) as client:
        client.pinned = request.param  # what the test asked for, to check against
        yield client


def by_name(tools):
    return {tool.name: tool for tool in tools}


def history(client):
    return json.loads(client.call_tool("history"))


# -- handshake ---------------------------------------------------------------------------


def test_a_server_without_discover_gets_the_handshake_which_records_what_it_said(bad):
    assert bad.protocol_version == "2025-06-18"
    assert bad.server_info == {"name": "bad", "version": "0"}
    assert bad.capabilities == {"tools": {"listChanged": True}}
    assert history(bad)[:3] == ["server/discover", "initialize", "notifications/initialized"]


@pytest.mark.slow
@needs_sdk
def test_the_sdk_server_speaks_2026_when_offered_and_the_2025_handshake_when_pinned(sdk):
    assert sdk.protocol_version == (sdk.pinned or "2026-07-28")
    assert sdk.modern is (sdk.pinned is None)
    assert sdk.server_info["name"] == "nacelle-test-server"


@pytest.mark.parametrize("mode, expected", [
    ("refuse", "refused the handshake: .* error -32602: Unsupported protocol version"),
    ("old-version", "answered protocol version '1999-01-01'; nacelle speaks 2026-07-28, 2025-11-25"),
    ("not-rpc", "not JSON-RPC 2.0: {'hello': 'world'}"),
])
def test_a_handshake_the_client_cannot_accept_raises_mcp_error(mode, expected):
    with pytest.raises(MCPError, match=expected):
        connect_stdio(sys.executable, [BAD_SERVER, mode], timeout=10)


def connected_in(*args, **kwargs):
    """A connected client to ``args`` (a command line), and the seconds connecting took."""
    start = time.monotonic()
    client = connect_stdio(sys.executable, list(args), **kwargs)
    return client, time.monotonic() - start


def test_a_2025_server_answering_the_probe_with_method_not_found_gets_the_handshake_at_once():
    client, seconds = connected_in(BAD_SERVER, timeout=30)
    with client:
        assert client.protocol_version == "2025-06-18"
        assert seconds < 5  # a second or less, but for starting Python on a busy machine


@pytest.mark.slow
def test_a_2025_server_that_never_answers_the_probe_is_connected_in_seconds_not_the_timeout():
    client, seconds = connected_in(BAD_SERVER, "silent-probe", timeout=30)
    with client:
        assert client.protocol_version == "2025-06-18"
        assert history(client)[:3] == ["server/discover", "initialize",
                                       "notifications/initialized"]
        assert client.call_tool("echo", {"text": "hi"}) == "hi"
    assert seconds < 10  # the probe's quiet bound (1 s) and a start, never the 30 s timeout


@pytest.mark.slow
@needs_sdk
def test_the_sdk_server_deaf_to_the_probe_gets_the_2025_handshake_in_seconds():
    client, seconds = connected_in(SDK_SERVER, "--drop-discover", timeout=60)
    with client:
        assert client.protocol_version == "2025-11-25" and not client.modern
        assert client.call_tool("add", {"a": 2, "b": 3}) == "5"
    assert seconds < 20  # importing the SDK takes seconds on a loaded machine; not 60


@pytest.mark.slow
@needs_sdk
def test_an_sdk_server_slower_to_start_than_the_probe_wait_still_speaks_2026():
    # Its answer to the probe comes after the handshake went out too: the server, held
    # to 2026 by the probe, refuses the handshake, and the probe's answer decides.
    client, seconds = connected_in(SDK_SERVER, "--start-delay", "2.5", timeout=60)
    with client:
        assert client.protocol_version == "2026-07-28" and client.modern
        assert client.call_tool("add", {"a": 2, "b": 3}) == "5"


@pytest.mark.slow
def test_a_server_that_never_answers_the_handshake_times_out():
    start = time.monotonic()
    with pytest.raises(MCPError, match=r"did not answer initialize within 0.5s"):
        connect_stdio(sys.executable, [BAD_SERVER, "mute"], timeout=0.5)
    assert time.monotonic() - start < 5


# -- tools/list ---------------------------------------------------------------------------


def test_tools_are_listed_across_every_page_in_order(bad):
    names = [tool.remote_name for tool in bad.tools()]
    assert names == ["echo", "hang", "history", "crash", "garbage", "mixed", "dotted.name",
                     "environment", "spawn", "deaf", "ask", "emit", "flood"]


def test_a_tool_carries_the_servers_schema_and_description_and_its_read_only_hint(bad):
    tools = by_name(bad.tools())
    echo = tools["echo"]
    assert echo.schema == {"type": "object", "properties": {"text": {"type": "string"}},
                           "required": ["text"]}
    assert echo.description == "Repeat the text."
    assert (echo.read_only, echo.exclusive) == (False, False)
    assert tools["history"].read_only is True
    assert isinstance(echo, nacelle.Tool)


@pytest.mark.parametrize("annotations, facts", [
    (None, (False, True, False, True)),
    ({}, (False, True, False, True)),
    ({"readOnlyHint": True}, (True, False, False, True)),
    ({"readOnlyHint": True, "destructiveHint": True}, (True, False, False, True)),
    ({"destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
     (False, False, True, False)),
    ({"readOnlyHint": "yes", "openWorldHint": 0}, (False, True, False, True)),
])
def test_a_tools_annotations_map_onto_nacelles_metadata_with_the_specs_defaults(
        annotations, facts):
    spec = {"name": "t", "inputSchema": {"type": "object"}}
    if annotations is not None:
        spec["annotations"] = annotations
    made = MCPTool(None, spec, "t")
    assert (made.read_only, made.destructive, made.idempotent, made.open_world) == facts
    assert made.advisory is True


def test_changing_a_tools_schema_does_not_change_the_next_listing(bad):
    first = by_name(bad.tools())["echo"]
    first.schema["properties"]["text"]["type"] = "integer"
    assert by_name(bad.tools())["echo"].schema["properties"]["text"] == {"type": "string"}


def test_a_name_model_apis_would_refuse_is_made_safe_but_called_as_the_server_named_it(bad):
    tool = by_name(bad.tools(prefix="p"))["p__dotted_name"]
    assert tool.remote_name == "dotted.name"
    with pytest.raises(MCPError, match="Unknown tool: dotted.name"):
        tool.run({}, ToolContext())


def test_a_prefix_names_tools_prefix_double_underscore_name_and_calls_the_real_one(bad):
    tools = by_name(bad.tools(prefix="srv"))
    assert "srv__echo" in tools and "echo" not in tools
    assert tools["srv__echo"].run({"text": "hi"}, ToolContext()) == "hi"


@pytest.mark.parametrize("prefix", ["", "has space", "a.b", 7, "x" * 61, "srv\n"])
def test_an_invalid_prefix_is_a_config_error(bad, prefix):
    with pytest.raises(nacelle.ConfigError, match="MCP tool prefix"):
        bad.tools(prefix=prefix)


def test_messages_arriving_between_a_request_and_its_answer_are_all_handled(bad, caplog):
    # bad_server sends list_changed, a log message and a ping before each answer.
    with caplog.at_level(logging.WARNING, logger="nacelle.mcp"):
        bad._tools_changes += 1  # force a fresh listing
        bad.list_tools()
    assert "response:srv-1" in history(bad)  # our answer to its ping
    assert any("listing tools" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_two_thousand_list_changed_notifications_start_one_refresh_at_a_time():
    with connect_stdio(sys.executable, [BAD_SERVER], timeout=10) as client:
        live = client.tools(live=True)
        with ThreadPeak() as threads:
            assert client.call_tool("flood", {"what": "list_changed", "count": 2000}) == "flooded"
            assert client.call_tool("echo", {"text": "still here"}) == "still here"
        assert threads.added <= 2
        assert "echo" in {tool.name for tool in live}
        # Coalesced: far fewer listings than notifications, and the last one came after
        # the last notification, so the cache is current.
        listings = history(client).count("tools/list")
        assert 1 <= listings < 100 * 4  # four pages a listing
        assert client._tools_fetched_at == client._tools_changes


@pytest.mark.slow
def test_three_hundred_elicitations_run_on_elicit_a_few_at_a_time_and_refuse_the_excess():
    lock = threading.Lock()
    running, peak = [0], [0]

    def on_elicit(request):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return {"name": "Ada"}

    with connect_stdio(sys.executable, [BAD_SERVER], timeout=20, on_elicit=on_elicit) as client:
        with ThreadPeak() as threads:
            answers = json.loads(client.call_tool("flood", {"what": "elicit", "count": 300}))
        assert client.call_tool("echo", {"text": "still here"}) == "still here"
    assert len(answers) == 300  # every request answered, one way or the other
    accepted = [a for a in answers if "result" in a]
    refused = [a for a in answers if "error" in a]
    assert accepted and all(a["result"] == {"action": "accept", "content": {"name": "Ada"}}
                            for a in accepted)
    assert all(a["error"]["code"] == -32000 and "too many" in a["error"]["message"]
               for a in refused)
    assert len(accepted) + len(refused) == 300
    assert peak[0] <= 4 and threads.added <= 5


# -- tools/call -------------------------------------------------------------------------------


def test_every_kind_of_content_becomes_text_the_model_can_read(bad):
    assert bad.call_tool("mixed").split("\n") == [
        "first",
        "[image: image/png, 8 bytes]",
        "[audio: audio/wav, 3 bytes]",
        "[resource link: a.txt <file:///tmp/a.txt>, text/plain: a file]",
        "[resource <mem://note>, text/plain]",
        "inline note",
        "[resource <mem://blob>, 4 bytes]",
        "last",
    ]


def test_a_json_rpc_error_from_tools_call_raises_with_the_servers_code_and_message(bad):
    with pytest.raises(MCPError, match="error -32602: Unknown tool: nope") as caught:
        bad.call_tool("nope")
    assert caught.value.code == -32602


def test_the_callers_arguments_are_not_mutated(bad):
    arguments = {"text": "same"}
    tool = by_name(bad.tools())["echo"]
    assert tool.run(arguments, ToolContext()) == "same"
    assert arguments == {"text": "same"}


def test_concurrent_calls_each_get_their_own_answer(bad):
    results = {}

    def call(i):
        results[i] = bad.call_tool("echo", {"text": f"call {i}"})

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == {i: f"call {i}" for i in range(16)}


# -- timeouts and cancellation ---------------------------------------------------------------


@pytest.mark.slow
def test_a_call_without_an_answer_times_out_and_the_server_is_told_to_stop(bad):
    start = time.monotonic()
    with pytest.raises(MCPError, match=r"did not answer tools/call within 0.3s"):
        bad.request("tools/call", {"name": "hang", "arguments": {}}, timeout=0.3)
    assert 0.25 < time.monotonic() - start < 3
    assert history(bad)[-2] == "notifications/cancelled"


@pytest.mark.slow
def test_the_calls_deadline_cuts_the_wait_short_of_the_client_timeout(bad):
    tool = by_name(bad.tools())["hang"]
    start = time.monotonic()
    with pytest.raises(MCPError, match="before the call's deadline"):
        tool.run({}, ToolContext(deadline=time.monotonic() + 0.3))
    assert time.monotonic() - start < 3  # the client's own timeout is 10 s


@pytest.mark.slow
@pytest.mark.parametrize("event_type", [threading.Event, nacelle.RunContext])
def test_cancelling_a_call_returns_at_once_and_sends_notifications_cancelled(bad, event_type):
    cancelled = event_type() if event_type is threading.Event else event_type().cancelled
    tool = by_name(bad.tools())["hang"]
    timer = threading.Timer(0.2, cancelled.set)
    timer.start()
    start = time.monotonic()
    with pytest.raises(nacelle.Cancelled):
        tool.run({}, ToolContext(cancelled=cancelled))
    assert time.monotonic() - start < 2
    assert history(bad)[-2] == "notifications/cancelled"


@pytest.mark.slow
def test_a_tool_contexts_deadline_is_read_on_its_own_clock(bad):
    from nacelle.testing import FakeClock

    tools = by_name(bad.tools())
    ctx = nacelle.RunContext(clock=FakeClock()).tool("call_1", 0, "echo", timeout=5)
    assert tools["echo"].run({"text": "hi"}, ctx) == "hi"
    ctx = nacelle.RunContext(clock=FakeClock(1e9)).tool("call_2", 0, "hang", timeout=0.3)
    start = time.monotonic()
    with pytest.raises(MCPError, match="before the call's deadline"):
        tools["hang"].run({}, ctx)
    assert 0.25 < time.monotonic() - start < 3  # the client's own timeout is 10 s


@pytest.mark.slow
def test_cancelling_the_run_reaches_a_call_blocked_in_one_of_its_tools(bad):
    run = nacelle.RunContext()
    ctx = run.tool("call_1", 0, "hang")
    threading.Timer(0.2, run.cancel).start()
    start = time.monotonic()
    with pytest.raises(nacelle.Cancelled):
        by_name(bad.tools())["hang"].run({}, ctx)
    assert time.monotonic() - start < 2
    assert history(bad)[-2] == "notifications/cancelled"


# -- the client object --------------------------------------------------------------------------


def test_a_closed_client_refuses_calls_and_closing_twice_is_harmless():
    client = connect_stdio(sys.executable, [BAD_SERVER], timeout=10)
    tool = by_name(client.tools())["echo"]
    client.close()
    client.close()
    with pytest.raises(MCPError, match="is closed"):
        tool.run({"text": "x"}, ToolContext())
    assert "closed" in repr(client)


def test_mcp_error_is_a_nacelle_error_that_survives_pickling():
    err = MCPError("boom", code=-32601)
    assert isinstance(err, nacelle.NacelleError)
    copy = pickle.loads(pickle.dumps(err))
    assert (type(copy), str(copy), copy.code) == (MCPError, "boom", -32601)


def test_the_public_names_are_the_entry_points():
    import nacelle.mcp as module

    assert {"connect_stdio", "connect_http", "MCPClient", "MCPError"} <= set(module.__all__)
    assert MCPClient and MCPTool


# -- the official SDK server ------------------------------------------------------------------------


@needs_sdk
def test_sdk_tools_are_listed_with_their_input_schema(sdk):
    tools = by_name(sdk.tools())
    assert {"add", "echo", "fail", "slow", "grow", "picture"} <= set(tools)
    assert tools["add"].schema["properties"]["a"]["type"] == "integer"
    assert tools["add"].schema["required"] == ["a", "b"]
    assert tools["add"].read_only is True and tools["echo"].read_only is False


@needs_sdk
def test_sdk_tool_call_returns_its_text(sdk):
    assert by_name(sdk.tools())["add"].run({"a": 20, "b": 22}, ToolContext()) == "42"
    assert sdk.call_tool("picture") == "a dot\n[image: image/png, 67 bytes]"


@needs_sdk
def test_sdk_tool_media_come_back_as_parts_images_and_pdfs_as_themselves(sdk):
    parts = sdk.call_tool_parts("media")
    text, image, document, audio, link = parts
    assert text == nacelle.Text("the report")
    assert isinstance(image, nacelle.Image) and image.media_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    assert isinstance(document, nacelle.Document)
    assert (document.media_type, document.title) == ("application/pdf", "doc://report")
    assert base64.b64decode(document.data).startswith(b"%PDF-1.4")
    assert audio == nacelle.Text("[audio: audio/wav, 44 bytes]")
    assert link == nacelle.Text("[resource link: readme <note://readme>: A short note.]")
    # The tool an Agent runs returns the same parts; a text-only result stays text.
    tools = by_name(sdk.tools())
    assert tools["media"].run({}, ToolContext()) == parts
    assert tools["echo"].run({"text": "hi"}, ToolContext()) == "hi"
    # The text-only view still describes each medium in a line.
    assert sdk.call_tool("picture") == "a dot\n[image: image/png, 67 bytes]"


@needs_sdk
def test_sdk_error_result_raises_with_the_servers_text(sdk):
    with pytest.raises(MCPError, match="^Error executing tool fail: failed on purpose: why$"):
        by_name(sdk.tools())["fail"].run({"reason": "why"}, ToolContext())


@needs_sdk
def test_sdk_tool_added_at_runtime_appears_after_list_changed(sdk):
    assert "reverse_it" not in by_name(sdk.tools())
    assert sdk.call_tool("grow", {"name": "reverse_it"}) == "added reverse_it"
    deadline = time.monotonic() + 5
    while "reverse_it" not in by_name(sdk.tools()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert by_name(sdk.tools())["reverse_it"].run({"text": "abc"}, ToolContext()) == "cba"


@pytest.mark.slow
@needs_sdk
def test_sdk_slow_tool_cancelled_stops_on_the_server(sdk):
    before = int(sdk.call_tool("cancellations"))
    cancelled = threading.Event()
    threading.Timer(0.3, cancelled.set).start()
    start = time.monotonic()
    with pytest.raises(nacelle.Cancelled):
        by_name(sdk.tools())["slow"].run({"seconds": 30}, ToolContext(cancelled=cancelled))
    assert time.monotonic() - start < 3
    deadline = time.monotonic() + 5
    while int(sdk.call_tool("cancellations")) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert int(sdk.call_tool("cancellations")) == before + 1


@needs_sdk
def test_sdk_resources_are_listed_and_read_as_text_images_documents_and_described_blobs(sdk):
    assert [r["uri"] for r in sdk.resources()] == [
        "note://readme", "image://dot", "doc://report", "data://bytes"]
    assert sdk.read_resource("note://readme") == [nacelle.Text("Read me first.")]
    [image] = sdk.read_resource("image://dot")
    assert isinstance(image, nacelle.Image) and image.media_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    [document] = sdk.read_resource("doc://report")
    assert isinstance(document, nacelle.Document)
    assert (document.media_type, document.title) == ("application/pdf", "doc://report")
    assert base64.b64decode(document.data).startswith(b"%PDF-1.4")
    assert sdk.read_resource("data://bytes") == [
        nacelle.Text("[resource <data://bytes>: application/octet-stream, 10 bytes]")]


@needs_sdk
def test_reading_a_resource_the_server_does_not_have_raises_mcp_error(sdk):
    with pytest.raises(MCPError, match="error -32602"):
        sdk.read_resource("note://missing")


@needs_sdk
def test_sdk_prompts_are_listed_and_filled_in_as_messages(sdk):
    [prompt] = sdk.prompts()
    assert prompt["name"] == "review"
    assert [a["name"] for a in prompt["arguments"]] == ["code", "language"]
    messages = sdk.get_prompt("review", {"code": "x = 1", "language": "rust"})
    assert messages == [nacelle.user_text("Review this rust code:\nx = 1"),
                        nacelle.assistant_text("Looking at it now.")]


@needs_sdk
def test_sdk_structured_content_comes_through_with_its_output_schema(sdk):
    result = sdk.call_tool_result("weather", {"city": "Paris"})
    assert result["structuredContent"] == {"city": "Paris", "celsius": 21.5}
    tool = by_name(sdk.tools())["weather"]
    assert tool.output_schema["properties"]["celsius"]["type"] == "number"
    assert json.loads(tool.run({"city": "Paris"}, ToolContext())) == {"city": "Paris",
                                                                      "celsius": 21.5}


@needs_sdk
def test_sdk_elicitation_is_answered_by_on_elicit_on_either_generation(sdk):
    asked = []
    sdk.on_elicit = lambda request: asked.append(request) or {"name": "Ada"}
    try:
        assert by_name(sdk.tools())["greet"].run({}, ToolContext()) == "hello Ada"
        sdk.on_elicit = lambda request: "decline"
        assert sdk.call_tool("greet") == "no name (decline)"
    finally:
        sdk.on_elicit = answer_ada
    assert asked[0].message == "What is your name?" and asked[0].mode == "form"
    assert asked[0].schema["properties"]["name"]["type"] == "string"


@needs_sdk
def test_sdk_server_gets_a_decline_written_the_sdks_way_as_a_decline_on_either_generation(sdk):
    from mcp_types import ElicitResult

    answers = [{"action": "decline"}, {"action": "cancel"},
               ElicitResult(action="decline"),
               {"action": "accept", "content": {"name": "Ada"}},
               ElicitResult(action="accept", content={"name": "Bo"})]
    told = []
    try:
        for answer in answers:
            sdk.on_elicit = lambda request, answer=answer: answer
            told.append(sdk.call_tool("greet"))
        sdk.on_elicit = lambda request: {"action": "maybe"}
        with pytest.raises(MCPError, match="ElicitResult"):
            sdk.call_tool("greet")
    finally:
        sdk.on_elicit = answer_ada
    assert told == ["no name (decline)", "no name (cancel)", "no name (decline)",
                    "hello Ada", "hello Bo"]


@pytest.mark.slow
@needs_sdk
@pytest.mark.parametrize("generation", GENERATIONS, ids=["2026-07-28", "2025-11-25"])
def test_without_on_elicit_the_client_declares_no_elicitation_and_the_call_fails(generation):
    with connect_stdio(sys.executable, [SDK_SERVER], timeout=20,
                       protocol_version=generation) as client:
        with pytest.raises(MCPError, match="elicitation"):
            client.call_tool("greet")


def test_a_server_asking_for_input_without_on_elicit_is_refused_with_a_clear_error(bad):
    answer = json.loads(bad.call_tool("ask"))
    assert answer["error"]["code"] == -32601
    assert "without on_elicit" in answer["error"]["message"]


def test_a_server_asking_for_input_gets_what_on_elicit_returns():
    seen = []
    with connect_stdio(sys.executable, [BAD_SERVER], timeout=10,
                       on_elicit=lambda r: seen.append(r) or {"name": "Ada"}) as client:
        assert json.loads(client.call_tool("ask")) == {
            "result": {"action": "accept", "content": {"name": "Ada"}}}
    assert seen[0].message == "Your name?"


@needs_sdk
def test_sdk_progress_reaches_the_tools_context_progress_callback(sdk):
    class Ctx(ToolContext):
        def progress(self, progress, total, message):
            steps.append((progress, total, message))

    steps = []
    assert by_name(sdk.tools())["count"].run({"to": 3}, Ctx()) == "counted to 3"
    assert steps == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


@needs_sdk
def test_sdk_progress_reaches_a_plain_tool_context_as_its_progress_line(sdk, caplog):
    # ToolContext.progress turns it into a tool.progress observation within a run,
    # and a DEBUG line always.
    with caplog.at_level(logging.DEBUG, logger="nacelle.context"):
        by_name(sdk.tools())["count"].run({"to": 2}, ToolContext("c1", 0, "count"))
    assert "tool count (c1): progress 2/2 step 2" in caplog.text


# -- end to end: an Agent running MCP tools on a backend without server-side MCP ---------------


def scripted_run(tools, calls, **options):
    from nacelle.testing import ScriptedBackend

    call_turn = nacelle.Message(nacelle.Role.ASSISTANT, tuple(
        nacelle.ToolCall(f"call_{i}", name, json.dumps(arguments))
        for i, (name, arguments) in enumerate(calls)))
    backend = ScriptedBackend([call_turn, nacelle.assistant_text("done")])
    agent = nacelle.Agent(backend, "Use the tools.", tools=tools, **options)
    events = list(agent.stream([nacelle.user_text("go")]))
    backend.assert_consumed()
    results = {e.tool.name: e.tool for e in events if e.kind is nacelle.Kind.TOOL_RESULT}
    return events, results, backend


def test_an_agent_runs_mcp_tools_end_to_end_on_a_scripted_backend(bad):
    events, results, backend = scripted_run(
        bad.tools(prefix="bad"), [("bad__echo", {"text": "hello"}), ("bad__nope", {})])
    assert (results["bad__echo"].result, results["bad__echo"].error) == ("hello", None)
    assert results["bad__nope"].error  # not a tool: a failed result, the run goes on
    assert events[-1].kind is nacelle.Kind.DONE and events[-1].stop is nacelle.Stop.END
    seen = backend.requests[1].messages[-1].parts
    assert [(p.name, p.result, p.failed) for p in seen][0] == ("bad__echo", "hello", False)


@pytest.mark.slow
def test_cancelling_an_agent_run_stops_its_blocked_mcp_call_and_tells_the_server(bad):
    from nacelle.testing import ScriptedBackend

    before = history(bad).count("notifications/cancelled")
    call_turn = nacelle.Message(nacelle.Role.ASSISTANT, (nacelle.ToolCall("call_0", "bad__hang", "{}"),))
    agent = nacelle.Agent(ScriptedBackend([call_turn, nacelle.assistant_text("never")]),
                          "Use the tools.", tools=bad.tools(prefix="bad"))
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    start = time.monotonic()
    with pytest.raises(nacelle.Cancelled):
        agent.run([nacelle.user_text("go")], cancel=cancel)
    deadline = start + 5
    while history(bad).count("notifications/cancelled") == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert history(bad).count("notifications/cancelled") == before + 1
    assert time.monotonic() - start < 5


def test_an_agent_with_server_side_mcp_on_a_backend_without_it_points_to_connect_http():
    from nacelle.backend import Capabilities
    from nacelle.testing import ScriptedBackend

    backend = ScriptedBackend([], capabilities=Capabilities(mcp=False))
    with pytest.raises(nacelle.Unsupported, match=r"nacelle\.mcp\.connect_http"):
        nacelle.Agent(backend, "s", mcp=[nacelle.MCPServer(name="x", url="http://127.0.0.1/")])


@pytest.mark.slow
@needs_sdk
def test_an_agent_runs_sdk_tools_with_results_errors_and_a_timed_out_slow_call(sdk):
    start = time.monotonic()
    events, results, backend = scripted_run(
        sdk.tools(), [("add", {"a": 20, "b": 22}), ("fail", {"reason": "nope"}),
                      ("slow", {"seconds": 30}), ("add", {"a": "not a number"})],
        tool_timeout=0.5)
    assert time.monotonic() - start < 10
    outcome = {e.tool.id: e.tool for e in events if e.kind is nacelle.Kind.TOOL_RESULT}
    assert (outcome["call_0"].result, outcome["call_0"].error) == ("42", None)
    assert "failed on purpose: nope" in outcome["call_1"].error
    assert outcome["call_2"].error and not outcome["call_2"].result
    assert outcome["call_3"].error  # the server's schema refused it before any call
    assert events[-1].stop is nacelle.Stop.END


@pytest.mark.slow
@needs_sdk
def test_an_agent_gets_an_sdk_tools_image_and_pdf_as_parts_of_its_result(sdk):
    events, results, backend = scripted_run(sdk.tools(), [("media", {}), ("echo", {"text": "hi"})])
    media = results["media"]
    assert [type(part) for part in media.content] == [
        nacelle.Text, nacelle.Image, nacelle.Document, nacelle.Text, nacelle.Text]
    assert media.result == "\n".join(p.text for p in media.content if isinstance(p, nacelle.Text))
    assert "[image" not in media.result and "base64" not in media.result
    assert (results["echo"].result, results["echo"].content) == ("hi", ())
    # What the model is sent next holds the same parts.
    sent = {p.name: p for p in backend.requests[1].messages[-1].parts
            if isinstance(p, nacelle.ToolResult)}
    assert sent["media"].content == media.content and sent["echo"].content == ()


@pytest.mark.slow
@needs_sdk
def test_an_sdk_tools_image_and_pdf_reach_anthropic_as_blocks_of_its_tool_result(sdk):
    from nacelle.backends import anthropic
    from nacelle.testing import FakeServer, Reply
    from nacelle.testing.wire import anthropic_stream

    with FakeServer() as server:
        server.queue("/v1/messages",
                     Reply(chunks=anthropic_stream((), tool_calls=[("toolu_1", "media", "{}")])),
                     Reply(chunks=anthropic_stream(["Seen."])))
        backend = anthropic.Backend("sk-ant-test-0123456789", base_url=server.url, max_retries=0)
        result = nacelle.Agent(backend, "Use the tools.", tools=sdk.tools()).run(
            [nacelle.user_text("go")])
        body = server.requests[1].json()
    assert result.text == "Seen."
    [block] = [b for m in body["messages"] for b in (m["content"] if isinstance(
        m["content"], list) else []) if b.get("type") == "tool_result"]
    kinds = [part["type"] for part in block["content"]]
    assert kinds.count("image") == 1 and kinds.count("document") == 1
    image = next(p for p in block["content"] if p["type"] == "image")
    document = next(p for p in block["content"] if p["type"] == "document")
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG")
    assert document["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(document["source"]["data"]).startswith(b"%PDF-")
    assert "[image" not in json.dumps(body)


# -- the reference "everything" server from npm (a 2025 server: no server/discover) ------------


def everything_command():
    """How to start @modelcontextprotocol/server-everything: the copy CI installed
    (``NACELLE_MCP_EVERYTHING``, the path of its ``mcp-server-everything`` script) run
    by ``node``, else ``npx -y``, which fetches it; None and the reason when neither is
    there."""
    import os
    import shutil

    installed = os.environ.get("NACELLE_MCP_EVERYTHING")
    node = shutil.which("node")
    if installed:
        if node is None or not os.path.isfile(installed):
            return None, (f"NACELLE_MCP_EVERYTHING={installed!r} is set but "
                          + ("there is no node on PATH" if node is None
                             else "names no file (did its install fail?)"))
        return (node, [installed, "stdio"]), ""
    npx = shutil.which("npx")
    if npx is None:
        return None, ("needs Node.js: NACELLE_MCP_EVERYTHING (set by .ci/run) or npx to run "
                      "@modelcontextprotocol/server-everything")
    return (npx, ["-y", "@modelcontextprotocol/server-everything", "stdio"]), ""


@pytest.fixture(scope="module")
def everything():
    command, reason = everything_command()
    if command is None:
        pytest.skip(reason)
    try:
        client = connect_stdio(command[0], command[1], env={"npm_config_loglevel": "silent"},
                               timeout=180, on_elicit=lambda request: {"color": "blue"})
    except MCPError as err:
        pytest.skip(f"@modelcontextprotocol/server-everything could not be installed or "
                    f"started: {str(err)[:200]}")
    with client:
        yield client


@pytest.mark.slow
def test_the_everything_server_falls_back_to_the_2025_handshake(everything):
    assert everything.protocol_version == "2025-11-25"
    assert everything.server_info["name"] == "mcp-servers/everything"
    assert {"echo", "get-sum", "trigger-elicitation-request"} <= set(by_name(everything.tools()))


@pytest.mark.slow
def test_the_everything_server_reads_resources_and_fills_prompts(everything):
    first = everything.resources()[0]
    [text] = everything.read_resource(first["uri"])
    assert isinstance(text, nacelle.Text) and text.text
    [message] = everything.get_prompt("simple-prompt")
    assert message.role is nacelle.Role.USER and "simple prompt" in message.parts[0].text


@pytest.mark.slow
def test_the_everything_server_reports_progress_and_structured_content(everything):
    steps = []
    text = everything.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 2},
                                progress=lambda *step: steps.append(step))
    assert "completed" in text and [s[:2] for s in steps] == [(1.0, 2.0), (2.0, 2.0)]
    result = everything.call_tool_result("get-structured-content", {"location": "New York"})
    assert set(result["structuredContent"]) >= {"temperature", "conditions"}


@pytest.mark.slow
def test_the_everything_servers_elicitation_request_gets_on_elicits_answer(everything):
    text = everything.call_tool("trigger-elicitation-request")
    assert "accept" in text.lower()


@pytest.mark.slow
def test_the_everything_servers_tiny_image_is_an_image_part_between_its_text(everything):
    first, image, last = everything.call_tool_parts("get-tiny-image")
    assert first == nacelle.Text("Here's the image you requested:")
    assert isinstance(image, nacelle.Image) and image.media_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    assert last == nacelle.Text("The image above is the MCP logo.")
    assert by_name(everything.tools())["get-tiny-image"].run({}, ToolContext())[1] == image
    [text, image] = everything.call_tool_parts("get-annotated-message",
                                               {"messageType": "debug", "includeImage": True})
    assert text.text.startswith("Debug:") and isinstance(image, nacelle.Image)


@pytest.mark.slow
def test_the_everything_servers_embedded_resources_and_links_are_text_with_their_uris(everything):
    intro, resource, outro = everything.call_tool_parts(
        "get-resource-reference", {"resourceType": "Blob", "resourceId": 2})
    # A text/plain blob is its text, under the line naming the resource.
    assert resource.text.startswith("[resource <demo://resource/dynamic/blob/2>, text/plain]\n"
                                    "Resource 2: This is a base64 blob")
    [intro, *links] = everything.call_tool_parts("get-resource-links", {"count": 2})
    assert len(links) == 2 and all(isinstance(link, nacelle.Text) for link in links)
    assert all(link.text.startswith("[resource link: ") and "<demo://resource/" in link.text
               for link in links)
