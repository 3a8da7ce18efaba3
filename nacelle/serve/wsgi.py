"""The WSGI app: :func:`wsgi_app`, for the standard library's server, gunicorn and any
other WSGI server.

A run is returned as a generator of SSE chunks (:func:`~nacelle.serve.encode.sse`),
which every WSGI server writes as it is produced; the headers ask proxies not to
buffer it (``X-Accel-Buffering: no`` for nginx, ``Cache-Control: no-cache``). When the
client goes away the server's write fails and it closes the generator (PEP 3333), and
closing it cancels the run: the backend's response is closed, and running tools see
``ctx.cancelled``. A write only fails once the peer is gone, which for a silent run
would wait for the next keepalive, so the app also watches the client's socket while
it streams, when the server hands it over (``gunicorn.socket``, which gunicorn sets,
or ``nacelle.socket``, which :func:`~nacelle.serve.serve` sets): one thread waits on
every streaming socket at once, and a socket that reads as closed (EOF) cancels its
run at once. A client that half-closes its side (``shutdown(SHUT_WR)``) while it
still reads looks the same, and no browser or SSE client does that.

Choices where PEP 3333 is silent or leaves it to the app:

- ``Content-Length`` is read by RFC 9112's rule (:func:`~nacelle.read_limits.content_length`):
  ASCII digits only, so ``²``, which ``int()`` reads as 2, is a 400.
- More than ``max_runs`` runs at once (started or resumed): 503 with ``Retry-After``;
  a run holds its place until its events end, even after its client left.
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

import selectors
import socket
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, Mapping, Optional, Sequence

from .._loggers import get_logger
from ..read_limits import content_length
from ..sessions import Store
from .encode import sse
from .routes import REASONS, MakeAgent, Reply, Routes, error

__all__ = ["wsgi_app"]

log = get_logger(__name__)

_CHUNK = 65536


def wsgi_app(make_agent: MakeAgent, *, store: Optional[Store] = None,
             authorize: Optional[Callable[[Any], "bool | str"]] = None,
             max_body: int = 1_000_000, keepalive: float = 15.0,
             key: "str | bytes | None" = None,
             allowed_hosts: Sequence[str] = (), max_runs: int = 16,
             preview: Optional[Callable[[str, Mapping[str, Any]], str]] = None,
             ) -> Callable[..., Iterable[bytes]]:
    """A WSGI application serving ``make_agent``'s runs (routes: ``routes.py``).

    ``make_agent()`` (or ``make_agent(info)``, see :class:`~nacelle.serve.RequestInfo`)
    makes the Agent of each run; ``store`` keeps paused runs' checkpoints and named
    sessions (a :class:`~nacelle.sessions.FileStore`, or anything with its
    ``save_checkpoint``/``take_checkpoint`` and, for sessions, ``load``/``save``;
    None: a :class:`~nacelle.sessions.MemoryStore`, gone with the process and never
    shared between workers); ``authorize(environ)`` returning True lets a request in,
    a non-empty str lets it in as that principal — whose sessions and paused runs no
    other principal can reach (404) — and anything else answers 401 (no hook: every
    request is let in — bind to loopback, or give one); ``max_runs`` caps the runs
    going at once (503 with ``Retry-After`` past it); ``key`` signs the stored
    checkpoints; ``keepalive`` is the seconds of silence before a ``: keepalive``;
    ``allowed_hosts`` names the hosts it answers to besides IP addresses and
    ``localhost`` (``"chat.example.com"``, ``".example.com"``, or ``"*"`` behind a
    proxy that checks the host itself): any other ``Host`` is a 400, which stops DNS
    rebinding (``routes.py``); ``preview(name, input)`` says what approving a paused
    call would do, shown in the page's approval card
    (:meth:`nacelle.toolsets.LocalTools.preview` for the local tools).
    """
    if not keepalive > 0:
        raise ValueError(f"keepalive must be a positive number of seconds, got {keepalive!r}")
    routes = Routes(make_agent, store=store, authorize=authorize, max_body=max_body, key=key,
                    allowed_hosts=allowed_hosts, max_runs=max_runs, preview=preview)

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
        return _Stream(reply, sse(reply.items, keepalive=keepalive, cancel=reply.cancel),
                       _client_socket(environ))

    return application


def _reply(routes: Routes, environ: Dict[str, Any]) -> Reply:
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    path = str(environ.get("PATH_INFO", "")) or "/"
    headers = {key[5:].replace("_", "-").lower(): str(value)
               for key, value in environ.items() if key.startswith("HTTP_")}
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers[key.replace("_", "-").lower()] = str(environ[key])
    principal = routes.check(method, path, headers, environ)
    if isinstance(principal, Reply):
        return principal
    body = _body(routes, environ)
    if isinstance(body, Reply):
        return body
    client = str(environ.get("REMOTE_ADDR", ""))
    return routes.respond(method, path, headers, client, body, environ, principal)


def _body(routes: Routes, environ: Dict[str, Any]) -> "bytes | Reply":
    """The request body within ``max_body``, or the reply refusing it."""
    stream = environ["wsgi.input"]
    declared = str(environ.get("CONTENT_LENGTH") or "").strip()
    if declared:
        try:
            length = content_length(declared)
        except ValueError as exc:
            return error(400, str(exc))
        assert length is not None
        if length > routes.max_body:
            return routes.too_large()
        return _read(stream, length)
    if environ.get("wsgi.input_terminated"):
        data = _read(stream, routes.max_body + 1)
        return data if isinstance(data, Reply) or len(data) <= routes.max_body else routes.too_large()
    if environ.get("HTTP_TRANSFER_ENCODING"):
        return error(411, "send the body with a Content-Length")
    return b""


def _read(stream: Any, length: int) -> "bytes | Reply":
    body = read_body(stream, length)
    return error(408, "the body did not arrive in time") if body is None else body


def read_body(stream: Any, length: int) -> Optional[bytes]:
    """Up to ``length`` bytes of a WSGI request body, read in chunks; None when the read
    failed (the server's read timed out, or the client left). The MCP server's WSGI app
    reads its bodies with it too."""
    parts, left = [], length
    while left > 0:
        try:
            chunk = stream.read(min(left, _CHUNK))
        except OSError as exc:
            log.info("a request's body did not arrive: %s", type(exc).__name__)
            return None
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


class _Stream:
    """The SSE body a WSGI server iterates: ``chunks``, with the client's socket
    watched meanwhile (when there is one), and the run's place under ``max_runs``
    given back if the server drops the stream before it started."""

    def __init__(self, reply: Reply, chunks: Iterator[bytes], sock: Optional[socket.socket]) -> None:
        self._reply = reply
        self._chunks = chunks
        self._sock = sock
        self._started = False

    def __iter__(self) -> "_Stream":
        return self

    def __next__(self) -> bytes:
        if not self._started:
            self._started = True
            if self._sock is not None and self._reply.cancel is not None:
                _WATCHER.watch(self._sock, self._reply.cancel.set)
        return next(self._chunks)

    def close(self) -> None:
        if self._sock is not None:
            _WATCHER.forget(self._sock)
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
        if not self._started:
            self._reply.release()


def _client_socket(environ: Dict[str, Any]) -> Optional[socket.socket]:
    sock = environ.get("nacelle.socket") or environ.get("gunicorn.socket")
    if not isinstance(sock, socket.socket) or type(sock).__name__ == "SSLSocket":
        return None  # a TLS socket cannot be peeked at: the keepalive's write finds out
    return sock


class _Watcher:
    """One thread that waits on every streaming client's socket and calls its
    ``gone`` when the socket reads as closed. A client sends nothing more once its
    request is in, so a readable socket is an EOF (or an error: gone too), or —
    rarely — bytes sent early, after which it is left to the keepalive's write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: Dict[int, Any] = {}
        self._selector: Optional[selectors.BaseSelector] = None
        self._thread: Optional[threading.Thread] = None
        self._wake = threading.Event()

    def watch(self, sock: socket.socket, gone: Callable[[], None]) -> None:
        with self._lock:
            if self._selector is None or self._thread is None or not self._thread.is_alive():
                self._selector = selectors.DefaultSelector()
                self._watched.clear()
                self._thread = threading.Thread(target=self._run, args=(self._selector,),
                                                name="nacelle-serve-watch", daemon=True)
                self._thread.start()
            try:
                self._selector.register(sock, selectors.EVENT_READ, gone)
            except (ValueError, KeyError, OSError):  # closed already, or watched
                return
            self._watched[id(sock)] = sock
            self._wake.set()

    def forget(self, sock: socket.socket) -> None:
        with self._lock:
            if self._watched.pop(id(sock), None) is not None and self._selector is not None:
                try:
                    self._selector.unregister(sock)
                except (ValueError, KeyError, OSError):
                    pass

    def _run(self, selector: selectors.BaseSelector) -> None:
        while True:
            with self._lock:
                empty = not self._watched
                if empty:
                    self._wake.clear()
            if empty:
                # Nothing to wait on (select() of nothing fails on Windows): sleep until
                # a socket is watched.
                self._wake.wait(5.0)
                continue
            try:
                ready = selector.select(0.1)
            except OSError:
                ready = []
            for key, _ in ready:
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    closed = sock.recv(1, socket.MSG_PEEK | getattr(socket, "MSG_DONTWAIT", 0)) == b""
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    closed = True
                self.forget(sock)
                if closed:
                    log.debug("a streaming client closed its connection; cancelling its run")
                    key.data()


_WATCHER = _Watcher()
