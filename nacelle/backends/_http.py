"""The HTTP transport of the model backends: the only code that calls ``requests`` for
a model. It holds the sessions, the streaming POST, HTTP-level retry, the error
mapping and :func:`iter_sse`, which turns a streaming response into SSE events.

A backend uses it in three lines::

    transport = Transport(base_url, {"x-api-key": key}, name="anthropic",
                          key_variable="ANTHROPIC_API_KEY")
    response = transport.post_stream("/v1/messages", body, ctx)   # 2xx, or raised
    for event in transport.events(response, ctx, keepalive=lambda e: e.event == "ping"):
        ...                                                       # SSEEvent values

``post_json(path, body, ctx)`` does the same for a JSON answer (token counting).

What it promises:

- Bytes, never text: ``requests`` guesses ISO-8859-1 for a ``text/event-stream`` with
  no charset (OpenRouter's), so ``iter_lines``/``decode_unicode`` garble non-ASCII
  text. The body is read with the urllib3 response's ``read1``, which returns what has
  arrived; ``iter_content`` would hold a close-delimited body until EOF. Each event is
  yielded as soon as its blank line arrives.
- Retries like the official SDKs, and only before the body: connection errors, read
  timeouts waiting for the status, 408, 409, 429 and 5xx (529 included), unless
  ``x-should-retry`` says otherwise. The delay is ``retry-after-ms``, else
  ``retry-after`` (seconds or an HTTP date) when within (0, 60] s, else
  ``min(0.5 * 2**n, 8) * (1 - 0.25 * random())``. Every sleep goes through
  ``ctx.sleep``, so a fake clock records it and the run's deadline bounds it. A
  stream that fails midway is never retried here: output was already shown (``Retry``
  may restart a run that yielded nothing).
- Time limits: ``connect_timeout`` (5 s, as the Anthropic SDK) and ``timeout`` (600 s
  without a byte) are each capped by the run's remaining deadline. Separately,
  ``stall_timeout`` (600 s: long silent thinking is legitimate) bounds the time since
  the last event that was not a keepalive; it raises a retryable ``StreamError``.
- Cancellation from another thread unblocks a blocked read at once: the socket is
  shut down from the cancelling thread (closing a response does not wake a thread
  blocked in ``recv``, and closing its buffered reader waits for that thread's lock).
  To reach the socket while waiting for the status line, the session's connection
  pools note which connection the current request took.
- Errors: :class:`~nacelle.errors.APIError` for an HTTP error status, parsed from
  Anthropic's and OpenRouter's error shapes, with a hint where the status makes the
  fix clear; :class:`~nacelle.errors.TransportError` naming host and port when no
  response came; :class:`~nacelle.errors.StreamTruncated` when the body ends inside an
  event or the connection drops mid-stream; ``Cancelled`` after cancellation. Whether
  the stream's final event arrived is the backend's business. Redirects are not
  followed (a redirect would carry the key to wherever it points); a 3xx is an
  ``APIError`` that says to check ``base_url``. A 2xx stream labelled other than
  ``text/event-stream`` (a wrong ``base_url``'s HTML page) is a ``StreamError`` with a
  preview, not a "truncated" stream retried for nothing; an unlabelled one is read.
- Secrets: header values are kept out of every repr, message and log line, and are
  scrubbed from provider messages and body previews too.
- One ``requests.Session`` per transport and thread (requests does not promise a
  Session is thread-safe, and an Agent is shared between threads). Sessions are
  dropped when pickling and made again on first use.

Outer ring: imports ``requests``, ``urllib3``, the standard library, ``nacelle.errors``,
``nacelle.sse`` and ``nacelle.backend`` (for the RunContext type only).
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import random
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, Mapping, Optional
from urllib.parse import urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter

from ..backend import RunContext
from ..errors import (
    RETRYABLE_STATUSES, APIError, Cancelled, StreamError, StreamTruncated, TransportError,
    transient,
)
from ..sse import SSEDecoder, SSEEvent

__all__ = ["Transport", "iter_sse", "parse_error", "retry_delay"]

log = logging.getLogger(__name__)

PREVIEW_CHARS = 300
_ERROR_BODY_LIMIT = 64 * 1024
_READ_SIZE = 64 * 1024
_SECRET_WORDS = ("key", "auth", "token", "secret", "cookie", "signature")


class Transport:
    """HTTP for one backend: sessions, retries, error mapping, SSE.

    ``headers`` go on every request; their values are treated as secrets.
    ``key_variable`` names the environment variable the key comes from, for the 401
    hint.
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
    ) -> None:
        parts = urlsplit(str(base_url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http(s) URL with a host, got {base_url!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        for label, value in (("timeout", timeout), ("stall_timeout", stall_timeout),
                             ("connect_timeout", connect_timeout)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{label} must be a positive number of seconds, got {value!r}")
        self.base_url = str(base_url).rstrip("/")
        self.headers = dict(headers)
        self.max_retries = max_retries
        self.timeout = float(timeout)
        self.stall_timeout = float(stall_timeout)
        self.connect_timeout = float(connect_timeout)
        self.name = name
        self.key_variable = key_variable
        self._local = threading.local()

    def __repr__(self) -> str:
        return (f"Transport({self.name!r}, {self.base_url!r}, headers={sorted(self.headers)}, "
                f"max_retries={self.max_retries})")

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        del state["_local"]  # sessions hold sockets and locks; made again on use
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    @property
    def session(self) -> requests.Session:
        """This thread's session, made on first use."""
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = _new_session()
        return session

    def close(self) -> None:
        """Close this thread's session (other threads' sessions close with them)."""
        session = getattr(self._local, "session", None)
        if session is not None:
            self._local.session = None
            session.close()

    # -- requests -------------------------------------------------------------------

    def post_stream(self, path: str, body: Any, ctx: RunContext,
                    headers: Optional[Mapping[str, str]] = None) -> requests.Response:
        """POST ``body`` as JSON and return the streaming 2xx response, unread.

        Retries before the body is read, as the module docstring says; raises
        ``APIError``, ``TransportError`` or ``Cancelled``.
        """
        extra = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
        extra.update(headers or {})
        response = self._request(path, body, ctx, extra, stream=True)
        media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media and media != "text/event-stream":
            said = self._api_error(response, path).message or "an empty body"
            raise StreamError(f"{self.name} answered {response.status_code} with {media}, not an "
                              f"event stream: {said} — check base_url ({self.base_url})")
        return response

    def post_json(self, path: str, body: Any, ctx: RunContext,
                  headers: Optional[Mapping[str, str]] = None) -> Any:
        """POST ``body`` as JSON and return the parsed JSON answer."""
        extra = {"Accept": "application/json"}
        extra.update(headers or {})
        response = self._request(path, body, ctx, extra, stream=False)
        try:
            return json.loads(response.content)
        except ValueError:
            raise StreamError(
                f"{self.name} answered {response.status_code} with a body that is not JSON: "
                f"{self._scrub(_preview(response.content))!r}"
            ) from None
        finally:
            response.close()

    def events(self, response: requests.Response, ctx: RunContext,
               keepalive: Callable[[SSEEvent], bool] = lambda event: False) -> Iterator[SSEEvent]:
        """The SSE events of ``response`` (see :func:`iter_sse`), with this transport's
        read and stall timeouts."""
        return iter_sse(response, ctx, keepalive=keepalive, read_timeout=self.timeout,
                        stall_timeout=self.stall_timeout)

    # -- internals --------------------------------------------------------------------

    def _request(self, path: str, body: Any, ctx: RunContext, extra: Mapping[str, str],
                 stream: bool) -> requests.Response:
        url = self.base_url + path
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {"Content-Type": "application/json", **self.headers, **extra}
        where = _where(url)
        retries = 0
        while True:
            ctx.check()
            try:
                response = self._send(url, data, headers, ctx, stream)
            except TransportError as error:
                if retries >= self.max_retries:
                    raise
                failure: Exception = error
                delay = retry_delay({}, retries)
                log.debug("%s: %s; retry %d of %d in %.2fs", self.name, error, retries + 1,
                          self.max_retries, delay)
            else:
                if response.status_code < 300:
                    return response
                failure = error = self._api_error(response, path)
                if not error.retryable or retries >= self.max_retries:
                    raise error
                delay = retry_delay(response.headers, retries)
                log.debug("%s: HTTP %d from POST %s; retry %d of %d in %.2fs", self.name,
                          error.status, where, retries + 1, self.max_retries, delay)
            retries += 1
            try:
                ctx.sleep(delay)
            except Exception as stopped:  # a deadline reached while waiting names the wait
                raise stopped from (None if ctx.cancelled.is_set() else failure)

    def _send(self, url: str, data: bytes, headers: Dict[str, str], ctx: RunContext,
              stream: bool) -> requests.Response:
        left = ctx.remaining()
        connect = self.connect_timeout if left is None else min(self.connect_timeout, left)
        read = self.timeout if left is None else min(self.timeout, left)
        holder = _Holder()
        _current.holder = holder
        unregister = ctx.on_cancel(holder.abort)
        try:
            return self.session.post(url, data=data, headers=headers, stream=stream,
                                     timeout=(max(connect, 0.001), max(read, 0.001)),
                                     allow_redirects=False)
        except requests.RequestException as exc:
            if ctx.cancelled.is_set():
                raise Cancelled("the run was cancelled") from None
            ctx.check()  # a timeout cut short by the deadline is the deadline's error
            exc.request = exc.response = None  # they hold the headers, key included
            raise TransportError(_describe(exc, _where(url), connect, read)) from exc
        finally:
            _current.holder = None
            unregister()

    def _api_error(self, response: requests.Response, path: str) -> APIError:
        try:
            raw = b""
            for piece in response.iter_content(8192):
                raw += piece
                if len(raw) >= _ERROR_BODY_LIMIT:
                    break
        except (requests.RequestException, OSError):
            pass  # the status says enough; a half-read error body is no reason to hide it
        finally:
            response.close()
        error = parse_error(response.status_code, response.headers, raw)
        hint = _hint(response.status_code, self, path, response.headers.get("location", ""))
        message = self._scrub(error.message)
        if hint:
            message = f"{message} — {hint}" if message else hint
        return APIError(error.status, error.type, message, self._scrub(error.request_id),
                        error.retry_after, retryable=error.retryable)

    def _scrub(self, text: str) -> str:
        for name, value in self.headers.items():
            if not value or not any(word in name.lower() for word in _SECRET_WORDS):
                continue
            secret = str(value)
            token = secret.split(" ", 1)[-1]  # "Bearer sk-…": hide the token alone too
            for hidden in (secret, token):
                if len(hidden) >= 4:
                    text = text.replace(hidden, "<hidden>")
        return text


def iter_sse(
    response: requests.Response,
    ctx: RunContext,
    *,
    keepalive: Optional[Callable[[SSEEvent], bool]] = None,
    read_timeout: float = 600.0,
    stall_timeout: float = 600.0,
    max_line: int = 16 * 2**20,
) -> Iterator[SSEEvent]:
    """Yield the SSE events of a streaming ``requests`` response as they arrive.

    Ends cleanly on a clean end of body. Raises ``StreamTruncated`` when the body ends
    inside an event or the connection drops, ``TransportError`` after
    ``read_timeout`` seconds without a byte, a retryable ``StreamError`` after
    ``stall_timeout`` seconds without an event that ``keepalive`` does not claim, and
    ``Cancelled`` (or the context's deadline error) when the run stops. The response
    is closed when the generator ends, however it ends.
    """
    where = _where(response.url or "")
    decoder = SSEDecoder(max_line)
    sock = _socket_of(response)
    unregister = ctx.on_cancel(lambda: _shutdown(sock))
    read = _reader(response)
    progress = time.monotonic()
    try:
        while True:
            ctx.check()
            now = time.monotonic()
            stall_left = stall_timeout - (now - progress)
            if stall_left <= 0:
                raise _stalled(where, stall_timeout)
            limit, cause = read_timeout, "read"
            if stall_left < limit:
                limit, cause = stall_left, "stall"
            left = ctx.remaining()
            if left is not None and left < limit:
                limit, cause = left, "deadline"
            if sock is not None:
                sock.settimeout(max(limit, 0.001))
            try:
                data = read(_READ_SIZE)
            except Exception as exc:  # noqa: BLE001 - sorted out below
                if ctx.cancelled.is_set():
                    raise Cancelled("the run was cancelled") from None
                if not _is_timeout(exc):
                    if isinstance(exc, (urllib3.exceptions.HTTPError, http.client.HTTPException,
                                        OSError, ValueError)):
                        raise StreamTruncated(
                            f"the connection to {where} dropped in the middle of the stream "
                            f"({type(exc).__name__})") from None
                    raise
                ctx.check()
                if cause == "stall":
                    raise _stalled(where, stall_timeout) from None
                if cause == "deadline":  # a fake clock's deadline, reached in real time
                    raise ctx.deadline_error("the run's deadline passed") from None
                raise TransportError(
                    f"no data from {where} for {read_timeout:g}s (read timeout)") from None
            if not data:
                if ctx.cancelled.is_set():
                    raise Cancelled("the run was cancelled")
                decoder.close()
                if decoder.truncated:
                    raise StreamTruncated(
                        f"the body from {where} ended in the middle of an event")
                return
            for event in decoder.feed(data):
                if keepalive is None or not keepalive(event):
                    progress = time.monotonic()
                yield event
    finally:
        unregister()
        response.close()


def parse_error(status: int, headers: Mapping[str, str], body: bytes) -> APIError:
    """An ``APIError`` from an error response of Anthropic, OpenRouter or anything else.

    Anthropic: ``{"type":"error","error":{"type","message"},"request_id"}`` and a
    ``request-id`` header. OpenRouter: ``{"error":{"code","message","metadata"}}`` and
    maybe ``x-request-id`` / ``x-generation-id``. Other bodies give a short preview.
    """
    type_, message, request_id = "", "", ""
    try:
        document = json.loads(body.decode("utf-8")) if body.strip() else None
    except ValueError:
        document = None
    error = document.get("error") if isinstance(document, dict) else None
    if isinstance(error, dict):
        type_ = _text(error.get("type"))
        message = _text(error.get("message"))
        metadata = error.get("metadata")
        if isinstance(metadata, dict):
            type_ = type_ or _text(metadata.get("error_type"))
            raw = metadata.get("raw")
            provider = _text(metadata.get("provider_name"))
            if raw:
                raw = raw if isinstance(raw, str) else json.dumps(raw)
                message += f" ({provider + ': ' if provider else ''}{_shorten(raw)})"
            elif provider:
                message += f" ({provider})"
        request_id = _text(document.get("request_id"))
    elif isinstance(error, str):
        message = error
    elif isinstance(document, dict) and isinstance(document.get("message"), str):
        message = document["message"]
    elif body.strip():
        message = _preview(body)
    lowered = {k.lower(): v for k, v in headers.items()}
    request_id = (lowered.get("request-id") or lowered.get("x-request-id") or request_id
                  or lowered.get("x-generation-id") or "")
    should = lowered.get("x-should-retry", "").strip().lower()
    retry = True if should == "true" else False if should == "false" else status in RETRYABLE_STATUSES
    return APIError(status, type_, _shorten(message), request_id, _retry_after(lowered),
                    retryable=retry)


def retry_delay(headers: Mapping[str, str], retries_done: int,
                rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry number ``retries_done + 1``, the SDKs' rule."""
    after = _retry_after({k.lower(): v for k, v in headers.items()})
    if after is not None and 0 < after <= 60:
        return after
    return min(0.5 * 2 ** retries_done, 8.0) * (1 - 0.25 * rng())


# -- helpers of the functions above ---------------------------------------------------


def _retry_after(headers: Mapping[str, str]) -> Optional[float]:
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return when.timestamp() - time.time()


def _hint(status: int, transport: Transport, path: str, location: str) -> str:
    if status == 401:
        where = f"${transport.key_variable} or " if transport.key_variable else ""
        return f"check the API key ({where}the api_key argument)"
    if status == 402:
        return f"the {transport.name} account is out of credits or over its spending limit"
    if status == 403:
        return "the API key is not allowed to make this request"
    if status == 404:
        return f"check the model name and base_url ({transport.base_url}{path})"
    if 300 <= status < 400:
        return (f"the server redirected to {location or 'another address'}; redirects are not "
                f"followed — check base_url ({transport.base_url})")
    return ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1] + "…"


def _preview(body: bytes) -> str:
    return _shorten(body[:4 * PREVIEW_CHARS].decode("utf-8", "replace"))


def _where(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = "?"
    host = parts.hostname or "?"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _describe(exc: requests.RequestException, where: str, connect: float, read: float) -> str:
    if isinstance(exc, requests.ConnectTimeout):
        return f"timed out connecting to {where} after {connect:g}s"
    if isinstance(exc, requests.ReadTimeout):
        return f"no response from {where} within {read:g}s (read timeout)"
    reason = _root_cause(exc)
    if isinstance(reason, ConnectionRefusedError):
        return f"cannot connect to {where}: connection refused"
    if isinstance(exc, requests.exceptions.SSLError):
        return f"TLS handshake with {where} failed"
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host of {where}"
    if isinstance(reason, OSError) and reason.strerror:
        return f"connection to {where} failed before a response: {reason.strerror}"
    return f"connection to {where} failed before a response ({type(reason).__name__})"


def _root_cause(exc: BaseException) -> BaseException:
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = exc.__cause__ or exc.__context__
        if inner is None and exc.args and isinstance(exc.args[0], BaseException):
            inner = exc.args[0]
        if inner is None:
            inner = getattr(exc, "reason", None)
        if not isinstance(inner, BaseException):
            return exc
        exc = inner
    return exc


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (socket.timeout, urllib3.exceptions.TimeoutError))


def _stalled(where: str, seconds: float) -> StreamError:
    return transient(StreamError(
        f"the stream from {where} stalled: no event for {seconds:g}s (stall_timeout)"))


def _reader(response: requests.Response) -> Callable[[int], bytes]:
    raw = response.raw
    read1 = getattr(raw, "read1", None)
    if read1 is not None:  # urllib3 2.x
        return lambda size: read1(size, decode_content=True)
    # urllib3 1.26 has no read1; http.client's, underneath, returns what has arrived
    # for chunked and close-delimited bodies alike.
    return raw._fp.read1


def _socket_of(response: requests.Response) -> Optional[socket.socket]:
    raw = response.raw
    conn = getattr(raw, "_connection", None)
    sock = getattr(conn, "sock", None)
    if sock is None:
        try:
            sock = raw._fp.fp.raw._sock
        except AttributeError:
            return None
    return sock if isinstance(sock, socket.socket) else None


def _shutdown(sock: Optional[socket.socket]) -> None:
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


# -- sessions whose in-flight request can be aborted from another thread ---------------

_current = threading.local()  # .holder: the _Holder of this thread's request in flight


class _Holder:
    """The connection a request took, so another thread can shut its socket."""

    __slots__ = ("conn",)

    def __init__(self) -> None:
        self.conn = None

    def abort(self) -> None:
        _shutdown(getattr(self.conn, "sock", None))


def _noting(pool_class: type) -> type:
    class Pool(pool_class):  # type: ignore[misc, valid-type]
        def _get_conn(self, timeout=None):  # noqa: ANN001 - urllib3's signature
            conn = super()._get_conn(timeout)
            holder = getattr(_current, "holder", None)
            if holder is not None:
                holder.conn = conn
            return conn

    Pool.__name__ = Pool.__qualname__ = "Noting" + pool_class.__name__
    return Pool


_POOLS = {"http": _noting(urllib3.HTTPConnectionPool), "https": _noting(urllib3.HTTPSConnectionPool)}


class _Adapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS


def _new_session() -> requests.Session:
    session = requests.Session()
    adapter = _Adapter()  # urllib3 retries nothing: the retry rule above is the one rule
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
