"""The sessions of the handshake generation on HTTP: :class:`Sessions`.

A 2025 client's ``initialize`` opens a session whose id the server hands back in the
``Mcp-Session-Id`` header; every later request carries it, a request with an id the
server does not know gets 404 (the client then opens a new one), and ``DELETE`` ends
it (https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#session-management).
A session here holds the version agreed, the principal ``authorize`` named (another
principal's request with the same id is a 404, as if it did not exist) and the
requests in flight, so ``notifications/cancelled`` can reach the one it names.

Memory is bounded: a session unused for ``idle`` seconds is forgotten, and past
``limit`` sessions the least recently used one with nothing in flight makes room
(none: the new one is refused). Ids are 32 random bytes, URL-safe: visible ASCII,
as the spec asks, and unguessable, since the id is all a request needs to act in it.

Outer ring (with the rest of ``nacelle.mcp``); imports the standard library only.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional

__all__ = ["Session", "Sessions"]


class Session:
    """One client's session: its id, version, principal and requests in flight."""

    def __init__(self, ident: str, version: str, principal: str) -> None:
        self.id = ident
        self.version = version
        self.principal = principal
        self.inflight: Dict[Any, threading.Event] = {}

    def __repr__(self) -> str:
        return f"<Session {self.version}, {len(self.inflight)} in flight>"


class Sessions:
    """The open sessions; thread-safe."""

    def __init__(self, *, limit: int = 1000, idle: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.idle = idle
        self.clock = clock
        self._lock = threading.Lock()
        self._open: "OrderedDict[str, Session]" = OrderedDict()
        self._seen: Dict[str, float] = {}

    def __repr__(self) -> str:
        return f"<Sessions {len(self._open)} open>"

    def open(self, version: str, principal: str) -> Optional[Session]:
        """A new session, or None when ``limit`` sessions are busy."""
        with self._lock:
            self._expire()
            if len(self._open) >= self.limit and not self._make_room():
                return None
            session = Session(secrets.token_urlsafe(32), version, principal)
            self._open[session.id] = session
            self._seen[session.id] = self.clock()
            return session

    def find(self, ident: str, principal: str) -> Optional[Session]:
        """The session ``ident`` of ``principal``, marked as used; None when unknown."""
        with self._lock:
            self._expire()
            session = self._open.get(ident)
            if session is None or session.principal != principal:
                return None
            self._open.move_to_end(ident)
            self._seen[ident] = self.clock()
            return session

    def close(self, ident: str, principal: str) -> bool:
        """End a session, cancelling what it has in flight; False when unknown."""
        with self._lock:
            session = self._open.get(ident)
            if session is None or session.principal != principal:
                return False
            self._drop(ident)
        for cancel in list(session.inflight.values()):
            cancel.set()
        return True

    def start(self, session: Session, request_id: Any, cancel: threading.Event) -> None:
        """Note a request starting in ``session``, with the event that cancels it."""
        with self._lock:
            session.inflight[_key(request_id)] = cancel

    def finish(self, session: Session, request_id: Any) -> None:
        with self._lock:
            session.inflight.pop(_key(request_id), None)

    def cancel(self, session: Session, request_id: Any) -> None:
        """``notifications/cancelled``: cancel the request it names, if in flight."""
        with self._lock:
            cancel = session.inflight.get(_key(request_id))
        if cancel is not None:
            cancel.set()

    def _expire(self) -> None:
        now = self.clock()
        for ident in list(self._open):
            if now - self._seen[ident] <= self.idle:
                break  # ordered by last use: the rest are newer
            if not self._open[ident].inflight:
                self._drop(ident)

    def _make_room(self) -> bool:
        for ident, session in self._open.items():
            if not session.inflight:
                self._drop(ident)
                return True
        return False

    def _drop(self, ident: str) -> None:
        self._open.pop(ident, None)
        self._seen.pop(ident, None)


def _key(request_id: Any) -> Any:
    # JSON-RPC ids 1 and "1" are different requests; True is no id at all.
    return (type(request_id).__name__, request_id)
