"""The two app kinds over :class:`~nacelle.mcp.server.http.Endpoint`: :func:`wsgi_app`
and :func:`asgi_app`.

They do what :mod:`nacelle.serve`'s apps do, for the same reasons: ``Content-Length``
read by RFC 9112's rule (:func:`nacelle.read_limits.content_length`; a bad one is a
400), a declared length past ``max_body`` refused before a byte is read (413) and an
undeclared one read up to ``max_body`` + 1 bytes; a POST without a length the server
can trust is a 411 unless the server says its input ends by itself. The work of a
request — which runs tools — happens off the event loop in the ASGI app, on a thread
of its own rather than the loop's default executor (a call may take minutes, and a
handful of them would hold every executor thread), at most ``max_calls`` at once
(past that a request is a 503 with ``Retry-After``); a streamed answer is read on
that thread too, and an ``http.disconnect`` while streaming cancels the call at once. A WSGI server closes
the stream's generator when a write to a client that has gone fails (PEP 3333),
which cancels the call too: at the next keepalive comment at the latest; sooner when
the server hands the app the client's socket (``nacelle.socket``, which ``nacelle
serve`` sets, or ``gunicorn.socket``): the chat server's watcher
(:mod:`nacelle.serve.wsgi`) then sees it close and cancels the call at once.

Outer ring (with the rest of ``nacelle.mcp``); imports the standard library,
``nacelle.read_limits``, ``nacelle.serve.wsgi`` (its socket watcher) and the package's
``server.http``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, Dict, Iterable, List, MutableMapping, Optional

from ..._loggers import get_logger
from ...read_limits import content_length
from ...serve.wsgi import _WATCHER, _client_socket, read_body
from .http import Endpoint, Reply, _refusal

__all__ = ["asgi", "wsgi"]

log = get_logger(__name__)

_REASONS = {200: "OK", 202: "Accepted", 204: "No Content", 400: "Bad Request",
            401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 406: "Not Acceptable", 408: "Request Timeout",
            411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type",
            500: "Internal Server Error", 503: "Service Unavailable"}

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Dict[str, Any]]]
Send = Callable[[Dict[str, Any]], Awaitable[None]]


def _too_large(max_body: int) -> Reply:
    return _refusal(413, f"the body is larger than {max_body} bytes")


def wsgi(endpoint: Endpoint, max_body: int) -> Callable[..., Iterable[bytes]]:
    """The WSGI application of ``endpoint``."""

    def application(environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            reply = _wsgi_reply(endpoint, environ, max_body)
        except Exception:  # noqa: BLE001 - the client gets a 500, the log the reason
            log.exception("serving MCP %s failed", environ.get("REQUEST_METHOD"))
            reply = _refusal(500, "the server failed to answer; its log says why")
        status = f"{reply.status} {_REASONS.get(reply.status, 'Error')}"
        if reply.stream is None:
            start_response(status, reply.headers + [("Content-Length", str(len(reply.body)))])
            return [reply.body]
        start_response(status, reply.headers)
        return _Watched(reply, _client_socket(environ))

    return application


class _Watched:
    """A streamed answer whose client's socket is watched while it streams (when the
    server handed it over), so a client that leaves cancels the call at once."""

    def __init__(self, reply: Reply, sock: Any) -> None:
        assert reply.stream is not None
        self._reply, self._chunks, self._sock = reply, reply.stream, sock
        self._watching = False

    def __iter__(self) -> "_Watched":
        return self

    def __next__(self) -> bytes:
        if not self._watching and self._sock is not None:
            self._watching = True
            _WATCHER.watch(self._sock, self._reply.cancel.set)
        return next(self._chunks)

    def close(self) -> None:
        if self._watching:
            _WATCHER.forget(self._sock)
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()


def _wsgi_reply(endpoint: Endpoint, environ: Dict[str, Any], max_body: int) -> Reply:
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    # A field value is read without the whitespace around it (RFC 9110 §5.5).
    headers = {key[5:].replace("_", "-").lower(): str(value).strip(" \t")
               for key, value in environ.items() if key.startswith("HTTP_")}
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers[key.replace("_", "-").lower()] = str(environ[key])
    principal = endpoint.check(method, headers, environ)
    if isinstance(principal, Reply):
        return principal
    body = b""
    if method == "POST":
        found = _wsgi_body(environ, max_body)
        if isinstance(found, Reply):
            return found
        body = found
    return endpoint.respond(method, headers, body, principal)


def _wsgi_body(environ: Dict[str, Any], max_body: int) -> "bytes | Reply":
    stream = environ["wsgi.input"]
    declared = str(environ.get("CONTENT_LENGTH") or "").strip()
    if declared:
        try:
            length = content_length(declared)
        except ValueError as exc:
            return _refusal(400, str(exc))
        assert length is not None
        return _too_large(max_body) if length > max_body else _read(stream, length)
    if environ.get("wsgi.input_terminated"):
        data = _read(stream, max_body + 1)
        return data if isinstance(data, Reply) or len(data) <= max_body else _too_large(max_body)
    return _refusal(411, "send the body with a Content-Length")


def _read(stream: Any, length: int) -> "bytes | Reply":
    body = read_body(stream, length)
    return _refusal(408, "the body did not arrive in time") if body is None else body


def asgi(endpoint: Endpoint, max_body: int,
         max_calls: int = 64) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """The ASGI 3 application of ``endpoint``."""
    slots = threading.BoundedSemaphore(max_calls)

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await _lifespan(receive, send)
            return
        if kind != "http":
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1003})
            return
        if not slots.acquire(blocking=False):
            reply = _refusal(503, "too many requests at once; try again shortly",
                             [("Retry-After", "1")])
            await _send_whole(reply, send)
            return
        try:
            try:
                reply = await _asgi_reply(endpoint, scope, receive, max_body)
            except Exception:  # noqa: BLE001 - the client gets a 500, the log the reason
                log.exception("serving MCP %s failed", scope.get("method"))
                reply = _refusal(500, "the server failed to answer; its log says why")
            if reply.stream is None:
                await _send_whole(reply, send)
            else:
                await _asgi_stream(reply, receive, send)
        finally:
            slots.release()

    return application


async def _send_whole(reply: Reply, send: Send) -> None:
    headers = reply.headers + [("Content-Length", str(len(reply.body)))]
    await send({"type": "http.response.start", "status": reply.status,
                "headers": _encoded(headers)})
    await send({"type": "http.response.body", "body": reply.body})


async def _off_loop(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on a thread of its own, awaited."""
    loop = asyncio.get_running_loop()
    future: "asyncio.Future[Any]" = loop.create_future()

    def settle(value: Any, error: Optional[BaseException]) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def run() -> None:
        try:
            value, error = function(*args), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop has closed: nobody awaits the answer
            pass

    threading.Thread(target=run, name="nacelle-mcp-request", daemon=True).start()
    return await future


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _asgi_reply(endpoint: Endpoint, scope: Scope, receive: Receive, max_body: int) -> Reply:
    method = str(scope.get("method", "GET")).upper()
    headers: Dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip(" \t")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    principal = endpoint.check(method, headers, scope)
    if isinstance(principal, Reply):
        return principal
    body = b""
    if method == "POST":
        try:
            declared = content_length(headers.get("content-length"))
        except ValueError as exc:
            return _refusal(400, str(exc))
        if declared is not None and declared > max_body:
            return _too_large(max_body)
        found = await _asgi_body(receive, max_body)
        if found is None:
            return _too_large(max_body)
        body = found
    reply: Reply = await _off_loop(endpoint.respond, method, headers, body, principal)
    return reply


async def _asgi_body(receive: Receive, limit: int) -> Optional[bytes]:
    parts: List[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(parts)


async def _asgi_stream(reply: Reply, receive: Receive, send: Send) -> None:
    """Send ``reply.stream`` as a thread makes it, cancelling the call the moment the
    client disconnects."""
    assert reply.stream is not None
    loop = asyncio.get_running_loop()
    chunks = reply.stream
    inbox: "asyncio.Queue[Optional[bytes]]" = asyncio.Queue()

    def pump() -> None:
        try:
            for chunk in chunks:
                loop.call_soon_threadsafe(inbox.put_nowait, chunk)
        except Exception:  # noqa: BLE001 - the stream ends; the log says why
            log.exception("a streamed MCP answer failed")
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
            try:
                loop.call_soon_threadsafe(inbox.put_nowait, None)
            except RuntimeError:  # the loop has closed
                pass

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        reply.cancel.set()
        inbox.put_nowait(None)

    watcher = asyncio.ensure_future(watch())
    finished = False
    try:
        await send({"type": "http.response.start", "status": reply.status,
                    "headers": _encoded(reply.headers)})
        threading.Thread(target=pump, name="nacelle-mcp-stream", daemon=True).start()
        while True:
            chunk = await inbox.get()
            if chunk is None:
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if not reply.cancel.is_set():
            finished = True
            await send({"type": "http.response.body", "body": b""})
    except OSError as exc:
        log.debug("the client left a streamed MCP answer: %s", type(exc).__name__)
    finally:
        watcher.cancel()
        if not finished:
            reply.cancel.set()


def _encoded(headers: List[Any]) -> List[List[bytes]]:
    return [[name.lower().encode("latin-1"), value.encode("latin-1")] for name, value in headers]
