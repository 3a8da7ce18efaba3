"""MCP's Streamable HTTP transport, server side, for both protocol generations and
both app kinds: a request's method, headers and body in, a :class:`Reply` out.

Which generation a request belongs to is read from its ``MCP-Protocol-Version``
header, as the official Python SDK's server does (``mcp`` 2.3.0,
``streamable_http_manager.py``): absent or a handshake version (2024-11-05 to
2025-11-25) is the session transport
(https://modelcontextprotocol.io/specification/2025-11-25/basic/transports), any
other value the stateless one of 2026-07-28, where the header must then agree with
the request's ``_meta`` (else -32020), and an unknown version is
``UnsupportedProtocolVersion`` (-32022, naming the versions served).

Before anything is read: a ``Host`` that is not an IP address, ``localhost`` or one
of ``allowed_hosts`` is a 400 (the check :func:`nacelle.serve.routes.host_allowed`
makes for the chat server, against DNS rebinding), and so is an ``Origin`` naming
another host, with 403 as the MCP spec asks ("If the Origin header is present and
invalid, servers MUST respond with HTTP 403 Forbidden"); ``authorize(raw)`` is asked
as the chat server asks it (True, or a principal's name: the sessions a principal
opens are its own). A POST must be ``application/json`` (415): a page on another site
cannot send that without the browser asking first. The body is parsed under
:mod:`nacelle.bounded_json`'s depth bound, within the app's ``max_body``.

Answers. A request gets a JSON response, except ``tools/call`` from a client that
accepts ``text/event-stream``: that is an SSE stream, so ``notifications/progress``
can go ahead of the result and a long call keeps the connection alive with a comment
every ``keepalive`` seconds. A notification (or a posted response) gets 202. On the
stateless wire an error's HTTP status is the SDK's table (400 for -32700, -32600,
-32602, -32020, -32022; 404 for -32601); on the session wire a JSON-RPC error is a 200
but for a body that is not JSON-RPC (400). GET is a 405 (no server-initiated stream:
the server sends no requests and keeps no notifications), DELETE ends a session.
Cancelling: a client that closes a streamed response cancels its call
(2026-07-28's way), and ``notifications/cancelled`` names one in its session (2025's).

Outer ring (with the rest of ``nacelle.mcp``); imports the standard library,
``nacelle.bounded_json``, ``nacelle.context``, ``nacelle.errors``,
``nacelle.serve.routes`` (for the host check) and the package's ``errors``,
``protocol`` and ``server`` modules.
"""

from __future__ import annotations

import base64
import binascii
import json
import queue
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..._loggers import get_logger
from ... import bounded_json
from ...context import CancelEvent
from ...errors import ConfigError
from ...serve.routes import host_allowed
from ..errors import MCPError
from ..protocol import LEGACY_VERSIONS, MODERN_VERSION, param_headers
from .dispatch import (
    HEADER_MISMATCH, INVALID_REQUEST, PARSE_ERROR, Call, Dispatcher, envelope_problem,
    error_message, params_of, parse_message, progress_token, result_message, unsupported,
)
from .served import INVALID_PARAMS
from .sessions import Session, Sessions

__all__ = ["Endpoint", "Reply"]

log = get_logger(__name__)

#: The stateless wire's HTTP status per JSON-RPC error code (``mcp/shared/inbound.py``).
STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400, HEADER_MISMATCH: 400,
          -32021: 400, -32022: 400, -32601: 404}
_END = object()


@dataclass
class Reply:
    """An HTTP answer: a whole ``body``, or ``stream`` (SSE chunks) when not None;
    ``cancel`` is set by the app when the client leaves a stream."""

    status: int
    headers: List[Tuple[str, str]]
    body: bytes = b""
    stream: Optional[Iterator[bytes]] = None
    cancel: threading.Event = field(default_factory=CancelEvent)


def _json(status: int, message: Optional[Dict[str, Any]],
          extra: Sequence[Tuple[str, str]] = ()) -> Reply:
    body = b"" if message is None else json.dumps(message).encode("ascii")
    headers = [("Content-Type", "application/json")] if message is not None else []
    return Reply(status, headers + list(extra), body)


def _refusal(status: int, text: str, extra: Sequence[Tuple[str, str]] = ()) -> Reply:
    return _json(status, {"jsonrpc": "2.0", "id": None,
                          "error": {"code": INVALID_REQUEST, "message": text}}, extra)


class Endpoint:
    """One MCP endpoint: the checks, the two wires and the sessions."""

    def __init__(self, dispatcher: Dispatcher, *, authorize: Optional[Callable[[Any], Any]],
                 allowed_hosts: Sequence[str], keepalive: float = 15.0,
                 sessions: Optional[Sessions] = None) -> None:
        if authorize is not None and not callable(authorize):
            raise ConfigError(f"authorize must be callable, got {type(authorize).__name__}")
        if isinstance(allowed_hosts, str) or not all(isinstance(h, str) and h for h in allowed_hosts):
            raise ConfigError(f"allowed_hosts must be a list of host names, got {allowed_hosts!r:.80}")
        if not keepalive > 0:
            raise ConfigError(f"keepalive must be a positive number of seconds, got {keepalive!r}")
        self.dispatcher = dispatcher
        self.authorize = authorize
        self.allowed_hosts = tuple(h.strip().lower().rstrip(".") for h in allowed_hosts)
        self.keepalive = keepalive
        self.sessions = sessions if sessions is not None else Sessions()

    # -- before the body ---------------------------------------------------------------

    def check(self, method: str, headers: Mapping[str, str], raw: Any) -> "Reply | str":
        """A reply settling the request before its body is read, or the principal."""
        host = headers.get("host")
        if host is not None and not host_allowed(host, self.allowed_hosts):
            return _refusal(400, "this server does not answer to that host; name it in "
                                 "allowed_hosts (the check stops DNS rebinding)")
        origin = headers.get("origin")
        if origin is not None and not host_allowed(urllib.parse.urlsplit(origin).netloc,
                                                   self.allowed_hosts):
            return _refusal(403, "requests from that origin are not answered")
        principal = ""
        if self.authorize is not None:
            try:
                allowed = self.authorize(raw)
            except Exception:  # noqa: BLE001 - a broken hook refuses, it never lets in
                log.exception("authorize raised; refusing the request")
                return _refusal(500, "the server could not check this request")
            if isinstance(allowed, str) and allowed:
                principal = allowed
            elif allowed is not True:
                return _refusal(401, "not authorized")
        if method not in ("POST", "GET", "DELETE"):
            return _refusal(405, "the MCP endpoint takes POST and DELETE",
                            [("Allow", "POST, DELETE")])
        if method == "POST":
            media = headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                return _refusal(415, "send the body as application/json")
        return principal

    # -- the request -----------------------------------------------------------------

    def respond(self, method: str, headers: Mapping[str, str], body: bytes,
                principal: str) -> Reply:
        version = headers.get("mcp-protocol-version")
        modern = version is not None and version.strip() not in LEGACY_VERSIONS
        if method == "GET":
            return _refusal(405, "this server opens no stream of its own; POST requests",
                            [("Allow", "POST, DELETE")])
        if method == "DELETE":
            if modern:
                return _refusal(405, "the stateless protocol has no sessions to end",
                                [("Allow", "POST")])
            ident = headers.get("mcp-session-id")
            if not ident:
                return _refusal(400, "DELETE needs the Mcp-Session-Id of the session to end")
            if not self.sessions.close(ident, principal):
                return _refusal(404, "no such session")
            return Reply(200, [])
        try:
            message = self._message(body)
        except MCPError as err:
            return _json(400, error_message(None, err))
        if message is None:  # a response to a request this server never sends
            return Reply(202, [])
        if modern:
            return self._modern(message, headers, version or "")
        return self._legacy(message, headers, principal)

    @staticmethod
    def _message(body: bytes) -> Optional[Dict[str, Any]]:
        try:
            value = bounded_json.loads(body, what="an MCP message")
        except (ValueError, bounded_json.TooDeep) as exc:
            raise MCPError(f"Parse error: {str(exc)[:200]}", code=PARSE_ERROR) from None
        if isinstance(value, dict) and "method" not in value and "id" in value and (
                "result" in value or "error" in value):
            return None
        return parse_message(value)

    def _legacy(self, message: Dict[str, Any], headers: Mapping[str, str],
                principal: str) -> Reply:
        method, params = message["method"], params_of(message)
        if method == "initialize" and "id" in message:
            asked = params.get("protocolVersion")
            session = self.sessions.open(
                asked if asked in LEGACY_VERSIONS else LEGACY_VERSIONS[0], principal)
            if session is None:
                return _refusal(503, "too many sessions are open; try again later",
                                [("Retry-After", "5")])
            result = self.dispatcher.legacy(method, params, Call(message["id"]))
            assert result is not None
            return _json(200, result_message(message["id"], result),
                         [("Mcp-Session-Id", session.id)])
        ident = headers.get("mcp-session-id")
        if not ident:
            return _refusal(400, "this request needs the Mcp-Session-Id its initialize gave")
        found = self.sessions.find(ident, principal)
        if found is None:
            return _refusal(404, "no such session: initialize again")
        if "id" not in message:
            if method == "notifications/cancelled":
                self.sessions.cancel(found, params.get("requestId"))
            return Reply(202, [])
        return self._answer(message, headers, found, modern=False)

    def _modern(self, message: Dict[str, Any], headers: Mapping[str, str], version: str) -> Reply:
        accept = headers.get("accept", "")
        if accept and not any(kind in accept for kind in ("application/json", "*/*")):
            return Reply(406, [])
        if "id" not in message:
            if version != MODERN_VERSION:
                return _json(400, error_message(None, unsupported(version)))
            return Reply(202, [])
        ident, method, params = message["id"], message["method"], params_of(message)
        problem = _headers_problem(headers, message) or envelope_problem(params, version)
        if problem is None and method == "tools/call":
            problem = self._param_headers_problem(params, headers)
        if problem is not None:
            return _json(STATUS.get(problem.code or 0, 200), error_message(ident, problem))
        return self._answer(message, headers, None, modern=True)

    def _param_headers_problem(self, params: Mapping[str, Any],
                               headers: Mapping[str, str]) -> Optional[MCPError]:
        name, arguments = params.get("name"), params.get("arguments")
        schema = self.dispatcher.served.schema(name) if isinstance(name, str) else None
        if schema is None or not isinstance(arguments, (dict, type(None))):
            return None
        return _param_problem(schema, arguments or {}, headers)

    # -- answering ---------------------------------------------------------------------

    def _answer(self, message: Dict[str, Any], headers: Mapping[str, str],
                session: Optional[Session], *, modern: bool) -> Reply:
        ident, method, params = message["id"], message["method"], params_of(message)
        streamed = method == "tools/call" and "text/event-stream" in headers.get("accept", "")
        if not streamed:
            call = Call(ident)
            return self._whole(self._run(call, method, params, session, modern), modern)
        reply = Reply(200, [("Content-Type", "text/event-stream"),
                            ("Cache-Control", "no-cache, no-transform"),
                            ("X-Accel-Buffering", "no")])
        reply.stream = self._stream(reply, ident, method, params, session, modern)
        return reply

    def _run(self, call: Call, method: str, params: Dict[str, Any],
             session: Optional[Session], modern: bool) -> Optional[Dict[str, Any]]:
        """The response message for one request (None: cancelled, no answer)."""
        if session is not None:
            self.sessions.start(session, call.id, call.cancelled)
        try:
            result = (self.dispatcher.modern if modern else self.dispatcher.legacy)(
                method, params, call)
        except MCPError as err:
            return error_message(call.id, err)
        except Exception:  # noqa: BLE001 - the client gets -32603, the log the reason
            log.exception("answering %s failed", method)
            return error_message(call.id, MCPError("Internal error", code=-32603))
        finally:
            if session is not None:
                self.sessions.finish(session, call.id)
        return None if result is None else result_message(call.id, result)

    @staticmethod
    def _whole(response: Optional[Dict[str, Any]], modern: bool) -> Reply:
        if response is None:
            return Reply(204, [])
        error = response.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        status = STATUS.get(code, 200) if modern and isinstance(code, int) else 200
        return _json(status, response)

    def _stream(self, reply: Reply, ident: Any, method: str, params: Dict[str, Any],
                session: Optional[Session], modern: bool) -> Iterator[bytes]:
        """The SSE events of one streamed request: progress notifications as the
        call makes them, then its response; a comment every ``keepalive`` seconds."""
        out: "queue.Queue[Any]" = queue.Queue()
        call = Call(ident, cancelled=reply.cancel)
        token = progress_token(params)
        if token is not None:
            def progress(done: float, total: Optional[float], text: str) -> None:
                note: Dict[str, Any] = {"progressToken": token, "progress": done}
                if total is not None:
                    note["total"] = total
                if text:
                    note["message"] = text
                out.put({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
            call.progress = progress

        def work() -> None:
            try:
                out.put(self._run(call, method, params, session, modern))
            finally:
                out.put(_END)

        def events() -> Iterator[bytes]:
            threading.Thread(target=work, name="nacelle-mcp-call", daemon=True).start()
            ended = False
            try:
                while True:
                    try:
                        item = out.get(timeout=self.keepalive)
                    except queue.Empty:
                        yield b": keepalive\n\n"
                        continue
                    if item is _END:
                        ended = True
                        return
                    if item is not None:
                        yield b"event: message\ndata: " + json.dumps(item).encode("ascii") + b"\n\n"
            finally:
                if not ended:
                    log.debug("the client left a streamed %s; cancelling it", method)
                    reply.cancel.set()

        return events()


def _headers_problem(headers: Mapping[str, str], message: Mapping[str, Any]) -> Optional[MCPError]:
    """2026-07-28's routing headers against the body: ``Mcp-Method`` must be the
    method, ``Mcp-Name`` the tool's name (``resources/read``: the URI; ``prompts/get``:
    the name), and none of them given twice (a server joins repeats with commas)."""
    method = message["method"]
    for name in ("mcp-protocol-version", "mcp-method"):
        if "," in headers.get(name, ""):
            return MCPError(f"the {name} header appears more than once", code=HEADER_MISMATCH)
    if headers.get("mcp-method") != method:
        return MCPError("the Mcp-Method header does not match the request's method",
                        code=HEADER_MISMATCH)
    key = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(method)
    value = params_of(message).get(key) if key else None
    if value is not None and _decoded(headers.get("mcp-name")) != value:
        return MCPError(f"the Mcp-Name header does not match the request's {key}",
                        code=HEADER_MISMATCH)
    return None


def _decoded(value: Optional[str]) -> Optional[str]:
    """A header value as 2026-07-28 encodes it: as is, or ``=?base64?…?=`` of UTF-8;
    None for a malformed encoding, which then matches nothing."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    payload = value[len("=?base64?"):-2]
    try:
        data = base64.b64decode(payload, validate=True)
        if base64.b64encode(data).decode("ascii") != payload:
            return None
        return data.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _param_problem(schema: Any, arguments: Mapping[str, Any],
                   headers: Mapping[str, str]) -> Optional[MCPError]:
    """Each ``x-mcp-header`` argument against its ``Mcp-Param-*`` header: both there
    and equal, or both absent (2026-07-28 Streamable HTTP, "Custom Headers"; the
    rules are the SDK's ``validate_mcp_param_headers``)."""
    try:
        mirrored = param_headers(schema)
    except ValueError:
        return None  # a schema clients drop: no header to check
    for token, path in mirrored.items():
        name = f"mcp-param-{token.lower()}"
        raw = headers.get(name)
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        rendered = _rendered(value)
        if raw is not None and "," in raw and rendered is not None and "," not in rendered:
            return MCPError(f"the Mcp-Param-{token} header appears more than once",
                            code=HEADER_MISMATCH)
        if rendered is None:
            if raw is not None:
                return MCPError(f"the Mcp-Param-{token} header is there but its argument "
                                f"is not", code=HEADER_MISMATCH)
            continue
        if raw is None:
            return MCPError(f"the Mcp-Param-{token} header is missing", code=HEADER_MISMATCH)
        decoded = _decoded(raw)
        if decoded is None or not _same(value, rendered, decoded):
            return MCPError(f"the Mcp-Param-{token} header does not match its argument",
                            code=HEADER_MISMATCH)
    return None


def _rendered(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int) and abs(value) < 10 ** 300:
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return None


def _same(value: Any, rendered: str, decoded: str) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(decoded) == float(value) and decoded.strip() == decoded
        except ValueError:
            return False
    return decoded == rendered
