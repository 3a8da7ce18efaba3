"""The Responses accumulator fed plain dicts (and the recorded bodies, decoded): one test
per pitfall of the stream."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nacelle import (
    Kind, NacelleError, Reasoning, Stop, StreamError, StreamTruncated, Text, ToolCall, Usage,
    retryable,
)
from nacelle.backends.openai.stream import Accumulator, usage_from
from nacelle.events import Event, ToolEvent
from nacelle.messages import ProviderBlock
from nacelle.pricing import Price
from nacelle.sse import SSEDecoder, SSEEvent

from hostile import EMOJI, HIGH, LOW, chain, leaves, swapped, wrong_values
from streamed_calls import check, early_calls, feeds, inputs
from streamed_calls import replay as replay_pieces

DATA = Path(__file__).resolve().parent.parent / "data" / "openai_responses"
ENCRYPTED = "gAAAAABqaR3-pGgSyJcPT3y2_26v61vCZmE9M2P6q5LyFcAkcT7vldTwqVUWc757s4uF"
USAGE = {"input_tokens": 1321, "input_tokens_details": {"cached_tokens": 1152,
                                                       "cache_write_tokens": 0},
         "output_tokens": 133, "output_tokens_details": {"reasoning_tokens": 64},
         "total_tokens": 1454}


def replay(name, accumulator=None):
    """A recorded body fed through the SSE decoder: (events, TurnEnd)."""
    accumulator = accumulator or Accumulator()
    decoder = SSEDecoder()
    body = (DATA / name).read_bytes()
    events = []
    for sse in decoder.feed(body) + decoder.close():
        events += accumulator.feed(sse)
    return events, accumulator.finish()


def run(*events, accumulator=None):
    """Feed parsed events; return (events, TurnEnd)."""
    accumulator = accumulator or Accumulator()
    out = []
    for event in events:
        out += accumulator.feed_event(event)
    return out, accumulator.finish()


def completed(usage=None, status="completed", reason=None, **extra):
    response = {"id": "resp_1", "object": "response", "status": status,
                "usage": USAGE if usage is None else usage,
                "incomplete_details": {"reason": reason} if reason else None, **extra}
    kind = "response.completed" if status == "completed" else "response.incomplete"
    return {"type": kind, "response": response}


def text(delta, index=0, item="msg_1"):
    return {"type": "response.output_text.delta", "item_id": item, "output_index": index,
            "content_index": 0, "delta": delta}


def summary(delta, index=0, part=0):
    return {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1",
            "output_index": index, "summary_index": part, "delta": delta}


def added(item, index):
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def done(item, index):
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def reasoning_item(encrypted=ENCRYPTED, parts=()):
    return {"id": "rs_1", "type": "reasoning", "content": [], "encrypted_content": encrypted,
            "summary": [{"type": "summary_text", "text": p} for p in parts]}


def call_item(call_id="call_1", name="weather", arguments="", status="in_progress", n=1):
    return {"id": f"fc_{n}", "type": "function_call", "status": status,
            "arguments": arguments, "call_id": call_id, "name": name}


def arguments(delta, index, n=1):
    return {"type": "response.function_call_arguments.delta", "item_id": f"fc_{n}",
            "output_index": index, "delta": delta}


def message_item(texts=(), status="completed"):
    return {"id": "msg_1", "type": "message", "status": status, "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": t} for t in texts]}


# -- the recordings ------------------------------------------------------------------


def test_the_recorded_tool_turn_gives_reasoning_text_and_one_call():
    events, end = replay("tool_call_with_reasoning.sse")
    assert {e.kind for e in events} == {Kind.TEXT, Kind.TOOL_INPUT, Kind.TOOL_CALL}
    assert "".join(e.text for e in events if e.kind is Kind.TEXT) == (
        "I’ll check the capital lookup tool for “PotatoLand.”")
    assert "".join(e.text for e in events if e.kind is Kind.TOOL_INPUT) == (
        '{"country":"PotatoLand"}')
    assert early_calls(events) == [("call_LabG58Uhrq9kZvR52BYKjToD", 0, "get_capital",
                                    '{"country":"PotatoLand"}')]
    check(events, end)
    reasoning, message, call = end.parts
    assert isinstance(reasoning, Reasoning) and reasoning.protocol == "openai-responses"
    assert call == ToolCall("call_LabG58Uhrq9kZvR52BYKjToD", "get_capital",
                            '{"country":"PotatoLand"}')
    assert end.stop is Stop.TOOLS
    assert (end.usage.input_tokens, end.usage.output_tokens,
            end.usage.reasoning_tokens) == (63, 69, 26)


def test_the_reasoning_state_is_the_done_item_not_the_added_one():
    body = (DATA / "tool_call_with_reasoning.sse").read_text(encoding="utf-8")
    lines = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
    first, last = [e["item"] for e in lines if e["type"].startswith("response.output_item.")
                   and e["item"]["type"] == "reasoning"]
    assert first["encrypted_content"] != last["encrypted_content"]  # the spec's warning
    _, end = replay("tool_call_with_reasoning.sse")
    assert json.loads(end.parts[0].state) == last


def test_the_recorded_summaries_stream_as_thinking_and_join_as_paragraphs():
    events, end = replay("reasoning_summary.sse")
    thinking = "".join(e.text for e in events if e.kind is Kind.THINKING)
    reasoning, answer = end.parts
    assert reasoning.text.count("\n\n**") == 3  # four summary parts, a blank line apart
    assert reasoning.text.replace("\n\n**", "**") == thinking.replace("\n\n**", "**")
    assert answer.text == "".join(e.text for e in events if e.kind is Kind.TEXT)
    assert json.loads(reasoning.state)["encrypted_content"].startswith("gAAAAAB")
    assert end.stop is Stop.END and end.usage.reasoning_tokens == 1408


def test_parallel_calls_keep_their_order_ids_and_arguments():
    _, end = replay("parallel_calls.sse")
    calls = [p for p in end.parts if isinstance(p, ToolCall)]
    assert [(c.id, c.name, c.input) for c in calls] == [
        ("call_Qm2dEw1uX9aBtW3c", "weather", '{"city":"Berlin"}'),
        ("call_Zr8tYp4kL0cDvN7e", "clock", "{}")]
    assert isinstance(end.parts[0], Reasoning) and end.stop is Stop.TOOLS


def test_cached_input_is_subtracted_so_input_tokens_is_full_rate_input():
    _, end = replay("parallel_calls.sse")
    assert end.usage == Usage(input_tokens=169, output_tokens=133, cache_read_tokens=1152,
                              reasoning_tokens=64)


def test_a_refusal_is_shown_as_text_and_ends_the_turn_with_refusal():
    events, end = replay("refusal.sse")
    assert [e.text for e in events] == ["I'm sorry, but ", "I can't help with that."]
    assert end.parts == (Text("I'm sorry, but I can't help with that."),)
    assert end.stop is Stop.REFUSAL


def test_an_incomplete_response_stops_at_max_tokens_with_the_cut_call_unfinished():
    events, end = replay("incomplete.sse")
    assert "".join(e.text for e in events if e.kind is Kind.TEXT) == "Berlin: 15°C, "
    assert [text for *_, text, _ in inputs(events)] == ['{"ci', 'ty":"Ham']
    assert early_calls(events) == []  # cut off: never announced
    assert end.stop is Stop.MAX_TOKENS
    [call] = [p for p in end.parts if isinstance(p, ToolCall)]
    assert (call.input, call.finished) == ('{"city":"Ham', False)


def test_a_failed_rate_limited_response_is_a_transient_error_with_its_wait():
    with pytest.raises(StreamError) as caught:
        replay("failed_rate_limit.sse")
    error = caught.value
    assert retryable(error) and error.code == "rate_limit_exceeded"
    assert error.retry_after == pytest.approx(0.21)
    assert not isinstance(error, StreamTruncated)


def test_a_failed_invalid_prompt_is_not_retryable():
    with pytest.raises(StreamError, match="invalid_prompt") as caught:
        replay("failed_invalid_prompt.sse")
    assert not retryable(caught.value)


def test_an_error_event_after_text_is_a_transient_stream_error():
    accumulator = Accumulator()
    with pytest.raises(StreamError, match="server_error") as caught:
        replay("error_event.sse", accumulator)
    assert retryable(caught.value)


@pytest.mark.parametrize("size", [1, 7, 300])
def test_a_recording_cut_at_any_size_reads_the_same(size):
    body = (DATA / "parallel_calls.sse").read_bytes()
    decoder, accumulator = SSEDecoder(), Accumulator()
    for start in range(0, len(body), size):
        for sse in decoder.feed(body[start:start + size]):
            accumulator.feed(sse)
    _, whole = replay("parallel_calls.sse")
    assert accumulator.finish() == whole


# -- plain dicts ---------------------------------------------------------------------


def test_text_deltas_become_one_event_each_never_merged():
    events, end = run(added(message_item(status="in_progress"), 0), text("Ber"), text("lin"),
                      completed())
    assert [(e.kind, e.text) for e in events] == [(Kind.TEXT, "Ber"), (Kind.TEXT, "lin")]
    assert end.parts == (Text("Berlin"),) and end.stop is Stop.END


def test_summary_deltas_become_thinking_events():
    events, end = run(added(reasoning_item(), 0), summary("**Plan**"), summary(" then", 0, 0),
                      summary("**Act**", 0, 1), done(reasoning_item(), 0), completed())
    assert [(e.kind, e.text) for e in events] == [
        (Kind.THINKING, "**Plan**"), (Kind.THINKING, " then"), (Kind.THINKING, "**Act**")]
    assert end.parts[0].text == "**Plan** then\n\n**Act**"


def test_a_reasoning_item_without_summaries_is_kept_with_empty_text_for_replay():
    _, end = run(added(reasoning_item(), 0), done(reasoning_item(), 0), completed())
    [reasoning] = end.parts
    assert reasoning.text == "" and json.loads(reasoning.state) == reasoning_item()


def test_the_state_is_compact_json_so_it_goes_back_byte_for_byte():
    item = dict(reasoning_item(parts=["Grüße — 🚀"]))
    _, end = run(done(item, 0), completed())
    assert end.parts[0].state == json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    assert end.parts[0].text == "Grüße — 🚀"  # summaries with no deltas are read from the item


def test_call_arguments_are_the_concatenated_fragments_replaced_by_the_done_text():
    events, end = run(
        added(call_item(), 0), arguments('{"ci', 0), arguments('ty": "Ber', 0),
        arguments('lin"}', 0),
        {"type": "response.function_call_arguments.done", "item_id": "fc_1",
         "output_index": 0, "arguments": '{"city": "Berlin"}'},
        done(call_item(arguments='{"city": "Berlin"}', status="completed"), 0), completed())
    assert events == [
        Event(Kind.TOOL_INPUT, text='{"ci', tool=ToolEvent("call_1", 0, "weather", '{"ci')),
        Event(Kind.TOOL_INPUT, text='ty": "Ber',
              tool=ToolEvent("call_1", 0, "weather", '{"city": "Ber')),
        Event(Kind.TOOL_INPUT, text='lin"}',
              tool=ToolEvent("call_1", 0, "weather", '{"city": "Berlin"}')),
        # whole at function_call_arguments.done, announced then
        Event(Kind.TOOL_CALL, tool=ToolEvent("call_1", 0, "weather", '{"city": "Berlin"}'))]
    assert end.parts == (ToolCall("call_1", "weather", '{"city": "Berlin"}'),)
    assert end.stop is Stop.TOOLS


def test_blank_arguments_become_an_empty_object():
    _, end = run(added(call_item(name="clock"), 0),
                 done(call_item(name="clock", status="completed"), 0), completed())
    assert end.parts == (ToolCall("call_1", "clock", "{}"),)


def test_items_are_ordered_by_output_index_not_by_arrival():
    _, end = run(done(call_item(arguments="{}", status="completed"), 1),
                 added(message_item(status="in_progress"), 0), text("First", 0),
                 done(message_item(["First"]), 0), completed())
    assert [type(p) for p in end.parts] == [Text, ToolCall]


def test_a_message_sent_whole_without_deltas_is_shown_when_it_is_done():
    events, end = run(done(message_item(["Whole answer."]), 0), completed())
    assert [e.text for e in events] == ["Whole answer."]
    assert end.parts == (Text("Whole answer."),)


def test_a_response_that_streamed_no_items_is_read_from_the_final_output():
    output = [reasoning_item(), message_item(["All at once."]),
              call_item(arguments="{}", status="completed")]
    events, end = run(completed(output=output))
    assert [e.text for e in events if e.kind is Kind.TEXT] == ["All at once."]
    assert early_calls(events) == [("call_1", 0, "weather", "{}")]
    assert [type(p) for p in end.parts] == [Reasoning, Text, ToolCall]
    assert end.stop is Stop.TOOLS


def test_the_final_output_is_not_read_again_when_items_were_streamed():
    events, end = run(text("Hi"), completed(output=[message_item(["Hi"])]))
    assert [e.text for e in events] == ["Hi"] and end.parts == (Text("Hi"),)


def test_an_unknown_item_type_is_kept_as_a_provider_block():
    item = {"id": "ws_1", "type": "web_search_call", "status": "completed"}
    _, end = run(added(item, 0), done(item, 0), completed())
    assert end.parts == (ProviderBlock("openai-responses", json.dumps(
        item, separators=(",", ":"))),)


@pytest.mark.parametrize("reason, stop", [("max_output_tokens", Stop.MAX_TOKENS),
                                          ("content_filter", Stop.REFUSAL),
                                          ("something_new", Stop.OTHER)])
def test_an_incomplete_reason_maps_to_a_stop(reason, stop):
    _, end = run(text("cut"), completed(status="incomplete", reason=reason))
    assert end.stop is stop


def test_a_finished_call_of_an_incomplete_response_stays_finished_but_is_not_run():
    _, end = run(done(call_item(arguments="{}", status="completed"), 0),
                 completed(status="incomplete", reason="max_output_tokens"))
    assert end.parts[0].finished and end.stop is Stop.MAX_TOKENS


def test_a_call_that_never_finished_in_a_completed_response_does_not_make_it_a_tool_turn():
    _, end = run(added(call_item(), 0), arguments('{"a"', 0), completed())
    assert end.parts[0].finished is False and end.stop is Stop.END


def test_unknown_event_types_are_ignored():
    events, end = run({"type": "response.content_part.added", "output_index": 0},
                      {"type": "response.output_text.annotation.added", "annotation": {}},
                      {"type": "response.something_new", "x": 1}, text("ok"), completed())
    assert [e.text for e in events] == ["ok"] and end.stop is Stop.END


def test_a_done_sentinel_is_ignored():
    accumulator = Accumulator()
    assert accumulator.feed(SSEEvent(data="[DONE]")) == []
    assert not accumulator.done


def test_a_body_that_ends_before_the_final_event_is_truncated():
    accumulator = Accumulator()
    accumulator.feed_event(text("half"))
    with pytest.raises(StreamTruncated):
        accumulator.finish()


def test_completed_marks_the_stream_done_for_the_transport():
    accumulator = Accumulator()
    accumulator.feed_event(text("x"))
    assert not accumulator.done
    accumulator.feed_event(completed())
    assert accumulator.done


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("code, transient", [
    ("server_error", True), ("rate_limit_exceeded", True), ("503", True), (429, True),
    ("insufficient_quota", False), ("invalid_prompt", False),
    ("context_length_exceeded", False), (None, False), (True, False)])
def test_in_band_errors_are_transient_only_for_codes_that_mean_try_again(code, transient):
    with pytest.raises(StreamError) as caught:
        run({"type": "error", "code": code, "message": "boom", "param": None})
    assert retryable(caught.value) is transient
    with pytest.raises(StreamError) as failed:
        run({"type": "response.failed", "response": {
            "status": "failed", "error": {"code": code, "message": "boom"}}})
    assert retryable(failed.value) is transient


def test_an_error_event_with_a_nested_error_object_is_read_too():
    with pytest.raises(StreamError, match="rate_limit_exceeded.*1.5s") as caught:
        run({"type": "error", "error": {"type": "requests", "code": "rate_limit_exceeded",
                                        "message": "Please try again in 1.5s."}})
    assert caught.value.retry_after == 1.5


def test_a_key_echoed_in_an_error_never_reaches_the_exception():
    key = "sk-proj-ECHOED-SECRET-4242"
    accumulator = Accumulator(scrub=lambda s: s.replace(key, "<hidden>"))
    with pytest.raises(StreamError) as caught:
        accumulator.feed_event({"type": "error", "code": key,
                                "message": f"Incorrect API key provided: {key}"})
    for error in chain(caught.value):
        assert key not in f"{error} {error!r} {error.args!r} {getattr(error, 'code', '')}"


def test_a_data_line_that_is_not_json_is_a_stream_error_that_hides_the_key():
    key = "sk-proj-ECHOED-SECRET-4242"
    accumulator = Accumulator(scrub=lambda s: s.replace(key, "<hidden>"))
    with pytest.raises(StreamError) as caught:
        accumulator.feed(SSEEvent(data=f'{{"type": "error", "message": "{key}'))
    assert all(key not in repr(e) and e.__context__ is None for e in chain(caught.value))


@pytest.mark.parametrize("event", [
    [1, 2], "text", text(None), text(5), summary(["x"]), arguments({}, 0),
    {"type": "response.output_item.added", "output_index": 0, "item": "x"},
    added(call_item(call_id=7), 0), text("x", index=True), text("x", index="0"),
    {"type": "response.completed", "response": None}])
def test_a_field_the_stream_depends_on_of_the_wrong_type_is_a_stream_error(event):
    with pytest.raises(StreamError):
        run(event, completed())


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_hostile_values_anywhere_in_a_turn_raise_only_nacelle_errors(data):
    events = [added(reasoning_item(), 0), summary("x"), done(reasoning_item(), 0),
              added(call_item(), 1), arguments("{}", 1),
              done(call_item(arguments="{}", status="completed"), 1), text("hi", 2),
              completed()]
    number = data.draw(st.integers(0, len(events) - 1))
    path = data.draw(st.sampled_from(list(leaves(events[number]))))
    value = data.draw(wrong_values("response.completed", "function_call", "reasoning",
                                   "message", "max_output_tokens"))
    events[number] = swapped(events[number], path, value)
    try:
        out, end = run(*events)
    except NacelleError:
        return
    check(out, end)


# -- local calls as they are written ----------------------------------------------------

WEATHER, CLOCK = ("call_Qm2dEw1uX9aBtW3c", "weather"), ("call_Zr8tYp4kL0cDvN7e", "clock")


def test_two_calls_stream_their_arguments_and_each_is_announced_when_done_at_every_split():
    # parallel_calls.sse: two function_call items, one after the other (see the README
    # beside it for its shape's source).
    body = (DATA / "parallel_calls.sse").read_bytes()
    for pieces in feeds(body):
        events, end = replay_pieces(pieces, Accumulator())
        assert inputs(events) == [
            (0, *WEATHER, '{"', '{"'), (0, *WEATHER, "city", '{"city'),
            (0, *WEATHER, '":"', '{"city":"'), (0, *WEATHER, "Berlin", '{"city":"Berlin'),
            (0, *WEATHER, '"}', '{"city":"Berlin"}'), (1, *CLOCK, "{}", "{}")]
        # The first is announced at its function_call_arguments.done, before the second
        # streams.
        assert [e.kind for e in events] == [Kind.TOOL_INPUT] * 5 + [
            Kind.TOOL_CALL, Kind.TOOL_INPUT, Kind.TOOL_CALL]
        assert early_calls(events) == [(WEATHER[0], 0, "weather", '{"city":"Berlin"}'),
                                       (CLOCK[0], 1, "clock", "{}")]
        check(events, end)


def test_a_call_cut_by_the_output_limit_streams_its_input_but_is_never_announced_at_every_split():
    body = (DATA / "incomplete.sse").read_bytes()
    for pieces in feeds(body):
        events, end = replay_pieces(pieces, Accumulator())
        assert inputs(events) == [
            (0, "call_Xc4vB2nM8kLpQr1s", "weather", '{"ci', '{"ci'),
            (0, "call_Xc4vB2nM8kLpQr1s", "weather", 'ty":"Ham', '{"city":"Ham')]
        assert early_calls(events) == [] and end.stop is Stop.MAX_TOKENS
        check(events, end)


def test_a_call_announced_stays_as_announced_whatever_comes_after():
    events, end = run(
        added(call_item(), 0), arguments('{"a": 1}', 0),
        {"type": "response.function_call_arguments.done", "item_id": "fc_1",
         "output_index": 0, "arguments": '{"a": 1}'},
        arguments(', "b"', 0), done(call_item(arguments='{"a": 2}', status="completed"), 0),
        completed(status="incomplete", reason="max_output_tokens"))
    assert early_calls(events) == [("call_1", 0, "weather", '{"a": 1}')]
    assert end.parts == (ToolCall("call_1", "weather", '{"a": 1}'),)
    check(events, end)


def test_arguments_that_are_not_json_are_left_for_the_loop_with_the_calls_after_them():
    events, end = run(
        added(call_item(), 0), arguments('{"a": ', 0),
        done(call_item(arguments='{"a": ', status="completed"), 0),
        added(call_item(call_id="call_2", n=2), 1), arguments("{}", 1, n=2),
        done(call_item(call_id="call_2", arguments="{}", status="completed", n=2), 1),
        completed())
    # Whether the first finished depends on how the response ends: the second waits.
    assert early_calls(events) == []
    assert [p.finished for p in end.parts] == [True, True]
    check(events, end)


def test_a_call_whose_id_comes_only_with_its_done_item_is_announced_then():
    events, end = run(arguments('{"a": 1}', 0),
                      {"type": "response.function_call_arguments.done", "item_id": "fc_1",
                       "output_index": 0, "arguments": '{"a": 1}'},
                      done(call_item(arguments='{"a": 1}', status="completed"), 0), completed())
    assert inputs(events) == [(0, "", "", '{"a": 1}', '{"a": 1}')]
    assert [e.kind for e in events] == [Kind.TOOL_INPUT, Kind.TOOL_CALL]
    assert early_calls(events) == [("call_1", 0, "weather", '{"a": 1}')]
    check(events, end)


def test_a_character_split_across_argument_deltas_is_shown_whole_in_the_later_one():
    events, end = run(added(call_item(), 0), arguments('{"f": "' + HIGH, 0),
                      arguments(LOW + '"}', 0),
                      done(call_item(arguments='{"f": "' + EMOJI + '"}', status="completed"), 0),
                      completed())
    assert [text for *_, text, _ in inputs(events)] == ['{"f": "', EMOJI + '"}']
    assert early_calls(events) == [("call_1", 0, "weather", '{"f": "' + EMOJI + '"}')]
    check(events, end)


# -- usage -------------------------------------------------------------------------------


def test_usage_subtracts_cache_reads_and_writes_and_keeps_reasoning():
    usage = usage_from({"input_tokens": 500, "input_tokens_details": {
        "cached_tokens": 300, "cache_write_tokens": 50}, "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 25}})
    assert usage == Usage(input_tokens=150, output_tokens=40, cache_read_tokens=300,
                          cache_creation_tokens=50, reasoning_tokens=25)


@pytest.mark.parametrize("bad", [-1, 1.5, "12", None, True, float("nan"), 10**40])
def test_a_count_that_is_no_count_counts_as_zero(bad, caplog):
    usage = usage_from({"input_tokens": bad, "output_tokens": 9})
    assert (usage.input_tokens, usage.output_tokens) == (0, 9)


def test_a_price_fills_the_cost_of_the_turn():
    price = Price(1.25, 10.0, 0.125)
    _, end = run(text("x"), completed(), accumulator=Accumulator(price=price.priced))
    assert end.usage.priced
    assert end.usage.cost == pytest.approx((169 * 1.25 + 1152 * 0.125 + 133 * 10.0) / 1e6)


def test_without_a_price_the_turn_is_unpriced():
    _, end = run(text("x"), completed())
    assert not end.usage.priced and end.usage.cost == 0.0


def test_a_failed_turn_has_nothing_to_close():
    assert Accumulator().abandon() == []
