"""The WSGI app: :func:`wsgi_app`, for the standard library's server, gunicorn and any
other WSGI server.

A run is returned as a generator of SSE chunks (:func:`~nacelle.serve.encode.sse`),
which every WSGI server writes as it is produced; the headers ask proxies not to
buffer it (``X-Accel-Buffering: no`` for nginx, ``Cache-Control: no-cache``). When the
client goes away the server's write fails and it closes the generator (PEP 3333), and
closing it cancels the run: the backend's response is closed, and running tools see
``ctx.cancelled``. A write only fails once the peer is gone, so the keepalive
interval bounds how long a silent run goes on for a client that left.

Choices where PEP 3333 is silent or leaves it to the app:

- A POST needs ``Content-Length`` (411 otherwise) unless the server says the input
  ends by itself (``wsgi.input_terminated``, which gunicorn sets for chunked bodies);
  reading past a length the app does not know could block for ever.
- A declared length past ``max_body`` is refused before a byte is read; an
  undeclared one is read up to ``max_body`` + 1 bytes and refused there.
- Anything the routes did not foresee is a 500 with a JSON body, logged here. Once
  a stream has begun, a failure is an ``error`` event instead (the status is gone).

Under gunicorn use the threaded worker (``--worker-class gthread --threads N``): a
sync worker holds its one thread for the whole run, and a run streams for as long as
the model and its tools take. Paused runs survive across workers and restarts when
``store`` is a directory every worker shares (a :class:`~nacelle.sessions.FileStore`).

Outer ring: imports the standard library and nacelle's core.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Iterable, Optional, Sequence

from .encode import sse
from .routes import REASONS, Reply, Routes, error

__all__ = ["wsgi_app"]

log = logging.getLogger(__name__)

_CHUNK = 65536


def wsgi_app(make_agent: Any, *, store: Any, authorize: Optional[Callable[[Any], bool]] = None,
             max_body: int = 1_000_000, keepalive: float = 15.0,
             key: "str | bytes | None" = None,
             allowed_hosts: Sequence[str] = ()) -> Callable[..., Iterable[bytes]]:
    """A WSGI application serving ``make_agent``'s runs (routes: ``routes.py``).

    ``make_agent()`` (or ``make_agent(info)``, see :class:`~nacelle.serve.RequestInfo`)
    makes the Agent of each run; ``store`` keeps paused runs' checkpoints and named
    sessions (a :class:`~nacelle.sessions.FileStore`, or anything with its
    ``save_checkpoint``/``take_checkpoint`` and, for sessions, ``load``/``save``);
    ``authorize(environ)`` returning anything but True answers 401 (no hook: every
    request is let in — bind to loopback, or give one); ``key`` signs the stored
    checkpoints; ``keepalive`` is the seconds of silence before a ``: keepalive``;
    ``allowed_hosts`` names the hosts it answers to besides IP addresses and
    ``localhost`` (``"chat.example.com"``, ``".example.com"``, or ``"*"`` behind a
    proxy that checks the host itself): any other ``Host`` is a 400, which stops DNS
    rebinding (``routes.py``).
    """
    if not keepalive > 0:
        raise ValueError(f"keepalive must be a positive number of seconds, got {keepalive!r}")
    routes = Routes(make_agent, store=store, authorize=authorize, max_body=max_body, key=key,
                    allowed_hosts=allowed_hosts)

    def application(environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            reply = _reply(routes, environ)
        except Exception:  # noqa: BLE001 - the client gets a 500, the log the reason
            log.exception("serving %s %s failed", environ.get("REQUEST_METHOD"),
                          environ.get("PATH_INFO"))
            reply = error(500, "the server failed to answer; its log says why")
        status = f"{reply.status} {REASONS.get(reply.status, 'Error')}"
        if reply.items is None:
            start_response(status, reply.headers + [("Content-Length", str(len(reply.body)))])
            return [reply.body]
        start_response(status, reply.headers)
        return sse(reply.items, keepalive=keepalive, cancel=reply.cancel)

    return application


def _reply(routes: Routes, environ: Dict[str, Any]) -> Reply:
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    path = str(environ.get("PATH_INFO", "")) or "/"
    headers = {key[5:].replace("_", "-").lower(): str(value)
               for key, value in environ.items() if key.startswith("HTTP_")}
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers[key.replace("_", "-").lower()] = str(environ[key])
    early = routes.check(method, path, headers, environ)
    if early is not None:
        return early
    body = _body(routes, environ)
    if isinstance(body, Reply):
        return body
    client = str(environ.get("REMOTE_ADDR", ""))
    return routes.respond(method, path, headers, client, body, environ)


def _body(routes: Routes, environ: Dict[str, Any]) -> "bytes | Reply":
    """The request body within ``max_body``, or the reply refusing it."""
    stream = environ["wsgi.input"]
    declared = str(environ.get("CONTENT_LENGTH") or "").strip()
    if declared:
        if not declared.isdigit():
            return error(400, "Content-Length must be a number of bytes")
        length = int(declared)
        if length > routes.max_body:
            return routes.too_large()
        return _read(stream, length)
    if environ.get("wsgi.input_terminated"):
        data = _read(stream, routes.max_body + 1)
        return routes.too_large() if len(data) > routes.max_body else data
    if environ.get("HTTP_TRANSFER_ENCODING"):
        return error(411, "send the body with a Content-Length")
    return b""


def _read(stream: Any, length: int) -> bytes:
    parts, left = [], length
    while left > 0:
        chunk = stream.read(min(left, _CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
