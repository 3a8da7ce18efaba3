"""The one tool loop: turns, iterations, budgets, pairing, usage, the conversation.

The Agent runs it; no backend does. ``run(request, ctx, turn, *, settings,
backend)`` calls ``turn(request, messages, ctx)`` (a backend's ``turn``, a
:data:`~nacelle.backend.TurnFunction`) once per model request and owns the rest, as
``settings`` (:class:`RunSettings`, the run's policy) say:

- Event order. A turn's deltas pass through as they arrive (THINKING only when
  ``request.thinking.show``); once the turn has ended cleanly, one TOOL_CALL per
  finished local call in index order, then TURN (that turn's usage and stop); then
  the TOOL_RESULTs as the tools finish, each drained batch sorted by index; then the
  next turn; last, DONE with the total usage, the final stop and the conversation.
- Every TOOL_CALL is closed by exactly one TOOL_RESULT: unknown tools, invalid
  input, refusals, hook denies, timeouts, cancellation, the budget and the iteration
  cap all close the call with a failure the model can read. ``ToolSink`` enforces
  "exactly one": a second report for a call (a timed-out tool answering late) is
  dropped and logged.
- Two calls of one turn sharing an id are given unique ids before they are announced
  or recorded (``toolcalls.unique_call_ids``).
- The calls run on their own threads (``tools.py``'s :func:`run_tool` in
  ``toolcalls.py``), ``max_parallel_tools`` at a time; see :class:`~nacelle.toolround.Round`
  for exclusive chains, timeouts and what happens to a call that ignores
  cancellation.
- ``settings.max_iterations`` = N allows N model requests; when the Nth still asks for tools
  those calls are closed as discarded, answered in the conversation with failed
  results saying they were not run, and the run ends with ``Stop.ITERATIONS``. A turn
  that stops at MAX_TOKENS is handled the same way and ends the run with that stop,
  as is a turn that leaves the run past its :class:`~nacelle.context.Budget`
  (``Stop.BUDGET``). An unfinished call (``finished=False``) gets no event and never
  runs.
- ``Budget.seconds`` is the run's deadline: a turn cut by it is dropped (it
  announced no call), running tools are closed as stopped, and the run ends with DONE
  and ``Stop.BUDGET`` — the conversation is as of the last whole turn.
- Approval may return ``nacelle.PAUSE`` (``checkpoint.py``): the round's other calls
  run, the paused ones are closed with ``paused=True``, and the run ends with DONE,
  ``Stop.PAUSED`` and ``checkpoint`` (DONE's conversation answers the paused calls
  with failed results saying so, to stay valid). A run with ``resume`` (from
  ``Agent.resume``) starts from the checkpoint's counts and closes the paused round
  first: the pending calls are announced again, the refused ones closed, the
  approved ones run without their before-hooks or approval being asked again (an
  edited input is a new call: the loop guard counts it, and it is validated and
  passes the before-hooks as any call does), and the round's earlier results
  recorded as they were — then the next model turn.
- A running call may forward events of its own (a sub-agent's, ``ctx.emit``; they
  carry ``via``): they pass through in the round as they come and close nothing. What
  a call spent on model requests of its own (``ctx.spend``) is added to the run's
  usage when its round ends, so the total, the budget and a checkpoint count it. A
  call that paused from inside (``checkpoint.NestedPause``) is paused as an approval
  would pause it, its pending entry carrying the nested checkpoint; on resume it runs
  again with ``ctx.resumed`` set to go on with the nested run.
- A toolset among the Agent's tools (``client.tools(live=True)`` from ``nacelle.mcp``)
  is asked for its tools before every model turn after the first: a server whose list
  changed offers the new list at the next turn.
- A ``TurnEnd(resume=True)`` (a provider pause) is recorded and followed at once by
  another turn; it counts as an iteration and may not carry local calls.
- Every assistant message recorded ends with ``Finish(stop)``; after a tool round,
  one user message holds every ToolResult in call order.
- Structured output (``request.output``, see ``output.py``): a turn that ends the run
  with ``Stop.END`` has its text read as the answer. A valid one is DONE's
  ``output``; an invalid one is answered with a user message naming what was wrong
  and the run goes on, up to ``output.retries`` times, then ends with
  ``Stop.INVALID_OUTPUT`` (the invalid answer kept as the last assistant message). Any
  other stop — MAX_TOKENS, REFUSAL — ends the run as it is, with no output: a cut
  answer is never half-read. In tool mode a call of the final-answer tool is read
  before the turn's other calls: valid, it ends the run with END, closed with a
  successful result and the others as discarded; invalid, its failed result says why
  (that is the retry) while the others run as usual. The budget and the iteration cap
  still apply between retries.

Cancellation: when ``ctx`` is cancelled the loop closes the open calls as cancelled,
yields those results and raises ``Cancelled``; an error out of a turn while ``ctx``
is cancelled (the transport's response was closed under it) becomes ``Cancelled``
too. A deadline of the caller's context that is not the run's own budget closes the
open calls the same way and raises that deadline's error. On any exit — exhaustion, an
error, ``close()``, KeyboardInterrupt — running tools have their ``cancelled`` set.
The loop never cancels ``ctx`` itself: the context belongs to whoever made it (the
Agent).

Per-event cost is kept flat: deltas are passed on without copying, and the
conversation is a list appended to, turned into a tuple once per turn (the turn
function's contract), so a run's cost grows linearly with its conversation.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Callable, Dict, Generator, Iterator, List, Mapping, Optional,
                    Sequence, Set, Tuple)

from ._loggers import get_logger
from .backend import Request, TurnEnd, TurnFunction
from ._pause import Repeats, fingerprint
from .context import Budget, RunContext
from .errors import Cancelled, StreamError
from .events import Event, Kind, Stop, ToolEvent, Usage
from .messages import Finish, Message, Role, Text, ToolCall, ToolResult
from .toolcalls import ToolSink, as_result, closing, unique_call_ids
from .toolround import Call, Round
from .tools import expand_tools, tools_by_name

if TYPE_CHECKING:
    # Annotations only: the checkpoint module is loaded when a run pauses or resumes,
    # compaction with the Compaction a run is given.
    from .checkpoint import Checkpoint, Resume
    from .compaction import Compacted

__all__ = ["RunSettings", "run"]

log = get_logger(__name__)

_TEXT, _THINKING, _TOOL_CALL = Kind.TEXT, Kind.THINKING, Kind.TOOL_CALL
_TOOL_RESULT, _TURN, _DONE = Kind.TOOL_RESULT, Kind.TURN, Kind.DONE


class _OutOfTime(Cancelled):
    """The run's own ``Budget.seconds`` passed: the loop ends the run with
    ``Stop.BUDGET``. Never escapes :func:`run`."""


@dataclass(frozen=True)
class RunSettings:
    """The loop's own policy for one run, built by the Agent: nothing here reaches a
    provider, so none of it is in the :class:`~nacelle.backend.Request` a turn gets.

    ``max_iterations`` caps model requests (0: no cap); ``approve`` and ``hooks`` are
    asked about each call; ``max_parallel_tools`` calls run at once, each for at most
    ``tool_timeout`` seconds; a longer result than ``max_result_chars`` reaches the
    model cut (``toolcalls.py``). ``budget`` bounds the run; ``resume`` (a
    ``checkpoint.Resume``, from ``Agent.resume`` only) closes a paused round before the
    first turn and continues its counts; ``compaction`` is a ``nacelle.Compaction``;
    ``loop_guard`` is how many identical calls a run may make before they are refused
    (0: no guard); ``toolsets`` are the Agent's tools as given when any is a toolset,
    asked again before each model turn after the first; ``eager_tools`` starts a call
    while its turn still streams (see :class:`_Eager`).
    """

    max_iterations: int = 0
    approve: Optional[Callable[..., Any]] = None
    hooks: Optional[Mapping[Any, Sequence[Callable[..., Any]]]] = None
    max_parallel_tools: int = 8
    tool_timeout: Optional[float] = None
    max_result_chars: int = 100_000
    budget: Optional[Budget] = None
    resume: Optional[Resume] = None
    compaction: Optional[Any] = None
    loop_guard: int = 0
    toolsets: Tuple[Any, ...] = ()
    eager_tools: bool = False


def run(request: Request, ctx: RunContext, turn: TurnFunction, *,
        settings: RunSettings = RunSettings(), backend: str = "") -> Iterator[Event]:
    """Run ``request`` to DONE under ``settings``, asking ``turn`` for one model turn
    at a time, starting from ``request.messages``.

    ``backend`` names the backend in errors. See the module docstring for the order
    of events and what the loop guarantees.
    """
    return _Run(request, ctx, turn, settings, backend).events()


class _Run:
    """One run's state: the conversation, the usage, the iteration and call counts."""

    def __init__(self, request: Request, ctx: RunContext, turn: TurnFunction,
                 settings: RunSettings, backend: str) -> None:
        self.request = request
        self.settings = settings
        self.budget = settings.budget or Budget()
        if self.budget.seconds is not None:
            ctx = ctx.child(ctx.clock() + self.budget.seconds, _OutOfTime)
        self.ctx = ctx
        self.turn = turn
        self.backend = backend
        self.tools = tools_by_name(request.tools)
        self.sink = ToolSink(settings.approve, settings.hooks,
                             max_result_chars=settings.max_result_chars, _policy_only=True)
        self.conversation: List[Message] = list(request.messages)
        self.total = Usage()
        self.iterations = 0
        self.calls_run = 0
        self.current: Optional[Round] = None
        # Server-side calls announced and not yet answered, by id: a provider that
        # paused mid-call answers in a later turn, and a run that ends first closes them.
        self.server_open: Dict[str, ToolEvent] = {}
        self.output = request.output  # a nacelle.output.Output, or None
        self.value: Any = None  # the run's structured answer, once read
        self.invalid = 0  # invalid answers sent back so far
        self.checkpoint: Optional[Checkpoint] = None  # set when the run pauses
        self.resume: Optional[Resume] = settings.resume
        self.compaction = settings.compaction  # a nacelle.Compaction, or None
        self.compact_next = False  # the last turn's input passed the threshold
        self.repeats = Repeats()  # calls per tool and canonical input, for the guard
        # Resumed calls that go on with a nested run (a sub-agent's pause), for the
        # next round's sink: id -> (nested checkpoint, its decisions).
        self.resuming: Dict[str, Tuple[Checkpoint, Any]] = {}
        self.eager: Optional[_Eager] = None  # the calls started while this turn streams
        if self.resume is not None:
            paused = self.resume.checkpoint
            self.total = paused.usage
            self.iterations = paused.iterations
            self.calls_run = paused.tool_calls
            self.repeats = Repeats(paused.repeats)

    def events(self) -> Iterator[Event]:
        unregister = self.ctx.on_cancel(self._wake)
        try:
            final: Optional[Stop] = None
            if self.resume is not None:
                final = yield from self._resumed_round(self.resume)
            if final is None:
                final = yield from self._turns()
            yield from self._close_server_calls()
            yield Event(_DONE, usage=self.total, stop=final, messages=tuple(self.conversation),
                        output=self.value, checkpoint=self.checkpoint)
        finally:
            unregister()
            if self.current is not None:
                self.current.cancel_all()

    def _wake(self) -> None:
        current = self.current
        if current is not None:
            current.sink.wake()

    def _turns(self) -> Generator[Event, None, Stop]:
        """Yield every turn and tool round; return the run's final stop."""
        cap = self.settings.max_iterations
        while True:
            self.ctx.check()
            self.iterations += 1
            if self.settings.toolsets and self.iterations > 1:
                self._refresh_tools()
            try:
                if self.compact_next:
                    self.compact_next = False
                    yield from self._compact("threshold")
                # Without compaction a turn is just the turn: one generator fewer
                # between each delta and the consumer.
                end = yield from (self._one_turn() if self.compaction is None
                                  else self._turn_with_room())
            except _OutOfTime:
                log.debug("the run's time budget ran out during turn %d", self.iterations)
                return Stop.BUDGET
            calls = yield from self._record(end)
            self._note_input(end.usage)
            capped = bool(cap) and self.iterations >= cap
            if end.resume:
                if capped:
                    return Stop.ITERATIONS
                continue
            if not calls:
                if self.output is None or end.stop is not Stop.END:
                    return end.stop
                answered = self._read_answer(end, capped)
                if answered is not None:
                    return answered
                continue
            settled: Dict[str, Event] = {}
            if (self.output is not None and self.output.tool is not None
                    and end.stop is not Stop.MAX_TOKENS):
                answered, settled = self._final_answer(calls)
                if answered is not None:
                    yield from self._close_unrun(calls, (
                        "not run: the final answer ended the run" if answered is Stop.END
                        else "not run: the run ended without a valid final answer"), settled)
                    return answered
            eager = self.eager
            started = eager.started if eager is not None else frozenset()
            refusal = self._not_to_run(end.stop, capped, len(calls)) or self._guard(
                calls, settled, only={c.id for c in calls} - started if started else None)
            if refusal is not None:
                stop, reason = refusal
                if not started:
                    yield from self._close_unrun(calls, reason, settled)
                    return stop
                # The calls already running finish; the rest are closed unrun.
                for index, call in enumerate(calls):
                    if call.id not in started:
                        settled.setdefault(call.id, closing(call, index, reason, discarded=True))
                stopped = yield from self._tool_round(calls, settled)
                return stop if stopped is None else stopped  # a pause keeps its checkpoint
            stopped = yield from self._tool_round(calls, settled)
            if stopped is not None:
                return stopped

    def _refresh_tools(self) -> None:
        """Ask the run's toolsets for their tools of now (a server's list may have
        changed since the last turn); a list that is no longer valid (two tools of one
        name, say) keeps the last one, logged."""
        request = self.request
        extra = (self.output.tool,) if self.output is not None and self.output.tool else ()
        try:
            tools = expand_tools(self.settings.toolsets) + extra
            by_name = tools_by_name(tools)
        except Exception:  # noqa: BLE001 - a toolset's failure must not end the run
            log.warning("a toolset could not list its tools; the last list stays",
                        exc_info=True)
            return
        if _signature(tools) != _signature(request.tools):
            self.request = dataclasses.replace(request, tools=tools)
            self.tools = by_name

    def _turn_with_room(self) -> Generator[Event, None, TurnEnd]:
        """One turn; with compaction, a turn the provider refused or cut because the
        context is full is asked once more of the compacted conversation."""
        if self.compaction is None:
            return (yield from self._one_turn())
        try:
            end = yield from self._one_turn()
        except Exception as exc:
            # Loaded with the Compaction the run was given, not with the core.
            from .compaction import is_context_overflow
            if self.ctx.cancelled.is_set() or not is_context_overflow(exc):
                raise
            log.debug("the provider said the context is full (%s); compacting", exc)
            if not (yield from self._compact("context")):
                raise
            return (yield from self._one_turn())
        if end.stop is Stop.CONTEXT and not end.resume and not (self.eager and self.eager.calls):
            # The cut turn is dropped (its deltas were streamed; its usage is billed)
            # and asked again once there is room.
            if (yield from self._compact("context")):
                self.total += end.usage
                return (yield from self._one_turn())
        return end

    def _note_input(self, usage: Usage) -> None:
        """Compact before the next request when this turn's input passed the threshold."""
        compaction = self.compaction
        if compaction is not None and (usage.input_tokens + usage.cache_read_tokens
                                       + usage.cache_creation_tokens) > compaction.threshold:
            self.compact_next = True

    def _compact(self, reason: str) -> Generator[Event, None, bool]:
        """Shorten the conversation with the run's strategy; True when it did."""
        compaction = self.compaction
        assert compaction is not None
        done: Optional[Compacted] = compaction.strategy(
            tuple(self.conversation), request=self.request, ctx=self.ctx, turn=self.turn)
        if done is None or not done.removed:
            log.debug("compaction (%s) found nothing to remove", reason)
            return False
        self.conversation = list(done.messages)
        self.total += done.usage
        self.ctx.observe("compaction", strategy=done.strategy, reason=reason,
                         removed=done.removed, tokens=done.tokens, summary=done.summary)
        yield Event(Kind.COMPACTION, text=done.summary, usage=done.usage, compaction=done)
        return True

    def _guard(self, calls: Sequence[ToolCall], settled: Dict[str, Event],
               only: Optional[Set[str]] = None) -> Optional[Tuple[Stop, str]]:
        """Count the turn's calls (those ``only``, when given) per tool and canonical
        input: from the guard's Nth one on, a call is refused (into ``settled``); at
        twice N the run ends."""
        guard = self.settings.loop_guard
        if not guard:
            return None
        for index, call in enumerate(calls):
            if call.id in settled or (only is not None and call.id not in only):
                continue
            seen = self.repeats.add(call.name, call.input)
            if seen >= 2 * guard:
                return Stop.LOOP, (f"not run: the run stopped because {call.name} was called "
                                   f"{seen} times with the same input")
            if seen >= guard:
                settled[call.id] = Event(_TOOL_RESULT, tool=ToolEvent(
                    call.id, index, call.name, call.input, refused=True, error=(
                        f"refused: this is call {seen} of {call.name} with exactly this "
                        "input in this run; you are repeating yourself. Use the results "
                        "you already have, or change the input or the approach.")))
        return None

    def _one_turn(self) -> Generator[Event, None, TurnEnd]:
        """Yield one turn's deltas (and, with eager tools, the calls started meanwhile
        and the results landed); return its TurnEnd."""
        ctx, backend = self.ctx, self.backend
        show_thinking = self.request.thinking.show
        eager = self._eager_for_turn()
        stream = self.turn(self.request, tuple(self.conversation), ctx)
        try:
            for item in stream:
                if type(item) is Event:
                    kind = item.kind
                    if kind is _THINKING and not show_thinking:
                        continue
                    if kind is _TOOL_CALL or kind is _TOOL_RESULT:
                        if item.tool is not None and not item.tool.server:
                            # A local call whose input is whole: started now when eager,
                            # else announced with the turn's other calls once it ends.
                            if eager is not None and kind is _TOOL_CALL:
                                yield from self._start_eagerly(eager, item.tool)
                            continue
                        self._note_server_call(item)
                    yield item
                    if eager is not None and eager.round is not None:
                        yield from eager.landed()
                elif type(item) is TurnEnd:
                    return item
                else:
                    raise StreamError(f"backend {backend!r} yielded {type(item).__name__} from "
                                      "a turn; a turn yields Event values, then one TurnEnd")
        except BaseException as exc:
            if eager is not None and eager.round is not None:
                # Every call started is closed before the failure leaves the run.
                yield from eager.close(exc)
            if (isinstance(exc, Exception) and ctx.cancelled.is_set()
                    and not isinstance(exc, Cancelled)):
                # The transport's response was closed under a blocked read: that is the
                # cancellation arriving, not a network failure.
                raise Cancelled("the run was cancelled") from exc
            raise
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        raise StreamError(f"backend {backend!r} ended a turn without its TurnEnd")

    def _eager_for_turn(self) -> Optional[_Eager]:
        """The eager starts of the next turn, or None when its calls wait for its end:
        eager tools off, the last model request the run allows (its calls are not
        run), or a final-answer tool (the final answer decides which calls run)."""
        self.eager = None
        settings = self.settings
        if not settings.eager_tools:
            return None
        cap = settings.max_iterations
        if (cap and self.iterations >= cap) or (self.output is not None
                                                and self.output.tool is not None):
            return None
        self.eager = _Eager()
        return self.eager

    def _start_eagerly(self, eager: _Eager, tool: ToolEvent) -> Iterator[Event]:
        """Start a call whose input is whole while the turn streams on; announce it.

        A call that could not run as the turn's end would have it — a repeated id
        (renamed at the end), a tool-call budget it would pass, a loop guard that would
        refuse it — is left for the end of the turn, as is every call after it (the
        model's order is kept)."""
        index = len(eager.calls)
        if eager.stopped or tool.id in eager.ids or tool.index != index:
            eager.stopped = True
            return
        budget = self.budget.tool_calls
        if budget is not None and self.calls_run + index + 1 > budget:
            eager.stopped = True
            return
        call = ToolCall(tool.id, tool.name, tool.input)
        guard = self.settings.loop_guard
        if guard and self.repeats.add(call.name, call.input, unless=guard) >= guard:
            eager.stopped = True
            return
        eager.ids.add(call.id)
        eager.calls.append(call)
        if eager.round is None:
            eager.round = Round([], self.sink.for_round(), self.ctx, self.settings.tool_timeout,
                                self.settings.max_parallel_tools)
            # A sub-agent started now is held to what the budget left before this turn.
            eager.round.sink.budget_left = _budget_left(self.budget, self.total,
                                                        self.calls_run)
            eager.round.start()
            self.current = eager.round
        yield Event(_TOOL_CALL, tool=ToolEvent(call.id, index, call.name, call.input))
        eager.round.add(Call(call, index, self.tools.get(call.name)))

    def _note_server_call(self, event: Event) -> None:
        tool = event.tool
        if tool is None or not tool.server:
            return
        if event.kind is _TOOL_CALL:
            self.server_open[tool.id] = tool
        else:
            self.server_open.pop(tool.id, None)

    def _close_server_calls(self) -> Iterator[Event]:
        """Close the server-side calls the run ends with unanswered (a paused turn
        at the iteration cap), so every TOOL_CALL a consumer saw has its result."""
        for tool in self.server_open.values():
            yield Event(_TOOL_RESULT, tool=ToolEvent(
                tool.id, tool.index, tool.name, tool.input, server=tool.server,
                error="not finished: the run ended before the server answered this call"))
        self.server_open.clear()

    def _record(self, end: TurnEnd) -> Generator[Event, None, List[ToolCall]]:
        """Record the turn's message, announce its local calls and the TURN; return the
        calls to run."""
        self.total += end.usage
        parts = unique_call_ids(end.parts)
        calls = [p for p in parts if isinstance(p, ToolCall) and p.finished]
        if end.resume and calls:
            # Refused before any TOOL_CALL is announced, so none is left unclosed (but
            # those started early, closed here).
            if self.eager is not None and self.eager.round is not None:
                yield from self.eager.close(None)
            raise StreamError(f"backend {self.backend!r} paused a turn that asked for local "
                              "tools; a paused turn cannot carry local calls")
        eager = self.eager
        started = eager.calls if eager is not None else []
        if started and [(c.id, c.name, c.input) for c in calls[:len(started)]] != [
                (c.id, c.name, c.input) for c in started]:
            assert eager is not None
            yield from eager.close(None)
            raise StreamError(f"backend {self.backend!r} announced tool calls during the turn "
                              "that its end does not hold as they were announced")
        self.conversation.append(Message(Role.ASSISTANT, parts + (Finish(end.stop),)))
        for index, call in enumerate(calls[len(started):], len(started)):
            yield Event(_TOOL_CALL, tool=ToolEvent(call.id, index, call.name, call.input))
        yield Event(_TURN, usage=end.usage, stop=end.stop)
        return calls

    def _not_to_run(self, stop: Stop, capped: bool, count: int) -> Optional[Tuple[Stop, str]]:
        """Why this turn's calls are not run, and the run's stop; None to run them."""
        if stop is Stop.MAX_TOKENS:
            return stop, ("not run: the response was cut off at the output token limit "
                          "before these calls could run")
        spent = _budget_spent(self.budget, self.total, self.calls_run + count)
        if spent:
            return Stop.BUDGET, f"not run: the run's budget of {spent} was spent"
        if capped:
            cap = self.settings.max_iterations
            return Stop.ITERATIONS, (f"not run: the run reached its limit of {cap} model "
                                     f"request{'s' if cap != 1 else ''}")
        return None

    def _close_unrun(self, calls: Sequence[ToolCall], reason: str,
                     settled: Optional[Dict[str, Event]] = None) -> Iterator[Event]:
        """Close every call not already ``settled`` (closed by id) as discarded."""
        settled = settled or {}
        events = [settled.get(c.id) or closing(c, i, reason, discarded=True)
                  for i, c in enumerate(calls)]
        yield from events
        self.conversation.append(Message(Role.USER, tuple(as_result(_tool(e)) for e in events)))

    def _read_answer(self, end: TurnEnd, capped: bool) -> Optional[Stop]:
        """Read a final text answer: the run's stop, or None after sending it back."""
        output = self.output
        assert output is not None
        text = "".join(p.text for p in end.parts if type(p) is Text)
        value, error = output.read_text(text)
        if error is None:
            self.value = value
            return Stop.END
        log.debug("structured answer %d was invalid: %s", self.invalid + 1, error)
        if self.invalid >= output.retries:
            return Stop.INVALID_OUTPUT
        if capped:
            return Stop.ITERATIONS
        if _budget_spent(self.budget, self.total, self.calls_run):
            return Stop.BUDGET
        self.invalid += 1
        self.conversation.append(Message(Role.USER, (Text(output.retry_text(error)),)))
        return None

    def _final_answer(self, calls: Sequence[ToolCall]) -> Tuple[Optional[Stop], Dict[str, Event]]:
        """Read a tool-mode turn's final-answer call, if it has one: the run's stop (None
        to go on) and the calls it closed, by id."""
        output = self.output
        assert output is not None and output.tool is not None
        name = output.tool.name
        finals = [(i, c) for i, c in enumerate(calls) if c.name == name]
        if not finals:
            return None, {}
        (index, call), extra = finals[0], finals[1:]
        settled = {c.id: closing(c, i, f"not run: only the first {name} call of a turn is "
                                 "read", discarded=True) for i, c in extra}
        value, error = output.read_input(call.input)
        if error is None:
            self.value = value
            settled[call.id] = Event(_TOOL_RESULT, tool=ToolEvent(
                call.id, index, call.name, call.input, result="Final answer received."))
            return Stop.END, settled
        log.debug("final answer %d was invalid: %s", self.invalid + 1, error)
        settled[call.id] = closing(call, index, f"{error}. Call {name} again with the "
                                   "corrected answer.")
        if self.invalid >= output.retries:
            return Stop.INVALID_OUTPUT, settled
        self.invalid += 1
        return None, settled

    def _tool_round(self, calls: Sequence[ToolCall],
                    settled: Optional[Dict[str, Event]] = None, *,
                    known: Optional[Dict[str, ToolResult]] = None,
                    decided: Optional[Dict[str, Tuple[str, ...]]] = None,
                    edited: Optional[Set[str]] = None,
                    ) -> Generator[Event, None, Optional[Stop]]:
        """Run a turn's calls (but those already ``settled``, whose results come first,
        and those ``known`` from before a pause, which are not run or yielded again),
        yield their results as they land and record them. ``decided`` marks resumed
        calls (id → the before-hooks' injects) and ``edited`` the ids of resumed calls
        a person approved with another input (see ``run_tool``).

        Returns None to go on, ``Stop.BUDGET`` when the run's time budget ran out
        during the round, ``Stop.PAUSED`` when approval paused a call (the checkpoint
        is then ``self.checkpoint``)."""
        settled = settled or {}
        results: Dict[str, ToolResult] = dict(known or {})
        paused: List[ToolCall] = []
        eager, self.eager = self.eager, None
        if eager is not None:
            # Results of eagerly started calls that landed while the turn streamed were
            # yielded then; they are recorded here.
            for event in eager.results:
                tool = _tool(event)
                results[tool.id] = as_result(tool)
                if tool.paused:
                    paused.append(next(c for c in calls if c.id == tool.id))
        for event in settled.values():
            results[_tool(event).id] = as_result(_tool(event))
            yield event
        if known is None:
            self.calls_run += len(calls)
        request = self.request
        decided, edited = decided or {}, edited or set()
        fresh = [Call(c, i, self.tools.get(c.name), decided.get(c.id), c.id in edited)
                 for i, c in enumerate(calls)
                 if c.id not in settled and c.id not in results
                 and (eager is None or c.id not in eager.started)]
        if eager is not None and eager.round is not None:
            current = eager.round
            for call in fresh:
                current.add(call)
            sink = current.sink
        else:
            sink = self.sink.for_round()
            current = Round(fresh, sink, self.ctx, self.settings.tool_timeout,
                            self.settings.max_parallel_tools)
        sink.resuming, self.resuming = self.resuming, {}
        sink.budget_left = _budget_left(self.budget, self.total, self.calls_run)
        self.current = current
        out_of_time = False
        try:
            # A sub-agent's forwarded events (tens of thousands) pass through here in C;
            # the round keeps the results it yielded, recorded below.
            yield from current.results()
        except _OutOfTime:
            # The round closed its open calls (and yielded them) before raising.
            out_of_time = True
        for event in current.handed:
            tool = _tool(event)
            results[tool.id] = as_result(tool)
            if tool.paused:
                paused.append(next(c for c in calls if c.id == tool.id))
        # Left as it is on any other exit, so the run's clean-up tells its calls to stop.
        self.current = None
        self.total += sink.spent  # the calls' own model requests (sub-agents') count too
        if paused and not out_of_time:
            # The checkpoint's conversation ends with the assistant message; DONE's
            # carries the round's results too (paused ones as failed, saying so), so it
            # stays a valid conversation for a caller who sends it on without resuming.
            from .checkpoint import Checkpoint, PendingCall  # a run that pauses only

            ids = {c.id for c in paused}
            paused = [c for c in calls if c.id in ids]  # the model's order, not landing order
            self.checkpoint = Checkpoint(
                messages=tuple(self.conversation),
                results=tuple(results[c.id] for c in calls if c.id not in ids),
                pending=tuple(PendingCall(c.id, c.name, c.input, fingerprint(c.name, c.input),
                                          sink.paused.get(c.id, ()), sink.nested.get(c.id))
                              for c in paused),
                usage=self.total, iterations=self.iterations, tool_calls=self.calls_run,
                tools=tuple(t.name for t in request.tools),
                repeats=self.repeats.items())
            self.ctx.observe("pause", pending=tuple(c.id for c in paused))
        self.conversation.append(Message(Role.USER, tuple(results[c.id] for c in calls)))
        if out_of_time:
            return Stop.BUDGET
        return Stop.PAUSED if paused else None

    def _resumed_round(self, resume: Resume) -> Generator[Event, None, Optional[Stop]]:
        """Close a paused round as decided: re-announce the pending calls, refuse the
        denied ones, run the approved ones, record the round. Returns the run's stop,
        or None to go on. Hooks and approval were asked about the paused input, so a
        call approved as it was is not asked again; an edited one is a call no hook has
        seen (were it let through, whoever posts a decision could run what a hook
        denies): the guard counts it, and ``run_tool`` validates it and asks its hooks."""
        paused = resume.checkpoint
        assistant = self.conversation[-1]
        calls = [p for p in assistant.parts if isinstance(p, ToolCall) and p.finished]
        pending = {p.id: p for p in paused.pending}
        settled: Dict[str, Event] = {}
        decided: Dict[str, Tuple[str, ...]] = {}
        for index, call in enumerate(calls):
            if call.id not in pending:
                continue
            yield Event(_TOOL_CALL, tool=ToolEvent(call.id, index, call.name, call.input))
            verdict = resume.decisions[call.id]
            if verdict is not True:
                settled[call.id] = Event(_TOOL_RESULT, tool=ToolEvent(
                    call.id, index, call.name, call.input, refused=True, error=str(verdict)))
            elif fingerprint(call.name, call.input) == pending[call.id].fingerprint:
                decided[call.id] = pending[call.id].inject
                child = pending[call.id].child
                if child is not None:
                    self.resuming[call.id] = (child, resume.nested.get(call.id, {}))
        edited = set(pending) - set(settled) - set(decided)
        known = {r.id: r for r in paused.results}
        looping = self._guard(calls, settled, only=edited)
        if looping is not None:
            for index, call in enumerate(calls):
                if call.id in pending:
                    settled.setdefault(call.id, closing(call, index, looping[1], discarded=True))
            yield from self._tool_round(calls, settled, known=known)
            return looping[0]
        return (yield from self._tool_round(calls, settled, known=known, decided=decided,
                                            edited=edited))


class _Eager:
    """The calls of one turn started while it streams (``Agent(eager_tools=True)``).

    ``calls`` are started in the model's order, each the moment the backend said its
    input was whole; ``round`` runs them (and, once the turn ends, the turn's other
    calls); ``results`` are the TOOL_RESULTs already yielded while the turn streamed.
    ``stopped`` is set by the first call that had to wait for the turn's end: no call
    after it starts early either, so the model's order holds.
    """

    __slots__ = ("calls", "ids", "round", "results", "stopped")

    def __init__(self) -> None:
        self.calls: List[ToolCall] = []
        self.ids: Set[str] = set()
        self.round: Optional[Round] = None
        self.results: List[Event] = []
        self.stopped = False

    @property
    def started(self) -> Set[str]:
        return self.ids

    def landed(self) -> Iterator[Event]:
        """Yield what the started calls have made so far (results, forwarded events)."""
        assert self.round is not None
        forwarded, closed = self.round.taken()
        yield from forwarded
        self.results.extend(e for e in closed if e.kind is _TOOL_RESULT and not e.via)
        yield from closed

    def close(self, exc: Optional[BaseException]) -> Iterator[Event]:
        """The turn failed after calls started: stop them and yield a result for each
        still open, so every TOOL_CALL announced is closed before the error leaves."""
        assert self.round is not None
        yield from self.landed()
        if isinstance(exc, _OutOfTime):
            reason, verb = "the run's time budget ran out", "stopped"
        elif isinstance(exc, Cancelled):
            reason, verb = "the run was cancelled", "cancelled"
        else:
            reason, verb = "the model's turn failed", "stopped"
        for event in self.round.close_open(reason, verb=verb):
            self.results.append(event)
            yield event
        self.round.cancel_all()


def _tool(event: Event) -> ToolEvent:
    """The ToolEvent of a TOOL_CALL or TOOL_RESULT event (which always carry one)."""
    assert event.tool is not None
    return event.tool


def _signature(tools: Sequence[Any]) -> List[Tuple[str, str, str]]:
    """What a model sees of a tool list; a toolset makes new tool objects each time it
    is asked, so the list is compared by this rather than by identity."""
    return [(t.name, t.description, repr(t.schema)) for t in tools]


def _budget_left(budget: Budget, total: Usage, calls: int) -> Optional[Budget]:
    """What ``budget`` leaves after ``total`` and ``calls`` (None: no limit but time,
    which reaches a call as its deadline). A call running a model of its own (a
    sub-agent) is held to it; what it spends counts here when its round ends."""
    if budget.tokens is None and budget.cost is None and budget.tool_calls is None:
        return None
    return Budget(
        tokens=None if budget.tokens is None else max(0, budget.tokens - total.total),
        # A Budget's cost is positive: a spent one leaves the least there is.
        cost=None if budget.cost is None else max(budget.cost - total.cost, 1e-12),
        tool_calls=None if budget.tool_calls is None else max(0, budget.tool_calls - calls))


def _budget_spent(budget: Budget, total: Usage, calls: int) -> str:
    """Which limit of ``budget`` the run has passed ('' for none): checked when a turn
    ends, counting the calls that turn asks for."""
    if budget.tokens is not None and total.total > budget.tokens:
        return f"{budget.tokens:,} tokens"
    if budget.cost is not None and total.cost > budget.cost:
        return f"${budget.cost:g}"
    if budget.tool_calls is not None and calls > budget.tool_calls:
        return f"{budget.tool_calls} tool calls"
    return ""
