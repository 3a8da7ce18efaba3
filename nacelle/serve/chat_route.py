"""``POST /api/chat``: a ``useChat`` request in, the run as the AI SDK's UI message
stream out.

The routes (``routes.py``) check the request as for every POST — Host, ``authorize``,
``max_body``, ``max_runs``, JSON under bounds — and hand the body here; :func:`start`
reads it (``uimessages.py``) and answers with the stream's SSE bytes (``vercel.py``),
or raises :class:`Refusal`.

The conversation lives in the client, which sends it whole each time, so nothing of it
is stored. A run that pauses for approval keeps its checkpoint in the server's store
under a name made from the chat's id (and, through the routes' ``name``, the
principal), and the next request whose last message carries the person's answers
(``addToolApprovalResponse``) resumes it: the checkpoint is taken, so a chat's pause
is answered once (404 after). An answer on a call that waits on its sub-agent's calls
decides each of them (:func:`decisions`).

Outer ring: imports the standard library and nacelle's core.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any, Callable, Dict, Iterator, Mapping, Tuple

from .._loggers import get_logger
from ..agent import Agent
from ..context import CancelEvent
from ..errors import ConfigError, ConversationError, Unsupported
from ..events import Event, Kind, Stop
from . import vercel
from .uimessages import read_chat

__all__ = ["Refusal", "decisions", "start"]

log = get_logger(__name__)


class Refusal(Exception):
    """The request is refused: ``status`` (400, 404) and the ``message`` to send."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def start(data: Mapping[str, Any], *, make_agent: Callable[[], Agent],
          name: Callable[[str], str], take: Callable[[str], Any],
          keep: Callable[[str, Any], None],
          resume: Callable[[Agent, str, Any, Dict[str, Any], CancelEvent], Iterator[Event]],
          ) -> Tuple[Iterator[bytes], CancelEvent]:
    """The run of the request ``data`` as UI message stream bytes, and its cancel event.

    ``name(store_name)`` makes the principal's store name, ``take(name)`` takes a
    paused run (LookupError: none), ``keep(name, checkpoint)`` saves one, and
    ``resume(agent, name, checkpoint, decisions, cancel)`` resumes it (putting it back
    and refusing, in the routes' own way, when the decisions do not fit)."""
    try:
        chat = read_chat(data)
    except ConversationError as exc:
        raise Refusal(400, str(exc)[:300]) from None
    digest = hashlib.sha256(chat.id.encode("utf-8", "surrogatepass")).hexdigest()
    owned = name("chat_" + digest[:40])
    agent = make_agent()
    cancel = CancelEvent()
    resumed: Dict[str, bool] = {}
    if chat.approvals:
        try:
            checkpoint = take(owned)
        except LookupError:
            raise Refusal(404, "no paused run for this chat (it may have been answered "
                               "already)") from None
        # The client shows every call the run paused on (the run's own, and a
        # sub-agent's it answered), so none is announced to it again.
        resumed = {p.id: True for p in getattr(checkpoint, "pending", ())}
        resumed.update((k, v is True) for k, v in chat.approvals.items())
        events = resume(agent, owned, checkpoint, decisions(checkpoint, chat.approvals), cancel)
        message_id = chat.answering
    else:
        try:
            events = agent.stream(chat.conversation, cancel=cancel)
        except (ConfigError, Unsupported) as exc:
            raise Refusal(400, str(exc)[:300]) from None
        message_id = "msg_" + secrets.token_urlsafe(12)
    items = vercel.encode(_kept(events, owned, keep), message_id=message_id, resumed=resumed)
    return items, cancel


def decisions(checkpoint: Any, approvals: Mapping[str, Any]) -> Dict[str, Any]:
    """The decisions ``Agent.resume`` takes, from a chat's approval answers: an answer
    on a call that waits on its sub-agent's calls (asked about as one, when the
    sub-agent forwarded nothing: ``vercel.py``) decides each of them."""
    pending = {p.id: p for p in getattr(checkpoint, "pending", ())}
    found: Dict[str, Any] = {}
    for call_id, answer in approvals.items():
        call = pending.get(call_id)
        if call is not None and call.child is not None:
            found.update((waiting.id, answer) for waiting in call.child.waiting())
        else:
            found[call_id] = answer
    return found


def _kept(events: Iterator[Event], owned: str,
          keep: Callable[[str, Any], None]) -> Iterator[Event]:
    """The run's events, a paused run's checkpoint saved under ``owned`` first."""
    try:
        for event in events:
            if (event.kind is Kind.DONE and not event.agent and event.stop is Stop.PAUSED
                    and event.checkpoint is not None):
                try:
                    keep(owned, event.checkpoint)
                except Exception:  # noqa: BLE001 - the log gets the reason, not the client
                    log.exception("the store failed to keep a paused chat run")
                    raise RuntimeError("the server could not keep the paused run") from None
            yield event
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
