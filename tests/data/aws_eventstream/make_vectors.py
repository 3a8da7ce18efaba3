"""Writes vectors.json: event-stream frames and what botocore's parser reads in them.

Run with a Python that has botocore (not a test dependency), from this folder:
    python -m venv /tmp/boto && /tmp/boto/bin/pip install botocore
    /tmp/boto/bin/python make_vectors.py
The "botocore" frames are the published ones of botocore's tests/unit/test_eventstream.py
(Apache-2.0, https://github.com/boto/botocore); the "bedrock" frames are encoded here per
the AWS event-stream encoding, in the shapes Bedrock's InvokeModelWithResponseStream sends
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html):
a chunk event whose payload is {"bytes": base64(event JSON)}, and exceptions.
"""
import base64
import binascii
import json
import struct
import zlib

import botocore
from botocore.eventstream import EventStreamBuffer, ParserError


def header(name, value):
    raw = name.encode()
    if isinstance(value, str):
        data = value.encode()
        return bytes([len(raw)]) + raw + b"\x07" + struct.pack(">H", len(data)) + data
    raise TypeError(value)


def frame(headers, payload):
    block = b"".join(header(k, v) for k, v in headers.items())
    total = 16 + len(block) + len(payload)
    prelude = struct.pack(">II", total, len(block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + block + payload
    return body + struct.pack(">I", zlib.crc32(body))


def chunk(event):
    data = json.dumps(event, separators=(",", ":")).encode()
    payload = json.dumps({"bytes": base64.b64encode(data).decode(), "p": "abcd"}).encode()
    return frame({":event-type": "chunk", ":content-type": "application/json",
                  ":message-type": "event"}, payload)


def exception(kind, message):
    return frame({":exception-type": kind, ":content-type": "application/json",
                  ":message-type": "exception"}, json.dumps({"message": message}).encode())


POSITIVE = {
    "empty": b'\x00\x00\x00\x10\x00\x00\x00\x00\x05\xc2H\xeb}\x98\xc8\xff',
    "int8": b"\x00\x00\x00\x17\x00\x00\x00\x07)\x86\x01X\x04byte\x02\xff\xc2\xf8i\xdc",
    "int16": b"\x00\x00\x00\x19\x00\x00\x00\tq\x0e\x92>\x05short\x03\xff\xff\xb2|\xb6\xcc",
    "int32": (b"\x00\x00\x00\x1d\x00\x00\x00\r\x83\xe3\xf0\xe7\x07integer\x04\xff\xff\xff"
              b"\xff\x8b\x8e\x12\xeb"),
    "int64": (b"\x00\x00\x00\x1e\x00\x00\x00\x0e]J\xdb\x8d\x04long\x05\xff\xff\xff\xff\xff"
              b"\xff\xff\xffK\xc22\xda"),
    "payload_no_headers": b"\x00\x00\x00\x1d\x00\x00\x00\x00\xfdR\x8cZ{'foo':'bar'}\xc3e96",
    "payload_one_string_header": (
        b"\x00\x00\x00=\x00\x00\x00 \x07\xfd\x83\x96\x0ccontent-type\x07\x00\x10"
        b"application/json{'foo':'bar'}\x8d\x9c\x08\xb1"),
    "all_header_types": (
        b"\x00\x00\x00\x62\x00\x00\x00\x52\x03\xb5\xcb\x9c"
        b"\x010\x00\x011\x01\x012\x02\x02\x013\x03\x00\x03"
        b"\x014\x04\x00\x00\x00\x04\x015\x05\x00\x00\x00\x00\x00\x00\x00\x05"
        b"\x016\x06\x00\x05bytes\x017\x07\x00\x04utf8"
        b"\x018\x08\x00\x00\x00\x00\x00\x00\x00\x08\x019\x090123456789abcdef"
        b"\x63\x35\x36\x71"),
    "error_message": (
        b"\x00\x00\x00\x52\x00\x00\x00\x42\xbf\x23\x63\x7e"
        b"\x0d:message-type\x07\x00\x05error\x0b:error-code\x07\x00\x04code"
        b"\x0e:error-message\x07\x00\x07message\x6b\x6c\xea\x3d"),
    "bedrock_chunk": chunk({"type": "message_start", "message": {
        "id": "msg_bdrk_01", "type": "message", "role": "assistant", "model": "claude",
        "content": [], "stop_reason": None, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
    "bedrock_throttling": exception("throttlingException", "Too many requests, please wait."),
}

NEGATIVE = {
    "corrupted_header_length": (
        b"\x00\x00\x00=\xff\x00\x01\x02\x07\xfd\x83\x96\x0ccontent-type\x07\x00"
        b"\x10application/json{'foo':'bar'}\x8d\x9c\x08\xb1"),
    "corrupted_headers": (
        b"\x00\x00\x00=\x00\x00\x00 \x07\xfd\x83\x96\x0ccontent+type\x07\x00\x10"
        b"application/json{'foo':'bar'}\x8d\x9c\x08\xb1"),
    "corrupted_length": b"\x01\x00\x00\x1d\x00\x00\x00\x00\xfdR\x8cZ{'foo':'bar'}\xc3e96",
    "corrupted_payload": b"\x00\x00\x00\x1d\x00\x00\x00\x00\xfdR\x8cZ{'foo':'bar'\x8d\xc3e96",
    "duplicate_header": (b"\x00\x00\x00\x24\x00\x00\x00\x14\x4b\xb9\x82\xd0"
                         b"\x04test\x04asdf\x04test\x04asdf\xf3\xf4\x75\x63"),
    "invalid_headers_length": (
        b"\x00\x00\x00\x3d\xff\x00\x01\x02\x15\x83\xf5\xc2"
        b"\x0ccontent-type\x07\x00\x10application/json{'foo':'bar'}\x2f\x37\x7f\x5d"),
}


def plain(value):
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return value


def main():
    out = {"botocore": botocore.__version__, "positive": {}, "negative": {}}
    for name, data in POSITIVE.items():
        buffer = EventStreamBuffer()
        buffer.add_data(data)
        (message,) = list(buffer)
        out["positive"][name] = {
            "frame": data.hex(), "payload": message.payload.hex(),
            "headers": {k: plain(v) for k, v in message.headers.items()}}
    for name, data in NEGATIVE.items():
        buffer = EventStreamBuffer()
        buffer.add_data(data)
        try:
            list(buffer)
        except ParserError as exc:
            out["negative"][name] = {"frame": data.hex(), "botocore": type(exc).__name__}
        else:
            raise AssertionError(name)
    with open("vectors.json", "w") as handle:
        json.dump(out, handle, indent=1, sort_keys=True)
        handle.write("\n")


if __name__ == "__main__":
    main()
