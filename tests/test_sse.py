"""The SSE decoder, byte by byte: every case is fed whole, one byte at a time and
split at every offset, and the three must agree."""

import json
import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nacelle.errors import StreamError
from nacelle.sse import MAX_JSON_DEPTH, MAX_RETRY, SSEDecoder, SSEEvent, parse_json


def decode(chunks, max_line=16 * 2**20):
    decoder = SSEDecoder(max_line=max_line)
    events = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events, decoder.truncated


def every_split(body):
    """The body whole, one byte at a time, and cut in two at every offset."""
    yield [body]
    yield [body[i:i + 1] for i in range(len(body))]
    for i in range(1, len(body)):
        yield [body[:i], body[i:]]


def assert_decodes(body, expected, truncated=False):
    for chunks in every_split(body):
        events, was_truncated = decode(chunks)
        assert events == expected, chunks
        assert was_truncated is truncated, chunks


E = SSEEvent

CASES = {
    "named_event": (
        b"event: message_start\ndata: {\"a\":1}\n\n",
        [E("message_start", '{"a":1}')],
    ),
    "default_type_is_message": (b"data: x\n\n", [E("message", "x")]),
    "crlf_line_endings": (b"event: e\r\ndata: a\r\ndata: b\r\n\r\n", [E("e", "a\nb")]),
    "cr_line_endings": (b"data: a\rdata: b\r\r", [E("message", "a\nb")]),
    "mixed_line_endings": (b"data: a\r\ndata: b\rdata: c\n\r\n", [E("message", "a\nb\nc")]),
    "multi_byte_characters": (
        "data: héllo € 😀 日本\n\n".encode(),
        [E("message", "héllo € 😀 日本")],
    ),
    "u2028_inside_json": (
        'data: {"text":"a\u2028b\u2029c\x85d\x0be\x1cf"}\n\n'.encode(),
        [E("message", '{"text":"a\u2028b\u2029c\x85d\x0be\x1cf"}')],
    ),
    "comments_anywhere": (
        b": OPENROUTER PROCESSING\n\n: x\ndata: a\n: between\ndata: b\n:\n\n",
        [E("message", "a\nb")],
    ),
    "non_numeric_retry_is_ignored": (
        "retry: 1e3\ndata: a\n\nretry: ١٢\ndata: b\n\nretry: \ndata: c\n\n".encode(),
        [E("message", "a"), E("message", "b"), E("message", "c")],
    ),
    "absurd_retry_is_clamped": (
        b"retry: " + b"9" * 5000 + b"\ndata: a\n\n",
        [E("message", "a", retry=MAX_RETRY)],
    ),
    "leading_zeros_do_not_make_a_retry_absurd": (
        b"retry: " + b"0" * 40 + b"1500\ndata: a\n\n",
        [E("message", "a", retry=1500)],
    ),
    "numeric_retry_persists": (
        b"retry: 3000\ndata: a\n\nretry: x\ndata: b\n\n",
        [E("message", "a", retry=3000), E("message", "b", retry=3000)],
    ),
    "unterminated_last_event_is_dropped": (
        b"data: a\n\ndata: b\n",
        [E("message", "a")],
    ),
    "id_persists_and_nul_id_is_ignored": (
        b"id: 1\ndata: a\n\ndata: b\n\nid: 2\x003\ndata: c\n\nid\ndata: d\n\n",
        [E("message", "a", "1"), E("message", "b", "1"), E("message", "c", "1"),
         E("message", "d", "")],
    ),
    "field_without_colon": (b"data\n\nevent\ndata\ndata\n\n", [E("message", ""), E("message", "\n")]),
    "only_one_leading_space_is_stripped": (
        b"data:x\n\ndata:  x\n\ndata:\tx\n\n",
        [E("message", "x"), E("message", " x"), E("message", "\tx")],
    ),
    "bare_data_dispatches_empty_string": (b"data:\n\n", [E("message", "")]),
    "no_dispatch_without_data_and_type_is_reset": (
        b"event: orphan\n\ndata: x\n\nevent: e\nid: 5\n\n\n\n",
        [E("message", "x")],
    ),
    "event_type_resets_after_dispatch": (
        b"event: a\ndata: 1\n\ndata: 2\n\n",
        [E("a", "1"), E("message", "2")],
    ),
    "unknown_fields_are_ignored": (
        b"foo: bar\ndata: a\nDATA: b\nEvent: c\n\n",
        [E("message", "a")],
    ),
    "invalid_utf8_is_replaced": (
        b"data: a\xffb\xc3(c\xe2\x82\n\n",
        [E("message", "a\ufffdb\ufffd(c\ufffd")],
    ),
    "bom_is_stripped_at_the_start": (
        b"\xef\xbb\xbfdata: a\n\n",
        [E("message", "a")],
    ),
    "bom_only_at_the_start": (
        b"\xef\xbb\xbfdata: a\n\n\xef\xbb\xbfdata: b\n\ndata: \xef\xbb\xbfc\n\n",
        [E("message", "a"), E("message", "\ufeffc")],
    ),
    "second_bom_at_the_start_is_kept": (b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n", []),
    "anthropic_ping": (
        b'event: ping\ndata: {"type": "ping"}\n\n',
        [E("ping", '{"type": "ping"}')],
    ),
    "openrouter_done": (b"data: [DONE]\n\n", [E("message", "[DONE]")]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_decodes_the_same_whole_bytewise_and_split_everywhere(name):
    body, expected = CASES[name]
    truncated = name == "unterminated_last_event_is_dropped"
    assert_decodes(body, expected, truncated)


def test_crlf_split_across_feeds_is_one_line_break():
    # Were the LF taken as a line of its own, "a" would dispatch alone.
    events, _ = decode([b"data: a\r", b"\ndata: b\r\n\r\n"])
    assert events == [E("message", "a\nb")]


def test_lone_cr_at_a_feed_boundary_ends_the_line_at_once():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\r") == [E("message", "a")]
    assert decoder.feed(b"data: b\r") == []
    assert decoder.feed(b"data: c\r\r") == [E("message", "b\nc")]


def test_cr_before_an_empty_feed_still_pairs_with_the_next_lf():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\n") == [E("message", "a")]


def test_multi_byte_character_split_across_feeds_is_decoded_intact():
    body = "data: 😀€é\n\n".encode()
    for i in range(len(body)):
        for j in range(i, len(body)):
            events, _ = decode([body[:i], body[i:j], body[j:]])
            assert events == [E("message", "😀€é")]


def test_bom_split_across_feeds_is_stripped():
    assert decode([b"\xef", b"\xbb", b"\xbfdata: a\n\n"])[0] == [E("message", "a")]


def test_events_are_returned_as_soon_as_their_blank_line_arrives():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\n") == [E("message", "a")]
    assert decoder.feed(b"data: b\n\ndata: c") == [E("message", "b")]


def test_truncated_is_false_after_a_clean_end():
    for body in (b"", b"data: a\n\n", b": keepalive\n\n", b": comment\n", b"event: x\n"):
        assert decode([body])[1] is False, body


def test_truncated_is_true_when_the_body_stops_inside_an_event():
    for body in (b"data: a", b"data: a\n", b"data: a\r", b": partial comm", b"event: x"):
        assert decode([body])[1] is True, body


def test_close_drops_the_pending_event_and_is_idempotent():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\n") == [E("message", "a")]
    assert decoder.close() == []
    assert decoder.close() == []
    assert decoder.truncated is True


def test_feed_after_close_is_a_clear_error():
    decoder = SSEDecoder()
    decoder.close()
    with pytest.raises(RuntimeError, match="after close"):
        decoder.feed(b"data: a\n\n")


def test_feed_refuses_text():
    with pytest.raises(TypeError, match="bytes, not str"):
        SSEDecoder().feed("data: a\n\n")


def test_feed_accepts_bytearray_and_memoryview_without_changing_them():
    chunk = bytearray(b"data: a\n\n")
    assert SSEDecoder().feed(chunk) == [E("message", "a")]
    assert SSEDecoder().feed(memoryview(chunk)) == [E("message", "a")]
    assert chunk == bytearray(b"data: a\n\n")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_max_line_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="max_line"):
        SSEDecoder(max_line=bad)


def test_a_20_mb_line_raises_stream_error_with_memory_bounded():
    decoder = SSEDecoder()
    piece = b"x" * 2**20
    decoder.feed(b"data: ")
    with pytest.raises(StreamError, match="longer than max_line"):
        for _ in range(20):
            decoder.feed(piece)
            assert decoder._pending <= decoder.max_line
    with pytest.raises(StreamError, match="already failed"):
        decoder.feed(b"\n\n")


def test_a_20_mb_line_fed_whole_raises_stream_error():
    with pytest.raises(StreamError, match="longer than max_line"):
        SSEDecoder().feed(b"data: " + b"x" * (20 * 2**20) + b"\n\n")


def test_a_line_of_exactly_max_line_bytes_is_accepted():
    events, _ = decode([b"data: " + b"x" * 10 + b"\n\n"], max_line=16)
    assert events == [E("message", "x" * 10)]
    with pytest.raises(StreamError):
        decode([b"data: " + b"x" * 11 + b"\n\n"], max_line=16)


def test_endless_data_lines_without_a_blank_line_raise_stream_error():
    decoder = SSEDecoder(max_line=1000)
    with pytest.raises(StreamError, match="data grew past max_line"):
        for _ in range(200):
            decoder.feed(b"data: 0123456789\n")


def test_many_data_lines_within_the_bound_still_dispatch():
    decoder = SSEDecoder(max_line=1000)
    for _ in range(50):
        assert decoder.feed(b"data: 0123456789\n") == []
    events = decoder.feed(b"\n")
    assert events == [E("message", "\n".join(["0123456789"] * 50))]
    for _ in range(50):  # the bound counts one event's data, not the stream's
        decoder.feed(b"data: 0123456789\n")


def test_events_are_frozen_equal_hashable_and_picklable():
    event = SSEDecoder().feed(b"event: e\nid: 1\nretry: 5\ndata: d\n\n")[0]
    assert event == SSEEvent("e", "d", "1", 5)
    assert hash(event) == hash(SSEEvent("e", "d", "1", 5))
    assert repr(event) == "SSEEvent(event='e', data='d', id='1', retry=5)"
    assert pickle.loads(pickle.dumps(event)) == event
    with pytest.raises(AttributeError):
        event.data = "x"


# Bytes that matter to the grammar, so random streams exercise every branch.
ATOMS = [
    b"data:", b"data: ", b"event: ", b"id: ", b"retry: ", b"retry: 12", b":", b" ",
    b"\n", b"\r", b"\r\n", b"\n\n", b"x", b"{\"a\":1}", b"\xef\xbb\xbf", b"\xe2\x80\xa8",
    b"\xf0\x9f\x98", b"\x80", b"\xff", b"\x00", b"\xc3\xa9", b"[DONE]",
]


def random_stream(rng):
    return b"".join(rng.choice(ATOMS) for _ in range(rng.randrange(0, 40)))


def test_ten_thousand_random_streams_raise_nothing_but_stream_error():
    rng = random.Random(20240611)
    failures = 0
    for _ in range(10_000):
        body = random_stream(rng) if rng.random() < 0.8 else rng.randbytes(rng.randrange(64))
        decoder = SSEDecoder(max_line=rng.choice([8, 64, 16 * 2**20]))
        try:
            cut = rng.randrange(len(body) + 1)
            decoder.feed(body[:cut])
            decoder.feed(body[cut:])
            decoder.close()
        except StreamError:
            failures += 1
    assert 0 < failures < 10_000  # the small max_line did bite, and not always


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(ATOMS) | st.binary(max_size=6), max_size=30).map(b"".join),
    st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_split_into_feeds_gives_the_events_of_feeding_whole(body, cuts):
    offsets = sorted({min(c, len(body)) for c in cuts})
    chunks = [body[a:b] for a, b in zip([0] + offsets, offsets + [len(body)])]
    assert decode(chunks) == decode([body])


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(ATOMS), max_size=30).map(b"".join),
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=1, max_value=7),
)
def test_any_split_fails_on_an_overlong_line_exactly_when_whole_fails(body, max_line, step):
    def fails(chunks):
        try:
            decode(chunks, max_line=max_line)
        except StreamError:
            return True
        return False

    chunks = [body[i:i + step] for i in range(0, len(body), step)]
    assert fails(chunks) == fails([body])


def test_data_of_exactly_max_line_characters_split_across_feeds_is_accepted():
    body = b"data:ab\ndata:ab\ndata:ab\n\n"  # 7-byte lines; data "ab\nab\nab" is 8
    for chunks in every_split(body):
        assert decode(chunks, max_line=8)[0] == [E("message", "ab\nab\nab")]
        with pytest.raises(StreamError, match="data grew past max_line"):
            decode(chunks, max_line=7)


def test_a_retry_of_five_thousand_digits_becomes_seconds_without_overflow():
    # A consumer turns milliseconds into a float of seconds; an unbounded int would
    # overflow that conversion (or, on Python 3.11, fail to parse at all).
    event = SSEDecoder().feed(b"retry: " + b"7" * 5000 + b"\ndata: a\n\n")[0]
    assert event.retry == MAX_RETRY
    assert event.retry / 1000 == pytest.approx(2147483.647)


# -- the JSON of event data ---------------------------------------------------------------

def test_parse_json_reads_what_json_reads():
    assert parse_json('{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}
    assert parse_json(b'{"a": "\xc3\xa9"}') == {"a": "\u00e9"}
    assert parse_json(" 10 ") == 10


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", '{"cost": NaN}',
                                  '[1e400]', '{"x": -1e999}'])
def test_parse_json_refuses_numbers_that_are_not_finite(text):
    with pytest.raises(ValueError, match="not a finite number"):
        parse_json(text)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a":' * 100_000,
                                  "[" * 100_000 + "]" * 100_000],
                         ids=["open lists", "open objects", "closed lists"])
def test_parse_json_refuses_100k_levels_of_nesting_with_a_value_error(text):
    with pytest.raises(ValueError, match="nested"):
        parse_json(text)


def test_parse_json_refuses_nesting_past_the_limit_that_the_parser_itself_accepts():
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(ValueError, match="nested deeper than"):
        parse_json(deep)
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json(at_limit) is not None


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({"type": "text_delta", "text": "{[(" * 10_000})
    assert parse_json(text)["text"] == "{[(" * 10_000


@pytest.mark.parametrize("text", ["", "{oops", "[1,]", "\ufeff{}", b"\xff\xfe\x00"])
def test_parse_json_raises_value_error_for_what_is_not_json(text):
    with pytest.raises(ValueError):
        parse_json(text)
