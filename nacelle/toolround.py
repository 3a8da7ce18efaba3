"""One turn's local calls on their threads: :class:`Round` and its :class:`Call`.

- Each call runs on a thread of its own, at most ``max_parallel_tools`` at a time;
  the rest wait in the model's order. All calls of exclusive tools in a turn form one
  chain that runs one call at a time in the model's order, alongside the other calls
  (writers and commands must not interleave with each other; a read the model asked
  for in the same turn is independent by the model's own account). A tool's
  ``max_concurrency`` holds its calls past that many at once; a waiting call of
  another tool takes the free slot meanwhile, so the order kept is each tool's.
- ``tool_timeout``, and a tool's own ``call_timeout`` (``@tool(timeout=)``; the
  sooner applies), count from the moment the model asked for the call, whether it
  was running or still waiting for a free slot: they bound how long the model waits
  for the answer. When a call's time passes, it is closed as failed and its
  ``ctx.cancelled`` is set; the others go on.
- A call that ignores cancellation is *abandoned*, never waited for: its result is
  closed already, so whatever it returns later is dropped (and logged at DEBUG), and
  its thread no longer counts against ``max_parallel_tools``, its tool's
  ``max_concurrency`` or the exclusive chain — the calls after it, in this turn or
  the next, start as if it had finished. The abandoned thread runs on until the tool
  returns; like any non-daemon thread, the interpreter waits for it at exit. (A fixed
  thread pool cannot do this: a wedged worker would hold its slot, and every call
  queued behind it would wait with no timeout running.)
- The round's context is a child of the run's (:meth:`RunContext.tool`): a call's
  deadline is the earlier of its timeout and the run's deadline, its clock the run's,
  so a run's budget bounds its tools and tests drive timeouts with a fake clock.
- A round's only call, under no timeout or run deadline, may hand a run of its own
  whose events it forwards (a sub-agent's) to the generator, which iterates it on
  the consumer's thread while it would otherwise wait (``toolcalls.Handover``).

The generator waits on the sink's condition; a result, the run's cancellation (a
callback) or the next timeout wakes it. The wait is capped at half a second, so a
fake clock moved by a test — which signals nobody — is seen within that bound.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Deque, Dict, Iterator, List, Optional, Sequence, Set, Tuple, cast

from ._loggers import get_logger
from .context import RunContext, ToolContext
from .errors import Cancelled
from .events import Event, Kind
from .messages import ToolCall
from .toolcalls import ToolSink, closing, run_tool

__all__ = ["Call", "Round"]

log = get_logger(__name__)

_TOOL_RESULT = Kind.TOOL_RESULT

# The longest the generator waits between looks at its calls; results, cancellation
# and the next timeout wake it sooner. A bound, so a clock that moves without
# signalling (a test's fake clock) is noticed within it.
_LONGEST_WAIT = 0.5


class Call:
    """One local call of a round: the model's part, its tool, its context."""

    __slots__ = ("call", "index", "tool", "ctx", "started", "decided", "approved", "timeout",
                 "due", "asked")

    def __init__(self, call: ToolCall, index: int, tool: Any,
                 decided: Optional[Sequence[str]] = None, approved: bool = False) -> None:
        self.call = call
        self.index = index
        self.tool = tool
        self.decided = decided  # run_tool's ``decided``: a resumed call's injects
        self.approved = approved  # run_tool's ``approved``: a resumed call, edited
        self.ctx = ToolContext(call.id, index, call.name)
        self.started: Optional[float] = None
        self.timeout: Optional[float] = None  # the sooner of tool_timeout and the tool's own
        self.due: Optional[float] = None  # when the timeout passes, on the run's clock
        self.asked = 0.0  # when the round was given it, on the run's clock


class Round:
    """One turn's calls: slots, the exclusive chain, timeouts, the run's deadline and
    cancellation. See the module docstring.

    The calls given are started by :meth:`results`. A call given later to :meth:`add`
    (an eager start, while the turn still streams) starts at once, in its place in the
    model's order; :meth:`landed` takes the results that have come in meanwhile, and
    :meth:`results` then waits for the rest.
    """

    def __init__(self, calls: List[Call], sink: ToolSink, ctx: RunContext,
                 timeout: Optional[float], max_parallel: int) -> None:
        self.calls: List[Call] = []
        self.sink = sink
        self.run_ctx = ctx
        self.clock = ctx.clock
        self._timeout = timeout
        self.chain: List[Call] = []
        self._lock = threading.Lock()
        self._free = max_parallel
        self._holding: Set[int] = set()  # indexes of calls that hold a slot
        self._running: Dict[str, int] = {}  # slots held, by tool name (max_concurrency)
        self._waiting: Deque[Call] = collections.deque()
        self._chain_at = 0
        self._yielded = 0  # results handed to the generator so far
        # The results :meth:`results` yielded, in order (not those of landed()).
        self.handed: List[Event] = []
        self._begun = False
        for call in calls:
            self._admit(call)

    def add(self, call: Call) -> None:
        """Take one more call and start it as soon as its place allows (its timeout
        counts from now)."""
        self._admit(call)
        if self._begun:
            self._begin(call)
            self._dispatch()

    def landed(self) -> List[Event]:
        """Take the results (and forwarded events) that have landed, without waiting."""
        forwarded, closed = self.taken()
        if forwarded:
            return forwarded + closed if closed else forwarded
        return closed

    def taken(self) -> Tuple[List[Event], List[Event]]:
        """What :meth:`landed` takes, as two lists: the events forwarded (in order),
        which close nothing, and the results of the round's calls (by index)."""
        forwarded, closed = self.sink.take()
        self._yielded += sum(1 for event in closed if event.kind is _TOOL_RESULT and not event.via)
        return forwarded, closed

    def results(self) -> Iterator[Event]:
        """Start the calls; yield their results as they land, until all are closed.

        On cancellation the open calls are closed as cancelled, those results yielded,
        and ``Cancelled`` raised; at the run's deadline likewise, raising the
        deadline's error.

        The forwarded events of a batch are handed on with one ``yield from`` of their
        list, so each passes the generators above (the loop's, the Agent's) in C, with
        no Python code of the round's or the loop's per event; the results yielded are
        kept in :attr:`handed`, for the loop to record once the round is over. (The
        loop is here, not in a generator of its own this one delegates to: every
        generator in the chain is resumed once per forwarded event.)
        """
        run_ctx, sink, handed = self.run_ctx, self.sink, self.handed
        try:
            # The round's only call may hand its forwarding run over, to be iterated
            # here (toolcalls.Handover) — unless a timeout or the run's deadline is to
            # be kept meanwhile, which this generator could not do from inside the
            # call's run. Allowed within this try, so the finally always refuses again.
            sink.take_inline(len(self.calls) == 1 and self.calls[0].due is None
                             and run_ctx.deadline is None)
            if not self._begun:
                self.start()
            while True:
                forwarded, closed = self.taken()
                open_calls = len(self.calls) - self._yielded
                if forwarded:
                    yield from forwarded
                if closed:
                    handed.extend(e for e in closed if e.kind is _TOOL_RESULT and not e.via)
                    yield from closed
                if open_calls <= 0:
                    return
                if run_ctx.cancelled.is_set():
                    log.debug("the run was cancelled with %d calls open", open_calls)
                    yield from self._handing(self.close_open("the run was cancelled",
                                                             verb="cancelled"))
                    raise Cancelled("the run was cancelled")
                now = self.clock()
                if run_ctx.deadline is not None and now >= run_ctx.deadline:
                    log.debug("the run's deadline passed with %d calls open", open_calls)
                    yield from self._handing(self.close_open("the run's deadline passed"))
                    run_ctx.check()
                if self._time_out(now):
                    self._dispatch()
                    continue
                handover = sink.offered()
                if handover is not None:
                    if run_ctx._hands_up:
                        # Up to the run's own generator, through the loop's in C, to be
                        # iterated and settled there (Agent._stream): each of its
                        # events then climbs one generator, not this one and the
                        # loop's three as well. It comes back here when it is done.
                        yield cast(Event, handover)
                        continue
                    # A plain loop, not ``yield from``: a consumer that stops reading
                    # leaves the run to the call's thread, not closed from here.
                    finished = False
                    try:
                        for event in handover.events:
                            yield event
                        finished = True
                    finally:
                        handover.settle(finished)
                    continue
                if not forwarded and not closed:
                    sink.wait(self._wait_for(now), run_ctx.cancelled)
        finally:
            sink.take_inline(False)
            for call in self.calls:
                if call.started is None:  # closed before it ran: stop listening to the run
                    call.ctx.release()

    def start(self) -> None:
        """Start the calls given so far (those of unknown tools close at once)."""
        self._begun = True
        for call in self.calls:
            self._begin(call)
        self._dispatch()

    def _admit(self, call: Call) -> None:
        """Give ``call`` its timeout and context and its place: in the exclusive chain,
        or among the waiting calls."""
        timeout = self._timeout
        own = getattr(call.tool, "call_timeout", None)
        call.timeout = own if timeout is None else timeout if own is None else min(own, timeout)
        call.asked = asked = self.clock()
        call.due = asked + call.timeout if call.timeout is not None else None
        call.ctx = self.run_ctx.tool(call.call.id, call.index, call.call.name,
                                     timeout=call.timeout, asked=asked)
        call.ctx.emit = self.sink.forward
        call.ctx.spend = self.sink.spend
        call.ctx.policy = self.sink
        call.ctx._offer = self.sink.offer
        with self._lock:
            self.calls.append(call)
            if call.tool is None:
                return
            if getattr(call.tool, "exclusive", False):
                self.chain.append(call)
                if self._chain_at == len(self.chain) - 1:  # the chain is free: its turn
                    self._waiting.append(call)
            else:
                self._waiting.append(call)

    def _begin(self, call: Call) -> None:
        if call.tool is None:
            run_tool(None, call.call, call.index, self.sink, call.ctx)
            call.ctx.release()

    def _handing(self, events: Iterator[Event]) -> Iterator[Event]:
        """``events``, keeping the results among them in :attr:`handed`."""
        for event in events:
            if event.kind is _TOOL_RESULT and not event.via:
                self.handed.append(event)
            yield event

    def close_open(self, reason: str, *, verb: str = "stopped") -> Iterator[Event]:
        """Close every open call because of ``reason`` (a call that never started as
        discarded), tell it to stop, and yield the results that land."""
        now = self.clock()
        for call in self.calls:
            call.ctx.cancelled.set()
            if call.started is None:
                event = closing(call.call, call.index,
                                f"not run: {reason} before this call started", discarded=True)
            else:
                event = closing(call.call, call.index,
                                f"{verb}: {reason} before this call finished", now - call.started)
            self.sink.report(event)
        with self._lock:
            self._waiting.clear()
        yield from self.landed()

    def cancel_all(self) -> None:
        """Tell every call to stop, and start no more (the run is over)."""
        with self._lock:
            self._waiting.clear()
        for call in self.calls:
            call.ctx.cancelled.set()

    # -- internals --------------------------------------------------------------

    def _wait_for(self, now: float) -> float:
        soonest = _LONGEST_WAIT
        dues = [c.due for c in self.calls
                if c.due is not None and not self.sink.is_closed(c.call.id)]
        for due in dues + [self.run_ctx.deadline]:
            if due is not None:
                soonest = min(soonest, max(0.0, due - now))
        return soonest

    def _time_out(self, now: float) -> bool:
        """Close each open call whose time has passed, and let the calls after it go on
        as if it had finished; True if any was closed."""
        closed = False
        for call in self.calls:
            if call.due is None or now < call.due or self.sink.is_closed(call.call.id):
                continue
            message = f"timed out after {call.timeout:g} s"
            # The timeout bounds the model's wait, so that is what a timed-out call's
            # duration says: never less than the timeout it names.
            duration = now - call.asked if call.started is not None else 0.0
            if self.sink.report(closing(call.call, call.index, message, duration)):
                closed = True
                log.debug("call %s of %s %s%s", call.call.id, call.call.name, message,
                          "; its thread is abandoned and its late result will be dropped"
                          if call.started is not None else " before a slot was free")
                call.ctx.cancelled.set()
                with self._lock:
                    if call in self._waiting:
                        self._waiting.remove(call)
                    self._release(call)
        return closed

    def _dispatch(self) -> None:
        """Start waiting calls while slots are free, in the model's order, passing over
        a call whose tool already runs its ``max_concurrency`` calls."""
        starting = []
        with self._lock:
            held: Deque[Call] = collections.deque()
            while self._free > 0 and self._waiting:
                call = self._waiting.popleft()
                name, most = call.call.name, getattr(call.tool, "max_concurrency", None)
                if most is not None and self._running.get(name, 0) >= most:
                    held.append(call)
                    continue
                self._free -= 1
                self._holding.add(call.index)
                self._running[name] = self._running.get(name, 0) + 1
                starting.append(call)
            held.extend(self._waiting)
            self._waiting = held
        for call in starting:
            thread = threading.Thread(target=self._work, args=(call,), daemon=False,
                                      name=f"nacelle-tool-{call.call.name}")
            try:
                thread.start()
            except RuntimeError:  # no thread can be had (the interpreter is exiting)
                self.sink.report(closing(call.call, call.index,
                                         "not run: no thread could be started for this call",
                                         discarded=True))
                self._finished(call)

    def _work(self, call: Call) -> None:
        try:
            if self.sink.is_closed(call.call.id):
                return  # timed out or cancelled while it waited for a slot
            if call.ctx.cancelled.is_set():
                self.sink.report(closing(call.call, call.index, "cancelled: the run was "
                                         "cancelled before this call started", discarded=True))
                return
            call.started = self.clock()
            run_tool(call.tool, call.call, call.index, self.sink, call.ctx,
                     decided=call.decided, approved=call.approved)
        except BaseException as exc:  # noqa: BLE001 - a call must close even if a hook exits
            log.warning("call %s of %s failed outside the tool", call.call.id, call.call.name,
                        exc_info=True)
            duration = self.clock() - call.started if call.started is not None else 0.0
            self.sink.report(closing(call.call, call.index, f"{type(exc).__name__}: {exc}",
                                     duration))
        finally:
            self._finished(call)

    def _finished(self, call: Call) -> None:
        """Free the call's slot, move the exclusive chain on, start what can start."""
        call.ctx.release()
        with self._lock:
            self._release(call)
        self._dispatch()

    def _release(self, call: Call) -> None:
        """Free what ``call`` holds: its slot, its tool's count, its place in the chain.
        Called under the lock, once when it finishes and once more if it timed out
        first; the second time finds nothing left to free."""
        if call.index in self._holding:
            self._holding.discard(call.index)
            self._free += 1
            self._running[call.call.name] -= 1
        at = self._chain_at
        if at < len(self.chain) and self.chain[at] is call:
            self._chain_at = at + 1
            if at + 1 < len(self.chain):
                self._waiting.append(self.chain[at + 1])
