"""Running one turn's local tool calls: ``run_tool``, ``ToolSink`` and the round.

:func:`run_tool` is the one place a local call runs. :class:`ToolSink` is the run's
tool policy (approval, hooks) and the locked hand-off of TOOL_RESULT events from the
tool threads to the generator. :class:`Round` runs one turn's calls:

- Each call runs on a thread of its own, at most ``max_parallel_tools`` at a time;
  the rest wait in the model's order. All calls of exclusive tools in a turn form one
  chain that runs one call at a time in the model's order, alongside the other calls
  (writers and commands must not interleave with each other; a read the model asked
  for in the same turn is independent by the model's own account).
- ``tool_timeout`` counts from the moment the model asked for the call, whether it
  was running or still waiting for a free slot: it bounds how long the model waits
  for the answer. When it passes, the call is closed as failed and its
  ``ctx.cancelled`` is set.
- A call that ignores cancellation is *abandoned*, never waited for: its result is
  closed already, so whatever it returns later is dropped (and logged at DEBUG), and
  its thread no longer counts against ``max_parallel_tools`` — the calls after it, in
  this turn or the next, start as if it had finished. The abandoned thread runs on
  until the tool returns; like any non-daemon thread, the interpreter waits for it at
  exit. (A fixed thread pool cannot do this: a wedged worker would hold its slot, and
  every call queued behind it would wait with no timeout running.)
- The round's context is a child of the run's (:meth:`RunContext.tool`): a call's
  deadline is the earlier of its timeout and the run's deadline, its clock the run's,
  so a run's budget bounds its tools and tests drive timeouts with a fake clock.

The generator waits on the sink's condition; a result, the run's cancellation (a
callback) or the next timeout wakes it. The wait is capped at half a second, so a
fake clock moved by a test — which signals nobody — is seen within that bound.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable, Deque, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

from .checkpoint import PAUSE
from .context import RunContext, ToolContext
from .errors import Cancelled
from .events import Event, Kind, ToolEvent
from .hooks import HookEvent, HookPoint, cut_inject, normalize_hooks, run_after, run_before
from .messages import ToolCall, ToolResult
from .observe import new_span
from .tools import parse_input, result_text

__all__ = ["ToolSink", "run_tool"]

log = logging.getLogger(__name__)

_TOOL_RESULT = Kind.TOOL_RESULT

# The longest the generator waits between looks at its calls; results, cancellation
# and the next timeout wake it sooner. A bound, so a clock that moves without
# signalling (a test's fake clock) is noticed within it.
_LONGEST_WAIT = 0.5


class _DeniedNames:
    """The tool names a hook denied in this run, shared by every round's sink."""

    def __init__(self) -> None:
        self._names: Set[str] = set()
        self._lock = threading.Lock()

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._names

    def add(self, name: str) -> None:
        with self._lock:
            self._names.add(name)


class ToolSink:
    """The run's tool policy and the locked hand-off from tool threads to the generator.

    ``report(event)`` records a TOOL_RESULT (only the first per call id counts; it
    returns False for a late duplicate), ``drain()`` takes what has landed, sorted by
    index. The sink also remembers which tool names a hook denied in this run, for
    ``HookEvent.retry``.

    The loop gives each round of calls its own sink (:meth:`for_round`): providers
    may reuse a call id in a later turn ("call_0" every turn), and a timed-out call
    from an earlier round that answers late must land where nobody reads it, not
    close the new call that happens to share its id.
    """

    def __init__(self, approve: Optional[Callable[..., Any]] = None,
                 hooks: Optional[Mapping[Any, Sequence[Callable[..., Any]]]] = None,
                 *, _denied: Optional[_DeniedNames] = None) -> None:
        if approve is not None and not callable(approve):
            raise TypeError(f"approve must be callable, got {type(approve).__name__}")
        self.approve = approve
        self.hooks = normalize_hooks(hooks)
        self.before = self.hooks.get(HookPoint.BEFORE_TOOL_CALL, ())
        self.after = self.hooks.get(HookPoint.AFTER_TOOL_CALL, ())
        self._ready = threading.Condition(threading.Lock())
        self._events: List[Event] = []
        self._closed: Set[str] = set()
        self._denied = _denied if _denied is not None else _DeniedNames()
        # Calls whose approval paused them, by id: the before-hooks' injects.
        self.paused: Dict[str, Tuple[str, ...]] = {}

    def for_round(self) -> "ToolSink":
        """A sink for the next round of calls: the same policy and the same memory of
        denied tool names, with results of its own."""
        return ToolSink(self.approve, self.hooks, _denied=self._denied)

    def __repr__(self) -> str:
        return f"<ToolSink {len(self._events)} waiting, {len(self._closed)} closed>"

    def report(self, event: Event) -> bool:
        """Record a TOOL_RESULT; False (and logged) when its call was already closed."""
        tool = event.tool
        assert tool is not None
        with self._ready:
            if tool.id in self._closed:
                log.debug("dropped a late result for call %s (%s): it was already closed",
                          tool.id, tool.name)
                return False
            self._closed.add(tool.id)
            self._events.append(event)
            self._ready.notify_all()
        return True

    def drain(self) -> List[Event]:
        """Take every result that has landed, sorted by index."""
        with self._ready:
            events, self._events = self._events, []
        events.sort(key=_by_index)
        return events

    def wait(self, timeout: Optional[float], cancelled: Optional[threading.Event] = None) -> None:
        """Block until a result lands, ``cancelled`` is set, or ``timeout`` passes."""
        with self._ready:
            if not self._events and not (cancelled is not None and cancelled.is_set()):
                self._ready.wait(timeout)

    def wake(self) -> None:
        """Wake a waiting generator (the run was cancelled)."""
        with self._ready:
            self._ready.notify_all()

    def is_closed(self, call_id: str) -> bool:
        with self._ready:
            return call_id in self._closed

    def was_denied(self, name: str) -> bool:
        return name in self._denied

    def note_denied(self, name: str) -> None:
        self._denied.add(name)


def _by_index(event: Event) -> int:
    return event.tool.index if event.tool is not None else 0


def run_tool(tool: Any, call: ToolCall, index: int, sink: ToolSink, ctx: ToolContext, *,
             decided: Optional[Sequence[str]] = None, approved: bool = False) -> ToolResult:
    """Run one local call — the only place one runs — and report its TOOL_RESULT.

    In order: parse and validate the input (a failure is the result; no hook or
    approval is asked), before-hooks, approval, the tool, after-hooks. ``tool`` None
    means the model named a tool that does not exist. Returns the ToolResult the
    conversation records; the event reported to ``sink`` carries the same text.

    ``approve`` answers True (run), False or a reason str (refused; the reason is what
    the model reads) or ``nacelle.PAUSE``: the call is closed with ``paused=True``
    without running, and the before-hooks' injects are kept in ``sink.paused`` for
    the checkpoint. ``decided`` is given for a paused call a person approved on
    resume: those injects. Its before-hooks and approval were asked before the pause
    and are not asked again; the tool and the after-hooks run as for any call.
    ``approved`` marks a paused call a person approved with an edited input: that is
    a call nobody checked yet, so it is validated and its before-hooks are asked as
    for a fresh call (they may deny it); only approval is not asked, since the
    person's decision was it.

    With observers on ``ctx`` (``observe.py``) the call is one span: ``tool.start``
    before anything is asked, ``tool.end`` when its result is made (or when a hook
    raised out of it), both on the calling thread. ``tool.end`` names what kind of
    failure the model read (``error_type``): the class of the exception the tool
    raised, or one of the words in :data:`FAILURES`.
    """
    if getattr(ctx, "observer", None) is None:
        return _run_tool(tool, call, index, sink, ctx, decided, approved)[0]
    span = new_span()
    base = {"span": span, "id": call.id, "index": index, "name": call.name}
    clock = getattr(ctx, "clock", time.monotonic)
    # The call's duration counts from before tool.start is observed, so a span placed
    # at tool.start's time and lasting that long covers all the call reported.
    started = clock()
    ctx.observe("tool.start", **base, input=call.input,
                description=getattr(tool, "description", "") or "")
    try:
        result, event, error_type = _run_tool(tool, call, index, sink, ctx, decided, approved,
                                              started)
    except BaseException as exc:
        ctx.observe("tool.end", **base, duration=clock() - started, result="",
                    error=f"{type(exc).__name__}: {exc}", error_type=type(exc).__qualname__,
                    refused=False, paused=False)
        raise
    ctx.observe("tool.end", **base, duration=event.duration, result=event.result,
                error=event.error, error_type=error_type, refused=event.refused,
                paused=event.paused)
    return result


#: The ``error_type`` of a failed call that no exception of the tool's explains.
FAILURES = ("unknown_tool", "invalid_input", "hook_denied", "refused", "cancelled")


def _run_tool(tool: Any, call: ToolCall, index: int, sink: ToolSink, ctx: ToolContext,
              decided: Optional[Sequence[str]], approved: bool = False,
              started: Optional[float] = None,
              ) -> Tuple[ToolResult, ToolEvent, Optional[str]]:
    """The call's result, its event and the kind of failure (None when it ran well)."""
    clock = getattr(ctx, "clock", time.monotonic)
    started = clock() if started is None else started
    injects: List[str] = list(decided) if decided is not None else []
    refused = False
    result = ""
    arguments, error = _checked_input(tool, call)
    kind = None if error is None else "unknown_tool" if tool is None else "invalid_input"
    if error is None and decided is None:
        error = _ask_before(sink, call, injects)
        kind = None if error is None else "hook_denied"
        if error is None and sink.approve is not None and not approved:
            verdict = _approval(sink.approve, call, ctx)
            if verdict is PAUSE:
                sink.paused[call.id] = tuple(injects)
                event = ToolEvent(call.id, index, call.name, call.input, error=PAUSED_TEXT,
                                  duration=clock() - started, paused=True)
                sink.report(Event(_TOOL_RESULT, tool=event))
                return as_result(event), event, None
            if verdict is not True:
                refused, kind = True, "refused"
                error = (verdict if isinstance(verdict, str) and verdict else
                         f"the user did not approve this call of {call.name}; "
                         "do not retry it unchanged")
    if error is None and ctx.cancelled.is_set():
        error, kind = "cancelled: the run was cancelled before this call started", "cancelled"
    if error is None:
        result, error, kind = _invoke(tool, call.name, arguments, ctx)
        if error is None and ctx.cancelled.is_set():
            # Whatever a cancelled call returns was cut short (a wait that woke early),
            # so it closes as cancelled, as the generator would have closed it.
            result, error = "", "cancelled: the run was cancelled before this call finished"
            kind = "cancelled"
        result, error, denied = _ask_after(sink, call, result, error, injects)
        kind = "hook_denied" if denied else kind
    if injects:
        result, error = _with_injects(result, error, injects)
    event = ToolEvent(call.id, index, call.name, call.input, result=result, error=error,
                      duration=clock() - started, refused=refused)
    sink.report(Event(_TOOL_RESULT, tool=event))
    return as_result(event), event, kind


#: What the model reads for a paused call if the paused run's DONE conversation is
#: sent on as it is (instead of being resumed).
PAUSED_TEXT = "paused: this call is waiting for a person's approval and has not run"


def _checked_input(tool: Any, call: ToolCall) -> Tuple[Dict[str, Any], Optional[str]]:
    """The parsed, validated arguments, or the failure the model reads."""
    name = call.name
    if tool is None:
        return {}, f"there is no tool named {name!r}; call one of the tools you were given"
    try:
        arguments = parse_input(call.input)
    except ValueError as exc:
        return {}, f"{exc}. Call {name} again with a JSON object as input."
    from .validation import compile_schema  # on first use: most imports run no tool

    problem = compile_schema(tool.schema)(arguments)
    if problem:
        return arguments, f"invalid input for {name}: {problem}. Correct the input and call again."
    return arguments, None


def _ask_before(sink: ToolSink, call: ToolCall, injects: List[str]) -> Optional[str]:
    """Run the before-hooks: a deny (remembered for ``HookEvent.retry``) or None."""
    if not sink.before:
        return None
    deny, inject = run_before(sink.before, HookEvent(
        HookPoint.BEFORE_TOOL_CALL, call.name, call.input, retry=sink.was_denied(call.name)))
    if deny:
        sink.note_denied(call.name)
        return deny
    if inject:
        injects.append(inject)
    return None


def _approval(approve: Callable[..., Any], call: ToolCall, ctx: ToolContext) -> Any:
    """True, PAUSE, a refusal's reason str, or False for every other answer."""
    try:
        # A fresh parse: approve may keep or change its dict without touching the tool's.
        verdict = approve(call.name, parse_input(call.input), ctx)
    except Exception:  # noqa: BLE001 - a crashed approval is not a yes
        log.warning("approve failed on %s; the call is refused", call.name, exc_info=True)
        return False
    if verdict is PAUSE or isinstance(verdict, str):
        return verdict
    # A str is a refusal, so only an answer that is true and not text runs the call
    # (an approve written before reasons existed returned truthy values).
    return bool(verdict)


def _invoke(tool: Any, name: str, arguments: Dict[str, Any],
            ctx: ToolContext) -> Tuple[str, Optional[str], Optional[str]]:
    """The tool's answer, or the failure the model reads and the exception's class."""
    try:
        answer = tool.run(arguments, ctx)
        return (answer if isinstance(answer, str) else result_text(answer)), None, None
    except Cancelled as exc:
        return "", f"cancelled: {exc}", "cancelled"
    except Exception as exc:  # noqa: BLE001 - a tool failure is the model's to read
        log.debug("tool %s raised", name, exc_info=True)
        return "", str(exc) or type(exc).__name__, type(exc).__qualname__


def _ask_after(sink: ToolSink, call: ToolCall, result: str, error: Optional[str],
               injects: List[str]) -> Tuple[str, Optional[str], bool]:
    """Run the after-hooks: the result and error the model reads, and whether one denied."""
    if not sink.after:
        return result, error, False
    deny, inject = run_after(sink.after, HookEvent(
        HookPoint.AFTER_TOOL_CALL, call.name, call.input, result=result, error=error,
        retry=sink.was_denied(call.name)))
    if deny:
        return "", deny, True
    if inject:
        injects.append(inject)
    return result, error, False


def _with_injects(result: str, error: Optional[str], injects: List[str]) -> Tuple[str, Optional[str]]:
    extra = cut_inject("\n".join(injects))
    if error is not None:
        return result, f"{error}\n\n{extra}"
    return (f"{result}\n\n{extra}" if result else extra), None


def as_result(event: ToolEvent) -> ToolResult:
    """The ToolResult a TOOL_RESULT event records in the conversation."""
    if event.error is not None:
        return ToolResult(event.id, event.name, event.error, True)
    return ToolResult(event.id, event.name, event.result, False)


def closing(call: ToolCall, index: int, error: str, duration: float = 0.0,
            *, discarded: bool = False) -> Event:
    """A TOOL_RESULT that closes ``call`` with ``error`` without running it (further)."""
    return Event(_TOOL_RESULT, tool=ToolEvent(call.id, index, call.name, call.input, error=error,
                                              duration=duration, discarded=discarded))


class Call:
    """One local call of a round: the model's part, its tool, its context."""

    __slots__ = ("call", "index", "tool", "ctx", "started", "decided", "approved")

    def __init__(self, call: ToolCall, index: int, tool: Any,
                 decided: Optional[Sequence[str]] = None, approved: bool = False) -> None:
        self.call = call
        self.index = index
        self.tool = tool
        self.decided = decided  # run_tool's ``decided``: a resumed call's injects
        self.approved = approved  # run_tool's ``approved``: a resumed call, edited
        self.ctx = ToolContext(call.id, index, call.name)
        self.started: Optional[float] = None


class Round:
    """One turn's calls: slots, the exclusive chain, timeouts, the run's deadline and
    cancellation. See the module docstring."""

    def __init__(self, calls: List[Call], sink: ToolSink, ctx: RunContext,
                 timeout: Optional[float], max_parallel: int) -> None:
        self.calls = calls
        self.sink = sink
        self.run_ctx = ctx
        self.clock = ctx.clock
        self.timeout = timeout
        self.asked = ctx.clock()
        self.due = self.asked + timeout if timeout is not None else None
        for call in calls:
            call.ctx = ctx.tool(call.call.id, call.index, call.call.name, timeout=timeout,
                                asked=self.asked)
        self.chain = [c for c in calls if c.tool is not None and getattr(c.tool, "exclusive", False)]
        self._lock = threading.Lock()
        self._free = max_parallel
        self._holding: Set[int] = set()  # indexes of calls that hold a slot
        chained = {c.index for c in self.chain}
        self._waiting: Deque[Call] = collections.deque(
            c for c in calls if c.tool is not None and c.index not in chained)
        if self.chain:
            self._waiting.append(self.chain[0])
        self._chain_at = 0

    def results(self) -> Iterator[Event]:
        """Start the calls; yield their results as they land, until all are closed.

        On cancellation the open calls are closed as cancelled, those results yielded,
        and ``Cancelled`` raised; at the run's deadline likewise, raising the
        deadline's error.
        """
        for call in self.calls:
            if call.tool is None:
                run_tool(None, call.call, call.index, self.sink, call.ctx)
                call.ctx.release()
        self._dispatch()
        try:
            yield from self._until_closed()
        finally:
            for call in self.calls:
                if call.started is None:  # closed before it ran: stop listening to the run
                    call.ctx.release()

    def _until_closed(self) -> Iterator[Event]:
        open_calls = len(self.calls)
        run_ctx, sink = self.run_ctx, self.sink
        while True:
            batch = sink.drain()
            open_calls -= len(batch)
            yield from batch
            if open_calls <= 0:
                return
            if run_ctx.cancelled.is_set():
                log.debug("the run was cancelled with %d calls open", open_calls)
                yield from self.close_open("the run was cancelled", verb="cancelled")
                raise Cancelled("the run was cancelled")
            now = self.clock()
            if run_ctx.deadline is not None and now >= run_ctx.deadline:
                log.debug("the run's deadline passed with %d calls open", open_calls)
                yield from self.close_open("the run's deadline passed")
                run_ctx.check()
            if self.due is not None and now >= self.due:
                self._time_out(now)
                continue
            if not batch:
                sink.wait(self._wait_for(now), run_ctx.cancelled)

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
        yield from self.sink.drain()

    def cancel_all(self) -> None:
        """Tell every call to stop, and start no more (the run is over)."""
        with self._lock:
            self._waiting.clear()
        for call in self.calls:
            call.ctx.cancelled.set()

    # -- internals --------------------------------------------------------------

    def _wait_for(self, now: float) -> float:
        soonest = _LONGEST_WAIT
        for due in (self.due, self.run_ctx.deadline):
            if due is not None:
                soonest = min(soonest, max(0.0, due - now))
        return soonest

    def _time_out(self, now: float) -> None:
        """Close every open call: the round's timeout has passed (calls of one round are
        asked at once, so they are all due at once)."""
        message = f"timed out after {self.timeout:g} s"
        for call in self.calls:
            # The timeout bounds the model's wait, so that is what a timed-out call's
            # duration says: never less than the timeout it names.
            duration = now - self.asked if call.started is not None else 0.0
            if self.sink.report(closing(call.call, call.index, message, duration)):
                log.debug("call %s of %s %s%s", call.call.id, call.call.name, message,
                          "; its thread is abandoned and its late result will be dropped"
                          if call.started is not None else " before a slot was free")
                call.ctx.cancelled.set()
        with self._lock:
            self._waiting.clear()

    def _dispatch(self) -> None:
        """Start waiting calls while slots are free."""
        starting = []
        with self._lock:
            while self._free > 0 and self._waiting:
                call = self._waiting.popleft()
                self._free -= 1
                self._holding.add(call.index)
                starting.append(call)
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
            if call.index in self._holding:
                self._holding.discard(call.index)
                self._free += 1
            at = self._chain_at
            if at < len(self.chain) and self.chain[at] is call:
                self._chain_at = at + 1
                if at + 1 < len(self.chain):
                    self._waiting.append(self.chain[at + 1])
        self._dispatch()
