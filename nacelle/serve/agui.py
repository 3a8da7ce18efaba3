"""A run's events as AG-UI 1.0 events: :func:`encode`, pure, and :func:`frame`.

AG-UI (https://docs.ag-ui.com) is the event protocol CopilotKit and the ``@ag-ui/client``
agents speak. Its 1.0 schema (https://ag-ui.com/spec/1.0/schema.json, published as
``@ag-ui/core`` 1.0's ``EventSchema``) and the client's verifier (``@ag-ui/client``'s
``verifyEvents``: one run at a time, every message, reasoning span, tool call, step
and sub-agent opened before it is continued and closed before ``RUN_FINISHED``) are
what this encoder is held to; the tests run the real client against it. A run maps so:

- ``RUN_STARTED`` first (``threadId``, ``runId``); ``RUN_FINISHED`` last, or
  ``RUN_ERROR`` when the run raised: a nacelle error's text, anything else a line
  saying the server's log has it (``code`` is the error's type, or
  ``internal_error``), and ``incomplete`` for events that stopped without their DONE.
- Each model turn is a step: ``STEP_STARTED`` at the turn's first event and
  ``STEP_FINISHED`` at its ``TURN``, named ``turn 1``, ``turn 2``, ... per agent.
- TEXT deltas are ``TEXT_MESSAGE_START`` (role ``assistant``) / ``_CONTENT`` /
  ``_END``; THINKING deltas a reasoning span: ``REASONING_START`` and
  ``REASONING_MESSAGE_START`` (one id for both, which the spec allows), content, then
  ``REASONING_MESSAGE_END`` and ``REASONING_END``. A message ends when anything else
  comes.
- A tool call is ``TOOL_CALL_START`` (``parentMessageId``: the turn's assistant
  message, so the client files its calls with its text, as the model wrote them),
  ``TOOL_CALL_ARGS`` — one per TOOL_INPUT delta when the backend streams the input,
  else one with the whole input — and ``TOOL_CALL_END`` at the TOOL_CALL. Its
  TOOL_RESULT is ``TOOL_CALL_RESULT`` (``content``: the result text, its parts when
  the tool returned images or documents, or the failure the model read).
- A forwarded sub-agent's events (``event.agent``/``event.via``) carry a
  ``subagentRunId``: ``SUBAGENT_STARTED`` at its first event (``name``: the last name
  of its path, ``parentToolCallId``: the parent's call that started it,
  ``parentSubagentRunId`` for a sub-agent's sub-agent), and ``SUBAGENT_FINISHED`` —
  or ``SUBAGENT_ERROR`` when the call failed — when that call's result comes. Its
  turns, messages and calls are attributed to it, as the spec's attribution rules
  ask (a continuation agrees with its opener).
- COMPACTION is a ``CUSTOM`` event named ``nacelle.compaction`` (value: strategy,
  removed, tokens, summary): the protocol has no event for it, and CUSTOM is its
  extension point.
- DONE is ``RUN_FINISHED``, everything still open closed first. ``usage`` is the
  run's tokens in AG-UI's accounting (``inputTokens`` counts cache reads and writes,
  which ``cachedInputTokens`` and ``cacheWriteInputTokens`` then name as parts of
  it); ``result`` the structured answer, when there is one; ``metadata.stop`` why the
  run ended (``max_tokens`` marks a cut answer).

A paused run (``Stop.PAUSED``) ends as AG-UI's human-in-the-loop model has it
(https://docs.ag-ui.com/concepts/interrupts): a call waiting for a person's approval
is an interrupt — ``outcome: {"type": "interrupt", "interrupts": [...]}``, one per
call: ``id`` and ``toolCallId`` the call's id, ``reason: "tool_call"``, and the
``responseSchema`` of :data:`APPROVAL_SCHEMA` (``approved``, and ``editedArgs`` for a
full replacement of the input, the spec's approve-with-edits pattern). A call of a
tool the front end declared (``client_tools``) is the application's to answer:
``outcome: {"type": "success", "pendingToolCallIds": [...]}`` when nothing else
waits (the spec's frontend tool calls); when approvals wait too, the outcome is the
interrupt (it cannot name pending calls), and the front end's waiting calls are those
of the run left without a result (how ``@ag-ui/client`` derives them when a success
outcome names none). A paused call gets no ``TOOL_CALL_RESULT`` in
the run that paused: its result comes in the run that resumes it, against the same
``toolCallId``, without its start, arguments and end again (the spec: "The agent does
not re-emit ToolCallStart/ToolCallArgs/ToolCallEnd in the resumed run"). For that,
``announced`` names the calls a client already saw, whose TOOL_CALL a resumed stream
repeats, and ``answered`` the calls whose result the client sent itself (a client
tool's), which it holds already.

Ids the encoder makes are ``{run_id}-m1``, ``{run_id}-m2``, ... (messages, reasoning,
tool results) and ``{run_id}-s1``, ... (sub-agent runs): unique in a thread because
each run has its own id, and the same for the same events, so the encoder stays a
pure function of its input.

Outer ring: imports the standard library and nacelle's core; no I/O.
"""

from __future__ import annotations

import json
from typing import (
    Any, Collection, Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Set, Tuple,
)

from ..errors import NacelleError
from ..events import Event, Kind, Stop, ToolEvent, Usage
from ..messages import Document, Image, Text, ToolMedia
from .encode import _plain

__all__ = ["APPROVAL_SCHEMA", "encode", "frame"]

#: The ``responseSchema`` of an approval interrupt: the spec's approve-with-edits
#: pattern (``editedArgs`` replaces the input whole), and a ``reason`` the model reads
#: when the call is refused.
APPROVAL_SCHEMA: Dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {"type": "object",
                       "description": "Full replacement of the tool's input. Not merged."},
        "reason": {"type": "string", "description": "Why the call is refused; the model "
                                                    "reads it."},
    },
    "required": ["approved"],
}

_LONGEST_ERROR = 500

Out = Dict[str, Any]


def frame(event: Mapping[str, Any]) -> bytes:
    """One AG-UI event as one SSE event: a ``data:`` line of JSON, as ``@ag-ui/encoder``
    writes it. JSON escapes every line break, so the data is one line."""
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode("utf-8", "replace")


def encode(events: Iterable[Event], *, thread_id: str, run_id: str,
           client_tools: Collection[str] = (), announced: Collection[str] = (),
           answered: Collection[str] = ()) -> Iterator[Out]:
    """The AG-UI events of a run's ``events`` (see the module docstring).

    ``client_tools`` names the tools the front end declared, whose paused calls it
    answers; ``announced`` the call ids whose start a client already saw (a resumed
    run's pending calls); ``answered`` the call ids whose result it sent itself.
    A run that raises ends with ``RUN_ERROR``; closing this generator closes
    ``events``.
    """
    state = _Run(run_id, frozenset(client_tools), frozenset(announced), frozenset(answered))
    yield {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}
    source = iter(events)
    try:
        while True:
            try:
                event = next(source)
            except StopIteration:  # a run always ends with DONE: this one was cut short
                yield {"type": "RUN_ERROR", "message": "the run ended without finishing",
                       "code": "incomplete"}
                return
            except Exception as exc:  # noqa: BLE001 - the client hears of every failure
                yield run_error(exc)
                return
            # Only the run's failures are RUN_ERROR here: one of the encoder's own is a
            # bug, raised to the caller (the route logs it and ends the stream).
            if event.kind is Kind.DONE and not event.agent:
                yield from state.close_all()
                yield state.finished(event, thread_id)
                return
            yield from state.feed(event)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()


def run_error(exc: BaseException) -> Out:
    """``RUN_ERROR`` for a run that raised: a nacelle error's own text (written never to
    hold a key), any other's a line saying the server's log has it."""
    if isinstance(exc, NacelleError):
        message = str(exc) or type(exc).__name__
        if len(message) > _LONGEST_ERROR:
            message = message[:_LONGEST_ERROR - 1] + "…"
        return {"type": "RUN_ERROR", "message": message, "code": type(exc).__name__}
    return {"type": "RUN_ERROR", "message": "the run failed; the server's log says why",
            "code": "internal_error"}


class _Agent:
    """What is open for one agent of the run (the run itself, or one sub-agent run)."""

    def __init__(self, sub: Optional[str]) -> None:
        self.sub = sub
        self.text: Optional[str] = None
        self.reasoning: Optional[str] = None
        self.assistant: Optional[str] = None  # the turn's message, its calls' parent
        self.step: Optional[str] = None
        self.turns = 0

    def tag(self, event: Out) -> Out:
        if self.sub is not None:
            event["subagentRunId"] = self.sub
        return event


class _Run:
    """The encoder's state: what is open, per agent, and the ids made so far."""

    def __init__(self, run_id: str, client_tools: FrozenSet[str], announced: FrozenSet[str],
                 answered: FrozenSet[str]) -> None:
        self.run_id = run_id
        self.client_tools = client_tools
        self.announced = announced
        self.answered = answered
        self.count = 0
        self.top = _Agent(None)
        # (path, via) -> the sub-agent run's state, for those started and not finished
        self.subs: Dict[Tuple[Tuple[str, ...], str], _Agent] = {}
        self.maker: Dict[str, _Agent] = {}   # call id -> the agent whose call it is
        self.open_calls: Dict[str, _Agent] = {}  # started, not ended
        # call id -> (characters of arguments sent, the call's input so far): a count
        # and the backend's own text, so the pieces are not joined a second time here.
        self.args: Dict[str, Tuple[int, str]] = {}
        self.ended: Set[str] = set()

    def new_id(self, kind: str) -> str:
        self.count += 1
        return f"{self.run_id}-{kind}{self.count}"

    # -- per event ----------------------------------------------------------------------

    def feed(self, event: Event) -> Iterator[Out]:
        agent, started = self.agent_of(event)
        if started is not None:
            yield started
        kind = event.kind
        if kind is Kind.TEXT:
            yield from self.close_reasoning(agent)
            if not event.text:
                return
            yield from self.open_step(agent)
            if agent.text is None:
                agent.text = self.new_id("m")
                agent.assistant = agent.text
                yield agent.tag({"type": "TEXT_MESSAGE_START", "messageId": agent.text,
                                 "role": "assistant"})
            yield agent.tag({"type": "TEXT_MESSAGE_CONTENT", "messageId": agent.text,
                             "delta": event.text})
        elif kind is Kind.THINKING:
            yield from self.close_text(agent)
            if not event.text:
                return
            yield from self.open_step(agent)
            if agent.reasoning is None:
                agent.reasoning = self.new_id("m")
                yield agent.tag({"type": "REASONING_START", "messageId": agent.reasoning})
                yield agent.tag({"type": "REASONING_MESSAGE_START",
                                 "messageId": agent.reasoning, "role": "reasoning"})
            yield agent.tag({"type": "REASONING_MESSAGE_CONTENT",
                             "messageId": agent.reasoning, "delta": event.text})
        elif kind is Kind.TOOL_INPUT and event.tool is not None:
            yield from self.close_messages(agent)
            tool = event.tool
            if tool.id in self.announced or tool.id in self.ended:
                return
            yield from self.open_step(agent)
            yield from self.start_call(agent, tool)
            if event.text:
                self.args[tool.id] = (self.args.get(tool.id, (0, ""))[0] + len(event.text),
                                      tool.input)
                yield self.open_calls[tool.id].tag({"type": "TOOL_CALL_ARGS",
                                                    "toolCallId": tool.id, "delta": event.text})
        elif kind is Kind.TOOL_CALL and event.tool is not None:
            yield from self.close_messages(agent)
            tool = event.tool
            if tool.id in self.announced or tool.id in self.ended:
                return  # a resumed run's pending call, which the client has
            yield from self.open_step(agent)
            yield from self.start_call(agent, tool)
            yield from self.end_call(tool)
        elif kind is Kind.TOOL_RESULT and event.tool is not None:
            yield from self.close_messages(agent)
            yield from self.result(agent, event.tool)
        elif kind is Kind.TURN:
            yield from self.close_messages(agent)
            for call_id, owner in list(self.open_calls.items()):
                if owner is agent:  # a call the turn cut off: its input is all there is
                    yield from self.end_call_id(call_id)
            yield from self.open_step(agent)
            yield from self.close_step(agent)
            agent.assistant = None
        elif kind is Kind.COMPACTION:
            yield from self.close_messages(agent)
            compacted = event.compaction
            yield agent.tag({"type": "CUSTOM", "name": "nacelle.compaction", "value": {
                "strategy": getattr(compacted, "strategy", ""),
                "removed": getattr(compacted, "removed", 0),
                "tokens": getattr(compacted, "tokens", 0), "summary": event.text}})
        # A sub-agent's DONE is not forwarded; one that is says nothing AG-UI needs.

    def agent_of(self, event: Event) -> Tuple[_Agent, Optional[Out]]:
        """The agent ``event`` belongs to, and the ``SUBAGENT_STARTED`` that starts its
        sub-agent run when this is its first event."""
        if not event.agent:
            return self.top, None
        key = (tuple(event.agent), event.via)
        agent = self.subs.get(key)
        if agent is not None:
            return agent, None
        agent = _Agent(self.new_id("s"))
        self.subs[key] = agent
        started: Out = {"type": "SUBAGENT_STARTED", "subagentRunId": agent.sub,
                        "name": event.agent[-1]}
        if event.via:
            started["parentToolCallId"] = event.via
        parent = self.maker.get(event.via)
        if parent is not None and parent.sub is not None:
            started["parentSubagentRunId"] = parent.sub
        return agent, started

    # -- tool calls ---------------------------------------------------------------------

    def start_call(self, agent: _Agent, tool: ToolEvent) -> Iterator[Out]:
        if tool.id in self.open_calls:
            return
        if agent.assistant is None:
            agent.assistant = self.new_id("m")
        self.open_calls[tool.id] = agent
        self.maker[tool.id] = agent
        yield agent.tag({"type": "TOOL_CALL_START", "toolCallId": tool.id,
                         "toolCallName": tool.name, "parentMessageId": agent.assistant})

    def end_call(self, tool: ToolEvent) -> Iterator[Out]:
        """The rest of the call's arguments (all of them, when none streamed), then END."""
        owner = self.open_calls.get(tool.id)
        if owner is None:
            return
        sent, so_far = self.args.get(tool.id, (0, ""))
        whole = tool.input or "{}"
        if not sent:
            yield owner.tag({"type": "TOOL_CALL_ARGS", "toolCallId": tool.id, "delta": whole})
        elif len(whole) > sent == len(so_far) and whole.startswith(so_far):
            yield owner.tag({"type": "TOOL_CALL_ARGS", "toolCallId": tool.id,
                             "delta": whole[sent:]})
        yield from self.end_call_id(tool.id)

    def end_call_id(self, call_id: str) -> Iterator[Out]:
        owner = self.open_calls.pop(call_id, None)
        if owner is not None:
            self.ended.add(call_id)
            yield owner.tag({"type": "TOOL_CALL_END", "toolCallId": call_id})

    def result(self, agent: _Agent, tool: ToolEvent) -> Iterator[Out]:
        if tool.id not in self.announced and tool.id not in self.ended:
            # A result whose call the client never saw start (or saw only in part):
            # the call is told first, so the result has a call to close.
            yield from self.start_call(agent, tool)
            yield from self.end_call(tool)
        yield from self.finish_subs(tool)
        if tool.paused or tool.id in self.answered:
            return  # its result comes in the run that resumes it / the client has it
        if tool.error is not None:
            content: Any = tool.error
        elif tool.content:
            content = [_part(p) for p in tool.content]
        else:
            content = tool.result
        yield agent.tag({"type": "TOOL_CALL_RESULT", "messageId": self.new_id("m"),
                         "toolCallId": tool.id, "content": content, "role": "tool"})

    # -- sub-agents ---------------------------------------------------------------------

    def finish_subs(self, tool: ToolEvent) -> Iterator[Out]:
        """Finish the sub-agent runs the call ``tool`` started (and theirs, first)."""
        for key, agent in list(self.subs.items()):
            if key[1] != tool.id or key not in self.subs:
                continue
            yield from self.finish_sub(key, agent, tool)

    def finish_sub(self, key: Tuple[Tuple[str, ...], str], agent: _Agent,
                   tool: Optional[ToolEvent]) -> Iterator[Out]:
        del self.subs[key]  # first, so no sub-agent it started can come back to it
        for inner_key, inner in list(self.subs.items()):
            if inner_key in self.subs and self.maker.get(inner_key[1]) is agent:
                yield from self.finish_sub(inner_key, inner, None)
        yield from self.close_agent(agent)
        if tool is not None and tool.error is not None and not tool.paused:
            yield {"type": "SUBAGENT_ERROR", "subagentRunId": agent.sub,
                   "message": tool.error[:_LONGEST_ERROR]}
        elif tool is not None and tool.paused:
            yield {"type": "SUBAGENT_FINISHED", "subagentRunId": agent.sub,
                   "outcome": {"type": "suspended"}}
        else:
            yield {"type": "SUBAGENT_FINISHED", "subagentRunId": agent.sub}

    # -- closing ------------------------------------------------------------------------

    def open_step(self, agent: _Agent) -> Iterator[Out]:
        if agent.step is None:
            agent.turns += 1
            agent.step = f"turn {agent.turns}"
            yield agent.tag({"type": "STEP_STARTED", "stepName": agent.step})

    def close_step(self, agent: _Agent) -> Iterator[Out]:
        if agent.step is not None:
            yield agent.tag({"type": "STEP_FINISHED", "stepName": agent.step})
            agent.step = None

    def close_text(self, agent: _Agent) -> Iterator[Out]:
        if agent.text is not None:
            yield agent.tag({"type": "TEXT_MESSAGE_END", "messageId": agent.text})
            agent.text = None

    def close_reasoning(self, agent: _Agent) -> Iterator[Out]:
        if agent.reasoning is not None:
            yield agent.tag({"type": "REASONING_MESSAGE_END", "messageId": agent.reasoning})
            yield agent.tag({"type": "REASONING_END", "messageId": agent.reasoning})
            agent.reasoning = None

    def close_messages(self, agent: _Agent) -> Iterator[Out]:
        yield from self.close_text(agent)
        yield from self.close_reasoning(agent)

    def close_agent(self, agent: _Agent) -> Iterator[Out]:
        yield from self.close_messages(agent)
        for call_id, owner in list(self.open_calls.items()):
            if owner is agent:
                yield from self.end_call_id(call_id)
        yield from self.close_step(agent)

    def close_all(self) -> Iterator[Out]:
        for key, agent in list(self.subs.items()):
            if key in self.subs:
                yield from self.finish_sub(key, agent, None)
        yield from self.close_agent(self.top)
        for call_id in list(self.open_calls):
            yield from self.end_call_id(call_id)

    def finished(self, done: Event, thread_id: str) -> Out:
        """``RUN_FINISHED`` for the run's DONE (see the module docstring)."""
        finished: Out = {"type": "RUN_FINISHED", "threadId": thread_id, "runId": self.run_id}
        checkpoint = done.checkpoint if done.stop is Stop.PAUSED else None
        pending = getattr(checkpoint, "pending", ())
        waiting = [p.id for p in pending if p.child is None and p.name in self.client_tools]
        interrupts = [self.interrupt(p) for p in _waiting(checkpoint)
                      if p.id not in waiting]
        if interrupts:
            finished["outcome"] = {"type": "interrupt", "interrupts": interrupts}
        elif waiting:
            finished["outcome"] = {"type": "success", "pendingToolCallIds": waiting}
        else:
            finished["outcome"] = {"type": "success"}
        if done.output is not None:
            finished["result"] = _plain(done.output)
        usage = _usage(done.usage)
        if usage:
            finished["usage"] = [usage]
        if done.stop is not None:
            finished["metadata"] = {"stop": done.stop.value}
        return finished

    def interrupt(self, pending: Any) -> Out:
        """The approval interrupt of a paused call (a sub-agent's carries its run's id)."""
        out: Out = {"id": pending.id, "reason": "tool_call", "toolCallId": pending.id,
                    "message": f"Allow this call of {pending.name}?",
                    "responseSchema": APPROVAL_SCHEMA, "metadata": {"toolName": pending.name}}
        maker = self.maker.get(pending.id)
        if maker is not None and maker.sub is not None:
            out["subagentRunId"] = maker.sub
        return out


def _waiting(checkpoint: Any) -> List[Any]:
    """The calls a paused run waits on, at any depth (``Checkpoint.waiting``)."""
    if checkpoint is None:
        return []
    waiting = getattr(checkpoint, "waiting", None)
    return list(waiting()) if callable(waiting) else list(getattr(checkpoint, "pending", ()))


def _usage(usage: Usage) -> Out:
    """A Usage in AG-UI's ``TokenUsage`` accounting: totals, and named parts of them."""
    if not (usage.total or usage.reasoning_tokens):
        return {}
    given = usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens
    out: Out = {"inputTokens": given, "outputTokens": usage.output_tokens,
                "totalTokens": given + usage.output_tokens}
    if usage.reasoning_tokens:
        out["reasoningTokens"] = usage.reasoning_tokens
    if usage.cache_read_tokens:
        out["cachedInputTokens"] = usage.cache_read_tokens
    if usage.cache_creation_tokens:
        out["cacheWriteInputTokens"] = usage.cache_creation_tokens
    return out


def _part(part: ToolMedia) -> Out:
    """A tool's media part as an AG-UI content part, its bytes inline."""
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        return {"type": "image", "source": {"type": "data", "value": part.data,
                                            "mimeType": part.media_type}}
    assert isinstance(part, Document)
    out: Out = {"type": "document", "source": {"type": "data", "value": part.data,
                                               "mimeType": part.media_type}}
    if part.title:
        out["metadata"] = {"title": part.title}
    return out
