"""A run's events as the AI SDK's UI message stream (protocol v1): :func:`encode`.

The stream ``useChat`` reads (https://ai-sdk.dev/docs/ai-sdk-ui/stream-protocol, "UI
Message Stream Protocol"): Server-Sent Events whose ``data:`` is one JSON chunk with a
``type``, ending with ``data: [DONE]``; the response says so with the header
``x-vercel-ai-ui-message-stream: v1`` (:data:`HEADER`). The chunk shapes are the ``ai``
package's own schema (``uiMessageChunkSchema`` in ``ui-message-chunks.ts``), which its
``DefaultChatTransport`` checks every chunk against; the tests read this stream with
that transport. Per nacelle event:

- the stream opens with ``start`` (``messageId`` when one is given) and ends with
  ``finish`` (``finishReason`` from the run's stop) and ``data: [DONE]``; a run that
  ended gives its ``finish`` ``messageMetadata``: ``{"stop", "usage"}``, nacelle's stop
  and the run's usage as ``/runs`` sends it (tokens, ``cost``, ``priced``) — the
  AI SDK's documented place for a message's usage, which ``useChat`` keeps as the
  message's ``metadata`` (a resumed run's replaces it: its usage counts on from the
  pause);
- a model turn is a step: ``start-step`` before its first output, ``finish-step`` once
  its tools have answered (at the next turn's first output, or the end) — where
  ``streamText`` puts it, so a step's tool results land in that step;
- TEXT / THINKING: ``text-start`` / ``reasoning-start`` when a block begins, one
  ``-delta`` per provider delta, ``-end`` when something else comes;
- TOOL_INPUT: ``tool-input-start`` at a call's first delta, then ``tool-input-delta``
  with the delta; TOOL_CALL: ``tool-input-available`` with the parsed input (a
  ``tool-input-start`` first if no delta came), or ``tool-input-error`` for input that
  is not JSON; a call whose input was cut off (the turn ended without its TOOL_CALL) is
  closed with ``tool-input-error``. Tool parts are static (``tool-<name>``), as
  ``streamText`` makes for the tools it was given; a provider's server tool carries
  ``providerExecuted``;
- TOOL_RESULT: ``tool-output-available`` with the result's text (and a ``file`` chunk,
  a ``data:`` URL, per image or document the tool returned), ``tool-output-error`` for
  a failure or a refusal, ``tool-approval-request`` for a call the run paused on (its
  ``approvalId`` is the call's id; sent at the end, once the checkpoint says which
  calls wait), and ``tool-output-denied`` for a call in
  ``resumed`` the person refused — the part the client holds carries that refusal;
- an event a sub-agent forwarded (``event.agent`` set) is a transient
  ``data-subagent`` chunk, ``{"agent", "via", "kind", ...}``: ``useChat`` hands it to
  ``onData`` and keeps it out of the message, so the conversation the client sends
  back holds only the run's own parts (the parent call's result carries the
  sub-agent's answer). A sub-agent's call that pauses for approval is the exception:
  the person must answer it, so at the end of the stream it becomes a tool part in a
  step of its own, marked ``toolMetadata: {"agent", "via"}``, with its
  ``tool-approval-request``; the parent's call waiting on it gets none. A sub-agent
  that forwards nothing is asked about on the parent's call (``_requests``);
- a run that raises ends with ``error`` (``errorText``: a nacelle error's message, or
  a generic line for any other exception, which is logged here), its open calls
  closed with ``tool-output-error``, then ``finish`` with ``finishReason: "error"``.

``resumed`` maps the ids of calls the client already shows — a paused run's calls,
resumed from the person's answers, a sub-agent's among them — to whether they were
approved: their repeated TOOL_CALL is not announced again (``streamText`` sends only
the outcome of an approved call), their outcome goes to the part the client holds,
and a refused one ends as ``tool-output-denied``.

Ids of text and reasoning blocks are ``text-N`` / ``reasoning-N``, counted per
stream: only a block's own start, deltas and end must agree, and a resumed stream
continuing the same message starts its blocks after the earlier ones have ended.

Pure: no I/O, no clock; closing the generator closes ``events``. Outer ring: imports
the standard library and nacelle's core.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Set

from .._loggers import get_logger
from ..bounded_json import loads as bounded_loads
from ..errors import NacelleError
from ..events import Event, Kind, Stop, ToolEvent
from ..messages import Document, Image
from .encode import usage_json

__all__ = ["HEADER", "encode"]

log = get_logger(__name__)

#: The header a UI message stream response carries, and its value.
HEADER = ("x-vercel-ai-ui-message-stream", "v1")

DONE_LINE = b"data: [DONE]\n\n"

# Stop -> the protocol's finishReason ("stop", "length", "content-filter",
# "tool-calls", "error", "other"); a pause waits on tool calls, as streamText's
# step that requests an approval ends with "tool-calls".
_FINISH = {Stop.END: "stop", Stop.TOOLS: "tool-calls", Stop.PAUSED: "tool-calls",
           Stop.MAX_TOKENS: "length", Stop.CONTEXT: "length", Stop.REFUSAL: "content-filter"}


def chunk(data: Mapping[str, Any]) -> bytes:
    """One chunk as an SSE event: ``data:`` and the chunk as one line of JSON."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"data: {text}\n\n".encode("utf-8", "replace")


def encode(events: Iterable[Event], *, message_id: Optional[str] = None,
           resumed: Optional[Mapping[str, bool]] = None) -> Iterator[bytes]:
    """The run's ``events`` as UI message stream SSE bytes (see the module docstring)."""
    state = _Stream(dict(resumed or {}))
    start: Dict[str, Any] = {"type": "start"}
    if message_id:
        start["messageId"] = message_id
    yield chunk(start)
    iterator = iter(events)
    finish: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    try:
        for event in iterator:
            for data in state.feed(event):
                yield chunk(data)
            if event.kind is Kind.DONE and not event.agent:
                finish = _FINISH.get(event.stop, "other") if event.stop else "other"
                metadata = {"stop": event.stop.value if event.stop else None,
                            "usage": usage_json(event.usage)}
                break
    except Exception as exc:  # noqa: BLE001 - the client hears of every failure
        if isinstance(exc, NacelleError):
            log.info("a served chat run failed: %s: %s", type(exc).__name__, exc)
            message = str(exc)
            text = message if len(message) <= 500 else message[:499] + "…"
        else:
            log.exception("a served chat run failed")
            text = "the run failed; the server's log says why"
        for data in state.failed(text):
            yield chunk(data)
        finish = "error"
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
    for data in state.close_step():
        yield chunk(data)
    end: Dict[str, Any] = {"type": "finish", "finishReason": finish or "other"}
    if metadata is not None:
        end["messageMetadata"] = metadata
    yield chunk(end)
    yield DONE_LINE


class _Stream:
    """What the encoder must remember between events: the open block, the open step,
    and the calls announced but not yet closed."""

    def __init__(self, resumed: Dict[str, bool]) -> None:
        self.resumed = resumed
        self.block: Optional[str] = None  # "text" or "reasoning"
        self.block_id = ""
        self.count = 0
        self.step_open = False
        self.step_ended = False  # TURN came; finish-step waits for the step's results
        self.started: Dict[str, str] = {}  # call id -> tool name: input streaming
        self.announced: Set[str] = set()  # input available, no result yet
        self.inside: Set[str] = set()  # calls paused because a sub-agent's call waits
        self.paused: List[ToolEvent] = []  # the run's own calls waiting on a person
        self.nested: Dict[str, Event] = {}  # a sub-agent's, as forwarded, by call id

    def feed(self, event: Event) -> List[Dict[str, Any]]:
        if event.agent:
            return self._forwarded(event)
        kind = event.kind
        if kind in (Kind.TEXT, Kind.THINKING):
            if not event.text:
                return []
            out = self._output()
            block = "text" if kind is Kind.TEXT else "reasoning"
            if self.block != block:
                out += self._end_block()
                self.count += 1
                self.block, self.block_id = block, f"{block}-{self.count}"
                out.append({"type": f"{block}-start", "id": self.block_id})
            out.append({"type": f"{block}-delta", "id": self.block_id, "delta": event.text})
            return out
        tool = event.tool
        if kind is Kind.TOOL_INPUT and tool is not None:
            out = self._output() + self._end_block()
            if tool.id not in self.started:
                out.append(self._input_start(tool))
            if event.text:
                out.append({"type": "tool-input-delta", "toolCallId": tool.id,
                            "inputTextDelta": event.text})
            return out
        if kind is Kind.TOOL_CALL and tool is not None:
            if tool.id in self.resumed:
                return []  # the client shows this call already, waiting on its outcome
            return self._output() + self._end_block() + self._available(tool)
        if kind is Kind.TOOL_RESULT and tool is not None:
            out = self._end_block()
            if tool.id not in self.announced and tool.id not in self.resumed:
                out += self._available(tool)  # a result for a call never announced
            if tool.paused:
                self.paused.append(tool)  # asked about at the end, when all are known
            return out + self._result(tool)
        if kind is Kind.TURN:
            out = self._end_block() + self._cut_inputs()
            self.step_ended = self.step_open
            return out
        if kind is Kind.DONE:
            return self._end_block() + self._cut_inputs() + self._requests(event.checkpoint)
        return []

    def _forwarded(self, event: Event) -> List[Dict[str, Any]]:
        """A sub-agent's event: transient data; and for its tool calls, what the
        client's parts need — an approval request at the end for one that waits on a
        person, and the outcome of one the client shows from an earlier pause."""
        out = [_subagent(event)]
        tool = event.tool
        if event.kind is Kind.TOOL_RESULT and tool is not None:
            if tool.paused:
                if tool.id not in self.inside:
                    self.nested[tool.id] = event
                self.inside.add(event.via)
            elif tool.id in self.resumed:
                out += self._result(tool)
        return out

    def _requests(self, checkpoint: Any) -> List[Dict[str, Any]]:
        """The approval requests of a paused run: for each call it waits on, one on
        the call's part. A call that paused because its sub-agent's calls wait is
        asked about through those calls when the sub-agent forwarded them — as parts
        of a step of their own (marked with ``toolMetadata`` ``{"agent", "via"}``),
        so the step ``lastAssistantMessageIsCompleteWithApprovalResponses`` looks at
        holds only what the person must answer — and otherwise on its own part, the
        calls it waits on named in the request's ``approvalDescriptor``
        (``{"waiting": [{"id", "name", "input"}]}``), one answer for all of them. The
        checkpoint says which calls wait; without one, the stream's paused results do."""
        own: List[Any] = []  # (ToolEvent, descriptor or None)
        nested: List[Event] = []
        pending = getattr(checkpoint, "pending", None)
        if pending is None:
            own = [(t, None) for t in self.paused if t.id not in self.inside]
            nested = list(self.nested.values())
        else:
            known = {t.id: t for t in self.paused}
            for call in pending:
                tool = known.get(call.id) or ToolEvent(call.id, 0, call.name, call.input)
                waiting = call.child.waiting() if call.child is not None else ()
                if waiting and all(w.id in self.nested for w in waiting):
                    nested += [self.nested[w.id] for w in waiting]
                elif waiting:
                    own.append((tool, {"waiting": [{"id": w.id, "name": w.name, "input": w.input}
                                                   for w in waiting]}))
                else:
                    own.append((tool, None))
        out: List[Dict[str, Any]] = []
        for tool, descriptor in own:
            out.append(_request(tool.id, descriptor))
        if nested:
            out += self.close_step() + [{"type": "start-step"}]
            self.step_open = True
            for event in nested:
                inner = event.tool
                assert inner is not None
                marked = {"toolMetadata": {"agent": list(event.agent), "via": event.via}}
                out.append({**self._input_start(inner), **marked})
                for data in self._available(inner):
                    out.append({**data, **marked} if data["type"] == "tool-input-available"
                               else data)
                self.announced.discard(inner.id)
                out.append(_request(inner.id, None))
        return out

    def failed(self, text: str) -> List[Dict[str, Any]]:
        """The chunks that end a run that raised: its open parts closed, then ``error``."""
        out = self._end_block() + self._cut_inputs()
        for call_id in sorted(self.announced):
            out.append({"type": "tool-output-error", "toolCallId": call_id,
                        "errorText": "the run ended before this call finished"})
        self.announced.clear()
        out.append({"type": "error", "errorText": text})
        return out

    def close_step(self) -> List[Dict[str, Any]]:
        out = self._end_block()
        if self.step_open:
            out.append({"type": "finish-step"})
            self.step_open = self.step_ended = False
        return out

    # -- helpers -------------------------------------------------------------------

    def _output(self) -> List[Dict[str, Any]]:
        """The chunks a model turn's first output needs: the last step finished, and
        this one started."""
        out: List[Dict[str, Any]] = []
        if self.step_ended:
            out += self.close_step()
        if not self.step_open:
            out.append({"type": "start-step"})
            self.step_open = True
        return out

    def _end_block(self) -> List[Dict[str, Any]]:
        if self.block is None:
            return []
        data = {"type": f"{self.block}-end", "id": self.block_id}
        self.block = None
        return [data]

    def _input_start(self, tool: ToolEvent) -> Dict[str, Any]:
        self.started[tool.id] = tool.name
        data: Dict[str, Any] = {"type": "tool-input-start", "toolCallId": tool.id,
                                "toolName": tool.name}
        if tool.server:
            data["providerExecuted"] = True
        return data

    def _available(self, tool: ToolEvent) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        if tool.id not in self.started:
            out.append(self._input_start(tool))
        del self.started[tool.id]
        self.announced.add(tool.id)
        try:
            value = bounded_loads(tool.input or "{}", what="a tool call's input")
        except ValueError:
            out.append({"type": "tool-input-error", "toolCallId": tool.id,
                        "toolName": tool.name, "input": tool.input,
                        "errorText": "the model's input for this call is not JSON"})
            return out
        data: Dict[str, Any] = {"type": "tool-input-available", "toolCallId": tool.id,
                                "toolName": tool.name, "input": value}
        if tool.server:
            data["providerExecuted"] = True
        out.append(data)
        return out

    def _result(self, tool: ToolEvent) -> List[Dict[str, Any]]:
        self.announced.discard(tool.id)
        call = {"toolCallId": tool.id}
        if tool.paused:
            return []  # asked about at the end (_requests)
        if tool.refused and self.resumed.get(tool.id) is False:
            return [{"type": "tool-output-denied", **call}]
        if tool.error is not None or tool.refused or tool.discarded:
            text = tool.error or ("the call was refused" if tool.refused
                                  else "the call's result was discarded")
            return [{"type": "tool-output-error", **call, "errorText": text}]
        data: Dict[str, Any] = {"type": "tool-output-available", **call, "output": tool.result}
        if tool.server:
            data["providerExecuted"] = True
        out = [data]
        for part in tool.content:
            if isinstance(part, (Image, Document)):
                out.append({"type": "file", "mediaType": part.media_type,
                            "url": f"data:{part.media_type};base64,{part.data}"})
        return out

    def _cut_inputs(self) -> List[Dict[str, Any]]:
        """Calls whose input streamed but never became whole: closed as input errors,
        so no part is left streaming for ever."""
        out = [{"type": "tool-input-error", "toolCallId": call_id, "toolName": name,
                "input": None, "errorText": "the model's input for this call was cut off"}
               for call_id, name in self.started.items()]
        self.started.clear()
        return out


def _request(call_id: str, descriptor: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    data: Dict[str, Any] = {"type": "tool-approval-request", "approvalId": call_id,
                            "toolCallId": call_id}
    if descriptor is not None:
        data["approvalDescriptor"] = descriptor
    return data


def _subagent(event: Event) -> Dict[str, Any]:
    data: Dict[str, Any] = {"agent": list(event.agent), "via": event.via,
                            "kind": event.kind.value}
    if event.text:
        data["text"] = event.text
    tool = event.tool
    if tool is not None:
        data["tool"] = {"id": tool.id, "name": tool.name, "input": tool.input}
        if event.kind is Kind.TOOL_RESULT:
            data["tool"].update(result=tool.result, error=tool.error)
    if event.stop is not None:
        data["stop"] = event.stop.value
    return {"type": "data-subagent", "data": data, "transient": True}
