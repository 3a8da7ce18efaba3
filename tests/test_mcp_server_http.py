"""MCP's Streamable HTTP transport, server side (nacelle.mcp.server.http), driven
through the WSGI and ASGI apps without a socket: the checks before the body, the
2025 session wire and the 2026-07-28 stateless one, bounds on what a client sends,
streamed calls and their cancellation. The shapes follow the spec pages cited in the
module and the official SDK's server (``mcp`` 2.3.0); the SDK's own client and the
conformance suite hold the same apps to them over real sockets
(tests/test_mcp_server.py, tests/test_mcp_conformance.py)."""

import asyncio
import io
import json
import threading
import time

import pytest

import nacelle
from nacelle import ToolContext
from nacelle.mcp.server import asgi_app, wsgi_app

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}
CANCELLED = []
STARTED = threading.Event()


@nacelle.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@nacelle.tool
def waits(ctx: ToolContext) -> str:
    """Waits for its cancel."""
    STARTED.set()
    CANCELLED.append(ctx.cancelled.wait(10))
    return "done"


class Region:
    name = "region"
    description = "Takes a region, mirrored in a header."
    schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}

    def run(self, input, ctx):
        return input.get("region", "none")


TOOLS = [add, waits, Region()]


def call_wsgi(app, method="POST", message=None, headers=None, body=None):
    """(status, headers, body) of one request to a WSGI app; a streamed body is read whole."""
    data = body if body is not None else (b"" if message is None else json.dumps(message).encode())
    environ = {"REQUEST_METHOD": method, "PATH_INFO": "/mcp", "wsgi.input": io.BytesIO(data),
               "CONTENT_LENGTH": str(len(data)), "CONTENT_TYPE": "application/json",
               "HTTP_HOST": "127.0.0.1:8000", "HTTP_ACCEPT": "application/json, text/event-stream"}
    for name, value in (headers or {}).items():
        key = name.upper().replace("-", "_")
        if value is None:
            environ.pop(key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key, None)
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ[key] = value
        else:
            environ["HTTP_" + key] = value
    seen = {}

    def start_response(status, response_headers):
        seen["status"] = int(status.split()[0])
        seen["headers"] = {k.lower(): v for k, v in response_headers}

    chunks = app(environ, start_response)
    try:
        out = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return seen["status"], seen["headers"], out


def events(body):
    return [json.loads(line[len(b"data: "):]) for line in body.split(b"\n")
            if line.startswith(b"data: ")]


def modern(method, params=None, ident=1, **headers):
    params = dict(params or {})
    params.setdefault("_meta", META)
    extra = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        extra["Mcp-Name"] = params.get("name")
    extra.update(headers)
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}, extra


@pytest.fixture
def app():
    return wsgi_app(TOOLS, name="test")


def opened(app):
    status, headers, body = call_wsgi(app, message={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}})
    assert status == 200
    assert json.loads(body)["result"]["protocolVersion"] == "2025-06-18"
    return headers["mcp-session-id"]


# -- before the body -----------------------------------------------------------------


def test_a_host_it_does_not_answer_to_is_a_400_and_a_foreign_origin_a_403(app):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert call_wsgi(app, message=ping, headers={"Host": "evil.example"})[0] == 400
    assert call_wsgi(app, message=ping, headers={"Origin": "http://evil.example"})[0] == 403
    assert call_wsgi(app, message=ping, headers={"Origin": "null"})[0] == 403
    named = wsgi_app(TOOLS, allowed_hosts=["mcp.example.com"])
    status, _, _ = call_wsgi(named, message={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                             "params": {}},
                             headers={"Host": "mcp.example.com",
                                      "Origin": "https://mcp.example.com"})
    assert status == 200


def test_a_post_must_be_json_within_max_body_with_a_length():
    app = wsgi_app(TOOLS, max_body=100)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert call_wsgi(app, message=ping, headers={"Content-Type": "text/plain"})[0] == 415
    assert call_wsgi(app, body=b"{" + b" " * 200 + b"}")[0] == 413
    assert call_wsgi(app, message=ping, headers={"Content-Length": "²"})[0] == 400
    assert call_wsgi(app, message=ping, headers={"Content-Length": None})[0] == 411


def test_authorize_refuses_and_a_session_belongs_to_the_principal_that_opened_it():
    who = {"name": "alice"}
    app = wsgi_app(TOOLS, authorize=lambda environ: who["name"])
    session = opened(app)
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert call_wsgi(app, message=ping, headers={"Mcp-Session-Id": session})[0] == 200
    who["name"] = "bob"
    assert call_wsgi(app, message=ping, headers={"Mcp-Session-Id": session})[0] == 404
    who["name"] = False
    assert call_wsgi(app, message=ping, headers={"Mcp-Session-Id": session})[0] == 401


# -- bounds on the body ------------------------------------------------------------------


def test_bodies_that_are_not_one_json_rpc_request_are_400s_never_a_crash(app):
    for body in (b"not json", b"[" * 100_000 + b"]" * 100_000, b"[]", b"42",
                 b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
                 b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}',
                 b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}'):
        status, _, out = call_wsgi(app, body=body)
        assert status == 400, body[:40]
        assert json.loads(out)["error"]["code"] in (-32700, -32600)


def test_a_posted_response_or_notification_is_accepted_with_202(app):
    session = opened(app)
    for message in ({"jsonrpc": "2.0", "id": 5, "result": {}},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"}):
        status, _, out = call_wsgi(app, message=message, headers={"Mcp-Session-Id": session})
        assert (status, out) == (202, b"")


# -- the 2025 session wire -----------------------------------------------------------------


def test_initialize_answers_the_clients_version_or_the_newest_and_opens_a_session(app):
    status, headers, body = call_wsgi(app, message={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2099-01-01", "capabilities": {}}})
    result = json.loads(body)["result"]
    assert result == {"protocolVersion": "2025-11-25",
                      "capabilities": {"tools": {"listChanged": False}},
                      "serverInfo": {"name": "test", "version": nacelle.__version__}}
    assert headers["mcp-session-id"].isascii()


def test_without_its_session_a_request_is_a_400_and_with_an_unknown_one_a_404(app):
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert call_wsgi(app, message=ping)[0] == 400
    assert call_wsgi(app, message=ping, headers={"Mcp-Session-Id": "nope"})[0] == 404


def test_delete_ends_the_session_and_get_opens_no_stream(app):
    session = opened(app)
    assert call_wsgi(app, "GET", headers={"Mcp-Session-Id": session})[0] == 405
    assert call_wsgi(app, "DELETE", headers={"Mcp-Session-Id": session})[0] == 200
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert call_wsgi(app, message=ping, headers={"Mcp-Session-Id": session})[0] == 404
    assert call_wsgi(app, "DELETE", headers={"Mcp-Session-Id": session})[0] == 404


def test_a_session_call_answers_as_sse_or_json_as_the_client_accepts(app):
    session = opened(app)
    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    status, headers, body = call_wsgi(app, message=message, headers={"Mcp-Session-Id": session})
    assert (status, headers["content-type"]) == (200, "text/event-stream")
    assert events(body) == [{"jsonrpc": "2.0", "id": 3, "result": {
        "content": [{"type": "text", "text": "3"}], "isError": False}}]
    status, headers, body = call_wsgi(app, message=message, headers={
        "Mcp-Session-Id": session, "Accept": "application/json"})
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["result"]["content"][0]["text"] == "3"


def test_an_unknown_method_on_the_session_wire_is_a_json_rpc_error_in_a_200(app):
    session = opened(app)
    status, _, body = call_wsgi(app, message={"jsonrpc": "2.0", "id": 4, "method": "resources/list"},
                                headers={"Mcp-Session-Id": session})
    assert status == 200 and json.loads(body)["error"]["code"] == -32601


def test_notifications_cancelled_cancels_the_call_it_names_which_gets_no_answer(app):
    session = opened(app)
    CANCELLED.clear()
    STARTED.clear()
    answer = {}

    def run():
        answer["reply"] = call_wsgi(app, message={
            "jsonrpc": "2.0", "id": "w1", "method": "tools/call",
            "params": {"name": "waits", "arguments": {}}}, headers={"Mcp-Session-Id": session})

    thread = threading.Thread(target=run)
    thread.start()
    assert STARTED.wait(5)
    status, _, _ = call_wsgi(app, message={
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "w1", "reason": "user"}}, headers={"Mcp-Session-Id": session})
    assert status == 202
    thread.join(5)
    assert not thread.is_alive()
    for _ in range(200):  # the call was answered (with nothing) before its tool returned
        if CANCELLED:
            break
        time.sleep(0.01)
    assert CANCELLED == [True]
    assert events(answer["reply"][2]) == []


# -- the 2026-07-28 stateless wire ----------------------------------------------------------


def test_a_stateless_request_is_answered_whole_with_result_type_and_server_info(app):
    message, headers = modern("tools/list")
    status, response_headers, body = call_wsgi(app, message=message, headers=headers)
    result = json.loads(body)["result"]
    assert status == 200 and "mcp-session-id" not in response_headers
    assert [t["name"] for t in result["tools"]] == ["add", "waits", "region"]
    assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == ("complete", 0, "private")
    assert result["_meta"] == {"io.modelcontextprotocol/serverInfo": {
        "name": "test", "version": nacelle.__version__}}
    message, headers = modern("server/discover")
    discovered = json.loads(call_wsgi(app, message=message, headers=headers)[2])["result"]
    assert discovered["supportedVersions"] == [MODERN]
    assert discovered["capabilities"] == {"tools": {"listChanged": False}}


@pytest.mark.parametrize("change, code, status", [
    ({"params": {"_meta": {}}}, -32602, 400),
    ({"params": {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2030-01-01"}},
      "MCP-Protocol-Version": "2030-01-01"}, -32022, 400),
    ({"MCP-Protocol-Version": "2030-01-01"}, -32020, 400),
    ({"Mcp-Method": "tools/call"}, -32020, 400),
    ({"Mcp-Method": "tools/list, tools/list"}, -32020, 400),
    ({"method": "initialize"}, -32601, 404),
    ({"method": "ping"}, -32601, 404),
], ids=["no-envelope", "unknown-version", "header-disagrees", "wrong-method-header",
        "repeated-header", "initialize-is-gone", "ping-is-gone"])
def test_a_stateless_request_that_breaks_the_rules_gets_the_sdks_error_and_status(
        app, change, code, status):
    method = change.pop("method", "tools/list")
    params = change.pop("params", None)
    message, headers = modern(method, params)
    headers.update(change)
    got, _, body = call_wsgi(app, message=message, headers=headers)
    error = json.loads(body)["error"]
    assert (got, error["code"]) == (status, code)
    if code == -32022:
        assert error["data"] == {"supported": [MODERN], "requested": "2030-01-01"}


def test_mcp_name_and_mirrored_param_headers_must_match_the_body(app):
    message, headers = modern("tools/call", {"name": "region", "arguments": {"region": "eu"}},
                              **{"Mcp-Param-Region": "eu"})
    assert call_wsgi(app, message=message, headers=headers)[0] == 200
    for wrong in ({"Mcp-Name": "add"}, {"Mcp-Param-Region": "us"}, {"Mcp-Param-Region": None}):
        bad = dict(headers)
        bad.update(wrong)
        status, _, body = call_wsgi(app, message=message, headers=bad)
        assert (status, json.loads(body)["error"]["code"]) == (400, -32020), wrong
    encoded, headers = modern("tools/call", {"name": "region", "arguments": {"region": "été"}},
                              **{"Mcp-Param-Region": "=?base64?w6l0w6k=?="})
    assert call_wsgi(app, message=encoded, headers=headers)[0] == 200


def test_a_stateless_notification_gets_202_and_get_or_delete_405(app):
    status, _, _ = call_wsgi(app, message={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                           "params": {"requestId": 1}},
                             headers={"MCP-Protocol-Version": MODERN})
    assert status == 202
    assert call_wsgi(app, "DELETE", headers={"MCP-Protocol-Version": MODERN})[0] == 405


def test_closing_a_streamed_answer_cancels_the_call():
    app = wsgi_app(TOOLS, keepalive=0.05)
    CANCELLED.clear()
    STARTED.clear()
    message, headers = modern("tools/call", {"name": "waits", "arguments": {}})
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/mcp", "CONTENT_TYPE": "application/json",
               "HTTP_ACCEPT": "application/json, text/event-stream"}
    data = json.dumps(message).encode()
    environ.update({"wsgi.input": io.BytesIO(data), "CONTENT_LENGTH": str(len(data))})
    environ.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
    stream = app(environ, lambda status, headers: None)
    assert next(iter(stream)) == b": keepalive\n\n"
    assert STARTED.wait(5)  # the call is running
    stream.close()  # what a WSGI server does when the client has gone
    for _ in range(200):
        if CANCELLED:
            break
        time.sleep(0.01)
    assert CANCELLED == [True]


def test_the_asgi_app_answers_as_the_wsgi_app_does():
    app = asgi_app(TOOLS, name="test")
    message, headers = modern("tools/call", {"name": "add", "arguments": {"a": 2, "b": 2}})
    body = json.dumps(message).encode()
    scope = {"type": "http", "method": "POST", "path": "/mcp",
             "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                         (b"accept", b"application/json, text/event-stream"),
                         (b"content-length", str(len(body)).encode())]
             + [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    sent = []
    inbox = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if inbox:
            return inbox.pop(0)
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 200
    chunks = b"".join(m.get("body", b"") for m in sent[1:])
    (answer,) = events(chunks)
    assert answer["result"]["content"] == [{"type": "text", "text": "4"}]
