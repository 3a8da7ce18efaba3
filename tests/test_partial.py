"""partial_json and PartialJSON: every prefix of a valid document parses without
raising, the whole document gives what json.loads gives, what a display sees only
grows, the same text cut anywhere reads the same, and reading is linear."""

import copy
import json
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nacelle
from nacelle import PartialJSON, partial_json
from nacelle.bounded_json import MAX_DEPTH

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(JSON, st.booleans(), st.booleans())
def test_every_prefix_parses_and_the_whole_equals_json_loads(value, ascii_only, indent):
    text = json.dumps(value, ensure_ascii=ascii_only, indent=1 if indent else None)
    for end in range(len(text)):
        partial_json(text[:end])  # never raises
    assert partial_json(text) == json.loads(text)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), st.text(max_size=12), min_size=1, max_size=4))
def test_strings_are_shown_as_far_as_they_go_and_keys_only_once_whole(value):
    text = json.dumps(value)
    for end in range(1, len(text)):
        seen = partial_json(text[:end])
        assert isinstance(seen, dict)
        for key, shown in seen.items():
            assert key in value and value[key].startswith(shown)


def test_the_rules_on_cut_values():
    assert partial_json('{"city": "Par') == {"city": "Par"}
    assert partial_json('{"city": "Paris", "te') == {"city": "Paris"}
    assert partial_json('{"city": "Paris", "temp": ') == {"city": "Paris"}
    assert partial_json('{"temp": 2') == {}  # 2 may yet be 21
    assert partial_json('{"ok": tr') == {}
    assert partial_json('[1, 2, {"a": [3') == [1, 2, {"a": []}]
    assert partial_json('"caf\\u00') == "caf"
    assert partial_json('"a\\') == "a"
    assert partial_json("12") == 12
    assert partial_json("") is None


def test_a_fence_and_whitespace_before_the_value_are_skipped_and_text_after_it_ignored():
    assert partial_json('```json\n{"a": 1, "b"') == {"a": 1}
    assert partial_json("  \n [true") == [True]
    assert partial_json('{"a": 1}\n```\nDone.') == {"a": 1}


def test_text_that_is_no_json_prefix_is_none_and_never_raises():
    for text in ("nope", '{"a" 1}', "[1 2]", "{'a': 1}", '"\x01"', "[" * 100000, 12):
        assert partial_json(text) is None


def fed(text, cuts):
    """What a PartialJSON returns after each piece of ``text`` cut at ``cuts``, kept
    as it was then (the value itself grows in place at the next feed)."""
    reader, start, seen = PartialJSON(), 0, []
    for end in sorted(set(cuts)) + [len(text)]:
        value = reader.feed(text[start:end])
        seen.append((end, copy.deepcopy(value)))
        assert reader.snapshot() == value
        start = end
    return seen


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(JSON, st.booleans(), st.sampled_from(["", "```json\n", " \n"]),
       st.sampled_from(["", "\n```", "x"]), st.data())
def test_the_same_text_cut_anywhere_reads_as_each_whole_prefix_does(value, ascii_only,
                                                                     fence, after, data):
    text = fence + json.dumps(value, ensure_ascii=ascii_only) + after
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=10))
    for end, seen in fed(text, cuts) + fed(text, range(len(text))):
        assert seen == partial_json(text[:end])
    assert fed(text, cuts)[-1][1] == json.loads(text[len(fence):len(text) - len(after)])


def test_an_escape_or_a_surrogate_pair_cut_between_deltas_is_read_whole():
    reader = PartialJSON()
    assert [copy.deepcopy(reader.feed(d))
            for d in ('{"a": "x\\', 'u00e9\\ud83d', '\\ude', '00"}')] == [
        {"a": "x"}, {"a": "x\u00e9"}, {"a": "x\u00e9"}, {"a": "x\u00e9\U0001f600"}]


def test_a_number_that_cannot_go_on_is_whole():
    assert partial_json("1.5.") == 1.5 and partial_json("[1.5.") is None
    assert partial_json("[1.5") == [] and partial_json("[1.5,") == [1.5]


@pytest.mark.slow
def test_reading_a_stream_delta_by_delta_reads_each_character_once(monkeypatch):
    text = json.dumps([{"id": i, "name": f"item {i} \u00e9", "tags": ["a", "b\\n"],
                        "score": i * 1.5, "ok": None} for i in range(3000)])  # 230 KB
    read = []
    original = PartialJSON._read
    monkeypatch.setattr(PartialJSON, "_read", lambda self, t: read.append(len(t)) or
                        original(self, t))
    reader = PartialJSON()
    for start in range(0, len(text), 7):
        reader.feed(text[start:start + 7])
    assert reader.value == json.loads(text)
    # Each character once, plus an escape cut in half read again, plus the "." or "e"
    # of a number read again: nothing grows with the text already read.
    assert sum(read) < 1.1 * len(text)


@pytest.mark.slow
def test_partial_json_after_each_delta_feeds_its_reader_only_what_was_added(monkeypatch):
    text = json.dumps({"rows": [[i, str(i)] for i in range(20000)]})  # 240 KB
    fed_in = []
    original = PartialJSON.feed
    monkeypatch.setattr(PartialJSON, "feed", lambda self, d: fed_in.append(len(d)) or
                        original(self, d))
    started = time.monotonic()
    for end in range(10, len(text) + 10, 10):
        value = partial_json(text[:end])
    assert value == json.loads(text) and sum(fed_in) == len(text)
    # Read again from the start each time, this was 24,000 parses of up to 240 KB
    # (many minutes); a bound no loaded machine should reach.
    assert time.monotonic() - started < 60


def test_partial_json_keeps_what_it_returned_and_other_text_starts_afresh():
    first = partial_json('{"a": [1, "x')
    second = partial_json('{"a": [1, "xy", 2')
    assert first == {"a": [1, "x"]} and second == {"a": [1, "xy"]}
    assert partial_json('[true') == [True] and partial_json('{"a": [1, "x') == first
    seen = []
    thread = threading.Thread(target=lambda: seen.append(partial_json('{"b": "o')))
    thread.start()
    thread.join()
    assert seen == [{"b": "o"}] and partial_json('{"a": [1, "x", 3') == {"a": [1, "x"]}


def test_feed_grows_its_value_in_place_and_a_snapshot_stays_as_it_was():
    reader = PartialJSON()
    live = reader.feed('{"rows": [{"name": "a"}, {"name": "b')
    kept = reader.snapshot()
    assert live == kept == {"rows": [{"name": "a"}, {"name": "b"}]}
    assert reader.feed('ob"}, 3') is live
    assert live == {"rows": [{"name": "a"}, {"name": "bob"}]}
    assert kept == {"rows": [{"name": "a"}, {"name": "b"}]}
    # What was complete is shared between the two; the containers still open are not.
    assert kept["rows"][0] is live["rows"][0] and kept["rows"] is not live["rows"]


def test_a_long_array_is_one_list_grown_in_place_never_copied_per_delta():
    text = json.dumps({"items": [{"id": n, "name": f"item {n}"} for n in range(2000)]})
    reader = PartialJSON()
    root = reader.feed(text[:12])
    items = root["items"]
    for start in range(12, len(text), 10):
        assert reader.feed(text[start:start + 10]) is root
        assert root["items"] is items
    assert root == json.loads(text)


def test_nesting_past_the_depth_cap_is_not_read():
    assert partial_json("[" * MAX_DEPTH) is not None
    assert partial_json("[" * (MAX_DEPTH + 1)) is None
    assert PartialJSON().feed("[" * 100000) is None


def test_feed_refuses_what_is_not_text():
    with pytest.raises(nacelle.ConfigError, match="str"):
        PartialJSON().feed(b"{}")
