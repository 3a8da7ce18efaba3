"""The MCP session: MCP servers' tools as ordinary nacelle tools.

``connect_stdio`` (in ``stdio``) starts a server as a child process, ``connect_http`` talks to one
over streamable HTTP; both return an :class:`MCPClient` whose :meth:`~MCPClient.tools`
are plain :class:`~nacelle.tools.Tool` objects. The model's backend never learns that
MCP is involved, so these tools work on every backend, under the same approvals,
hooks, timeouts and concurrency as any other tool. (Server-side MCP, where the
*provider* calls a remote server, is ``Agent(mcp=[MCPServer(...)])`` instead.)

This module holds the protocol: JSON-RPC 2.0 request ids and routing, the
``initialize`` / ``notifications/initialized`` handshake, ``tools/list`` with
pagination, ``tools/call`` and its result text, ``notifications/tools/list_changed``,
per-call timeouts and ``notifications/cancelled``. The byte transports live in
``stdio`` and ``http`` (the :class:`Transport` protocol says what they owe); each delivers parsed messages from its own reader
thread, so replies, server requests and notifications may arrive in any order.

Choices where the protocol is silent, made as the official SDKs make them:

- The handshake offers protocol version 2025-11-25 and accepts 2025-06-18,
  2025-03-26 and 2024-11-05 back; any other answer closes the connection with an
  :class:`MCPError`. The stateless 2026-07-28 revision is not spoken yet: every
  server tried still answers ``initialize``.
- ``timeout`` bounds every request, ``tools/call`` included (the SDKs default to a
  per-request timeout too); a tool's own deadline and cancellation cut it shorter.
  Giving up on a request sends ``notifications/cancelled`` so the server stops work.
  A waiting call blocks once, until its answer, the connection's end, its deadline
  or a cancel callback wakes it; only a plain ``threading.Event``, which cannot call
  back, is looked at every 50 ms.
- A tool's failure is reported the way nacelle tools report failure, by raising: an
  ``isError`` result raises :class:`MCPError` with the server's text, which is what
  the model reads. A tool whose server has gone away fails the same way; nothing
  waits longer than its timeout.
- A message (or, from a transport, a line or body) the client cannot use fails the
  request it names, by its ``id`` or by arriving on that request's own HTTP answer,
  and the whole connection when it names none: no caller then waits out its timeout
  for a reply that cannot be routed. An ``id`` must be a string or an integer
  (``true`` would pass for request 1 in a dict).
- Results become text as ``content`` describes.
- A tool keeps the server's name (behind ``prefix__`` when asked) unless that name
  holds characters model APIs refuse in tool names (MCP allows ``.``, nacelle's
  names are ``[a-zA-Z0-9_-]{1,64}``): each such character becomes ``_`` and the
  name is cut to 64 characters, so one odd name does not make a whole server
  unusable. The call still goes out under the server's own name.
- ``notifications/tools/list_changed`` marks the list stale and refreshes it in the
  background, so the next :meth:`MCPClient.tools` call sees the new tools. Tools
  already handed to an Agent keep calling by name; a removed tool fails with the
  server's message.

Outer ring: imports the standard library, nacelle's core (``context``, ``errors``,
``tools``) and the package's ``content`` and ``errors``; never a transport (they
import this module), never ``requests``.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol

from ..context import ToolContext
from ..errors import Cancelled, ConfigError, NacelleError
from ..tools import from_hints
from .content import preview as _preview, result_text
from .errors import MCPError, SessionExpired, rebuild_error

__all__ = ["MCPClient", "MCPTool", "Transport", "is_request_id"]

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
CLIENT_INFO = {"name": "nacelle", "version": "0.1.0"}

# A prefix joins the tool name with two underscores; both must stay inside the
# names every backend accepts.
_PREFIX = re.compile(r"^[a-zA-Z0-9_-]{1,60}$")
_NOT_IN_NAMES = re.compile(r"[^a-zA-Z0-9_-]")
_LOG_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
    "alert": logging.CRITICAL, "emergency": logging.CRITICAL,
}
_POLL = 0.05  # how often a waiting call looks at a plain threading.Event


class Transport(Protocol):
    """What the session needs from a byte transport (``stdio``, ``http``).

    ``start`` gets two callbacks, called from the transport's own threads:
    ``deliver(message, answering=None)`` for every parsed message (``answering`` is
    the id of the request whose own answer carried it, when the transport knows),
    and ``fail(request_id, error)`` to fail one request, or the whole connection
    when ``request_id`` is None. ``send`` never blocks for long and raises
    :class:`MCPError` when the message cannot go out.
    """

    describe: str

    def start(self, deliver: Callable[..., Any],
              fail: Callable[[Any, MCPError], Any]) -> None: ...

    def opened(self, protocol_version: str) -> None: ...

    def reset_session(self) -> None: ...

    def send(self, message: Dict[str, Any]) -> None: ...

    def abandon(self, request_id: Any) -> None: ...

    def close(self) -> None: ...


def is_request_id(value: Any) -> bool:
    """Whether ``value`` can be a JSON-RPC request id here: a string or an integer
    (not a bool, which Python would take for 0 or 1, and not a float)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


class _Pending:
    """One request's wait. ``settled`` is set once its answer or failure is in;
    ``wake`` then too, and also by a cancel callback, so a single wait sees both."""

    __slots__ = ("settled", "wake", "result", "error")

    def __init__(self) -> None:
        self.settled = threading.Event()
        self.wake = threading.Event()
        self.result: Optional[Dict[str, Any]] = None
        self.error: Optional[MCPError] = None

    def settle(self, result: Optional[Dict[str, Any]] = None,
               error: Optional[MCPError] = None) -> None:
        self.result, self.error = result, error
        self.settled.set()
        self.wake.set()


class MCPClient:
    """A connection to one MCP server; use :func:`connect_stdio` or
    :func:`connect_http` to make one. A context manager; :meth:`close` is idempotent.

    After the handshake, ``server_info``, ``protocol_version``, ``capabilities`` and
    ``instructions`` hold what the server said about itself. Safe to use from
    several threads at once: each request has its own id and waits on its own reply.
    """

    def __init__(self, transport: Transport, *, name: str, timeout: Optional[float] = 30.0) -> None:
        self.name = name
        self.timeout = timeout
        self.server_info: Dict[str, Any] = {}
        self.protocol_version = ""
        self.capabilities: Dict[str, Any] = {}
        self.instructions = ""
        self._transport = transport
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: Dict[Any, _Pending] = {}
        self._broken: Optional[MCPError] = None
        self._closed = False
        self._tools_lock = threading.Lock()
        self._tools: Optional[List[Dict[str, Any]]] = None
        self._tools_changes = 0  # bumped by every list_changed notification
        self._tools_fetched_at = -1  # the value of _tools_changes the cache reflects
        self._handshake_lock = threading.Lock()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "broken" if self._broken else "open"
        return f"<MCPClient {self.name} {state}>"

    def __enter__(self) -> "MCPClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- public -------------------------------------------------------------------

    def tools(self, prefix: Optional[str] = None) -> List["MCPTool"]:
        """The server's tools as nacelle tools, named as the server names them or,
        with ``prefix``, ``prefix__name`` (to keep two servers' tools apart)."""
        if prefix is not None and not (isinstance(prefix, str) and _PREFIX.match(prefix)):
            raise ConfigError(
                f"an MCP tool prefix must be 1-60 letters, digits, '_' or '-', got {prefix!r}")
        listed = self.list_tools()
        return [MCPTool(self, spec, _tool_name(f"{prefix}__{spec['name']}" if prefix
                                               else spec["name"]))
                for spec in listed]

    def list_tools(self) -> List[Dict[str, Any]]:
        """The server's tool definitions as it sent them (every page), cached until
        the server says the list changed."""
        # The lock serialises fetches only; a list_changed arriving mid-fetch (the
        # reader thread must not wait for this lock: it delivers the fetch's answer)
        # bumps the counter, so the next call fetches again.
        with self._tools_lock:
            changes = self._tools_changes
            if self._tools is None or self._tools_fetched_at != changes:
                self._tools = self._fetch_tools()
                self._tools_fetched_at = changes
            return list(self._tools)

    def call_tool(
        self,
        name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        cancelled: Optional[threading.Event] = None,
        deadline: Optional[float] = None,
    ) -> str:
        """Call a tool and return its result as text; raise :class:`MCPError` when
        the server reports the call failed (``isError``) or does not answer in
        time, and :class:`~nacelle.errors.Cancelled` when ``cancelled`` is set."""
        params = {"name": name, "arguments": dict(arguments or {})}
        result = self.request("tools/call", params, cancelled=cancelled, deadline=deadline)
        text = result_text(result)
        if result.get("isError"):
            raise MCPError(text or f"tool {name!r} failed without saying why")
        return text

    def request(
        self,
        method: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        cancelled: Optional[threading.Event] = None,
        deadline: Optional[float] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Send one JSON-RPC request and wait for its result.

        Waits at most ``timeout`` (default: the client's), never past ``deadline``
        (``time.monotonic()`` seconds), and stops when ``cancelled`` is set: at once
        for a :class:`~nacelle.context.CancelEvent`, which calls back, and within
        50 ms for a plain ``threading.Event``, which cannot.
        """
        try:
            return self._request(method, params, cancelled, deadline, timeout)
        except SessionExpired:
            # The server forgot the session (restarted, or expired it): the spec asks
            # for a fresh handshake; the request was never processed, so send it again.
            logger.debug("MCP server %s expired the session; starting a new one", self.name)
            self._transport.reset_session()
            self._handshake(self.timeout if timeout is None else timeout)
            return self._request(method, params, cancelled, deadline, timeout)

    def close(self) -> None:
        """End the session and release the server (for stdio: stop the process)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending, self._pending = self._pending, {}
        error = MCPError(f"the connection to MCP server {self.name} was closed")
        for waiter in pending.values():
            waiter.settle(error=error)
        self._transport.close()

    # -- protocol -------------------------------------------------------------------

    def _start(self) -> "MCPClient":
        """Start the transport and shake hands; on any failure, close and raise."""
        try:
            self._transport.start(self._deliver, self._fail)
            self._handshake(self.timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _handshake(self, timeout: Optional[float]) -> None:
        with self._handshake_lock:
            params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                      "clientInfo": dict(CLIENT_INFO)}
            try:
                result = self._request("initialize", params, None, None, timeout)
            except MCPError as err:
                raise MCPError(f"MCP server {self.name} refused the handshake: {err}",
                               code=err.code) from None
            version = result.get("protocolVersion")
            if version not in SUPPORTED_VERSIONS:
                raise MCPError(
                    f"MCP server {self.name} answered protocol version {version!r}; "
                    f"nacelle speaks {', '.join(SUPPORTED_VERSIONS)}")
            self.protocol_version = version
            info = result.get("serverInfo")
            self.server_info = info if isinstance(info, dict) else {}
            caps = result.get("capabilities")
            self.capabilities = caps if isinstance(caps, dict) else {}
            instructions = result.get("instructions")
            self.instructions = instructions if isinstance(instructions, str) else ""
            self._transport.opened(version)
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            logger.debug("MCP server %s speaks %s", self.name, version)

    def _fetch_tools(self) -> List[Dict[str, Any]]:
        if "tools" not in self.capabilities:
            return []
        tools: List[Dict[str, Any]] = []
        cursor: Optional[str] = None
        seen = set()
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})
            page = result.get("tools")
            if not isinstance(page, list):
                raise MCPError(f"MCP server {self.name} sent a tools/list result without a "
                               f"list of tools")
            for spec in page:
                if not (isinstance(spec, dict) and isinstance(spec.get("name"), str)
                        and isinstance(spec.get("inputSchema"), dict)):
                    raise MCPError(f"MCP server {self.name} listed a malformed tool: "
                                   f"{_preview(spec)}")
                tools.append(spec)
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
            if cursor in seen:  # a server repeating a cursor would have us loop forever
                raise MCPError(f"MCP server {self.name} repeated the tools/list cursor "
                               f"{cursor!r}")
            seen.add(cursor)

    def _request(self, method: str, params: Optional[Mapping[str, Any]],
                 cancelled: Optional[threading.Event], deadline: Optional[float],
                 timeout: Optional[float]) -> Dict[str, Any]:
        waiter = _Pending()
        with self._lock:
            if self._closed:
                raise MCPError(f"the connection to MCP server {self.name} is closed")
            if self._broken is not None:
                raise MCPError(str(self._broken))
            request_id = next(self._ids)
            self._pending[request_id] = waiter
        message: Dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            self._transport.send(message)
        except MCPError as err:
            self._fail(request_id, err)
        except BaseException:  # arguments that are not JSON, say: nobody will answer
            self._fail(request_id, MCPError(f"{method} was not sent"))
            raise
        timeout = self.timeout if timeout is None else timeout
        self._wait(waiter, request_id, method, cancelled, deadline, timeout)
        error = waiter.error
        if error is not None:
            # A copy for each caller: one failure reaches every waiting thread, and a
            # shared exception would gather all their tracebacks (and the transport
            # thread's frames) as each raises it.
            raise rebuild_error(type(error), str(error), error.code)
        return waiter.result if waiter.result is not None else {}

    def _wait(self, waiter: "_Pending", request_id: int, method: str,
              cancelled: Optional[threading.Event], deadline: Optional[float],
              timeout: Optional[float]) -> None:
        """Block until the request settles, ``cancelled`` is set, or time is up:
        the transport settles the waiter, a ``cancelled`` with ``add_callback`` (a
        :class:`~nacelle.context.CancelEvent`) wakes it, the wait's timeout is the
        deadline. Only a plain ``threading.Event`` is looked at every 50 ms."""
        ends = [t for t in (deadline, time.monotonic() + timeout if timeout else None)
                if t is not None]
        end = min(ends) if ends else None
        add_callback = getattr(cancelled, "add_callback", None)
        unregister = add_callback(waiter.wake.set) if add_callback is not None else None
        poll = cancelled is not None and add_callback is None
        try:
            while not waiter.settled.is_set():
                left = None if end is None else end - time.monotonic()
                if cancelled is not None and cancelled.is_set():
                    reason = "cancelled by the client"
                    error: Exception = Cancelled(f"MCP {method} to {self.name} was cancelled")
                elif left is not None and left <= 0:
                    reason = "timed out"
                    error = MCPError(f"MCP server {self.name} did not answer {method} " + (
                        "before the call's deadline" if end == deadline else
                        f"within {timeout:g}s"))
                else:
                    waiter.wake.wait(min(_POLL, left or _POLL) if poll else left)
                    continue
                if self._give_up(request_id, method, reason):
                    raise error
                waiter.settled.wait()  # the answer won the race and is being handed over
        finally:
            if unregister is not None:
                unregister()

    def _give_up(self, request_id: Any, method: str, reason: str) -> bool:
        """Stop waiting for a request and tell the server; False when its answer (or
        failure) came first."""
        with self._lock:
            if self._pending.pop(request_id, None) is None:
                return False
        self._transport.abandon(request_id)
        if method != "initialize":  # the spec forbids cancelling the handshake
            logger.debug("MCP %s %s to %s: %s", method, request_id, self.name, reason)
            self._send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": request_id, "reason": reason}})
        return True

    def _send(self, message: Dict[str, Any]) -> None:
        """Send a notification or a response; nobody waits for these, so a failure
        is logged, and the next request reports the broken connection."""
        try:
            self._transport.send(message)
        except MCPError as err:
            logger.debug("could not send %s to MCP server %s: %s",
                         message.get("method", "a response"), self.name, err)

    # -- called from transport threads ----------------------------------------------

    def _deliver(self, message: Any, answering: Any = None) -> bool:
        """Route one parsed message from the server (any thread, any order).

        ``answering`` is the id of the request whose own answer carried the message,
        when the transport knows it (an HTTP POST's response), else None. Returns
        whether the message settled that request.
        """
        if isinstance(message, list) and message:  # a JSON-RPC batch, allowed by 2025-03-26
            settled = False
            for item in message:  # a batch inside a batch is not an object: refused
                settled = self._route(item, answering) or settled
            return settled
        return self._route(message, answering)

    def _route(self, message: Any, answering: Any) -> bool:
        if not isinstance(message, dict):
            return self._reject(None, answering, "a message that is not a JSON object", message)
        is_call = "method" in message  # the server's own request or notification
        if message.get("jsonrpc") != "2.0" or (is_call and not isinstance(message["method"], str)):
            # A request's id is the server's numbering, not ours: it names no call.
            return self._reject(None if is_call else message.get("id"), answering,
                                "a message that is not JSON-RPC 2.0", message)
        if is_call:
            if "id" not in message:
                self._notified(message["method"], message.get("params"))
            elif is_request_id(message["id"]):
                self._answer(message["id"], message["method"])
            else:  # no answer could name it; and nobody of ours waits for it
                logger.warning("MCP server %s sent a request with an id that is not a string "
                               "or an integer: %s", self.name, _preview(message))
            return False
        request_id = message.get("id")
        if "result" not in message and "error" not in message:
            return self._reject(request_id, answering,
                                "a response with neither result nor error", message)
        if request_id is None and answering is not None:
            request_id = answering  # an error the server could not tie to a request id
        if not is_request_id(request_id):
            return self._reject(None, answering, "a response whose id is not a string or "
                                "an integer", message)
        with self._lock:
            waiter = self._pending.pop(request_id, None)
        if waiter is None:
            # Usually the late answer to a call we gave up on.
            logger.debug("MCP server %s answered unknown request %r", self.name, request_id)
        elif "error" in message:
            waiter.settle(error=_rpc_error(self.name, message["error"]))
        elif isinstance(message["result"], dict):
            waiter.settle(result=message["result"])
        else:
            waiter.settle(error=MCPError(
                f"MCP server {self.name} answered request {request_id} with a result that "
                f"is not an object: {_preview(message['result'])}"))
        return bool(request_id == answering)

    def _reject(self, request_id: Any, answering: Any, what: str, message: Any) -> bool:
        """Fail the request a message the client cannot use belongs to, or, when it
        belongs to none we can name, the whole connection."""
        error = MCPError(f"MCP server {self.name} sent {what}: {_preview(message)}")
        owner = answering if answering is not None else request_id
        if not is_request_id(owner):
            self._fail(None, error)
            return False
        logger.warning("%s", error)
        self._fail(owner, error)
        return bool(owner == answering)

    def _fail(self, request_id: Any, error: MCPError) -> bool:
        """Fail one pending request, or (``request_id`` None) the whole connection.
        Returns whether anybody was waiting."""
        with self._lock:
            if request_id is not None:
                failed = [self._pending.pop(request_id)] if request_id in self._pending else []
            else:
                if self._closed:
                    return False
                first = self._broken is None
                if first:
                    self._broken = error
                failed, self._pending = list(self._pending.values()), {}
        if request_id is None and first:
            logger.warning("%s", error)
        for waiter in failed:
            waiter.settle(error=error)
        return bool(failed)

    def _answer(self, request_id: Any, method: str) -> None:
        # The client declares no capabilities, so ping is the one request it serves.
        if method == "ping":
            self._send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            self._send({"jsonrpc": "2.0", "id": request_id, "error": {
                "code": -32601, "message": f"method not supported by this client: {method}"}})

    def _notified(self, method: str, params: Any) -> None:
        params = params if isinstance(params, dict) else {}
        if method == "notifications/tools/list_changed":
            with self._lock:
                self._tools_changes += 1
            # Refreshing needs a request, and this is the reader thread that would
            # deliver its answer: refresh from another thread.
            threading.Thread(target=self._refresh_tools, daemon=True,
                             name=f"nacelle-mcp-refresh-{self.name}").start()
        elif method == "notifications/message":
            level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
            logger.log(level, "MCP server %s: %s", self.name, _preview(params.get("data"), 2000))
        else:
            logger.debug("MCP server %s sent %s", self.name, method)

    def _refresh_tools(self) -> None:
        try:
            self.list_tools()
        except NacelleError as err:
            logger.debug("refreshing the tools of MCP server %s failed: %s", self.name, err)


class MCPTool:
    """One MCP server tool, as a nacelle :class:`~nacelle.tools.Tool`.

    ``schema`` is the server's ``inputSchema``; the metadata, its annotations' claim.
    """

    exclusive = False
    advisory = True  # a claim (tools.from_hints): policy.secure() trusts it only if told to

    def __init__(self, client: MCPClient, spec: Dict[str, Any], name: str) -> None:
        self.client = client
        self.name = name
        self.remote_name: str = spec["name"]
        self.description: str = (spec.get("description") or spec.get("title") or "")
        self.schema: Dict[str, Any] = json.loads(json.dumps(spec["inputSchema"]))
        hints = from_hints(spec.get("annotations"))
        self.read_only, self.destructive, self.idempotent, self.open_world = hints

    def __repr__(self) -> str:
        return f"<MCPTool {self.name!r} from {self.client.name!r}>"

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> str:
        # The context's deadline is on its own clock (a test's fake one, say); what
        # is left of it is the same on any clock.
        remaining = ctx.remaining()
        deadline = None if remaining is None else time.monotonic() + remaining
        return self.client.call_tool(self.remote_name, input, cancelled=ctx.cancelled,
                                     deadline=deadline)


def _tool_name(name: str) -> str:
    return _NOT_IN_NAMES.sub("_", name)[:64] or "_"


def _rpc_error(server: str, error: Any) -> MCPError:
    if not isinstance(error, dict):
        return MCPError(f"MCP server {server} answered with an error: {_preview(error)}")
    code = error.get("code")
    text = f"MCP server {server} answered with error {code}: {error.get('message', '')}"
    return MCPError(text, code=code if isinstance(code, int) else None)
