"""What the WSGI and ASGI apps share: the routes, the checks, and the run behind each.

Both apps turn a request into a method, a path, headers and a body, and hand them to
:class:`Routes`, which answers with a :class:`Reply`: either a whole response (the
page, or an error as ``{"error": ..., "message": ...}``) or an SSE run to stream. The
apps differ only in how they read and write. The routes:

- ``GET /``: the chat page (``page.html``), with a Content-Security-Policy that
  allows its inline script and style and connections to this origin only.
- ``POST /runs``: ``{"messages": [...], "prompt": "...", "session": "name"}``, each
  optional but at least one message in all: ``messages`` in :func:`nacelle.dumps`
  form, then ``prompt`` as a user message; with ``session`` the conversation saved
  under that name comes first (none yet: it starts empty) and the run's conversation
  is saved back under it when the run ends, unless it paused. The answer is the
  run as ``text/event-stream`` (schema: ``encode.py``).
- ``POST /runs/{id}/decisions``: ``{"decisions": {call_id: true | false | "reason" |
  {edited input}}, "session": "name"}`` resumes the paused run ``id`` as a new SSE
  stream (``session``, optional: where the resumed run's conversation is saved).
  The checkpoint is *taken* from the store, so an id resumes at most once; a second
  try, or an id never issued, is 404. Decisions the run refuses (a missing or
  unknown call id, an edited input its schema rejects, or a check that broke on
  them) are 400 and the checkpoint is put back — on any failure, so a paused run is
  never lost to a bad request — and the client can try again.
- ``POST /api/chat``: the AI SDK's ``useChat`` request, answered as its UI message
  stream (``chat_route.py``). A run that pauses for approval keeps its checkpoint
  under the chat's id; the next request whose last message carries the person's
  answers resumes it (404 once taken; 400 for answers the run is not waiting on, the
  checkpoint put back).
- ``POST /agui``: an AG-UI 1.0 ``RunAgentInput``; the run as AG-UI's events
  (``agui_route.py``, which keeps a thread's paused run in the store).
- ``POST /runs/{id}/cancel``: ``{}`` cancels the run streaming now under the id its
  answer's ``X-Nacelle-Run`` header named (every run answer has one): its tools see
  ``ctx.cancelled`` and its stream ends with an ``error`` event ``Cancelled`` (its
  session is left as it was before the run). ``{"cancelled": true}``, or
  404 for an id not streaming now (ended, never issued, or another principal's). It
  takes no place under ``max_runs``. Closing the stream cancels too, but only once
  the server notices, and a proxy between may keep the connection open; the chat
  page's stop button posts here.
- ``GET /sessions/{name}``: ``{"session": name, "messages": [...]}``, the
  conversation saved under that name (``[]`` when there is none), in
  :func:`nacelle.dumps` form — how the chat page shows its conversation again after a
  reload.

Principals: ``authorize(raw)`` returning True lets a request in as the one shared
principal; a non-empty str lets it in as that principal. A principal's sessions and
paused runs are stored under a digest of the principal and the name, so another
principal's request names a different entry and finds nothing (404 for a run, an
empty conversation for a session) — with any store, and no list of owners to keep.
The shared principal's names are stored as they are, as before principals existed;
a session name shaped like a digest is refused, so no name reaches another's entry.

At most ``max_runs`` runs (started or resumed) go on at once: past that a POST is a
503 with ``Retry-After``, before anything is loaded or taken. A run holds its place
until its events end, which after a disconnect is when its tools notice the cancel.

Statuses: 400 for a body that is not JSON or not of the shape above (the message
says which field) and for a ``Host`` this server does not answer to (below), 401
when ``authorize`` says no, 404, 405 (with ``Allow``), 411 for
a POST without a length the server can trust, 413 past ``max_body`` (refused before
reading when the length is declared), 415 for a POST that is not
``application/json``, 409 for a paused run this agent cannot resume (it lacks a
tool the run had; the checkpoint is put back), 500 when ``make_agent`` or the store
fails (logged here, never shown), 503 past ``max_runs``.

``preview(name, input)``, when given, says what approving a paused call would do
(:meth:`nacelle.toolsets.LocalTools.preview`: a diff, a command): its text rides on
the call's paused ``tool_result`` as ``preview`` (``encode.py``), computed when the
call pauses; a preview that fails is left out and logged. A body holding a lone
surrogate (JSON may escape half of a pair) is a 400: UTF-8 cannot hold it, so it
could be neither streamed back nor saved. The JSON content type is required on purpose: a
web page on another site can POST ``text/plain`` to a server on localhost without
asking, but not ``application/json``, which the browser must first ask about (CORS),
and this server never says yes.

The ``Host`` check stops DNS rebinding: a page on ``evil.example`` whose name the
attacker re-points at 127.0.0.1 is, to the browser, the same origin as this server,
so it may POST JSON to it and read the answer — and run the agent's tools. Such a
request still says ``Host: evil.example``. So a request is answered only when its
Host is an IP address (no name can be re-pointed), ``localhost`` or a name under
``.localhost``, or one of ``allowed_hosts``: names, ``.example.com`` for that name
and every name under it, or ``"*"`` for any (a server behind a proxy that checks the
host). That is the default of Vite's dev server (``server.allowedHosts``, added for
GHSA-vg6x-rcgg-rjx6); the MCP Python SDK turned on the same kind of check for local
servers after CVE-2025-66416. The refusal is a 400, as Django answers a host it was
not told about. A request with no Host (HTTP/1.0; no browser sends one) is let
through.

``make_agent`` is called once per run, with no argument or — when it takes one — a
:class:`RequestInfo` (method, path, lower-cased headers, the client's address, the
parsed body and the raw environ or scope), so an agent can depend on who asks. An
Agent object is accepted too and shared, which is safe: an Agent holds no run state.

Outer ring: imports the standard library and nacelle's core (agent, checkpoint,
context, errors, events, messages, sessions, sse).
"""

from __future__ import annotations

import hashlib
import inspect
import ipaddress
import re
import secrets
import threading
from dataclasses import dataclass, field
from importlib import resources
from typing import (
    Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union,
)

from .._loggers import get_logger
from ..agent import Agent
from ..checkpoint import signing_key
from ..context import CancelEvent
from ..errors import CheckpointError, ConfigError, ConversationError, Unsupported
from ..events import Event, Kind, Stop
from ..messages import Message, loads, user_text
from ..sessions import MemoryStore, Store, check_name
from ..sse import parse_json
from . import agui_route, chat_route, vercel
from .encode import Item, event_json

__all__ = ["Reply", "RequestInfo", "Routes", "host_allowed"]

log = get_logger(__name__)

_DECISIONS = re.compile(r"/runs/([^/]+)/decisions\Z")
#: Where ``useChat``'s DefaultChatTransport posts by default (its ``api`` option).
CHAT_PATH = "/api/chat"
_CANCEL = re.compile(r"/runs/([^/]+)/cancel\Z")
_SESSION = re.compile(r"/sessions/([^/]+)\Z")
#: The header naming a streaming run, for ``POST /runs/{id}/cancel``.
RUN_HEADER = "X-Nacelle-Run"
_HOST_NAME = re.compile(r"[a-z0-9._-]+")
_SSE_HEADERS = [("Content-Type", "text/event-stream; charset=utf-8"),
                ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")]
_PAGE_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
             "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
             "frame-ancestors 'none'")
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict",
           411: "Length Required",
           413: "Payload Too Large", 415: "Unsupported Media Type",
           500: "Internal Server Error", 503: "Service Unavailable"}
#: The seconds a 503 past ``max_runs`` asks a client to wait before trying again.
RETRY_AFTER = 5
#: The principal of every request when ``authorize`` answers True, or there is none.
SHARED = ""
# A store name the routes make for a principal's session ("s") or paused run ("r"):
# no client may name a session so, or it could reach another principal's.
_OWNED = re.compile(r"^[sr][0-9a-f]{40}$")


@dataclass(frozen=True)
class RequestInfo:
    """What ``make_agent(info)`` may look at; ``raw`` is the WSGI environ or ASGI scope,
    ``principal`` what ``authorize`` named (``""`` when it answered True)."""

    method: str
    path: str
    headers: Mapping[str, str]
    client: str
    body: Mapping[str, Any]
    raw: Any = field(repr=False)
    principal: str = SHARED


#: What the apps take as ``make_agent``: an Agent (shared by every run, as it holds no
#: run state), or a function making one, with no argument or given the RequestInfo.
MakeAgent = Union[Agent, Callable[[], Agent], Callable[[RequestInfo], Agent]]


@dataclass
class Reply:
    """A response: ``status``, ``headers`` and ``body`` — or, for a run, ``items``
    to stream as SSE, the ``cancel`` event that stops the run, and ``release``, which
    frees the run's place under ``max_runs``: iterating ``items`` to its end (or
    closing it once started) does that, so an app calls ``release`` only when it
    drops a stream it never started."""

    status: int
    headers: List[Tuple[str, str]]
    body: bytes = b""
    items: Optional[Iterator[Item]] = None
    cancel: Optional[CancelEvent] = None
    release: Callable[[], None] = lambda: None


def error(status: int, message: str, headers: Tuple[Tuple[str, str], ...] = ()) -> Reply:
    """An error reply: ``{"error": <reason>, "message": ...}``."""
    import json

    body = json.dumps({"error": REASONS.get(status, "Error"), "message": message}).encode()
    return Reply(status, [("Content-Type", "application/json"), ("Cache-Control", "no-cache"),
                          *headers], body)


def _host_name(host: str) -> Optional[str]:
    """The name in a Host header value (its port and a final dot dropped, lower case),
    or None when it is not one."""
    host = host.strip().lower()
    if host.startswith("["):  # an IPv6 literal, [::1]:8000
        end = host.find("]")
        rest = host[end + 1:]
        if end <= 1 or not (rest == "" or (rest[:1] == ":" and rest[1:].isdigit())):
            return None
        return host[1:end]
    name, colon, port = host.rpartition(":")
    if colon:
        if not port.isdigit():
            return None
        host = name
    host = host[:-1] if host.endswith(".") else host
    return host if _HOST_NAME.fullmatch(host) else None


def host_allowed(host: str, allowed: Tuple[str, ...]) -> bool:
    """Whether a request whose Host header is ``host`` may be answered (see the
    module docstring): an IP address, ``localhost`` or under it, or a match in
    ``allowed``."""
    name = _host_name(host)
    if name is None:
        return False
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    for pattern in (".localhost", *allowed):
        if pattern == "*" or name == pattern:
            return True
        if pattern.startswith(".") and (name == pattern[1:] or name.endswith(pattern)):
            return True
    return False


def run_id() -> str:
    """A fresh, unguessable id for a paused run, and a valid store name."""
    return "run_" + secrets.token_urlsafe(24)


class Routes:
    """The routes of the module docstring, for both apps."""

    def __init__(self, make_agent: MakeAgent, *, store: Optional[Store],
                 authorize: Optional[Callable[[Any], "bool | str"]],
                 max_body: int, key: "str | bytes | None",
                 allowed_hosts: Sequence[str] = (), max_runs: int = 16,
                 preview: Optional[Callable[[str, Mapping[str, Any]], str]] = None) -> None:
        if isinstance(make_agent, Agent):
            shared = make_agent
            make_agent = lambda: shared  # noqa: E731 - an Agent holds no run state
        if not callable(make_agent):
            raise ConfigError(f"make_agent must be callable (or an Agent), got "
                              f"{type(make_agent).__name__}")
        if store is None:
            store = MemoryStore()
        for method in ("save_checkpoint", "take_checkpoint"):
            if not callable(getattr(store, method, None)):
                raise ConfigError(f"store must have {method}() (a nacelle.sessions.FileStore "
                                  f"does), got {type(store).__name__}")
        if preview is not None and not callable(preview):
            raise ConfigError(f"preview must be callable, got {type(preview).__name__}")
        if authorize is not None and not callable(authorize):
            raise ConfigError(f"authorize must be callable, got {type(authorize).__name__}")
        if isinstance(allowed_hosts, str) or not all(
                isinstance(h, str) and h for h in allowed_hosts):
            raise ConfigError(f"allowed_hosts must be a list of host names, got {allowed_hosts!r}")
        if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
            raise ConfigError(f"max_body must be a positive number of bytes, got {max_body!r}")
        if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
            raise ConfigError(f"max_runs must be a positive number of runs, got {max_runs!r}")
        self.make_agent: Callable[..., Any] = make_agent
        self.wants_info = _takes_an_argument(make_agent)
        self.store = store
        self.authorize = authorize
        self.allowed_hosts = tuple(h.strip().lower().rstrip(".") for h in allowed_hosts)
        self.max_body = max_body
        self.max_runs = max_runs
        if key is not None:
            signing_key(key)  # an empty key is refused now, not at the first pause
        self.key = key
        self._runs = threading.BoundedSemaphore(max_runs)
        self.preview = preview
        self._live: Dict[str, CancelEvent] = {}  # owned run name -> its cancel, while it streams
        self._live_lock = threading.Lock()
        self._page: Optional[bytes] = None
        self._page_lock = threading.Lock()

    # -- before the body -------------------------------------------------------------

    def check(self, method: str, path: str, headers: Mapping[str, str],
              raw: Any) -> "Reply | str":
        """A reply that settles the request before its body is read, or — to read it —
        the principal the request acts for (:data:`SHARED` when ``authorize`` said
        True or there is no hook)."""
        host = headers.get("host")
        if host is not None and not host_allowed(host, self.allowed_hosts):
            return error(400, f"this server does not answer to the host {host[:100]!r}; "
                              "name it in allowed_hosts (the check stops DNS rebinding)")
        principal = SHARED
        if self.authorize is not None:
            try:
                allowed = self.authorize(raw)
            except Exception:  # noqa: BLE001 - a broken hook refuses, it never lets in
                log.exception("authorize raised; refusing the request")
                return error(500, "the server could not check this request")
            if isinstance(allowed, str) and allowed:
                principal = allowed
            elif allowed is not True:
                return error(401, "not authorized")
        allow = self._allowed(path)
        if allow is None:
            return error(404, f"no route {path[:100]!r}")
        if method not in allow:
            return error(405, f"{path[:100]} takes {' or '.join(allow)}", (("Allow", ", ".join(allow)),))
        if method == "GET" and path != "/":
            return self._session_reply(path, principal)
        if method == "GET":
            return Reply(200, [("Content-Type", "text/html; charset=utf-8"),
                               ("Cache-Control", "no-cache"),
                               ("Content-Security-Policy", _PAGE_CSP),
                               ("X-Content-Type-Options", "nosniff"),
                               ("Referrer-Policy", "no-referrer")], self.page())
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            return error(415, "send the body as application/json")
        return principal

    def too_large(self) -> Reply:
        return error(413, f"the body is larger than {self.max_body} bytes")

    @staticmethod
    def _allowed(path: str) -> Optional[Tuple[str, ...]]:
        if path == "/":
            return ("GET",)
        if path in ("/runs", CHAT_PATH, "/agui") or _DECISIONS.match(path) or _CANCEL.match(path):
            return ("POST",)
        if _SESSION.match(path):
            return ("GET",)
        return None

    def page(self) -> bytes:
        with self._page_lock:
            if self._page is None:
                self._page = resources.files(__package__).joinpath("page.html").read_bytes()
            return self._page

    # -- with the body -----------------------------------------------------------------

    def respond(self, method: str, path: str, headers: Mapping[str, str], client: str,
                body: bytes, raw: Any, principal: str = SHARED) -> Reply:
        """The reply to a POST whose body was read (within ``max_body``), for the
        principal :meth:`check` returned."""
        try:
            data = parse_json(body)
        except ValueError as exc:
            return error(400, f"the body is not JSON: {str(exc)[:200]}")
        if not isinstance(data, dict):
            return error(400, "the body must be a JSON object")
        if not _encodable(data):
            # JSON may escape half of a surrogate pair (\ud83d) alone; UTF-8 cannot hold
            # it, so the conversation could be neither streamed back whole nor saved.
            return error(400, "the body holds a lone surrogate (\\ud800-\\udfff not in a "
                              "pair), which is not a character")
        info = RequestInfo(method, path, headers, client, data, raw, principal)
        cancel = _CANCEL.match(path)
        if cancel is not None:
            return self._cancel(cancel.group(1), data, principal)
        found = _DECISIONS.match(path)
        if not self._runs.acquire(blocking=False):
            return error(503, f"the server is running its {self.max_runs} runs at most; "
                              "try again shortly", (("Retry-After", str(RETRY_AFTER)),))
        slot = _Slot(self._runs)
        try:
            if path == CHAT_PATH:
                reply = self._chat(data, info, slot)
            elif path == "/agui":
                reply = self._agui(data, info, slot)
            else:
                reply = (self._decide(found.group(1), data, info, slot) if found
                         else self._start(data, info, slot))
        except _Refused as refused:
            reply = refused.reply
        except BaseException:
            slot.release()
            raise
        if reply.items is None:
            slot.release()
        else:
            reply.release = slot.release
        return reply

    def _start(self, data: Dict[str, Any], info: RequestInfo, slot: "_Slot") -> Reply:
        _only(data, ("messages", "prompt", "session"))
        session = _session(data)
        stored = None if session is None else _owned("s", info.principal, session)
        conversation: List[Message] = []
        if stored is not None:
            conversation = self._call_store("load the session", self._load_session, stored)
        if "messages" in data:
            if not isinstance(data["messages"], list):
                raise _Refused(error(400, "messages must be a list, in nacelle.dumps form"))
            import json

            try:
                conversation += loads(json.dumps(data["messages"]))
            except ConversationError as exc:
                raise _Refused(error(400, f"messages{exc}"[:300])) from None
        if "prompt" in data:
            prompt = data["prompt"]
            if not isinstance(prompt, str) or not prompt.strip():
                raise _Refused(error(400, "prompt must be a non-empty string"))
            conversation.append(user_text(prompt))
        if not conversation:
            raise _Refused(error(400, "send a prompt, messages or a saved session to run"))
        agent = self._agent(info)
        cancel = CancelEvent()
        try:
            events = agent.stream(conversation, cancel=cancel)
        except (ConfigError, Unsupported) as exc:
            return error(400, str(exc)[:300])
        return self._stream(events, cancel, stored, info.principal, slot)

    def _decide(self, name: str, data: Dict[str, Any], info: RequestInfo,
                slot: "_Slot") -> Reply:
        _only(data, ("decisions", "session"))
        decisions = data.get("decisions")
        if not isinstance(decisions, dict):
            raise _Refused(error(400, "decisions must be an object of call id to true, "
                                      "false, a reason or an edited input object"))
        for call_id, decision in decisions.items():
            if not (isinstance(decision, (bool, dict)) or (isinstance(decision, str) and decision)):
                raise _Refused(error(400, f"decisions[{call_id[:60]!r}] must be true, false, "
                                          "a non-empty reason or an edited input object"))
        session = _session(data)
        stored = None if session is None else _owned("s", info.principal, session)
        try:
            # Ids are issued as run_...; another principal's run lives under a name
            # made from the id and its principal, so it cannot be named here.
            if not name.startswith("run_"):
                raise ConfigError(name)
            check_name(name)
        except ConfigError:
            return error(404, "no paused run by that id")
        agent = self._agent(info)
        owned = _owned("r", info.principal, name)
        try:
            checkpoint = self._take(owned)
        except LookupError:
            return error(404, "no paused run by that id (it may have been resumed already)")
        cancel = CancelEvent()
        events = self._resume(agent, owned, checkpoint, decisions, cancel)
        if isinstance(events, Reply):
            return events
        return self._stream(events, cancel, stored, info.principal, slot)

    def _resume(self, agent: Agent, owned: str, checkpoint: Any, decisions: Dict[str, Any],
                cancel: CancelEvent) -> "Reply | Iterator[Event]":
        """The resumed run's events, or the error reply refusing the decisions (the
        checkpoint put back under ``owned`` either way it fails)."""
        try:
            return agent.resume(checkpoint, decisions, cancel=cancel)
        except BaseException as exc:
            # The checkpoint was ours alone while taken; back it goes, whatever went
            # wrong, so the run can be decided again.
            self._call_store("keep the paused run", self._save_checkpoint, owned, checkpoint)
            if isinstance(exc, CheckpointError):
                return error(409, str(exc)[:300])
            if isinstance(exc, (ConfigError, ValueError, TypeError)):
                return error(400, str(exc)[:300])
            if isinstance(exc, Exception):
                # What the decisions hold is the client's; a check that broke on it
                # is logged, and the message may hold what the server keeps to itself.
                log.exception("checking the decisions for a paused run failed")
                return error(400, "the decisions could not be checked against the paused "
                                  "run; the server's log says why")
            raise

    def _chat(self, data: Dict[str, Any], info: RequestInfo, slot: "_Slot") -> Reply:
        """``POST /api/chat`` (``chat_route.py``): the store keeps a chat's paused run."""
        def resume(agent: Agent, owned: str, checkpoint: Any, decisions: Dict[str, Any],
                   cancel: CancelEvent) -> Iterator[Event]:
            events = self._resume(agent, owned, checkpoint, decisions, cancel)
            if isinstance(events, Reply):
                raise _Refused(events)
            return events

        try:
            items, cancel = chat_route.start(
                data, make_agent=lambda: self._agent(info),
                name=lambda name: _owned("r", info.principal, name),
                take=self._take, keep=self._save_checkpoint, resume=resume)
        except chat_route.Refusal as refused:
            return error(refused.status, refused.message)
        return Reply(200, [*_SSE_HEADERS, vercel.HEADER], items=_released(items, slot),
                     cancel=cancel)

    def _agui(self, data: Dict[str, Any], info: RequestInfo, slot: "_Slot") -> Reply:
        """``POST /agui`` (``agui_route.py``): the store keeps a thread's paused run."""
        def take(name: str) -> Any:
            return self._call_store("take the thread's paused run", self._take_or_none, name)

        try:
            items, cancel = agui_route.start(data, principal=info.principal,
                                             make_agent=lambda: self._agent(info),
                                             take=take, keep=self._save_checkpoint)
        except agui_route.Refusal as refused:
            return error(refused.status, refused.message)
        return Reply(200, list(_SSE_HEADERS), items=_released(items, slot), cancel=cancel)

    def _take_or_none(self, name: str) -> Any:
        try:
            return self._take(name)
        except LookupError:
            return None

    def _stream(self, events: Iterator[Event], cancel: CancelEvent,
                session: Optional[str], principal: str, slot: "_Slot") -> Reply:
        live = run_id()
        owned = _owned("r", principal, live)
        with self._live_lock:
            self._live[owned] = cancel
        slot.then(lambda: self._forget(owned))
        return Reply(200, [*_SSE_HEADERS, (RUN_HEADER, live)],
                     items=self._items(events, session, principal, slot), cancel=cancel)

    def _forget(self, owned: str) -> None:
        with self._live_lock:
            self._live.pop(owned, None)

    def _cancel(self, name: str, data: Dict[str, Any], principal: str) -> Reply:
        if data:
            return error(400, f"unknown field {sorted(data)[0][:60]!r} (this route takes {{}})")
        with self._live_lock:
            cancel = self._live.get(_owned("r", principal, name))
        if cancel is None:
            return error(404, "no run streaming by that id (it may have ended)")
        log.debug("a client cancelled its run")
        cancel.set()
        return Reply(200, [("Content-Type", "application/json"), ("Cache-Control", "no-cache")],
                     b'{"cancelled":true}')

    def _session_reply(self, path: str, principal: str) -> Reply:
        import json

        found = _SESSION.match(path)
        assert found is not None  # _allowed matched it
        try:
            name = _session({"session": found.group(1)})
            assert name is not None
            messages = self._call_store("load the session", self._load_session,
                                        _owned("s", principal, name))
        except _Refused as refused:
            return refused.reply
        from ..messages import dumps

        body = '{"session":%s,"messages":%s}' % (json.dumps(name), dumps(messages))
        return Reply(200, [("Content-Type", "application/json; charset=utf-8"),
                           ("Cache-Control", "no-store")], body.encode("utf-8"))

    def _items(self, events: Iterator[Event], session: Optional[str], principal: str,
               slot: "_Slot") -> Iterator[Item]:
        """The run's events, with DONE rewritten: a paused run's checkpoint saved and
        replaced by its id, a finished run's conversation saved to its session
        (``session`` is the store's name for it)."""
        try:
            for event in events:
                if event.kind is Kind.TOOL_RESULT and self.preview is not None:
                    yield self._with_preview(event)
                    continue
                if event.kind is not Kind.DONE:
                    yield event
                    continue
                paused = event.stop is Stop.PAUSED and event.checkpoint is not None
                name = run_id() if paused else None
                try:
                    if name is not None:
                        self._save_checkpoint(_owned("r", principal, name), event.checkpoint)
                    elif session is not None:
                        self._save_session(session, event.messages)
                except Exception:  # noqa: BLE001 - the log gets the reason, not the client
                    log.exception("the store failed to keep a run's end")
                    # Not the store's own error: its text may name server paths.
                    raise RuntimeError("the server could not keep the run's end") from None
                yield event_json(event, run=name)
        finally:
            try:
                close = getattr(events, "close", None)
                if close is not None:
                    close()
            finally:
                slot.release()  # the run has ended: its events are closed

    def _with_preview(self, event: Event) -> Item:
        """A paused call's result with what approving it would do (module docstring)."""
        tool = event.tool
        if tool is None or not tool.paused or self.preview is None:
            return event
        data = event_json(event)
        try:
            value = parse_json(tool.input) if tool.input.strip() else {}
            shown = self.preview(tool.name, value) if isinstance(value, dict) else ""
        except Exception:  # noqa: BLE001 - a card without a preview still asks
            log.exception("the preview of a paused %s call failed", tool.name)
            return data
        if isinstance(shown, str) and shown:
            data["preview"] = shown
        return data

    # -- helpers ------------------------------------------------------------------------

    def _agent(self, info: RequestInfo) -> Agent:
        try:
            agent = self.make_agent(info) if self.wants_info else self.make_agent()
        except Exception:  # noqa: BLE001 - the client gets a 500, the log the reason
            log.exception("make_agent failed")
            raise _Refused(error(500, "the server could not make an agent")) from None
        if not hasattr(agent, "stream") or not hasattr(agent, "resume"):
            log.error("make_agent returned %s, not an Agent", type(agent).__name__)
            raise _Refused(error(500, "the server could not make an agent"))
        return agent  # type: ignore[no-any-return]

    def _load_session(self, name: str) -> List[Message]:
        try:
            return list(self.store.load(name))
        except LookupError:
            return []

    def _save_session(self, name: str, messages: Sequence[Message]) -> None:
        self.store.save(name, messages)  # messages.dumps stores no lone surrogate

    def _take(self, name: str) -> Any:
        if self.key is None:
            return self.store.take_checkpoint(name)
        return self.store.take_checkpoint(name, key=self.key)

    def _save_checkpoint(self, name: Any, checkpoint: Any) -> None:
        if self.key is None:
            self.store.save_checkpoint(name, checkpoint)
        else:
            self.store.save_checkpoint(name, checkpoint, key=self.key)

    @staticmethod
    def _call_store(what: str, function: Callable[..., Any], *args: Any) -> Any:
        try:
            return function(*args)
        except Exception:  # noqa: BLE001 - a store failure is the server's, not the client's
            log.exception("the store failed to %s", what)
            raise _Refused(error(500, f"the server could not {what}")) from None


class _Slot:
    """A run's place under ``max_runs``, given back once however often it is released;
    ``then(f)`` runs ``f`` at that moment too (the run is no longer cancellable by id)."""

    def __init__(self, semaphore: threading.BoundedSemaphore) -> None:
        self._semaphore: Optional[threading.BoundedSemaphore] = semaphore
        self._lock = threading.Lock()
        self._then: List[Callable[[], None]] = []

    def then(self, function: Callable[[], None]) -> None:
        self._then.append(function)

    def release(self) -> None:
        with self._lock:
            semaphore, self._semaphore = self._semaphore, None
        if semaphore is not None:
            for function in self._then:
                function()
            semaphore.release()


def _released(items: Iterator[bytes], slot: "_Slot") -> Iterator[Item]:
    """``items``, the run's place under ``max_runs`` given back when they end."""
    try:
        yield from items
    finally:
        try:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        finally:
            slot.release()


def _owned(kind: str, principal: str, name: str) -> str:
    """The store's name for a principal's session (``kind`` "s") or paused run ("r"):
    the name itself for the shared principal (as before principals existed), else a
    digest of kind, principal and name — so one principal's names never reach
    another's, and any principal string fits the store's name rule."""
    if principal == SHARED:
        return name
    joined = "\0".join((kind, principal, name)).encode("utf-8", "surrogatepass")
    return kind + hashlib.sha256(joined).hexdigest()[:40]


def _encodable(data: Any) -> bool:
    """Whether ``data`` (parsed JSON) holds no lone surrogate, which UTF-8 cannot hold."""
    import json

    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Refused(Exception):
    """Carries an error reply out of a helper."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


def _only(data: Mapping[str, Any], allowed: Tuple[str, ...]) -> None:
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise _Refused(error(400, f"unknown field {unknown[0][:60]!r} (this route takes "
                                  f"{', '.join(allowed)})"))


def _session(data: Mapping[str, Any]) -> Optional[str]:
    session = data.get("session")
    if session is None:
        return None
    try:
        session = check_name(session)
    except ConfigError as exc:
        raise _Refused(error(400, str(exc)[:300])) from None
    if _OWNED.match(session):
        raise _Refused(error(400, f"session name {session!r} has the form the server keeps "
                                  "for its own names; choose another"))
    return session


def _takes_an_argument(function: Callable[..., Any]) -> bool:
    """True when ``function`` can be called with one positional argument."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: call it bare
        return False
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return bool(positional)
