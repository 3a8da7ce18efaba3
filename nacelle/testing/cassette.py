"""Cassette: record a real agent's HTTP exchanges once, replay them offline byte for byte.

Evals and regression tests of a real agent need real answers, but CI has no key or
network, and a model asked twice answers differently. A cassette is a real
``ThreadingHTTPServer`` on 127.0.0.1, like FakeServer, that forwards requests to
``upstream`` saving each exchange to a JSON file you commit, or answers from that
file alone. Choices where the spec is silent:

- The file is ``{"version": 1, "exchanges": [{"request": ..., "response": ...}]}``,
  indented for review. A body or chunk is a string when it is UTF-8, else
  ``{"base64": ...}``; ``{"text" | "base64": ..., "delay": s}`` when timed. A chunk is
  one read of the upstream, replayed as one HTTP chunk, so SSE replays as a stream.
  Delays only with ``timing=True``: they slow tests and make re-recordings differ.
- Request headers named ``authorization``, ``x-api-key``, ``api-key``, ``cookie`` or
  anything with ``key``, ``token`` or ``secret`` in it, and query parameters so named,
  are saved as ``<scrubbed>``, and their values (8 characters or more) are replaced in
  the saved body and response (an error body may echo a key): in the response's
  headers and reason too, and across the reads of its body — a key the upstream
  echoed split over two reads is one ``<scrubbed>`` in the chunk where it began, and
  a body cut off inside a key loses that key's start. Response headers named
  ``authorization``, ``x-api-key``, ``api-key``, ``cookie`` are saved as
  ``<scrubbed>`` and ``set-cookie`` is dropped. The recording client gets the
  upstream's response unchanged. Requests are scrubbed before matching, so a dummy key matches a real one;
  headers are not matched (they carry keys and versions, not the question), nor are
  ``Host`` and ``Content-Length`` saved. Requests go upstream with ``Accept-Encoding:
  identity``, so bodies save as text; the client gets the headers as saved.
- The file is written (temporary file, fsync, rename) only when recording ends
  cleanly: an error in the ``with`` block, or an upstream not reached (a 502), leaves
  an earlier file alone. A body cut short is saved with ``"dropped": true`` and its
  replay closes the connection there. Errors the cassette answers (a mismatch is a
  400) carry ``x-should-retry: false``, so clients fail fast.

Public (``nacelle.testing``); imports the standard library, ``nacelle.bounded_json``,
``nacelle._files`` (the atomic write), ``nacelle.testing.server`` and ``_cassette_secrets`` (the scrubbing) only, and is never
imported by the core.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import logging
import os
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Collection, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union
from urllib.parse import parse_qsl, urlencode, urlsplit

from .._loggers import get_logger
from .. import bounded_json
from .._files import write_atomic
from ._cassette_secrets import (
    SCRUBBED, SHORTEST_SECRET, is_secret, redact, redact_chunks, redact_text, saved_header,
)
from .server import RecordedRequest, _shutdown

__all__ = ["Cassette"]

log = get_logger(__name__)

VERSION = 1
ENVIRONMENT = "NACELLE_CASSETTE"

Match = Union[Callable[[RecordedRequest], Any], Sequence[str]]
Chunk = Tuple[bytes, float]

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                         "proxy-connection", "te", "trailer", "trailers", "transfer-encoding",
                         "upgrade"})
_UNSAVED_REQUEST_HEADERS = _HOP_BY_HOP | {"host", "content-length"}
_UPSTREAM_TIMEOUT = 600.0  # a model's first token can take minutes


@dataclass
class _Exchange:
    """One request and its response as saved: ``chunks`` are ``(bytes, delay)``."""
    request: RecordedRequest
    status: int = 0
    reason: str = ""
    headers: List[str] = field(default_factory=list)  # "Name: value", in order
    chunks: List[Chunk] = field(default_factory=list)  # as read; scrubbed when saved
    dropped: bool = False
    secrets: Sequence[bytes] = ()  # the request's secret values, never saved


class Cassette:
    """Records exchanges with ``upstream`` (a base URL) to ``path`` when ``path`` does
    not exist or ``record=True``, else replays them (``record=None``: the variable
    ``NACELLE_CASSETTE=record|replay|auto`` decides). A request matching no recording is
    refused, naming how it differs from the nearest one; :meth:`assert_consumed` (run
    on leaving ``with``) raises that. Requests match on method, path, query and JSON
    body; ``match=`` is dotted body fields to ignore (``"metadata.user_id"``; ``*`` or
    a number steps into items) or a callable from a :class:`RecordedRequest` to a JSON
    value to compare. Identical requests replay their recordings in order."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], *, upstream: Optional[str] = None,
                 record: Optional[bool] = None, match: Match = (), timing: bool = False) -> None:
        if not isinstance(timing, bool):
            raise TypeError(f"Cassette timing must be True or False, got {timing!r}")
        self.path, self.timing = Path(path), timing
        parts = urlsplit(upstream) if isinstance(upstream, str) else None
        if upstream is not None and not (parts and parts.scheme in ("http", "https")
                                         and parts.hostname and not parts.query):
            raise ValueError(f"Cassette upstream must be an http(s) base URL such as "
                             f"https://api.anthropic.com, got {upstream!r}")
        self.upstream = upstream.rstrip("/") if upstream is not None else None
        self.mode = _choose_mode(self.path, self.upstream, record)
        self._key = _key_function(match)
        self._exchanges: List[_Exchange] = [] if self.mode == "record" else _load(self.path)
        self._keys = [_key_text(self._key(exchange.request)) for exchange in self._exchanges]
        self._queues: Dict[str, Deque[int]] = {}
        for index, key in enumerate(self._keys):
            self._queues.setdefault(key, deque()).append(index)
        self._lock = threading.Lock()
        self._requests: List[RecordedRequest] = []
        self._failures: List[str] = []
        self._sockets: Set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: Optional[ThreadingHTTPServer] = None

    def start(self) -> "Cassette":
        """Bind 127.0.0.1 on a free port and serve in a background thread."""
        if self._httpd is not None:
            raise RuntimeError("Cassette already started")
        self._httpd = httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.cassette = self  # type: ignore[attr-defined]
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                         name=f"Cassette:{self.port}", daemon=True).start()
        return self

    def stop(self, *, save: bool = True) -> None:
        """Stop serving at once; when recording, save unless ``save=False`` or a failure."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        with self._lock:
            for sock in list(self._sockets):
                _shutdown(sock)
        httpd.shutdown()
        httpd.server_close()
        if save and self.mode == "record" and not self.failures:  # assert_consumed says why
            self.save()

    __enter__ = start

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop(save=exc_type is None)
        if exc_type is None:  # else the block's own error is the one to see
            self.assert_consumed()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("Cassette is not started; call start() or use 'with'")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> List[RecordedRequest]:
        """Every request received so far, scrubbed as saved, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def failures(self) -> List[str]:
        """Why requests failed: no recording matched, or the upstream was not reached."""
        with self._lock:
            return list(self._failures)

    def assert_consumed(self) -> None:
        """Fail with :attr:`failures`, and for every recording never replayed."""
        with self._lock:
            problems = list(self._failures)
            left = sorted(index for queue in self._queues.values() for index in queue)
        if left:
            names = ", ".join(f"#{i + 1} {_describe(self._exchanges[i].request)}" for i in left)
            problems.append(f"{len(left)} recorded exchange{'s' if len(left) > 1 else ''} "
                            f"never replayed: {names}")
        if problems:
            raise AssertionError(f"Cassette {self.path}: " + "; ".join(problems))

    def save(self) -> None:
        """Write the exchanges recorded so far to :attr:`path`, atomically."""
        with self._lock:
            exchanges = [_exchange_to_json(e) for e in self._exchanges]
        document = {"version": VERSION, "exchanges": exchanges}
        _write_atomically(self.path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        log.debug("wrote cassette %s with %d exchanges", self.path, len(exchanges))

    def _connected(self, sock: socket.socket, open: bool) -> None:  # noqa: A002
        with self._lock:
            (self._sockets.add if open else self._sockets.discard)(sock)

    def _begin_recording(self, request: RecordedRequest) -> _Exchange:
        exchange = _Exchange(request)
        with self._lock:
            self._requests.append(request)
            self._exchanges.append(exchange)  # in arrival order, filled in as it streams
        return exchange

    def _recording_failed(self, exchange: _Exchange, why: str) -> None:
        with self._lock:
            self._exchanges.remove(exchange)
            self._failures.append(why)

    def _take(self, request: RecordedRequest) -> Union[_Exchange, str]:
        """The recording to replay for ``request``, or why there is none."""
        try:
            key: Any = self._key(request)
            why = ""
        except Exception as error:  # the user's match callable
            key, why = None, f"{_describe(request)}: match= raised {error!r}"
        with self._lock:
            self._requests.append(request)
            queue = None if why else self._queues.get(_key_text(key))
            if queue:
                return self._exchanges[queue.popleft()]
            why = why or self._explain(request, key)
            self._failures.append(why)
            return why

    def _explain(self, request: RecordedRequest, key: Any) -> str:
        if _key_text(key) in self._queues:
            times = self._keys.count(_key_text(key))
            return (f"{_describe(request)} was sent more often than recorded: its "
                    f"{times} recording{'s were' if times > 1 else ' was'} already replayed")
        if not self._exchanges:
            return f"{_describe(request)} matches no recording: the cassette has none"
        differences = [_differences(self._key(e.request), key) for e in self._exchanges]
        nearest = min(range(len(differences)), key=lambda i: len(differences[i]))
        shown, more = differences[nearest][:5], max(0, len(differences[nearest]) - 5)
        return (f"{_describe(request)} matches no recording; nearest is #{nearest + 1} "
                f"({_describe(self._exchanges[nearest].request)}): " + "; ".join(shown)
                + (f"; and {more} more difference{'s' if more > 1 else ''}" if more else ""))


def _choose_mode(path: Path, upstream: Optional[str], record: Optional[bool]) -> str:
    if record is not None:
        if not isinstance(record, bool):
            raise TypeError(f"Cassette record must be True, False or None, got {record!r}")
        if record and upstream is None:
            raise ValueError("Cassette record=True needs upstream=, the server to record from")
        return "record" if record else "replay"
    setting = os.environ.get(ENVIRONMENT, "").strip().lower() or "auto"
    if setting not in ("auto", "record", "replay"):
        raise ValueError(f"{ENVIRONMENT} must be auto, record or replay, got {setting!r}")
    recording = setting == "record" or setting == "auto" and not path.exists()
    return "record" if upstream is not None and recording else "replay"


def _key_function(match: Match) -> Callable[[RecordedRequest], Any]:
    if callable(match):
        return match
    if isinstance(match, str) or not all(isinstance(name, str) and name for name in match):
        raise TypeError("Cassette match= takes a callable or a sequence of dotted field "
                        f"paths to ignore, such as ('metadata.user_id',); got {match!r}")
    ignored = [name.split(".") for name in match]

    def key(request: RecordedRequest) -> Any:
        body = _body_value(request.body)
        for parts in ignored:
            _drop(body, parts)
        return {"method": request.method, "path": request.path, "query": request.query,
                "body": body}

    return key


def _body_value(body: bytes) -> Any:
    """The body as JSON when it is JSON, else as saved."""
    try:
        return bounded_json.loads(body.decode("utf-8"), what="body")
    except ValueError:  # UnicodeDecodeError included
        return _encode(body)


def _drop(value: Any, parts: Sequence[str]) -> None:
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        names: List[Any] = list(value) if head == "*" else [head] if head in value else []
    elif isinstance(value, list):
        names = list(range(len(value))) if head == "*" else (
            [int(head)] if head.isdigit() and int(head) < len(value) else [])
    else:
        return
    for name in names:
        if rest:
            _drop(value[name], rest)
        elif isinstance(value, dict):
            del value[name]
        else:
            value[name] = None  # the other elements keep their indices


def _key_text(key: Any) -> str:
    return json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def _differences(recorded: Any, now: Any, pointer: str = "") -> List[str]:
    """Where ``now`` differs from ``recorded``, as JSON-pointer lines."""
    if isinstance(recorded, list) and isinstance(now, list):
        recorded, now = dict(enumerate(recorded)), dict(enumerate(now))
    if not (isinstance(recorded, dict) and isinstance(now, dict)):
        same = type(recorded) is type(now) and recorded == now  # True is not 1
        return [] if same else [f"{pointer or '/'}: recorded {_short(recorded)}, now {_short(now)}"]
    found: List[str] = []
    for name in list(recorded) + [n for n in now if n not in recorded]:
        where = pointer + "/" + str(name).replace("~", "~0").replace("/", "~1")
        if name not in now:
            found.append(f"{where}: recorded {_short(recorded[name])}, now missing")
        elif name not in recorded:
            found.append(f"{where}: not recorded, now {_short(now[name])}")
        else:
            found.extend(_differences(recorded[name], now[name], where))
    return found


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _describe(request: RecordedRequest) -> str:
    return f"{request.method} {request.path}" + (f"?{request.query}" if request.query else "")


def _scrub(method: str, target: str, headers: Dict[str, str],
           body: bytes) -> Tuple[RecordedRequest, List[bytes]]:
    """The request as saved and matched, and the secret values it carried."""
    path, _, query = target.partition("?")
    secrets: List[str] = []
    saved: Dict[str, str] = {}
    for name, value in headers.items():
        if name not in _UNSAVED_REQUEST_HEADERS:
            if is_secret(name):  # "Bearer sk-...": the token alone may be in a body
                secrets += [value] + value.split()[-1:]
            saved[name] = SCRUBBED if is_secret(name) else value
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(is_secret(name) for name, _ in pairs):
        secrets += [value for name, value in pairs if is_secret(name)]
        query = urlencode([(n, SCRUBBED if is_secret(n) else v) for n, v in pairs], safe="<>")
    values = sorted({s.encode("utf-8") for s in secrets if len(s) >= SHORTEST_SECRET},
                    key=len, reverse=True)
    return RecordedRequest(method, path, saved, redact(body, values), query), values


def _without(headers: Sequence[Tuple[str, str]],
             names: Collection[str]) -> List[Tuple[str, str]]:
    """``headers`` less ``names`` and whatever a ``Connection`` header lists."""
    listed = {token.strip().lower() for name, value in headers if name.lower() == "connection"
              for token in value.split(",")}
    return [(name, value) for name, value in headers
            if name.lower() not in names and name.lower() not in listed]


def _encode(data: bytes, delay: float = 0.0) -> Any:
    try:
        value: Dict[str, Any] = {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        value = {"base64": base64.b64encode(data).decode("ascii")}
    return {**value, "delay": delay} if delay else value.get("text", value)


def _decode(value: Any) -> Chunk:
    if isinstance(value, str):
        return value.encode("utf-8"), 0.0
    delay = value.get("delay", 0.0) if isinstance(value, dict) else -1
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not delay >= 0:
        raise ValueError(f'a body is a string, {{"text": ...}} or {{"base64": ...}} with an '
                         f"optional delay >= 0; got {_short(value)}")
    if isinstance(value.get("text"), str):
        return value["text"].encode("utf-8"), float(delay)
    return base64.b64decode(value["base64"], validate=True), float(delay)


def _exchange_to_json(exchange: _Exchange) -> Dict[str, Any]:
    request, secrets = exchange.request, exchange.secrets
    chunks = redact_chunks(exchange.chunks, secrets, exchange.dropped)
    headers = [saved_header(line, secrets) for line in exchange.headers]
    if _framing(request.method, exchange.status, headers) == "length" and not exchange.dropped:
        length = sum(len(data) for data, _ in chunks)  # scrubbing may change the length
        headers = [f"Content-Length: {length}" if line.lower().startswith("content-length:")
                   else line for line in headers]
    response = {"status": exchange.status, "reason": redact_text(exchange.reason, secrets),
                "headers": headers, "chunks": [_encode(data, delay) for data, delay in chunks],
                **({"dropped": True} if exchange.dropped else {})}
    return {"request": {"method": request.method, "path": request.path, "query": request.query,
                        "headers": request.headers, "body": _encode(request.body)},
            "response": response}


def _exchange_from_json(value: Any) -> _Exchange:
    request, response = value["request"], value["response"]
    method, path, query, headers = (request[n] for n in ("method", "path", "query", "headers"))
    status, lines = response["status"], response["headers"]
    strings = [method, path, query, *dict(headers).values(), *lines]
    if not all(isinstance(v, str) for v in strings) or type(status) is not int:
        raise ValueError("method, path, query, headers and status must be strings and an int")
    return _Exchange(RecordedRequest(method, path, dict(headers), _decode(request["body"])[0], query),
                     status, str(response.get("reason", "")), list(lines),
                     [_decode(chunk) for chunk in response["chunks"]], response.get("dropped") is True)


def _load(path: Path) -> List[_Exchange]:
    try:
        document = bounded_json.loads(path.read_text(encoding="utf-8"), what="cassette",
                                      max_depth=bounded_json.DOCUMENT_DEPTH)
    except FileNotFoundError:
        raise FileNotFoundError(f"no cassette at {path}: give upstream= to record it (with "
                                f"{ENVIRONMENT} unset or auto), or record=True") from None
    except ValueError as error:
        raise ValueError(f"cassette {path} is not JSON: {error}") from None
    version = document.get("version") if isinstance(document, dict) else None
    if version != VERSION:
        raise ValueError(f"cassette {path} has version {version!r}; this nacelle reads version "
                         f"{VERSION} files — record it again (record=True)")
    if not isinstance(document.get("exchanges"), list):
        raise ValueError(f"cassette {path} has no list of exchanges")
    loaded = []
    for number, exchange in enumerate(document["exchanges"], 1):
        try:
            loaded.append(_exchange_from_json(exchange))
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as error:
            raise ValueError(f"cassette {path}: exchange #{number} is malformed: {error}") from None
    return loaded


def _write_atomically(path: Path, text: str) -> None:
    """Whole or absent (:func:`nacelle._files.write_atomic`), and 0644: a cassette is a
    file to commit, not a private one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(str(path), text.encode("utf-8"), mode=0o644)


def _framing(method: str, status: int, headers: Sequence[str]) -> str:
    """How a body goes on the wire: "none", "length" (as saved) or "chunked"."""
    if method == "HEAD" or status in (204, 304) or status < 200:
        return "none"
    names = {line.split(":", 1)[0].strip().lower() for line in headers}
    return "length" if "content-length" in names else "chunked"


class _Server(ThreadingHTTPServer):  # socketserver would print the traceback; we log it
    def handle_error(self, request: Any, client_address: Any) -> None:
        level = logging.DEBUG if isinstance(sys.exc_info()[1], ConnectionError) else logging.ERROR
        log.log(level, "error serving %s", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked replies

    def setup(self) -> None:
        super().setup()
        # Each chunk must leave at once, as it arrived: no waiting on Nagle's algorithm.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cassette: Cassette = self.server.cassette  # type: ignore[attr-defined]
        self.cassette._connected(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.cassette._connected(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        raw = list(self.headers.items())
        lowered = {name.lower(): value for name, value in raw}
        if "transfer-encoding" in lowered:  # every API client sends a Content-Length
            self.close_connection = True
            return self._refuse(411, "cassette_length_required", "send a Content-Length")
        length = int(lowered.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        request, secrets = _scrub(self.command, self.path, lowered, body)
        try:
            if self.cassette.mode == "record":
                self._forward(request, secrets, raw, body)
            else:
                self._replay(request)
        except OSError:  # the client went away mid-reply
            self.close_connection = True
            log.debug("client left during %s", _describe(request))

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET

    def _replay(self, request: RecordedRequest) -> None:
        found = self.cassette._take(request)
        if isinstance(found, str):
            return self._refuse(400, "cassette_mismatch", found)
        framing = _framing(self.command, found.status, found.headers)
        self._head(found.status, found.reason, found.headers, framing)
        for data, delay in found.chunks if framing != "none" else ():
            if self.cassette.timing and delay and self.cassette._stopping.wait(delay):
                return self._end(framing, dropped=True)
            self._chunk(data, framing)
        self._end(framing, found.dropped)

    def _forward(self, request: RecordedRequest, secrets: Sequence[bytes],
                 raw: Sequence[Tuple[str, str]], body: bytes) -> None:
        cassette = self.cassette
        exchange = cassette._begin_recording(request)
        exchange.secrets = secrets
        upstream = urlsplit(cassette.upstream or "")
        kind = http.client.HTTPSConnection if upstream.scheme == "https" else http.client.HTTPConnection
        connection = kind(upstream.hostname or "", upstream.port, timeout=_UPSTREAM_TIMEOUT)
        headers = dict(_without(raw, _UNSAVED_REQUEST_HEADERS | {"accept-encoding"}))
        headers["Accept-Encoding"] = "identity"
        try:
            connection.request(self.command, upstream.path.rstrip("/") + self.path, headers=headers,
                               body=body if body or self.command in ("POST", "PUT", "PATCH") else None)
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            why = f"{_describe(request)}: upstream {cassette.upstream} failed: {error!r}"
            cassette._recording_failed(exchange, why)
            return self._refuse(502, "cassette_upstream_error", why)
        try:
            self._relay(response, exchange)
        finally:
            connection.close()

    def _relay(self, response: http.client.HTTPResponse, exchange: _Exchange) -> None:
        """Send the upstream response on as it arrives, keeping each read as a chunk
        (scrubbed when saved: a secret may straddle two reads)."""
        exchange.status, exchange.reason = response.status, response.reason
        exchange.headers = [f"{name}: {value}" for name, value in _without(
            response.getheaders(), _HOP_BY_HOP | {"set-cookie", "set-cookie2"})]
        framing = _framing(self.command, response.status, exchange.headers)
        self._head(response.status, response.reason, exchange.headers, framing)
        last = time.monotonic()
        exchange.dropped = framing != "none"  # until the body has ended as it should
        while exchange.dropped:
            try:
                data = response.read1(65536)
            except (OSError, http.client.HTTPException) as error:
                log.warning("upstream cut %s short: %r", _describe(exchange.request), error)
                break
            now, exchange.dropped = time.monotonic(), bool(data)
            delay = round(now - last, 3) if self.cassette.timing else 0.0
            if data:  # a client leaving mid-write leaves the exchange saved as dropped
                exchange.chunks.append((data, delay))
                self._chunk(data, framing)
            last = now
        self._end(framing, exchange.dropped)

    def _head(self, status: int, reason: str, headers: Sequence[str], framing: str) -> None:
        self.log_request(status)
        self.send_response_only(status, reason or None)  # no Server or Date of our own
        for line in headers:
            name, _, value = line.partition(":")
            self.send_header(name.strip(), value[1:] if value.startswith(" ") else value)
        if framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes, framing: str) -> None:
        if data:  # an empty HTTP chunk would end the body
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if framing == "chunked" else data)

    def _end(self, framing: str, dropped: bool) -> None:
        if dropped:  # as the recorded body ended: the connection closes mid-body
            self.close_connection = True
            _shutdown(self.connection)
        elif framing == "chunked":
            self.wfile.write(b"0\r\n\r\n")

    def _refuse(self, status: int, kind: str, message: str) -> None:
        """An error in the shape Anthropic and OpenAI clients both read, never retried."""
        body = json.dumps({"type": "error", "error": {"type": kind, "message": message}},
                          ensure_ascii=False).encode("utf-8")
        self._head(status, "", ["Content-Type: application/json",
                                f"Content-Length: {len(body)}", "x-should-retry: false"], "length")
        self.wfile.write(body)
