"""A sans-IO decoder for the AWS event-stream framing: bytes in, messages out.

Amazon Bedrock answers ``InvokeModelWithResponseStream`` with a body of
``application/vnd.amazon.eventstream`` messages rather than Server-Sent Events
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html).
:class:`EventStreamDecoder` turns that body into :class:`Message` values the way
:class:`nacelle.sse.SSEDecoder` turns an SSE body into events: it touches no socket and
no clock, ``feed(chunk)`` returns the messages the chunk completed, however the body was
split, and ``close()`` ends the stream.

The framing (https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html,
"Event stream encoding"; the same encoding botocore's ``eventstream.py`` reads), all
integers big-endian::

    total length (4) | headers length (4) | prelude CRC32 (4)
    headers (headers length bytes) | payload | message CRC32 (4)

The prelude CRC covers the first eight bytes; the message CRC covers everything before
it. A header is a name (a one-byte length, then UTF-8), a one-byte type and a value:
0 true, 1 false, 2 int8, 3 int16, 4 int32, 5 int64, 6 bytes (a two-byte length), 7 a
UTF-8 string (a two-byte length), 8 a timestamp (int64 milliseconds since the epoch,
kept as that int, as botocore does), 9 a UUID (16 bytes, kept as bytes).

Choices where the format leaves room, each as botocore's parser makes it:

- Headers may take at most 128 KiB and a payload at most 24 MiB; a message claiming
  more is refused from its prelude, before its bytes are waited for, so a peer cannot
  make the decoder hold a gigabyte. A total length below the 16 bytes of an empty
  message, or headers longer than the message has room for, is refused too.
- A bad CRC, a header of an unknown type, a header running past its block, a string
  that is not UTF-8 or a name given twice is a :class:`~nacelle.errors.StreamError`
  naming what is wrong; the decoder is unusable afterwards (the framing has no way to
  find the next message once one is misread).
- ``close()`` returns a list for symmetry with ``feed``; ``truncated`` then says whether
  the body stopped inside a message.

Cost: the bytes are kept in one ``bytearray`` and each feed decodes every whole message
in it before dropping them at once, so a body fed a byte at a time is linear. A
stream repeats a few header blocks (every Bedrock chunk carries the same three
headers), so a decoder keeps what its first 16 distinct blocks read as and reads the
same bytes again from that (each :class:`Message` gets its own copy): every message's
two CRCs are still checked, and a block is only ever remembered after it was read and
checked whole.

Outer ring (beside the Bedrock backend that reads it), but held to a leaf's rules:
imports the standard library and ``nacelle.errors`` only.
"""

from __future__ import annotations

import binascii
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Tuple, Union

from ...errors import StreamError

__all__ = ["EventStreamDecoder", "HeaderValue", "MAX_HEADERS", "MAX_PAYLOAD", "Message"]

#: A header's value: a bool, an int (the integer types and timestamps), bytes (byte
#: arrays and UUIDs) or str.
HeaderValue = Union[bool, int, bytes, str]

#: The most header bytes one message may carry (botocore's ``_MAX_HEADERS_LENGTH``).
MAX_HEADERS = 128 * 1024
#: The most payload bytes one message may carry (botocore's ``_MAX_PAYLOAD_LENGTH``).
MAX_PAYLOAD = 24 * 1024 * 1024

_PRELUDE = 12
_EMPTY = 16  # a prelude and a message CRC, nothing between
_INTS = {2: struct.Struct(">b"), 3: struct.Struct(">h"), 4: struct.Struct(">i"),
         5: struct.Struct(">q"), 8: struct.Struct(">q")}
_PRELUDE_FIELDS = struct.Struct(">III")  # total length, headers length, prelude CRC
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_KNOWN_BLOCKS = 16  # distinct header blocks a decoder remembers; more are read each time
_TYPE_NAMES = {0: "true", 1: "false", 2: "byte", 3: "short", 4: "integer", 5: "long",
               6: "byte array", 7: "string", 8: "timestamp", 9: "uuid"}


@dataclass(frozen=True)
class Message:
    """One event-stream message: its ``headers`` by name and its ``payload`` bytes."""

    headers: Dict[str, HeaderValue] = field(default_factory=dict)
    payload: bytes = b""


class EventStreamDecoder:
    """Turn the bytes of an ``application/vnd.amazon.eventstream`` body into
    :class:`Message` values. See the module docstring."""

    __slots__ = ("truncated", "_buffer", "_closed", "_broken", "_known")

    def __init__(self) -> None:
        self.truncated = False
        self._buffer = bytearray()
        self._closed = False
        self._broken = False
        self._known: Dict[bytes, Dict[str, HeaderValue]] = {}  # header blocks read

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<EventStreamDecoder {state}, {len(self._buffer)} bytes buffered>"

    def feed(self, data: bytes) -> List[Message]:
        """Decode ``data`` and return the messages it completed, in order."""
        return [Message(dict(headers), payload) for headers, payload in self.feed_pairs(data)]

    def feed_pairs(self, data: bytes) -> List[Tuple[Dict[str, HeaderValue], bytes]]:
        """:meth:`feed`, each message as a ``(headers, payload)`` pair: what a reader
        that makes its own value of every message (``bedrock_stream``) takes, without
        a :class:`Message` made per message only to be read once. The headers dict
        may be shared by the messages of the same header block: read it, do not
        change it."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"EventStreamDecoder.feed() takes bytes, not {type(data).__name__}")
        if self._closed:
            raise RuntimeError("EventStreamDecoder.feed() called after close()")
        if self._broken:
            raise StreamError("the event stream already failed; start a new decoder")
        buffer = self._buffer
        buffer += data
        if len(buffer) < _PRELUDE:
            return []
        out: List[Tuple[Dict[str, HeaderValue], bytes]] = []
        start = 0
        try:
            # One copy of what is buffered, made only once a whole message is in it
            # (so a body fed a byte at a time is still linear), then sliced per message.
            if len(buffer) < self._prelude(buffer, 0):
                return out
            whole = bytes(buffer)
            size = len(whole)
            while size - start >= _PRELUDE:
                total = self._prelude(whole, start)
                if size - start < total:
                    break
                out.append(self._message(whole, start, start + total))
                start += total
        except StreamError:
            self._broken = True
            self._buffer = bytearray()
            raise
        if start:
            del buffer[:start]
        return out

    def _message(self, whole: bytes, start: int,
                 end: int) -> Tuple[Dict[str, HeaderValue], bytes]:
        """The headers and payload of the whole message at ``whole[start:end]``, its
        prelude already checked. A header block seen before (a stream repeats the same
        few: every Bedrock chunk carries the same three) is read from what it gave
        then (the same dict); it was checked whole when first read."""
        crc = _U32.unpack_from(whole, end - 4)[0]
        if binascii.crc32(whole[start:end - 4]) != crc:
            raise StreamError("an event-stream message's CRC does not match: the stream is "
                              "corrupt")
        at = start + _PRELUDE
        headers_end = at + _U32.unpack_from(whole, start + 4)[0]
        block = whole[at:headers_end]
        known = self._known.get(block)
        if known is None:
            known = _headers(block, 0, len(block))
            if len(self._known) < _KNOWN_BLOCKS:
                self._known[block] = known
        return known, whole[headers_end:end - 4]

    def close(self) -> List[Message]:
        """End the stream; ``truncated`` then tells whether a message was cut off."""
        if not self._closed:
            self._closed = True
            self.truncated = bool(self._buffer)
            self._buffer = bytearray()
        return []

    @staticmethod
    def _prelude(buffer: Union[bytes, bytearray], start: int) -> int:
        """The total length of the message at ``start``, its prelude checked."""
        total, headers, crc = _PRELUDE_FIELDS.unpack_from(buffer, start)
        if binascii.crc32(buffer[start:start + 8]) != crc:
            raise StreamError("an event-stream message's prelude CRC does not match: the "
                              "stream is corrupt")
        if total < _EMPTY:
            raise StreamError(f"an event-stream message claims a total length of {total} "
                              f"bytes, less than the {_EMPTY} of an empty message")
        if headers > MAX_HEADERS:
            raise StreamError(f"an event-stream message's headers take {headers} bytes, "
                              f"more than the {MAX_HEADERS} allowed")
        if headers > total - _EMPTY:
            raise StreamError(f"an event-stream message's headers ({headers} bytes) do not "
                              f"fit in its total length ({total} bytes)")
        if total - _EMPTY - headers > MAX_PAYLOAD:
            raise StreamError(f"an event-stream message's payload takes "
                              f"{total - _EMPTY - headers} bytes, more than the "
                              f"{MAX_PAYLOAD} allowed")
        return int(total)


def _headers(frame: bytes, at: int, end: int) -> Dict[str, HeaderValue]:
    headers: Dict[str, HeaderValue] = {}
    while at < end:
        size = frame[at]
        at += 1
        name = _text(_take(frame, at, size, end, "a header name"), "a header name")
        at += size
        kind = _take(frame, at, 1, end, f"the type of header {name!r}")[0]
        at += 1
        value, at = _value(frame, at, end, kind, name)
        if name in headers:
            raise StreamError(f"an event-stream message names header {name!r} twice")
        headers[name] = value
    return headers


def _value(frame: bytes, at: int, end: int, kind: int, name: str) -> Tuple[HeaderValue, int]:
    if kind == 0 or kind == 1:
        return kind == 0, at
    what = f"the {_TYPE_NAMES.get(kind, '')} value of header {name!r}"
    packer = _INTS.get(kind)
    if packer is not None:
        raw = _take(frame, at, packer.size, end, what)
        return int(packer.unpack(raw)[0]), at + packer.size
    if kind == 9:
        return _take(frame, at, 16, end, what), at + 16
    if kind == 6 or kind == 7:
        size = _U16.unpack(_take(frame, at, 2, end, what))[0]
        raw = _take(frame, at + 2, size, end, what)
        return (raw if kind == 6 else _text(raw, what)), at + 2 + size
    raise StreamError(f"header {name!r} of an event-stream message has an unknown type "
                      f"({kind})")


def _take(frame: bytes, at: int, size: int, end: int, what: str) -> bytes:
    if at + size > end:
        raise StreamError(f"{what} runs past the headers of an event-stream message")
    return frame[at:at + size]


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise StreamError(f"{what} in an event-stream message is not UTF-8") from None
