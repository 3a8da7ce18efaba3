"""The depth-capped JSON reader: what it refuses, what it leaves to json.loads, and
that its scan stays linear."""

import json
import pickle
import time

import pytest

from nacelle.bounded_json import COUNT_BELOW, DOCUMENT_DEPTH, MAX_DEPTH, TooDeep, depth_exceeds, loads
from nacelle.errors import NacelleError


def nested(levels, open_="[", close="]"):
    return open_ * levels + close * levels


def test_text_within_the_cap_reads_as_json_loads_reads_it():
    for text in ('{"a": [1, {"b": "c"}]}', "[]", "3", '"x"', nested(MAX_DEPTH),
                 nested(MAX_DEPTH, '{"k":', "}").replace(":}", ":1}")):
        assert loads(text) == json.loads(text)


def test_text_nested_a_thousand_deep_is_refused_naming_what_was_read():
    with pytest.raises(TooDeep) as caught:
        loads(nested(1000), what="tool input")
    assert isinstance(caught.value, NacelleError) and isinstance(caught.value, ValueError)
    assert str(caught.value).startswith("tool input nested deeper than 128 levels")
    assert caught.value.what == "tool input" and caught.value.limit == MAX_DEPTH


def test_one_level_past_the_cap_is_refused_and_objects_count_like_arrays():
    with pytest.raises(TooDeep):
        loads(nested(MAX_DEPTH + 1))
    with pytest.raises(TooDeep):
        loads('{"a":' * 6 + "1" + "}" * 6, max_depth=5)
    assert loads('{"a":' * 5 + "1" + "}" * 5, max_depth=5) is not None


def test_brackets_inside_strings_do_not_count():
    text = json.dumps(["[" * 5000, "{" * 5000, 'a\\"[[[[', "\\"])
    assert loads(text, max_depth=1) == json.loads(text)


def test_an_escaped_quote_does_not_end_a_string():
    text = '["\\"' + "[" * 50 + '"]'
    assert loads(text, max_depth=1) == ["\"" + "[" * 50]


def test_text_that_is_not_json_raises_what_json_loads_raises():
    with pytest.raises(json.JSONDecodeError):
        loads('{"a": ')
    with pytest.raises(json.JSONDecodeError):
        loads('["unterminated' + "[" * 500)


def test_bytes_are_decoded_as_json_loads_decodes_them():
    assert loads('{"é": [1]}'.encode("utf-16")) == {"é": [1]}
    with pytest.raises(TooDeep):
        loads(nested(5000).encode("utf-8"), max_depth=DOCUMENT_DEPTH)


def test_options_reach_json_loads():
    assert loads("[1.5]", parse_float=str) == ["1.5"]


def test_the_error_survives_pickling():
    error = pickle.loads(pickle.dumps(TooDeep("a checkpoint", 7)))
    assert (error.what, error.limit, str(error)) == (
        "a checkpoint", 7, str(TooDeep("a checkpoint", 7)))


@pytest.mark.slow
def test_the_scan_is_linear_even_for_many_strings_and_hostile_quotes():
    many = json.dumps([["x"] for _ in range(200_000)])
    quotes = '"' + '\\"' * 500_000  # a string that never closes, full of escaped quotes
    start = time.perf_counter()
    assert not depth_exceeds(many, 2)
    assert not depth_exceeds(quotes + "[" * 10, 2)
    assert depth_exceeds("[" * 2_000_000, MAX_DEPTH)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("size", [100, COUNT_BELOW - 1, COUNT_BELOW, 50_000])
def test_brackets_are_counted_alike_whether_the_text_is_counted_or_searched(size):
    from nacelle.bounded_json import brackets_exceed

    for brackets in (0, 5, 6, 40):
        # Openers of both kinds, spread out, some inside strings (they count too).
        pieces = ["[", "{", '"[', '{"'] * (brackets // 4) + ["["] * (brackets % 4)
        filler = "x" * max(0, (size - 2 * brackets) // (len(pieces) + 1))
        text = filler + filler.join(pieces) + filler
        assert brackets_exceed(text, 5) is (brackets > 5), (size, brackets)
        assert brackets_exceed(text, brackets) is False


def test_a_long_value_nested_past_the_cap_is_refused_and_one_within_it_parses():
    deep = '{"a": ' * 200 + '"x"' + "}" * 200
    padding = '"' + "y" * 100_000 + '"'
    with pytest.raises(TooDeep):
        loads("[" + padding + "," + deep + "]")
    shallow = '{"a": ' * 100 + padding + "}" * 100
    assert loads(shallow)["a"]["a"]["a"] is not None
