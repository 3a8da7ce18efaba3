"""Events, stops and usage: frozen values with the meanings DESIGN.md gives them."""

import dataclasses
import json

import pytest

from nacelle.events import Event, Kind, Stop, ToolEvent, Usage


def test_kind_values_are_the_documented_strings():
    assert {k.name: k.value for k in Kind} == {
        "TEXT": "text", "THINKING": "thinking", "TOOL_CALL": "tool_call",
        "TOOL_RESULT": "tool_result", "TURN": "turn", "DONE": "done",
    }
    assert Kind.TEXT == "text" and isinstance(Kind.TEXT, str)


def test_stop_values_are_the_documented_strings():
    assert {s.name: s.value for s in Stop} == {
        "END": "end", "TOOLS": "tools", "MAX_TOKENS": "max_tokens", "CONTEXT": "context",
        "REFUSAL": "refusal", "ITERATIONS": "iterations", "OTHER": "other", "BUDGET": "budget",
    }


def test_only_end_is_complete():
    assert [s for s in Stop if s.complete] == [Stop.END]


def test_enums_serialise_as_their_values():
    assert json.dumps([Kind.DONE, Stop.END]) == '["done", "end"]'
    assert f"{Kind.TEXT}" == "text" and str(Stop.TOOLS) == "tools"


def test_usage_adds_field_by_field_with_float_cost():
    a = Usage(1, 2, 3, 4, 5, 0.1)
    b = Usage(10, 20, 30, 40, 50, 0.2)
    assert a + b == Usage(11, 22, 33, 44, 55, pytest.approx(0.3))
    assert sum([a, b], Usage()) == a + b


def test_usage_total_counts_every_billed_token_but_not_reasoning_twice():
    assert Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100,
                 cache_creation_tokens=7, reasoning_tokens=3).total == 122


def test_cache_hit_rate_is_reads_over_reads_and_input():
    assert Usage(input_tokens=25, cache_read_tokens=75).cache_hit_rate == 0.75


def test_cache_hit_rate_is_zero_without_input():
    assert Usage().cache_hit_rate == 0.0
    assert Usage(output_tokens=9, cache_creation_tokens=9).cache_hit_rate == 0.0


def test_cache_writes_are_not_counted_as_misses():
    assert Usage(input_tokens=0, cache_read_tokens=10,
                 cache_creation_tokens=90).cache_hit_rate == 1.0


def test_events_are_frozen_values():
    e = Event(Kind.TEXT, text="hi")
    assert e == Event(Kind.TEXT, text="hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.text = "no"  # type: ignore[misc]
    t = ToolEvent("id1", 0, "search", '{"q":1}')
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.result = "x"  # type: ignore[misc]


def test_event_defaults_match_the_contract():
    e = Event(Kind.TURN)
    assert (e.text, e.tool, e.usage, e.stop, e.messages) == ("", None, Usage(), None, ())
    t = ToolEvent("i", 1, "n", "{}")
    assert (t.result, t.error, t.duration, t.discarded, t.refused, t.server) == (
        "", None, 0.0, False, False, "")


def test_event_repr_shows_only_what_matters_for_its_kind():
    assert repr(Event(Kind.TEXT, text="hi")) == "Event(kind=Kind.TEXT, text='hi')"
    done = repr(Event(Kind.DONE, usage=Usage(1), stop=Stop.END, messages=(1, 2)))
    assert "stop=Stop.END" in done and "<2 messages>" in done and "Usage(" in done


def test_tool_event_failed_follows_error():
    assert ToolEvent("i", 0, "n", "{}", error="boom").failed
    assert not ToolEvent("i", 0, "n", "{}", result="ok").failed
