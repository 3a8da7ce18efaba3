"""One cancellation and time object for a run and each of its tool calls.

Cancellation and time used to live in three places (the run's context, each tool
call's context, and the Agent's watcher of the caller's event); they live here:

- :class:`CancelEvent` is a ``threading.Event`` that also calls back when it is set,
  and may be *linked* to a parent event: setting the parent sets it. Its truth is
  ``is_set()``, so ``if ctx.cancelled:`` in a tool means what it says. A thread blocked
  in a socket read cannot see a flag, so the code that owns the socket registers a
  callback (close the response) and cancelling from another thread unblocks it at
  once rather than at the next read timeout. Waiters that can be woken by a callback
  never poll.
- :class:`RunContext` carries a run's cancellation, its clock and an absolute
  deadline down to every sleep and read. Time is a parameter (``clock``), so tests use
  :class:`nacelle.testing.FakeClock` instead of patching ``time``; a clock object with
  a ``sleep(seconds)`` method also takes over the waiting, so a test's sleeps are
  recorded rather than slept.
- :class:`ToolContext` is a RunContext for one tool call, made by
  :meth:`RunContext.tool`: its own cancel event linked to the run's (a timed-out call
  is cancelled alone; a cancelled run cancels every call), the run's clock, and the
  earlier of the run's deadline and the call's timeout.
- A RunContext also carries the run's ``observer`` (``observe.py``'s fan-out, or
  None), handed down to every child and tool context, so telemetry reaches the
  transport and the tool threads by the same path as cancellation.
- :class:`Budget` is what a run may spend. ``seconds`` becomes the run's deadline,
  so it bounds model requests and tools alike; tokens, cost and tool calls are checked
  by the loop at each turn boundary.

Deadlines are absolute, on the context's clock, and a child never extends its
parent's: the earlier deadline wins and brings its own error with it (``Retry``'s
budget raises ``RetryBudgetExceeded``; a plain deadline raises ``Cancelled``).

Value module: imports the standard library and ``errors`` only.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple, Type

from ._loggers import get_logger
from .errors import Cancelled

__all__ = ["Budget", "CancelEvent", "RunContext", "ToolContext"]

log = get_logger(__name__)


class CancelEvent(threading.Event):
    """A ``threading.Event`` that calls back when it is set, optionally linked to a
    ``parent`` event (setting the parent sets this one; :meth:`unlink` undoes that).

    A parent without callbacks (a plain ``threading.Event``) cannot tell its children;
    they then learn of it at their next check of the parent.
    """

    def __init__(self, parent: Optional[threading.Event] = None) -> None:
        super().__init__()
        self._callbacks_lock = threading.Lock()
        self._callbacks: Dict[int, Callable[[], None]] = {}
        self._next_key = 0
        self._unlink: Callable[[], None] = _nothing
        if parent is not None:
            add = getattr(parent, "add_callback", None)
            if add is not None:
                self._unlink = add(self.set)
            elif parent.is_set():
                self.set()

    def __bool__(self) -> bool:
        # A threading.Event is always true, so ``if ctx.cancelled:`` — the obvious way
        # for a tool to check — was true from the start and stopped every loop at once.
        return self.is_set()

    def set(self) -> None:
        with self._callbacks_lock:
            first = not self.is_set()
            super().set()
            callbacks = list(self._callbacks.values()) if first else []
            self._callbacks.clear()
        for callback in callbacks:
            _call_quietly(callback)

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once when the event is set (at once if it already is).

        Returns a function that unregisters it.
        """
        with self._callbacks_lock:
            if not self.is_set():
                key = self._next_key
                self._next_key += 1
                self._callbacks[key] = callback
                return _Unregister(self, key)
        _call_quietly(callback)
        return _nothing

    def unlink(self) -> None:
        """Stop following the parent: a finished call's event must not stay registered
        on the run's for the rest of a long run."""
        unlink, self._unlink = self._unlink, _nothing
        unlink()

    def _remove(self, key: int) -> None:
        with self._callbacks_lock:
            self._callbacks.pop(key, None)


class _Unregister:
    """What :meth:`CancelEvent.add_callback` returns: calling it forgets the callback.

    One small object instead of a closure (a function, its cell tuple and two cells):
    every run registers a few callbacks, and with a thousand runs at once each object
    they leave alive is one more for the cyclic collector to count and scan.
    """

    __slots__ = ("_event", "_key")

    def __init__(self, event: "CancelEvent", key: int) -> None:
        self._event = event
        self._key = key

    def __call__(self) -> None:
        self._event._remove(self._key)


def _nothing() -> None:
    return None


def _call_quietly(callback: Callable[[], None]) -> None:
    # A failing clean-up callback must not stop the others or the cancelling thread.
    try:
        callback()
    except Exception:  # noqa: BLE001
        log.debug("cancel callback failed", exc_info=True)


class RunContext:
    """Cancellation and an absolute deadline, passed down to every wait.

    ``cancelled`` is a ``threading.Event`` (a new :class:`CancelEvent` when not given,
    so :meth:`on_cancel` callbacks fire the moment it is set, and ``if ctx.cancelled:``
    is ``ctx.cancelled.is_set()``; a plain Event passed in is always true, so code
    that may be given one calls ``is_set()``). ``deadline`` is
    in seconds on ``clock``; reaching it raises ``deadline_error`` (``Cancelled`` by
    default; ``Retry`` passes ``RetryBudgetExceeded``).
    """

    __slots__ = ("deadline", "cancelled", "clock", "deadline_error", "observer", "_tags",
                 "_hands_up")

    def __init__(
        self,
        deadline: Optional[float] = None,
        *,
        cancelled: Optional[threading.Event] = None,
        clock: Callable[[], float] = time.monotonic,
        deadline_error: Type[BaseException] = Cancelled,
        observer: Optional[Callable[[str, Dict[str, Any]], None]] = None,
    ) -> None:
        self.deadline = deadline
        self.cancelled = cancelled if cancelled is not None else CancelEvent()
        self.clock = clock
        self.deadline_error = deadline_error
        self.observer = observer
        #: What the run's own text and argument deltas are tagged with as they are made
        #: (``agent`` and ``via``): set for the run of a forwarding sub-agent that has no
        #: observers (``subagent.py``), whose every event is passed on so tagged, so
        #: the built-in backends' accumulators make each delta with the tags
        #: (``backends._stream.Tagging``) rather than the sub-agent copy it. None for
        #: every other run.
        self._tags: Optional[Dict[str, Any]] = None
        #: True when the generator that started the run (``Agent._stream``) iterates a
        #: forwarding run a call hands over itself: the round then yields the
        #: ``toolcalls.Handover`` up to it rather than iterating it (see
        #: ``Round.results``).
        self._hands_up = False

    def observe(self, kind: str, **data: Any) -> None:
        """Tell the run's observers (``observe.py``) about ``kind``; nothing without
        them. A site that builds costly ``data`` checks ``ctx.observer`` first."""
        observer = self.observer
        if observer is not None:
            observer(kind, data)

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled.is_set() else "active"
        left = self.remaining()
        return f"<RunContext {state}, {'no deadline' if left is None else f'{left:.3f}s left'}>"

    def remaining(self) -> Optional[float]:
        """Seconds left before the deadline (never negative), or None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self.clock())

    def expired(self) -> bool:
        """True once the deadline has passed."""
        return self.deadline is not None and self.clock() >= self.deadline

    def cancel(self) -> None:
        """Cancel the run: set ``cancelled`` (firing any ``on_cancel`` callbacks)."""
        self.cancelled.set()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when the run is cancelled; returns an unregister function.

        With a plain ``threading.Event`` passed as ``cancelled`` nothing can call back;
        the callback is then only called if the event is already set, and blocking
        code notices cancellation at its next check.
        """
        add: Optional[Callable[[Callable[[], None]], Callable[[], None]]] = getattr(
            self.cancelled, "add_callback", None)
        if add is not None:
            return add(callback)
        if self.cancelled.is_set():
            _call_quietly(callback)
        return _nothing

    def check(self) -> None:
        """Raise ``Cancelled`` if cancelled, ``deadline_error`` if the deadline passed."""
        if self.cancelled.is_set():
            raise Cancelled("the run was cancelled")
        if self.expired():
            raise self._deadline_passed()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, but never past the deadline and not once cancelled.

        Returns early and raises ``Cancelled`` when cancelled; when the deadline comes
        first, waits only until it and raises ``deadline_error``.
        """
        self.check()
        seconds = max(0.0, float(seconds))
        left = self.remaining()
        hits_deadline = left is not None and seconds >= left
        if left is not None and hits_deadline:
            seconds = left
        if self._wait(seconds):
            raise Cancelled("the run was cancelled")
        if hits_deadline:
            raise self._deadline_passed()

    def child(
        self,
        deadline: Optional[float] = None,
        deadline_error: Optional[Type[BaseException]] = None,
    ) -> "RunContext":
        """A context sharing this one's cancellation, with a deadline no later than
        this one's. The earlier deadline brings its own error with it."""
        deadline, error = self._earlier(deadline, deadline_error)
        child = RunContext(deadline, cancelled=self.cancelled, clock=self.clock,
                           deadline_error=error, observer=self.observer)
        child._tags = self._tags  # the same run's turns (a retry's, a budget's)
        child._hands_up = self._hands_up
        return child

    def tool(self, call_id: str, index: int, name: str, *,
             timeout: Optional[float] = None, asked: Optional[float] = None) -> "ToolContext":
        """The context of one tool call: cancelled with the run or on its own, on the
        run's clock, due at the earlier of the run's deadline and ``asked + timeout``
        (``asked`` defaults to now: a call's timeout counts from when the model asked
        for it, not from when a worker got to it)."""
        own = None
        if timeout is not None:
            own = (self.clock() if asked is None else asked) + timeout
        deadline, error = self._earlier(own, Cancelled)
        return ToolContext(call_id, index, name, CancelEvent(self.cancelled), deadline,
                           clock=self.clock, deadline_error=error, observer=self.observer)

    # -- internals --------------------------------------------------------------

    def _earlier(self, deadline: Optional[float],
                 error: Optional[Type[BaseException]]) -> Tuple[Optional[float], Type[BaseException]]:
        if deadline is None or (self.deadline is not None and self.deadline <= deadline):
            return self.deadline, self.deadline_error
        return deadline, error or self.deadline_error

    def _wait(self, seconds: float) -> bool:
        """Wait, returning True when cancelled meanwhile."""
        fake_sleep = getattr(self.clock, "sleep", None)
        if fake_sleep is not None:
            fake_sleep(seconds)
            return self.cancelled.is_set()
        return self.cancelled.wait(seconds)

    def _deadline_passed(self) -> BaseException:
        return self.deadline_error("the run's deadline passed")


def _dropped(event: Any) -> None:
    """A ToolContext's ``emit`` outside a run: nobody reads the stream."""


class ToolContext(RunContext):
    """What a running tool may know about its call, and how it learns to stop.

    ``cancelled`` is set when the run is cancelled or the call timed out; a tool that
    can take long should check it (or call :meth:`check`, or wait with :meth:`sleep`
    or ``cancelled.wait``) at convenient points. ``deadline`` is on ``clock`` (the
    run's), or None. Everything a :class:`RunContext` offers works here too, so a tool
    can hand its context to code that expects one — a nested run, an HTTP request.
    """

    __slots__ = ("call_id", "index", "name", "emit", "spend", "resumed", "budget", "policy",
                 "_offer")

    def __init__(
        self,
        call_id: str = "",
        index: int = 0,
        name: str = "",
        cancelled: Optional[threading.Event] = None,
        deadline: Optional[float] = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        deadline_error: Type[BaseException] = Cancelled,
        observer: Optional[Callable[[str, Dict[str, Any]], None]] = None,
    ) -> None:
        super().__init__(deadline, cancelled=cancelled, clock=clock,
                         deadline_error=deadline_error, observer=observer)
        self.call_id = call_id
        self.index = index
        self.name = name
        #: Passes an event that closes nothing into the run's stream, as it happens
        #: (a forwarding sub-agent's events); the round running the call sets it, and
        #: outside a run it drops the event.
        self.emit: Callable[[Any], None] = _dropped
        #: Adds what the call spent on model requests of its own (a sub-agent's run)
        #: to the run's usage, so the run's total and its budget count it; the round
        #: sets it, and outside a run it drops the usage.
        self.spend: Callable[[Any], None] = _dropped
        #: Set for a call resumed after a pause that paused inside it (a sub-agent's
        #: approval): ``(checkpoint, decisions)`` of the nested run to go on with.
        self.resumed: Optional[Tuple[Any, Any]] = None
        #: What the run may still spend as the call starts (a :class:`Budget`, None
        #: for no limit): a nested run (a sub-agent's) is held to it.
        self.budget: Optional["Budget"] = None
        #: The run's tool policy (its approval, hooks and result cap: the round's
        #: ``toolcalls.ToolSink``), for calls a tool makes on the run's behalf — a
        #: code-mode script's — which must be asked as the run's own are; None
        #: outside a run.
        self.policy: Any = None
        # Hands a forwarding run to the round's generator to iterate on its own
        # thread (``toolcalls.ToolSink.offer``); the round sets it.
        self._offer: Optional[Callable[[Any], bool]] = None

    def __repr__(self) -> str:
        return (f"ToolContext(call_id={self.call_id!r}, index={self.index}, "
                f"name={self.name!r}, cancelled={self.cancelled.is_set()})")

    def check(self) -> None:
        """Raise ``Cancelled`` if the call was cancelled or its deadline passed."""
        if self.cancelled.is_set():
            raise Cancelled(f"tool call {self.call_id or self.name} was cancelled")
        if self.expired():
            raise self._deadline_passed()

    def progress(self, progress: float, total: Optional[float] = None, message: str = "") -> None:
        """Say how far the call has got (``progress`` of ``total``, when known): a
        ``tool.progress`` observation for the run's observers and a DEBUG log line. A
        long tool calls it as it goes; an MCP tool passes on what its server reports."""
        of = f"/{total:g}" if total is not None else ""
        log.debug("tool %s (%s): progress %g%s %s", self.name, self.call_id, progress, of,
                  message)
        self.observe("tool.progress", id=self.call_id, index=self.index, name=self.name,
                     progress=progress, total=total, message=message)

    def release(self) -> None:
        """Stop following the run's cancellation (the call is over)."""
        unlink = getattr(self.cancelled, "unlink", None)
        if unlink is not None:
            unlink()

    def _deadline_passed(self) -> BaseException:
        if self.deadline_error is Cancelled:
            return Cancelled(f"tool call {self.call_id or self.name} ran out of time")
        return self.deadline_error(f"tool call {self.call_id or self.name} ran out of time: "
                                   "the run's deadline passed")


@dataclass(frozen=True)
class Budget:
    """What one run may spend: tokens (every billed token, ``Usage.total``), cost (US
    dollars, where the backend knows prices), local tool calls, and wall-clock
    seconds. None means no limit on that measure.

    ``seconds`` is the run's deadline from its start, tools included: a run under a
    one-second budget does not wait for a tool that takes longer. The other limits are
    checked when a turn ends: the run stops there with ``Stop.BUDGET``, and the calls
    that turn asked for are closed as not run.
    """

    tokens: Optional[int] = None
    cost: Optional[float] = None
    tool_calls: Optional[int] = None
    seconds: Optional[float] = None

    def __post_init__(self) -> None:
        for name in ("tokens", "tool_calls"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise ValueError(f"Budget.{name} must be a whole number of at least 0, "
                                 f"got {value!r}")
        for name in ("cost", "seconds"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or
                                      not isinstance(value, (int, float)) or
                                      not math.isfinite(value) or value <= 0):
                raise ValueError(f"Budget.{name} must be a positive finite number, "
                                 f"got {value!r}")


_spans = iter(range(1, 2**63))
_spans_lock = threading.Lock()


def new_span() -> int:
    """A fresh id pairing a start observation with its end (unique in the process).

    ``nacelle.observe.new_span`` (its name there): it lives here, with
    :meth:`RunContext.observe`, because every model request and observed tool call
    takes one, and a run without observers need not load the observe module."""
    with _spans_lock:
        return next(_spans)


new_span.__module__ = "nacelle.observe"
