"""The AWS event-stream decoder: botocore's published frames and Bedrock's shapes read as
botocore reads them (``tests/data/aws_eventstream/vectors.json``, written by botocore's
parser with ``make_vectors.py`` there), whole, byte by byte and at every split; a bad CRC,
length or header a StreamError."""

import json
import struct
import zlib
from pathlib import Path
from typing import Any, Dict, List

import pytest

from nacelle.backends.anthropic.eventstream import (
    MAX_HEADERS, MAX_PAYLOAD, EventStreamDecoder, Message,
)
from nacelle.errors import StreamError

VECTORS = json.loads((Path(__file__).parent.parent / "data" / "aws_eventstream"
                      / "vectors.json").read_text())
POSITIVE = VECTORS["positive"]
NEGATIVE = VECTORS["negative"]


def expected(case: Dict[str, Any]) -> Message:
    headers = {name: bytes.fromhex(value["bytes"]) if isinstance(value, dict) else value
               for name, value in case["headers"].items()}
    return Message(headers, bytes.fromhex(case["payload"]))


def frame(headers: bytes, payload: bytes, total: int = -1, fix_crc: bool = True) -> bytes:
    """A frame per the AWS encoding (``total`` overrides the length it claims)."""
    size = 16 + len(headers) + len(payload) if total < 0 else total
    prelude = struct.pack(">II", size, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + headers + payload
    return body + struct.pack(">I", zlib.crc32(body) if fix_crc else 0)


def feed_in(pieces: List[bytes]) -> List[Message]:
    decoder = EventStreamDecoder()
    out: List[Message] = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    decoder.close()
    assert not decoder.truncated
    return out


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_each_published_frame_decodes_as_botocore_reads_it(name: str) -> None:
    case = POSITIVE[name]
    assert feed_in([bytes.fromhex(case["frame"])]) == [expected(case)]


def test_all_frames_in_one_body_decode_whole_byte_by_byte_and_at_every_split() -> None:
    body = b"".join(bytes.fromhex(POSITIVE[name]["frame"]) for name in sorted(POSITIVE))
    want = [expected(POSITIVE[name]) for name in sorted(POSITIVE)]
    assert feed_in([body]) == want
    assert feed_in([body[i:i + 1] for i in range(len(body))]) == want
    for cut in range(len(body) + 1):
        assert feed_in([body[:cut], body[cut:]]) == want, cut


def test_a_bedrock_chunk_carries_the_anthropic_event_in_base64() -> None:
    message = expected(POSITIVE["bedrock_chunk"])
    assert message.headers[":event-type"] == "chunk"
    assert message.headers[":message-type"] == "event"
    assert b'"bytes"' in message.payload


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_each_frame_botocore_refuses_is_a_stream_error(name: str) -> None:
    data = bytes.fromhex(NEGATIVE[name]["frame"])
    decoder = EventStreamDecoder()
    with pytest.raises(StreamError):
        decoder.feed(data)
    with pytest.raises(StreamError, match="already failed"):
        decoder.feed(b"")


def test_a_bad_frame_is_refused_whichever_way_it_was_split() -> None:
    data = bytes.fromhex(NEGATIVE["corrupted_payload"]["frame"])
    for cut in range(len(data) + 1):
        decoder = EventStreamDecoder()
        with pytest.raises(StreamError, match="CRC"):
            decoder.feed(data[:cut])
            decoder.feed(data[cut:])


def test_a_message_claiming_too_much_is_refused_from_its_prelude() -> None:
    huge = struct.pack(">II", 16 + MAX_PAYLOAD + 1, 0)
    with pytest.raises(StreamError, match="payload"):
        EventStreamDecoder().feed(huge + struct.pack(">I", zlib.crc32(huge)))
    long_headers = struct.pack(">II", 16 + MAX_HEADERS + 1, MAX_HEADERS + 1)
    with pytest.raises(StreamError, match="headers"):
        EventStreamDecoder().feed(long_headers + struct.pack(">I", zlib.crc32(long_headers)))


def test_lengths_that_cannot_hold_a_message_are_refused() -> None:
    short = struct.pack(">II", 12, 0)
    with pytest.raises(StreamError, match="less than"):
        EventStreamDecoder().feed(short + struct.pack(">I", zlib.crc32(short)))
    roomless = struct.pack(">II", 20, 8)
    with pytest.raises(StreamError, match="do not fit"):
        EventStreamDecoder().feed(roomless + struct.pack(">I", zlib.crc32(roomless)))


@pytest.mark.parametrize("headers,match", [
    (b"\x04name\x0a", "unknown type"),
    (b"\x04name\x07\x00\x09abc", "runs past"),
    (b"\x04name", "runs past"),
    (b"\x02\xff\xfe\x00", "not UTF-8"),
    (b"\x01a\x07\x00\x02\xc3\x28", "not UTF-8"),
])
def test_a_broken_header_is_a_stream_error(headers: bytes, match: str) -> None:
    with pytest.raises(StreamError, match=match):
        EventStreamDecoder().feed(frame(headers, b"{}"))


def test_a_body_that_stops_inside_a_message_is_truncated() -> None:
    data = bytes.fromhex(POSITIVE["bedrock_chunk"]["frame"])
    decoder = EventStreamDecoder()
    assert decoder.feed(data + data[:5]) == [expected(POSITIVE["bedrock_chunk"])]
    assert decoder.close() == []
    assert decoder.truncated
    with pytest.raises(RuntimeError):
        decoder.feed(b"x")


def test_a_large_message_fed_a_byte_at_a_time_is_linear() -> None:
    payload = b"x" * 200_000
    data = frame(b"", payload)
    decoder = EventStreamDecoder()
    found: List[Message] = []
    for i in range(len(data)):
        found.extend(decoder.feed(data[i:i + 1]))
    assert found == [Message({}, payload)]


def test_feed_takes_bytes_only_and_the_repr_shows_no_content() -> None:
    decoder = EventStreamDecoder()
    with pytest.raises(TypeError):
        decoder.feed("text")  # type: ignore[arg-type]
    decoder.feed(bytearray(b"\x00\x00"))
    assert repr(decoder) == "<EventStreamDecoder open, 2 bytes buffered>"
