"""partial_json: every prefix of a valid document parses without raising, the whole
document gives what json.loads gives, and what a display sees only grows."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from nacelle import partial_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON, st.booleans(), st.booleans())
def test_every_prefix_parses_and_the_whole_equals_json_loads(value, ascii_only, indent):
    text = json.dumps(value, ensure_ascii=ascii_only, indent=1 if indent else None)
    for end in range(len(text)):
        partial_json(text[:end])  # never raises
    assert partial_json(text) == json.loads(text)


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
