"""The HTTP transport of the model backends: the only code that calls ``requests`` for
a model. It holds the sessions, the streaming POST, HTTP-level retry and
:func:`iter_sse`, which turns a streaming response into SSE events. What a failed
exchange becomes (``APIError`` parsing, hints, the retry delay, messages naming host
and port) is in ``_http_errors``; ``parse_error`` and ``retry_delay`` are re-exported.

A backend uses it in three lines::

    transport = Transport(base_url, {"x-api-key": key}, name="anthropic",
                          key_variable="ANTHROPIC_API_KEY")
    response = transport.post_stream("/v1/messages", body, ctx)   # 2xx, or raised
    for event in transport.events(response, ctx, keepalive=is_ping, final=is_last):
        ...                                                       # SSEEvent values

``post_json(path, body, ctx)`` does the same for a JSON answer (token counting).

What it promises:

- Bytes, never text: ``requests`` guesses ISO-8859-1 for a ``text/event-stream`` with
  no charset (OpenRouter's), so ``iter_lines``/``decode_unicode`` garble non-ASCII
  text. The body is read with the urllib3 response's ``read1``, which returns what has
  arrived; ``iter_content`` would hold a close-delimited body until EOF. Each event is
  yielded as soon as its blank line arrives.
- Connections are reused between turns. urllib3 returns a connection to the pool
  only once its body was read to the end, so a backend that stopped at its final
  event and closed the response would pay a new connection (a TLS handshake in
  production) for every turn. ``final(event)`` marks the stream's last event: it is
  asked when the consumer comes back for the next event (so it may consult the
  consumer's own state), and once it is true the iteration ends after the rest of
  the body is read — normally zero to a few bytes already on their way — which
  frees the connection. The rest is bounded by ``DRAIN_BYTES`` and ``DRAIN_SECONDS``
  (and the read timeout and the run's deadline): a server that keeps the stream
  open after the final event costs at most a second, then the connection is closed
  as it would have been. A consumer that leaves early closes at once, never drains.
  A pooled connection the server has since closed (an idle timeout while tools ran)
  is noticed by urllib3 when taken from the pool and replaced.
- Retries like the official SDKs, and only before the body: connection errors, read
  timeouts waiting for the status, 408, 409, 429 and 5xx (529 included), unless
  ``x-should-retry`` says otherwise, after :func:`retry_delay` (or, when no header
  says, the ``retryDelay`` a Google error body's ``RetryInfo`` asks for, up to 60 s).
  Every sleep goes through ``ctx.sleep``, so a fake clock records it and the run's
  deadline bounds it.
  A stream that fails midway is never retried here: output was already shown
  (``Retry`` may rerun a turn that yielded nothing).
- Time limits: ``connect_timeout`` (5 s, as the Anthropic SDK) and ``timeout`` (600 s
  without a byte) are each capped by the run's remaining deadline. Separately,
  ``stall_timeout`` (600 s: long silent thinking is legitimate) bounds the time since
  the last event that was not a keepalive; it raises a retryable ``StreamError``.
  Each limit bounds a whole read, not only each ``recv`` under it, so a server that
  sends its head or its chunk-size lines one byte at a time cannot outlast them: the
  response head must be complete within ``timeout`` of the request going out (and
  connecting and sending within ``connect_timeout + timeout``), an error body is read
  within ``timeout``, and every read of the stream ends by the earliest of its
  limits. A :class:`~nacelle.read_limits.Cutoff` shuts the socket down when one
  passes, and the error is the one that limit deserves (``TransportError``, the
  stall's ``StreamError``, the deadline's error).
- Cancellation from another thread unblocks a blocked read at once: the socket is
  shut down from the cancelling thread (closing a response does not wake a thread
  blocked in ``recv``, and closing its buffered reader waits for that thread's lock).
  To reach the socket before the response exists, the session's connection pools
  note which connection the current request took (``_http_session``).
- Errors: ``APIError`` for an HTTP error status; ``TransportError`` when no response
  came or no byte for ``timeout``, or when the response's ``Content-Length`` is not
  a length (:func:`nacelle.read_limits.content_length`; retried like a response that
  never came); ``StreamTruncated`` when the body ends inside an
  event or the connection drops mid-stream; ``Cancelled`` after cancellation. Whether
  the stream's final event arrived is the backend's business. Redirects are not
  followed (a redirect would carry the key to wherever it points). A 2xx stream
  labelled other than ``text/event-stream`` (a wrong ``base_url``'s HTML page) is a
  ``StreamError`` with a preview, not a "truncated" stream retried for nothing; an
  unlabelled one is read.
- Secrets: header values are kept out of every repr, message and log line, and are
  scrubbed from provider messages and body previews too. The key is read by
  :func:`read_key` (``nacelle._net.headers``, re-exported here), which refuses one with a character no key holds (a zero width
  space, a newline, whitespace around it) with a ``ConfigError`` naming the
  character and its position, never the key; a header value HTTP cannot carry is a
  ``ConfigError`` naming the header. Both happen before anything is sent.
- One ``requests.Session`` per transport and thread (requests does not promise a
  Session is thread-safe, and an Agent is shared between threads). A thread that
  ends hands its session, with its open connections, to the next thread that needs
  one: every tool call runs on a thread of its own, so a tool that runs an agent (a
  sub-agent) would otherwise open a new connection, and over HTTPS make a new TLS
  handshake, for every call (a forked child takes none its parent's threads left:
  their connections are the parent's). Sessions are dropped when pickling and made
  again on first use. The environment's proxies and CA bundle are read once, when the
  transport makes its first session, rather than on every request (or for every
  thread of a thousand).

Outer ring: imports ``requests``, ``urllib3``, the standard library, ``nacelle.errors``,
``nacelle.sse``, ``nacelle.bounded_json`` (its ``TooDeep``), ``nacelle.read_limits``,
``nacelle.context`` (for the RunContext type only), ``nacelle._net`` (the header checks
and the socket walk, shared with the MCP client), ``_http_errors``, ``_http_session``
and ``_wire_cache`` (a request body given in parts).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Union

import requests
import urllib3

from .._loggers import get_logger
from ..bounded_json import TooDeep
from ..context import RunContext
from ..errors import APIError, Cancelled, StreamError, StreamTruncated, TransportError
from ..read_limits import Cutoff, content_length
from ..sse import SSEDecoder, SSEEvent, parse_json
from ._http_errors import (
    api_error, describe, parse_error, preview, retry_delay, scrub, stalled, where as _where,
)
from .._net.headers import checked as _checked, checked_settings, read_key as read_key
from .._net.sockets import socket_of
from ._http_session import Environment, InFlight, environment, new_session, post
from ._wire_cache import Body

__all__ = ["Transport", "iter_sse", "next_batch", "parse_error", "retry_delay", "sse_batches"]

log = get_logger(__name__)

_ERROR_BODY_LIMIT = 64 * 1024
#: A stream's reads ask for ``_READ_SMALL`` bytes until one comes back full (more is
#: on its way), then for ``_READ_SIZE`` until one comes back short. Each read makes a
#: new ``bytes`` of the size asked for, which waits in ``recv`` and is then shrunk to
#: what arrived (CPython's ``BufferedReader.read1``, under http.client's). A
#: streamed event is a few hundred bytes, so a thread blocked in ``recv`` holds a
#: small buffer, not 64 KiB: 479 bytes and a ``bytes`` header of 33 are 512, the
#: largest block CPython's small-object allocator serves from its shared pools; a
#: larger one comes from the C allocator, whose per-thread arenas a thousand
#: threads fragment. At 1,000 streams in one process (``benchmarks/concurrency.py``,
#: one tick) the peak RSS measured 74 MB with 479-byte reads, 82 MB with 2 KiB, and
#: earlier 84 MB with 8 KiB and 90 MB with 64 KiB (CPU the same). An event longer
#: than that costs one read more; a burst (a long answer read faster than it
#: streams) still moves in 64 KiB reads.
_READ_SMALL = 479
_READ_SIZE = 64 * 1024
#: A request body in pieces (``Body``) no longer than this is joined and sent at once.
_JOIN_BODY = 64 * 1024
#: After the final event, at most this much of the body is read to free the connection
#: for the next request, and for at most this long; past either it is closed instead.
DRAIN_BYTES = 64 * 1024
DRAIN_SECONDS = 1.0
#: Sessions of ended threads a transport keeps for the next threads (see _Held); one
#: more is dropped, its connections closed when it is collected, as before.
IDLE_SESSIONS = 4


class _Held:
    """A thread's session, in the transport's thread-local storage, handed back to
    the transport's ``idle`` list when the thread ends: ``threading.local`` drops a
    thread's values as the thread ends, so this is deleted then, and nothing of that
    thread can reach the session any more. (Or when the transport itself goes, when
    the list goes with it.) ``list.append`` and ``list.pop`` are atomic, so the list
    needs no lock, which a destructor could not safely take."""

    __slots__ = ("session", "idle")

    def __init__(self, session: requests.Session, idle: List[requests.Session]) -> None:
        self.session = session
        self.idle = idle

    def __del__(self, _keep: int = IDLE_SESSIONS) -> None:  # bound now: safe at exit
        if len(self.idle) < _keep:
            self.idle.append(self.session)


class Transport:
    """HTTP for one backend: sessions, retries, error mapping, SSE.

    ``headers`` go on every request; their values are treated as secrets.
    ``secret_headers``, when given, is called once, at the first request, for the
    headers that carry the key: a backend can be built before the environment holds
    its key, and a key read from the environment is dropped when the transport is
    pickled (the copy asks again). ``key_variable`` names the environment variable
    the key comes from, for the 401 hint.

    A cloud that authenticates each request rather than with a fixed key passes
    ``sign(url, body, headers) -> headers``, called before every attempt (a retry
    included) with the bytes about to be sent: a token fresh from its source, a SigV4
    signature over this moment. What it adds is scrubbed like a key. ``stream_media``
    is the media type a stream answers with, and ``decoder`` makes its decoder when
    that is not SSE (see :func:`iter_sse`); ``auth_hint`` is what a 401 or 403 tells
    to check when the credentials are not one API key.
    """

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        max_retries: int = 2,
        timeout: float = 600.0,
        stall_timeout: float = 600.0,
        connect_timeout: float = 5.0,
        name: str = "anthropic",
        key_variable: str = "",
        secret_headers: Optional[Callable[[], Mapping[str, str]]] = None,
        sign: Optional[Callable[[str, bytes, Mapping[str, str]], Mapping[str, str]]] = None,
        stream_media: str = "text/event-stream",
        decoder: Optional[Callable[[], Any]] = None,
        auth_hint: str = "",
    ) -> None:
        self.base_url = checked_settings(base_url, max_retries, {
            "timeout": timeout, "stall_timeout": stall_timeout,
            "connect_timeout": connect_timeout})
        self.headers = _checked(headers)
        self.max_retries = max_retries
        self.timeout = float(timeout)
        self.stall_timeout = float(stall_timeout)
        self.connect_timeout = float(connect_timeout)
        self.name = name
        self.key_variable = key_variable
        self.secret_headers = secret_headers
        self.sign = sign
        self.stream_media = stream_media
        self.decoder = decoder
        self.auth_hint = auth_hint
        self._all_headers: Optional[Dict[str, str]] = None
        self._headers_lock = threading.Lock()
        self._local = threading.local()
        self._idle: List[requests.Session] = []
        self._idle_pid = os.getpid()
        self._environ: Optional[Environment] = None

    def __repr__(self) -> str:
        return (f"Transport({self.name!r}, {self.base_url!r}, headers={sorted(self.headers)}, "
                f"max_retries={self.max_retries})")

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        del state["_local"]  # sessions hold sockets and locks; made again on use
        del state["_idle"], state["_idle_pid"]
        del state["_headers_lock"]
        state["_all_headers"] = None  # the key read from this environment stays here
        state["_environ"] = None  # and so do its proxies
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._headers_lock = threading.Lock()
        self._local = threading.local()
        self._idle = []
        self._idle_pid = os.getpid()

    def request_headers(self) -> Dict[str, str]:
        """The headers every request carries, ``secret_headers`` asked on first use
        (so a missing key is an error at the first request, not before)."""
        if self.secret_headers is None:
            return self.headers
        headers = self._all_headers
        if headers is None:
            with self._headers_lock:
                if self._all_headers is None:
                    self._all_headers = {**self.headers, **_checked(self.secret_headers())}
                headers = self._all_headers
        return headers

    def secrets(self) -> Dict[str, str]:
        """Every header value to hide from what the provider sends back: the request
        headers and the headers ``sign`` last added on this thread."""
        signed = getattr(self._local, "signed", None)
        return {**self.request_headers(), **signed} if signed else self.request_headers()

    @property
    def session(self) -> requests.Session:
        """This thread's session: on first use one an ended thread left (see
        :class:`_Held`), else a new one with the proxies and CA bundle the environment
        named when the transport made its first one."""
        held = getattr(self._local, "held", None)
        if held is None:
            if self._idle_pid != os.getpid():
                # A forked child: the sessions its parent's threads left hold the
                # parent's connections, which two processes must not share.
                self._idle, self._idle_pid = [], os.getpid()
            try:
                session = self._idle.pop()
            except IndexError:
                if self._environ is None:
                    self._environ = environment(self.base_url)
                session = new_session(self.base_url, self._environ)
            held = self._local.held = _Held(session, self._idle)
        return held.session

    # -- requests -------------------------------------------------------------------

    def post_stream(self, path: str, body: Any, ctx: RunContext,
                    headers: Optional[Mapping[str, str]] = None) -> requests.Response:
        """POST ``body`` as JSON (or JSON already encoded, as bytes) and return the
        streaming 2xx response, unread.

        Retries before the body is read, as the module docstring says; raises
        ``APIError``, ``TransportError`` or ``Cancelled``.
        """
        extra = {"Accept": self.stream_media, "Accept-Encoding": "identity"}
        extra.update(headers or {})
        response = self._request(path, body, ctx, extra, stream=True)
        media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media and media != self.stream_media:
            said = self._api_error(response, path, ctx).message or "an empty body"
            raise StreamError(f"{self.name} answered {response.status_code} with {media}, not an "
                              f"event stream: {said} — check base_url ({self.base_url})")
        return response

    def post_json(self, path: str, body: Any, ctx: RunContext,
                  headers: Optional[Mapping[str, str]] = None) -> Any:
        """POST ``body`` as JSON (or JSON already encoded, as bytes) and return the
        parsed JSON answer."""
        extra = {"Accept": "application/json"}
        extra.update(headers or {})
        response = self._request(path, body, ctx, extra, stream=False)
        try:
            return parse_json(response.content)
        except ValueError as exc:
            said = str(exc) if isinstance(exc, TooDeep) else "not JSON"
            raise StreamError(
                f"{self.name} answered {response.status_code} with a body that is {said}: "
                f"{scrub(preview(response.content), self.secrets())!r}"
            ) from None
        finally:
            response.close()

    def events(self, response: requests.Response, ctx: RunContext,
               keepalive: Optional[Callable[[SSEEvent], bool]] = None,
               final: Optional[Callable[[SSEEvent], bool]] = None) -> Generator[SSEEvent, None, None]:
        """The SSE events of ``response`` (see :func:`iter_sse`), with this transport's
        read and stall timeouts."""
        return iter_sse(response, ctx, keepalive=keepalive, final=final,
                        read_timeout=self.timeout, stall_timeout=self.stall_timeout,
                        make_decoder=self.decoder)

    def batches(self, response: requests.Response, ctx: RunContext,
                keepalive: Optional[Callable[[SSEEvent], bool]] = None,
                ) -> Generator[List[SSEEvent], bool, None]:
        """The SSE events of ``response`` a read at a time (see :func:`sse_batches`),
        with this transport's read and stall timeouts."""
        return sse_batches(response, ctx, keepalive=keepalive, read_timeout=self.timeout,
                           stall_timeout=self.stall_timeout, make_decoder=self.decoder)

    # -- internals --------------------------------------------------------------------

    def _request(self, path: str, body: Any, ctx: RunContext, extra: Mapping[str, str],
                 stream: bool) -> requests.Response:
        url = self.base_url + path
        # A backend that encoded the body itself (``encode_body``, which reuses the
        # earlier turns' JSON) passes bytes or a Body of pieces; they are sent as they
        # are, a Body piece by piece after its Content-Length.
        data: Union[bytes, Body] = body if isinstance(body, (bytes, Body)) else json.dumps(
            body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if isinstance(data, Body) and len(data) <= _JOIN_BODY:
            # http.client sends each piece with a system call of its own; a short body
            # costs less copied once than sent in pieces (a long one the other way).
            data = bytes(data)
        headers = {"Content-Type": "application/json", **self.request_headers(), **extra}
        retries = 0
        while True:
            ctx.check()
            try:
                response = self._send(url, data, self._signed(url, data, headers), ctx, stream)
            except TransportError as unreachable:
                if retries >= self.max_retries:
                    raise
                failure: Exception = unreachable
                delay = retry_delay({}, retries)
                log.debug("%s: %s; retry %d of %d in %.2fs", self.name, unreachable,
                          retries + 1, self.max_retries, delay)
            else:
                if response.status_code < 300:
                    return response
                refused = self._api_error(response, path, ctx)
                failure = refused
                if not refused.retryable or retries >= self.max_retries:
                    raise refused
                delay = retry_delay(response.headers, retries)
                wait = refused.retry_after  # the header's, or a body's (Google's RetryInfo)
                if wait is not None and 0 < wait <= 60:
                    delay = float(wait)
                log.debug("%s: HTTP %d from POST %s; retry %d of %d in %.2fs", self.name,
                          refused.status, _where(url), retries + 1, self.max_retries, delay)
            retries += 1
            ctx.observe("request.retry", attempt=retries, delay=delay, error=failure,
                        level="http")
            try:
                ctx.sleep(delay)
            except Exception as stopped:  # a deadline reached while waiting names the wait
                raise stopped from (None if ctx.cancelled.is_set() else failure)

    def _signed(self, url: str, data: Union[bytes, Body],
                headers: Dict[str, str]) -> Dict[str, str]:
        """``headers`` plus what ``sign`` adds for this attempt (a fresh token, a
        signature over this moment), remembered on this thread for the scrubber."""
        if self.sign is None:
            return headers
        added = _checked(self.sign(url, bytes(data), headers))
        self._local.signed = added
        return {**headers, **added}

    def _send(self, url: str, data: Union[bytes, Body], headers: Dict[str, str],
              ctx: RunContext, stream: bool) -> requests.Response:
        left = ctx.remaining()
        connect = self.connect_timeout if left is None else min(self.connect_timeout, left)
        read = self.timeout if left is None else min(self.timeout, left)
        flight = InFlight(connect, read, None if left is None else time.monotonic() + left)
        unregister = ctx.on_cancel(flight.cancel)
        try:
            with flight:
                response = post(self.session, url, data, headers,
                                (max(connect, 0.001), max(read, 0.001)))
                if flight.cause is None:
                    _check_length(response, url)
                if not stream:
                    try:  # a JSON answer is read within the head's limit
                        response.content  # noqa: B018
                    except requests.RequestException:
                        response.close()
                        raise
        except requests.RequestException as exc:
            if flight.cause is None and not ctx.cancelled.is_set():
                ctx.check()  # a timeout cut short by the deadline is the deadline's error
                found = exc.args[0] if exc.args else None
                if isinstance(found, urllib3.exceptions.InvalidHeader):  # lengths that differ
                    raise TransportError(f"the response from {_where(url)} cannot be read: "
                                         f"{found}") from None
                exc.request = exc.response = None  # they hold the headers, key included
                raise TransportError(f"{self.name}: {describe(exc, _where(url), connect, read)}") from exc
            raise _cut_off(flight.cause, ctx, _where(url), connect, read) from None
        finally:
            unregister()
        if flight.cause is not None or ctx.cancelled.is_set():
            response.close()  # its head may have been cut short: it is no answer
            raise _cut_off(flight.cause, ctx, _where(url), connect, read)
        return response

    def _api_error(self, response: requests.Response, path: str, ctx: RunContext) -> APIError:
        # The error body gets the read timeout in all (and no more than the run has
        # left); cut short, the status still says enough.
        sock = socket_of(response)
        cutoff = Cutoff(lambda: sock)
        left = ctx.remaining()
        cutoff.arm(time.monotonic() + (self.timeout if left is None else min(self.timeout, left)),
                   "error body")
        unregister = ctx.on_cancel(lambda: cutoff.cut("cancelled"))
        try:
            raw = b""
            for piece in response.iter_content(8192):
                raw += piece
                if len(raw) >= _ERROR_BODY_LIMIT:
                    break
        except (requests.RequestException, OSError):
            pass  # the status says enough; a half-read error body is no reason to hide it
        finally:
            unregister()
            cutoff.disarm()
            response.close()
        return api_error(response.status_code, response.headers, raw, name=self.name,
                         base_url=self.base_url, path=path, key_variable=self.key_variable,
                         secrets=self.secrets(), auth_hint=self.auth_hint)


def iter_sse(
    response: requests.Response,
    ctx: RunContext,
    *,
    keepalive: Optional[Callable[[SSEEvent], bool]] = None,
    final: Optional[Callable[[SSEEvent], bool]] = None,
    read_timeout: float = 600.0,
    stall_timeout: float = 600.0,
    max_line: int = 16 * 2**20,
    make_decoder: Optional[Callable[[], Any]] = None,
) -> Generator[SSEEvent, None, None]:
    """Yield the SSE events of a streaming ``requests`` response as they arrive.

    Ends cleanly on a clean end of body. Raises ``StreamTruncated`` when the body ends
    inside an event or the connection drops, ``TransportError`` after
    ``read_timeout`` seconds without a byte, a retryable ``StreamError`` after
    ``stall_timeout`` seconds without an event that ``keepalive`` does not claim, and
    ``Cancelled`` (or the context's deadline error) when the run stops.

    ``final(event)``, asked when the consumer comes back after ``event``, ends the
    iteration: the rest of the body is read, within ``DRAIN_BYTES`` and
    ``DRAIN_SECONDS``, so the connection can serve the next request. The response is
    closed when the generator ends, however it ends; a connection read to the end of
    its body goes back to the pool first.

    ``make_decoder`` makes the body's decoder when it is not SSE (Bedrock's event-stream
    framing): anything with ``feed(bytes) -> [SSEEvent]``, ``close()`` and
    ``truncated``, as :class:`~nacelle.sse.SSEDecoder` has.

    It is :func:`sse_batches` read one event at a time: the run is looked at before
    each event (a cancel set while the consumer handled one stops the next).
    """
    reads = sse_batches(response, ctx, keepalive=keepalive, read_timeout=read_timeout,
                        stall_timeout=stall_timeout, max_line=max_line,
                        make_decoder=make_decoder)
    is_set, deadline = ctx.cancelled.is_set, ctx.deadline  # a context's deadline is fixed
    try:
        batch = next_batch(reads, False)
        while batch is not None:
            ended = False
            for event in batch:
                if is_set() or (deadline is not None and ctx.expired()):
                    ctx.check()
                yield event
                if final is not None and final(event):
                    ended = True
                    break
            batch = next_batch(reads, ended)
    finally:
        reads.close()


def next_batch(reads: Generator[List[SSEEvent], bool, None],
               ended: bool) -> Optional[List[SSEEvent]]:
    """The next batch of :func:`sse_batches` (None at the end), telling it whether
    the last one handed out held the stream's final event (``ended``: it then reads
    the rest of the body and stops)."""
    try:
        return reads.send(ended) if ended else next(reads)
    except StopIteration:
        return None


def sse_batches(
    response: requests.Response,
    ctx: RunContext,
    *,
    keepalive: Optional[Callable[[SSEEvent], bool]] = None,
    read_timeout: float = 600.0,
    stall_timeout: float = 600.0,
    max_line: int = 16 * 2**20,
    make_decoder: Optional[Callable[[], Any]] = None,
) -> Generator[List[SSEEvent], bool, None]:
    """The SSE events of a streaming response, as :func:`iter_sse` promises, in one
    list per read that completed any: what arrived together is handed over together,
    so a reader of many small events resumes this generator once a read, not once
    an event (a model turn reads it so, through :func:`next_batch`).

    The reader looks at the run before each event of a batch (``ctx.check()``), and
    sends True once a batch held the stream's final event: the rest of the body is
    then read, as :func:`iter_sse` says of ``final``, and the generator ends.
    """
    def where() -> str:  # host:port for a message, parsed only when there is one
        return _where(response.url or "")

    decoder: Any = SSEDecoder(max_line) if make_decoder is None else make_decoder()
    sock = socket_of(response)
    # Each read is bounded as a whole, not only each recv under it: a chunk-size line
    # sent a byte at a time would keep one read going past every limit.
    cutoff = Cutoff(lambda: sock)
    unregister = ctx.on_cancel(lambda: cutoff.cut("cancelled"))
    read = _reader(response)
    if sock is not None and sock.fileno() != -1:
        # The cutoff armed around each read is the limit on it, so the socket is made
        # blocking, once, for the body: a socket with a timeout polls before every
        # recv (CPython's sock_call), a second system call per read that lets go of
        # the interpreter lock — a thread switch per read when many streams share the
        # process. A pooled connection gets its timeout back with its next request
        # (urllib3 sets it as it sends), and that request's own cutoffs bound it.
        sock.settimeout(None)
    progress = time.monotonic()
    is_set, deadline = ctx.cancelled.is_set, ctx.deadline  # a context's deadline is fixed
    size = _READ_SMALL
    try:
        while True:
            if is_set() or deadline is not None:
                ctx.check()
            now = time.monotonic()
            stall_left = stall_timeout - (now - progress)
            if stall_left <= 0:
                raise stalled(where(), stall_timeout)
            limit, cause = read_timeout, "read"
            if stall_left < limit:
                limit, cause = stall_left, "stall"
            if deadline is not None:
                left = ctx.remaining()
                if left is not None and left < limit:
                    limit, cause = left, "deadline"
            try:
                if sock is not None and sock.fileno() != -1:  # closed: the body is read
                    cutoff.arm(now + limit, cause)
                data = read(size)
            except Exception as exc:  # noqa: BLE001 - sorted out below
                cut = cutoff.disarm()
                if not cut and not _is_timeout(exc) and not ctx.cancelled.is_set():
                    if isinstance(exc, (urllib3.exceptions.HTTPError, http.client.HTTPException,
                                        OSError, ValueError)):
                        raise StreamTruncated(
                            f"the connection to {where()} dropped in the middle of the stream "
                            f"({type(exc).__name__})") from None
                    raise
                raise _time_up(cut or cause, ctx, where(), read_timeout, stall_timeout) from None
            cut = cutoff.disarm()
            if cut:  # what a cut read returned is no answer, however it looks
                raise _time_up(cut, ctx, where(), read_timeout, stall_timeout)
            if not data:
                if ctx.cancelled.is_set():
                    raise Cancelled("the run was cancelled")
                if _short(response):
                    raise StreamTruncated(f"the connection to {where()} dropped in the middle "
                                          f"of the stream (IncompleteRead)")
                decoder.close()
                if decoder.truncated:
                    raise StreamTruncated(
                        f"the body from {where()} ended in the middle of an event")
                unregister()
                _release(response)
                return
            size = _READ_SIZE if len(data) >= size else _READ_SMALL
            events = decoder.feed(data)
            # The stall clock restarts when a read brings an event that is not a
            # keepalive: asked once a read, not once an event, as the events of one
            # read all arrived at the same moment.
            for event in events:
                if keepalive is None or not keepalive(event):
                    progress = time.monotonic()
                    break
            if not events:
                continue
            if (yield events):
                if _drain(read, sock, cutoff, ctx, read_timeout):
                    unregister()  # before the pool may hand the socket to another run
                    _release(response)
                else:
                    log.debug("the body from %s went on after its final event; "
                              "closing the connection instead of reusing it", where())
                return
    finally:
        unregister()
        response.close()


def _check_length(response: requests.Response, url: str) -> None:
    """Refuse a response whose Content-Length is not a length (a ``TransportError``:
    RFC 9112 has the client close the connection and discard the response). A list
    of one repeated length is read as that length by urllib3 and as no length at all
    by http.client underneath; http.client is told the length, so both agree."""
    original = getattr(response.raw, "_original_response", None)
    if getattr(original, "chunked", False):
        return  # the chunks frame the body; a Content-Length beside them is ignored
    try:
        length = content_length(response.headers.get("content-length"))
    except ValueError as exc:
        response.close()
        raise TransportError(f"the response from {_where(url)} (HTTP {response.status_code}) "
                             f"cannot be read: {exc}") from None
    if length is not None and original is not None and original.length is None:
        original.length = length


def _time_up(cause: str, ctx: RunContext, where: str, read_timeout: float,
             stall_timeout: float) -> BaseException:
    """The error of a stream read that ran out of time (or was cut) for ``cause``."""
    if cause == "cancelled" or ctx.cancelled.is_set():
        return Cancelled("the run was cancelled")
    ctx.check()
    if cause == "stall":
        return stalled(where, stall_timeout)
    if cause == "deadline":  # a fake clock's deadline, reached in real time
        return ctx.deadline_error("the run's deadline passed")
    return TransportError(f"no data from {where} for {read_timeout:g}s (read timeout)")


def _cut_off(cause: Optional[str], ctx: RunContext, where: str, connect: float,
             read: float) -> BaseException:
    """The error of a request cut off before its response head was whole."""
    if cause == "cancelled" or ctx.cancelled.is_set():
        return Cancelled("the run was cancelled")
    ctx.check()
    if cause == "head":  # worded as a silent server's: which one came first is a race
        return TransportError(f"no response from {where} within {read:g}s (read timeout)")
    if cause == "send":
        return TransportError(f"could not connect to {where} and send the request within "
                              f"{connect + read:g}s")
    return ctx.deadline_error("the run's deadline passed")


def _drain(read: Callable[[int], bytes], sock: Optional[socket.socket], cutoff: Cutoff,
           ctx: RunContext, read_timeout: float) -> bool:
    """Read the rest of a body whose final event has come; True at its clean end.

    False, and the caller closes the connection, past ``DRAIN_BYTES`` or
    ``DRAIN_SECONDS`` (or the read timeout or the run's deadline, if sooner), when a
    read fails, or once the run is cancelled. Never raises: the stream itself is
    complete, and only the connection's reuse is at stake.
    """
    if sock is None:
        return False  # a read could not be bounded in time
    budget = min(DRAIN_SECONDS, read_timeout)
    left = ctx.remaining()
    if left is not None:
        budget = min(budget, left)
    give_up = time.monotonic() + budget
    drained = 0
    while drained <= DRAIN_BYTES and not ctx.cancelled.is_set():
        wait = give_up - time.monotonic()
        if wait <= 0:
            return False
        try:
            if sock.fileno() != -1:  # closed: the body is read
                cutoff.arm(give_up, "drain")  # a trailer sent a byte at a time ends here too
            data = read(_READ_SIZE)
        except Exception:  # noqa: BLE001 - any failure only means "do not reuse"
            cutoff.disarm()
            return False
        if cutoff.disarm():
            return False
        if not data:
            return not ctx.cancelled.is_set()
        drained += len(data)
    return False


def _release(response: requests.Response) -> None:
    """Give a connection whose body was read to the end back to its pool.

    urllib3 2.x has already done so when its ``read1`` met the end; on 1.26 the body
    is read from http.client underneath, so the release is left to this (http.client
    marks a chunked body's end by closing, a Content-Length body's by length 0).
    """
    raw = response.raw
    original = getattr(raw, "_original_response", None)
    if original is None or original.isclosed() or getattr(original, "length", None) == 0:
        raw.release_conn()


def _short(response: requests.Response) -> bool:
    """True when a Content-Length body ended early. urllib3 2.x raises for it; on 1.26
    http.client's ``read1``, read directly, returns b"" as at a clean end."""
    length = getattr(getattr(response.raw, "_original_response", None), "length", None)
    return isinstance(length, int) and length > 0


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (socket.timeout, urllib3.exceptions.TimeoutError))


def _reader(response: requests.Response) -> Callable[[int], bytes]:
    """What reads the body: ``read(size)`` returns what has arrived (b"" at its end).

    A body with no content coding is read from ``http.client``'s response under
    urllib3's, as urllib3 would read it, without urllib3's layers per read (a context
    manager, its decoder and its counters: about ten calls and two objects the
    collector tracks, for every read of every stream). What those layers check is
    checked here: a Content-Length body that ends short is ``_short``, and the errors
    http.client raises are the ones ``sse_batches`` sorts out. A coded body (a server
    that ignored ``Accept-Encoding: identity``) is left to urllib3, which decodes it.
    """
    raw = response.raw
    read1 = getattr(raw, "read1", None)
    original = getattr(raw, "_original_response", None)
    coding = str(raw.headers.get("content-encoding", "")).strip().lower()
    if read1 is not None:  # urllib3 2.x
        if (coding not in ("", "identity") or original is None or raw._fp is not original
                or getattr(raw, "_fp_bytes_read", None) != 0
                or not callable(getattr(original, "read1", None))):
            return lambda size: bytes(read1(size, decode_content=True))
        return _direct(original)
    # urllib3 1.26 has no read1; http.client's, underneath, returns what has arrived
    # for chunked and close-delimited bodies alike.
    fallback: Callable[[int], bytes] = getattr(raw, "_fp").read1
    if coding in ("", "identity"):
        return fallback
    return _decoded_1_26(raw, fallback)


def _decoded_1_26(raw: Any, read1: Callable[[int], bytes]) -> Callable[[int], bytes]:
    """A coded body (a server that ignored ``Accept-Encoding: identity``) under
    urllib3 1.26, read as it arrives and decoded by the response's own decoder, as
    its ``read(decode_content=True)`` would (1.26's ``_init_decoder`` and ``_decode``;
    that ``read`` waits for ``amt`` bytes, which a stream never may). A coding it
    does not know is passed through as urllib3 passes it."""
    raw._init_decoder()

    def read(size: int) -> bytes:
        while True:
            data = read1(size)
            decoded: bytes = raw._decode(data, True, not data)  # flushed at the end
            # Coded bytes may decode to nothing yet (a gzip header): b"" is the end.
            if decoded or not data:
                return decoded

    return read


def _direct(original: Any) -> Callable[[int], bytes]:
    """``original.read1``, closing the response once a Content-Length body is read to
    its length: http.client's ``read1`` leaves it open (CPython issue 113199), and an
    open response would keep its connection from serving the next request."""
    read1 = original.read1

    def read(size: int) -> bytes:
        data: bytes = read1(size)
        if original.length == 0 and not original.isclosed():
            original.close()
        return data

    return read
