"""The streamable HTTP transport of the local MCP client.

Every message the client sends is its own ``POST`` to the one MCP endpoint, with
``Accept: application/json, text/event-stream``; a request's answer comes back
either as one JSON body or as an SSE stream (read with :mod:`nacelle.sse`) that may
carry the server's notifications and requests before the response. The
``Mcp-Session-Id`` the server hands out with the ``initialize`` answer goes with
every later request, with ``MCP-Protocol-Version``; ``close`` sends ``DELETE`` to end
the session. A server that offers a ``GET`` stream for messages outside any request
(``notifications/tools/list_changed`` after a tool appeared, say) is listened to
from a background thread; the handshake ends once that stream is answered (or
after :data:`LISTEN_WAIT` seconds), so nothing the server sends on it from the
start is missed.

Choices, and why:

- Each request's POST runs on its own daemon thread that delivers what it reads to
  the client, the way the stdio reader does; the caller waits on its own reply with
  its own timeout, and giving up closes that response. So a slow call never blocks
  another, and nothing waits longer than asked.
- What nobody waits for (answers to the server's requests, cancellations) is posted
  by at most :data:`SENDERS` threads from a queue of at most :data:`QUEUED`: a
  server sending a flood of pings gets its answers without the client starting a
  thread for each. Past the queue a message is dropped, with a warning: the server
  that asked is the one sending too much.
- HTTP failures belong to the request that met them (a proxy's 502 page fails one
  call, not the session). A 404 on a request carrying a session id means the
  session expired; the client then shakes hands again and resends once, as the
  spec asks.
- An SSE stream that ends before the response, after giving an event id, is
  resumed with ``GET`` and ``Last-Event-ID`` after the server's ``retry`` delay (at
  most three times, never more than 10 s apart): resumable servers close streams
  on purpose.
- On 2026-07-28 the transport is stateless: every POST carries
  ``MCP-Protocol-Version``, ``Mcp-Method`` and, for ``tools/call``, ``prompts/get``
  and ``resources/read``, ``Mcp-Name`` (Base64 in the spec's ``=?base64?…?=`` form
  when it is not plain visible ASCII) and a tool's ``x-mcp-header`` parameters as
  ``Mcp-Param-*`` (see ``protocol``), all mirrored from the body, which is where
  the client put them; there is no session, no ``GET`` stream (change notifications
  come on the ``subscriptions/listen`` answer, read with no read timeout), no
  resumption, and closing a request's response is its cancellation
  (``cancels_by_closing``). The era is probed by the client with a modern
  ``server/discover``: a legacy server's 4xx or JSON-RPC error sends it to the
  2025 handshake.
- With ``auth`` (:class:`nacelle.mcp.auth.OAuth`), every request gets its headers,
  and a POST answered 401 or 403 calls its ``unauthorized`` with the
  ``WWW-Authenticate`` challenge and is resent once when that says so; a GET stream
  refused that way is simply not listened to. A redirect to another origin is
  refused, not followed with the caller's headers (``http_auth``).
- The caller's ``headers`` (credentials, typically) never appear in a log line, a
  repr or an error, and neither does the URL's query string or user info: errors
  name the server by scheme, host and path only. Nor do they ride along: an error
  is raised outside the ``except`` that caught the ``requests`` exception, so its
  ``__context__`` is not that exception, with the full URL in its text and the
  headers in its request. A header HTTP cannot carry (a line break, a space at
  either end, a character beyond latin-1, a name that is not a token) is a
  ``ConfigError`` naming the header, never quoting it, where ``requests`` would have
  quoted the value or ``http.client`` failed at the first request; the checks are the
  model backends' own (:mod:`nacelle._net.headers`).

Outer ring: imports the standard library, ``nacelle.errors``, the package's
``client``, ``errors``, ``http_auth``, ``protocol`` and ``session``, ``nacelle.sse``,
``nacelle._net`` (header checks, URL naming, the socket walk), and ``requests`` inside
the methods that need it (so importing ``nacelle.mcp`` loads no third-party module).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, Set, Tuple
from urllib.parse import urlsplit

from .._loggers import get_logger
from .._net.headers import checked
from .._net.secrets import safe_url
from .._net.sockets import shut
from ..errors import ConfigError
from ..sse import SSEDecoder, parse_json
from .client import MCPClient
from .errors import MCPError, SessionExpired
from .http_auth import Authorization, origin_guard
from .protocol import MODERN_VERSION, PROTOCOL_KEY, OnElicit, header_value, param_values
from .session import Workers

__all__ = ["HTTPTransport", "connect_http"]

logger = get_logger(__name__)

MAX_BODY = 64 * 2**20
#: How much longer than the client's timeout a request's HTTP read may wait.
ANSWER_GRACE = 5.0
RESUMES = 3
#: How long the handshake waits for the server's GET stream to be answered.
LISTEN_WAIT = 2.0
MAX_RETRY_DELAY = 10.0
#: Threads posting messages nobody waits for, and how many such messages may queue.
SENDERS = 4
QUEUED = 1024
ACCEPT = "application/json, text/event-stream"
# What HTTP can carry in a header; requests and http.client refuse the rest with an
# error that quotes the value. Whole-string matches: ``$`` would let a final "\n" by.


class HTTPTransport:
    """Talks to one MCP endpoint; ``describe`` names it without secrets."""

    #: On 2026-07-28, closing a request's response stream cancels it.
    cancels_by_closing = True
    #: Tool name -> its ``x-mcp-header`` names and value paths, set by the client
    #: from the tool list (2026-07-28: mirrored as ``Mcp-Param-*`` headers).
    tool_params: Dict[str, Dict[str, Tuple[str, ...]]]

    def __init__(self, url: str, *, headers: Optional[Mapping[str, str]] = None,
                 timeout: Optional[float] = 30.0, auth: Any = None) -> None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"an MCP server URL must be an http:// or https:// URL, "
                              f"got {safe_url(url)}")
        headers = dict(headers or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise ConfigError("MCP server headers must map strings to strings")
        headers = checked(headers, what="the MCP server's")
        self.url = url
        netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        self.describe = repr(f"{parts.scheme}://{netloc}{parts.path}")
        self._headers = headers
        self._auth = None if auth is None else Authorization(auth, url)
        self.tool_params = {}
        self._timeout = timeout
        self._session_id: Optional[str] = None
        self._protocol_version: Optional[str] = None
        self._modern = False
        self._http: Any = None
        self._deliver: Callable[..., Any] = _ignore
        self._fail: Callable[[Any, MCPError], None] = _ignore
        self._lock = threading.Lock()
        self._responses: Dict[Any, Any] = {}
        self._abandoned: Set[Any] = set()
        self._threads: Set[threading.Thread] = set()
        self._closing = threading.Event()
        self._listen_answered = threading.Event()
        self._sending = Workers("nacelle-mcp-http-send", workers=SENDERS, backlog=QUEUED)

    def __repr__(self) -> str:
        return f"<HTTPTransport {self.describe}{' with session' if self._session_id else ''}>"

    # -- the transport interface ------------------------------------------------------

    def start(self, deliver: Callable[..., Any], fail: Callable[[Any, MCPError], Any]) -> None:
        import requests

        self._http = requests.Session()
        self._http.hooks["response"].append(origin_guard(self.url, self.describe))
        self._deliver = deliver
        self._fail = fail

    def opened(self, protocol_version: str) -> None:
        self._protocol_version = protocol_version
        self._modern = protocol_version == MODERN_VERSION
        if not self._modern:  # 2026-07-28 has no GET stream: subscriptions/listen instead
            self._spawn(self._listen, "get")

    def settle_authorization(self) -> bool:
        """Whether an OAuth flow was running (see ``http_auth``); waits for its end."""
        return self._auth is not None and self._auth.settle()

    def reset_session(self) -> None:
        self._session_id = None
        self._protocol_version = None

    def send(self, message: Dict[str, Any]) -> None:
        if self._closing.is_set():
            raise MCPError(f"the connection to MCP server {self.describe} is closed")
        if "method" in message and "id" in message:
            self._spawn(lambda: self._exchange(message), f"post-{message['id']}")
            return
        if message.get("method") == "notifications/initialized":
            # Every later request must reach the server after this one, and after the
            # GET stream opened (or was refused), so that the server's messages for it
            # (a change announced as soon as the session starts) are not missed, nor
            # the answer to a request that the server sends on the first stream it has
            # when the request's own stream ends (a server that resumes on GET).
            self._notify(message)
            self._listen_answered.wait(min(self._timeout or LISTEN_WAIT, LISTEN_WAIT))
        elif not self._sending.submit(lambda: self._notify_quietly(message)):
            # Cancellations and our answers to the server's requests: nobody waits
            # for a reply, and a cancelling caller must not wait for a slow server.
            logger.warning("MCP server %s: %d messages already wait to be sent; dropped %s",
                           self.describe, QUEUED, message.get("method", "an answer"))

    def _notify(self, message: Dict[str, Any]) -> None:
        # At least a few seconds: a client timeout tuned for answers is no reason to
        # drop a notification a busy server takes a moment to accept.
        response = self._post(message, stream=False,
                              timeout=max(self._timeout, 5.0) if self._timeout else None)
        response.close()
        if response.status_code >= 400:
            raise MCPError(f"MCP server {self.describe} answered HTTP {response.status_code} "
                           f"to {message.get('method', 'a response')}")

    def _notify_quietly(self, message: Dict[str, Any]) -> None:
        try:
            self._notify(message)
        except MCPError as err:
            logger.debug("%s", err)

    def abandon(self, request_id: Any) -> None:
        with self._lock:
            self._abandoned.add(request_id)
            response = self._responses.pop(request_id, None)
        shut(response)

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        self._sending.close()
        with self._lock:
            responses, self._responses = list(self._responses.values()), {}
        for response in responses:
            shut(response)
        if self._http is None:
            return
        if self._session_id:
            try:
                reply = self._http.delete(self.url, headers=self._request_headers(),
                                          timeout=self._timeouts(5.0))
                reply.close()
            except Exception as err:  # noqa: BLE001 - the session ends either way
                logger.debug("DELETE of the MCP session at %s failed: %s", self.describe,
                             type(err).__name__)
        with self._lock:
            responses, self._responses = list(self._responses.values()), {}
        for response in responses:
            shut(response)
        joined = time.monotonic() + 1.0  # a second for all of them, not one each
        for thread in list(self._threads):
            if thread is not threading.current_thread():
                thread.join(max(0.0, joined - time.monotonic()))
        self._http.close()

    # -- requests and their answers ------------------------------------------------------

    def _exchange(self, message: Dict[str, Any]) -> None:
        """POST one request and deliver everything its answer carries."""
        request_id, method = message["id"], message["method"]
        # The caller waits for the answer with its own timeout (never longer than the
        # client's) and gives up first, closing this response. This read timeout only
        # ends the thread of an answer nobody waits for any more; were it the same as
        # the caller's, the two would race and a slow answer could read as a server
        # that cannot be reached.
        answer_timeout = None if self._timeout is None else self._timeout + ANSWER_GRACE
        if method == "subscriptions/listen":
            answer_timeout = None  # quiet for as long as nothing changes
        try:
            response = self._post(message, stream=True, timeout=answer_timeout)
        except MCPError as err:
            self._fail(request_id, err)
            return
        if not self._track(request_id, response):
            return
        try:
            if method == "initialize" and response.headers.get("mcp-session-id"):
                self._session_id = response.headers["mcp-session-id"]
            status = response.status_code
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if status == 404 and self._session_id and method != "initialize":
                self._fail(request_id, SessionExpired(
                    f"MCP server {self.describe} no longer knows this session"))
                return
            if kind == "text/event-stream" and status < 400:
                answered, last_id, retry = self._read_stream(response, request_id)
                self._resume(request_id, answered, last_id, retry)
                return
            body = response.raw.read(MAX_BODY + 1, decode_content=True) or b""
            answered = False
            if kind == "application/json" and len(body) <= MAX_BODY:
                try:
                    answered = self._deliver_all(parse_json(body.decode("utf-8")), request_id)
                except ValueError as err:
                    if status < 400:
                        what = ("something that is not JSON" if isinstance(
                            err, (json.JSONDecodeError, UnicodeDecodeError))
                            else f"JSON the client refuses ({err})")
                        self._fail(request_id, MCPError(
                            f"MCP server {self.describe} answered {method} with {what}: "
                            f"{_preview(body)}"))
                        return
            if answered:
                return
            if status >= 400:
                self._fail(request_id, MCPError(
                    f"MCP server {self.describe} answered {method} with HTTP {status}: "
                    f"{_preview(body)}"))
            else:
                self._fail(request_id, MCPError(
                    f"MCP server {self.describe} answered {method} with HTTP {status} "
                    f"({kind or 'no content type'}) but no JSON-RPC response"))
        except Exception as err:  # noqa: BLE001 - a dropped or closed connection
            if not self._gave_up(request_id):
                self._fail(request_id, MCPError(
                    f"the connection to MCP server {self.describe} broke during {method}: "
                    f"{type(err).__name__}"))
        finally:
            self._untrack(request_id, response)

    def _read_stream(self, response: Any, request_id: Any) -> Tuple[bool, str, Optional[int]]:
        """Deliver every message of one SSE answer; stop once ours has come."""
        decoder = SSEDecoder(max_line=MAX_BODY)
        answered, last_id, retry = False, "", None
        for chunk in response.iter_content(chunk_size=None):
            for event in decoder.feed(chunk):
                last_id, retry = event.id, event.retry
                if event.data.strip():
                    answered = self._deliver_event(event.data, request_id) or answered
            if answered or self._gave_up(request_id):
                return True, last_id, retry
        for event in decoder.close():
            if event.data.strip():
                answered = self._deliver_event(event.data, request_id) or answered
        return answered, last_id, retry

    def _resume(self, request_id: Any, answered: bool, last_id: str,
                retry: Optional[int]) -> None:
        attempts = 0
        if self._modern:
            last_id = ""  # 2026-07-28 streams are not resumable
        while not answered and last_id and attempts < RESUMES and not self._gave_up(request_id):
            attempts += 1
            delay = min(MAX_RETRY_DELAY, (retry if retry is not None else 1000) / 1000)
            if self._closing.wait(delay):
                return
            logger.debug("resuming the answer to MCP request %s from event %r",
                         request_id, last_id)
            try:
                response = self._get({"Last-Event-ID": last_id})
            except MCPError as err:
                self._fail(request_id, err)
                return
            if not self._track(request_id, response):
                return
            try:
                if response.status_code != 200:
                    break
                answered, new_id, retry = self._read_stream(response, request_id)
                if new_id != last_id:
                    attempts, last_id = 0, new_id
            finally:
                self._untrack(request_id, response)
        if not answered and not self._gave_up(request_id):
            self._fail(request_id, MCPError(
                f"MCP server {self.describe} ended the stream before answering"))

    def _deliver_event(self, data: str, request_id: Any) -> bool:
        try:
            message = parse_json(data)
        except ValueError as err:
            what = ("that is not JSON" if isinstance(err, json.JSONDecodeError)
                    else f"with JSON the client refuses ({err})")
            self._fail(request_id, MCPError(
                f"MCP server {self.describe} sent an SSE event {what}: {_preview(data)}"))
            return True  # nothing more of this stream is worth reading
        return self._deliver_all(message, request_id)

    def _deliver_all(self, message: Any, request_id: Any) -> bool:
        """Deliver what came on the answer to ``request_id`` (so a message the client
        cannot use fails that request alone), and say whether it settled it."""
        return bool(self._deliver(message, request_id))

    # -- the server's own stream ------------------------------------------------------------

    def _listen(self) -> None:
        """Read the GET stream for messages outside any request, while open."""
        quiet = 0
        while not self._closing.is_set() and quiet < RESUMES:
            try:
                response = self._get({}, read_timeout=None)
            except MCPError:
                return
            finally:
                self._listen_answered.set()
            if (response.status_code != 200 or "text/event-stream"
                    not in response.headers.get("content-type", "")):
                response.close()  # 405: this server offers no such stream
                return
            with self._lock:
                self._responses["get"] = response
            got_any = False
            retry = None
            try:
                decoder = SSEDecoder(max_line=MAX_BODY)
                for chunk in response.iter_content(chunk_size=None):
                    for event in decoder.feed(chunk):
                        retry = event.retry
                        if event.data.strip():
                            got_any = True
                            self._deliver(parse_json(event.data))
            except ValueError:
                logger.warning("MCP server %s sent an event that is not JSON on its stream; "
                               "no longer listening", self.describe)
                return
            except Exception:  # noqa: BLE001 - dropped, or closed by close()
                pass
            finally:
                self._untrack("get", response)
            quiet = 0 if got_any else quiet + 1
            delay = min(MAX_RETRY_DELAY, (retry if retry is not None else 1000) / 1000)
            if self._closing.wait(delay):
                return

    # -- HTTP ------------------------------------------------------------------------------

    def _post(self, message: Dict[str, Any], *, stream: bool,
              timeout: Optional[float] = -1.0) -> Any:
        import requests

        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        read = self._timeout if timeout == -1.0 else timeout
        for attempt in (1, 2):
            headers = self._request_headers()
            headers.update(_mirrored(message, self.tool_params))
            headers["Content-Type"] = "application/json"
            headers["Accept"] = ACCEPT
            try:
                response = self._http.post(self.url, data=body, headers=headers, stream=stream,
                                           timeout=self._timeouts(read))
            except (requests.RequestException, ValueError) as err:  # http.client's: ValueError
                reason = _reason(err)
                break
            if not (attempt == 1 and self._auth is not None and response.status_code in (401, 403)):
                return response
            challenge = response.headers.get("www-authenticate", "")
            response.close()
            # The OAuth flow (discovery, a browser, a token request) runs here, on the
            # thread of the request that met the challenge; MCPAuthError is an MCPError.
            if not self._auth.unauthorized(challenge):
                raise MCPError(f"MCP server {self.describe} refused the authorization "
                               f"(HTTP {response.status_code})")
        raise MCPError(f"cannot reach MCP server {self.describe}: {reason}")

    def _get(self, extra: Dict[str, str], read_timeout: Optional[float] = -1.0) -> Any:
        import requests

        headers = self._request_headers()
        headers["Accept"] = "text/event-stream"
        headers.update(extra)
        timeout = self._timeouts(self._timeout if read_timeout == -1.0 else read_timeout)
        try:
            return self._http.get(self.url, headers=headers, stream=True, timeout=timeout)
        except (requests.RequestException, ValueError) as err:
            reason = _reason(err)
        raise MCPError(f"cannot reach MCP server {self.describe}: {reason}")

    def _request_headers(self) -> Dict[str, str]:
        headers = dict(self._headers)
        if self._auth is not None:
            headers.update(self._auth.headers())
        if self._session_id:
            headers["Mcp-Session-Id"] = self._session_id
        if self._protocol_version:
            headers["MCP-Protocol-Version"] = self._protocol_version
        return headers

    def _timeouts(self, read: Optional[float]) -> Tuple[Optional[float], Optional[float]]:
        connect = self._timeout if self._timeout is not None else None
        return (connect, read)

    # -- bookkeeping -----------------------------------------------------------------------

    def _spawn(self, target: Callable[[], None], label: str) -> None:
        def run() -> None:
            try:
                target()
            finally:
                self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=run, daemon=True, name=f"nacelle-mcp-http-{label}")
        self._threads.add(thread)
        thread.start()

    def _track(self, request_id: Any, response: Any) -> bool:
        with self._lock:
            if request_id in self._abandoned or self._closing.is_set():
                keep = False
            else:
                self._responses[request_id] = response
                keep = True
        if not keep:
            response.close()
        return keep

    def _untrack(self, request_id: Any, response: Any) -> None:
        with self._lock:
            if self._responses.get(request_id) is response:
                del self._responses[request_id]
        response.close()

    def _gave_up(self, request_id: Any) -> bool:
        with self._lock:
            return request_id in self._abandoned or self._closing.is_set()


def _mirrored(message: Dict[str, Any],
              tool_params: Mapping[str, Mapping[str, Tuple[str, ...]]]) -> Dict[str, str]:
    """The 2026-07-28 request headers mirrored from a request's body (with a tool's
    ``x-mcp-header`` parameters from ``tool_params``); none for a legacy request (no
    ``_meta`` protocol version) or a notification."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_KEY) if isinstance(meta, dict) else None
    if not isinstance(version, str) or "id" not in message:
        return {}
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": str(message["method"])}
    assert isinstance(params, dict)
    name = params.get("uri") if message["method"] == "resources/read" else params.get("name")
    if message["method"] in ("tools/call", "prompts/get", "resources/read") and isinstance(
            name, str):
        headers["Mcp-Name"] = header_value(name)
    arguments = params.get("arguments")
    if message["method"] == "tools/call" and isinstance(arguments, dict):
        headers.update(param_values(tool_params.get(str(name), {}), arguments))
    return headers


def _reason(err: BaseException) -> str:
    """Why a request failed, without the URL (its query may hold a token)."""
    import requests

    if isinstance(err, requests.Timeout):
        return "timed out"
    if isinstance(err, requests.ConnectionError):
        return "connection failed (refused, reset or unresolvable)"
    return type(err).__name__


def _preview(data: Any, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _ignore(*args: Any) -> None:
    return None


def connect_http(
    url: str,
    headers: Optional[Mapping[str, str]] = None,
    timeout: Optional[float] = 30.0,
    *,
    on_elicit: Optional[OnElicit] = None,
    protocol_version: Optional[str] = None,
    auth: Any = None,
) -> MCPClient:
    """Connect to an MCP server's streamable HTTP endpoint and agree on a protocol.

    ``headers`` (an ``Authorization`` header, say) go with every request and never
    into a log line, a repr or an error. Raises :class:`MCPError` when the server
    cannot be reached or refuses the handshake. ``on_elicit`` and
    ``protocol_version`` are as for :func:`~nacelle.mcp.connect_stdio`. ``auth``
    (a :class:`nacelle.mcp.auth.OAuth`) adds its ``Authorization`` header to every
    request and, on a 401 or 403, runs its flow and resends the request once.
    """
    transport = HTTPTransport(url, headers=headers, timeout=timeout, auth=auth)
    return MCPClient(transport, name=transport.describe, timeout=timeout, on_elicit=on_elicit,
                     protocol_version=protocol_version)._start()
