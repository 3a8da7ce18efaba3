"""The two provider batch APIs as one shape: build a turn's request, create a batch,
read its status, read its results, and make a result the TurnEnd a streamed turn gives.

- Anthropic Message Batches (https://docs.anthropic.com/en/api/creating-message-batches,
  .../retrieving-message-batches, .../retrieving-message-batch-results; the SDK's
  ``anthropic.types.messages.MessageBatch`` and ``MessageBatchIndividualResponse``):
  ``POST /v1/messages/batches`` with ``{"requests": [{"custom_id", "params"}]}``, poll
  ``GET /v1/messages/batches/{id}`` until ``processing_status`` is ``ended``, then read
  the JSONL of ``GET /v1/messages/batches/{id}/results``: one
  ``{"custom_id", "result": {"type": "succeeded" | "errored" | "canceled" | "expired"}}``
  a line, a ``succeeded`` one holding the ``message``. The results are read from that
  documented path on the backend's own base URL rather than from the ``results_url``
  the batch names, so the key is never sent to a host the backend was not given.
- OpenAI Batch (https://platform.openai.com/docs/api-reference/batch and
  https://platform.openai.com/docs/api-reference/files; the SDK's ``openai.types.Batch``
  and ``BatchRequestOutput``): the requests as a JSONL file of
  ``{"custom_id", "method": "POST", "url", "body"}`` uploaded with
  ``POST /files`` (``purpose=batch``), then ``POST /batches`` with the file's id, the
  ``endpoint`` (``/v1/responses`` for the Responses backend, ``/v1/chat/completions``
  for Chat Completions) and ``completion_window`` ``24h``; poll ``GET /batches/{id}``
  until ``completed``, ``expired``, ``cancelled`` or ``failed``, then read
  ``GET /files/{output_file_id}/content`` and ``.../{error_file_id}/content``: a line
  per request, ``{"custom_id", "response": {"status_code", "body"}, "error"}``.

Each request body is the backend's own (its ``to_wire``, without ``stream``), and each
result is fed to the backend's own accumulator — an Anthropic message as the stream
events that would have carried it, a Response as its ``response.completed`` event, a
chat completion as the one chunk the Chat backend already reads when a server cannot
stream — so a batched turn ends in the very TurnEnd (text, calls, usage, stop) a
streamed one does.

Outer ring: imports the standard library, nacelle's core, the Anthropic, OpenAI and
Chat backends (their wire builders and accumulators) and, through their transport,
``requests``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._loggers import get_logger
from ..backend import Request, TurnEnd
from ..context import RunContext
from ..errors import APIError, StreamError
from ..events import Event
from ..messages import Message
from ..sse import SSEEvent, parse_json

__all__ = ["Outcome", "Status", "Wire", "error_of", "lines", "retry_after"]

log = get_logger(__name__)

#: How many HTTP attempts one batch call makes (honouring Retry-After between them).
ATTEMPTS = 4
#: The most a status answer's Retry-After may hold the poll back, in seconds.
MAX_RETRY_AFTER = 600.0


@dataclass(frozen=True)
class Status:
    """Where one provider batch stands: ``ended`` (results can be read), ``failed``
    (the provider failed the batch as a whole: ``error`` says why), the provider's
    own status word and its request counts."""

    ended: bool
    failed: bool = False
    word: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class Outcome:
    """One request's result: ``kind`` is ``succeeded`` (``body`` the response),
    ``errored`` (``error`` the provider's), ``expired`` or ``canceled``."""

    kind: str
    body: Any = None
    error: Optional[APIError] = None


class Wire:
    """One provider's batch API over a backend's endpoint (see the module docstring)."""

    provider = ""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.endpoint = backend._endpoint  # the backend's base URL, key and timeouts

    # -- requests -------------------------------------------------------------------

    def params(self, request: Request, messages: Tuple[Message, ...]) -> Dict[str, Any]:
        raise NotImplementedError

    def create(self, requests: Sequence[Tuple[str, Dict[str, Any]]], ctx: RunContext) -> str:
        raise NotImplementedError

    def status(self, batch_id: str, ctx: RunContext) -> Tuple[Status, Optional[float]]:
        raise NotImplementedError

    def results(self, batch_id: str, ctx: RunContext) -> Dict[str, Outcome]:
        raise NotImplementedError

    def turn(self, body: Any, request: Request,
             messages: Tuple[Message, ...]) -> Tuple[List[Event], TurnEnd]:
        raise NotImplementedError

    # -- HTTP -----------------------------------------------------------------------

    def http(self, method: str, path: str, ctx: RunContext, *, body: Any = None,
             files: Any = None, data: Any = None,
             headers: Optional[Mapping[str, str]] = None) -> Any:
        """One call of the batch API: the ``requests`` response of a 2xx, after up to
        :data:`ATTEMPTS` tries of a retryable failure, ``Retry-After`` honoured through
        ``ctx.sleep`` (so a test's FakeClock drives it); an ``APIError`` otherwise."""
        from ..backends._http_errors import api_error, retry_delay

        transport = self.endpoint.transport
        url = transport.base_url + path
        sent = dict(transport.request_headers())
        sent.update(headers or {})
        payload = None
        if body is not None:
            sent["Content-Type"] = "application/json"
            payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        attempt = 0
        while True:
            ctx.check()
            left = ctx.remaining()
            read = transport.timeout if left is None else max(min(transport.timeout, left), 0.001)
            try:
                response = transport.session.request(
                    method, url, data=payload if files is None else data, files=files,
                    headers=sent, timeout=(transport.connect_timeout, read),
                    allow_redirects=False)
            except Exception as exc:  # noqa: BLE001 - requests' failures, before any answer
                failure: Exception = StreamError(f"{self.endpoint.name}: {method} {path} "
                                                 f"failed: {type(exc).__name__}")
                delay, retryable, headers_seen = retry_delay({}, attempt), True, {}
            else:
                if response.status_code < 300:
                    return response
                failure = api_error(response.status_code, response.headers, response.content,
                                    name=self.endpoint.name, base_url=transport.base_url,
                                    path=path, secrets=transport.request_headers())
                retryable = failure.retryable
                headers_seen = dict(response.headers)
                delay = retry_delay(headers_seen, attempt)
                response.close()
            attempt += 1
            if not retryable or attempt >= ATTEMPTS:
                raise failure
            log.debug("%s %s: %s; retry %d in %.2fs", method, path, failure, attempt, delay)
            ctx.sleep(delay)

    def json(self, method: str, path: str, ctx: RunContext, **options: Any) -> Dict[str, Any]:
        return self.answer(self.http(method, path, ctx, **options), method, path)

    def answer(self, response: Any, method: str, path: str) -> Dict[str, Any]:
        """The JSON object a 2xx response holds; a ``StreamError`` for anything else."""
        try:
            value = parse_json(response.content)
        except (ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raise StreamError(f"{self.endpoint.name} answered {method} {path} with a body "
                              "that is not a JSON object")
        return value


def retry_after(headers: Any) -> Optional[float]:
    """The seconds a response's ``Retry-After`` (or ``retry-after-ms``) asks for."""
    from ..backends._http_errors import _retry_after

    return _retry_after({str(k).lower(): v for k, v in dict(headers).items()})


def lines(raw: bytes, what: str) -> List[Dict[str, Any]]:
    """The JSON objects of a JSONL body; a line that is not one is logged and skipped
    (its request then has no result, and goes again)."""
    out = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = parse_json(line)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict) and isinstance(value.get("custom_id"), str):
            out.append(value)
        else:
            log.warning("%s line %d is not a result; its request goes again", what, number)
    return out


def error_of(value: Any, status: int, provider: str) -> APIError:
    """An ``APIError`` from a provider's error object (``{"type", "message"}``, or
    ``{"code", "message"}``, or either nested under ``error``)."""
    for _ in range(3):  # Anthropic nests it twice: {"type": "error", "error": {...}}
        inner = value.get("error") if isinstance(value, dict) else None
        if isinstance(inner, dict):
            value = inner
    if not isinstance(value, dict):
        return APIError(status, "", f"{provider} failed this batch request", retryable=False)
    kind = value.get("type") or value.get("code") or ""
    message = value.get("message") or ""
    return APIError(status, str(kind)[:80], str(message)[:300], retryable=False)
