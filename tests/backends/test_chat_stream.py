"""The Chat Completions accumulator fed plain dicts: one test per pitfall of the dialect.

Most tests feed OpenRouter's flavour (``openrouter.Accumulator``), the richest one;
the tests at the end feed the dialects of the other presets."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nacelle import (
    Event, Kind, NacelleError, Reasoning, Stop, StreamError, StreamTruncated, Text, ToolCall,
    Usage, retryable,
)
from nacelle.backends import chat as chat_backend
from nacelle.backends.chat import stream as chat_stream
from nacelle.backends.openrouter import Accumulator, usage_from
from nacelle.events import ToolEvent
from nacelle.messages import ProviderBlock
from nacelle.pricing import Price
from nacelle.sse import SSEDecoder, parse_json
from nacelle.testing.wire import openrouter_stream

from hostile import EMOJI, HIGH, LOW, chain, leaves, locations, swapped, wrong_values
from streamed_calls import check, early_calls, feeds, inputs, replay


def chunk(delta=None, finish=None, usage=None, choices=None, **extra):
    body = {"id": "gen-1", "object": "chat.completion.chunk", "created": 1,
            "model": "anthropic/claude-haiku-4.5", "provider": "Amazon Bedrock"}
    if choices is None:
        choice = {"index": 0, "delta": {"role": "assistant", **(delta or {})},
                  "finish_reason": finish, "native_finish_reason": None}
        choices = [choice]
    body["choices"] = choices
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return body


def call(index=None, id=None, name=None, arguments=None, **extra):
    fragment = dict(extra)
    if index is not None:
        fragment["index"] = index
    if id is not None:
        fragment["id"] = id
        fragment["type"] = "function"
    function = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        fragment["function"] = function
    return fragment


def run(*chunks, done=True):
    """Feed chunks; return (events, TurnEnd)."""
    acc = Accumulator()
    events = []
    for c in chunks:
        events.extend(acc.feed_chunk(c))
    if done:
        acc.feed_data("[DONE]")
    return events, acc.finish()


def calls_of(end):
    return [p for p in end.parts if isinstance(p, ToolCall)]


def test_each_content_delta_is_one_text_event_and_null_or_empty_ones_are_ignored():
    events, end = run(
        chunk({"content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": None}),
        chunk({"content": "lo"}),
        chunk({"content": ""}, finish="stop"),
    )
    assert events == [Event(Kind.TEXT, text="Hel"), Event(Kind.TEXT, text="lo")]
    assert end.parts == (Text("Hello"),)
    assert end.stop is Stop.END
    assert end.resume is False


def test_reasoning_deltas_are_thinking_events_and_the_reasoning_part_comes_first():
    events, end = run(
        chunk({"reasoning": "Think", "reasoning_details": [
            {"type": "reasoning.text", "text": "Think", "format": "anthropic-claude-v1",
             "index": 0}]}),
        chunk({"reasoning": "ing.", "reasoning_details": [
            {"type": "reasoning.text", "text": "ing.", "format": "anthropic-claude-v1",
             "index": 0}]}),
        chunk({"content": "Answer."}, finish="stop"),
    )
    assert [(e.kind, e.text) for e in events] == [
        (Kind.THINKING, "Think"), (Kind.THINKING, "ing."), (Kind.TEXT, "Answer.")]
    reasoning, text = end.parts
    assert text == Text("Answer.")
    assert reasoning.text == "Thinking." and reasoning.protocol == "openrouter"
    assert json.loads(reasoning.state) == [
        {"type": "reasoning.text", "text": "Thinking.", "format": "anthropic-claude-v1",
         "index": 0}]


def test_a_late_signature_after_the_text_is_merged_into_the_same_detail():
    _, end = run(
        chunk({"content": "", "reasoning": "The user is asking", "reasoning_details": [
            {"type": "reasoning.text", "text": "The user is asking",
             "format": "anthropic-claude-v1", "index": 0}]}),
        chunk({"content": "Sure."}),
        chunk({"content": "", "reasoning_details": [
            {"type": "reasoning.text", "signature": "EvsC==", "format": "anthropic-claude-v1",
             "index": 0}]}),
        chunk({"content": ""}, finish="stop"),
    )
    assert json.loads(end.parts[0].state) == [
        {"type": "reasoning.text", "text": "The user is asking",
         "format": "anthropic-claude-v1", "index": 0, "signature": "EvsC=="}]


def test_details_of_different_types_and_indexes_stay_separate_items_in_order():
    _, end = run(
        chunk({"reasoning_details": [{"type": "reasoning.summary", "summary": "Plan",
                                      "index": 0}]}),
        chunk({"reasoning_details": [{"type": "reasoning.summary", "summary": " it.",
                                      "index": 0}]}),
        chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "gAAA",
                                      "index": 1}]}),
        chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "BBB=",
                                      "index": 1, "id": "rs_1"}]}),
        chunk({"content": "Hi"}, finish="stop"),
    )
    reasoning = end.parts[0]
    assert json.loads(reasoning.state) == [
        {"type": "reasoning.summary", "summary": "Plan it.", "index": 0},
        {"type": "reasoning.encrypted", "data": "gAAABBB=", "index": 1, "id": "rs_1"},
    ]
    # No delta.reasoning was streamed, so the part's text is what the details say.
    assert reasoning.text == "Plan it."


def test_index_less_text_details_continue_the_previous_one():
    _, end = run(
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": "a"}]}),
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": "b",
                                      "signature": "s"}]}),
        chunk({}, finish="stop"),
    )
    assert json.loads(end.parts[0].state) == [
        {"type": "reasoning.text", "text": "ab", "signature": "s"}]


def test_an_empty_reasoning_details_list_is_kept_as_state():
    _, end = run(chunk({"reasoning": "x", "reasoning_details": []}), chunk({}, finish="stop"))
    assert end.parts == (Reasoning("x", "[]", "openrouter"),)


def test_tool_fragments_are_keyed_by_index_with_id_and_name_only_on_the_first():
    _, end = run(
        chunk({"content": None, "tool_calls": [
            call(0, "toolu_bdrk_01", "weather", "")]}),
        chunk({"tool_calls": [call(0, arguments="")]}),
        chunk({"tool_calls": [call(0, arguments='{"city": "Berlin')]}),
        chunk({"tool_calls": [call(1, "toolu_bdrk_02", "clock", "{}")]}),
        chunk({"tool_calls": [call(0, arguments='"}')]}),
        chunk({"content": "", "reasoning": None}, finish="tool_calls"),
    )
    assert calls_of(end) == [
        ToolCall("toolu_bdrk_01", "weather", '{"city": "Berlin"}'),
        ToolCall("toolu_bdrk_02", "clock", "{}"),
    ]
    assert end.stop is Stop.TOOLS


def test_a_tool_call_streams_its_arguments_and_is_announced_at_the_finish():
    events, _ = run(chunk({"tool_calls": [call(0, "c1", "a", "{}")]}), chunk({}, "tool_calls"))
    assert events == [Event(Kind.TOOL_INPUT, text="{}", tool=ToolEvent("c1", 0, "a", "{}")),
                      Event(Kind.TOOL_CALL, tool=ToolEvent("c1", 0, "a", "{}"))]


def test_an_id_and_name_repeated_on_every_fragment_are_not_concatenated():
    _, end = run(
        chunk({"tool_calls": [call(0, "call_1", "search", '{"q":')]}),
        chunk({"tool_calls": [call(0, "call_1", "search", '"x"}')]}),
        chunk({}, finish="tool_calls"),
    )
    assert calls_of(end) == [ToolCall("call_1", "search", '{"q":"x"}')]


def test_an_id_changed_mid_call_keeps_the_first_id():
    _, end = run(
        chunk({"tool_calls": [call(0, "call_a", "search", '{"q":')]}),
        chunk({"tool_calls": [call(0, "call_b", arguments='"x"}')]}),
        chunk({}, finish="tool_calls"),
    )
    assert calls_of(end) == [ToolCall("call_a", "search", '{"q":"x"}')]


def test_a_reused_index_with_a_new_id_after_complete_arguments_starts_a_new_call():
    _, end = run(
        chunk({"tool_calls": [call(0, "call_a", "search", '{"q":"x"}')]}),
        chunk({"tool_calls": [call(0, "call_b", "search", '{"q":')]}),
        chunk({"tool_calls": [call(0, arguments='"y"}')]}),
        chunk({}, finish="tool_calls"),
    )
    assert calls_of(end) == [ToolCall("call_a", "search", '{"q":"x"}'),
                             ToolCall("call_b", "search", '{"q":"y"}')]


def test_missing_indexes_start_a_call_on_a_new_id_and_continue_on_arguments_alone():
    _, end = run(
        chunk({"tool_calls": [call(id="g1", name="weather", arguments='{"city":')]}),
        chunk({"tool_calls": [call(arguments='"Oslo"}')]}),
        chunk({"tool_calls": [call(id="g2", name="weather", arguments='{"city":"Rome"}')]}),
        chunk({"tool_calls": [call(name="clock")]}),
        chunk({}, finish="tool_calls"),
    )
    calls = calls_of(end)
    assert [(c.name, c.input) for c in calls] == [
        ("weather", '{"city":"Oslo"}'), ("weather", '{"city":"Rome"}'), ("clock", "{}")]
    assert calls[0].id == "g1" and calls[1].id == "g2"
    assert re.fullmatch(r"call_[0-9a-f]{24}", calls[2].id)


def test_missing_and_empty_ids_are_generated_and_a_duplicate_is_passed_on_for_the_loop():
    _, end = run(
        chunk({"tool_calls": [call(0, "dup", "a", '{"n": 1}'), call(1, "dup", "b", '{"n": 2}'),
                              call(2, "", "c", "{}"), call(3, name="d", arguments="{}")]}),
        chunk({}, finish="tool_calls"),
    )
    calls = calls_of(end)
    assert [(c.id, c.name, c.input) for c in calls[:2]] == [
        ("dup", "a", '{"n": 1}'), ("dup", "b", '{"n": 2}')]
    generated = [c.id for c in calls[2:]]
    assert len(set(generated)) == 2
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in generated)


def test_two_index_less_calls_with_one_id_keep_their_own_arguments():
    _, end = run(
        chunk({"tool_calls": [call(id="same", name="weather", arguments='{"city":"Oslo"}'),
                              call(id="same", name="weather", arguments='{"city":"Rome"}')]}),
        chunk({}, finish="tool_calls"),
    )
    assert calls_of(end) == [ToolCall("same", "weather", '{"city":"Oslo"}'),
                             ToolCall("same", "weather", '{"city":"Rome"}')]


def test_two_index_less_calls_without_ids_are_not_merged_by_their_common_name():
    _, end = run(
        chunk({"tool_calls": [call(name="weather", arguments='{"city":"Oslo"}')]}),
        chunk({"tool_calls": [call(name="weather", arguments='{"city":"Rome"}')]}),
        chunk({}, finish="tool_calls"),
    )
    assert [c.input for c in calls_of(end)] == ['{"city":"Oslo"}', '{"city":"Rome"}']


def test_a_repeated_id_with_a_trailing_empty_fragment_does_not_start_a_call():
    _, end = run(
        chunk({"tool_calls": [call(0, "call_1", "search", '{"q":"x"}')]}),
        chunk({"tool_calls": [call(0, "call_1", "search", "")]}),
        chunk({}, finish="tool_calls"),
    )
    assert calls_of(end) == [ToolCall("call_1", "search", '{"q":"x"}')]


@pytest.mark.parametrize("arguments", ["", "   ", None])
def test_blank_or_missing_arguments_become_an_empty_object(arguments):
    _, end = run(chunk({"tool_calls": [call(0, "c1", "now", arguments)]}),
                 chunk({}, finish="tool_calls"))
    assert calls_of(end) == [ToolCall("c1", "now", "{}")]


def test_arguments_are_kept_byte_for_byte_and_never_parsed_before_the_end():
    pieces = ['{"path": "a', "", 'b.txt", ', '"text": "naïve \\u00e9 ', '"}', ""]
    _, end = run(*[chunk({"tool_calls": [call(0, "c1" if i == 0 else None,
                                              "write" if i == 0 else None, p)]})
                   for i, p in enumerate(pieces)],
                 chunk({}, finish="tool_calls"))
    assert calls_of(end)[0].input == "".join(pieces)


def test_invalid_json_arguments_are_passed_on_for_the_loop_to_report():
    _, end = run(chunk({"tool_calls": [call(0, "c1", "a", "{not json")]}), chunk({}, "stop"))
    assert calls_of(end) == [ToolCall("c1", "a", "{not json")]
    assert end.stop is Stop.TOOLS


@pytest.mark.parametrize("finish", ["stop", None, "content_filter", "weird"])
def test_calls_run_whatever_the_finish_says_unless_error_or_length(finish):
    _, end = run(chunk({"tool_calls": [call(0, "c1", "a", "{}")]}), chunk({}, finish))
    assert end.stop is Stop.TOOLS
    assert calls_of(end)[0].finished


def test_length_with_calls_stops_at_max_tokens_and_marks_the_cut_call_unfinished():
    _, end = run(
        chunk({"tool_calls": [call(0, "c1", "a", '{"x": 1}'), call(1, "c2", "b", '{"y": "ab')]}),
        chunk({}, finish="length"),
    )
    assert end.stop is Stop.MAX_TOKENS
    assert calls_of(end) == [ToolCall("c1", "a", '{"x": 1}', True),
                             ToolCall("c2", "b", '{"y": "ab', False)]


@pytest.mark.parametrize("finish, stop", [
    ("stop", Stop.END), ("length", Stop.MAX_TOKENS), ("content_filter", Stop.REFUSAL),
    ("tool_calls", Stop.OTHER), ("something_new", Stop.OTHER), (None, Stop.END),
])
def test_finish_reasons_map_to_stops_without_calls(finish, stop):
    _, end = run(chunk({"content": "x"}, finish=finish))
    assert end.stop is stop


def test_a_finish_and_usage_repeated_are_handled_once_with_usage_from_the_last():
    usage = {"prompt_tokens": 626, "completion_tokens": 106, "total_tokens": 732,
             "cost": 0.001156, "is_byok": False,
             "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": 54}}
    _, end = run(
        chunk({"tool_calls": [call(0, "c1", "a", "{}")]}),
        chunk({"content": "", "reasoning": None}, finish="tool_calls"),
        chunk({"content": ""}, finish="tool_calls", usage=usage, service_tier=None),
    )
    assert len(calls_of(end)) == 1
    assert end.usage == Usage(input_tokens=626, output_tokens=106, reasoning_tokens=54,
                              cost=0.001156, priced=True)


def test_usage_in_a_chunk_with_empty_choices_is_read():
    _, end = run(chunk({"content": "Hi"}, finish="stop"),
                 chunk(choices=[], usage={"prompt_tokens": 10, "completion_tokens": 2}))
    assert end.usage == Usage(input_tokens=10, output_tokens=2)


def test_cache_reads_and_writes_are_taken_out_of_prompt_tokens():
    assert usage_from({
        "prompt_tokens": 10339, "completion_tokens": 60, "cost": 0.0012,
        "prompt_tokens_details": {"cached_tokens": 10318, "cache_write_tokens": 0},
    }) == Usage(input_tokens=21, output_tokens=60, cache_read_tokens=10318, cost=0.0012,
                 priced=True)
    assert usage_from({
        "prompt_tokens": 194, "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 100},
    }) == Usage(input_tokens=94, output_tokens=2, cache_creation_tokens=100)


def test_input_tokens_never_go_below_zero_and_odd_values_count_as_zero():
    assert usage_from({
        "prompt_tokens": 5, "completion_tokens": None, "cost": None,
        "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 3},
        "completion_tokens_details": "n/a",
    }) == Usage(input_tokens=0, cache_read_tokens=4, cache_creation_tokens=3)


def test_a_turn_without_usage_reports_zero_usage():
    _, end = run(chunk({"content": "Hi"}, finish="stop"))
    assert end.usage == Usage()


def test_choices_other_than_the_first_are_ignored():
    _, end = run(chunk(choices=[
        {"index": 1, "delta": {"content": "other"}, "finish_reason": None},
        {"index": 0, "delta": {"content": "mine"}, "finish_reason": "stop"},
    ]))
    assert end.parts == (Text("mine"),)


def test_a_refusal_delta_is_text():
    events, end = run(chunk({"content": None, "refusal": "I can't help."},
                            finish="content_filter"))
    assert events == [Event(Kind.TEXT, text="I can't help.")]
    assert end.stop is Stop.REFUSAL


def test_text_with_line_separators_is_kept_whole():
    data = json.dumps(chunk({"content": "a\u2028b\u2029c\x85d"}), ensure_ascii=False)
    acc = Accumulator()
    assert acc.feed_data(data) == [Event(Kind.TEXT, text="a\u2028b\u2029c\x85d")]


def test_in_band_error_with_a_numeric_429_is_a_transient_stream_error():
    acc = Accumulator()
    error = chunk({"content": ""}, finish="error",
                  error={"code": 429, "message": "Rate limit exceeded",
                         "metadata": {"error_type": "rate_limit_exceeded"}})
    with pytest.raises(StreamError, match="OpenRouter stream error 429 from Amazon Bedrock: "
                                          "Rate limit exceeded") as info:
        acc.feed_chunk(error)
    assert not isinstance(info.value, StreamTruncated)
    assert retryable(info.value)


@pytest.mark.parametrize("code, transient", [
    (408, True), (429, True), (500, True), (502, True), (503, True), (524, True),
    (529, True), ("503", True), ("server_error", True), (400, False), (402, False),
    ("invalid_request", False), (None, False),
])
def test_in_band_error_codes_are_transient_only_for_timeouts_rate_limits_and_5xx(
        code, transient):
    with pytest.raises(StreamError) as info:
        Accumulator().feed_chunk(chunk(error={"code": code, "message": "boom"}))
    assert retryable(info.value) is transient
    assert info.value.code == code


def test_a_choice_level_error_is_a_stream_error():
    with pytest.raises(StreamError, match="502.*Upstream failed"):
        Accumulator().feed_chunk(chunk(choices=[{
            "index": 0, "delta": {}, "finish_reason": "error",
            "error": {"code": 502, "message": "Upstream failed"}}]))


def test_finish_reason_error_without_an_error_object_is_a_stream_error():
    acc = Accumulator()
    acc.feed_chunk(chunk({"tool_calls": [call(0, "c1", "a", "{}")]}))
    acc.feed_chunk(chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "error",
                             "native_finish_reason": "MALFORMED_FUNCTION_CALL"}]))
    acc.feed_chunk(chunk({}, finish="stop"))
    acc.feed_data("[DONE]")
    with pytest.raises(StreamError, match="MALFORMED_FUNCTION_CALL") as info:
        acc.finish()
    assert not retryable(info.value)


def test_a_body_ending_without_done_or_finish_is_truncated():
    acc = Accumulator()
    acc.feed_chunk(chunk({"content": "Partial"}))
    with pytest.raises(StreamTruncated, match="before \\[DONE\\] or a finish_reason"):
        acc.finish()


def test_a_body_ending_after_a_finish_without_done_is_complete():
    _, end = run(chunk({"content": "Hi"}, finish="stop"), done=False)
    assert end.stop is Stop.END


def test_a_data_line_that_is_not_json_is_a_stream_error():
    with pytest.raises(StreamError, match="not JSON"):
        Accumulator().feed_data("{oops")


@pytest.mark.parametrize("value", ["[1, 2]", '"text"', "3"])
def test_a_chunk_that_is_not_an_object_is_a_stream_error(value):
    with pytest.raises(StreamError, match="not a JSON object"):
        Accumulator().feed_data(value)


def test_done_sets_done_and_yields_nothing():
    acc = Accumulator()
    assert acc.feed_data("[DONE]") == [] and acc.done



# -- hostile data: every surprise is a StreamError or is handled --------------------------

@pytest.mark.parametrize("value", [5, 1.5, True, ["a"], {"text": "a"}, None])
@pytest.mark.parametrize("key", ["content", "reasoning", "refusal"])
def test_text_of_the_wrong_type_is_ignored_and_never_shown(key, value):
    events, end = run(chunk({key: value}), chunk({"content": "ok"}, finish="stop"))
    assert events == [Event(Kind.TEXT, text="ok")]
    assert end.parts == (Text("ok"),)


@pytest.mark.parametrize("index", [True, False, "0", [0], {"i": 0}, None, 0.0])
def test_a_choice_whose_index_is_not_the_int_zero_is_not_the_first_choice(index):
    _, end = run(chunk(choices=[{"index": index, "delta": {"content": "other"}}]),
                 chunk({"content": "mine"}, finish="stop"))
    assert end.parts == (Text("mine"),)


@pytest.mark.parametrize("index", [True, "1", [1], {"i": 1}, 1.0])
def test_a_tool_call_index_of_the_wrong_type_is_read_as_no_index(index):
    _, end = run(chunk({"tool_calls": [call(0, "c1", "a", '{"x":')]}),
                 chunk({"tool_calls": [{"index": index, "function": {"arguments": "1}"}}]}),
                 chunk({}, finish="tool_calls"))
    assert calls_of(end) == [ToolCall("c1", "a", '{"x":1}')]


@pytest.mark.parametrize("fragment", [
    "not an object", 5, None, ["x"],
    {"index": 0, "id": 5, "function": {"name": ["n"], "arguments": 7}},
    {"index": 0, "id": None, "function": "search"},
])
def test_tool_fragments_of_the_wrong_shape_never_crash(fragment):
    _, end = run(chunk({"tool_calls": [fragment]}), chunk({}, finish="tool_calls"))
    for part in calls_of(end):
        assert all(type(v) is str for v in (part.id, part.name, part.input))


def test_arguments_sent_as_an_object_are_kept_as_its_json_text():
    _, end = run(chunk({"tool_calls": [call(0, "c1", "weather", {"city": "Paris"})]}),
                 chunk({}, finish="tool_calls"))
    assert calls_of(end) == [ToolCall("c1", "weather", '{"city":"Paris"}')]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -5, 1.5,
                                 pytest.param(10**400, id="10**400"), 2**53 + 1, "12", True,
                                 [3], {"n": 3}])
def test_implausible_counts_count_as_zero_with_a_warning(bad, caplog):
    usage = usage_from({
        "prompt_tokens": bad, "completion_tokens": bad,
        "prompt_tokens_details": {"cached_tokens": bad, "cache_write_tokens": bad},
        "completion_tokens_details": {"reasoning_tokens": bad},
    })
    assert usage == Usage()
    assert "not a token count" in caplog.text


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -5, -0.01,
                                 pytest.param(10**400, id="10**400"), 1e300, "0.1", True,
                                 [3], {"n": 3}])
def test_an_implausible_cost_counts_as_zero_with_a_warning(bad, caplog):
    assert usage_from({"prompt_tokens": 3, "cost": bad}) == Usage(input_tokens=3)
    assert "not an amount" in caplog.text


def test_a_negative_cache_count_never_inflates_the_input():
    assert usage_from({"prompt_tokens": 10, "prompt_tokens_details": {
        "cached_tokens": -50}}) == Usage(input_tokens=10)


@pytest.mark.parametrize("data", ['{"usage": {"prompt_tokens": NaN}}',
                                  '{"usage": {"cost": Infinity}}',
                                  '{"usage": {"completion_tokens": 1e400}}',
                                  "[" * 100_000, '{"a":' * 100_000],
                         ids=["NaN", "Infinity", "1e400", "100k lists", "100k objects"])
def test_data_lines_with_nan_infinity_or_runaway_nesting_are_stream_errors(data):
    with pytest.raises(StreamError, match="not JSON"):
        Accumulator().feed_data(data)


def test_a_400_digit_count_in_a_data_line_counts_as_zero():
    acc = Accumulator()
    acc.feed_data(json.dumps(chunk({"content": "Hi"}, finish="stop",
                                   usage={"prompt_tokens": 10**400, "completion_tokens": 3})))
    assert acc.finish().usage == Usage(output_tokens=3)


@pytest.mark.parametrize("code", [[429], {"c": 1}, 10**400, True, 5.5])
def test_an_error_code_of_the_wrong_type_is_still_a_plain_stream_error(code):
    with pytest.raises(StreamError, match="OpenRouter stream error from Amazon Bedrock: boom"):
        Accumulator().feed_chunk(chunk(error={"code": code, "message": "boom"}))


@pytest.mark.parametrize("error", ["Rate limited", ["x"], 5, {"message": ["m"]}])
def test_an_error_that_is_not_an_object_is_a_stream_error(error):
    with pytest.raises(StreamError, match="OpenRouter stream error"):
        Accumulator().feed_chunk(chunk(error=error))


# -- secrets ----------------------------------------------------------------------------

SECRET = "sk-or-v1-SECRET-0123456789abcdef"


def hide(text):
    return text.replace(SECRET, "<hidden>")


def assert_clean(err):
    for text in [str(err), repr(err), repr(err.args), repr(getattr(err, "code", None)),
                 *map(repr, chain(err))]:
        assert SECRET not in text


@pytest.mark.parametrize("payload", [
    json.dumps(chunk(error={"code": f"bad_{SECRET}", "message": f"key {SECRET} refused"})),
    json.dumps(chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "error",
                               "error": {"code": 401, "message": f"Bearer {SECRET}"}}])),
    '{"broken": "' + "x" * 70 + SECRET,
    '["' + "y" * 70 + SECRET + '"]',
])
def test_a_key_echoed_in_an_in_band_error_or_a_broken_line_is_scrubbed(payload):
    with pytest.raises(StreamError) as caught:
        Accumulator(scrub=hide).feed_data(payload)
    assert_clean(caught.value)


def test_a_key_in_an_error_finish_is_scrubbed():
    acc = Accumulator(scrub=hide)
    acc.feed_chunk(chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "error",
                             "native_finish_reason": f"DENIED {SECRET}"}], provider=SECRET))
    with pytest.raises(StreamError) as caught:
        acc.finish()
    assert_clean(caught.value)


# -- realistic streams with one field swapped for a value of the wrong type --------------

def recorded(chunks):
    decoder = SSEDecoder()
    return [e.data for c in chunks for e in decoder.feed(c)]


REALISTIC = recorded(openrouter_stream(
    ["Hel", "lo"], reasoning_deltas=["Think", "ing."],
    tool_calls=[("toolu_1", "get_weather", '{"city": "Paris"}'), ("toolu_2", "clock", "")],
))

WRONG = wrong_values("stop", "length", "[DONE]")


@st.composite
def hostile_streams(draw):
    items = [parse_json(d) if d != "[DONE]" else d for d in REALISTIC]
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        at = draw(st.integers(min_value=0, max_value=len(items) - 1))
        how = draw(st.sampled_from(["swap", "swap", "swap", "drop", "repeat"]))
        if how == "drop":
            del items[at]
        elif how == "repeat":
            items.insert(at, items[at])
        elif items[at] != "[DONE]":
            path = draw(st.sampled_from(list(locations(items[at]))) | st.sampled_from(
                list(leaves(items[at]))))
            items[at] = swapped(items[at], path, draw(WRONG))
    # Through the data line, as the backend feeds it (NaN and friends included).
    return [i if i == "[DONE]" else json.dumps(i) for i in items]


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(hostile_streams())
def test_a_realistic_stream_with_fields_swapped_raises_nothing_but_nacelle_errors(lines):
    acc = Accumulator()
    events = []
    try:
        for line in lines:
            events.extend(acc.feed_data(line))
        end = acc.finish()
    except NacelleError:
        end = None
    for event in events:
        assert event.kind in (Kind.TEXT, Kind.THINKING, Kind.TOOL_INPUT, Kind.TOOL_CALL)
        assert type(event.text) is str and (event.text or event.kind is Kind.TOOL_CALL)
    if end is not None:
        check(events, end)
        usage = end.usage
        counts = [usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                  usage.cache_creation_tokens, usage.reasoning_tokens]
        assert all(type(c) is int and 0 <= c <= 2**53 for c in counts)
        assert 0 <= usage.cost < float("inf")
        for part in end.parts:
            if isinstance(part, ToolCall):
                assert all(type(v) is str for v in (part.id, part.name, part.input))
            if isinstance(part, Reasoning):
                assert type(part.text) is str and isinstance(json.loads(part.state), list)
            if isinstance(part, Text):
                assert type(part.text) is str


def test_the_realistic_stream_itself_gives_text_reasoning_and_two_calls():
    acc = Accumulator()
    for line in REALISTIC:
        acc.feed_data(line)
    end = acc.finish()
    assert [type(p).__name__ for p in end.parts] == ["Reasoning", "Text", "ToolCall", "ToolCall"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional={
    "prompt_tokens": WRONG, "completion_tokens": WRONG, "cost": WRONG,
    "prompt_tokens_details": WRONG | st.fixed_dictionaries(
        {}, optional={"cached_tokens": WRONG, "cache_write_tokens": WRONG}),
    "completion_tokens_details": WRONG | st.fixed_dictionaries(
        {}, optional={"reasoning_tokens": WRONG}),
}))
def test_usage_of_any_shape_maps_to_a_valid_usage(usage):
    mapped = usage_from(usage)
    assert all(type(getattr(mapped, f)) is int and getattr(mapped, f) >= 0 for f in (
        "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens",
        "reasoning_tokens"))
    assert 0 <= mapped.cost < float("inf")


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional={
    "content": WRONG, "reasoning": WRONG, "refusal": WRONG, "role": WRONG,
    "reasoning_details": WRONG | st.lists(WRONG | st.fixed_dictionaries(
        {}, optional={"type": WRONG, "index": WRONG, "text": WRONG, "signature": WRONG}),
        max_size=3),
    "tool_calls": WRONG | st.lists(WRONG | st.fixed_dictionaries({}, optional={
        "index": WRONG, "id": WRONG, "function": WRONG | st.fixed_dictionaries(
            {}, optional={"name": WRONG, "arguments": WRONG})}), max_size=3),
}), WRONG)
def test_a_delta_of_any_shape_is_read_or_ignored_never_crashes(delta, finish):
    acc = Accumulator()
    events = []
    try:
        events.extend(acc.feed_data(json.dumps(chunk(delta))))
        acc.feed_chunk(chunk({}, finish=finish))
        end = acc.finish()
    except NacelleError:
        return
    assert all(type(e.text) is str and e.text for e in events)
    for part in end.parts:
        if isinstance(part, ToolCall):
            assert all(type(v) is str for v in (part.id, part.name, part.input))


# -- the other dialects ------------------------------------------------------------------

def run_dialect(dialect, *chunks, seed="", price=None):
    acc = chat_stream.Accumulator(dialect=dialect, seed=seed, price=price)
    events = []
    for c in chunks:
        events.extend(acc.feed_chunk(c))
    acc.feed_data("[DONE]")
    return events, acc.finish()


@pytest.mark.parametrize("dialect, field", [
    (chat_backend.DEEPSEEK, "reasoning_content"), (chat_backend.VLLM, "reasoning_content"),
    (chat_backend.OLLAMA, "reasoning"), (chat_backend.GROQ, "reasoning"),
])
def test_each_dialect_reads_reasoning_from_its_own_field(dialect, field):
    events, end = run_dialect(dialect, chunk({field: "Think"}), chunk({"content": "Done"},
                                                                      finish="stop"))
    assert events == [Event(Kind.THINKING, text="Think"), Event(Kind.TEXT, text="Done")]
    assert end.parts[0] == Reasoning("Think", "", "chat")


def test_openais_dialect_shows_no_reasoning_field_it_does_not_stream():
    events, _ = run_dialect(chat_backend.OPENAI, chunk({"reasoning_content": "x",
                                                       "content": "y"}, finish="stop"))
    assert events == [Event(Kind.TEXT, text="y")]


def test_a_plain_server_ignores_reasoning_details_it_never_echoes():
    _, end = run_dialect(chat_backend.LLAMACPP, chunk({"reasoning_details": [
        {"type": "reasoning.text", "text": "x"}], "content": "a"}, finish="stop"))
    assert end.parts == (Text("a"),)


def test_deepseeks_cache_hits_are_taken_out_of_prompt_tokens():
    _, end = run_dialect(chat_backend.DEEPSEEK, chunk({"content": "a"}, finish="stop"),
                         chunk(choices=[], usage={
                             "prompt_tokens": 1000, "completion_tokens": 5,
                             "prompt_cache_hit_tokens": 800, "prompt_cache_miss_tokens": 200}))
    assert (end.usage.input_tokens, end.usage.cache_read_tokens) == (200, 800)


def test_groqs_usage_in_x_groq_is_read():
    _, end = run_dialect(chat_backend.GROQ, chunk({"content": "a"}, finish="stop"),
                         chunk(choices=[], x_groq={"id": "req_1", "usage": {
                             "prompt_tokens": 12, "completion_tokens": 3}}))
    assert (end.usage.input_tokens, end.usage.output_tokens) == (12, 3)


def test_a_cost_field_is_not_dollars_on_a_server_that_reports_none():
    _, end = run_dialect(chat_backend.VLLM, chunk({"content": "a"}, finish="stop",
                                                  usage={"prompt_tokens": 1, "cost": 9.5}))
    assert (end.usage.cost, end.usage.priced) == (0.0, False)


def test_a_price_fills_the_cost_of_a_server_that_reports_tokens_only():
    price = Price(2.0, 8.0)
    _, end = run_dialect(chat_backend.OPENAI, chunk({"content": "a"}, finish="stop", usage={
        "prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}), price=price.priced)
    assert end.usage.priced and end.usage.cost == pytest.approx(10.0)


def test_a_calls_extra_content_is_kept_for_the_next_request():
    signature = {"google": {"thought_signature": "CiQBsig=="}}
    _, end = run_dialect(chat_backend.GEMINI, chunk({"tool_calls": [call(
        0, "call_g1", "weather", '{"city":"Oslo"}', extra_content=signature)]},
        finish="tool_calls"))
    assert calls_of(end) == [ToolCall("call_g1", "weather", '{"city":"Oslo"}')]
    blocks = [p for p in end.parts if isinstance(p, ProviderBlock)]
    assert [json.loads(b.data) for b in blocks] == [
        {"call": "call_g1", "extra_content": signature}]


def test_missing_ids_are_made_from_the_seed_so_a_replay_gets_the_same_ones():
    fragment = chunk({"tool_calls": [{"function": {"name": "clock", "arguments": None}}]},
                     finish="tool_calls")
    first = calls_of(run_dialect(chat_backend.LLAMACPP, fragment, seed="3")[1])
    again = calls_of(run_dialect(chat_backend.LLAMACPP, fragment, seed="3")[1])
    later = calls_of(run_dialect(chat_backend.LLAMACPP, fragment, seed="5")[1])
    assert first == again and first[0].input == "{}"
    assert later[0].id != first[0].id


def test_errors_name_the_server_of_the_dialect():
    acc = chat_stream.Accumulator(dialect=chat_backend.OLLAMA)
    with pytest.raises(StreamError, match="^Ollama stream error 500"):
        acc.feed_chunk({"error": {"code": 500, "message": "boom"}})
    with pytest.raises(StreamError, match="^Ollama sent a data line that is not JSON"):
        acc.feed_data("{oops")



@pytest.mark.parametrize("code", ["rate_limit_exceeded", "server_is_overloaded", "Overloaded",
                                  " SERVER_ERROR ", "timeout"])
def test_an_in_band_error_word_that_means_try_again_is_transient_as_on_the_responses_api(code):
    with pytest.raises(StreamError) as info:
        Accumulator().feed_chunk(chunk(error={"code": code, "message": "boom"}))
    assert retryable(info.value)


# -- typed content chunks (Mistral) ---------------------------------------------------

# Mistral's reasoning models stream delta.content as a list of typed chunks while they
# think, then as plain strings: the shape of mistralai/client-python's example
# examples/mistral/chat/reasoning_with_streaming.py (github.com/mistralai/client-python/
# pull/511: "chunks arrive as ThinkChunk lists during thinking and as plain string
# fragments after thinking ends"), with ThinkChunk {"type": "thinking", "thinking":
# [{"type": "text", "text": ...}]} and TextChunk {"type": "text", "text": ...}
# (docs.mistral.ai/capabilities/reasoning/). Here the answer's first token came in a
# TextChunk and the rest as strings, which dropping the list turned from "144" to "44".
MISTRAL_STREAM = [
    {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "mistral-small-latest",
     "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                  "finish_reason": None}]},
    {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "mistral-small-latest",
     "choices": [{"index": 0, "delta": {"content": [
         {"type": "thinking", "thinking": [{"type": "text", "text": "12 squared"}]}]},
         "finish_reason": None}]},
    {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "mistral-small-latest",
     "choices": [{"index": 0, "delta": {"content": [
         {"type": "thinking", "thinking": [{"type": "text", "text": " is 144."}]},
         {"type": "text", "text": "1"}]}, "finish_reason": None}]},
    {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "mistral-small-latest",
     "choices": [{"index": 0, "delta": {"content": "44"}, "finish_reason": "stop"}],
     "usage": {"prompt_tokens": 10, "completion_tokens": 9, "total_tokens": 19}},
]


@pytest.mark.parametrize("dialect", [
    chat_backend.MISTRAL, chat_backend.OPENAI, chat_backend.DEEPSEEK, chat_backend.VLLM,
    chat_backend.OLLAMA, chat_backend.GROQ, chat_backend.GEMINI, chat_backend.TOGETHER,
    chat_backend.XAI, chat_backend.LLAMACPP, chat_backend.LMSTUDIO,
], ids=lambda dialect: dialect.name)
def test_typed_content_chunks_are_text_and_reasoning_on_every_dialect(dialect):
    events, end = run_dialect(dialect, *MISTRAL_STREAM)
    assert events == [Event(Kind.THINKING, text="12 squared"),
                      Event(Kind.THINKING, text=" is 144."),
                      Event(Kind.TEXT, text="1"), Event(Kind.TEXT, text="44")]
    assert end.parts == (Reasoning("12 squared is 144.", "", "chat"), Text("144"))


def test_typed_content_chunks_read_on_openrouter_too():
    events, end = run(*MISTRAL_STREAM)
    assert "".join(e.text for e in events if e.kind is Kind.TEXT) == "144"
    assert end.parts[0].text == "12 squared is 144."


def test_typed_content_chunks_fed_as_sse_bytes_at_every_split_agree():
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in MISTRAL_STREAM) + "data: [DONE]\n\n"
    whole = body.encode()
    for size in (1, 7, len(whole)):
        decoder = SSEDecoder()
        acc = chat_stream.Accumulator(dialect=chat_backend.MISTRAL)
        texts = []
        for start in range(0, len(whole), size):
            for sse in decoder.feed(whole[start:start + size]):
                texts.extend(e.text for e in acc.feed(sse) if e.kind is Kind.TEXT)
        assert "".join(texts) == "144" and acc.finish().parts[1] == Text("144")


@pytest.mark.parametrize("chunks, text, reasoning", [
    ([{"type": "thinking", "thinking": "plain words"}], "", "plain words"),
    ([{"type": "thinking", "thinking": [{"type": "text", "text": "a"}, "b", {"text": 5},
                                        {"type": "text", "text": "c"}]}], "", "ac"),
    ([{"type": "reference", "reference_ids": [1]}, {"type": "text", "text": "ok"}], "ok", ""),
    ([{"type": "text", "text": 5}, {"type": "text"}, "loose", None, 3, ["x"],
      {"type": "text", "text": "ok"}], "ok", ""),
    ([{"type": "image_url", "image_url": "data:,"}, {"type": "thinking", "thinking": None}],
     "", ""),
    ([], "", ""),
])
def test_typed_content_chunks_of_other_types_or_shapes_are_ignored(chunks, text, reasoning):
    events, end = run_dialect(chat_backend.MISTRAL, chunk({"content": chunks}, finish="stop"))
    assert "".join(e.text for e in events if e.kind is Kind.TEXT) == text
    assert "".join(e.text for e in events if e.kind is Kind.THINKING) == reasoning


def test_a_non_streamed_answer_with_typed_content_is_read_the_same_way():
    message = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "Think."}]},
            {"type": "text", "text": "144"}]}}]}
    acc = chat_stream.Accumulator(dialect=chat_backend.MISTRAL)
    events = acc.feed_chunk(chat_backend._as_chunk(message))
    assert events == [Event(Kind.THINKING, text="Think."), Event(Kind.TEXT, text="144")]
    assert acc.finish().parts == (Reasoning("Think.", "", "chat"), Text("144"))


# -- local calls as they are written ----------------------------------------------------

OPENAI_DATA = __import__("pathlib").Path(__file__).resolve().parent.parent / "data" / "openai"
WEATHER, CLOCK = ("call_Wz7eAtHeR0aB", "weather"), ("call_Kc1oCk9LmN2p", "clock")


def openai_accumulator():
    return chat_stream.Accumulator(dialect=chat_backend.OPENAI)


def test_two_interleaved_calls_each_stream_their_own_input_and_come_whole_at_the_finish():
    # interleaved_calls.sse: api.openai.com's chunk framing (as tool_calls.sse), with
    # the fragments of two calls interleaved — each names its call by ``index``, which
    # is what the field is for (ChoiceDeltaToolCall.index in the API reference,
    # platform.openai.com/docs/api-reference/chat-streaming/streaming; the function
    # calling guide's streaming example gathers arguments per index) — one chunk
    # carrying a fragment of each.
    body = (OPENAI_DATA / "interleaved_calls.sse").read_bytes()
    for pieces in feeds(body):
        events, end = replay(pieces, openai_accumulator())
        assert inputs(events) == [
            (0, *WEATHER, '{"ci', '{"ci'), (1, *CLOCK, '{"zo', '{"zo'),
            (0, *WEATHER, 'ty":"Zü', '{"city":"Zü'),
            (1, *CLOCK, 'ne":"Europe/', '{"zone":"Europe/'),
            (0, *WEATHER, 'rich"}', '{"city":"Zürich"}'),
            (1, *CLOCK, 'Zurich"}', '{"zone":"Europe/Zurich"}')]
        # The first call was not whole when the second began: both come at the finish.
        assert [e.kind for e in events] == [Kind.TOOL_INPUT] * 6 + [Kind.TOOL_CALL] * 2
        assert early_calls(events) == [(WEATHER[0], 0, "weather", '{"city":"Zürich"}'),
                                       (CLOCK[0], 1, "clock", '{"zone":"Europe/Zurich"}')]
        check(events, end)


def test_a_call_is_announced_when_the_next_one_begins_if_its_input_is_whole_at_every_split():
    body = (OPENAI_DATA / "tool_calls.sse").read_bytes()  # two calls, one after the other
    for pieces in feeds(body):
        events, end = replay(pieces, openai_accumulator())
        assert [e.kind for e in events] == [Kind.TOOL_INPUT] * 4 + [Kind.TOOL_CALL] + [
            Kind.TOOL_INPUT] * 5 + [Kind.TOOL_CALL]
        assert early_calls(events) == [
            ("call_Qm2dEw1uX9aB", 0, "weather", '{"city":"Berlin"}'),
            ("call_Zr8tYp4kL0cD", 1, "clock", '{"zone":"Europe/Berlin"}')]
        assert [text for *_, text, _ in inputs(events)] == [
            '{"cit', 'y":"B', "erlin", '"}', '{"zon', 'e":"E', "urope", "/Berl", 'in"}']
        check(events, end)


def test_a_call_cut_by_length_streams_its_input_but_is_never_announced_at_every_split():
    body = (OPENAI_DATA / "length_in_tool.sse").read_bytes()
    for pieces in feeds(body):
        events, end = replay(pieces, openai_accumulator())
        assert inputs(events) == [(0, "call_Lx0", "weather", '{"city":"Ber', '{"city":"Ber')]
        assert early_calls(events) == [] and end.stop is Stop.MAX_TOKENS
        check(events, end)


def test_a_whole_call_before_one_cut_by_length_is_announced_when_the_cut_one_begins():
    events, end = run(chunk({"tool_calls": [call(0, "c1", "a", '{"x": 1}')]}),
                      chunk({"tool_calls": [call(1, "c2", "b", '{"y": ')]}),
                      chunk({}, "length"))
    assert early_calls(events) == [("c1", 0, "a", '{"x": 1}')]
    assert [p.finished for p in calls_of(end)] == [True, False]
    check(events, end)


def test_a_call_without_an_id_is_announced_with_the_id_made_for_it():
    events, end = run(chunk({"tool_calls": [call(0, None, "a", '{"x": 1}')]}),
                      chunk({"tool_calls": [call(1, None, "b", "")]}), chunk({}, "stop"))
    assert inputs(events) == [(0, "", "a", '{"x": 1}', '{"x": 1}')]
    made = [c.id for c in calls_of(end)]
    assert early_calls(events) == [(made[0], 0, "a", '{"x": 1}'), (made[1], 1, "b", "{}")]
    assert all(m.startswith("call_") for m in made)
    check(events, end)


def test_arguments_sent_for_a_call_already_announced_are_dropped_not_appended():
    events, end = run(chunk({"tool_calls": [call(0, "c1", "a", '{"x": 1}')]}),
                      chunk({"tool_calls": [call(1, "c2", "b", "{}")]}),
                      chunk({"tool_calls": [call(0, None, None, ', "late": 2}')]}),
                      chunk({}, "tool_calls"))
    assert calls_of(end) == [ToolCall("c1", "a", '{"x": 1}'), ToolCall("c2", "b", "{}")]
    assert early_calls(events)[0] == ("c1", 0, "a", '{"x": 1}')
    check(events, end)


def test_a_number_is_not_taken_for_whole_arguments_when_the_next_call_begins():
    events, end = run(chunk({"tool_calls": [call(0, "c1", "a", "12")]}),
                      chunk({"tool_calls": [call(1, "c2", "b", "{}")]}),
                      chunk({"tool_calls": [call(0, None, None, "3")]}), chunk({}, "stop"))
    assert calls_of(end)[0].input == "123"
    assert early_calls(events)[0] == ("c1", 0, "a", "123")  # at the finish, whole
    check(events, end)


def test_arguments_not_json_at_the_finish_are_left_for_the_loop():
    events, end = run(chunk({"tool_calls": [call(0, "c1", "a", '{"x": ')]}),
                      chunk({"tool_calls": [call(1, "c2", "b", '{"y": 2}')]}),
                      chunk({}, "tool_calls"))
    assert early_calls(events) == [("c2", 1, "b", '{"y": 2}')]
    assert calls_of(end)[0] == ToolCall("c1", "a", '{"x": ')  # finished: the loop fails it
    check(events, end)


def test_a_character_split_across_argument_fragments_is_shown_whole_in_the_later_one():
    events, end = run(chunk({"tool_calls": [call(0, "c1", "f", '{"face": "' + HIGH)]}),
                      chunk({"tool_calls": [call(0, None, None, LOW + '"}')]}),
                      chunk({}, "tool_calls"))
    assert [text for *_, text, _ in inputs(events)] == ['{"face": "', EMOJI + '"}']
    check(events, end)


def test_whole_calls_sent_in_one_chunk_each_stream_once_and_are_announced_in_order():
    # llama.cpp and Ollama send each call whole, several in one chunk.
    events, end = run(chunk({"tool_calls": [call(0, "c1", "a", '{"x": 1}'),
                                            call(1, "c2", "b", '{"y": 2}')]}),
                      chunk({}, "tool_calls"))
    assert [e.kind for e in events] == [Kind.TOOL_INPUT, Kind.TOOL_CALL, Kind.TOOL_INPUT,
                                        Kind.TOOL_CALL]
    check(events, end)


def test_the_realistic_openrouter_stream_streams_its_calls_input():
    acc = Accumulator()
    events = [e for line in REALISTIC for e in acc.feed_data(line)]
    end = acc.finish()
    assert [c[:3] for c in early_calls(events)] == [("toolu_1", 0, "get_weather"),
                                                    ("toolu_2", 1, "clock")]
    check(events, end)


def test_openrouters_recorded_tool_turn_streams_the_calls_input_at_every_split():
    body = (OPENAI_DATA.parent / "openrouter" / "loop_turn1_weather.sse").read_bytes()
    for pieces in feeds(body):  # keepalive comments included
        events, end = replay(pieces, Accumulator())
        assert inputs(events) == [
            (0, "toolu_bdrk_01L9WeAtHeR", "weather", '{"city": "Berlin', '{"city": "Berlin'),
            (0, "toolu_bdrk_01L9WeAtHeR", "weather", '"}', '{"city": "Berlin"}')]
        assert early_calls(events) == [
            ("toolu_bdrk_01L9WeAtHeR", 0, "weather", '{"city": "Berlin"}')]
        check(events, end)
