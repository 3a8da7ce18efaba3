"""A run's events as Server-Sent Events: the versioned JSON schema, and :func:`sse`.

Every event goes out as one SSE event whose ``event:`` field is its kind and whose
``data:`` is one line of JSON, an object with ``"v": 1`` (:data:`SCHEMA_VERSION`) and
``"kind"``. A client switches on ``kind`` and ignores fields it does not know; a
change that would break a reader of version 1 gets a new ``v``. Per kind:

- ``text`` / ``thinking``: ``text``, one provider delta (never merged or split).
- ``tool_input``: ``id``, ``index``, ``name`` and ``text``, one delta of a local call's
  arguments as the model writes them (a reader joins them; the input so far is not
  repeated, so a long argument costs its length once on the wire, not its square).
- ``tool_call``: ``id``, ``index``, ``name``, ``input`` (the JSON text the model
  wrote, as written: it may not parse), ``server`` (empty for a local tool).
- ``tool_result``: the call's ``id``, ``index``, ``name`` and ``server``, then
  ``result``, ``error`` (the failure the model read, or null), ``refused``,
  ``paused`` (the call waits for a decision), ``discarded`` and ``duration`` (s);
  ``content``, only when the tool returned images or documents: its parts in
  :func:`nacelle.dumps` form (``{"type": "image", "media_type", "data"}``,
  ``{"type": "document", "media_type", "data", "title"}``, ``{"type": "text", "text"}``),
  data in base64; ``preview``, only on a paused result when the server was given
  a ``preview`` function: what approving the call would do, for a person (the diff
  of a file it would write, the command it would run), as plain text.
- ``turn``: ``stop`` and ``usage`` — the turn's tokens and dollars:
  ``{"input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens",
  "reasoning_tokens", "total", "cost", "priced"}``.
- ``compaction``: ``strategy``, ``removed``, ``tokens`` and ``text`` (the summary).
- ``done``: ``stop``, ``usage`` (the run's), ``text`` (the last assistant text),
  ``output`` (a structured answer as JSON, or null), ``messages`` (the conversation
  after the run, in :func:`nacelle.dumps` form, so a client without a session can send
  it back next time), ``run`` and ``pending``. For a paused run ``pending`` lists the
  waiting calls (``id``, ``name``, ``input``) and ``run`` is the id to post decisions
  to — set by the server apps, which keep the checkpoint; :func:`sse` alone has no
  store and sends null. The checkpoint itself never goes out: what a person approved
  must not pass through the hands it is guarding against.
- Sub-agents (``subagent_tool(..., forward=True)``): an event a sub-agent's run made
  and its tool forwarded also carries ``agent`` (the path of sub-agent names from
  the top, a list) and ``via`` (the id of the call that started that sub-agent's
  run: the ``tool_call`` whose ``agent`` is this path without its last name). The
  run's own events carry neither, so a reader of version 1 sees its events as
  before; one that ignores the two shows a sub-agent's work inline. A ``done``'s
  ``pending`` lists the calls awaiting a decision at any depth
  (``Checkpoint.waiting()``), a sub-agent's with its ``agent`` path and ``key``
  (absent for the run's own): the call's path of ids (``"p1/call_0"``), a
  decision key always accepted, where the bare ``id`` is only while no other waiting
  call shares it; a sub-agent call that paused from inside is not among them — decisions are
  posted for the calls it waits on.
- ``error``: the run failed. ``error`` is the exception's type and ``message`` its
  text for nacelle's own errors (written never to hold a key); any other exception is
  an ``"internal error"`` to the client and logged in full here.

A stream ends with exactly one ``done`` or one ``error``. Kinds and fields are added
within version 1 (``tool_input`` and ``preview`` were): a reader ignores what it does
not know, so an addition never changes ``v``.

Choices where no spec speaks:

- **Keepalives are comments** (``: keepalive``), which every SSE reader skips, sent
  when nothing was produced for ``keepalive`` seconds — a long tool call would
  otherwise leave the connection silent long enough for a proxy to drop it, and a
  disconnected client is only noticed when a write fails.
- **The run is driven on a worker thread.** The events generator blocks while a model
  thinks or a tool runs, and a generator cannot both block and yield a keepalive, so
  a thread iterates it into a queue and :func:`sse` waits on the queue with a
  timeout. The queue is unbounded: a run's output is bounded by what the model
  writes, and the thread must never block on a slow client while holding a tool.
- **Nothing is buffered**: each event is encoded and yielded as it arrives.
- **Closing the stream early cancels the run**: :func:`sse` sets ``cancel`` (pass the
  same :class:`~nacelle.CancelEvent` to ``agent.stream``), which tells the backend and
  the tools at once; the worker then closes the run in its own thread.
- JSON is written with ``ensure_ascii=False`` (a lone surrogate, which UTF-8 cannot
  hold, becomes ``?``); it never holds a line break, so each event is one data line.

Outer ring: imports the standard library and nacelle's core.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import queue
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Union

from .._loggers import get_logger
from ..errors import NacelleError
from ..events import Event, Kind, Usage
from ..messages import Role, _part_to_json
from ..messages import dumps as dump_messages

__all__ = ["KEEPALIVE", "SCHEMA_VERSION", "encode", "error_json", "event_json", "sse"]

log = get_logger(__name__)

#: The ``v`` of every event's JSON.
SCHEMA_VERSION = 1

#: What goes out when nothing else did for ``keepalive`` seconds.
KEEPALIVE = b": keepalive\n\n"

#: An item of the stream: an Event, a JSON object already in the schema, or bytes
#: already encoded (another protocol's SSE, sent as they are).
Item = Union[Event, Mapping[str, Any], bytes]


def usage_json(usage: Usage) -> Dict[str, Any]:
    """A Usage as the schema's ``usage`` object."""
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_creation_tokens": usage.cache_creation_tokens,
            "reasoning_tokens": usage.reasoning_tokens, "total": usage.total,
            "cost": usage.cost, "priced": usage.priced}


def event_json(event: Event, *, run: Optional[str] = None) -> Dict[str, Any]:
    """``event`` as the schema's JSON object; ``run`` is a paused run's id for DONE."""
    kind = event.kind
    data: Dict[str, Any] = {"v": SCHEMA_VERSION, "kind": kind.value}
    if event.agent or event.via:
        data.update(agent=list(event.agent), via=event.via)
    if kind in (Kind.TEXT, Kind.THINKING):
        data["text"] = event.text
    elif kind is Kind.TOOL_INPUT and event.tool is not None:
        tool = event.tool
        data.update(id=tool.id, index=tool.index, name=tool.name, text=event.text)
    elif kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT) and event.tool is not None:
        tool = event.tool
        data.update(id=tool.id, index=tool.index, name=tool.name, server=tool.server)
        if kind is Kind.TOOL_CALL:
            data["input"] = tool.input
        else:
            data.update(result=tool.result, error=tool.error, refused=tool.refused,
                        paused=tool.paused, discarded=tool.discarded,
                        duration=round(tool.duration, 6))
            if tool.content:
                data["content"] = [_part_to_json(part) for part in tool.content]
    elif kind is Kind.TURN:
        data.update(stop=_stop(event), usage=usage_json(event.usage))
    elif kind is Kind.COMPACTION:
        compacted = event.compaction
        data.update(strategy=getattr(compacted, "strategy", ""),
                    removed=getattr(compacted, "removed", 0),
                    tokens=getattr(compacted, "tokens", 0), text=event.text)
    elif kind is Kind.DONE:
        text = next((m.text for m in reversed(event.messages)
                     if getattr(m, "role", None) is Role.ASSISTANT), "")
        data.update(stop=_stop(event), usage=usage_json(event.usage), text=text,
                    output=_plain(event.output),
                    messages=json.loads(dump_messages(event.messages)),
                    run=run, pending=_waiting(event.checkpoint, []))
    return data


def _waiting(checkpoint: Any, path: List[str], above: str = "") -> List[Dict[str, Any]]:
    """The calls a paused run waits on, at any depth, each with its sub-agent path."""
    found: List[Dict[str, Any]] = []
    for p in getattr(checkpoint, "pending", ()):
        if getattr(p, "child", None) is not None:
            found.extend(_waiting(p.child, path + [p.name], f"{above}{p.id}/"))
        else:
            item = {"id": p.id, "name": p.name, "input": p.input}
            found.append(dict(item, agent=path, key=above + p.id) if path else item)
    return found


def error_json(exc: BaseException) -> Dict[str, Any]:
    """A failed run as the schema's ``error`` object (see the module docstring)."""
    if isinstance(exc, NacelleError):
        message = str(exc)
        return {"v": SCHEMA_VERSION, "kind": "error", "error": type(exc).__name__,
                "message": message if len(message) <= 500 else message[:499] + "…"}
    return {"v": SCHEMA_VERSION, "kind": "error", "error": "internal error",
            "message": "the run failed; the server's log says why"}


def encode(data: Mapping[str, Any]) -> bytes:
    """One SSE event: ``event:`` the object's kind, ``data:`` the object as one line."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=_fallback)
    return f"event: {data['kind']}\ndata: {text}\n\n".encode("utf-8", "replace")


def sse(events: Iterable[Item], *, keepalive: float = 15.0,
        cancel: Optional[threading.Event] = None) -> Iterator[bytes]:
    """The events as SSE bytes, one event per chunk, keepalive comments between.

    ``events`` yields :class:`~nacelle.Event` values (or JSON objects already in the
    schema, sent as they are). A run that raises ends the stream with an ``error``
    event. Closing this generator before the end sets ``cancel``, which should be
    the ``cancel=`` the run was started with.
    """
    if not keepalive > 0:
        raise ValueError(f"keepalive must be a positive number of seconds, got {keepalive!r}")
    inbox: "queue.Queue[Any]" = queue.Queue()
    pump = Pump(events, inbox.put)
    pump.start()
    finished = False
    try:
        while True:
            try:
                item = inbox.get(timeout=keepalive)
            except queue.Empty:
                yield KEEPALIVE
                continue
            if item is END:
                finished = True
                return
            yield item
    finally:
        if not finished:
            log.debug("the SSE stream was closed before the run ended; cancelling it")
            pump.stop()
            if cancel is not None:
                cancel.set()


class _End:
    def __repr__(self) -> str:
        return "<end of stream>"


#: What a Pump delivers after the last chunk.
END: Any = _End()


class Pump:
    """Iterates ``events`` on a daemon thread, delivering each encoded chunk, then END.

    ``stop()`` asks it to stop delivering; it closes the events generator after the
    item it is waiting for (cancel the run too, or that may take a while).
    """

    def __init__(self, events: Iterable[Item], deliver: Callable[[Any], None]) -> None:
        self._events = events
        self._deliver = deliver
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nacelle-serve-run", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def join(self, timeout: Optional[float] = None) -> bool:
        """Wait for the thread; True when it has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        events = iter(self._events)
        try:
            for item in events:
                if self._stopped.is_set():
                    return
                if isinstance(item, bytes):
                    self._deliver(item)
                    continue
                data = item if not isinstance(item, Event) else event_json(item)
                self._deliver(encode(data))
        except BaseException as exc:  # noqa: BLE001 - the client hears of every failure
            if self._stopped.is_set():
                log.debug("the run ended after its client left: %s", type(exc).__name__)
                return
            if isinstance(exc, NacelleError):
                log.info("a served run failed: %s: %s", type(exc).__name__, exc)
            else:
                log.exception("a served run failed")
            self._deliver(encode(error_json(exc)))
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing must not hide the END
                    log.exception("closing a served run failed")
            self._deliver(END)


def _stop(event: Event) -> Optional[str]:
    return event.stop.value if event.stop is not None else None


def _plain(value: Any) -> Any:
    """A structured answer as JSON-ready data: dataclasses, enums, pydantic models."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _plain(dump(mode="json"))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return repr(value)


def _fallback(value: Any) -> Any:
    return _plain(value)
