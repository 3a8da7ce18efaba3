"""Bedrock's event stream read as the Anthropic stream it carries, without a socket:
``chunk`` messages become the SSE events they wrap, exceptions become StreamErrors of
their type, and anything malformed is a StreamError (shapes from the ``ResponseStream``
of https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html,
framed by ``nacelle.testing.clouds``)."""

import base64
import json

import pytest

from nacelle import StreamError
from nacelle.backends.anthropic.bedrock_stream import BedrockAccumulator, BedrockEvents
from nacelle.sse import SSEEvent
from nacelle.testing.clouds import bedrock_exception, bedrock_stream, eventstream_message
from nacelle.testing.wire import anthropic_stream

CHUNK = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}


def test_each_chunk_is_the_sse_event_it_wraps_however_the_body_is_cut():
    sse = anthropic_stream(["Grüße"], pings=False)
    body = b"".join(bedrock_stream(sse))
    for size in (1, 5, len(body)):
        decoder = BedrockEvents()
        events = []
        for at in range(0, len(body), size):
            events += decoder.feed(body[at:at + size])
        decoder.close()
        assert not decoder.truncated
        wrapped = [json.loads(event.split(b"data: ", 1)[1]) for event in sse]
        assert [json.loads(e.data) for e in events] == wrapped
        assert {e.event for e in events} == {"message"}


def test_an_event_of_another_kind_is_skipped_and_a_cut_body_is_truncated():
    other = eventstream_message({**CHUNK, ":event-type": "metadata"}, b"{}")
    chunk = bedrock_stream(anthropic_stream(["x"], pings=False))[0]
    decoder = BedrockEvents()
    assert decoder.feed(other) == []
    assert len(decoder.feed(chunk + chunk[:7])) == 1
    decoder.close()
    assert decoder.truncated


@pytest.mark.parametrize("payload", [
    b"not json", json.dumps({"bytes": "%%%"}).encode(), json.dumps({"p": "x"}).encode(),
    json.dumps({"bytes": base64.b64encode(b"\xff\xfe").decode()}).encode(),
])
def test_a_chunk_that_is_not_base64_utf8_is_a_stream_error(payload):
    with pytest.raises(StreamError, match="base64"):
        BedrockEvents().feed(eventstream_message(CHUNK, payload))


@pytest.mark.parametrize("spelling", [
    '{{"bytes":"{0}","p":"abcdef"}}', '{{"bytes":"{0}"}}', ' {{ "bytes" : "{0}" , "p" : "ab" }}\n',
    '{{"p":"abc","bytes":"{0}"}}', '{{"bytes":"{0}","p":"abc","extra":[1]}}',
    '{{"bytes":"{0}","p":"a-b"}}', '{{"bytes":"{0}","p":"abc","bytes":"{0}"}}',
    '{{"bytes":"{0}","p":"\\u00e9"}}',
])
def test_a_chunk_reads_the_same_however_its_json_is_spelled(spelling):
    event = '{"type":"ping"}'
    payload = spelling.format(base64.b64encode(event.encode()).decode()).encode()
    assert BedrockEvents().feed(eventstream_message(CHUNK, payload)) == [SSEEvent(data=event)]


@pytest.mark.parametrize("payload", [
    b'{"bytes":"e30","p":"ab"}', b'{"bytes":"e30===","p":"ab"}', b'{"bytes":"e30=!"}',
    b'{"bytes":"e30=","p":"a b"}\x00',
])
def test_a_plainly_spelled_chunk_is_checked_as_any_other(payload):
    """The payload as Bedrock spells it is read without a JSON parse; its base64 is
    still checked as ``b64decode(validate=True)`` checks it (padding included)."""
    with pytest.raises(StreamError, match="base64"):
        BedrockEvents().feed(eventstream_message(CHUNK, payload))


def test_a_message_of_an_unknown_type_is_a_stream_error():
    with pytest.raises(StreamError, match="unknown type"):
        BedrockEvents().feed(eventstream_message({":message-type": "surprise"}, b""))


@pytest.mark.parametrize("frame,kind,retryable", [
    (bedrock_exception("throttlingException", "slow down"), "throttlingException", True),
    (bedrock_exception("validationException", "bad input"), "validationException", False),
    (eventstream_message({":message-type": "error", ":error-code": "InternalFailure",
                          ":error-message": "boom"}, b""), "InternalFailure", False),
])
def test_an_exception_is_raised_by_the_accumulator_as_its_type(frame, kind, retryable):
    [event] = BedrockEvents().feed(frame)
    secret = "s3cr3t-value"
    accumulator = BedrockAccumulator(scrub=lambda text: text.replace(secret, "<hidden>"))
    with pytest.raises(StreamError) as caught:
        accumulator.feed(SSEEvent(event=event.event, data=event.data.replace(
            "slow down", f"slow down {secret}")))
    assert caught.value.type == kind and caught.value.retryable is retryable
    assert secret not in str(caught.value)
