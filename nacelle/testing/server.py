"""FakeServer: a real HTTP server on loopback that plays scripted, byte-exact replies.

Anything about streaming, timing, dropped connections or retries is only believable
against a real socket, so this is a real ``ThreadingHTTPServer`` on 127.0.0.1 and a
free port — never another address. A test scripts replies per path and reads back
what the client sent::

    with FakeServer() as server:
        server.queue("/v1/messages", Reply(status=529), Reply(chunks=anthropic_stream()))
        ...  # point a backend at server.url
        assert server.requests[0].json()["stream"] is True
        server.assert_consumed()

:class:`Reply` says how to send the body: ``mode="chunked"`` (one HTTP chunk per item,
flushed as written), ``"close"`` (no length, the body ends when the server closes the
connection — what some proxies send), ``"length"`` (a ``Content-Length``) or ``"raw"``
(the chunks are the body's bytes exactly as they go on the wire, framed by whatever
``headers`` say — no ``Content-Length``, ``Transfer-Encoding`` or ``Connection`` is
added — and the connection stays open for the next request, so a client that reads
a broken framing wrongly waits as it would on a real keep-alive connection). A chunk
is ``bytes`` or ``(bytes, delay_seconds)``, the delay waited *before* it is written,
so a stall is a chunk with a long delay. ``drop_after=k`` closes the connection
abruptly after chunk k is written (``0``: before the status line).

A server that is slow without ever going silent is scripted by trickling:
``head_trickle=s`` writes the status line and the headers one byte at a time, ``s``
seconds before each byte, so every read of the head succeeds within any read timeout
longer than ``s`` while the whole head takes about a hundred times ``s``. In
``"raw"`` mode the same is done to any part of the body with one-byte chunks, a
chunk-size line say::

    size_line = [(bytes([b]), 0.2) for b in b"0" * 150 + b"9\\r\\n"]
    Reply(mode="raw", headers={"Transfer-Encoding": "chunked"},
          chunks=[b"9\\r\\ndata: a\\n\\n\\r\\n"] + size_line + [b"data: b\\n\\n\\r\\n0\\r\\n\\r\\n"])

A trickle, like a delay, ends as soon as the client goes away.

Choices where the spec is silent:

- Replies are matched on the path alone (not the query string or method), in the
  order queued. A request with nothing queued for its path gets a 500 JSON error
  naming the path, is recorded in ``requests`` and ``unexpected``, and makes
  :meth:`FakeServer.assert_consumed` fail — a stray request never passes silently.
- Header names in :class:`RecordedRequest` are lower-cased (HTTP header names are
  case-insensitive; a plain dict is easier to assert on than a case-folding one).
- While a reply waits out a delay the server watches its socket, so a client that
  goes away is noticed at once, not at the next write: ``disconnects`` counts replies
  the client abandoned, and :meth:`FakeServer.wait_disconnects` waits for them.
- ``stop()`` is prompt even with stalled replies or idle keep-alive connections: delays
  are waited on a stop flag, and open sockets are shut down.
- :meth:`FakeServer.batches` adds the providers' batch APIs (``testing/batches.py``),
  served for their paths when nothing is queued there (a queued reply still wins, so
  a test can script a 429 in the middle of a batch's polling).
- Errors while serving are logged on this module's logger, never printed (a client
  resetting a connection is DEBUG).

Public (``nacelle.testing``); imports the standard library and ``testing.batches``
beside it (itself standard library only), and is never imported by the core.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union, cast

from .._loggers import get_logger
from .batches import FakeBatches

__all__ = ["FakeServer", "RecordedRequest", "Reply"]

log = get_logger(__name__)

Chunk = Union[bytes, Tuple[bytes, float]]

_MODES = ("chunked", "close", "length", "raw")


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP response. See the module docstring for ``mode``, ``chunks``,
    ``drop_after`` and ``head_trickle``; ``headers`` are sent as given, after
    ``Content-Type`` (which a ``content-type`` entry in ``headers`` replaces)."""

    status: int = 200
    headers: Optional[Mapping[str, str]] = None
    chunks: Sequence[Chunk] = ()
    mode: str = "chunked"
    drop_after: Optional[int] = None
    content_type: str = "text/event-stream"
    head_trickle: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.status, int) or not 100 <= self.status <= 599:
            raise ValueError(f"Reply status must be an int in 100..599, got {self.status!r}")
        if self.mode not in _MODES:
            raise ValueError(f"Reply mode must be one of {', '.join(_MODES)}; got {self.mode!r}")
        if isinstance(self.chunks, (bytes, str)):
            raise TypeError("Reply chunks must be a sequence of chunks, not one bytes/str value")
        chunks = tuple(_check_chunk(c, i) for i, c in enumerate(self.chunks))
        object.__setattr__(self, "chunks", chunks)
        headers = dict(self.headers or {})
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError(f"Reply header names and values must be str, got {name!r}: {value!r}")
        object.__setattr__(self, "headers", headers)
        trickle = self.head_trickle
        if isinstance(trickle, bool) or not isinstance(trickle, (int, float)) or not trickle >= 0:
            raise ValueError(f"Reply head_trickle must be seconds >= 0, got {trickle!r}")
        if self.drop_after is not None and (
            not isinstance(self.drop_after, int) or not 0 <= self.drop_after <= len(chunks)
        ):
            raise ValueError(
                f"Reply drop_after must be an int in 0..{len(chunks)} (the number of chunks "
                f"to write before dropping), got {self.drop_after!r}"
            )

    @classmethod
    def json(cls, value: Any, status: int = 200, headers: Optional[Mapping[str, str]] = None) -> "Reply":
        """A JSON body with a ``Content-Length`` — an error response, or a count."""
        body = json.dumps(value).encode("utf-8")
        return cls(status=status, headers=headers, chunks=(body,), mode="length",
                   content_type="application/json")

    @property
    def frames(self) -> Tuple[Tuple[bytes, float], ...]:
        """The chunks as ``(bytes, delay)`` pairs (``__post_init__`` made them so)."""
        return cast(Tuple[Tuple[bytes, float], ...], self.chunks)

    @property
    def body(self) -> bytes:
        """The whole body, delays ignored."""
        return b"".join(data for data, _ in self.frames)


def _check_chunk(chunk: Chunk, index: int) -> Tuple[bytes, float]:
    if isinstance(chunk, bytes):
        return chunk, 0.0
    if (isinstance(chunk, tuple) and len(chunk) == 2 and isinstance(chunk[0], bytes)
            and isinstance(chunk[1], (int, float)) and not isinstance(chunk[1], bool)
            and chunk[1] >= 0):
        return chunk[0], float(chunk[1])
    raise TypeError(
        f"Reply chunk {index} must be bytes or (bytes, delay_seconds >= 0), got {chunk!r}"
    )


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received: ``headers`` has lower-cased names, ``body`` is
    the raw bytes, ``connection`` numbers the TCP connection it came on (from 1)."""

    method: str
    path: str
    headers: Dict[str, str]
    body: bytes
    query: str = ""
    connection: int = 0
    served: bool = field(default=True, repr=False)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body.decode("utf-8"))


class _ClientGone(Exception):
    pass


class FakeServer:
    """A loopback HTTP server playing scripted replies. Start it with :meth:`start` or
    ``with``; point clients at :attr:`url`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._replies: Dict[str, Deque[Reply]] = {}
        self._requests: List[RecordedRequest] = []
        self._connections = 0
        self._disconnects = 0
        self._sockets: Set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._batches: Optional[FakeBatches] = None

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> "FakeServer":
        """Bind 127.0.0.1 on a free port and serve in a background thread."""
        if self._httpd is not None:
            raise RuntimeError("FakeServer already started")
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.fake = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
            name=f"FakeServer:{self.port}", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving at once: stalled replies give up and open connections close."""
        httpd = self._httpd
        if httpd is None:
            return
        self._stopping.set()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._httpd = None

    def __enter__(self) -> "FakeServer":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.url if self._httpd is not None else "not started"
        return f"<FakeServer {where}, {len(self.requests)} requests>"

    # -- what tests use -------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeServer is not started; call start() or use 'with'")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def queue(self, path: str, *replies: Reply) -> None:
        """Script ``replies`` for requests to ``path``, served in order."""
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"queue() takes a path starting with '/', got {path!r}")
        for reply in replies:
            if not isinstance(reply, Reply):
                raise TypeError(f"queue() takes Reply values, got {type(reply).__name__}")
        with self._lock:
            self._replies.setdefault(path.split("?", 1)[0], deque()).extend(replies)

    def batches(self, answer: Any, **options: Any) -> FakeBatches:
        """Serve Anthropic Message Batches and OpenAI Batch (with its files), each
        request answered by ``answer(endpoint, params)``; ``options`` are
        :class:`~nacelle.testing.batches.FakeBatches`'s (``polls``, ``expire``,
        ``error``, ``fail``, ``retry_after``). Returns it, to assert on or steer."""
        fake = FakeBatches(answer, **options)
        with self._lock:
            self._batches = fake
        return fake

    @property
    def requests(self) -> List[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def unexpected(self) -> List[RecordedRequest]:
        """Requests that found nothing queued for their path (answered with a 500)."""
        return [r for r in self.requests if not r.served]

    @property
    def pending(self) -> Dict[str, int]:
        """How many queued replies each path still has (paths with none left omitted)."""
        with self._lock:
            return {path: len(q) for path, q in self._replies.items() if q}

    @property
    def connections(self) -> int:
        """TCP connections accepted so far (keep-alive reuse shows as fewer than requests)."""
        with self._lock:
            return self._connections

    @property
    def disconnects(self) -> int:
        """Replies the client abandoned before they were fully written."""
        with self._lock:
            return self._disconnects

    def wait_disconnects(self, count: int = 1, timeout: float = 1.0) -> bool:
        """Wait until ``disconnects`` reaches ``count``; False if ``timeout`` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: self._disconnects >= count, timeout)

    def wait_requests(self, count: int = 1, timeout: float = 1.0) -> bool:
        """Wait until ``count`` requests have arrived; False if ``timeout`` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._requests) >= count, timeout)

    def assert_consumed(self) -> None:
        """Fail unless every queued reply was served and no request was unexpected."""
        problems = []
        for request in self.unexpected:
            problems.append(f"unexpected {request.method} {request.path} (nothing queued)")
        for path, left in self.pending.items():
            problems.append(f"{left} queued repl{'y' if left == 1 else 'ies'} for {path} never requested")
        if problems:
            raise AssertionError("FakeServer: " + "; ".join(problems))

    # -- used by the handler ----------------------------------------------------------

    def _connected(self, sock: socket.socket) -> int:
        with self._lock:
            self._connections += 1
            self._sockets.add(sock)
            return self._connections

    def _disconnected(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def _take(self, method: str, target: str, headers: Dict[str, str], body: bytes,
              connection: int) -> Optional[Reply]:
        path, _, query = target.partition("?")
        with self._changed:
            replies = self._replies.get(path)
            reply = replies.popleft() if replies else None
            if reply is None and self._batches is not None:
                made = self._batches.handle(method, path, headers, body)
                if made is not None:
                    status, extra, data, media = made
                    reply = Reply(status=status, headers=extra, chunks=(data,), mode="length",
                                  content_type=media)
            self._requests.append(RecordedRequest(
                method, path, headers, body, query, connection, served=reply is not None))
            self._changed.notify_all()
        return reply

    def _abandoned(self) -> None:
        with self._changed:
            self._disconnects += 1
            self._changed.notify_all()


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver prints the traceback to stderr; a library logs instead. A client
        # resetting an idle keep-alive connection (it closed a response it had not read
        # to its very end) is ordinary, hence DEBUG.
        error = sys.exc_info()[1]
        level = logging.DEBUG if isinstance(error, ConnectionError) else logging.ERROR
        log.log(level, "error serving %s", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked replies
    server_version = "FakeServer"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # Each chunk must leave at once: with Nagle's algorithm a small write waits for
        # the client's delayed ACK of the previous one (~40 ms), which hides latency bugs.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fake: FakeServer = self.server.fake  # type: ignore[attr-defined]
        self.number = self.fake._connected(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.fake._disconnected(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET

    def _serve(self) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        body = self._read_body(headers)
        reply = self.fake._take(self.command, self.path, headers, body, self.number)
        if reply is None:
            reply = Reply.json(
                {"error": {"type": "fake_server_error",
                           "message": f"FakeServer: nothing queued for {self.command} {self.path}"}},
                status=500,
            )
        try:
            self._send(reply)
        except (_ClientGone, OSError):
            # The client closed while we waited or wrote: it abandoned the reply
            # (unless the server itself is stopping).
            self.close_connection = True
            if not self.fake._stopping.is_set():
                self.fake._abandoned()

    def _read_body(self, headers: Dict[str, str]) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts: List[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, reply: Reply) -> None:
        chunks = reply.frames
        headers = reply.headers or {}
        if reply.drop_after == 0:
            self._wait(chunks[0][1] if chunks else 0.0)
            return self._drop()
        self.send_response(reply.status)
        names = {name.lower() for name in headers}
        if reply.content_type and "content-type" not in names:
            self.send_header("Content-Type", reply.content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        if reply.mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        elif reply.mode == "length":
            self.send_header("Content-Length", str(len(reply.body)))
        elif reply.mode == "close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self._head_trickle = reply.head_trickle
        self.end_headers()
        for index, (data, delay) in enumerate(chunks):
            self._wait(delay)
            if data:  # an empty HTTP chunk would end the body; an empty chunk is a pause
                frame = b"%x\r\n%s\r\n" % (len(data), data) if reply.mode == "chunked" else data
                self.wfile.write(frame)
            if reply.drop_after == index + 1:
                return self._drop()
        if reply.mode == "chunked":
            self.wfile.write(b"0\r\n\r\n")

    _head_trickle = 0.0

    def flush_headers(self) -> None:
        # BaseHTTPRequestHandler gathers the status line and headers in _headers_buffer
        # and writes them here at once; a trickled head goes out a byte at a time.
        buffer = getattr(self, "_headers_buffer", None)
        if buffer is None:
            return
        head = b"".join(buffer)
        buffer.clear()
        trickle, self._head_trickle = self._head_trickle, 0.0  # this reply's head only
        if trickle <= 0:
            self.wfile.write(head)
            return
        for index in range(len(head)):
            self._wait(trickle)
            self.wfile.write(head[index:index + 1])

    def _wait(self, delay: float) -> None:
        """Wait ``delay`` seconds, watching for the client leaving and for stop()."""
        deadline = time.monotonic() + delay
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.fake._stopping.is_set():
                raise _ClientGone()
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.02))
            if readable:
                try:
                    peek = self.connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    peek = b""
                if not peek:
                    raise _ClientGone()
                # Bytes from the client mid-reply (a pipelined request): nothing to do
                # but keep waiting without spinning on the readable socket.
                time.sleep(min(left, 0.02))

    def _drop(self) -> None:
        self.close_connection = True
        _shutdown(self.connection)
