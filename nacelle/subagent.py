"""subagent_tool: hand a self-contained task to a fresh run of another agent.

``subagent_tool(base)`` is a Tool whose every call is a new run of ``base``'s
configuration (its backend, system prompt or ``system``, its tools minus any tool
named like the sub-agent tool itself, which is the recursion guard) with its own
conversation, holding only the task. The parent sees only the final text: the
sub-agent's tool traffic stays out of the parent's context window, which is the
point of delegating.

Approvals are denied unless ``approve`` is given: a sub-agent runs out of the user's
sight, so it must not inherit a right to act. An ``approve`` that returns
``nacelle.PAUSE`` pauses the whole run: the call closes as paused (the tool raises
:class:`~nacelle.checkpoint.NestedPause`), the parent's round ends with
``Stop.PAUSED``, and the parent's checkpoint carries the sub-agent's under the
call's id (``checkpoint.py``, version 2). ``Agent.resume(checkpoint, decisions)``
takes decisions keyed by the sub-agent's call ids (``checkpoint.waiting()``); the
call runs again as a resumed call, which resumes the sub-agent's run — its finished
calls are not run again — and then the parent goes on. Its hooks are ``base``'s, and
so are its loop guard (which counts the calls of each sub-agent run, while the
parent's counts its calls of the sub-agent tool, so a parent handing out the same
task again and again is caught as any repeated call is) and its observers.

The tree is one run for what it spends and how it stops. The sub-agent's spend is
added to the parent's usage (``ctx.spend``), so the parent's DONE total and its
``Budget`` count it (checked at the parent's next turn boundary, as its own tools'
are), and it is passed to ``on_usage`` too (also when the run fails part way). The
sub-agent's run is held to what the parent's budget has left when the call starts
(``ctx.budget``: tokens, cost and tool calls; time reaches it as the call's
deadline), so a sub-agent cannot spend the parent's budget many times over before
the parent's next turn; two sub-agents running side by side each get what was left. The
nested run is cancelled with the call: a timeout or a cancelled parent run sets the
call's ``ctx.cancelled``, which is the nested run's cancel event. Its observations
reach the parent run's observers under a run id of its own, its ``run.start``
naming the parent run and the call (``parent_run``, ``via``): an OpenTelemetry
``invoke_agent`` span of the child starts on the tool's thread, under the call's
``execute_tool`` span.

``forward=True`` makes the sub-agent's work visible as it happens: each of its
events but DONE is passed into the parent's stream (``ctx.emit``) re-tagged with
``agent`` = this tool's name followed by the event's own path, and ``via`` = the id
of the call that started the run that made the event. So a grandchild's event,
forwarded twice, has ``agent == ("child", "grandchild")`` and keeps the ``via`` its
own parent gave it: the child's call that started the grandchild, which is the
TOOL_CALL in the stream whose ``agent`` is ``("child",)``. ``(event.agent[:-1],
event.via)`` always names the call that started the run an event comes from. A
forwarded event closes no call of the parent; the parent's model still reads only
the final text. Forwarding is off by default: a consumer written before it would
show a sub-agent's text as the parent's. Most of a forwarded run is its text and
argument deltas: a built-in backend's accumulator makes them with their tags
already (``RunContext._tags``, ``_stream.Tagging``) when the child has no observers,
so they are passed on as they are, not copied or written to; an observer sees the
child's own events untagged, as they are in a run of its own, and what a backend of
one's own yields is copied, never changed.

Where the child runs: on its call's thread, as every tool does — except a forwarding
sub-agent that is its round's only call, under no timeout or run deadline, with no
observers: the parent's generator has nothing else to do until that call ends, so it
iterates the child's events itself, on the consumer's thread
(``toolcalls.Handover``), sparing each event the hop between threads (about an eighth
of a forwarded run's CPU). In an Agent's run the round hands the run up to the run's
own generator (``Agent._stream``), so each forwarded event climbs that generator and
the tagging one only, not the loop's as well. What the consumer sees is the same. A
consumer that stops reading hands the child's run back to the call's thread, which
sees it cancelled; a Ctrl-C while the child's code runs reaches the consumer, and the
call ends as cancelled; so does a call whose stream is left open by a thread that then ends (the
main thread ends at the interpreter's exit), rather than hold its thread, which the
interpreter waits for.

A ``base`` with structured output (``output=``) makes a typed sub-agent: the child
keeps its ``output``, mode and retries, and the tool returns the validated answer as
JSON text (``output.to_jsonable``), which is all a parent model can read; a child run
that ends without a valid answer is a failed call saying how it stopped.

The child Agent is built when the tool is made, so a configuration the backend
cannot serve fails there, not in the middle of a parent run.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from ._loggers import get_logger
from .agent import Agent
from .checkpoint import NestedPause
from .errors import Cancelled, ConfigError
from .events import Event, Kind, Stop, Usage
from .messages import Role, user_text
from .output import to_jsonable
from .context import Budget, ToolContext
from .toolcalls import Handover
from .tools import NAME_PATTERN

__all__ = ["SubagentTool", "subagent_tool"]

log = get_logger(__name__)

_DONE, _TURN = Kind.DONE, Kind.TURN
_new = object.__new__

DEFAULT_DESCRIPTION = (
    "Hand a self-contained task to a sub-agent that works on it with its own fresh "
    "context and tools, and returns only its final answer. Describe the task fully: "
    "the sub-agent sees nothing of this conversation."
)


def deny_all(name: str, input: Dict[str, Any], ctx: ToolContext) -> bool:
    """The sub-agent's default approval: nothing that needs approval runs."""
    return False


class SubagentTool:
    """The Tool :func:`subagent_tool` returns."""

    exclusive = False
    read_only = False
    destructive = True  # whatever its tools may do
    idempotent = False
    open_world = True

    def __init__(self, agent: Agent, name: str, description: str,
                 on_usage: Optional[Callable[[Usage], Any]], forward: bool = False) -> None:
        self.agent = agent
        self.name = name
        self.description = description
        self.on_usage = on_usage
        self.forward = forward
        self.schema = {
            "type": "object",
            "properties": {"task": {"type": "string",
                                    "description": "The task, with everything needed to do it."}},
            "required": ["task"],
            "additionalProperties": False,
        }

    @property
    def _hands_over(self) -> bool:
        """Whether a call may hand its run to the parent's generator
        (``toolcalls.Handover``): a forwarding one's may."""
        return self.forward

    def __repr__(self) -> str:
        return f"<SubagentTool {self.name!r} over {self.agent!r}>"

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> str:
        resumed = getattr(ctx, "resumed", None)
        base = Usage()
        name = (self.name,)
        # What a forwarded event of the child's own is tagged with: its deltas are made
        # so (RunContext._tags), and _tagged passes them on as they are.
        tags = {"agent": name, "via": ctx.call_id} if self.forward else None
        if resumed is not None:  # the call paused inside its run: go on with that run
            checkpoint, decisions = resumed
            base = checkpoint.usage
            events = self.agent._resumed(checkpoint, decisions, ctx.cancelled, ctx,
                                         budget=_within(getattr(ctx, "budget", None), base),
                                         tags=tags)
        else:
            request = self.agent.request([user_text(input["task"])])
            settings = self.agent._settings()
            budget = getattr(ctx, "budget", None)
            if budget is not None:
                settings = dataclasses.replace(settings, budget=budget)
            events = self.agent._stream(request, settings, ctx.cancelled, ctx, tags)
        tally = _Tally(events)
        try:
            if self.forward:
                self._forward(tally, name, ctx)
            else:
                for event in events:
                    kind = event.kind
                    if kind is _DONE:
                        tally.done = event
                    elif kind is _TURN and not event.agent:
                        tally.own += event.usage
        finally:
            if not tally.away:
                events.close()
            done = tally.done
            spent = tally.own if done is None else _less(done.usage, base)
            if spent != Usage():
                ctx.spend(spent)
                if self.on_usage is not None:
                    try:
                        self.on_usage(spent)
                    except Exception:  # noqa: BLE001 - accounting must not fail the call
                        log.warning("on_usage failed for %s", self.name, exc_info=True)
        if tally.error is not None:
            raise tally.error
        return self._answer(tally.done)

    def _forward(self, tally: "_Tally", name: Tuple[str, ...], ctx: ToolContext) -> None:
        """Pass the child's events into the parent's stream: iterated by the round's
        generator on the consumer's thread when it takes them (``ctx._offer``, see
        ``toolcalls.Handover``), else — and for what it hands back — here, each
        passed on with ``ctx.emit``. A child with observers always runs here: an
        observer (OpenTelemetry's) may tie what it does to the thread's context."""
        tagged = _tagged(tally, name, ctx.call_id)
        offer = ctx._offer
        if offer is not None and not self.agent.observers and ctx.observer is None:
            handover = Handover(tagged)
            if offer(handover):
                try:
                    finished = handover.wait()
                except Cancelled:
                    tally.away = True  # its reader may still be iterating it
                    raise
                if finished:
                    return
        emit = ctx.emit
        for event in tagged:
            emit(event)

    def _answer(self, done: Optional[Event]) -> str:
        """The call's result from the child's DONE; a paused child pauses the call."""
        if done is None or done.stop is None:
            raise RuntimeError("the sub-agent's run ended without an answer")
        stop = done.stop
        if stop is Stop.PAUSED and done.checkpoint is not None:
            raise NestedPause(done.checkpoint)
        if done.output is not None:
            return json.dumps(to_jsonable(done.output), ensure_ascii=False)
        if self.agent.output is not None:
            raise RuntimeError(f"the sub-agent stopped ({stop.value}) without a valid answer")
        text = next((m.text for m in reversed(done.messages) if m.role is Role.ASSISTANT), "")
        if not text and not stop.complete:
            raise RuntimeError(f"the sub-agent stopped ({stop.value}) without an answer")
        return text


class _Tally:
    """What a child's run said that the call's result is made of: its DONE, its own
    turns' usage (for a run that ends without DONE), and the error it ended with."""

    __slots__ = ("events", "done", "own", "error", "away")

    def __init__(self, events: Iterator[Event]) -> None:
        self.events = events
        self.done: Optional[Event] = None
        self.own = Usage()
        self.error: Optional[BaseException] = None
        self.away = False  # the events are with a reader that never gave them back


def _tagged(tally: _Tally, name: Tuple[str, ...], call_id: str) -> Iterator[Event]:
    """The child's events but DONE, each re-tagged for the parent's stream; what the
    run says of itself goes into ``tally``, the error it ends with too (raised by
    the call, on the call's thread, whichever thread iterated this).

    Forwarding is on the path of every event of the child's run. Its text and
    argument deltas are made already tagged, when the child's run has no observers
    and a built-in backend's accumulator makes them (``RunContext._tags``,
    ``_stream.Tagging``): their ``agent`` is ``name`` itself, and they pass as they
    are. Every other event is re-tagged inline, as
    ``dataclasses.replace(event, agent=..., via=...)`` would without its
    ``__init__`` (an Event has no ``__post_init__``, and the two fields are right by
    construction): a new instance whose dict is the event's, updated — an event a
    backend or the child's loop made may be held by them, and is never changed."""
    try:
        for event in tally.events:
            if event.agent is name:  # a delta made tagged: never DONE or TURN
                yield event
                continue
            kind = event.kind
            if kind is _DONE:
                tally.done = event
                continue
            if kind is _TURN and not event.agent:
                tally.own += event.usage
            copy = _new(event.__class__)
            tagged = copy.__dict__
            # A field an event leaves at its default may be absent from its dict (read
            # from the class, as a stream's TOOL_INPUT does): the copy's is too, and
            # so reads the same.
            tagged.update(event.__dict__)
            agent = event.agent
            tagged["agent"] = name + agent if agent else name
            tagged["via"] = event.via or call_id
            yield copy
    except Exception as exc:  # noqa: BLE001 - the call's failure, raised by the call
        tally.error = exc
    except BaseException:
        # Raised into the consumer's thread while it iterated the run (Ctrl-C): it
        # goes on up there; the call ends as cancelled.
        tally.error = Cancelled("the sub-agent's run was interrupted")
        raise


def _within(budget: Optional[Budget], base: Usage) -> Optional[Budget]:
    """The parent's budget left, for a resumed child whose own count starts at
    ``base`` (spent before the pause, which the parent counted then)."""
    if budget is None:
        return None
    return dataclasses.replace(
        budget, tokens=None if budget.tokens is None else budget.tokens + base.total,
        cost=None if budget.cost is None else budget.cost + base.cost)


def _less(total: Usage, base: Usage) -> Usage:
    """``total`` minus ``base`` (a resumed child's usage before its pause, which the
    parent counted then): what the child spent in this call."""
    if base == Usage():
        return total
    return Usage(input_tokens=max(0, total.input_tokens - base.input_tokens),
                 output_tokens=max(0, total.output_tokens - base.output_tokens),
                 cache_read_tokens=max(0, total.cache_read_tokens - base.cache_read_tokens),
                 cache_creation_tokens=max(0, total.cache_creation_tokens
                                           - base.cache_creation_tokens),
                 reasoning_tokens=max(0, total.reasoning_tokens - base.reasoning_tokens),
                 cost=max(0.0, total.cost - base.cost), priced=total.priced)


def subagent_tool(
    agent: Agent,
    *,
    name: str = "subagent",
    description: Optional[str] = None,
    system: Optional[str] = None,
    max_iterations: int = 0,
    approve: Optional[Callable[..., object]] = None,
    on_usage: Optional[Callable[[Usage], Any]] = None,
    forward: bool = False,
) -> SubagentTool:
    """A Tool that runs ``agent``'s configuration on a task; see the module docstring."""
    if not isinstance(agent, Agent):
        raise ConfigError(f"subagent_tool needs a nacelle.Agent, got {type(agent).__name__}")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ConfigError(f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
    if not isinstance(forward, bool):
        raise ConfigError(f"forward must be True or False, got {forward!r:.40}")
    if on_usage is not None and not callable(on_usage):
        raise ConfigError(f"on_usage must be callable, got {type(on_usage).__name__}")
    child = Agent(
        agent.backend,
        system if system is not None else agent.system,
        thinking=agent.thinking,
        max_tokens=agent.max_tokens,
        max_iterations=max_iterations,
        tools=[t for t in agent.tools if getattr(t, "name", None) != name],
        mcp=agent.mcp,
        approve=approve if approve is not None else deny_all,
        hooks=agent.hooks,
        max_parallel_tools=agent.max_parallel_tools,
        tool_timeout=agent.tool_timeout,
        max_result_chars=agent.max_result_chars,
        output=agent.output,
        output_mode=agent.output_mode,
        output_retries=agent.output_retries,
        loop_guard=agent.loop_guard,
        observers=agent.observers,
        logger=agent.logger,
    )
    return SubagentTool(child, name, description if description is not None else DEFAULT_DESCRIPTION,
                        on_usage, forward)
