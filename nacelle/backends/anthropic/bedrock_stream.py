"""Bedrock's event stream read as the Anthropic stream it carries.

:class:`BedrockEvents` is the transport's decoder for an
``application/vnd.amazon.eventstream`` body (``feed``, ``close``, ``truncated``, as
:class:`~nacelle.sse.SSEDecoder` has): it decodes the framing with
:class:`~nacelle.backends.anthropic.eventstream.EventStreamDecoder` and turns each
``chunk`` message — payload ``{"bytes": base64(<an Anthropic stream event>)}`` — into
the SSE event the Anthropic API would have sent, so the Anthropic accumulator reads it
unchanged. An exception message (``:message-type: exception`` and its
``:exception-type``; an ``error`` message's ``:error-code`` likewise) becomes an event
:class:`BedrockAccumulator` raises as a :class:`~nacelle.errors.StreamError` of that
type, scrubbed like every error made from what the provider sent, retryable for the
types the API reference says to retry (the ``ResponseStream`` union of
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html:
throttling, internal server, model stream error, model timeout, service unavailable;
not ``validationException``). A chunk whose payload is not the base64 of UTF-8 text,
or a message of an unknown type, is a ``StreamError``; an event of a kind this reader
does not know is skipped, as the Anthropic stream's unknown events are.

Outer ring: imports the standard library, nacelle's core (``errors``, ``events``,
``sse``) and, beside it, ``eventstream`` and ``stream``.
"""

from __future__ import annotations

import binascii
import functools
import json
import re
import sys
from typing import Any, Callable, Dict, List, Optional

from ...errors import StreamError
from ...events import Event
from ...sse import SSEEvent, parse_json
from .eventstream import EventStreamDecoder, HeaderValue
from .stream import Accumulator

__all__ = ["BedrockAccumulator", "BedrockEvents", "RETRYABLE"]

#: Exceptions inside a Bedrock stream that the API reference says to retry.
RETRYABLE = frozenset({"internalServerException", "modelStreamErrorException",
                        "throttlingException", "modelTimeoutException",
                        "serviceUnavailableException"})
_EXCEPTION = "bedrock-exception"  # the SSE event name an in-stream exception is passed as
# A chunk's payload as Bedrock spells it, ``bytes`` then the optional padding ``p``:
# base64 (no JSON escape can be in it) and alphanumeric padding; JSON's whitespace only.
# Compiled at the first chunk (a third of a millisecond an import need not pay).
_PLAIN_CHUNK = (rb'[ \t\n\r]*\{[ \t\n\r]*"bytes"[ \t\n\r]*:[ \t\n\r]*"([A-Za-z0-9+/]*={0,2})"'
                rb'[ \t\n\r]*(?:,[ \t\n\r]*"p"[ \t\n\r]*:[ \t\n\r]*"[A-Za-z0-9]*"[ \t\n\r]*)?'
                rb'\}[ \t\n\r]*')


def _compile_plain_chunk(payload: bytes) -> Optional[re.Match[bytes]]:
    """The first chunk's match: compiles the pattern and puts its ``fullmatch`` in
    ``_plain_chunk``'s place for every later chunk."""
    global _plain_chunk
    _plain_chunk = re.compile(_PLAIN_CHUNK).fullmatch
    return _plain_chunk(payload)


_plain_chunk: Callable[[bytes], Optional[re.Match[bytes]]] = _compile_plain_chunk


_new_event = object.__new__
if sys.version_info >= (3, 11):
    # What b64decode(validate=True) calls on 3.11 and later, without its wrapper.
    _b64decode = functools.partial(binascii.a2b_base64, strict_mode=True)
else:
    import base64  # before 3.11, a2b_base64 has no strict mode: b64decode checks

    _b64decode = functools.partial(base64.b64decode, validate=True)


class BedrockEvents:
    """Bedrock's event-stream body as the SSE events of the Anthropic stream it carries;
    the transport's decoder (``feed``, ``close``, ``truncated``)."""

    def __init__(self) -> None:
        self._decoder = EventStreamDecoder()

    @property
    def truncated(self) -> bool:
        return self._decoder.truncated

    def close(self) -> List[SSEEvent]:
        self._decoder.close()
        return []

    def feed(self, data: bytes) -> List[SSEEvent]:
        out = []
        for headers, payload in self._decoder.feed_pairs(data):
            if headers.get(":message-type") == "event" and headers.get(":event-type") == "chunk":
                # SSEEvent(data=...), made as the SSE decoder makes its events: the
                # new instance's dict filled, not a frozen __init__'s four setattr calls.
                chunk = _new_event(SSEEvent)
                fields = chunk.__dict__
                fields["event"] = "message"
                fields["data"] = _chunk(payload)
                fields["id"] = ""
                fields["retry"] = None
                out.append(chunk)
                continue
            other = _event(headers, payload)
            if other is not None:
                out.append(other)
        return out


def _chunk(payload: bytes) -> str:
    """The Anthropic event a ``chunk`` message's payload carries, as text.

    The payload as Bedrock writes it, ``{"bytes":"<base64>","p":"<padding>"}`` (JSON
    whitespace allowed where JSON allows it), is matched whole by one pattern (its ``bytes`` in the base64 alphabet, so
    with no escape in it), which reads it exactly as the JSON parser would, at a
    fraction of the cost; any other spelling of the object is parsed as JSON. Either
    way the base64 is decoded with ``validate=True``.
    """
    try:
        match = _plain_chunk(payload)
        if match is not None:
            encoded: Any = match.group(1)
        else:
            parsed = parse_json(payload)
            encoded = parsed.get("bytes") if isinstance(parsed, dict) else None
            if not isinstance(encoded, str):
                raise ValueError("no bytes")
        return _b64decode(encoded).decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise StreamError("Bedrock sent a chunk whose payload is not the base64 of a "
                          "UTF-8 event") from None


def _event(headers: Dict[str, HeaderValue], payload: bytes) -> Optional[SSEEvent]:
    """The SSE event a Bedrock message other than a ``chunk`` stands for; None for
    one to skip."""
    kind = headers.get(":message-type")
    if kind == "event":
        return None  # a kind of event this reader does not know
    if kind in ("exception", "error"):
        name = headers.get(":exception-type") if kind == "exception" else headers.get(
            ":error-code")
        text = ""
        if kind == "error":
            said = headers.get(":error-message")
            text = said if isinstance(said, str) else ""
        else:
            try:
                parsed = parse_json(payload) if payload.strip() else {}
            except ValueError:
                parsed = {}
            said = parsed.get("message") if isinstance(parsed, dict) else None
            text = said if isinstance(said, str) else ""
        data = json.dumps({"type": name if isinstance(name, str) else "", "message": text})
        return SSEEvent(event=_EXCEPTION, data=data)
    raise StreamError(f"Bedrock sent a message of an unknown type "
                      f"({str(kind)[:40]!r}) in its event stream")


class BedrockAccumulator(Accumulator):
    """The Anthropic accumulator, with Bedrock's in-stream exceptions raised as
    ``StreamError`` values carrying their type (scrubbed, retryable as the module
    docstring says)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._clean = kwargs.get("scrub") or (lambda text: text)

    def feed(self, sse: SSEEvent) -> List[Event]:
        if sse.event != _EXCEPTION:
            return super().feed(sse)
        said = json.loads(sse.data)
        kind = self._clean(str(said.get("type") or "exception"))[:80]
        text = f"Bedrock stream error {kind}"
        if said.get("message"):
            text += f": {said['message']}"
        raise StreamError(self._clean(text)[:600], type=kind, retryable=kind in RETRYABLE)
