"""Input validation: the built-in validator's verdicts and messages, and a
differential test holding it to jsonschema's verdicts on generated schemas."""

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nacelle.validation import builtin_check, compile_schema, jsonschema_check

OBJECT = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "mode": {"enum": ["fast", "slow"]},
        "when": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                 "minItems": 2, "maxItems": 2},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}},
    },
    "required": ["query"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("instance, message", [
    ({}, "input: the required property 'query' is missing"),
    ({"query": 1}, "input.query: expected string, got integer"),
    ({"query": "q", "limit": 0}, "input.limit: 0 is less than the minimum of 1"),
    ({"query": "q", "limit": 51}, "input.limit: 51 is more than the maximum of 50"),
    ({"query": "q", "limit": True}, "input.limit: expected integer, got boolean"),
    ({"query": "q", "limit": 2.5}, "input.limit: expected integer, got number"),
    ({"query": "q", "tags": ["a", "a"]}, 'input.tags: items must be unique; "a" repeats'),
    ({"query": "q", "tags": ["a", 3]}, "input.tags[1]: expected string, got integer"),
    ({"query": "q", "mode": "medium"}, 'input.mode: "medium" is not one of "fast", "slow"'),
    ({"query": "q", "pair": [1]}, "input.pair: expected at least 2 items, got 1"),
    ({"query": "q", "pair": [1, 2]}, "input.pair[1]: expected string, got integer"),
    ({"query": "q", "extra": {"a": "x"}}, "input.extra.a: expected number, got string"),
    ({"query": "q", "surprise": 1}, "input: unexpected property 'surprise'"),
])
def test_the_builtin_validator_names_the_first_violation(instance, message):
    assert builtin_check(OBJECT)(instance).startswith(message)


@pytest.mark.parametrize("instance", [
    {"query": "q"},
    {"query": "q", "limit": 3.0, "tags": ["a", "b"], "mode": "fast", "when": None,
     "pair": [1, "a"], "extra": {"a": 1, "b": 2.5}},
])
def test_the_builtin_validator_accepts_valid_input(instance):
    assert builtin_check(OBJECT)(instance) is None
    assert jsonschema_check(OBJECT)(instance) is None


def test_jsonschema_messages_name_the_path():
    assert jsonschema_check(OBJECT)({"query": 3}).startswith("input.query:")


def test_compile_schema_is_cached_per_schema_text():
    assert compile_schema(OBJECT, "builtin") is compile_schema(dict(OBJECT), "builtin")


def test_unknown_keywords_are_ignored_and_logged_at_debug(caplog):
    caplog.set_level(logging.DEBUG, logger="nacelle.validation")
    check = builtin_check({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}},
                           "description": "annotations are not unknown"})
    assert check({"s": "b"}) is None
    assert "pattern" in caplog.text and "description" not in caplog.text


# -- the differential test ----------------------------------------------------------

scalars = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
    {"type": "null"}, {}, {"type": "integer", "minimum": 0, "maximum": 10},
    {"type": "number", "minimum": -1.5}, {"enum": ["a", 1, True, None]}, {"enum": [0, 1.0]},
    {"type": "string", "enum": ["x", "y"]},
])


def extend(children):
    names = st.sampled_from(["a", "b", "c"])
    return st.one_of(
        st.builds(lambda item: {"type": "array", "items": item}, children),
        st.builds(lambda item: {"type": "array", "items": item, "uniqueItems": True}, children),
        st.builds(lambda items: {"type": "array", "prefixItems": items, "minItems": len(items),
                                 "maxItems": len(items)}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda item: {"anyOf": [item, {"type": "null"}]}, children),
        st.builds(lambda props, req, extra: {
            "type": "object", "properties": props,
            "required": sorted(set(req) & set(props)), "additionalProperties": extra},
            st.dictionaries(names, children, max_size=3), st.lists(names, max_size=3),
            st.one_of(st.booleans(), children)),
    )


schemas = st.recursive(scalars, extend, max_leaves=6)
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.sampled_from([0.0, 1.0, 2.5, -1.5]),
              st.sampled_from(["a", "b", "x", ""])),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), children, max_size=4)),
    max_leaves=8,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, instance=values)
def test_the_builtin_validator_agrees_with_jsonschema(schema, instance):
    ours = builtin_check(schema)(instance) is None
    theirs = jsonschema_check(schema)(instance) is None
    assert ours == theirs, (schema, instance)
