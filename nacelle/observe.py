"""What a run did, as it does it: :class:`Observation`, the observer hook, and :class:`Recorder`.

Events are the run's *output* — what a consumer shows. Observations are its
*telemetry* — when each request started and first answered, how long a tool ran,
which attempt was retried and after how long — for tracing, a run report or a log.
``Agent(..., observers=[...])`` calls each observer with one :class:`Observation`
per moment below; ``nacelle.otel.Instrumentation`` and :class:`Recorder` are
observers, and so is any callable taking an Observation.

=====================  =========================================================
``kind``               ``data`` (seconds are wall-clock durations)
=====================  =========================================================
``run.start``          ``backend``, ``model``, ``system``, ``messages`` (the
                       conversation the run starts from), ``tools`` (each
                       ``(name, description)``), ``max_tokens``, ``profile``,
                       ``resumed``; a sub-agent's run (``subagent_tool``)
                       also ``parent_run`` (the run id of the run whose call
                       started it), ``via`` (that call's id) and ``agent`` (the
                       sub-agent tool's name). Its observations reach the
                       parent's observers under a run id of its own.
``request.start``      ``provider`` (the backend's name), ``model``, ``url``,
                       ``server_address``, ``server_port``, ``max_tokens``,
                       ``profile``, ``attempt`` (below)
``request.first_byte`` ``status``, ``request_id``, ``latency``
``request.retry``      ``attempt`` (the one that failed, from 1), ``delay``,
                       ``error`` (the exception), ``level`` (``"http"``: the
                       transport resent the request; ``"turn"``: ``Retry`` reran
                       the turn)
``request.end``        ``status``, ``latency``, ``ttft`` (to the first text or
                       thinking delta, or server-side call; None when none came —
                       a turn of local calls only), ``usage``,
                       ``stop``, ``request_id``, ``response_id``,
                       ``response_model``, ``error`` (None, or the exception),
                       ``attempt``
``tool.start``         ``id``, ``index``, ``name``, ``input``, ``description``
``tool.progress``      ``id``, ``index``, ``name``, ``progress``, ``total`` (None
                       when unknown), ``message``: what ``ToolContext.progress``
                       was told (an MCP server's progress reports included)
``tool.end``           ``id``, ``index``, ``name``, ``duration``, ``result``,
                       ``error`` (the text the model read, or None),
                       ``error_type`` (None, the class name of the exception the
                       tool raised, or ``unknown_tool``, ``invalid_input``,
                       ``hook_denied``, ``refused``, ``cancelled``), ``refused``,
                       ``paused``, ``content`` (the media parts of a tool that
                       returned them, the very objects the result holds; empty
                       otherwise)
``compaction``         ``strategy``, ``reason`` (``"threshold"`` or
                       ``"context"``), ``removed``, ``tokens``, ``summary``
``pause``              ``pending`` (the paused call ids)
``fallback``           ``from``, ``to``, ``error``
``event``              ``event`` — every Event of the stream, only for observers
                       whose ``events`` attribute is true (the Recorder)
``run.end``            ``stop`` (None when the run raised), ``usage``, ``turns``,
                       ``error`` (None, or the exception)
=====================  =========================================================

Each ``request.start`` / ``first_byte`` / ``end`` and ``tool.start`` / ``end``
also carries ``span``, an id shared by a start and its end, so an observer pairs
them without a table of its own. A run has at most one request open at a time, so a
``request.retry`` at the ``"http"`` level belongs to the run's open request; one at
the ``"turn"`` level comes between two requests.

``attempt`` counts the sends of one model turn, from 1: the transport resending
within a request (so ``request.end`` says which send answered or failed) and
``Retry`` running the turn again (whose next ``request.start`` goes on counting).
Three sends by the transport, then Retry's second run answering at once, are
``request.start`` 1, ``request.end`` 3, ``request.start`` 4, ``request.end`` 4; the
next turn starts at 1 again. It is worked out here, from the ``request.*``
observations in the order they come (one request is open at a time), rather than
by every backend and wrapper that emits them.

Rules, and why:

- Observers run synchronously, on the thread where the moment happens: a tool's
  ``tool.start`` and ``tool.end`` on that tool's own thread, so a tracer can make its
  span current there and an HTTP client the tool uses lands under it. They must be
  cheap and thread-safe (tools run side by side).
- An observer that raises is logged once (a warning with the traceback; later
  failures of the same observer in that run at DEBUG) and never breaks the run:
  telemetry that can fail a run is worse than none.
- With no observer and the ``nacelle.observe`` logger below DEBUG nothing is built:
  the run's context holds no observer and every emitting site checks that first.
- At DEBUG the same path logs one line per request (provider, model, status,
  latency, time to first token, request id, tokens), so a user who only turns on
  logging sees every request without wiring anything.
- ``data`` values are what the run has (a Usage, a Message, the exception): an
  observer decides what to keep. :class:`Recorder` turns them into JSON.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import threading
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, TextIO, Tuple

from ._loggers import get_logger
from . import bounded_json
from .errors import ConfigError, NacelleError
from .events import Event, Kind, Usage
from .messages import _PART_TYPES, Document, Image, Message, Text, _part_to_json, decoded_size
from .context import new_span as new_span  # lives there: every request takes a span

__all__ = ["KINDS", "Observation", "Observer", "Observers", "Recorder", "checked", "load",
           "media_summary", "new_span"]

log = get_logger(__name__)
_DEBUG = 10  # logging.DEBUG, without importing logging to name it

#: Every ``Observation.kind`` the library emits, in the table's order.
KINDS = ("run.start", "request.start", "request.first_byte", "request.retry", "request.end",
         "tool.start", "tool.progress", "tool.end", "compaction", "pause", "fallback", "event", "run.end")


@dataclass(frozen=True, repr=False)  # its own __repr__ below
class Observation:
    """One moment of a run: ``kind`` (see the module docstring), the run's id, the
    wall-clock ``time`` (seconds since the epoch, for placing it on a timeline) and
    what is known then, ``data`` (read-only)."""

    kind: str
    run_id: str
    time: float
    data: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        return f"Observation({self.kind!r}, run_id={self.run_id!r}, keys={sorted(self.data)!r})"


Observer = Callable[[Observation], Any]

_COUNTED = frozenset({"request.start", "request.end", "request.retry", "fallback"})

class Observers:
    """One run's observers behind one call, ``observers(kind, data)``: the callable a
    :class:`~nacelle.context.RunContext` holds as its ``observer``.

    ``make`` returns None when there is nothing to call, so a run without observers
    and without DEBUG logging pays for nothing.
    """

    __slots__ = ("run_id", "_observers", "_events", "_failed", "_lock", "_debug", "_sends",
                 "_carried")

    def __init__(self, observers: Sequence[Observer], run_id: str, *, debug: bool = False) -> None:
        self.run_id = run_id
        self._observers = tuple(observers)
        self._events = tuple(o for o in self._observers if getattr(o, "events", False))
        self._failed: Set[int] = set()
        self._lock = threading.Lock()
        self._debug = debug
        self._sends = 0    # sends of the open (or last) request's turn so far
        self._carried = 0  # sends a turn retry carries into its next request

    @classmethod
    def make(cls, observers: Sequence[Observer], run_id: Optional[str] = None) -> Optional["Observers"]:
        debug = log.isEnabledFor(_DEBUG)
        if not observers and not debug:
            return None
        import uuid  # only a run that is observed needs an id: not loaded with the core

        return cls(observers, run_id or uuid.uuid4().hex, debug=debug)

    @property
    def observers(self) -> Tuple[Observer, ...]:
        """The observers called, in order (a sub-agent's run is given them too)."""
        return self._observers

    @property
    def wants_events(self) -> bool:
        """True when an observer asked for every Event (``events = True``)."""
        return bool(self._events)

    def __call__(self, kind: str, data: Dict[str, Any]) -> None:
        if kind in _COUNTED:
            with self._lock:
                self._count(kind, data)
        observation = Observation(kind, self.run_id, time.time(), MappingProxyType(data))
        for observer in self._events if kind == "event" else self._observers:
            try:
                observer(observation)
            except Exception:  # noqa: BLE001 - telemetry never breaks a run
                self._failed_once(observer)
        if self._debug and kind == "request.end":
            _log_request(data)

    def _count(self, kind: str, data: Dict[str, Any]) -> None:
        """Set ``attempt`` on a request's start and end (see the module docstring)."""
        if kind == "request.start":
            self._sends, self._carried = self._carried + 1, 0
            data["attempt"] = self._sends
        elif kind == "request.end":
            data["attempt"] = max(1, self._sends)
            if data.get("error") is None:
                self._sends = 0
        elif kind == "request.retry":
            if data.get("level") == "turn":
                self._carried = self._sends
            else:
                self._sends += 1
        elif kind == "fallback":  # the next backend's request is a first send
            self._sends = self._carried = 0

    def _failed_once(self, observer: Observer) -> None:
        with self._lock:
            first = id(observer) not in self._failed
            self._failed.add(id(observer))
        if first:
            log.warning("observer %r raised; the run goes on without its telemetry being "
                        "complete", observer, exc_info=True)
        else:
            log.debug("observer %r raised again", observer, exc_info=True)


def _log_request(data: Mapping[str, Any]) -> None:
    usage = data.get("usage")
    ttft = data.get("ttft")
    sends = data.get("attempt") or 1
    log.debug("%s %s: %s in %.3fs (first token %s), request id %s, %s tokens%s%s",
              data.get("provider", ""), data.get("model", ""),
              data.get("status") or type(data.get("error")).__name__,
              data.get("latency") or 0.0, "-" if ttft is None else f"{ttft:.3f}s",
              data.get("request_id") or "-", getattr(usage, "total", 0),
              f", on attempt {sends}" if sends > 1 else "",
              f", failed: {data['error']}" if data.get("error") is not None else "")


class Recorder:
    """An observer writing a run's observations — and, with ``events=True`` (the
    default), its events — to ``path`` as JSON lines, one object per line with
    ``kind``, ``run_id``, ``time`` and ``data``. Several runs may share a file
    (appended, told apart by ``run_id``); :func:`load` reads it back.

    Lines are written whole under a lock (tools observe from their own threads) and
    flushed at ``run.end``. Values become JSON as: a Message in
    ``nacelle.messages.dumps``'s form, a Usage its fields and ``cost_without_cache``,
    an Event the fields it sets, other dataclasses their fields, an exception
    ``{"type", "message"}``, enums their value, bytes base64, a message part (a
    tool's media on its TOOL_RESULT event) in ``dumps``'s form. What a run holds is
    written as it is: keep a recording where you would keep the conversation itself
    (an API key is never in it — keys are not in messages or observations).

    A ``tool.end``'s ``content`` is written as a summary of each part — a Text's
    text; an image's or document's ``media_type``, ``bytes`` and ``title`` — never
    its base64: the parts themselves are in the TOOL_RESULT event and the
    conversation, and a screenshot written once more per observation would swell
    every recording of a browsing agent by its size again. For the same reason a
    TOOL_INPUT's ``tool`` is written as its ``id``, ``index`` and ``name`` only: its
    delta is its ``text``, and the call's input so far is its deltas joined.
    """

    events = True

    def __init__(self, path: "os.PathLike[str] | str", *, events: bool = True) -> None:
        self.path = os.fspath(path)
        self.events = events
        self._lock = threading.Lock()
        self._file: Optional[TextIO] = None

    def __repr__(self) -> str:
        return f"Recorder({self.path!r})"

    def __call__(self, observation: Observation) -> None:
        data = dict(observation.data)
        if observation.kind == "tool.end" and data.get("content"):
            data["content"] = [media_summary(p) for p in data["content"]]
        line = json.dumps({"kind": observation.kind, "run_id": observation.run_id,
                           "time": observation.time, "data": data},
                          default=_jsonable, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            self._file.write(line + "\n")
            if observation.kind == "run.end":
                self._file.flush()

    def close(self) -> None:
        """Flush and close the file (a later observation opens it again)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def load(path: "os.PathLike[str] | str") -> List[Dict[str, Any]]:
    """The records of a :class:`Recorder` file, as JSON objects, in file order.

    A line that is not a JSON object with ``kind``, ``run_id``, ``time`` and
    ``data`` is a :class:`~nacelle.errors.NacelleError` naming the file and line (a
    torn last line from a killed process is skipped, with a warning).
    """
    records: List[Dict[str, Any]] = []
    with open(path, encoding="utf-8") as file:
        lines = file.read().split("\n")
    # A file that does not end with a newline ends with a line still being written.
    torn = len(lines) if lines[-1] else 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = bounded_json.loads(line, what="record", max_depth=bounded_json.DOCUMENT_DEPTH)
        except bounded_json.TooDeep as exc:
            raise NacelleError(f"{os.fspath(path)}, line {number}: {exc}") from None
        except ValueError:
            if number == torn:
                log.warning("%s: line %d is cut short (a run that was killed?); skipped",
                            path, number)
                continue
            raise NacelleError(f"{os.fspath(path)}, line {number}: not JSON") from None
        if not (isinstance(record, dict) and isinstance(record.get("kind"), str)
                and isinstance(record.get("run_id"), str)
                and isinstance(record.get("time"), (int, float))
                and isinstance(record.get("data"), dict)):
            raise NacelleError(f"{os.fspath(path)}, line {number}: not a recorded observation "
                               "(kind, run_id, time and data)")
        records.append(record)
    return records


def media_summary(part: Any) -> Dict[str, Any]:
    """What a recording keeps of one of a tool's parts where the part itself is
    written elsewhere: its type, and its text or its media type, size and title."""
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, (Image, Document)):
        summary: Dict[str, Any] = {"type": "image" if isinstance(part, Image) else "document",
                                   "media_type": part.media_type,
                                   "bytes": decoded_size(part.data)}
        if isinstance(part, Document) and part.title:
            summary["title"] = part.title
        return summary
    return {"type": type(part).__name__}


def _jsonable(value: Any) -> Any:
    """``json.dumps``'s fallback for what observations hold."""
    if isinstance(value, _PART_TYPES):
        return _part_to_json(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, BaseException):
        return {"type": type(value).__name__, "message": str(value)}
    if isinstance(value, (bytes, bytearray)):
        import base64

        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (tuple, list, set, frozenset)):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Message):
        return {"role": value.role.value, "parts": [_part_to_json(p) for p in value.parts]}
    if isinstance(value, Usage):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                  if not f.name.startswith("_")}
        fields["cost_without_cache"] = value.cost_without_cache
        return fields
    if isinstance(value, Event):
        # Only what this event carries: most are text deltas, and a recording of a
        # long run is mostly them.
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                  if f.name == "kind" or getattr(value, f.name) != f.default}
        tool = value.tool
        if tool is not None and value.kind is Kind.TOOL_INPUT:
            # Its delta is its text; the input so far is the call's deltas joined.
            # Written on every delta it would make a long argument's recording grow
            # with the square of its length.
            fields["tool"] = {"id": tool.id, "index": tool.index, "name": tool.name}
        return fields
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                if not f.name.startswith("_")}
    return repr(value)


def checked(observers: Any) -> Tuple[Observer, ...]:
    """``observers`` as a tuple of callables, or a ConfigError (for the Agent)."""
    if callable(observers):
        raise ConfigError("observers takes a sequence of observers, e.g. observers=[recorder]")
    found = tuple(observers)
    for observer in found:
        if not callable(observer):
            raise ConfigError(f"an observer must be callable, got {type(observer).__name__}")
    return found
