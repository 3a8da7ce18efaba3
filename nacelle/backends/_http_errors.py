"""How a failed model HTTP exchange becomes a nacelle error, and how long to wait
before trying again.

It holds :func:`parse_error` (an error response of Anthropic, OpenRouter or anything
else to an :class:`~nacelle.errors.APIError`), :func:`api_error` (the same with the
hint that says what to fix and the secrets scrubbed), :func:`retry_delay` (the
official SDKs' rule, honouring ``retry-after-ms`` and ``retry-after``),
:func:`describe` (a ``requests`` failure before any response, in words that name the
host and port), :func:`stalled`, and the small text helpers these share
(:func:`where`, :func:`preview`, :func:`scrub`).

Everything here is a pure function of a status, headers, body bytes or an exception
already caught: no socket is touched, so each rule is tested with plain values.
``backends/_http.py`` does the I/O and calls these.

Choices where the contract is silent:

- A server's ``retry-after`` is trusted only within (0, 60] seconds, as the SDKs do;
  outside it the jittered backoff applies (a huge value is more likely a bug or a
  hostile proxy than advice worth a run's time).
- Provider messages and body previews are cut to one line of at most
  ``PREVIEW_CHARS`` characters: an HTML error page must not flood a log.
- Secrets are scrubbed by value, not by pattern: any header whose name looks secret
  (``key``, ``auth``, ``token``…) has its value — and the token after ``Bearer `` —
  replaced by ``<hidden>`` wherever a provider echoed it. Each text is scrubbed
  *before* it is cut to its preview length: cut first, a key straddling the cut
  would leave its first half behind, where no scrubber recognises it. The stream
  accumulators are given :func:`scrub` too, for errors that arrive inside a 200
  stream, so there is one way secrets are hidden.
- Error bodies are read with :func:`nacelle.sse.parse_json`: a body nested a
  hundred thousand levels deep, or holding ``NaN``, is previewed like any other
  body that is not the JSON we expect, rather than raising ``RecursionError``.

Outer ring: imports the standard library, ``nacelle.errors``, ``nacelle.sse``
(``parse_json``), ``nacelle._net.secrets`` (``scrub``) and (for the exception types
only) ``requests``; never ``_http``, which imports this.
"""

from __future__ import annotations

import email.utils
import json
import socket
import time
from typing import Any, Callable, Mapping, Optional

import requests

from ..errors import RETRYABLE_STATUSES, APIError, StreamError
from ..sse import parse_json
from .._net.secrets import scrub

__all__ = [
    "PREVIEW_CHARS", "api_error", "describe", "parse_error", "preview", "retry_delay",
    "scrub", "stalled", "where",
]

PREVIEW_CHARS = 300


def parse_error(status: int, headers: Mapping[str, str], body: bytes,
                secrets: Optional[Mapping[str, str]] = None) -> APIError:
    """An ``APIError`` from an error response of Anthropic, OpenRouter or anything else.

    Anthropic: ``{"type":"error","error":{"type","message"},"request_id"}`` and a
    ``request-id`` header. OpenRouter: ``{"error":{"code","message","metadata"}}`` and
    maybe ``x-request-id`` / ``x-generation-id``. Google (Gemini):
    ``{"error":{"code","message","status","details"}}``, its ``status`` the type and
    a ``RetryInfo`` detail's ``retryDelay`` the wait when no header gives one.
    AWS (Bedrock): ``{"message"}`` with the error's type in ``x-amzn-ErrorType`` (before
    any ``:``) and ``x-amzn-RequestId``
    (https://docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html). Other
    bodies give a short preview.
    The values of ``secrets`` are scrubbed from every text before it is shortened.
    """
    def clean(text: str) -> str:
        return scrub(text, secrets) if secrets else text

    type_, message, request_id = "", "", ""
    try:
        document = parse_json(body.decode("utf-8")) if body.strip() else None
    except ValueError:
        document = None
    error: Any = document.get("error") if isinstance(document, dict) else None
    if isinstance(error, dict):
        # Google's APIs name the kind of error in ``status`` (INVALID_ARGUMENT,
        # RESOURCE_EXHAUSTED: https://ai.google.dev/gemini-api/docs/troubleshooting)
        type_ = clean(_text(error.get("type")) or _text(error.get("status")))
        message = clean(_text(error.get("message")))
        metadata = error.get("metadata")
        if isinstance(metadata, dict):
            type_ = type_ or clean(_text(metadata.get("error_type")))
            raw = metadata.get("raw")
            provider = clean(_text(metadata.get("provider_name")))
            if raw:
                raw = raw if isinstance(raw, str) else json.dumps(raw)
                message += f" ({provider + ': ' if provider else ''}{_shorten(clean(raw))})"
            elif provider:
                message += f" ({provider})"
        request_id = _text(document.get("request_id")) if isinstance(document, dict) else ""
    elif isinstance(error, str):
        message = clean(error)
    elif isinstance(document, dict) and isinstance(document.get("message"), str):
        message = clean(document["message"])
    elif body.strip():
        message = preview(clean(body[:8 * PREVIEW_CHARS].decode("utf-8", "replace")).encode())
    lowered = {k.lower(): v for k, v in headers.items()}
    if not type_ and lowered.get("x-amzn-errortype"):  # AWS: "ThrottlingException:http://..."
        type_ = clean(lowered["x-amzn-errortype"].split(":", 1)[0].strip())
    request_id = (lowered.get("request-id") or lowered.get("x-request-id") or request_id
                  or lowered.get("x-generation-id") or lowered.get("x-amzn-requestid") or "")
    should = lowered.get("x-should-retry", "").strip().lower()
    retry = True if should == "true" else False if should == "false" else status in RETRYABLE_STATUSES
    after = _retry_after(lowered)
    if after is None and isinstance(error, dict):
        after = _retry_info(error.get("details"))
    return APIError(status, _shorten(type_), _shorten(message), _shorten(clean(request_id)),
                    after, retryable=retry)


def api_error(status: int, headers: Mapping[str, str], body: bytes, *, name: str,
              base_url: str, path: str, key_variable: str = "",
              secrets: Optional[Mapping[str, str]] = None, auth_hint: str = "") -> APIError:
    """:func:`parse_error` plus the hint where the status makes the fix clear, with the
    values of ``secrets`` (the request's headers) scrubbed from every text."""
    error = parse_error(status, headers, body, secrets)
    # Google answers a key it does not know with 400 INVALID_ARGUMENT and an ErrorInfo
    # detail whose reason is API_KEY_INVALID: the fix is the 401's.
    keyless = status == 400 and b'"API_KEY_INVALID"' in body
    said = hint(401 if keyless else status, name=name, base_url=base_url, path=path, key_variable=key_variable,
                location=_header(headers, "location"), auth_hint=auth_hint)
    message = error.message
    if said:
        message = f"{message} — {said}" if message else said
    return APIError(error.status, error.type, message, error.request_id,
                    error.retry_after, retryable=error.retryable)


def retry_delay(headers: Mapping[str, str], retries_done: int,
                rng: Optional[Callable[[], float]] = None) -> float:
    """Seconds to wait before retry number ``retries_done + 1``, the SDKs' rule
    (``rng``: ``random.random`` unless given; imported at the first retry)."""
    if rng is None:
        import random

        rng = random.random
    after = _retry_after({k.lower(): v for k, v in headers.items()})
    if after is not None and 0 < after <= 60:
        return float(after)
    return float(min(0.5 * 2 ** retries_done, 8.0) * (1 - 0.25 * rng()))


def hint(status: int, *, name: str, base_url: str, path: str, key_variable: str = "",
         location: str = "", auth_hint: str = "") -> str:
    """What to fix for ``status``, or "" where the status does not make it clear.

    ``auth_hint`` replaces the API-key advice of a 401 and a 403 for a backend whose
    credentials are not one key (a cloud's token or signing keys)."""
    if auth_hint and status in (401, 403):
        return auth_hint if status == 401 else (
            f"the credentials are not allowed to make this request ({auth_hint})")
    if status == 401:
        variable = f"${key_variable} or " if key_variable else ""
        return f"check the API key ({variable}the api_key argument)"
    if status == 402:
        return f"the {name} account is out of credits or over its spending limit"
    if status == 403:
        return "the API key is not allowed to make this request"
    if status == 404:
        return f"check the model name and base_url ({base_url}{path}) for {name}"
    if 300 <= status < 400:
        return (f"the server redirected to {location or 'another address'}; redirects are not "
                f"followed — check base_url ({base_url})")
    return ""


def describe(exc: requests.RequestException, where: str, connect: float, read: float) -> str:
    """A failure before any response, in words: what went wrong reaching ``where``."""
    if isinstance(exc, requests.ConnectTimeout):
        return f"timed out connecting to {where} after {connect:g}s"
    if isinstance(exc, requests.ReadTimeout):
        return f"no response from {where} within {read:g}s (read timeout)"
    reason = _root_cause(exc)
    if isinstance(reason, ConnectionRefusedError):
        return f"cannot connect to {where}: connection refused"
    if isinstance(exc, requests.exceptions.SSLError):
        return f"TLS handshake with {where} failed"
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host of {where}"
    if isinstance(reason, OSError) and reason.strerror:
        return f"connection to {where} failed before a response: {reason.strerror}"
    return f"connection to {where} failed before a response ({type(reason).__name__})"


def stalled(where: str, seconds: float) -> StreamError:
    """The retryable error of a stream with no event for ``seconds`` (stall_timeout)."""
    return StreamError(
        f"the stream from {where} stalled: no event for {seconds:g}s (stall_timeout)",
        retryable=True)


def where(url: str) -> str:
    """``host:port`` of ``url`` for messages (``[::1]:port`` for IPv6), no path or query."""
    from urllib.parse import urlsplit  # loaded by the transport anyway; not with the backends

    parts = urlsplit(url)
    try:
        port: object = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = "?"
    host = parts.hostname or "?"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def preview(body: bytes) -> str:
    """The start of ``body`` as one short line of text."""
    return _shorten(body[:4 * PREVIEW_CHARS].decode("utf-8", "replace"))


# -- helpers of the functions above ---------------------------------------------------


def _retry_after(headers: Mapping[str, str]) -> Optional[float]:
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return when.timestamp() - time.time()


def _retry_info(details: Any) -> Optional[float]:
    """Seconds from a ``google.rpc.RetryInfo`` detail's ``retryDelay`` ("17s", a
    protobuf Duration in JSON), which Google's APIs send with a 429 in place of a
    ``retry-after`` header (https://ai.google.dev/gemini-api/docs/rate-limits)."""
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            delay = detail.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                try:
                    return float(delay[:-1])
                except ValueError:
                    return None
    return None


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1] + "…"


def _root_cause(exc: BaseException) -> BaseException:
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = exc.__cause__ or exc.__context__
        if inner is None and exc.args and isinstance(exc.args[0], BaseException):
            inner = exc.args[0]
        if inner is None:
            inner = getattr(exc, "reason", None)
        if not isinstance(inner, BaseException):
            return exc
        exc = inner
    return exc
