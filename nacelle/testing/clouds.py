"""Fakes of the clouds' wires for Claude: Bedrock's event-stream bodies, for
``FakeServer`` tests and offline examples of ``anthropic.bedrock`` and
``anthropic.vertex``.

Vertex AI answers ``streamRawPredict`` with the same SSE stream as Anthropic's, so
:func:`nacelle.testing.wire.anthropic_stream` serves it as it is. Bedrock wraps each of
those events in an AWS event-stream message, which :func:`bedrock_stream` does::

    server.queue("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream",
                 Reply(chunks=bedrock_stream(anthropic_stream(["Hi"])), content_type=EVENTSTREAM))

The shapes, from https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html
and botocore's ``bedrock-runtime`` service model (``ResponseStream``, ``PayloadPart``):
a ``chunk`` event (``:event-type: chunk``, ``:content-type: application/json``,
``:message-type: event``) whose payload is ``{"bytes": base64(event JSON)}``, and
exceptions (``:message-type: exception``, ``:exception-type: throttlingException``…)
whose payload is ``{"message": ...}``. The framing is the AWS event-stream encoding:
total length, headers length, prelude CRC32, headers, payload, message CRC32.

Public (``nacelle.testing``); imports the standard library only.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import List, Mapping, Sequence

__all__ = ["EVENTSTREAM", "bedrock_exception", "bedrock_stream", "eventstream_message"]

EVENTSTREAM = "application/vnd.amazon.eventstream"


def eventstream_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message with string ``headers`` (type 7) and ``payload``."""
    block = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
        block += (bytes([len(raw_name)]) + raw_name + b"\x07"
                  + struct.pack(">H", len(raw_value)) + raw_value)
    prelude = struct.pack(">II", 16 + len(block) + len(payload), len(block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + block + payload
    return message + struct.pack(">I", zlib.crc32(message))


def bedrock_stream(sse_chunks: Sequence[bytes]) -> List[bytes]:
    """Bedrock's body for an Anthropic SSE stream: one ``chunk`` message per event
    (comments and blank chunks dropped), each its own HTTP chunk."""
    out = []
    for chunk in sse_chunks:
        for event in chunk.decode("utf-8").split("\n\n"):
            data = "\n".join(line[5:].lstrip(" ") for line in event.split("\n")
                             if line.startswith("data:"))
            if not data:
                continue
            payload = json.dumps({"bytes": base64.b64encode(data.encode("utf-8")).decode(),
                                  "p": "abcdefghij"[: len(data) % 10]})  # Bedrock's padding
            out.append(eventstream_message(
                {":event-type": "chunk", ":content-type": "application/json",
                 ":message-type": "event"}, payload.encode("utf-8")))
    return out


def bedrock_exception(kind: str, message: str) -> bytes:
    """An exception message inside a Bedrock stream (``throttlingException``…)."""
    return eventstream_message(
        {":exception-type": kind, ":content-type": "application/json",
         ":message-type": "exception"}, json.dumps({"message": message}).encode("utf-8"))
