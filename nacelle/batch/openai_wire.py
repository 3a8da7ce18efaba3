"""OpenAI Batch for :class:`~nacelle.batch.ProviderBatch`, over ``/v1/responses`` (the
Responses backend) or ``/v1/chat/completions`` (the Chat Completions backend); see
``wires.py`` for the API and its sources.

Statuses (https://platform.openai.com/docs/api-reference/batch/object, the SDK's
``openai.types.Batch.status``): ``validating``, ``in_progress`` and ``finalizing`` go
on; ``completed``, ``expired`` and ``cancelled`` have ended (an expired or cancelled
batch's finished requests are in its output file, the rest in its error file with
the codes ``batch_expired`` / ``batch_cancelled``); ``failed`` is the batch failed as a
whole (its ``errors.data`` say why). A Response body is fed to the backend's
accumulator as the ``response.completed`` (or ``response.incomplete``) event that
ends a stream and carries the whole response; a chat completion as the one chunk the
Chat backend reads from a server that cannot stream.

Outer ring: imports the standard library, nacelle's core, ``batch.wires``, the
OpenAI and Chat backends and (through their transport) ``requests``.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..backend import Request, TurnEnd
from ..backends.chat import _as_chunk
from ..context import RunContext
from ..errors import StreamError
from ..events import Event
from ..messages import Message
from ..sse import SSEEvent
from .._net.secrets import scrub
from .wires import Outcome, Status, Wire, error_of, lines, retry_after

__all__ = ["ChatWire", "ResponsesWire"]

_GOING = ("validating", "in_progress", "finalizing", "cancelling")
_ENDED = ("completed", "expired", "cancelled")
_GONE = {"batch_expired": "expired", "batch_cancelled": "canceled"}


class _OpenAIBatch(Wire):
    provider = "openai"
    endpoint_path = ""  # the batch's ``endpoint``, from the API's root

    def __init__(self, backend: Any) -> None:
        super().__init__(backend)
        # Each ended batch's output and error file ids, from its last status.
        self._files: Dict[str, Tuple[Any, Any]] = {}

    def body(self, request: Request, messages: Tuple[Message, ...]) -> Dict[str, Any]:
        raise NotImplementedError

    def params(self, request: Request, messages: Tuple[Message, ...]) -> Dict[str, Any]:
        body = self.body(request, messages)
        body.pop("stream", None)
        body.pop("stream_options", None)
        return body

    def create(self, requests: Sequence[Tuple[str, Dict[str, Any]]], ctx: RunContext) -> str:
        jsonl = "".join(json.dumps({"custom_id": custom_id, "method": "POST",
                                    "url": self.endpoint_path, "body": params},
                                   ensure_ascii=False, separators=(",", ":")) + "\n"
                        for custom_id, params in requests).encode("utf-8")
        upload = self.json("POST", "/files", ctx, data={"purpose": "batch"},
                           files={"file": ("batch.jsonl", jsonl, "application/jsonl")})
        file_id = upload.get("id")
        if not isinstance(file_id, str) or not file_id:
            raise StreamError("OpenAI stored the batch input file without an id")
        batch = self.json("POST", "/batches", ctx, body={
            "input_file_id": file_id, "endpoint": self.endpoint_path,
            "completion_window": "24h"})
        batch_id = batch.get("id")
        if not isinstance(batch_id, str) or not batch_id:
            raise StreamError("OpenAI created a batch without an id")
        return batch_id

    def status(self, batch_id: str, ctx: RunContext) -> Tuple[Status, Optional[float]]:
        response = self.http("GET", f"/batches/{batch_id}", ctx)
        answer = self.answer(response, "GET", "/batches")
        word = str(answer.get("status") or "?")[:40]
        counts = answer.get("request_counts")
        counts = {k: v for k, v in counts.items() if type(v) is int} if isinstance(
            counts, dict) else {}
        if word == "failed":
            errors = answer.get("errors")
            data = errors.get("data") if isinstance(errors, dict) else None
            said = "; ".join(str(e.get("message", ""))[:200] for e in data[:3]
                             if isinstance(e, dict)) if isinstance(data, list) else ""
            return Status(False, True, word, counts, said or "the batch failed"), None
        self._files[batch_id] = (answer.get("output_file_id"), answer.get("error_file_id"))
        return Status(word in _ENDED, word=word, counts=counts), retry_after(response.headers)

    def results(self, batch_id: str, ctx: RunContext) -> Dict[str, Outcome]:
        files = self._files.get(batch_id)
        if files is None:
            self.status(batch_id, ctx)
            files = self._files[batch_id]
        out: Dict[str, Outcome] = {}
        for file_id in files:
            if not isinstance(file_id, str) or not file_id:
                continue
            raw = self.http("GET", f"/files/{file_id}/content", ctx).content
            for line in lines(raw, "an OpenAI batch output"):
                out[line["custom_id"]] = _outcome(line)
        return out

    def _scrub(self) -> Any:
        return functools.partial(scrub, headers=self.endpoint.transport.request_headers())


def _outcome(line: Dict[str, Any]) -> Outcome:
    error = line.get("error")
    if isinstance(error, dict):
        gone = _GONE.get(str(error.get("code")))
        return Outcome(gone) if gone else Outcome("errored", error=error_of(error, 0, "OpenAI"))
    response = line.get("response")
    if not isinstance(response, dict):
        return Outcome("errored", error=error_of(None, 0, "OpenAI"))
    status = response.get("status_code")
    body = response.get("body")
    if status != 200:
        code = status if type(status) is int else 0
        return Outcome("errored", error=error_of(body, code, "OpenAI"))
    return Outcome("succeeded", body)


class ResponsesWire(_OpenAIBatch):
    endpoint_path = "/v1/responses"

    def body(self, request: Request, messages: Tuple[Message, ...]) -> Dict[str, Any]:
        from ..backends.openai import to_wire

        return to_wire(request, messages, model=self.backend.model)

    def turn(self, body: Any, request: Request,
             messages: Tuple[Message, ...]) -> Tuple[List[Event], TurnEnd]:
        state = self.backend._accumulator(self._scrub())
        status = body.get("status") if isinstance(body, dict) else None
        kind = {"completed": "response.completed", "incomplete": "response.incomplete",
                "failed": "response.failed"}.get(str(status), "response.completed")
        events = list(state.feed_event({"type": kind, "response": body}))
        return events, state.finish()


class ChatWire(_OpenAIBatch):
    endpoint_path = "/v1/chat/completions"

    def body(self, request: Request, messages: Tuple[Message, ...]) -> Dict[str, Any]:
        from ..backends.chat import to_wire

        return to_wire(request, messages, model=self.backend.model,
                       dialect=self.backend.dialect)

    def turn(self, body: Any, request: Request,
             messages: Tuple[Message, ...]) -> Tuple[List[Event], TurnEnd]:
        state = self.backend._accumulator(self._scrub(), seed=str(len(messages)))
        events = list(state.feed_chunk(_as_chunk(body)))
        events.extend(state.feed(SSEEvent(data="[DONE]")))
        return events, state.finish()
