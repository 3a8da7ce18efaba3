"""Running one local tool call: ``run_tool`` and ``ToolSink``.

:func:`run_tool` is the one place a local call runs. :class:`ToolSink` is the run's
tool policy (approval, hooks, the result cap) and the locked hand-off of TOOL_RESULT
events from the tool threads to the generator. A turn's calls run on their threads
in :class:`nacelle.toolround.Round`.

A result longer than the tool's ``max_result_chars``, else the Agent's (100,000 by
default; 0 never cuts), is cut with a note saying how much was cut: a 5 MB log read
whole would fill the model's context with one answer and cost the run for every turn
after it, and the model can ask for the part it needs.

A tool that returns media (``tools.tool_output``) closes its call with the parts in
``ToolEvent.content`` / ``ToolResult.content`` and their text in ``result``: the cut,
the after-hooks and the hooks' injects apply to that text, and the parts' Text is
kept equal to it (a cut Text part, an inject as a Text part at the end); images and
documents pass through as they are, their size already capped where they were made.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import threading
import time
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple,
)

from ._loggers import get_logger
from ._pause import PAUSE, NestedPause
from .context import Budget, ToolContext, new_span
from .errors import Cancelled
from .events import Event, Kind, ToolEvent, Usage
from .messages import Part, Text, ToolCall, ToolMedia, ToolResult, well_formed
from .tools import parse_input, tool_output

if TYPE_CHECKING:
    from .checkpoint import Checkpoint  # loaded when a run pauses, not with the core

__all__ = ["Handover", "ToolSink", "run_tool", "unique_call_ids"]

log = get_logger(__name__)

_TOOL_RESULT = Kind.TOOL_RESULT


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


class Handover:
    """A forwarding run a call hands to the round's generator, which iterates it on
    the consumer's own thread (:meth:`ToolSink.offer`).

    A forwarding sub-agent run on its call's thread passes each of its events to the
    consumer's thread: a copy made on one core and read on another, and the two
    threads taking turns on the interpreter lock at every read of the child's
    stream — half as much CPU again as the child's run alone. When the call is its
    round's only one, the round's generator has nothing else to do while it waits,
    so it iterates the child's (tagged) events itself and yields them as it goes;
    the call's thread waits, then makes the call's result as always.

    The round's generator takes it; in an Agent's run it yields it up to the run's
    own generator, which iterates it (``RunContext._hands_up``), else it iterates it
    itself. ``events`` is iterated by one thread at a time: the generator, from when
    it takes the handover until it settles it (:meth:`settle`) — ``finished`` when it
    ran ``events`` to their end, else handed back, and the call's thread iterates
    the rest itself. The generator settles it however it leaves, so the call's
    thread never waits for a stream nobody reads any more; nor for one whose reading
    thread is gone — a stream left open when its thread ended, or at the
    interpreter's exit (:meth:`wait`).
    """

    __slots__ = ("events", "finished", "reader", "_settled")

    def __init__(self, events: Iterator[Event]) -> None:
        self.events = events
        self.finished = False
        #: The thread reading the run's stream: the one that took the handover, or
        #: before that the one waiting for the round's results.
        self.reader: Optional[threading.Thread] = None
        self._settled = threading.Event()

    def settle(self, finished: bool) -> None:
        """The generator is done with ``events``: run to their end, or handed back."""
        self.finished = finished
        self._settled.set()

    def wait(self) -> bool:
        """Wait until the generator settles this; True when it ran ``events`` to their
        end, False when the caller is to iterate the rest.

        Raises ``Cancelled`` once the thread reading the stream has ended with the
        handover still held (the main thread counts as ended once the interpreter
        is exiting): a stream left open so is read by nobody, and a call's thread is
        not a daemon (the interpreter waits for it), so waiting on would hang the
        exit. A reading thread that is alive may be slow, or may have set the
        stream aside for now: it is waited for, as a call's thread that kept
        forwarding would be. ``events`` is then left alone: nothing can tell it
        will not be read again, and two threads must never iterate it at once."""
        while not self._settled.wait(_LOOK):
            reader = self.reader
            if reader is not None and not reader.is_alive():
                raise Cancelled("the thread reading the run's stream ended with it open")
        return self.finished


#: How often a call's thread waiting on a :class:`Handover` looks whether the thread
#: reading the stream is still alive.
_LOOK = 0.25


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
                 *, max_result_chars: int = 0, _denied: Optional[_DeniedNames] = None,
                 _policy_only: bool = False) -> None:
        if approve is not None and not callable(approve):
            raise TypeError(f"approve must be callable, got {type(approve).__name__}")
        self.approve = approve
        self.max_result_chars = max_result_chars  # the run's cap (0: none); see run_tool
        self.hooks: Dict[Any, Tuple[Callable[..., Any], ...]] = {}
        self.before: Tuple[Callable[..., Any], ...] = ()
        self.after: Tuple[Callable[..., Any], ...] = ()
        if hooks is not None:  # the hooks module is loaded for a run that has hooks
            from .hooks import HookPoint, normalize_hooks

            self.hooks = dict(normalize_hooks(hooks))
            self.before = self.hooks.get(HookPoint.BEFORE_TOOL_CALL, ())
            self.after = self.hooks.get(HookPoint.AFTER_TOOL_CALL, ())
        self._denied = _denied if _denied is not None else _DeniedNames()
        if _policy_only:
            # The run's own sink only hands its policy to each round's (for_round):
            # a run that calls no tool then allocates no lock, condition, lists and
            # dicts it never uses (a dozen objects the collector would track per run).
            return
        self._ready = threading.Condition(threading.Lock())
        self._events: List[Event] = []
        # Events that close no call (see forward): appended and taken without the lock.
        self._forwarded: List[Event] = []
        self._sleeping = False  # the generator waits for a wake-up (see forward)
        # A forwarding run handed over to be iterated on the generator's thread, and
        # whether the generator takes one now (see offer).
        self._offered: Optional[Handover] = None
        self._inline = False
        self._reader: Optional[threading.Thread] = None
        self._closed: Set[str] = set()
        # Calls whose approval paused them, by id: the before-hooks' injects.
        self.paused: Dict[str, Tuple[str, ...]] = {}
        # Paused calls whose pause came from inside (a sub-agent's approval), by id:
        # the nested run's checkpoint, which the run's checkpoint carries.
        self.nested: Dict[str, Checkpoint] = {}
        # Resumed calls that go on with a nested run, by id: (checkpoint, decisions),
        # handed to the call as ``ctx.resumed``.
        self.resuming: Dict[str, Tuple[Checkpoint, Any]] = {}
        self._spent = Usage()
        # What the run may still spend as the round starts, for each call's ctx.budget.
        self.budget_left: Optional[Budget] = None

    def for_round(self) -> "ToolSink":
        """A sink for the next round of calls: the same policy and the same memory of
        denied tool names, with results of its own."""
        return ToolSink(self.approve, self.hooks or None, max_result_chars=self.max_result_chars,
                        _denied=self._denied)

    def __repr__(self) -> str:
        if not hasattr(self, "_ready"):
            return "<ToolSink policy>"
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

    def forward(self, event: Event) -> None:
        """Pass on an event a running call made that closes nothing (a sub-agent's,
        forwarded): the generator yields it with the next batch, ahead of that batch's
        results and in the order forwarded.

        A forwarded event says which call it came through (``via``): that is how the
        round and the loop tell it from a result of their own, so one without is a
        ValueError raised to the tool that forwarded it.

        A sub-agent forwards every event of its run, so this is on the path of each
        (tens of thousands a run): the event is appended without taking the lock —
        ``list.append``, and the slice and ``del`` of a slice :meth:`take` uses, are
        each atomic in CPython
        (https://docs.python.org/3/faq/library.html#what-kinds-of-global-value-mutation-are-thread-safe)
        — and the generator is notified only when it waits, once: ``wait`` sets
        ``_sleeping`` (under the lock) before it looks at the list, and this looks at
        ``_sleeping`` after appending, so one of the two always sees the other and no
        event is left waiting for a wake-up that does not come; the first event after
        the generator went to sleep clears it and notifies. Notifying on every event
        until the woken generator runs again (which takes the GIL's switch interval,
        5 ms, while this thread holds it) cost more than the rest of forwarding."""
        if not isinstance(event, Event) or not event.via:
            raise ValueError("a forwarded event must be an Event whose via names the call "
                             "it came through")
        self._forwarded.append(event)
        if self._sleeping:
            with self._ready:
                if self._sleeping:
                    # Once: the events forwarded until the generator runs again need
                    # no wake-up of their own (nor the lock the woken waiter takes).
                    self._sleeping = False
                    self._ready.notify_all()

    def offer(self, handover: Handover) -> bool:
        """Hand a call's forwarding run to the generator, to iterate on its own thread
        (:class:`Handover`); False when it does not take one now — the call is not
        its round's only one, the round has a timeout or deadline to keep while the
        call runs, or the generator is not waiting for the round's results — and
        the caller iterates the run itself."""
        with self._ready:
            if not self._inline or self._offered is not None:
                return False
            handover.reader = self._reader
            self._offered = handover
            self._ready.notify_all()
        return True

    def take_inline(self, allowed: bool) -> None:
        """Whether the generator takes a handover now (:meth:`offer`). Refused from
        now on, one offered and not yet taken is handed back."""
        with self._ready:
            self._inline = allowed
            self._reader = threading.current_thread() if allowed else None
            offered = None if allowed else self._offered
            if offered is not None:
                self._offered = None
        if offered is not None:
            offered.settle(False)

    def offered(self) -> Optional[Handover]:
        """The handover offered since last asked, taken (None when there is none)."""
        if self._offered is None:
            return None
        with self._ready:
            offered, self._offered = self._offered, None
        if offered is not None:
            offered.reader = threading.current_thread()
        return offered

    def spend(self, usage: Usage) -> None:
        """Add what a running call spent on model requests of its own (a sub-agent's
        run) to :attr:`spent`, which the loop adds to the run's usage."""
        if not isinstance(usage, Usage):
            raise TypeError(f"spend takes a nacelle.Usage, got {type(usage).__name__}")
        with self._ready:
            self._spent = self._spent + usage

    @property
    def spent(self) -> Usage:
        """What the round's calls spent on model requests of their own so far."""
        with self._ready:
            return self._spent

    def drain(self) -> List[Event]:
        """Take every forwarded event, in order, then every result that has landed,
        sorted by index."""
        forwarded, results = self.take()
        return forwarded + results if forwarded and results else forwarded or results

    def take(self) -> Tuple[List[Event], List[Event]]:
        """What :meth:`drain` takes, as two lists: the forwarded events, in order, and
        the results, sorted by index. The sink has one reader (the round's generator):
        the forwarded events are taken without the lock, as :meth:`forward` appends them.

        The results are taken first: a call forwards its events before its result is
        reported, so every event forwarded before a result taken here is taken too,
        and comes before it."""
        with self._ready:
            events, self._events = self._events, []
        forwarded = self._forwarded
        count = len(forwarded)
        if count:
            taken = forwarded[:count]
            del forwarded[:count]  # what was appended since the len stays for next time
        else:
            taken = []
        if len(events) > 1:
            events.sort(key=_by_index)
        return taken, events

    def wait(self, timeout: Optional[float], cancelled: Optional[threading.Event] = None) -> None:
        """Block until a result or a forwarded event lands, ``cancelled`` is set, or
        ``timeout`` passes."""
        with self._ready:
            self._sleeping = True
            try:
                if not self._events and not self._forwarded and self._offered is None \
                        and not (cancelled is not None and cancelled.is_set()):
                    self._ready.wait(timeout)
            finally:
                self._sleeping = False

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
    approval is asked), before-hooks, approval, the tool (its answer cut to the tool's
    or the run's ``max_result_chars``), after-hooks. ``tool`` None means the model
    named a tool that does not exist. Returns the ToolResult the conversation
    records; the event reported to ``sink`` carries the same text.

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
                    refused=False, paused=False, content=())
        raise
    ctx.observe("tool.end", **base, duration=event.duration, result=event.result,
                error=event.error, error_type=error_type, refused=event.refused,
                paused=event.paused, content=event.content)
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
    content: Tuple[ToolMedia, ...] = ()
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
        if isinstance(ctx, ToolContext):
            ctx.budget = sink.budget_left
            if decided is not None:
                ctx.resumed = sink.resuming.get(call.id)
        try:
            result, content, error, kind = _invoke(tool, call.name, arguments, ctx)
        except NestedPause as exc:
            # A person's approval is awaited inside the call (a sub-agent's): the call
            # pauses as if approve had paused it, carrying the nested run's checkpoint.
            sink.paused[call.id] = tuple(injects)
            sink.nested[call.id] = exc.checkpoint
            event = ToolEvent(call.id, index, call.name, call.input, error=PAUSED_TEXT,
                              duration=clock() - started, paused=True)
            sink.report(Event(_TOOL_RESULT, tool=event))
            return as_result(event), event, None
        limit = getattr(tool, "max_result_chars", None)
        limit = sink.max_result_chars if limit is None else limit
        if content and limit and len(result) > limit:
            content = _cut_content(content, limit)
        result, error = cut(result, limit), None if error is None else cut(error, limit)
        if error is None and ctx.cancelled.is_set():
            # Whatever a cancelled call returns was cut short (a wait that woke early),
            # so it closes as cancelled, as the generator would have closed it.
            result, error = "", "cancelled: the run was cancelled before this call finished"
            kind, content = "cancelled", ()
        result, error, denied = _ask_after(sink, call, result, error, injects)
        kind = "hook_denied" if denied else kind
    if error is not None:
        content = ()  # a failed call's model reads the failure, not what came before it
    if injects:  # only a hook injects: the hooks module is loaded
        from .hooks import cut_inject

        if content:
            content += (Text(cut_inject("\n".join(injects))),)
            result = _joined(content)
        else:
            result, error = _with_injects(result, error, injects)
    # A tool, an MCP server or a hook may hand back half a surrogate pair; the model
    # reads it as U+FFFD instead of the next request failing to encode.
    result, error = well_formed(result), None if error is None else well_formed(error)
    if content:
        content = tuple(Text(well_formed(p.text)) if isinstance(p, Text) else p for p in content)
    event = ToolEvent(call.id, index, call.name, call.input, result=result, error=error,
                      duration=clock() - started, refused=refused, content=content)
    sink.report(Event(_TOOL_RESULT, tool=event))
    return as_result(event), event, kind


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (0: never) with a note saying how much was
    cut, so the model knows it read a part and can ask for the rest in smaller pieces.
    Cut before the after-hooks, which see what the model will read."""
    if not limit or len(text) <= limit:
        return text
    return (f"{text[:limit]}\n\n[cut: {len(text) - limit:,} more characters of "
            f"{len(text):,} are not shown; the limit is {limit:,}]")


def _joined(content: Sequence[ToolMedia]) -> str:
    """The text of a tool's media parts: their Text parts joined with newlines."""
    return "\n".join(p.text for p in content if isinstance(p, Text))


def _cut_content(content: Tuple[ToolMedia, ...], limit: int) -> Tuple[ToolMedia, ...]:
    """``content`` with its Text cut as :func:`cut` cuts their joined text: the Text
    parts that start within ``limit`` are kept, the last of them cut at ``limit`` and
    given the note, later ones dropped; images and documents stay where they were.
    So the parts' text stays equal to the result the model reads."""
    whole = _joined(content)
    note = cut(whole, limit)[limit:]
    kept: List[ToolMedia] = []
    start = 0
    last = -1
    for i, part in enumerate(content):
        if isinstance(part, Text):
            if start > limit:
                continue
            piece = part.text[:limit - start]
            start += len(part.text) + 1
            last = len(kept)
            kept.append(Text(piece))
        else:
            kept.append(part)
    if last >= 0:
        text = kept[last]
        assert isinstance(text, Text)
        kept[last] = Text(text.text + note)
    return tuple(kept)


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
    from .validation import UnusableSchema, input_check  # on first use: most imports run no tool

    try:
        problem = input_check(tool)(arguments)
    except UnusableSchema as exc:
        return arguments, f"{name} cannot be called: {exc}"
    if problem:
        return arguments, f"invalid input for {name}: {problem}. Correct the input and call again."
    return arguments, None


def _ask_before(sink: ToolSink, call: ToolCall, injects: List[str]) -> Optional[str]:
    """Run the before-hooks: a deny (remembered for ``HookEvent.retry``) or None."""
    if not sink.before:
        return None
    from .hooks import HookEvent, HookPoint, run_before  # loaded with the run's hooks

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


def _invoke(tool: Any, name: str, arguments: Dict[str, Any], ctx: ToolContext,
            ) -> Tuple[str, Tuple[ToolMedia, ...], Optional[str], Optional[str]]:
    """The tool's answer (its text and its media parts, if it returned media), or the
    failure the model reads and the exception's class."""
    try:
        answer = tool_output(tool.run(arguments, ctx))
    except Cancelled as exc:
        return "", (), f"cancelled: {exc}", "cancelled"
    except NestedPause:
        raise
    except Exception as exc:  # noqa: BLE001 - a tool failure is the model's to read
        log.debug("tool %s raised", name, exc_info=True)
        return "", (), str(exc) or type(exc).__name__, type(exc).__qualname__
    if isinstance(answer, str):
        return answer, (), None, None
    return _joined(answer), answer, None, None


def _ask_after(sink: ToolSink, call: ToolCall, result: str, error: Optional[str],
               injects: List[str]) -> Tuple[str, Optional[str], bool]:
    """Run the after-hooks: the result and error the model reads, and whether one denied."""
    if not sink.after:
        return result, error, False
    from .hooks import HookEvent, HookPoint, run_after  # loaded with the run's hooks

    deny, inject = run_after(sink.after, HookEvent(
        HookPoint.AFTER_TOOL_CALL, call.name, call.input, result=result, error=error,
        retry=sink.was_denied(call.name)))
    if deny:
        return "", deny, True
    if inject:
        injects.append(inject)
    return result, error, False


def _with_injects(result: str, error: Optional[str], injects: List[str]) -> Tuple[str, Optional[str]]:
    from .hooks import cut_inject

    extra = cut_inject("\n".join(injects))
    if error is not None:
        return result, f"{error}\n\n{extra}"
    return (f"{result}\n\n{extra}" if result else extra), None


def as_result(event: ToolEvent) -> ToolResult:
    """The ToolResult a TOOL_RESULT event records in the conversation."""
    if event.error is not None:
        return ToolResult(event.id, event.name, event.error, True)
    return ToolResult(event.id, event.name, event.result, False, event.content)


def closing(call: ToolCall, index: int, error: str, duration: float = 0.0,
            *, discarded: bool = False) -> Event:
    """A TOOL_RESULT that closes ``call`` with ``error`` without running it (further)."""
    return Event(_TOOL_RESULT, tool=ToolEvent(call.id, index, call.name, call.input, error=error,
                                              duration=duration, discarded=discarded))


def unique_call_ids(parts: Tuple[Part, ...]) -> Tuple[Part, ...]:
    """The parts with every ToolCall id unique within the message; the tuple itself
    when nothing repeats, which is nearly always.

    Two calls of one turn sharing an id (some providers and proxies send that) would
    make "exactly one result per call" ambiguous, so the later ones are renamed
    (``id_2``, ``id_3``, …, logged). The loop records the renamed message, so a
    replayed conversation carries the same ids as its results."""
    ids = [p.id for p in parts if isinstance(p, ToolCall)]
    if len(ids) == len(set(ids)):
        return parts
    taken: Set[str] = set(ids)
    seen: Set[str] = set()
    renamed: List[Part] = []
    for part in parts:
        if isinstance(part, ToolCall):
            call_id = part.id
            if call_id in seen:
                number = 2
                while f"{call_id}_{number}" in taken:
                    number += 1
                new_id = f"{call_id}_{number}"
                log.warning("the model sent two tool calls with the id %r in one turn; "
                            "the later one is %r", call_id, new_id)
                taken.add(new_id)
                part = ToolCall(new_id, part.name, part.input, part.finished)
                call_id = new_id
            seen.add(call_id)
        renamed.append(part)
    return tuple(renamed)
