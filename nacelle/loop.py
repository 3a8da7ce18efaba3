"""The one tool loop: turns, iterations, the executor, pairing, usage, the conversation.

Entry point for backends — every backend's ``stream(request, ctx)`` is one line::

    def stream(self, request, ctx):
        return nacelle.loop.run(request, ctx, self._turn, backend=self.name)

``run(request, ctx, turn, *, backend)`` calls ``turn(request, messages, ctx)`` (a
:data:`~nacelle.backend.TurnFunction`) once per model request and owns the rest:

- Event order. A turn's deltas pass through as they arrive (THINKING only when
  ``request.thinking.show``); once the turn has ended cleanly, one TOOL_CALL per
  finished local call in index order, then TURN (that turn's usage and stop); then
  the TOOL_RESULTs as the tools finish, each drained batch sorted by index; then the
  next turn; last, DONE with the total usage, the final stop and the conversation.
- Every TOOL_CALL is closed by exactly one TOOL_RESULT: unknown tools, invalid
  input, refusals, hook denies, timeouts, cancellation and the iteration cap all
  close the call with a failure the model can read. ``ToolSink`` enforces "exactly
  one": a second report for a call (a timed-out tool answering late) is dropped and
  logged.
- A turn's calls run in a ThreadPoolExecutor, ``max_parallel_tools`` at a time. All
  calls of exclusive tools in a turn form one chain that runs one call at a time in
  the model's order, alongside the other calls (writers and commands must not
  interleave with each other; a read the model asked for in the same turn is
  independent by the model's own account). A timed-out call releases the chain.
- ``tool_timeout`` counts from the moment a call starts; when it passes the call is
  closed as failed, its ``ctx.cancelled`` set, and whatever it returns later dropped.
- ``max_iterations`` = N allows N model requests; when the Nth still asks for tools
  those calls are closed as discarded, answered in the conversation with failed
  results saying they were not run, and the run ends with ``Stop.ITERATIONS``. A turn
  that stops at MAX_TOKENS is handled the same way and ends the run with that stop.
  An unfinished call (``finished=False``) gets no event and never runs.
- A ``TurnEnd(resume=True)`` (a provider pause) is recorded and followed at once by
  another turn; it counts as an iteration and may not carry local calls.
- Every assistant message recorded ends with ``Finish(stop)``; after a tool round,
  one user message holds every ToolResult in call order.

Cancellation: when ``ctx`` is cancelled the loop closes the open calls as cancelled,
yields those results and raises ``Cancelled``; an error out of a turn while ``ctx``
is cancelled (the transport's response was closed under it) becomes ``Cancelled``
too. On any exit — exhaustion, an error, ``close()``, KeyboardInterrupt — running
tools have their ``cancelled`` set and the executor is shut down without waiting.
The loop never cancels ``ctx`` itself: the context belongs to whoever made it (the
Agent, or ``Retry`` restarting a run).

Per-event cost is kept flat: deltas are passed on without copying, and the
conversation is a list appended to, turned into a tuple once per turn (the turn
function's contract), so a run's cost grows linearly with its conversation.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set,
)

from .backend import Request, RunContext, TurnEnd, TurnFunction
from .errors import Cancelled, StreamError
from .events import Event, Kind, Stop, ToolEvent, Usage
from .hooks import HookEvent, HookPoint, cut_inject, normalize_hooks, run_after, run_before
from .messages import Finish, Message, Role, ToolCall, ToolResult
from .tools import ToolContext, parse_input, result_text, tools_by_name

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["ToolSink", "run", "run_tool"]

log = logging.getLogger(__name__)

_TEXT, _THINKING, _TOOL_CALL = Kind.TEXT, Kind.THINKING, Kind.TOOL_CALL
_TOOL_RESULT, _TURN, _DONE = Kind.TOOL_RESULT, Kind.TURN, Kind.DONE

# The longest the generator sleeps between looks at its tools; results and
# cancellation wake it sooner. A bound, so a lost wake-up can cost at most this.
_POLL = 0.5


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
                 hooks: Optional[Mapping[Any, Sequence[Callable]]] = None) -> None:
        if approve is not None and not callable(approve):
            raise TypeError(f"approve must be callable, got {type(approve).__name__}")
        self.approve = approve
        self.hooks = normalize_hooks(hooks)
        self.before = self.hooks.get(HookPoint.BEFORE_TOOL_CALL, ())
        self.after = self.hooks.get(HookPoint.AFTER_TOOL_CALL, ())
        self._ready = threading.Condition(threading.Lock())
        self._events: List[Event] = []
        self._closed: Set[str] = set()
        self._denied: Set[str] = set()
        self._denied_lock = threading.Lock()

    def for_round(self) -> "ToolSink":
        """A sink for the next round of calls: the same policy and the same memory of
        denied tool names, with results of its own."""
        child = ToolSink(self.approve)
        child.hooks, child.before, child.after = self.hooks, self.before, self.after
        child._denied, child._denied_lock = self._denied, self._denied_lock
        return child

    def __repr__(self) -> str:
        return f"<ToolSink {len(self._events)} waiting, {len(self._closed)} closed>"

    def report(self, event: Event) -> bool:
        """Record a TOOL_RESULT; False (and logged) when its call was already closed."""
        with self._ready:
            call_id = event.tool.id
            if call_id in self._closed:
                log.debug("dropped a late result for call %s (%s): it was already closed",
                          call_id, event.tool.name)
                return False
            self._closed.add(call_id)
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
        with self._denied_lock:
            return name in self._denied

    def note_denied(self, name: str) -> None:
        with self._denied_lock:
            self._denied.add(name)


def _by_index(event: Event) -> int:
    return event.tool.index


def run_tool(tool: Any, call: ToolCall, index: int, sink: ToolSink, ctx: ToolContext) -> ToolResult:
    """Run one local call — the only place one runs — and report its TOOL_RESULT.

    In order: parse and validate the input (a failure is the result; no hook or
    approval is asked), before-hooks, approval, the tool, after-hooks. ``tool`` None
    means the model named a tool that does not exist. Returns the ToolResult the
    conversation records; the event reported to ``sink`` carries the same text.
    """
    started = time.monotonic()
    name = call.name
    result = ""
    error: Optional[str] = None
    refused = False
    injects = []
    arguments: Dict[str, Any] = {}
    if tool is None:
        error = f"there is no tool named {name!r}; call one of the tools you were given"
    else:
        try:
            arguments = parse_input(call.input)
        except ValueError as exc:
            error = f"{exc}. Call {name} again with a JSON object as input."
        else:
            from .validation import compile_schema  # on first use: most imports run no tool

            problem = compile_schema(tool.schema)(arguments)
            if problem:
                error = f"invalid input for {name}: {problem}. Correct the input and call again."
    if error is None:
        if sink.before:
            deny, inject = run_before(
                sink.before, HookEvent(HookPoint.BEFORE_TOOL_CALL, name, call.input,
                                       retry=sink.was_denied(name)))
            if deny:
                sink.note_denied(name)
                error = deny
            elif inject:
                injects.append(inject)
        if error is None and sink.approve is not None and not _approved(sink.approve, call, ctx):
            refused = True
            error = f"the user did not approve this call of {name}; do not retry it unchanged"
        if error is None and ctx.cancelled.is_set():
            error = "cancelled: the run was cancelled before this call started"
        if error is None:
            try:
                answer = tool.run(arguments, ctx)
                result = answer if isinstance(answer, str) else result_text(answer)
            except Cancelled as exc:
                error = f"cancelled: {exc}"
            except Exception as exc:  # noqa: BLE001 - a tool failure is the model's to read
                log.debug("tool %s raised", name, exc_info=True)
                error = str(exc) or type(exc).__name__
            if sink.after:
                deny, inject = run_after(
                    sink.after, HookEvent(HookPoint.AFTER_TOOL_CALL, name, call.input,
                                          result=result, error=error,
                                          retry=sink.was_denied(name)))
                if deny:
                    error, result = deny, ""
                elif inject:
                    injects.append(inject)
    if injects:
        extra = cut_inject("\n".join(injects))
        if error is not None:
            error = f"{error}\n\n{extra}"
        else:
            result = f"{result}\n\n{extra}" if result else extra
    event = ToolEvent(call.id, index, name, call.input, result=result, error=error,
                      duration=time.monotonic() - started, refused=refused)
    sink.report(Event(_TOOL_RESULT, tool=event))
    return _as_result(event)


def _approved(approve: Callable[..., Any], call: ToolCall, ctx: ToolContext) -> bool:
    try:
        # A fresh parse: approve may keep or change its dict without touching the tool's.
        return bool(approve(call.name, parse_input(call.input), ctx))
    except Exception:  # noqa: BLE001 - a crashed approval is not a yes
        log.warning("approve failed on %s; the call is refused", call.name, exc_info=True)
        return False


def _as_result(event: ToolEvent) -> ToolResult:
    failed = event.error is not None
    return ToolResult(event.id, event.name, event.error if failed else event.result, failed)


def _closing(call: ToolCall, index: int, error: str, started: Optional[float] = None,
             *, discarded: bool = False) -> Event:
    duration = time.monotonic() - started if started is not None else 0.0
    return Event(_TOOL_RESULT, tool=ToolEvent(call.id, index, call.name, call.input, error=error,
                                              duration=duration, discarded=discarded))


class _Call:
    """One local call in flight."""

    __slots__ = ("call", "index", "tool", "ctx", "started")

    def __init__(self, call: ToolCall, index: int, tool: Any) -> None:
        self.call = call
        self.index = index
        self.tool = tool
        self.ctx = ToolContext(call.id, index, call.name)
        self.started: Optional[float] = None


class _Round:
    """One turn's calls: submitting them, the exclusive chain, timeouts, cancellation."""

    def __init__(self, calls: List[_Call], sink: ToolSink, pool: ThreadPoolExecutor,
                 run_cancelled: threading.Event, timeout: Optional[float]) -> None:
        self.calls = calls
        self.sink = sink
        self.pool = pool
        self.run_cancelled = run_cancelled
        self.timeout = timeout
        self.chain = [c for c in calls if c.tool is not None and getattr(c.tool, "exclusive", False)]
        self.chain_lock = threading.Lock()
        self.chain_at = 0

    def start(self) -> None:
        for call in self.calls:
            if call.tool is None:
                run_tool(None, call.call, call.index, self.sink, call.ctx)
            elif call not in self.chain:
                self._submit(call)
        if self.chain:
            self._submit(self.chain[0])

    def _submit(self, call: _Call) -> None:
        try:
            self.pool.submit(self._work, call)
        except RuntimeError:  # the pool was shut down: the run has ended
            call.ctx.cancelled.set()

    def _work(self, call: _Call) -> None:
        try:
            if call.ctx.cancelled.is_set() or self.run_cancelled.is_set():
                self.sink.report(_closing(call.call, call.index,
                                          "cancelled: the run was cancelled before this call started"))
                return
            call.started = time.monotonic()
            if self.timeout is not None:
                call.ctx.deadline = call.started + self.timeout
            run_tool(call.tool, call.call, call.index, self.sink, call.ctx)
        except BaseException as exc:  # noqa: BLE001 - a call must close even if a hook exits
            log.warning("call %s of %s failed outside the tool", call.call.id, call.call.name,
                        exc_info=True)
            self.sink.report(_closing(call.call, call.index, f"{type(exc).__name__}: {exc}",
                                      call.started))
        finally:
            self.advance(call)

    def advance(self, finished: _Call) -> None:
        """Start the next exclusive call once ``finished`` (the chain's head) is closed."""
        with self.chain_lock:
            at = self.chain_at
            if at >= len(self.chain) or self.chain[at] is not finished:
                return
            self.chain_at = at + 1
            following = self.chain[at + 1] if at + 1 < len(self.chain) else None
        if following is not None:
            self._submit(following)

    def expire(self, now: float) -> Optional[float]:
        """Close calls past their timeout; return seconds until the next one can expire."""
        if self.timeout is None:
            return None
        soonest = None
        for call in self.calls:
            if call.started is None or self.sink.is_closed(call.call.id):
                continue
            left = call.started + self.timeout - now
            if left > 0:
                soonest = left if soonest is None else min(soonest, left)
                continue
            message = f"timed out after {self.timeout:g} s"
            if self.sink.report(_closing(call.call, call.index, message, call.started)):
                log.debug("call %s of %s %s; its late result will be dropped",
                          call.call.id, call.call.name, message)
                call.ctx.cancelled.set()
                self.advance(call)
        return soonest

    def cancel_all(self, message: Optional[str] = None) -> None:
        """Tell every call to stop; with ``message``, close the open ones with it."""
        for call in self.calls:
            call.ctx.cancelled.set()
            if message is not None:
                self.sink.report(_closing(call.call, call.index, message, call.started))


def run(request: Request, ctx: RunContext, turn: TurnFunction, *,
        backend: str = "") -> Iterator[Event]:
    """Run ``request`` to DONE, asking ``turn`` for one model turn at a time.

    ``backend`` names the backend in errors. See the module docstring for the order
    of events and what the loop guarantees.
    """
    tools = tools_by_name(request.tools)
    sink = ToolSink(request.approve, request.hooks)
    show_thinking = request.thinking.show
    cap = request.max_iterations
    conversation: List[Message] = list(request.messages)
    total = Usage()
    iterations = 0
    pool: Optional[ThreadPoolExecutor] = None
    current: Optional[_Round] = None
    rounds = [sink]  # the sink of the round in progress is last; cancelling wakes it
    unregister = ctx.on_cancel(lambda: rounds[-1].wake())
    try:
        while True:
            ctx.check()
            iterations += 1
            end = yield from _one_turn(request, tuple(conversation), ctx, turn, backend, show_thinking)
            total += end.usage
            stop = end.stop
            calls = [p for p in end.parts if type(p) is ToolCall and p.finished]
            if end.resume and calls:
                # Refused before any TOOL_CALL is announced, so none is left unclosed.
                raise StreamError(f"backend {backend!r} paused a turn that asked for local "
                                  "tools; a paused turn cannot carry local calls")
            conversation.append(Message(Role.ASSISTANT, end.parts + (Finish(stop),)))
            for index, call in enumerate(calls):
                yield Event(_TOOL_CALL, tool=ToolEvent(call.id, index, call.name, call.input))
            yield Event(_TURN, usage=end.usage, stop=stop)
            capped = bool(cap) and iterations >= cap
            if end.resume:
                if capped:
                    final = Stop.ITERATIONS
                    break
                continue
            if not calls:
                final = stop
                break
            if stop is Stop.MAX_TOKENS or capped:
                if stop is Stop.MAX_TOKENS:
                    final = stop
                    reason = ("not run: the response was cut off at the output token limit "
                              "before these calls could run")
                else:
                    final = Stop.ITERATIONS
                    reason = (f"not run: the run reached its limit of {cap} model "
                              f"request{'s' if cap != 1 else ''}")
                closing = [_closing(c, i, reason, discarded=True) for i, c in enumerate(calls)]
                for event in closing:
                    yield event
                conversation.append(Message(Role.USER, tuple(_as_result(e.tool) for e in closing)))
                break
            if pool is None:
                # Imported here, not with the module: a run that calls no tool, and a
                # program that only imports nacelle, never pays for it.
                from concurrent.futures import ThreadPoolExecutor

                pool = ThreadPoolExecutor(max_workers=request.max_parallel_tools,
                                          thread_name_prefix="nacelle-tool")
            round_sink = sink.for_round()
            rounds.append(round_sink)
            current = _Round([_Call(c, i, tools.get(c.name)) for i, c in enumerate(calls)],
                             round_sink, pool, ctx.cancelled, request.tool_timeout)
            results = yield from _tool_round(current, round_sink, ctx)
            rounds[:] = [sink]
            current = None
            conversation.append(Message(Role.USER, tuple(results[c.id] for c in calls)))
        yield Event(_DONE, usage=total, stop=final, messages=tuple(conversation))
    finally:
        unregister()
        if current is not None:
            current.cancel_all()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _one_turn(request: Request, messages: tuple, ctx: RunContext, turn: TurnFunction,
              backend: str, show_thinking: bool) -> Iterator[Event]:
    """Yield one turn's deltas; return its TurnEnd."""
    stream = turn(request, messages, ctx)
    try:
        for item in stream:
            if type(item) is Event:
                if item.kind is _THINKING and not show_thinking:
                    continue
                yield item
            elif type(item) is TurnEnd:
                return item
            else:
                raise StreamError(f"backend {backend!r} yielded {type(item).__name__} from a "
                                  "turn; a turn yields Event values, then one TurnEnd")
    except Exception as exc:
        if ctx.cancelled.is_set() and not isinstance(exc, Cancelled):
            # The transport's response was closed under a blocked read: that is the
            # cancellation arriving, not a network failure.
            raise Cancelled("the run was cancelled") from exc
        raise
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    raise StreamError(f"backend {backend!r} ended a turn without its TurnEnd")


def _tool_round(current: _Round, sink: ToolSink, ctx: RunContext) -> Iterator[Event]:
    """Run a turn's calls and yield their results as they land; return them by id."""
    results: Dict[str, ToolResult] = {}
    waiting = len(current.calls)
    current.start()
    while True:
        batch = sink.drain()
        for event in batch:
            results[event.tool.id] = _as_result(event.tool)
            waiting -= 1
            yield event
        if waiting <= 0:
            return results
        if ctx.cancelled.is_set():
            log.debug("the run was cancelled with %d calls open", waiting)
            current.cancel_all("cancelled: the run was cancelled before this call finished")
            for event in sink.drain():
                yield event
            raise Cancelled("the run was cancelled")
        soonest = current.expire(time.monotonic())
        if soonest is None or soonest > _POLL:
            soonest = _POLL
        if not batch:
            sink.wait(soonest, ctx.cancelled)
