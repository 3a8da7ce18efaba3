"""The ASGI app: :func:`asgi_app`, the same routes for uvicorn, hypercorn and friends.

The agent is synchronous, so nothing of a run happens on the event loop: the
request's preparation (``make_agent``, loading a session, taking a checkpoint — file
I/O with fsyncs and locks) runs in the loop's default executor, and the run itself
on a worker thread (:class:`~nacelle.serve.encode.Pump`) that hands each encoded
event to the loop with ``call_soon_threadsafe``. Only asyncio and the standard
library are used, so no framework is needed.

Each event is sent as soon as it arrives, with ``more_body=True``; ``: keepalive``
goes out after ``keepalive`` seconds of silence. While streaming, the app also
watches ``receive()``: ``http.disconnect`` — or a ``send`` that fails — sets the
run's cancel event at once (sooner than WSGI, which only learns of it at a write),
and the response ends without its final empty body.

``Content-Length`` is read by RFC 9112's rule (:func:`~nacelle.read_limits.content_length`,
a 400 otherwise), as the WSGI app does; so are ``max_runs`` and principals.

``lifespan`` events are answered (there is nothing to start or stop); a
``websocket`` connection is closed. The ``authorize`` hook gets the ASGI scope.

Outer ring: imports the standard library and nacelle's core.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, List, Mapping, MutableMapping, Optional, Sequence

from .._loggers import get_logger
from ..read_limits import content_length
from ..sessions import Store
from .encode import END, KEEPALIVE, Pump
from .routes import MakeAgent, Reply, Routes, error

__all__ = ["asgi_app"]

log = get_logger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Dict[str, Any]]]
Send = Callable[[Dict[str, Any]], Awaitable[None]]


def asgi_app(make_agent: MakeAgent, *, store: Optional[Store] = None,
             authorize: Optional[Callable[[Any], "bool | str"]] = None,
             max_body: int = 1_000_000, keepalive: float = 15.0,
             key: "str | bytes | None" = None, allowed_hosts: Sequence[str] = (),
             max_runs: int = 16,
             preview: Optional[Callable[[str, Mapping[str, Any]], str]] = None,
             ) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """An ASGI 3 application; the arguments are :func:`~nacelle.serve.wsgi_app`'s
    (``authorize`` is given the scope)."""
    if not keepalive > 0:
        raise ValueError(f"keepalive must be a positive number of seconds, got {keepalive!r}")
    routes = Routes(make_agent, store=store, authorize=authorize, max_body=max_body, key=key,
                    allowed_hosts=allowed_hosts, max_runs=max_runs, preview=preview)

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await _lifespan(receive, send)
            return
        if kind == "websocket":
            await send({"type": "websocket.close", "code": 1003})
            return
        if kind != "http":
            return
        try:
            reply = await _reply(routes, scope, receive)
        except Exception:  # noqa: BLE001 - the client gets a 500, the log the reason
            log.exception("serving %s %s failed", scope.get("method"), scope.get("path"))
            reply = error(500, "the server failed to answer; its log says why")
        if reply.items is None:
            headers = reply.headers + [("Content-Length", str(len(reply.body)))]
            await send({"type": "http.response.start", "status": reply.status,
                        "headers": _encoded(headers)})
            await send({"type": "http.response.body", "body": reply.body})
            return
        await _stream(reply, receive, send, keepalive)

    return application


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _reply(routes: Routes, scope: Scope, receive: Receive) -> Reply:
    method = str(scope.get("method", "GET")).upper()
    path = str(scope.get("path", "")) or "/"
    headers: Dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    loop = asyncio.get_running_loop()
    principal = routes.check(method, path, headers, scope)
    if isinstance(principal, Reply):
        return principal
    try:
        declared = content_length(headers.get("content-length"))
    except ValueError as exc:
        return error(400, str(exc))
    if declared is not None and declared > routes.max_body:
        return routes.too_large()
    body = await _body(receive, routes.max_body)
    if body is None:
        return routes.too_large()
    client = scope.get("client") or ("", 0)
    return await loop.run_in_executor(
        None, routes.respond, method, path, headers, str(client[0]), body, scope, principal)


async def _body(receive: Receive, limit: int) -> Optional[bytes]:
    """The whole body, or None past ``limit`` bytes (reading stops there)."""
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


async def _stream(reply: Reply, receive: Receive, send: Send, keepalive: float) -> None:
    assert reply.items is not None
    loop = asyncio.get_running_loop()
    inbox: "asyncio.Queue[Any]" = asyncio.Queue()

    def deliver(item: Any) -> None:
        try:
            loop.call_soon_threadsafe(inbox.put_nowait, item)
        except RuntimeError:  # the loop has closed: the server is gone, and so is the client
            pass

    pump = Pump(reply.items, deliver)
    gone = asyncio.Event()

    async def watch() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
                return

    watcher = asyncio.ensure_future(watch())
    finished = started = False
    try:
        await send({"type": "http.response.start", "status": reply.status,
                    "headers": _encoded(reply.headers)})
        pump.start()
        started = True
        while not gone.is_set():
            getter = asyncio.ensure_future(inbox.get())
            left = asyncio.ensure_future(gone.wait())
            done, _ = await asyncio.wait({getter, left}, timeout=keepalive,
                                         return_when=asyncio.FIRST_COMPLETED)
            left.cancel()
            if getter not in done:
                getter.cancel()
                if not done:
                    await send({"type": "http.response.body", "body": KEEPALIVE,
                                "more_body": True})
                continue
            item = getter.result()
            if item is END:
                finished = True
                await send({"type": "http.response.body", "body": b""})
                return
            await send({"type": "http.response.body", "body": item, "more_body": True})
    except (OSError, asyncio.CancelledError) as exc:
        log.debug("the client left a streamed run: %s", type(exc).__name__)
        if isinstance(exc, asyncio.CancelledError):
            raise
    finally:
        watcher.cancel()
        if not finished:
            log.debug("cancelling a run whose client left")
            pump.stop()
            if reply.cancel is not None:
                reply.cancel.set()
            if not started:  # the run never began: its place under max_runs is free
                reply.release()


def _encoded(headers: List[Any]) -> List[List[bytes]]:
    return [[name.lower().encode("latin-1"), value.encode("latin-1")] for name, value in headers]
