"""Anthropic Message Batches for :class:`~nacelle.batch.ProviderBatch` (see ``wires.py``
for the API and its sources).

A ``succeeded`` result holds a whole ``Message`` (the non-streaming answer of
https://docs.anthropic.com/en/api/messages). It is replayed into the backend's own
stream :class:`~nacelle.backends.anthropic.Accumulator` as the events
https://docs.anthropic.com/en/docs/build-with-claude/streaming documents for it —
``message_start``, per block a ``content_block_start`` (a ``tool_use`` block's input
then as one ``input_json_delta``, as calls always stream), ``content_block_stop``,
``message_delta`` with the stop reason and usage, ``message_stop`` — so the TurnEnd is
the streamed one's to the byte, server-side calls and pause_turn included.

Outer ring: imports the standard library, nacelle's core, ``batch.wires`` and the
Anthropic backend.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..backend import Request, TurnEnd
from ..backends.anthropic import Accumulator, to_wire
from ..backends.anthropic.claude import beta_header, open_server_calls
from ..context import RunContext
from ..errors import StreamError
from ..events import Event
from ..messages import Message
from .wires import Outcome, Status, Wire, error_of, lines, retry_after

__all__ = ["AnthropicWire", "message_events"]

_CALLS = ("tool_use", "server_tool_use", "mcp_tool_use")

#: ``processing_status`` values (the SDK's ``MessageBatch.processing_status``).
_ENDED = "ended"


class AnthropicWire(Wire):
    provider = "anthropic"
    base = "/v1/messages/batches"

    def params(self, request: Request, messages: Tuple[Message, ...]) -> Dict[str, Any]:
        body = to_wire(request, messages, model=self.backend.model)
        body.pop("stream", None)
        body["__betas"] = beta_header(request).get("anthropic-beta", "")
        return body

    def create(self, requests: Sequence[Tuple[str, Dict[str, Any]]], ctx: RunContext) -> str:
        betas = sorted({name for _, params in requests
                        for name in params.get("__betas", "").split(",") if name})
        wanted = [{"custom_id": custom_id,
                   "params": {k: v for k, v in params.items() if k != "__betas"}}
                  for custom_id, params in requests]
        headers = {"anthropic-beta": ",".join(betas)} if betas else None
        answer = self.json("POST", self.base, ctx, body={"requests": wanted}, headers=headers)
        batch_id = answer.get("id")
        if not isinstance(batch_id, str) or not batch_id:
            raise StreamError("Anthropic created a message batch without an id")
        return batch_id

    def status(self, batch_id: str, ctx: RunContext) -> Tuple[Status, Optional[float]]:
        response = self.http("GET", f"{self.base}/{batch_id}", ctx)
        answer = self.answer(response, "GET", self.base)
        word = answer.get("processing_status")
        counts = answer.get("request_counts")
        counts = {k: v for k, v in counts.items() if type(v) is int} if isinstance(
            counts, dict) else {}
        return (Status(word == _ENDED, word=str(word or "?")[:40], counts=counts),
                retry_after(response.headers))

    def results(self, batch_id: str, ctx: RunContext) -> Dict[str, Outcome]:
        raw = self.http("GET", f"{self.base}/{batch_id}/results", ctx).content
        out: Dict[str, Outcome] = {}
        for line in lines(raw, "an Anthropic batch result"):
            found = line.get("result")
            result: Dict[str, Any] = found if isinstance(found, dict) else {}
            kind = result.get("type")
            if kind == "succeeded":
                out[line["custom_id"]] = Outcome("succeeded", result.get("message"))
            elif kind == "errored":
                out[line["custom_id"]] = Outcome(
                    "errored", error=error_of(result.get("error"), 400, "Anthropic"))
            elif kind in ("expired", "canceled"):
                out[line["custom_id"]] = Outcome(kind)
        return out

    def turn(self, body: Any, request: Request,
             messages: Tuple[Message, ...]) -> Tuple[List[Event], TurnEnd]:
        state = Accumulator(pricing=self.backend.pricing, calls=open_server_calls(messages))
        events: List[Event] = []
        for name, data in message_events(body):
            events.extend(state.feed_event(name, data))
        return events, state.finish()


def message_events(message: Any) -> List[Tuple[str, Dict[str, Any]]]:
    """The stream events that carry ``message`` (a non-streamed Messages answer)."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise StreamError("Anthropic sent a batch result whose message has no content list")
    head = {k: v for k, v in message.items() if k not in ("content", "stop_reason")}
    head["content"] = []
    out: List[Tuple[str, Dict[str, Any]]] = [("message_start", {"message": head})]
    for index, block in enumerate(message["content"]):
        if not isinstance(block, dict):
            raise StreamError("Anthropic sent a batch result with a content block that is "
                              "not an object")
        kind = block.get("type")
        if kind in _CALLS:
            start = {k: v for k, v in block.items() if k != "input"}
            start["input"] = {}
            out.append(("content_block_start", {"index": index, "content_block": start}))
            text = json.dumps(block.get("input", {}), ensure_ascii=False)
            out.append(("content_block_delta", {"index": index, "delta": {
                "type": "input_json_delta", "partial_json": text}}))
        else:
            out.append(("content_block_start", {"index": index, "content_block": block}))
        out.append(("content_block_stop", {"index": index}))
    usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
    out.append(("message_delta", {"delta": {"stop_reason": message.get("stop_reason")},
                                  "usage": usage}))
    out.append(("message_stop", {}))
    return out
