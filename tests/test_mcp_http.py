"""The streamable HTTP transport, on loopback only: against a server written with the
official MCP SDK (skipped with a reason where it cannot be installed) and against a
hand-written endpoint scripted to misbehave."""

import json
import logging
import threading
import time

import pytest

import nacelle
from mcp_servers import ThreadPeak, free_port, needs_sdk, sdk_http_server
from mcp_servers.http_server import Answer, ScriptedEndpoint, result, sse
from nacelle.mcp import MCPError, connect_http
from nacelle.mcp.auth import MCPAuthError
from nacelle.mcp.http import HTTPTransport
from nacelle.mcp.protocol import header_value
from nacelle.tools import ToolContext

ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def endpoint():
    with ScriptedEndpoint() as server:
        yield server


def by_name(tools):
    return {tool.name: tool for tool in tools}


# -- the scripted endpoint ----------------------------------------------------------------


def test_every_post_accepts_json_and_sse_and_carries_the_session_after_initialize(endpoint):
    with connect_http(endpoint.url) as client:
        assert client.call_tool("echo", {"text": "hi"}) == "hi"
    init, = endpoint.posts("initialize")
    assert init.headers["accept"] == ACCEPT
    assert init.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in init.headers
    assert init.body["params"]["protocolVersion"] == "2025-11-25"
    for seen in endpoint.posts("notifications/initialized") + endpoint.posts("tools/call"):
        assert seen.headers["accept"] == ACCEPT
        assert seen.headers["mcp-session-id"] == "session-1"
        assert seen.headers["mcp-protocol-version"] == "2025-06-18"


def test_an_sse_answer_with_priming_event_crlf_and_a_notification_first_is_read(endpoint):
    with connect_http(endpoint.url) as client:
        tool = by_name(client.tools())["echo"]
        assert tool.run({"text": "über\u2028x"}, ToolContext()) == "über\u2028x"


def test_close_ends_the_session_with_delete(endpoint):
    client = connect_http(endpoint.url)
    client.close()
    deletes = [s for s in endpoint.requests if s.method == "DELETE"]
    assert len(deletes) == 1 and deletes[0].headers["mcp-session-id"] == "session-1"


def test_the_callers_headers_are_sent_and_left_unchanged(endpoint):
    headers = {"Authorization": "Bearer sk-secret-token"}
    with connect_http(endpoint.url, headers=headers) as client:
        client.tools()
    assert headers == {"Authorization": "Bearer sk-secret-token"}
    assert all(s.headers["authorization"] == "Bearer sk-secret-token"
               for s in endpoint.requests)


def test_an_http_error_page_fails_only_that_call_with_its_status(endpoint):
    endpoint.on["tools/call"] = lambda m: Answer(502, b"<html>Bad Gateway</html>", "text/html")
    with connect_http(endpoint.url) as client:
        with pytest.raises(MCPError, match=r"HTTP 502: '<html>Bad Gateway</html>'"):
            client.call_tool("echo", {"text": "x"})
        assert [t.name for t in client.tools()] == ["echo"]


def test_a_json_rpc_error_in_an_error_status_is_reported_as_the_servers_error(endpoint):
    endpoint.on["tools/call"] = lambda m: Answer(400, json.dumps({
        "jsonrpc": "2.0", "id": m["id"],
        "error": {"code": -32602, "message": "bad arguments"}}).encode())
    with connect_http(endpoint.url) as client:
        with pytest.raises(MCPError, match="error -32602: bad arguments"):
            client.call_tool("echo")


def test_a_body_that_is_not_json_fails_the_call(endpoint):
    endpoint.on["tools/call"] = lambda m: Answer(200, b"{not json")
    with connect_http(endpoint.url) as client:
        with pytest.raises(MCPError, match=r"answered tools/call with something that is "
                                           r"not JSON: '\{not json'"):
            client.call_tool("echo")


def test_an_sse_event_that_is_not_json_fails_the_call(endpoint):
    endpoint.on["tools/call"] = lambda m: Answer(
        body=b"event: message\ndata: oops\n\n", content_type="text/event-stream")
    with connect_http(endpoint.url) as client:
        with pytest.raises(MCPError, match="an SSE event that is not JSON: 'oops'"):
            client.call_tool("echo")


@pytest.mark.slow
@pytest.mark.parametrize("answer, problem", [
    (lambda m: Answer(body=b'{"jsonrpc":"2.0","id":%d,"result":' % m["id"]
                      + b"[" * 100000 + b"]" * 100000 + b"}"),
     r"answered tools/call with JSON the client refuses \(JSON nested deeper than 128"),
    (lambda m: Answer(body=b"event: message\ndata: " + b"[" * 100000 + b"\n\n",
                      content_type="text/event-stream"),
     r"sent an SSE event with JSON the client refuses \(JSON nested deeper than 128"),
    (lambda m: sse({"jsonrpc": "2.0", "id": [m["id"]], "result": {}}),
     r"sent a response whose id is not a string or an integer"),
    (lambda m: sse(42), r"sent a message that is not a JSON object: 42"),
    (lambda m: Answer(400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
                           b'"message":"Bad Request: no valid session"}}'),
     r"answered with error -32600: Bad Request: no valid session"),
])
def test_an_answer_the_client_cannot_use_fails_only_the_call_it_answers(endpoint, answer, problem):
    endpoint.on["tools/call"] = answer
    with connect_http(endpoint.url, timeout=30) as client:
        start = time.monotonic()
        with pytest.raises(MCPError, match=problem):
            client.call_tool("echo")
        assert time.monotonic() - start < 3
        assert [t.name for t in client.tools()] == ["echo"]
        assert "open" in repr(client)


def test_a_stream_that_ends_before_the_answer_fails_the_call_at_once(endpoint):
    endpoint.on["tools/call"] = lambda m: sse({"jsonrpc": "2.0", "method": "notifications/x"})
    with connect_http(endpoint.url, timeout=10) as client:
        start = time.monotonic()
        with pytest.raises(MCPError, match="ended the stream before answering"):
            client.call_tool("echo")
        assert time.monotonic() - start < 2


def test_a_stream_closed_after_an_event_id_is_resumed_with_last_event_id(endpoint):
    calls = []
    endpoint.on["tools/call"] = lambda m: calls.append(m) or sse(priming_id="e1", retry=10)

    def on_get(headers):
        if headers.get("last-event-id") != "e1":
            return Answer(405)
        return sse({"jsonrpc": "2.0", "id": calls[0]["id"],
                    "result": {"content": [{"type": "text", "text": "resumed"}]}})

    endpoint.on_get = on_get
    with connect_http(endpoint.url) as client:
        assert client.call_tool("echo") == "resumed"
    resumed = [s for s in endpoint.requests if s.headers.get("last-event-id")]
    assert len(resumed) == 1 and resumed[0].headers["mcp-session-id"] == "session-1"


@pytest.mark.slow
def test_a_flood_on_the_get_stream_is_answered_with_a_bounded_number_of_threads(endpoint):
    flood = [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}] * 2000
    flood += [{"jsonrpc": "2.0", "id": f"ping-{i}", "method": "ping"} for i in range(300)]
    gets = []
    endpoint.on_get = lambda headers: (Answer(405) if gets
                                       else gets.append(1) or sse(*flood, retry=10))
    with connect_http(endpoint.url) as client:
        live = client.tools(live=True)
        with ThreadPeak() as threads:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and len(
                    [s for s in endpoint.requests if s.body and "result" in s.body]) < 300:
                time.sleep(0.05)
            assert client.call_tool("echo", {"text": "still here"}) == "still here"
        assert "echo" in by_name(live)
    answered = {s.body["id"] for s in endpoint.requests if s.body and "result" in s.body}
    assert answered == {f"ping-{i}" for i in range(300)}
    assert len(endpoint.posts("tools/list")) < 100
    assert threads.added <= 8


def test_the_handshake_returns_once_the_get_stream_was_answered(endpoint):
    answered = threading.Event()

    def slow(headers):
        time.sleep(0.3)
        answered.set()
        return Answer(405)

    endpoint.on_get = slow
    with connect_http(endpoint.url):
        # What the server sends on that stream from the start is read, and a first
        # request cannot meet a stream the server has not opened yet.
        assert answered.is_set()


@pytest.mark.slow
def test_a_get_stream_the_server_holds_delays_the_handshake_by_a_bounded_wait(endpoint):
    release = threading.Event()
    endpoint.on_get = lambda headers: release.wait(10) and Answer(405)
    started = time.monotonic()
    try:
        with connect_http(endpoint.url) as client:
            assert time.monotonic() - started < 4.5
            assert client.call_tool("echo", {"text": "hi"}) == "hi"
    finally:
        release.set()


def test_a_live_list_is_listed_again_after_a_call_even_when_no_notification_comes(endpoint):
    grown = {"name": "later", "description": "Added by a call.",
             "inputSchema": {"type": "object", "properties": {}}}

    def grow(message):
        endpoint.TOOLS = ScriptedEndpoint.TOOLS + [grown]  # and no list_changed, ever
        return result(message, {"content": [{"type": "text", "text": "grown"}]})

    endpoint.on["tools/call"] = grow
    with connect_http(endpoint.url) as client:
        live, snapshot = client.tools(live=True), client.tools()
        assert "later" not in by_name(live)
        listings = len(endpoint.posts("tools/list"))
        assert "later" not in by_name(live) and len(endpoint.posts("tools/list")) == listings
        assert snapshot[0].run({}, ToolContext()) == "grown"
        assert len(endpoint.posts("tools/list")) == listings  # a snapshot's call lists nothing
        assert "later" in by_name(live)
        assert len(endpoint.posts("tools/list")) == listings + 1


def test_an_expired_session_is_renewed_and_the_request_sent_again(endpoint):
    answers = iter([Answer(404, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
                                b'"message":"Session not found"}}')])

    def call(message):
        answer = next(answers, None)
        return answer or result(message, {"content": [{"type": "text", "text": "again"}]})

    endpoint.on["tools/call"] = call
    with connect_http(endpoint.url) as client:
        assert client.call_tool("echo") == "again"
    first, second = endpoint.posts("initialize")
    assert "mcp-session-id" not in second.headers
    assert endpoint.posts("tools/call")[-1].headers["mcp-session-id"] == "session-2"


@pytest.mark.slow
def test_a_slow_answer_times_out_and_the_server_is_told_to_stop(endpoint):
    release = threading.Event()
    endpoint.on["tools/call"] = lambda m: (release.wait(5), Answer(202))[1]
    try:
        with connect_http(endpoint.url, timeout=0.3) as client:
            with pytest.raises(MCPError, match=r"did not answer tools/call within 0.3s"):
                client.call_tool("echo")
            deadline = time.monotonic() + 5
            while not endpoint.posts("notifications/cancelled") and time.monotonic() < deadline:
                time.sleep(0.02)
            cancel, = endpoint.posts("notifications/cancelled")
            call, = endpoint.posts("tools/call")
            assert cancel.body["params"]["requestId"] == call.body["id"]
    finally:
        release.set()


def test_a_server_that_is_not_there_fails_without_leaking_the_query_or_headers():
    url = f"http://127.0.0.1:{free_port()}/mcp?token=sk-query-secret"
    with pytest.raises(MCPError) as caught:
        connect_http(url, headers={"Authorization": "Bearer sk-header-secret"}, timeout=5)
    message = str(caught.value)
    assert "cannot reach MCP server" in message and "connection failed" in message
    assert "sk-query-secret" not in message and "sk-header-secret" not in message


def test_reprs_and_errors_never_show_the_callers_secrets(endpoint):
    endpoint.on["tools/call"] = lambda m: Answer(500, b"down")
    with connect_http(endpoint.url + "?key=sk-query-secret",
                      headers={"Authorization": "Bearer sk-header-secret"}) as client:
        with pytest.raises(MCPError) as caught:
            client.call_tool("echo")
        shown = " ".join([str(caught.value), repr(client), repr(client._transport),
                          repr(client.tools())])
    assert "sk-" not in shown


def everything_an_error_carries(err):
    """The text of an error and of every exception chained to it, with the request a
    requests exception keeps (its URL and headers): wherever a secret could ride."""
    seen, todo, texts = [], [err], []
    while todo:
        item = todo.pop()
        if item is None or any(item is s for s in seen):
            continue
        seen.append(item)
        texts += [str(item), repr(item), repr(item.args), repr(vars(item))]
        request = getattr(item, "request", None)
        if request is not None:
            texts += [str(getattr(request, "url", "")), repr(getattr(request, "headers", ""))]
        todo += [item.__cause__, item.__context__]
    return seen, " ".join(texts)


SECRETS = {"headers": {"Authorization": "Bearer sk-header-secret"}}


def test_an_unreachable_servers_error_chains_nothing_that_holds_the_secrets():
    url = f"http://127.0.0.1:{free_port()}/mcp?token=sk-query-secret"
    with pytest.raises(MCPError) as caught:
        connect_http(url, timeout=5, **SECRETS)
    chain, text = everything_an_error_carries(caught.value)
    assert all(isinstance(e, MCPError) for e in chain), chain
    assert "sk-" not in text


def test_the_transport_hands_over_errors_that_chain_nothing_holding_the_secrets():
    failures = []
    failed = threading.Event()
    transport = HTTPTransport(f"http://127.0.0.1:{free_port()}/mcp?token=sk-query-secret",
                              timeout=5, **SECRETS)
    transport.start(lambda *args: False, lambda request_id, error: (
        failures.append(error), failed.set()))
    try:
        transport.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert failed.wait(5)
    finally:
        transport.close()
    chain, text = everything_an_error_carries(failures[0])
    assert chain == [failures[0]] and "connection failed" in text
    assert "sk-" not in text


def test_an_error_from_a_call_chains_nothing_that_holds_the_secrets(endpoint):
    endpoint.on["tools/call"] = lambda m: Answer(500, b"down")
    with connect_http(endpoint.url + "?key=sk-query-secret", **SECRETS) as client:
        with pytest.raises(MCPError) as caught:
            client.call_tool("echo")
    chain, text = everything_an_error_carries(caught.value)
    assert all(isinstance(e, MCPError) for e in chain), chain
    assert "sk-" not in text


@pytest.mark.parametrize("headers", [
    {"Authorization": "Bearer sk-header-secret\r\nX-Injected: 1"},
    {"Authorization": "Bearer sk-header-secret\n"},
    {"Authorization": " Bearer sk-header-secret"},
    {"Bad Name: sk-header-secret": "x"},
    {"Authorization": "Bearer sk-header-secret\u20ac"},
    {"Authorization": "Bearer sk-header-secret\x00"},
    {"Authorization": "Bearer sk-header-secret "},
])
def test_a_header_http_cannot_carry_is_a_config_error_that_does_not_quote_it(endpoint, headers):
    with pytest.raises(nacelle.ConfigError, match="header") as caught:
        connect_http(endpoint.url, headers=headers)
    chain, text = everything_an_error_carries(caught.value)
    assert len(chain) == 1 and "sk-" not in text
    assert endpoint.requests == []


def test_nothing_nacelle_logs_about_a_failing_session_shows_the_secrets(endpoint, caplog):
    endpoint.on["tools/call"] = lambda m: Answer(502, b"<html>Bad Gateway</html>", "text/html")
    with caplog.at_level(logging.DEBUG, logger="nacelle"):
        with connect_http(endpoint.url + "?key=sk-query-secret", **SECRETS) as client:
            with pytest.raises(MCPError):
                client.call_tool("echo")
            client.request("tools/list")
        with pytest.raises(MCPError):
            connect_http(f"http://127.0.0.1:{free_port()}/mcp?token=sk-query-secret",
                         timeout=5, **SECRETS)
    logged = [caplog.text] + [r.getMessage() for r in caplog.records
                              if r.name.startswith("nacelle")]
    assert "sk-" not in " ".join(logged)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/mcp", "127.0.0.1:8000/mcp", "", None,
                                 "http:///mcp"])
def test_a_url_that_is_not_http_is_a_config_error(url):
    with pytest.raises(nacelle.ConfigError, match="http:// or https:// URL"):
        connect_http(url)


def test_a_url_refused_never_repeats_the_password_it_holds():
    with pytest.raises(nacelle.ConfigError, match="http:// or https:// URL") as caught:
        connect_http("admin:sk-hunter2@127.0.0.1/mcp")
    assert "sk-hunter2" not in str(caught.value)


def test_headers_that_are_not_strings_are_a_config_error(endpoint):
    with pytest.raises(nacelle.ConfigError, match="headers"):
        connect_http(endpoint.url, headers={"X-Count": 3})


# -- the official SDK's server ------------------------------------------------------------------


@pytest.fixture(scope="module")
def sdk_url():
    if needs_sdk.args[0]:
        pytest.skip(needs_sdk.kwargs["reason"])
    with sdk_http_server() as url:
        yield url


GENERATIONS = pytest.mark.parametrize("generation", [None, "2025-11-25"],
                                      ids=["2026-07-28", "2025-11-25"])


@pytest.mark.slow
@needs_sdk
@GENERATIONS
def test_sdk_over_http_lists_calls_and_reports_errors(sdk_url, generation):
    with connect_http(sdk_url, protocol_version=generation) as client:
        assert client.protocol_version == (generation or "2026-07-28")
        tools = by_name(client.tools())
        assert tools["add"].schema["required"] == ["a", "b"]
        assert tools["add"].run({"a": 2, "b": 3}, ToolContext()) == "5"
        with pytest.raises(MCPError, match="failed on purpose: over http"):
            tools["fail"].run({"reason": "over http"}, ToolContext())


@pytest.mark.slow
@needs_sdk
@GENERATIONS
def test_sdk_over_http_tool_added_at_runtime_arrives_on_the_get_or_listen_stream(
        sdk_url, generation):
    name = "mirror_" + (generation or "modern").replace("-", "_")  # one server for both
    with connect_http(sdk_url, protocol_version=generation) as client:
        assert name not in by_name(client.tools())
        client.call_tool("grow", {"name": name})
        deadline = time.monotonic() + 5
        while name not in by_name(client.tools()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert client.call_tool(name, {"text": "ab"}) == "ba"


@pytest.mark.slow
@needs_sdk
@GENERATIONS
def test_sdk_over_http_a_tool_added_mid_run_is_offered_at_the_next_turn_every_time(
        sdk_url, generation):
    from nacelle.testing import ScriptedBackend

    era = (generation or "modern").replace("-", "_")
    offered = []
    for attempt in range(20):
        name = f"midrun_{era}_{attempt}"
        backend = ScriptedBackend([
            nacelle.Message(nacelle.Role.ASSISTANT, (
                nacelle.ToolCall("a", "grow", json.dumps({"name": name})),)),
            nacelle.Message(nacelle.Role.ASSISTANT, (
                nacelle.ToolCall("b", name, json.dumps({"text": "ab"})),)),
            nacelle.assistant_text("ok")])
        with connect_http(sdk_url, protocol_version=generation) as client:
            events = list(nacelle.Agent(backend, "Use the tools.", tools=client.tools(live=True))
                          .stream([nacelle.user_text("go")]))
        results = [e.tool for e in events if e.kind is nacelle.Kind.TOOL_RESULT]
        offered.append(name in [t.name for t in backend.requests[1].tools]
                       and results[-1].result == "ba")
    assert offered == [True] * 20


@pytest.mark.slow
@needs_sdk
def test_sdk_over_http_slow_tool_cancelled_stops_on_the_server(sdk_url):
    # 2025: notifications/cancelled. (On 2026-07-28 closing the response is the
    # cancellation, which this server sees only once it has sent its headers.)
    with connect_http(sdk_url, protocol_version="2025-11-25") as client:
        before = int(client.call_tool("cancellations"))
        cancelled = threading.Event()
        threading.Timer(0.3, cancelled.set).start()
        start = time.monotonic()
        with pytest.raises(nacelle.Cancelled):
            client.call_tool("slow", {"seconds": 30}, cancelled=cancelled)
        assert time.monotonic() - start < 3
        deadline = time.monotonic() + 5
        while int(client.call_tool("cancellations")) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert int(client.call_tool("cancellations")) == before + 1


@pytest.mark.slow
@needs_sdk
def test_sdk_over_http_session_is_deleted_on_close_and_renewed_when_lost(sdk_url):
    import requests

    client = connect_http(sdk_url, protocol_version="2025-11-25")  # 2026 has no sessions
    try:
        old = client._transport._session_id
        headers = {"Mcp-Session-Id": old, "MCP-Protocol-Version": client.protocol_version}
        assert requests.delete(sdk_url, headers=headers, timeout=5).status_code == 200
        assert client.call_tool("echo", {"text": "still here"}) == "still here"
        new = client._transport._session_id
        assert new and new != old
    finally:
        client.close()
    gone = requests.post(sdk_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                         headers={"Mcp-Session-Id": new, "Accept": ACCEPT}, timeout=5)
    assert gone.status_code == 404


@pytest.mark.slow
@needs_sdk
def test_sdk_over_http_on_2026_reads_resources_and_answers_input_required_rounds(sdk_url):
    with connect_http(sdk_url, on_elicit=lambda r: {"name": "Ada"}) as client:
        assert client.protocol_version == "2026-07-28"
        assert client._transport._session_id is None
        assert client.read_resource("note://readme") == [nacelle.Text("Read me first.")]
        assert client.call_tool("greet") == "hello Ada"
        assert client.get_prompt("review", {"code": "x"})[0].parts[0].text.endswith("x")


# -- 2026-07-28 on the wire ----------------------------------------------------------------------


def modern(endpoint):
    """Make the scripted endpoint a 2026-07-28 server."""
    endpoint.on["server/discover"] = lambda m: result(m, {
        "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
        "resultType": "complete", "cacheScope": "private", "ttlMs": 0,
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "1"}}})


def test_a_2026_server_gets_no_handshake_and_every_post_mirrors_its_body_in_headers(endpoint):
    modern(endpoint)
    with connect_http(endpoint.url) as client:
        assert (client.protocol_version, client.server_info["name"]) == ("2026-07-28", "modern")
        assert client.call_tool("echo", {"text": "hi"}) == "hi"
    assert not endpoint.posts("initialize")
    assert not [s for s in endpoint.requests if s.method == "GET"]
    for seen in [s for s in endpoint.requests if s.method == "POST"]:
        meta = seen.body["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "nacelle"
        assert seen.headers["mcp-protocol-version"] == "2026-07-28"
        assert seen.headers["mcp-method"] == seen.body["method"]
        assert "mcp-session-id" not in seen.headers
    [call] = endpoint.posts("tools/call")
    assert call.headers["mcp-name"] == "echo"


def test_a_2026_server_that_asks_for_input_gets_the_answer_on_a_retry_with_its_state(endpoint):
    modern(endpoint)
    rounds = []

    def call(message):
        rounds.append(message["params"])
        if "inputResponses" not in message["params"]:
            return result(message, {"resultType": "input_required", "requestState": "s1",
                                    "inputRequests": {"who": {"method": "elicitation/create",
                                                              "params": {"message": "Name?"}}}})
        name = message["params"]["inputResponses"]["who"]["content"]["name"]
        return result(message, {"content": [{"type": "text", "text": f"hi {name}"}]})

    endpoint.on["tools/call"] = call
    with connect_http(endpoint.url, on_elicit=lambda r: {"name": "Ada"}) as client:
        assert client.call_tool("echo", {}) == "hi Ada"
    assert rounds[1]["requestState"] == "s1" and "requestState" not in rounds[0]
    assert rounds[0]["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {
        "elicitation": {"form": {}}}


def test_a_2026_server_asking_for_sampling_is_refused_with_a_clear_error(endpoint):
    modern(endpoint)
    endpoint.on["tools/call"] = lambda m: result(m, {
        "resultType": "input_required",
        "inputRequests": {"llm": {"method": "sampling/createMessage", "params": {}}}})
    with connect_http(endpoint.url) as client:
        with pytest.raises(MCPError, match="asked the client for sampling/createMessage"):
            client.call_tool("echo", {})


@pytest.mark.slow
def test_a_server_that_keeps_asking_for_input_is_given_up_on(endpoint):
    modern(endpoint)
    endpoint.on["tools/call"] = lambda m: result(m, {"resultType": "input_required",
                                                     "requestState": "again"})
    with connect_http(endpoint.url) as client:
        with pytest.raises(MCPError, match="asked for more input 10 times"):
            client.call_tool("echo", {})
    assert len(endpoint.posts("tools/call")) == 11


def test_a_2026_only_server_refusing_2025_is_reported_by_the_versions_it_speaks(endpoint):
    endpoint.on["server/discover"] = lambda m: Answer(400, json.dumps({
        "jsonrpc": "2.0", "id": m["id"], "error": {
            "code": -32022, "message": "Unsupported protocol version",
            "data": {"supported": ["2027-01-01"], "requested": "2026-07-28"}}}).encode())
    with pytest.raises(MCPError, match=r"does not speak 2026-07-28 \(it speaks 2027-01-01\)"):
        connect_http(endpoint.url)
    assert not endpoint.posts("initialize")


def refusing(times):
    """A server/discover answer that refuses 2026-07-28 ``times`` times while naming
    it as the one version it speaks, then answers as ``modern`` does."""
    refusals = []

    def answer(m):
        if len(refusals) < times:
            refusals.append(m)
            return Answer(400, json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {
                "code": -32022, "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"}}}).encode())
        return result(m, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                          "resultType": "complete", "cacheScope": "private", "ttlMs": 0})

    return answer


def test_a_refusal_naming_the_version_the_client_asked_for_is_asked_again_once(endpoint):
    endpoint.on["server/discover"] = refusing(1)
    with connect_http(endpoint.url) as client:
        assert client.protocol_version == "2026-07-28"
    assert len(endpoint.posts("server/discover")) == 2 and not endpoint.posts("initialize")


def test_a_server_refusing_the_version_it_names_twice_is_taken_at_its_word(endpoint):
    endpoint.on["server/discover"] = refusing(2)
    with pytest.raises(MCPError, match=r"refused 2026-07-28 twice while naming it"):
        connect_http(endpoint.url)
    assert len(endpoint.posts("server/discover")) == 2 and not endpoint.posts("initialize")


def test_a_2026_tool_call_mirrors_x_mcp_header_parameters_and_bad_annotations_drop_the_tool(
        endpoint, caplog):
    modern(endpoint)
    sql = {"name": "sql", "description": "", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "opts": {"type": "object", "properties": {"dry": {"type": "boolean",
                                                          "x-mcp-header": "Dry"}}},
        "query": {"type": "string"}}}}
    bad = {"name": "bad", "description": "", "inputSchema": {"type": "object", "properties": {
        "n": {"type": "number", "x-mcp-header": "N"}}}}
    endpoint.on["tools/list"] = lambda m: result(m, {"tools": [sql, bad]})
    endpoint.on["tools/call"] = lambda m: result(m, {"content": [{"type": "text", "text": "ok"}]})
    with connect_http(endpoint.url) as client:
        assert [t.name for t in client.tools()] == ["sql"]
        client.call_tool("sql", {"region": "Zürich", "opts": {"dry": True}, "query": "x"})
    [call] = endpoint.posts("tools/call")
    assert call.headers["mcp-param-region"] == "=?base64?WsO8cmljaA==?="
    assert call.headers["mcp-param-dry"] == "true"
    assert "tool 'bad' left out" in caplog.text


@pytest.mark.parametrize("value, sent", [
    ("get_weather", "get_weather"), ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "=?base64?IHBhZGRlZCA=?="), ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
    ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
])
def test_header_values_are_sent_plain_or_in_the_specs_base64_form(value, sent):
    assert header_value(value) == sent


class FakeAuth:
    """What connect_http needs of nacelle.mcp.auth.OAuth: a token after one challenge."""

    def __init__(self, grant=True):
        self.grant, self.token, self.challenges = grant, None, []

    def headers(self, server_url):
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def unauthorized(self, server_url, www_authenticate):
        self.challenges.append(www_authenticate)
        self.token = "t0ken" if self.grant else None
        return self.grant


def guarded(endpoint):
    """Answer 401 with a challenge to every request without the bearer token."""
    def check(default):
        def answer(message):
            if endpoint.requests[-1].headers.get("authorization") != "Bearer t0ken":
                return Answer(401, b"", headers={"WWW-Authenticate": 'Bearer scope="mcp"'})
            return default(message)
        return answer
    endpoint.on["server/discover"] = check(lambda m: Answer(200, json.dumps({
        "jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "nope"}}).encode()))
    endpoint.on["initialize"] = check(lambda m: result(m, {
        "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
        "serverInfo": {"name": "scripted", "version": "0"}}))


def test_a_401_runs_the_auth_flow_and_the_request_is_resent_with_its_token(endpoint):
    guarded(endpoint)
    auth = FakeAuth()
    with connect_http(endpoint.url, auth=auth) as client:
        assert client.protocol_version == "2025-06-18"
        assert client.call_tool("echo", {"text": "in"}) == "in"
    assert auth.challenges == ['Bearer scope="mcp"']
    assert all(s.headers.get("authorization") == "Bearer t0ken" for s in endpoint.requests[1:])
    assert "t0ken" not in repr(client)


def test_an_authorization_the_flow_cannot_fix_fails_the_connection(endpoint):
    guarded(endpoint)
    with pytest.raises(MCPError, match="refused the authorization"):
        connect_http(endpoint.url, auth=FakeAuth(grant=False))


def test_auth_without_the_oauth_interface_is_a_config_error(endpoint):
    with pytest.raises(nacelle.ConfigError, match="auth must have headers"):
        connect_http(endpoint.url, auth="a token")


# -- redirects ----------------------------------------------------------------------------


def test_a_redirect_to_another_host_is_refused_and_carries_nothing_there(endpoint):
    secret = "k-9f8e7d6c5b4a"
    with ScriptedEndpoint() as elsewhere:
        for method in ("server/discover", "initialize"):
            endpoint.on[method] = lambda m: Answer(307, headers={"Location": elsewhere.url})
        with pytest.raises(MCPError, match="redirected to another origin") as raised:
            connect_http(endpoint.url, headers={"X-API-Key": secret,
                                                "Authorization": "Bearer " + secret})
        assert elsewhere.requests == []
    assert secret not in str(raised.value)


def test_a_redirect_within_the_servers_origin_is_followed_with_the_callers_headers(endpoint):
    def initialize(message):
        if len(endpoint.posts("initialize")) == 1:
            return Answer(307, headers={"Location": endpoint.url + "/moved"})
        return result(message, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                "serverInfo": {"name": "scripted", "version": "0"}})

    endpoint.on["initialize"] = initialize
    with connect_http(endpoint.url, headers={"X-API-Key": "k-1"}) as client:
        assert client.call_tool("echo", {"text": "hi"}) == "hi"
    inits = endpoint.posts("initialize")
    assert len(inits) == 2 and all(s.headers["x-api-key"] == "k-1" for s in inits)


class SlowAuth(FakeAuth):
    """A person who takes longer to sign in than the client's timeout."""

    def __init__(self, delay, grant=True):
        super().__init__(grant)
        self.delay = delay

    def unauthorized(self, server_url, www_authenticate):
        time.sleep(self.delay)
        return super().unauthorized(server_url, www_authenticate)


def guarded_modern(endpoint):
    modern(endpoint)
    discover = endpoint.on["server/discover"]

    def answer(message):
        if endpoint.requests[-1].headers.get("authorization") != "Bearer t0ken":
            return Answer(401, b"", headers={"WWW-Authenticate": 'Bearer scope="mcp"'})
        return discover(message)

    endpoint.on["server/discover"] = answer
    endpoint.on["initialize"] = lambda m: Answer(400, b"2026-07-28 only")


@pytest.mark.slow
def test_a_probe_that_timed_out_on_a_sign_in_waits_for_it_and_speaks_2026(endpoint):
    guarded_modern(endpoint)
    auth = SlowAuth(delay=2.5)
    with connect_http(endpoint.url, timeout=1.0, auth=auth) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.call_tool("echo", {"text": "hi"}) == "hi"
    assert len(auth.challenges) == 1  # one sign-in, not one more for a handshake
    assert not endpoint.posts("initialize")


@pytest.mark.slow
def test_a_sign_in_that_fails_after_the_probe_timed_out_is_the_error_raised(endpoint):
    guarded_modern(endpoint)

    class Refusing(SlowAuth):
        def unauthorized(self, server_url, www_authenticate):
            time.sleep(self.delay)
            raise MCPAuthError("authorization refused: access_denied", error="access_denied")

    with pytest.raises(MCPAuthError, match="access_denied") as raised:
        connect_http(endpoint.url, timeout=1.0, auth=Refusing(delay=2.0))
    assert raised.value.error == "access_denied"
    assert not endpoint.posts("initialize")
