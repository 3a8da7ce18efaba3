"""Events, stops and usage: frozen values with the meanings DESIGN.md gives them."""

import copy
import dataclasses
import json
import sys

import pytest

from nacelle.errors import ConfigError
from nacelle.events import Event, Kind, Stop, ToolEvent, Usage, _wire_cost, _wire_count


def test_kind_values_are_the_documented_strings():
    assert {k.name: k.value for k in Kind} == {
        "TEXT": "text", "THINKING": "thinking", "TOOL_CALL": "tool_call",
        "TOOL_RESULT": "tool_result", "TURN": "turn", "DONE": "done",
        "COMPACTION": "compaction", "TOOL_INPUT": "tool_input",
    }
    assert Kind.TEXT == "text" and isinstance(Kind.TEXT, str)


def test_stop_values_are_the_documented_strings():
    assert {s.name: s.value for s in Stop} == {
        "END": "end", "TOOLS": "tools", "MAX_TOKENS": "max_tokens", "CONTEXT": "context",
        "REFUSAL": "refusal", "ITERATIONS": "iterations", "OTHER": "other", "BUDGET": "budget",
        "INVALID_OUTPUT": "invalid_output", "PAUSED": "paused", "LOOP": "loop",
    }


def test_a_tool_event_is_not_paused_and_an_event_has_no_checkpoint_by_default():
    from nacelle.events import Event, Kind, ToolEvent

    tool = ToolEvent("c1", 0, "send", "{}")
    assert tool.paused is False and Event(Kind.DONE).checkpoint is None
    assert "checkpoint" not in repr(Event(Kind.DONE, stop=Stop.END))


def test_only_end_is_complete():
    assert [s for s in Stop if s.complete] == [Stop.END]


def test_enums_serialise_as_their_values():
    assert json.dumps([Kind.DONE, Stop.END]) == '["done", "end"]'
    assert f"{Kind.TEXT}" == "text" and str(Stop.TOOLS) == "tools"


def test_usage_adds_field_by_field_with_float_cost():
    a = Usage(1, 2, 3, 4, 5, 0.1)
    b = Usage(10, 20, 30, 40, 50, 0.2)
    total = a + b
    assert total == Usage(11, 22, 33, 44, 55, total.cost)
    assert total.cost == pytest.approx(0.3)
    assert sum([a, b], Usage()) == a + b


def test_one_hour_cache_writes_are_a_part_of_the_writes_and_add_up():
    a = Usage(cache_creation_tokens=10, cache_write_1h_tokens=4)
    b = Usage(cache_creation_tokens=5, cache_write_1h_tokens=5)
    assert (a + b).cache_write_1h_tokens == 9 and (a + b).cache_creation_tokens == 15
    assert (a + b).total == 15  # counted once, inside the writes
    assert Usage(1, 2).cache_write_1h_tokens == 0


@pytest.mark.parametrize("writes, hour", [(3, 4), (0, 1), (5, -1), (5, 1.0), (5, True)])
def test_more_one_hour_writes_than_writes_or_a_count_that_is_not_one_is_refused(writes, hour):
    with pytest.raises(ConfigError, match="cache_write_1h_tokens"):
        Usage(cache_creation_tokens=writes, cache_write_1h_tokens=hour)


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


def test_event_takes_its_fields_in_order_with_their_defaults_as_a_dataclass_would():
    import inspect

    parameters = list(inspect.signature(Event).parameters.values())
    fields = dataclasses.fields(Event)
    assert [p.name for p in parameters] == [f.name for f in fields]
    assert [p.default for p in parameters][1:] == [f.default for f in fields][1:]
    assert parameters[0].default is inspect.Parameter.empty
    every = dict(kind=Kind.DONE, text="t", tool=ToolEvent("i", 0, "n", "{}"), usage=Usage(3),
                 stop=Stop.END, messages=("m",), output={"a": 1}, checkpoint="c",
                 compaction="k", agent=("child",), via="call")
    made = Event(**every)  # type: ignore[arg-type]
    assert {f.name: getattr(made, f.name) for f in fields} == every
    assert Event(*every.values()) == made  # type: ignore[arg-type]
    assert dataclasses.replace(made, text="u") == Event(**{**every, "text": "u"})  # type: ignore[arg-type]


def test_a_delta_made_from_the_template_equals_one_made_by_init():
    from nacelle.events import _delta

    made = _delta(Kind.THINKING, "hm")
    assert made == Event(Kind.THINKING, text="hm") and type(made) is Event
    assert made.__dict__ == Event(Kind.THINKING, text="hm").__dict__
    assert hash(made) == hash(Event(Kind.THINKING, text="hm"))


def test_event_repr_shows_only_what_matters_for_its_kind():
    assert repr(Event(Kind.TEXT, text="hi")) == "Event(kind=Kind.TEXT, text='hi')"
    done = repr(Event(Kind.DONE, usage=Usage(1), stop=Stop.END, messages=(1, 2)))
    assert "stop=Stop.END" in done and "<2 messages>" in done and "Usage(" in done


def test_tool_event_failed_follows_error():
    assert ToolEvent("i", 0, "n", "{}", error="boom").failed
    assert not ToolEvent("i", 0, "n", "{}", result="ok").failed


@pytest.mark.parametrize("field", ["input_tokens", "output_tokens", "cache_read_tokens",
                                   "cache_creation_tokens", "reasoning_tokens"])
@pytest.mark.parametrize("bad", [-5, -1, 1.5, float("nan"), "12", None, True])
def test_usage_refuses_a_token_count_that_is_not_a_whole_number_of_zero_or_more(field, bad):
    with pytest.raises(ConfigError, match=f"Usage.{field}"):
        Usage(**{field: bad})


@pytest.mark.parametrize("bad", [-0.01, -5, float("nan"), float("inf"), float("-inf"),
                                 10**400, "0.1", None, True])
def test_usage_refuses_a_cost_that_is_not_a_finite_amount_of_zero_or_more(bad):
    with pytest.raises(ConfigError, match="Usage.cost"):
        Usage(cost=bad)


def test_usage_refusals_are_value_errors_that_never_print_a_huge_number_whole():
    with pytest.raises(ValueError) as caught:
        Usage(cost=-(10**5000))
    assert len(str(caught.value)) < 200


def test_usage_keeps_a_whole_dollar_cost_as_a_float():
    usage = Usage(cost=2)
    assert type(usage.cost) is float and usage.cost == 2.0


def test_a_huge_but_whole_token_count_is_a_usage_all_the_same():
    assert Usage(input_tokens=10**400).total == 10**400


@pytest.mark.parametrize("value, count", [
    (0, 0), (12, 12), (12.0, 12), (2**53, 2**53), (2**53 + 1, None), (10**400, None),
    (-5, None), (1.5, None), (float("nan"), None), (float("inf"), None), (True, None),
    (None, None), ("12", None), ([1], None), ({"n": 1}, None),
])
def test_a_count_read_from_a_provider_is_a_plain_int_or_nothing(value, count):
    assert _wire_count(value) == count


@pytest.mark.parametrize("value, cost", [
    (0, 0.0), (0.0012, 0.0012), (3, 3.0), (-0.5, None), (float("nan"), None),
    (float("inf"), None), (10**400, None), (1e300, None), (True, None), ("0.1", None),
    (None, None),
])
def test_a_cost_read_from_a_provider_is_a_finite_float_or_nothing(value, cost):
    assert _wire_cost(value) == cost


# -- dollars: integer pico-dollars inside, priced or not ---------------------------------


def test_usage_still_takes_its_six_documented_fields_by_position_and_is_unpriced():
    usage = Usage(1, 2, 3, 4, 5, 0.5)
    assert (usage.cost, usage.priced) == (0.5, False)
    assert Usage(1, 2, 3, 4, 5, 0.5, True).priced


@pytest.mark.parametrize("bad", [1, 0, None, "yes", 1.0])
def test_priced_must_be_a_bool(bad):
    with pytest.raises(ConfigError, match="Usage.priced"):
        Usage(priced=bad)


def test_a_float_cost_is_read_at_its_shortest_decimal():
    assert Usage(cost=0.1)._pico == 10**11 and Usage(cost=0.1).cost == 0.1
    assert Usage(cost=0.000467)._pico == 467_000_000
    assert Usage(cost=1e300).cost == 1e300


def test_tenths_add_up_to_the_decimal_sum_not_the_float_one():
    assert 0.1 + 0.2 != 0.3
    assert (Usage(cost=0.1) + Usage(cost=0.2)).cost == 0.3


def test_ten_thousand_turns_added_one_by_one_cost_exactly_what_they_add_up_to():
    turn = Usage(input_tokens=1, cost=0.0001)
    floats, total = 0.0, Usage()
    for _ in range(10_000):
        floats += turn.cost
        total += turn
    assert floats != 1.0  # 0.9999999999999062: the drift integer accounting removes
    assert total.cost == 1.0 and total.input_tokens == 10_000


def test_a_million_turns_of_a_micro_dollar_sum_to_exactly_one_dollar_where_floats_drift():
    turn = Usage(input_tokens=1, cost=0.000001)
    floats = 0.0
    for _ in range(1_000_000):
        floats += turn.cost
    assert floats != 1.0  # 1.000000000007918
    # Integer addition does not care how it is grouped, so a thousand blocks of a
    # thousand turns is the same sum as a million turns one by one, in 1/500 the time.
    block = sum([turn] * 1000, Usage())
    total = sum([block] * 1000, Usage())
    assert total.cost == 1.0 and total.input_tokens == 1_000_000 and total._pico == 10**12


def test_a_sum_too_large_for_a_float_is_refused_like_any_infinite_cost():
    big = Usage(cost=sys.float_info.max)
    with pytest.raises(ConfigError, match="Usage.cost"):
        big + big


def test_a_sum_is_priced_only_when_every_part_that_used_tokens_was_priced():
    priced = Usage(10, 2, cost=0.25, priced=True)
    unpriced = Usage(5, 1)
    assert (priced + priced).priced
    assert (Usage() + priced).priced and (priced + Usage()).priced
    assert sum([priced, priced], Usage()).priced
    assert not (priced + unpriced).priced and not (unpriced + priced).priced
    assert not (unpriced + unpriced).priced and not (Usage() + Usage()).priced
    partial = priced + unpriced  # the cost it has is a lower bound, not the bill
    assert partial.cost == 0.25 and partial.input_tokens == 15


def test_priced_is_part_of_a_usages_value():
    assert Usage(1, cost=0.5) != Usage(1, cost=0.5, priced=True)
    assert Usage(1, cost=0.5, priced=True) == Usage(1, cost=0.5, priced=True)


def test_a_cost_given_as_a_number_has_no_saving_from_cache():
    reported = Usage(input_tokens=10, cache_read_tokens=1000, cost=0.0012, priced=True)
    assert reported.cost_without_cache == reported.cost
    assert Usage().cost_without_cache == 0.0


def test_a_sum_adds_the_no_cache_costs_of_its_parts():
    a = Usage(cost=0.5, _pico=500_000_000_000, _pico_without_cache=900_000_000_000)
    b = Usage(cost=0.25)
    assert (a + b).cost_without_cache == 1.15 and (a + b).cost == 0.75


def test_replacing_the_cost_of_a_copy_drops_the_integers_it_no_longer_matches():
    a = Usage(10, cost=0.5, _pico=500_000_000_000, _pico_without_cache=900_000_000_000)
    changed = dataclasses.replace(a, cost=0.75)
    assert changed._pico == 750_000_000_000 and changed.cost_without_cache == 0.75
    assert dataclasses.replace(a, input_tokens=11).cost_without_cache == 0.9


@pytest.mark.parametrize("bad", [-1, 1.5, "5", True])
def test_hidden_integers_that_are_not_counts_are_dropped_for_the_cost(bad):
    usage = Usage(cost=0.5, _pico=bad)
    assert usage._pico == 500_000_000_000 and usage.cost == 0.5


@pytest.mark.parametrize("usage", [
    Usage(),
    Usage(1, 2, 3, 4, 5, 0.5),
    Usage(10, 2, cost=0.000467, priced=True),
    Usage(3, cost=0.5, priced=True, _pico=500_000_000_000, _pico_without_cache=10**12),
    Usage(10, 2, cost=0.25, priced=True) + Usage(5, 1),
])
def test_usage_round_trips_through_json_with_priced_and_its_no_cache_cost(usage):
    back = Usage(**json.loads(json.dumps(dataclasses.asdict(usage))))
    assert back == usage
    assert (back.priced, back.cost, back.cost_without_cache) == (
        usage.priced, usage.cost, usage.cost_without_cache)


def test_a_tool_inputs_text_so_far_is_its_own_prefix_joined_only_when_read():
    import pickle

    from nacelle.events import _input_class, _input_so_far

    pieces = ['{"pa', 'th": ']
    made = _input_class("c1", 0, "write_file")
    early = _input_so_far(made, pieces, 1)
    pieces.append('"a.txt"}')
    later = _input_so_far(made, pieces, 3)
    assert early.__dict__ == {"_parts": pieces, "_count": 1}  # nothing joined yet
    assert early.input == '{"pa' and later.input == '{"path": "a.txt"}'
    plain = ToolEvent("c1", 0, "write_file", '{"pa')
    assert early == plain and plain == early and hash(early) == hash(plain)
    assert early != later
    assert repr(early) == repr(plain)
    assert pickle.loads(pickle.dumps(early)) == plain
    assert dataclasses.replace(early, input="{}").input == "{}"
    assert dataclasses.replace(early, id="c2") == ToolEvent("c2", 0, "write_file", '{"pa')
    assert dataclasses.asdict(later)["input"] == '{"path": "a.txt"}'
    assert copy.copy(later) == copy.deepcopy(later) == later
    with pytest.raises(dataclasses.FrozenInstanceError):
        early.id = "c2"  # type: ignore[misc]
    # Another call's events are of a class of their own, holding its fields.
    other = _input_so_far(_input_class("c2", 1, "read_file"), ['{}'], 1)
    assert (other.id, other.index, other.name, other.input) == ("c2", 1, "read_file", "{}")
    assert early.id == "c1" and type(other) is not type(early)


def test_every_defaulted_field_of_an_event_and_a_tool_event_is_its_class_attribute():
    # A TOOL_INPUT and its ToolEvent are made holding only the fields that differ
    # from these defaults (backends/_stream.ToolInput): the rest is read here.
    for cls in (Event, ToolEvent):
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                assert getattr(cls, f.name) is f.default, (cls, f.name)


def test_a_tool_input_made_from_its_calls_fields_reads_as_the_one_built_in_full():
    import copy
    import pickle

    from nacelle.backends._stream import ToolInputs

    call = ToolInputs().start("c1", "write_file")
    made = call.add('{"pa')
    built = Event(Kind.TOOL_INPUT, text='{"pa', tool=ToolEvent("c1", 0, "write_file", '{"pa'))
    assert set(made.__dict__) == {"kind", "text", "tool"}  # the rest is the class's
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert (made.usage, made.stop, made.messages, made.agent, made.via) == (
        Usage(), None, (), (), "")
    tool = made.tool
    assert (tool.result, tool.error, tool.duration, tool.server, tool.content) == (
        "", None, 0.0, "", ())
    assert dataclasses.asdict(made) == dataclasses.asdict(built)
    assert dataclasses.replace(made, via="t1") == dataclasses.replace(built, via="t1")
    assert pickle.loads(pickle.dumps(made)) == built and copy.copy(made) == built
