"""The MCP client: one server's tools, resources and prompts, on either protocol generation.

``connect_stdio`` (in ``stdio``) starts a server as a child process, ``connect_http``
(in ``http``) talks to one over streamable HTTP; both return an :class:`MCPClient`.
Its :meth:`~MCPClient.tools` are plain :class:`~nacelle.tools.Tool` objects (see
``toolset``), so the model's backend never learns that MCP is involved: they work on
every backend, under the same approvals, hooks, timeouts and concurrency as any
other tool. (Server-side MCP, where the *provider* calls a remote server, is
``Agent(mcp=[MCPServer(...)])`` instead.) JSON-RPC itself is ``session``'s; what the
two generations differ in is ``protocol``'s.

Choices where the protocol is silent, made as the official SDKs make them:

- The client speaks 2026-07-28 to a server whose ``server/discover`` offers it and
  otherwise shakes hands the 2025 way, offering 2025-11-25 and accepting 2025-06-18,
  2025-03-26 and 2024-11-05 back (``protocol_version=`` pins one). Any other answer
  closes the connection with an :class:`MCPError`. The result is
  :attr:`MCPClient.protocol_version`. Over stdio, a probe unanswered for a second
  gets the handshake sent beside it (:meth:`MCPClient._probe`), so a 2025 server
  that ignores it connects then, not after the timeout. A probe that failed while an OAuth sign-in ran
  is sent again once it ends (a timeout then is no evidence of 2025), and a failed
  authorization is raised as the ``MCPAuthError`` it is, never followed by a
  handshake. A probe refused as ``UnsupportedProtocolVersion`` by a server that
  names 2026-07-28 among the versions it speaks is sent once more
  (:meth:`MCPClient._probe_again`).
- A tool's failure is reported the way nacelle tools report failure, by raising: an
  ``isError`` result raises :class:`MCPError` with the server's text, which is what
  the model reads. A tool whose server has gone away, or that the server no longer
  lists, fails the same way, saying so.
- Results become text or parts as ``content`` describes: :meth:`MCPClient.call_tool`
  is the text-only view (a medium described in a line), :meth:`MCPClient.call_tool_parts`
  what the client's tools return (images and PDFs as parts).
- The server's change notifications (``notifications/tools/list_changed`` in 2025;
  the same on a ``subscriptions/listen`` stream in 2026, opened on connecting when
  the server says its tool list changes, re-opened with backoff when it drops) mark
  the cached list stale and refresh it in the background, on one thread at a time:
  a notification arriving while it lists marks the list stale again, and it lists
  once more. ``ttlMs`` is not used: with the subscription, the cache is stale
  exactly when the server says so.
- A request answered with ``input_required`` (2026) is retried with the answers, up
  to 10 rounds; a 2025 server's ``elicitation/create`` is answered by one of the
  session's few workers (the reader must go on reading; see ``session``), so
  ``on_elicit`` runs at most four at once. Both ask ``on_elicit``; without it, the
  server is refused. Sampling and roots are refused.
- Progress a server reports for a tool call goes to ``ctx.progress(progress, total,
  message)`` when the tool's context has such a callable, and to this module's
  logger at DEBUG otherwise.

Outer ring: imports the standard library, nacelle's core (``errors``, ``messages``)
and the package's ``auth_flows`` (for ``MCPAuthError``), ``content``, ``errors``,
``protocol``, ``session`` and ``toolset``; never a transport (they import this
module), never ``requests``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Union

from .._loggers import get_logger
from ..errors import Cancelled, ConfigError, NacelleError
from ..messages import Message, Part, ToolMedia
from . import protocol
from .auth_flows import MCPAuthError
from .content import (
    preview as _preview, prompt_messages, resource_parts, result_parts, result_text,
)
from .errors import MCPError, SessionExpired
from .protocol import LEGACY_VERSIONS, MODERN_VERSION, OnElicit
from .session import Progress, Session, Transport, is_request_id
from .toolset import PREFIX, LiveTools, MCPTool, resource_tools, tool_name

__all__ = ["MCPClient", "Transport", "is_request_id"]

logger = get_logger(__name__)

_LOG_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
    "alert": logging.CRITICAL, "emergency": logging.CRITICAL,
}
_CHANGED = {"notifications/tools/list_changed", "notifications/prompts/list_changed",
            "notifications/resources/list_changed"}
_LISTEN = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}


class MCPClient(Session):
    """A connection to one MCP server; use :func:`connect_stdio` or
    :func:`connect_http` to make one. A context manager; :meth:`close` is idempotent.

    Once connected, ``server_info``, ``protocol_version``, ``capabilities`` and
    ``instructions`` hold what the server said about itself. Safe to use from
    several threads at once: each request has its own id and waits on its own reply.
    """

    def __init__(self, transport: Transport, *, name: str, timeout: Optional[float] = 30.0,
                 on_elicit: Optional[OnElicit] = None,
                 protocol_version: Optional[str] = None,
                 probe_quiet: Optional[float] = None) -> None:
        if protocol_version not in (None, MODERN_VERSION, *LEGACY_VERSIONS):
            raise ConfigError(f"protocol_version must be one of {MODERN_VERSION}, "
                              f"{', '.join(LEGACY_VERSIONS)} or None, got {protocol_version!r}")
        if on_elicit is not None and not callable(on_elicit):
            raise ConfigError("on_elicit must be a callable taking an Elicitation")
        super().__init__(transport, name=name, timeout=timeout)
        self.server_info: Dict[str, Any] = {}
        self.protocol_version = ""
        self.capabilities: Dict[str, Any] = {}
        self.instructions = ""
        self.on_elicit = on_elicit
        self._wanted = protocol_version
        self._probe_quiet = probe_quiet  # see _probe; None: the probe has the whole timeout
        self._tools_lock = threading.Lock()
        self._tools: Optional[List[Dict[str, Any]]] = None
        self._tools_changes = 0  # bumped by every list_changed notification
        self._tools_fetched_at = -1  # the value of _tools_changes the cache reflects
        self._tools_calls = 0  # bumped by every tools/call that ends, however it ends
        self._tools_fetched_calls = -1  # the value of _tools_calls the cache reflects
        self._refreshing = False  # whether the refresh thread runs
        self._handshake_lock = threading.Lock()
        self._listening = False
        self.listening = threading.Event()  # set once a subscriptions/listen is acknowledged
        self._closing = threading.Event()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "broken" if self._broken else "open"
        return f"<MCPClient {self.name} {self.protocol_version or 'unconnected'} {state}>"

    def __enter__(self) -> "MCPClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        super().close()

    # -- tools ------------------------------------------------------------------------------

    def tools(self, prefix: Optional[str] = None, *,
              live: bool = False) -> Union[List[MCPTool], LiveTools]:
        """The server's tools as nacelle tools, named as the server names them or,
        with ``prefix``, ``prefix__name`` (to keep two servers' tools apart).

        A list, as the server had it now; with ``live=True`` a :class:`LiveTools`
        that follows the server's list as it changes.
        """
        if prefix is not None and not (isinstance(prefix, str) and PREFIX.match(prefix)):
            raise ConfigError(
                f"an MCP tool prefix must be 1-60 letters, digits, '_' or '-', got {prefix!r}")
        if live:
            self._follow()
            return LiveTools(self, prefix)
        return [MCPTool(self, spec, tool_name(f"{prefix}__{spec['name']}" if prefix
                                              else spec["name"]))
                for spec in self.list_tools()]

    def list_tools(self, *, fresh: bool = False) -> List[Dict[str, Any]]:
        """The server's tool definitions as it sent them (every page), cached until
        the server says the list changed.

        ``fresh=True`` (what a live list asks before each turn) also lists again when
        a ``tools/call`` ended since the last listing. A call may change the list
        (a server adds a tool, then answers), and the server's notification of it
        travels apart from the call's answer — on the GET stream, not yet open, or
        on the subscription — so it may come after the next turn has begun. A
        listing sent after the answer arrived sees whatever the call changed.
        """
        # The lock serialises fetches only; a list_changed arriving mid-fetch (the
        # reader thread must not wait for this lock: it delivers the fetch's answer)
        # bumps the counter, so the next call fetches again; a call ending mid-fetch
        # bumps the other one, the same way.
        with self._tools_lock:
            changes, calls = self._tools_changes, self._tools_calls
            if (self._tools is None or self._tools_fetched_at != changes
                    or (fresh and self._tools_fetched_calls != calls)):
                self._tools = self._fetch_tools()
                self._tools_fetched_at, self._tools_fetched_calls = changes, calls
            return list(self._tools)

    def offers(self, remote_name: str) -> bool:
        """Whether the server's current tool list holds ``remote_name``."""
        return any(spec["name"] == remote_name for spec in self.list_tools())

    def call_tool(
        self,
        name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        cancelled: Optional[threading.Event] = None,
        deadline: Optional[float] = None,
        progress: Optional[Progress] = None,
    ) -> str:
        """Call a tool and return its result as text; raise :class:`MCPError` when
        the server reports the call failed (``isError``) or does not answer in
        time, and :class:`~nacelle.errors.Cancelled` when ``cancelled`` is set."""
        result = self.call_tool_result(name, arguments, cancelled=cancelled,
                                       deadline=deadline, progress=progress)
        _raise_if_failed(name, result)
        return result_text(result)

    def call_tool_parts(
        self,
        name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        cancelled: Optional[threading.Event] = None,
        deadline: Optional[float] = None,
        progress: Optional[Progress] = None,
    ) -> List[ToolMedia]:
        """Call a tool and return its result as parts: text as :class:`~nacelle.Text`,
        images as :class:`~nacelle.Image`, PDFs as :class:`~nacelle.Document`, what no
        part carries (audio, other blobs) as a Text saying what it is. Failures raise
        as :meth:`call_tool`'s do."""
        result = self.call_tool_result(name, arguments, cancelled=cancelled,
                                       deadline=deadline, progress=progress)
        _raise_if_failed(name, result)
        return result_parts(result)

    def call_tool_result(
        self,
        name: str,
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        cancelled: Optional[threading.Event] = None,
        deadline: Optional[float] = None,
        progress: Optional[Progress] = None,
    ) -> Dict[str, Any]:
        """The ``tools/call`` result as the server sent it (``content``,
        ``structuredContent``, ``isError``), after any rounds of input it asked for."""
        params = {"name": name, "arguments": dict(arguments or {})}
        try:
            return self._complete("tools/call", params, cancelled, deadline, progress)
        finally:
            with self._lock:  # a call, answered or not, may have changed the list
                self._tools_calls += 1

    # -- resources and prompts -----------------------------------------------------------------

    def resources(self) -> List[Dict[str, Any]]:
        """The server's resources (``uri``, ``name``, ``mimeType``...), every page."""
        return self._list("resources/list", "resources", "resources")

    def resource_templates(self) -> List[Dict[str, Any]]:
        """The server's resource templates (``uriTemplate``, ``name``...), every page."""
        return self._list("resources/templates/list", "resourceTemplates", "resources")

    def read_resource(self, uri: str, *, cancelled: Optional[threading.Event] = None,
                      deadline: Optional[float] = None) -> List[Part]:
        """A resource's contents as parts: text (and ``text/*`` blobs) as
        :class:`~nacelle.Text`, image blobs as :class:`~nacelle.Image`, PDF blobs as
        :class:`~nacelle.Document` (titled with the URI), other blobs and media whose
        bytes are not what the server said as a Text saying what they are."""
        result = self._complete("resources/read", {"uri": uri}, cancelled, deadline, None)
        return resource_parts(result)

    def resource_tools(self, prefix: Optional[str] = None) -> List[Any]:
        """Two tools that let the model list and read the server's resources."""
        if prefix is not None and not (isinstance(prefix, str) and PREFIX.match(prefix)):
            raise ConfigError(
                f"an MCP tool prefix must be 1-60 letters, digits, '_' or '-', got {prefix!r}")
        return resource_tools(self, prefix)

    def prompts(self) -> List[Dict[str, Any]]:
        """The server's prompts (``name``, ``description``, ``arguments``), every page."""
        return self._list("prompts/list", "prompts", "prompts")

    def get_prompt(self, name: str, arguments: Optional[Mapping[str, str]] = None) -> List[Message]:
        """A prompt, filled in with ``arguments``, as nacelle messages."""
        params: Dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = {str(k): str(v) for k, v in arguments.items()}
        return prompt_messages(self._complete("prompts/get", params, None, None, None))

    # -- requests ----------------------------------------------------------------------------------

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
        return self._retrying(method, params, cancelled, deadline, timeout, None)

    def _retrying(self, method: str, params: Optional[Mapping[str, Any]],
                  cancelled: Optional[threading.Event], deadline: Optional[float],
                  timeout: Optional[float], progress: Optional[Progress]) -> Dict[str, Any]:
        try:
            return self._request(method, params, cancelled, deadline, timeout, progress)
        except SessionExpired:
            # The server forgot the session (restarted, or expired it): the spec asks
            # for a fresh handshake; the request was never processed, so send it again.
            logger.debug("MCP server %s expired the session; starting a new one", self.name)
            self._transport.reset_session()
            self._handshake(self.timeout if timeout is None else timeout, self.protocol_version)
            return self._request(method, params, cancelled, deadline, timeout, progress)

    def _complete(self, method: str, params: Dict[str, Any],
                  cancelled: Optional[threading.Event], deadline: Optional[float],
                  progress: Optional[Progress]) -> Dict[str, Any]:
        """One request, retried with the input the server asks for (2026's
        ``input_required``) until it completes."""
        state: Optional[str] = None
        answers: Optional[Dict[str, Any]] = None
        delay = 0.05
        for _ in range(protocol.MAX_INPUT_ROUNDS + 1):
            sent = dict(params)
            if answers is not None:
                sent["inputResponses"] = answers
            if state is not None:
                sent["requestState"] = state  # echoed exactly, never read
            result = self._retrying(method, sent, cancelled, deadline, None, progress)
            if result.get("resultType") != "input_required":
                return result
            found = result.get("requestState")
            state = found if isinstance(found, str) else None
            requests = result.get("inputRequests")
            if isinstance(requests, dict) and requests:
                answers = {str(key): self._input(request) for key, request in requests.items()}
                delay = 0.05
            else:  # state only: the server is working; ask again soon (as the SDKs do)
                answers = None
                if cancelled is not None and cancelled.wait(delay):
                    raise Cancelled(f"MCP {method} to {self.name} was cancelled")
                if cancelled is None:
                    time.sleep(delay)
                delay = min(delay * 2, 0.25)
        raise MCPError(f"MCP server {self.name} asked for more input {protocol.MAX_INPUT_ROUNDS} "
                       f"times in answer to {method}; giving up")

    def _input(self, request: Any) -> Dict[str, Any]:
        method = request.get("method") if isinstance(request, dict) else None
        if method != "elicitation/create":
            raise protocol.refusal(self.name, str(method))
        return protocol.answer_elicitation(self.on_elicit, self.name, request.get("params"))

    def _list(self, method: str, key: str, capability: str) -> List[Dict[str, Any]]:
        if capability not in self.capabilities:
            return []
        items: List[Dict[str, Any]] = []
        cursor: Optional[str] = None
        seen = set()
        while True:
            result = self.request(method, {"cursor": cursor} if cursor else {})
            page = result.get(key)
            if not isinstance(page, list):
                raise MCPError(f"MCP server {self.name} sent a {method} result without a "
                               f"list of {key}")
            items.extend(page)
            cursor = result.get("nextCursor")
            if not cursor:
                return items
            if cursor in seen:  # a server repeating a cursor would have us loop forever
                raise MCPError(f"MCP server {self.name} repeated the {method} cursor "
                               f"{cursor!r}")
            seen.add(cursor)

    def _fetch_tools(self) -> List[Dict[str, Any]]:
        tools = self._list("tools/list", "tools", "tools")
        for spec in tools:
            if not (isinstance(spec, dict) and isinstance(spec.get("name"), str)
                    and isinstance(spec.get("inputSchema"), dict)):
                raise MCPError(f"MCP server {self.name} listed a malformed tool: "
                               f"{_preview(spec)}")
        mirrors = getattr(self._transport, "tool_params", None)
        if not (self.modern and isinstance(mirrors, dict)):
            return tools  # x-mcp-header is 2026-07-28 Streamable HTTP's; stdio may ignore it
        kept, params = [], {}
        for spec in tools:
            try:
                params[spec["name"]] = protocol.param_headers(spec["inputSchema"])
            except ValueError as err:
                logger.warning("MCP server %s: tool %r left out: %s", self.name,
                               spec["name"], err)
                continue
            kept.append(spec)
        self._transport.tool_params = params  # type: ignore[attr-defined]
        return kept

    def _prepare(self, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
        if not (self.modern or method == "server/discover"):
            return params
        meta = protocol.modern_meta(self.on_elicit is not None)
        return {**params, "_meta": {**meta, **dict(params.get("_meta") or {})}}

    # -- connecting ----------------------------------------------------------------------------

    def _start(self) -> "MCPClient":
        """Start the transport and agree on a protocol; on any failure, close and raise."""
        try:
            self._transport.start(self._deliver, self._fail)
            self._connect(self.timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _connect(self, timeout: Optional[float]) -> None:
        if self._wanted in LEGACY_VERSIONS:
            self._handshake(timeout, self._wanted)
            return
        try:
            probed = self._probe_again(timeout)
        except MCPAuthError:
            raise  # the server asked for authorization and it failed: no handshake helps
        except MCPError as err:
            supported = protocol.unsupported_versions(err)
            if supported and MODERN_VERSION in supported:
                raise MCPError(f"MCP server {self.name} refused {MODERN_VERSION} twice while "
                               "naming it among the versions it speaks", code=err.code,
                               data=err.data) from None
            if self._wanted == MODERN_VERSION or (
                    supported is not None and not set(supported) & set(LEGACY_VERSIONS)):
                raise MCPError(f"MCP server {self.name} does not speak {MODERN_VERSION}"
                               + (f" (it speaks {', '.join(supported)})" if supported else
                                  f": {err}"), code=err.code, data=err.data) from None
            logger.debug("MCP server %s did not answer server/discover (%s); shaking hands",
                         self.name, err)
        else:
            if probed is None:
                return  # a silent probe, and the handshake answered in its place
            result = probed
            if protocol.offers_modern(result):
                self._adopt(result)
                return
            if self._wanted == MODERN_VERSION:
                raise MCPError(f"MCP server {self.name} does not speak {MODERN_VERSION} "
                               f"(it speaks {_preview(result.get('supportedVersions'))})")
        self._handshake(timeout, LEGACY_VERSIONS[0])

    def _probe_again(self, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        """:meth:`_probe`, sent once more when the server refused the version asked
        for while naming that very version among those it speaks: SEP-2575 has a
        client retry with a version from the refusal's list that it speaks too
        (https://modelcontextprotocol.io/specification/2026-07-28/basic/transports,
        "Protocol Version Header"), and 2026-07-28 is the only such one a probe
        sends. Once: a server refusing it again is taken at its word."""
        try:
            return self._probe(timeout)
        except MCPAuthError:
            raise
        except MCPError as err:
            if MODERN_VERSION not in (protocol.unsupported_versions(err) or ()):
                raise
            logger.debug("MCP server %s refused %s while naming it; asking again",
                         self.name, MODERN_VERSION)
        return self._probe(timeout)

    def _probe(self, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        """The answer to ``server/discover``, or None when the server left it
        unanswered and the 2025 handshake, sent beside it, succeeded instead.

        With ``probe_quiet`` (stdio), a probe unanswered that long is kept, and the
        handshake goes out too, with the whole timeout: some 2025 servers never answer
        a request they do not know before the handshake. A 2026 server only slow to
        start answers the probe first (it reads in order), then refuses the handshake
        (-32022 from the official SDK's server, its era settled by the probe): the
        probe's answer decides. The bound says how long a silent server delays the
        connection, never which protocol is spoken."""
        quiet = self._probe_quiet
        if quiet is None or self._wanted == MODERN_VERSION or (timeout and timeout <= quiet):
            return self._opening("server/discover", {}, timeout)
        probe_id, probe = self._issue("server/discover", {})
        if probe.settled.wait(quiet):
            return self._outcome(probe)
        logger.debug("MCP server %s is silent on server/discover; shaking hands", self.name)
        try:
            self._handshake(timeout, LEGACY_VERSIONS[0])
        except MCPError as err:
            if protocol.unsupported_versions(err) is not None:  # the probe settled the era:
                probe.settled.wait(timeout or None)  # its answer may follow this refusal
            answered = probe.settled.is_set() and probe.error is None
            if not (answered and probe.result is not None and protocol.offers_modern(probe.result)):
                raise
            logger.debug("MCP server %s answered server/discover late and refused the "
                         "handshake", self.name)
            return probe.result
        finally:
            self._give_up(probe_id, "server/discover", "the handshake answered first")
        return None

    def _opening(self, method: str, params: Dict[str, Any],
                 timeout: Optional[float]) -> Dict[str, Any]:
        """``server/discover`` or ``initialize``, sent again once authorized when it
        failed while an authorization ran (a person signing in outlasts any timeout
        meant for a server's answer, and says nothing about the protocol it speaks);
        that authorization's MCPAuthError if it failed. The HTTP transport alone
        authorizes, so only it has ``settle_authorization``."""
        try:
            return self._request(method, params, None, None, timeout)
        except MCPAuthError:
            raise
        except MCPError:
            settle = getattr(self._transport, "settle_authorization", None)
            if settle is None or not settle():
                raise
        logger.debug("MCP server %s is authorized; sending %s again", self.name, method)
        return self._request(method, params, None, None, timeout)

    def _adopt(self, result: Dict[str, Any]) -> None:
        self.modern = True
        self.protocol_version = MODERN_VERSION
        meta = result.get("_meta")
        info = (meta.get(protocol.SERVER_INFO_KEY) if isinstance(meta, dict) else None) \
            or result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        caps = result.get("capabilities")
        self.capabilities = caps if isinstance(caps, dict) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else ""
        self._transport.opened(MODERN_VERSION)
        logger.debug("MCP server %s speaks %s", self.name, MODERN_VERSION)
        tools = self.capabilities.get("tools")
        if isinstance(tools, dict) and tools.get("listChanged"):
            # 2025 servers announce changes unasked (the GET stream, on HTTP); a
            # 2026 one only on a subscription, so one is opened the same way.
            self._follow()

    def _handshake(self, timeout: Optional[float], offer: str) -> None:
        with self._handshake_lock:
            params = {"protocolVersion": offer,
                      "capabilities": protocol.capabilities(self.on_elicit is not None),
                      "clientInfo": dict(protocol.CLIENT_INFO)}
            try:
                result = self._opening("initialize", params, timeout)
            except MCPAuthError:
                raise
            except MCPError as err:
                raise MCPError(f"MCP server {self.name} refused the handshake: {err}",
                               code=err.code, data=err.data) from None
            version = result.get("protocolVersion")
            if version not in LEGACY_VERSIONS:
                raise MCPError(
                    f"MCP server {self.name} answered protocol version {version!r}; "
                    f"nacelle speaks {MODERN_VERSION}, {', '.join(LEGACY_VERSIONS)}")
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

    # -- following changes ------------------------------------------------------------------------

    def _follow(self) -> None:
        """Open a ``subscriptions/listen`` stream (2026; 2025 servers notify unasked)
        and wait a moment for the server to acknowledge it, so that a change made
        right after this call is not missed."""
        with self._lock:
            start = self.modern and not self._listening and not self._closed
            self._listening = self._listening or start
        if start:
            threading.Thread(target=self._listen, daemon=True,
                             name=f"nacelle-mcp-listen-{self.name}").start()
            self.listening.wait(min(self.timeout or 5.0, 5.0))

    def _listen(self) -> None:
        delay = 1.0
        while not self._closing.is_set():
            try:
                # No timeout: the answer comes only when the server ends the stream.
                self._request("subscriptions/listen", {"notifications": dict(_LISTEN)},
                              self._closing, None, 0)
            except (Cancelled, MCPError) as err:
                if self._closing.is_set():
                    return
                if isinstance(err, MCPError) and err.code == -32601:
                    logger.warning("MCP server %s does not offer subscriptions/listen; its "
                                   "tool list will not be followed", self.name)
                    return
                logger.debug("the subscription to MCP server %s ended: %s", self.name, err)
            self.listening.clear()
            self._stale()  # what changed while nobody listened is unknown
            if self._closing.wait(delay):
                return
            delay = min(delay * 2, 30.0)

    def _stale(self) -> None:
        """Mark the tool list stale and see it refreshed: by the one refresh thread,
        started here unless it runs already (then it sees the mark and lists again),
        so a server sending 2,000 notifications costs one thread and a few listings."""
        with self._lock:
            self._tools_changes += 1
            start = not self._refreshing and not self._closed
            self._refreshing = self._refreshing or start
        if start:
            # Refreshing needs a request, and this may be the reader thread that would
            # deliver its answer: refresh from another thread.
            threading.Thread(target=self._refresh_tools, daemon=True,
                             name=f"nacelle-mcp-refresh-{self.name}").start()

    def _refresh_tools(self) -> None:
        while True:
            with self._lock:
                if self._closed or self._tools_fetched_at == self._tools_changes:
                    self._refreshing = False
                    return
            try:
                self.list_tools()
            except NacelleError as err:
                logger.debug("refreshing the tools of MCP server %s failed: %s", self.name, err)
                with self._lock:
                    self._refreshing = False
                return

    # -- called from transport threads ----------------------------------------------------------

    def _answer(self, request_id: Any, method: str, params: Any) -> None:
        if method != "elicitation/create":  # ping; sampling and roots are refused
            super()._answer(request_id, method, params)
            return
        # The callback may wait for a person; this is the reader thread.
        self._answer_later(request_id, method, lambda: protocol.answer_elicitation(
            self.on_elicit, self.name, params))

    def _notified(self, method: str, params: Dict[str, Any]) -> None:
        if method in _CHANGED:
            if method == "notifications/tools/list_changed":
                self._stale()
            logger.debug("MCP server %s sent %s", self.name, method)
        elif method == "notifications/subscriptions/acknowledged":
            logger.debug("MCP server %s follows %s", self.name, _preview(params))
            self.listening.set()
        elif method == "notifications/message":
            level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
            logger.log(level, "MCP server %s: %s", self.name, _preview(params.get("data"), 2000))
        else:
            logger.debug("MCP server %s sent %s", self.name, method)


def _raise_if_failed(name: str, result: Mapping[str, Any]) -> None:
    """An ``isError`` result as the MCPError a nacelle tool raises, with its text."""
    if result.get("isError"):
        raise MCPError(result_text(result) or f"tool {name!r} failed without saying why")
