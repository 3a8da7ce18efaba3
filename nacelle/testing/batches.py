"""FakeBatches: Anthropic Message Batches and OpenAI Batch on a :class:`FakeServer`, so
a batch job is tested offline, against a real socket::

    with FakeServer() as server:
        fake = server.batches(lambda endpoint, params: anthropic_message("Hi!"), polls=2)
        ...  # anthropic.Backend(base_url=server.url) inside ProviderBatch
        assert len(fake.created) == 1

``answer(endpoint, params)`` makes each request's response body: ``endpoint`` is
``"/v1/messages"``, ``"/v1/responses"`` or ``"/v1/chat/completions"`` and ``params``
the request body the client sent; :func:`anthropic_message`,
:func:`openai_response` and :func:`chat_completion` build the three shapes.

The shapes follow the providers' API references and SDK types:

- Anthropic (https://docs.anthropic.com/en/api/creating-message-batches,
  .../retrieving-message-batches, .../retrieving-message-batch-results; the
  ``anthropic`` SDK's ``MessageBatch``, ``MessageBatchRequestCounts`` and
  ``MessageBatchIndividualResponse``): ``POST /v1/messages/batches`` answers a
  ``message_batch`` ``in_progress`` with ``request_counts``; ``GET .../{id}``
  answers it, ``ended`` (with its ``results_url``) once ``polls`` retrievals have
  passed; ``GET .../{id}/results`` is the JSONL of ``{"custom_id", "result"}``,
  ``succeeded`` (with ``message``), ``errored`` (``{"type": "error", "error":
  {"type", "message"}}``) or ``expired``.
- OpenAI (https://platform.openai.com/docs/api-reference/batch,
  https://platform.openai.com/docs/api-reference/files; the ``openai`` SDK's
  ``FileObject``, ``Batch``, ``BatchRequestCounts`` and ``BatchRequestOutput``):
  ``POST /v1/files`` (multipart, ``purpose=batch``) answers a ``file``; ``POST
  /v1/batches`` a ``batch`` ``validating``; ``GET /v1/batches/{id}`` ``in_progress``
  until ``polls`` retrievals have passed, then ``completed`` with
  ``output_file_id`` and ``error_file_id`` (or ``failed`` with ``errors.data``);
  ``GET /v1/files/{id}/content`` the JSONL of ``{"id", "custom_id", "response":
  {"status_code", "request_id", "body"}, "error"}`` — an expired request a line of
  the error file with ``error.code`` ``batch_expired`` and no response.

Controls: ``polls`` (status retrievals before a batch ends, or a function of the
batch's number, 1 for the first made; settable later, say to end a batch a killed
client left polling), ``expire(custom_id, params) -> bool``,
``error(custom_id, params) -> (status, message) | None`` and ``fail`` (the first
``fail`` batches fail as a whole: OpenAI's ``failed`` status; Anthropic, which has
no such status, refuses the create call with a 529 ``overloaded_error`` that many
times). ``retry_after`` adds a ``Retry-After`` header to every status answer.
``created`` lists each batch made (its id and requests); ``answered`` counts the
requests answered, by custom id.

Public (``nacelle.testing``); imports the standard library only.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

__all__ = ["FakeBatches", "anthropic_message", "chat_completion", "openai_response"]

Answer = Callable[[str, Dict[str, Any]], Dict[str, Any]]

_ANTHROPIC = re.compile(r"^(?:.*)/messages/batches(?:/([A-Za-z0-9_-]+)(/results|/cancel)?)?$")
_FILES = re.compile(r"^(?:.*)/files(?:/([A-Za-z0-9_-]+)/content)?$")
_OPENAI = re.compile(r"^(?:.*)/batches(?:/([A-Za-z0-9_-]+)(/cancel)?)?$")


@dataclass
class _Batch:
    id: str
    kind: str  # "anthropic" or the OpenAI endpoint
    requests: List[Tuple[str, Dict[str, Any]]]
    number: int = 0
    polled: int = 0
    failed: bool = False
    output: str = ""
    errors: str = ""
    lines: List[Dict[str, Any]] = field(default_factory=list)


class FakeBatches:
    """The batch APIs a :class:`FakeServer` serves; see the module docstring."""

    def __init__(self, answer: Answer, *, polls: Union[int, Callable[[int], int]] = 0,
                 expire: Optional[Callable[[str, Dict[str, Any]], bool]] = None,
                 error: Optional[Callable[[str, Dict[str, Any]],
                                          Optional[Tuple[int, str]]]] = None,
                 fail: int = 0, retry_after: Optional[float] = None) -> None:
        self.answer = answer
        self.polls = polls
        self.expire = expire
        self.error = error
        self.fail = fail
        self.retry_after = retry_after
        self.created: List[_Batch] = []
        self.answered: Dict[str, int] = {}
        self._batches: Dict[str, _Batch] = {}
        self._files: Dict[str, bytes] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def handle(self, method: str, path: str, headers: Dict[str, str],
               body: bytes) -> Optional[Tuple[int, Dict[str, str], bytes, str]]:
        """The reply to a batch API request — ``(status, headers, body, content
        type)`` — or None when ``path`` is not one of theirs."""
        with self._lock:
            found = _ANTHROPIC.match(path)
            if found:
                return self._anthropic(method, found.group(1), found.group(2), body)
            found = _FILES.match(path)
            if found:
                return self._file(method, found.group(1), headers, body)
            found = _OPENAI.match(path)
            if found:
                return self._openai(method, found.group(1), body)
        return None

    # -- Anthropic --------------------------------------------------------------------

    def _anthropic(self, method: str, batch_id: Optional[str], tail: Optional[str],
                   body: bytes) -> Tuple[int, Dict[str, str], bytes, str]:
        if batch_id is None and method == "POST":
            if self.fail > 0:
                self.fail -= 1
                return _json({"type": "error", "error": {
                    "type": "overloaded_error", "message": "Overloaded"}}, 529)
            wanted = json.loads(body)["requests"]
            batch = self._new("msgbatch_", "anthropic",
                              [(r["custom_id"], r["params"]) for r in wanted])
            return _json(self._anthropic_object(batch))
        found = self._batches.get(batch_id or "")
        if found is None:
            return _json({"type": "error", "error": {"type": "not_found_error",
                                                     "message": "batch not found"}}, 404)
        batch = found
        if tail == "/results":
            if not self._ended(batch):
                return _json({"type": "error", "error": {
                    "type": "invalid_request_error",
                    "message": "results are not available until the batch has ended"}}, 400)
            self._finish(batch)
            out = "".join(json.dumps(line) + "\n" for line in batch.lines)
            return 200, {}, out.encode(), "application/binary"
        batch.polled += 1
        return _json(self._anthropic_object(batch), headers=self._after())

    def _anthropic_object(self, batch: _Batch) -> Dict[str, Any]:
        ended = self._ended(batch)
        if ended:
            self._finish(batch)
        kinds = [line["result"]["type"] for line in batch.lines] if ended else []
        return {
            "id": batch.id, "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": 0 if ended else len(batch.requests),
                "succeeded": kinds.count("succeeded"), "errored": kinds.count("errored"),
                "canceled": kinds.count("canceled"), "expired": kinds.count("expired")},
            "ended_at": "2026-12-01T00:00:00Z" if ended else None,
            "created_at": "2026-12-01T00:00:00Z", "expires_at": "2026-12-02T00:00:00Z",
            "archived_at": None, "cancel_initiated_at": None,
            "results_url": (f"https://api.anthropic.com/v1/messages/batches/{batch.id}/results"
                            if ended else None)}

    # -- OpenAI -----------------------------------------------------------------------

    def _file(self, method: str, file_id: Optional[str], headers: Dict[str, str],
              body: bytes) -> Tuple[int, Dict[str, str], bytes, str]:
        if file_id is None and method == "POST":
            fields = _multipart(headers.get("content-type", ""), body)
            new = f"file-{next(self._ids)}"
            self._files[new] = fields.get("file", b"")
            return _json({"id": new, "object": "file", "bytes": len(self._files[new]),
                          "created_at": 1764547200, "filename": "batch.jsonl",
                          "purpose": fields.get("purpose", b"").decode()})
        data = self._files.get(file_id or "")
        if data is None:
            return _json({"error": {"message": "No such File object", "type":
                                    "invalid_request_error", "code": None}}, 404)
        return 200, {}, data, "application/octet-stream"

    def _openai(self, method: str, batch_id: Optional[str],
                body: bytes) -> Tuple[int, Dict[str, str], bytes, str]:
        if batch_id is None and method == "POST":
            asked = json.loads(body)
            data = self._files.get(asked.get("input_file_id", ""), b"")
            lines = [json.loads(line) for line in data.splitlines() if line.strip()]
            batch = self._new("batch_", asked["endpoint"],
                              [(line["custom_id"], line["body"]) for line in lines])
            if self.fail > 0:
                self.fail -= 1
                batch.failed = True
            return _json(self._openai_object(batch, asked))
        found = self._batches.get(batch_id or "")
        if found is None:
            return _json({"error": {"message": "No such batch", "type":
                                    "invalid_request_error", "code": None}}, 404)
        batch = found
        batch.polled += 1
        return _json(self._openai_object(batch, None), headers=self._after())

    def _openai_object(self, batch: _Batch, asked: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        status = "validating" if asked is not None else "in_progress"
        errors = None
        if batch.failed and asked is None:
            status = "failed"
            errors = {"object": "list", "data": [{"code": "invalid_request", "line": 1,
                                                  "message": "the batch failed validation",
                                                  "param": None}]}
        elif asked is None and self._ended(batch):
            status = "completed"
            self._finish(batch)
        done = [line for line in batch.lines]
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.kind, "errors": errors,
            "input_file_id": "file-input", "completion_window": "24h", "status": status,
            "output_file_id": batch.output or None, "error_file_id": batch.errors or None,
            "created_at": 1764547200, "in_progress_at": None, "expires_at": 1764633600,
            "completed_at": 1764550800 if status == "completed" else None,
            "failed_at": None, "expired_at": None, "metadata": None,
            "request_counts": {"total": len(batch.requests),
                               "completed": sum(1 for d in done if d.get("error") is None),
                               "failed": sum(1 for d in done if d.get("error") is not None)}}

    # -- both ---------------------------------------------------------------------------

    def _new(self, prefix: str, kind: str, requests: List[Tuple[str, Dict[str, Any]]]) -> _Batch:
        batch = _Batch(f"{prefix}{next(self._ids):04d}", kind, requests,
                       number=len(self.created) + 1)
        self._batches[batch.id] = batch
        self.created.append(batch)
        return batch

    def _finish(self, batch: _Batch) -> None:
        """Answer every request of ``batch``, once."""
        if batch.lines or batch.output or batch.errors:
            return
        good: List[Dict[str, Any]] = []
        bad: List[Dict[str, Any]] = []
        for custom_id, params in batch.requests:
            line = self._line(batch, custom_id, params)
            batch.lines.append(line)
            (bad if line.get("error") else good).append(line)
        if batch.kind != "anthropic":
            for lines, attr in ((good, "output"), (bad, "errors")):
                if lines:
                    file_id = f"file-{next(self._ids)}"
                    self._files[file_id] = "".join(
                        json.dumps(line) + "\n" for line in lines).encode()
                    setattr(batch, attr, file_id)

    def _line(self, batch: _Batch, custom_id: str, params: Dict[str, Any]) -> Dict[str, Any]:
        anthropic = batch.kind == "anthropic"
        if self.expire is not None and self.expire(custom_id, params):
            if anthropic:
                return {"custom_id": custom_id, "result": {"type": "expired"}}
            return {"id": f"batch_req_{custom_id}", "custom_id": custom_id, "response": None,
                    "error": {"code": "batch_expired", "message": "This request could not "
                              "be executed before the completion window expired."}}
        failure = self.error(custom_id, params) if self.error is not None else None
        if failure is not None:
            status, message = failure
            if anthropic:
                return {"custom_id": custom_id, "result": {"type": "errored", "error": {
                    "type": "error", "error": {"type": "invalid_request_error",
                                               "message": message}}}}
            return {"id": f"batch_req_{custom_id}", "custom_id": custom_id, "error": None,
                    "response": {"status_code": status, "request_id": f"req_{custom_id}",
                                 "body": {"error": {"message": message, "type":
                                                    "invalid_request_error",
                                                    "param": None, "code": None}}}}
        self.answered[custom_id] = self.answered.get(custom_id, 0) + 1
        endpoint = "/v1/messages" if anthropic else batch.kind
        body = self.answer(endpoint, params)
        if anthropic:
            return {"custom_id": custom_id, "result": {"type": "succeeded", "message": body}}
        return {"id": f"batch_req_{custom_id}", "custom_id": custom_id, "error": None,
                "response": {"status_code": 200, "request_id": f"req_{custom_id}",
                             "body": body}}

    def _ended(self, batch: _Batch) -> bool:
        polls = self.polls(batch.number) if callable(self.polls) else self.polls
        return batch.polled > polls

    def _after(self) -> Dict[str, str]:
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}


def _json(value: Any, status: int = 200,
          headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], bytes, str]:
    return status, dict(headers or {}), json.dumps(value).encode(), "application/json"


def _multipart(content_type: str, body: bytes) -> Dict[str, bytes]:
    """The fields of a ``multipart/form-data`` body, by name."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    fields: Dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str):
            fields[name] = payload if isinstance(payload, bytes) else b""
    return fields


# -- response bodies -------------------------------------------------------------------

ToolCalls = Sequence[Tuple[str, str, Dict[str, Any]]]  # (id, name, input)


def anthropic_message(text: str = "", *, tool_calls: ToolCalls = (),
                      stop_reason: Optional[str] = None, input_tokens: int = 10,
                      output_tokens: int = 5, model: str = "claude-opus-5") -> Dict[str, Any]:
    """A Messages API ``Message`` (https://docs.anthropic.com/en/api/messages)."""
    content: List[Dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in tool_calls]
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": content,
            "stop_reason": stop_reason or ("tool_use" if tool_calls else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def openai_response(text: str = "", *, tool_calls: ToolCalls = (), input_tokens: int = 10,
                    output_tokens: int = 5, model: str = "gpt-5-mini") -> Dict[str, Any]:
    """A Responses API ``Response`` (https://platform.openai.com/docs/api-reference/responses/object)."""
    output: List[Dict[str, Any]] = []
    if text:
        output.append({"type": "message", "id": "msg_fake", "status": "completed",
                       "role": "assistant", "content": [
                           {"type": "output_text", "text": text, "annotations": []}]})
    output += [{"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": n,
                "arguments": json.dumps(a), "status": "completed"} for i, n, a in tool_calls]
    return {"id": "resp_fake", "object": "response", "status": "completed", "model": model,
            "output": output, "incomplete_details": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def chat_completion(text: str = "", *, tool_calls: ToolCalls = (), input_tokens: int = 10,
                    output_tokens: int = 5, model: str = "gpt-5-mini") -> Dict[str, Any]:
    """A Chat Completions ``chat.completion``
    (https://platform.openai.com/docs/api-reference/chat/object)."""
    message: Dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {
            "name": n, "arguments": json.dumps(a)}} for i, n, a in tool_calls]
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1764547200,
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if tool_calls
                                         else "stop"}],
            "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens}}
