"""The Anthropic accumulator, fed decoded events as plain dicts."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nacelle.backends.anthropic.stream import Accumulator, Pricing
from nacelle.errors import ConfigError, NacelleError, StreamError, StreamTruncated, retryable
from nacelle.events import Event, Kind, Stop, ToolEvent, Usage
from nacelle.messages import ProviderBlock, Reasoning, Text, ToolCall
from nacelle.sse import SSEDecoder, parse_json
from nacelle.testing.wire import anthropic_stream

from hostile import EMOJI, HIGH, LOW, chain, leaves, locations, swapped, wrong_values
from streamed_calls import check, early_calls, feeds, inputs, replay


def start(input_tokens=10, output_tokens=1, read=0, write=0):
    return ("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "claude-opus-5", "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": write,
                  "cache_read_input_tokens": read, "output_tokens": output_tokens}}})


def block_start(index, block):
    return ("content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block})


def delta(index, **d):
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})


def text(index, s):
    return delta(index, type="text_delta", text=s)


def partial(index, s):
    return delta(index, type="input_json_delta", partial_json=s)


def block_stop(index):
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def message_delta(stop_reason, **usage):
    return ("message_delta", {"type": "message_delta",
                              "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                              "usage": usage or {"output_tokens": 5}})


STOP = ("message_stop", {"type": "message_stop"})
PING = ("ping", {"type": "ping"})


def run(events, **options):
    acc = Accumulator(**options)
    out = []
    for name, data in events:
        out.extend(acc.feed_event(name, data))
    return out, acc.finish()


def tool_event(end_events):
    return [e.tool for e in end_events if e.tool is not None]


# -- text and thinking ------------------------------------------------------------------

def test_each_text_delta_is_one_event_and_the_text_is_one_part():
    events, end = run([start(), block_start(0, {"type": "text", "text": ""}), PING,
                       text(0, "Hel"), text(0, "lo"), text(0, " there."), block_stop(0),
                       message_delta("end_turn", output_tokens=7), STOP])
    assert events == [Event(Kind.TEXT, text="Hel"), Event(Kind.TEXT, text="lo"),
                      Event(Kind.TEXT, text=" there.")]
    assert end.parts == (Text("Hello there."),)
    assert end.stop is Stop.END and end.resume is False
    assert end.usage == Usage(input_tokens=10, output_tokens=7)


def test_thinking_deltas_are_events_and_the_signature_is_kept_in_state():
    events, end = run([
        start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, type="thinking_delta", thinking="Let me "),
        delta(0, type="thinking_delta", thinking="think."),
        delta(0, type="signature_delta", signature="EqQBCkgIARABGAIiQL"),
        block_stop(0),
        block_start(1, {"type": "text", "text": ""}), text(1, "4"), block_stop(1),
        message_delta("end_turn"), STOP])
    assert events == [Event(Kind.THINKING, text="Let me "), Event(Kind.THINKING, text="think."),
                      Event(Kind.TEXT, text="4")]
    assert end.parts == (Reasoning("Let me think.", "EqQBCkgIARABGAIiQL", "anthropic"),
                         Text("4"))


def test_omitted_thinking_keeps_an_empty_reasoning_with_its_signature():
    _, end = run([start(), block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                  delta(0, type="signature_delta", signature="Ek8KAw"), block_stop(0),
                  message_delta("end_turn"), STOP])
    assert end.parts == (Reasoning("", "Ek8KAw", "anthropic"),)


def test_redacted_thinking_is_kept_whole_in_state():
    block = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
    events, end = run([start(), block_start(0, block), block_stop(0),
                       message_delta("end_turn"), STOP])
    assert events == []
    assert len(end.parts) == 1 and end.parts[0].text == ""
    assert json.loads(end.parts[0].state) == block


# -- local tool calls -------------------------------------------------------------------

def test_tool_input_split_mid_token_is_concatenated_byte_for_byte():
    events, end = run([
        start(),
        block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}),
        partial(0, ""), partial(0, '{"ci'), partial(0, 'ty": "Pa'), partial(0, 'ris", "u'),
        partial(0, 'nit": "c"}'),
        block_stop(0), message_delta("tool_use"), STOP])
    whole = '{"city": "Paris", "unit": "c"}'
    assert events == [
        Event(Kind.TOOL_INPUT, text='{"ci', tool=ToolEvent("toolu_1", 0, "get_weather", '{"ci')),
        Event(Kind.TOOL_INPUT, text='ty": "Pa',
              tool=ToolEvent("toolu_1", 0, "get_weather", '{"city": "Pa')),
        Event(Kind.TOOL_INPUT, text='ris", "u',
              tool=ToolEvent("toolu_1", 0, "get_weather", '{"city": "Paris", "u')),
        Event(Kind.TOOL_INPUT, text='nit": "c"}',
              tool=ToolEvent("toolu_1", 0, "get_weather", whole)),
        # whole at its block's stop: announced then, for the loop to hold or start
        Event(Kind.TOOL_CALL, tool=ToolEvent("toolu_1", 0, "get_weather", whole))]
    assert end.parts == (ToolCall("toolu_1", "get_weather", whole),)
    assert end.stop is Stop.TOOLS


def test_a_tool_call_with_no_input_deltas_has_an_empty_object_as_input():
    _, end = run([start(), block_start(0, {"type": "tool_use", "id": "t", "name": "now",
                                           "input": {}}),
                  partial(0, ""), block_stop(0), message_delta("tool_use"), STOP])
    assert end.parts == (ToolCall("t", "now", "{}"),)


def test_invalid_tool_input_is_kept_as_written_for_the_loop_to_fail():
    _, end = run([start(), block_start(0, {"type": "tool_use", "id": "t", "name": "f",
                                           "input": {}}),
                  partial(0, '{"a": "\\d"'), block_stop(0), message_delta("tool_use"), STOP])
    assert end.parts == (ToolCall("t", "f", '{"a": "\\d"'),)


def test_max_tokens_inside_a_tool_call_without_block_stop_keeps_an_unfinished_call():
    events, end = run([
        start(), block_start(0, {"type": "text", "text": ""}), text(0, "Writing."),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_2", "name": "write", "input": {}}),
        partial(1, '{"path": "a.txt", "content": "lorem ip'),
        message_delta("max_tokens", output_tokens=100), STOP])
    cut = '{"path": "a.txt", "content": "lorem ip'
    assert events == [Event(Kind.TEXT, text="Writing."), Event(
        Kind.TOOL_INPUT, text=cut, tool=ToolEvent("toolu_2", 0, "write", cut))]  # no TOOL_CALL
    assert end.parts == (Text("Writing."),
                         ToolCall("toolu_2", "write", '{"path": "a.txt", "content": "lorem ip',
                                  finished=False))
    assert end.stop is Stop.MAX_TOKENS


def test_a_whole_call_whose_block_stop_never_came_is_finished_when_the_limit_was_not_hit():
    events, end = run([
        start(), block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        partial(0, '{"a": 1}'), message_delta("tool_use"), STOP])
    assert end.parts == (ToolCall("t", "f", '{"a": 1}'),) and end.stop is Stop.TOOLS


def test_an_open_call_with_broken_input_is_cut_off_whatever_the_stop():
    _, end = run([
        start(), block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        partial(0, '{"a": '), message_delta("tool_use"), STOP])
    assert end.parts == (ToolCall("t", "f", '{"a": ', finished=False),)


def test_parts_keep_stream_order():
    _, end = run([
        start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, type="signature_delta", signature="s"), block_stop(0),
        block_start(1, {"type": "text", "text": ""}), text(1, "a"), block_stop(1),
        block_start(2, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
        block_stop(2),
        block_start(3, {"type": "tool_use", "id": "t2", "name": "g", "input": {}}),
        block_stop(3),
        message_delta("tool_use"), STOP])
    assert [type(p).__name__ for p in end.parts] == ["Reasoning", "Text", "ToolCall", "ToolCall"]
    assert [p.id for p in end.parts[2:]] == ["t1", "t2"]


# -- local calls as they are written ----------------------------------------------------

DATA = __import__("pathlib").Path(__file__).resolve().parent.parent / "data" / "anthropic"

# Two tool_use blocks in sequence after a text block, each input streamed as
# input_json_delta fragments (the first one empty), pings between: the shape of the
# "Streaming request with tool use" example of
# https://platform.claude.com/docs/en/build-with-claude/streaming, with two calls as
# parallel tool use sends them (one tool_use block each,
# https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use).
WEATHER = ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather")
TIME = ("toolu_01Kq8nZ3c4Yw5vLpR2mB6sTd", "get_time")
TWO_CALLS_INPUTS = [
    (0, *WEATHER, '{"location":', '{"location":'),
    (0, *WEATHER, ' "Zürich, CH"', '{"location": "Zürich, CH"'),
    (0, *WEATHER, ', "unit": "celsius"}', '{"location": "Zürich, CH", "unit": "celsius"}'),
    (1, *TIME, '{"timezone": "Europe/Zu', '{"timezone": "Europe/Zu'),
    (1, *TIME, 'rich"}', '{"timezone": "Europe/Zurich"}'),
]


def test_two_calls_stream_their_input_and_are_announced_as_each_closes_at_every_split():
    body = (DATA / "two_tool_uses.sse").read_bytes()
    for pieces in feeds(body):
        events, end = replay(pieces, Accumulator())
        assert inputs(events) == TWO_CALLS_INPUTS
        assert early_calls(events) == [
            (*WEATHER[:1], 0, WEATHER[1], '{"location": "Zürich, CH", "unit": "celsius"}'),
            (*TIME[:1], 1, TIME[1], '{"timezone": "Europe/Zurich"}')]
        check(events, end)
        kinds = [e.kind for e in events]
        # the first call is announced at its block's stop, before the second streams
        assert kinds == [Kind.TEXT] + [Kind.TOOL_INPUT] * 3 + [Kind.TOOL_CALL] + [
            Kind.TOOL_INPUT] * 2 + [Kind.TOOL_CALL]
        assert end.stop is Stop.TOOLS


def test_a_call_cut_by_max_tokens_streams_its_input_but_is_never_announced_at_every_split():
    body = (DATA / "max_tokens_in_tool.sse").read_bytes()
    cut = '{"path": "notes.md", "content": "# Notes\\n\\nThe first point is'
    for pieces in feeds(body):
        events, end = replay(pieces, Accumulator())
        assert [text for *_, text, _ in inputs(events)] == [
            '{"path": "notes.md", "content": "# Notes\\n\\nThe first', " point is"]
        assert inputs(events)[-1][4] == cut
        assert early_calls(events) == []
        assert end.parts[0].finished is False and end.stop is Stop.MAX_TOKENS
        check(events, end)


def test_server_side_calls_stream_no_tool_input():
    events, _ = run([
        start(), block_start(0, {"type": "server_tool_use", "id": "srvtoolu_1",
                                 "name": "web_search", "input": {}}),
        partial(0, '{"query": "nac'), partial(0, 'elle"}'), block_stop(0),
        block_start(1, {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "echo",
                        "server_name": "p", "input": {}}),
        partial(1, '{"text": "hi"}'), block_stop(1), message_delta("end_turn"), STOP])
    assert [e.kind for e in events] == [Kind.TOOL_CALL, Kind.TOOL_CALL, Kind.TOOL_RESULT,
                                        Kind.TOOL_RESULT]
    assert all(e.tool.server for e in events)


def test_a_call_with_blank_input_is_announced_with_an_empty_object():
    events, end = run([start(), block_start(0, {"type": "tool_use", "id": "t", "name": "now",
                                                "input": {}}),
                       partial(0, ""), partial(0, "  "), block_stop(0),
                       message_delta("tool_use"), STOP])
    assert early_calls(events) == [("t", 0, "now", "{}")]
    assert inputs(events) == [(0, "t", "now", "  ", "  ")]
    check(events, end)


def test_input_that_is_not_json_is_left_for_the_loop_and_holds_back_no_later_call():
    events, end = run([
        start(),
        block_start(0, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
        partial(0, '{"a": "\\d"'), block_stop(0),
        block_start(1, {"type": "tool_use", "id": "t2", "name": "g", "input": {}}),
        partial(1, '{"b": 2}'), block_stop(1), message_delta("tool_use"), STOP])
    assert early_calls(events) == [("t2", 1, "g", '{"b": 2}')]
    assert end.parts[0] == ToolCall("t1", "f", '{"a": "\\d"')  # finished: the loop fails it
    check(events, end)


def test_a_later_call_waits_for_an_earlier_one_left_open_and_both_come_in_order():
    # A proxy that dropped a content_block_stop: the first call closes at message_delta.
    events, end = run([
        start(),
        block_start(0, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
        partial(0, '{"a": 1}'),
        block_start(1, {"type": "tool_use", "id": "t2", "name": "g", "input": {}}),
        partial(1, '{"b": 2}'), block_stop(1),
        message_delta("tool_use"), STOP])
    kinds = [e.kind for e in events]
    assert kinds == [Kind.TOOL_INPUT, Kind.TOOL_INPUT, Kind.TOOL_CALL, Kind.TOOL_CALL]
    assert early_calls(events) == [("t1", 0, "f", '{"a": 1}'), ("t2", 1, "g", '{"b": 2}')]
    check(events, end)


def test_a_later_call_behind_an_earlier_one_cut_off_is_left_for_the_loop():
    events, end = run([
        start(),
        block_start(0, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
        partial(0, '{"a": '),
        block_start(1, {"type": "tool_use", "id": "t2", "name": "g", "input": {}}),
        partial(1, '{"b": 2}'), block_stop(1),
        message_delta("tool_use"), STOP])
    # Announced early it would have been index 1; the loop numbers it 0, the first
    # one being unfinished.
    assert early_calls(events) == []
    assert [p.finished for p in end.parts] == [False, True]
    check(events, end)


def test_a_character_split_across_input_deltas_is_shown_whole_in_the_later_one():
    events, end = run([
        start(), block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        partial(0, '{"face": "' + HIGH), partial(0, LOW + '"}'), block_stop(0),
        message_delta("tool_use"), STOP])
    assert inputs(events) == [(0, "t", "f", '{"face": "', '{"face": "'),
                              (0, "t", "f", EMOJI + '"}', '{"face": "' + EMOJI + '"}')]
    assert early_calls(events) == [("t", 0, "f", '{"face": "' + EMOJI + '"}')]
    check(events, end)


def test_half_a_character_an_input_ends_on_is_one_more_tool_input_of_u_fffd():
    events, end = run([
        start(), block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        partial(0, '{"a": 1}' + HIGH), block_stop(0), message_delta("tool_use"), STOP])
    assert [text for *_, text, _ in inputs(events)] == ['{"a": 1}', "\ufffd"]
    assert early_calls(events) == []  # not JSON with the U+FFFD: the loop fails it
    assert end.parts[0].input == '{"a": 1}\ufffd'
    check(events, end)


# -- server-side blocks -----------------------------------------------------------------

WEB_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
    {"type": "web_search_result", "title": "Nacelle", "url": "https://example.com/n",
     "encrypted_content": "EqgfCioIARgB", "page_age": None}]}


def test_server_tool_use_and_its_result_become_events_and_provider_blocks():
    events, end = run([
        start(),
        block_start(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                        "input": {}}),
        partial(0, '{"query": "nac'), partial(0, 'elle"}'), block_stop(0),
        block_start(1, WEB_RESULT), block_stop(1),
        block_start(2, {"type": "text", "text": ""}), text(2, "Found it."), block_stop(2),
        message_delta("end_turn"), STOP])
    assert events[:2] == [
        Event(Kind.TOOL_CALL, tool=ToolEvent("srvtoolu_1", 0, "web_search",
                                             '{"query": "nacelle"}', server="anthropic")),
        Event(Kind.TOOL_RESULT, tool=ToolEvent("srvtoolu_1", 0, "web_search", "",
                                               result=json.dumps(WEB_RESULT["content"],
                                                                 separators=(",", ":")),
                                               server="anthropic")),
    ]
    assert events[2] == Event(Kind.TEXT, text="Found it.")
    assert end.parts[0] == ProviderBlock("anthropic", json.dumps(
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
         "input": {"query": "nacelle"}}, separators=(",", ":")))
    assert json.loads(end.parts[1].data) == WEB_RESULT
    assert end.parts[2] == Text("Found it.")


def test_mcp_blocks_report_the_server_name_and_errors():
    events, end = run([
        start(),
        block_start(0, {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "echo",
                        "server_name": "perception", "input": {}}),
        partial(0, '{"text": "hi"}'), block_stop(0),
        block_start(1, {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1",
                        "is_error": False, "content": [{"type": "text", "text": "hi"}]}),
        block_stop(1),
        block_start(2, {"type": "mcp_tool_use", "id": "mcptoolu_2", "name": "fail",
                        "server_name": "perception", "input": {}}),
        block_stop(2),
        block_start(3, {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_2",
                        "is_error": True, "content": "no such thing"}),
        block_stop(3),
        message_delta("end_turn"), STOP])
    assert tool_event(events) == [
        ToolEvent("mcptoolu_1", 0, "echo", '{"text": "hi"}', server="perception"),
        ToolEvent("mcptoolu_1", 0, "echo", "", result="hi", server="perception"),
        ToolEvent("mcptoolu_2", 1, "fail", "{}", server="perception"),
        ToolEvent("mcptoolu_2", 1, "fail", "", error="no such thing", server="perception"),
    ]
    assert [e.kind for e in events] == [Kind.TOOL_CALL, Kind.TOOL_RESULT] * 2
    assert all(isinstance(p, ProviderBlock) for p in end.parts)
    assert json.loads(end.parts[0].data)["input"] == {"text": "hi"}


def test_a_web_search_error_result_is_a_failed_result():
    events, _ = run([
        start(),
        block_start(0, {"type": "server_tool_use", "id": "s1", "name": "web_search",
                        "input": {"query": "x"}}),
        block_stop(0),
        block_start(1, {"type": "web_search_tool_result", "tool_use_id": "s1", "content": {
            "type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}}),
        block_stop(1), message_delta("end_turn"), STOP])
    assert events[0].tool.input == "{}"
    assert events[1].tool.error == "max_uses_exceeded" and events[1].tool.failed


def test_a_result_for_a_call_from_an_earlier_turn_uses_the_known_name():
    events, _ = run([
        start(),
        block_start(0, {"type": "mcp_tool_result", "tool_use_id": "m9", "is_error": False,
                        "content": "late"}),
        block_stop(0), message_delta("end_turn"), STOP],
        calls={"m9": ("slow", "perception")})
    assert events == [Event(Kind.TOOL_RESULT, tool=ToolEvent(
        "m9", 0, "slow", "", result="late", server="perception"))]


def test_an_unknown_block_type_is_kept_whole():
    block = {"type": "fallback", "model": "claude-sonnet-5", "reason": "overloaded"}
    events, end = run([start(), block_start(0, block), block_stop(0),
                       block_start(1, {"type": "text", "text": ""}), text(1, "ok"),
                       block_stop(1), message_delta("end_turn"), STOP])
    assert events == [Event(Kind.TEXT, text="ok")]
    assert json.loads(end.parts[0].data) == block and end.parts[1] == Text("ok")


def test_a_server_call_cut_off_mid_input_is_dropped():
    events, end = run([
        start(),
        block_start(0, {"type": "server_tool_use", "id": "s1", "name": "web_search",
                        "input": {}}),
        partial(0, '{"query": "na'), message_delta("max_tokens"), STOP])
    assert events == [] and end.parts == ()


# -- events that are not content --------------------------------------------------------

def test_ping_and_unknown_events_are_ignored():
    events, end = run([start(), PING, ("future_event", {"type": "future_event", "x": 1}),
                       block_start(0, {"type": "text", "text": ""}), PING, text(0, "hi"),
                       delta(0, type="future_delta", x=1), block_stop(0),
                       message_delta("end_turn"), PING, STOP])
    assert events == [Event(Kind.TEXT, text="hi")] and end.parts == (Text("hi"),)


def test_events_after_message_stop_are_ignored():
    acc = Accumulator()
    for name, data in [start(), message_delta("end_turn"), STOP]:
        acc.feed_event(name, data)
    assert acc.feed_event(*text(0, "late")) == []
    assert acc.done


def test_the_event_type_is_taken_from_the_data_when_the_sse_event_has_no_name():
    acc = Accumulator()
    acc.feed_event("message", start()[1])
    acc.feed_event("message", block_start(0, {"type": "text", "text": ""})[1])
    assert acc.feed_event("message", text(0, "x")[1]) == [Event(Kind.TEXT, text="x")]


def test_a_delta_for_a_block_never_started_is_a_stream_error():
    acc = Accumulator()
    acc.feed_event(*start())
    with pytest.raises(StreamError, match="never started"):
        acc.feed_event(*text(3, "x"))


def test_a_block_started_twice_is_a_stream_error():
    acc = Accumulator()
    acc.feed_event(*start())
    acc.feed_event(*block_start(0, {"type": "text", "text": ""}))
    with pytest.raises(StreamError, match="twice"):
        acc.feed_event(*block_start(0, {"type": "text", "text": ""}))


# -- usage ------------------------------------------------------------------------------

def test_message_delta_usage_overwrites_and_is_never_added():
    _, end = run([start(input_tokens=2679, output_tokens=3, read=100, write=50),
                  message_delta("end_turn", output_tokens=15),
                  message_delta("end_turn", input_tokens=10682, cache_read_input_tokens=100,
                                cache_creation_input_tokens=0, output_tokens=510,
                                server_tool_use={"web_search_requests": 1}),
                  STOP])
    assert end.usage == Usage(input_tokens=10682, output_tokens=510, cache_read_tokens=100,
                              cache_creation_tokens=0)


def test_cache_reads_writes_and_thinking_tokens_are_reported():
    _, end = run([start(input_tokens=12, read=4000, write=300),
                  message_delta("end_turn", output_tokens=90,
                                output_tokens_details={"thinking_tokens": 60}), STOP])
    assert end.usage == Usage(input_tokens=12, output_tokens=90, cache_read_tokens=4000,
                              cache_creation_tokens=300, reasoning_tokens=60)


def test_pricing_fills_the_cost_with_cache_rates_of_their_own():
    pricing = Pricing(input=5.0, output=25.0, cache_read=0.5, cache_write=6.25)
    _, end = run([start(input_tokens=1_000_000, read=2_000_000, write=1_000_000),
                  message_delta("end_turn", output_tokens=100_000), STOP], pricing=pricing)
    assert end.usage.cost == pytest.approx(5.0 + 2.5 + 1.0 + 6.25)


def test_pricing_cache_rates_default_to_anthropics_multipliers():
    assert Pricing(4.0, 20.0) == Pricing(4.0, 20.0, 0.4, 5.0)


def test_without_pricing_the_cost_is_zero_and_not_priced():
    _, end = run([start(input_tokens=1000), message_delta("end_turn"), STOP])
    assert end.usage.cost == 0.0 and not end.usage.priced


def test_one_hour_cache_writes_are_priced_at_twice_the_input_rate():
    usage = {"input_tokens": 0, "cache_creation_input_tokens": 3_000_000,
             "cache_creation": {"ephemeral_5m_input_tokens": 1_000_000,
                                "ephemeral_1h_input_tokens": 2_000_000}}
    acc = Accumulator(pricing=Pricing(4.0, 20.0))
    for name, data in [("message_start", {"type": "message_start", "message": {
            "id": "m", "usage": usage}}), ("message_delta", {
            "type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}),
            ("message_stop", {"type": "message_stop"})]:
        acc.feed_event(name, data)
    end = acc.finish()
    assert end.usage.priced
    assert end.usage.cost == pytest.approx(1 * 4.0 * 1.25 + 2 * 4.0 * 2)
    assert (end.usage.cache_creation_tokens, end.usage.cache_write_1h_tokens) == (
        3_000_000, 2_000_000)


def test_the_usage_says_which_writes_were_one_hour_writes_without_a_price():
    usage = {"cache_creation_input_tokens": 700,
             "cache_creation": {"ephemeral_5m_input_tokens": 200,
                                "ephemeral_1h_input_tokens": 500}}
    acc = Accumulator()
    acc.feed_event("message_start", {"type": "message_start", "message": {"usage": usage}})
    assert (acc.usage.cache_creation_tokens, acc.usage.cache_write_1h_tokens) == (700, 500)
    assert not acc.usage.priced


def test_one_hour_writes_beyond_the_writes_reported_are_not_billed_twice():
    usage = {"cache_creation_input_tokens": 1_000_000,
             "cache_creation": {"ephemeral_1h_input_tokens": 5_000_000}}
    acc = Accumulator(pricing=Pricing(4.0, 20.0))
    acc.feed_event("message_start", {"type": "message_start", "message": {"usage": usage}})
    assert acc.usage.cost == pytest.approx(4.0 * 2)
    assert acc.usage.cache_write_1h_tokens == 1_000_000


@pytest.mark.parametrize("bad", [-1, "5", None, True])
def test_pricing_refuses_what_is_not_a_non_negative_number(bad):
    with pytest.raises(ConfigError, match="Price.input"):
        Pricing(bad, 1.0)


# -- stops ------------------------------------------------------------------------------

@pytest.mark.parametrize("reason, stop", [
    ("end_turn", Stop.END), ("stop_sequence", Stop.END), ("tool_use", Stop.TOOLS),
    ("max_tokens", Stop.MAX_TOKENS), ("model_context_window_exceeded", Stop.CONTEXT),
    ("refusal", Stop.REFUSAL), ("compaction", Stop.OTHER), ("brand_new", Stop.OTHER),
])
def test_stop_reasons_map_to_stops(reason, stop):
    _, end = run([start(), message_delta(reason), STOP])
    assert end.stop is stop and end.resume is False


def test_pause_turn_asks_the_loop_to_resume():
    _, end = run([start(), block_start(0, {"type": "text", "text": ""}), text(0, "Searching"),
                  block_stop(0), message_delta("pause_turn"), STOP])
    assert end.resume is True and end.parts == (Text("Searching"),)


# -- failures ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["overloaded_error", "rate_limit_error", "api_error",
                                  "timeout_error"])
def test_a_transient_error_event_is_a_retryable_stream_error(kind):
    acc = Accumulator()
    acc.feed_event(*start())
    with pytest.raises(StreamError) as caught:
        acc.feed_event("error", {"type": "error", "error": {"type": kind, "message": "Overloaded",
                                                      "details": None},
                           "request_id": "req_011"})
    assert caught.value.type == kind and retryable(caught.value)
    assert str(caught.value) == f"Anthropic stream error {kind}: Overloaded (request id req_011)"
    assert not isinstance(caught.value, StreamTruncated)


def test_an_invalid_request_error_event_is_not_retryable():
    with pytest.raises(StreamError) as caught:
        Accumulator().feed_event("error", {"type": "error", "error": {
            "type": "invalid_request_error", "message": "bad"}})
    assert caught.value.type == "invalid_request_error" and not retryable(caught.value)


def test_a_stream_that_ends_before_message_stop_is_truncated():
    acc = Accumulator()
    for name, data in [start(), block_start(0, {"type": "text", "text": ""}), text(0, "Hal"),
                       message_delta("end_turn")]:
        acc.feed_event(name, data)
    with pytest.raises(StreamTruncated, match="message_stop"):
        acc.finish()


def test_an_empty_stream_is_truncated():
    with pytest.raises(StreamTruncated):
        Accumulator().finish()


# -- hostile data: every surprise is a StreamError or is handled --------------------------

TEXT_OPEN = [start(), block_start(0, {"type": "text", "text": ""})]


def feed_all(events, **options):
    acc = Accumulator(**options)
    out = []
    for name, data in events:
        out.extend(acc.feed_event(name, data))
    return acc, out


@pytest.mark.parametrize("value", [None, 5, 1.5, True, ["a"], {"text": "a"}])
def test_a_text_delta_whose_text_is_not_a_string_is_a_stream_error_never_shown(value):
    with pytest.raises(StreamError, match="text_delta whose text is not a string"):
        feed_all(TEXT_OPEN + [delta(0, type="text_delta", text=value)])


def test_a_null_text_delta_is_a_stream_error_not_the_word_none():
    acc, _ = feed_all(TEXT_OPEN)
    with pytest.raises(StreamError) as caught:
        acc.feed_event(*delta(0, type="text_delta", text=None))
    assert "None" not in [e.text for e in acc.abandon()]
    assert "text_delta" in str(caught.value)


@pytest.mark.parametrize("kind, field", [("thinking_delta", "thinking"),
                                         ("signature_delta", "signature"),
                                         ("input_json_delta", "partial_json")])
@pytest.mark.parametrize("value", [None, 7, {"a": 1}, ["x"]])
def test_other_deltas_whose_payload_is_not_a_string_are_stream_errors(kind, field, value):
    opening = [start(), block_start(0, {"type": "thinking", "thinking": "", "signature": ""})
               if kind != "input_json_delta" else
               block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}})]
    with pytest.raises(StreamError, match=f"{kind} whose {field} is not a string"):
        feed_all(opening + [delta(0, type=kind, **{field: value})])


@pytest.mark.parametrize("index", [None, "0", [0], {"i": 0}, True, False, 0.0])
def test_an_index_that_is_not_an_int_is_a_stream_error_in_every_block_event(index):
    for event in (
        ("content_block_start", {"type": "content_block_start", "index": index,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": index,
                                 "delta": {"type": "text_delta", "text": "x"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ):
        with pytest.raises(StreamError):
            feed_all([start(), block_start(0, {"type": "text", "text": ""}), event])


def test_a_bool_index_never_reaches_block_one():
    # True == 1 in Python: taken as an index it would write into another block.
    acc, _ = feed_all([start(), block_start(0, {"type": "text", "text": ""}),
                       block_start(1, {"type": "text", "text": ""})])
    with pytest.raises(StreamError, match="never started"):
        acc.feed_event("content_block_delta", {"type": "content_block_delta", "index": True,
                                         "delta": {"type": "text_delta", "text": "x"}})


@pytest.mark.parametrize("event", [
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": []}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": ["text"]}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "text", "text": 5}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "thinking", "signature": {"s": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "tool_use", "id": None, "name": "f"}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "tool_use", "id": "t", "name": 5}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "mcp_tool_use", "id": "m", "name": "f",
                                               "server_name": ["s"]}}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
        "type": "web_search_tool_result", "tool_use_id": ["s1"], "content": []}}),
    ("message_start", {"type": "message_start", "message": "hello"}),
    ("message_delta", {"type": "message_delta", "delta": [1]}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": {"a": 1}}}),
    ("content_block_start", "not an object"),
])
def test_a_field_of_the_wrong_json_type_is_a_stream_error(event):
    with pytest.raises(StreamError, match="Anthropic"):
        feed_all([start(), event])


def test_a_delta_that_is_not_an_object_is_a_stream_error():
    with pytest.raises(StreamError, match="delta is not an object"):
        feed_all(TEXT_OPEN + [("content_block_delta", {"type": "content_block_delta",
                                                       "index": 0, "delta": "x"})])


def test_a_delta_for_a_block_already_closed_is_a_stream_error():
    with pytest.raises(StreamError, match="after it was closed"):
        feed_all(TEXT_OPEN + [block_stop(0), text(0, "late")])


def test_an_unknown_error_shape_is_still_a_stream_error():
    for data in ({"type": "error", "error": ["x"]}, {"type": "error", "error": {"type": 5,
                                                                              "message": {}}},
                 "just text", None, {"type": "error", "request_id": ["r"]}):
        with pytest.raises(StreamError, match="Anthropic stream error error"):
            Accumulator().feed_event("error", data)


def test_result_content_made_of_text_blocks_with_null_text_is_kept_as_json_not_none():
    events, _ = run([
        start(),
        block_start(0, {"type": "mcp_tool_use", "id": "m1", "name": "echo",
                        "server_name": "s", "input": {}}), block_stop(0),
        block_start(1, {"type": "mcp_tool_result", "tool_use_id": "m1",
                        "content": [{"type": "text", "text": None}]}), block_stop(1),
        message_delta("end_turn"), STOP])
    assert events[1].tool.result == '[{"type":"text","text":null}]'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -5, 1.5,
                                 pytest.param(10**400, id="10**400"), 2**53 + 1, "12", True,
                                 [3], {"n": 3}])
def test_an_implausible_token_count_is_ignored_with_a_warning_and_the_last_good_one_kept(
        bad, caplog):
    _, end = run([start(input_tokens=10, output_tokens=1),
                  message_delta("end_turn", input_tokens=bad, output_tokens=bad,
                                cache_read_input_tokens=bad, cache_creation_input_tokens=bad,
                                output_tokens_details={"thinking_tokens": bad}),
                  STOP])
    assert end.usage == Usage(input_tokens=10, output_tokens=1)
    assert "not a token count" in caplog.text


def test_a_priced_turn_with_absurd_counts_still_has_a_finite_cost():
    _, end = run([start(input_tokens=10**400), message_delta("end_turn", output_tokens=2**53),
                  STOP], pricing=Pricing(5.0, 25.0))
    assert 0 <= end.usage.cost < float("inf")


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_pricing_refuses_prices_that_are_not_finite(bad):
    with pytest.raises(ConfigError, match="finite"):
        Pricing(1.0, bad)


# -- server-side calls: every TOOL_CALL closed by exactly one TOOL_RESULT -----------------

def server_call(index, call_id, name="web_search"):
    return [block_start(index, {"type": "server_tool_use", "id": call_id, "name": name,
                                "input": {}}),
            partial(index, '{"query": "x"}'), block_stop(index)]


def server_result(index, call_id, content="ok"):
    return [block_start(index, {"type": "mcp_tool_result", "tool_use_id": call_id,
                                "content": content}), block_stop(index)]


def pairing(events):
    calls = [e.tool.id for e in events if e.kind is Kind.TOOL_CALL]
    results = [e.tool.id for e in events if e.kind is Kind.TOOL_RESULT]
    return calls, results


def test_a_server_call_without_a_result_is_closed_as_failed_at_message_stop(caplog):
    events, end = run([start(), *server_call(0, "s1"), message_delta("end_turn"), STOP])
    assert pairing(events) == (["s1"], ["s1"])
    closing = events[1].tool
    assert closing.failed and "no result" in closing.error and closing.server == "anthropic"
    assert (closing.index, closing.name) == (0, "web_search")
    assert "s1" in caplog.text
    assert len(end.parts) == 1  # the call itself is still replayed


def test_a_result_without_a_call_announces_nothing_but_is_kept(caplog):
    events, end = run([start(), *server_result(0, "nobody"), message_delta("end_turn"), STOP])
    assert events == []
    assert json.loads(end.parts[0].data)["tool_use_id"] == "nobody"
    assert "no open call" in caplog.text


def test_a_second_result_for_one_call_is_not_reported_twice():
    events, end = run([start(), *server_call(0, "s1"), *server_result(1, "s1", "first"),
                       *server_result(2, "s1", "second"), message_delta("end_turn"), STOP])
    assert pairing(events) == (["s1"], ["s1"])
    assert events[1].tool.result == "first"
    assert len(end.parts) == 3


def test_two_server_calls_with_one_id_are_a_stream_error_naming_it_and_the_first_is_closed():
    acc, events = feed_all([start(), *server_call(0, "srvtoolu_dup")])
    with pytest.raises(StreamError, match="srvtoolu_dup"):
        for name, data in server_call(1, "srvtoolu_dup"):
            events.extend(acc.feed_event(name, data))
    events.extend(acc.abandon())
    assert pairing(events) == (["srvtoolu_dup"], ["srvtoolu_dup"])
    assert events[-1].tool.failed
    assert acc.abandon() == []  # closed once


def test_abandon_closes_every_open_server_call_of_a_failed_stream():
    acc, events = feed_all([start(), *server_call(0, "s1"), *server_call(1, "s2"),
                            *server_result(2, "s2")])
    closing = acc.abandon()
    assert [(e.kind, e.tool.id, e.tool.failed) for e in closing] == [
        (Kind.TOOL_RESULT, "s1", True)]
    assert "stream failed" in closing[0].tool.error


def test_a_paused_turn_leaves_its_call_open_for_the_next_response():
    events, end = run([start(), *server_call(0, "s1"), message_delta("pause_turn"), STOP])
    assert pairing(events) == (["s1"], []) and end.resume
    # The next response carries the result: reported once, under the call's name.
    later, _ = run([start(), *server_result(0, "s1", "found"), message_delta("end_turn"),
                    STOP], calls={"s1": ("web_search", "anthropic")})
    assert [(e.kind, e.tool.name, e.tool.result) for e in later] == [
        (Kind.TOOL_RESULT, "web_search", "found")]


def test_a_call_carried_from_a_paused_turn_that_never_gets_its_result_is_closed():
    events, _ = run([start(), message_delta("end_turn"), STOP],
                    calls={"s1": ("web_search", "anthropic")})
    assert [(e.kind, e.tool.id, e.tool.failed) for e in events] == [
        (Kind.TOOL_RESULT, "s1", True)]


def test_a_carried_call_announced_again_is_not_announced_twice():
    events, _ = run([start(), *server_call(0, "s1"), *server_result(1, "s1"),
                     message_delta("end_turn"), STOP],
                    calls={"s1": ("web_search", "anthropic")})
    assert pairing(events) == ([], ["s1"])


def test_two_local_calls_with_one_id_stay_two_parts_with_their_own_input():
    _, end = run([
        start(),
        block_start(0, {"type": "tool_use", "id": "toolu_same", "name": "f", "input": {}}),
        partial(0, '{"a": 1}'), block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_same", "name": "f", "input": {}}),
        partial(1, '{"a": 2}'), block_stop(1),
        message_delta("tool_use"), STOP])
    assert end.parts == (ToolCall("toolu_same", "f", '{"a": 1}'),
                         ToolCall("toolu_same", "f", '{"a": 2}'))


# -- secrets ----------------------------------------------------------------------------

SECRET = "sk-ant-api03-SECRET-0123456789abcdef"


def hide(text):
    return text.replace(SECRET, "<hidden>")


def test_an_in_band_error_echoing_the_key_is_scrubbed_in_every_field():
    with pytest.raises(StreamError) as caught:
        Accumulator(scrub=hide).feed_event("error", {
            "type": "error", "request_id": f"req_{SECRET}",
            "error": {"type": f"invalid_{SECRET}", "message": f"bad key {SECRET}"}})
    err = caught.value
    for text in [str(err), repr(err), repr(err.args), err.type, err.request_id,
                 *map(repr, chain(err))]:
        assert SECRET not in text
    assert "bad key <hidden>" in str(err)



# -- realistic streams with one field swapped for a value of the wrong type --------------

def recorded(chunks):
    """A builder's body decoded as the backend decodes it: (event name, JSON data)."""
    decoder = SSEDecoder()
    return [(e.event, parse_json(e.data)) for c in chunks for e in decoder.feed(c)]


REALISTIC = recorded(anthropic_stream(
    ["Hel", "lo"], thinking_deltas=["Let me ", "think."],
    tool_calls=[("toolu_1", "get_weather", '{"city": "Paris"}'),
                ("toolu_2", "clock", "")],
    server_blocks=[
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
         "input": {"query": "nacelle"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
            {"type": "web_search_result", "title": "N", "url": "https://example.com"}]},
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "echo", "server_name": "p",
         "input": {"text": "hi"}},
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": False,
         "content": [{"type": "text", "text": "hi"}]},
    ],
    usage={"input_tokens": 12, "output_tokens": 40, "cache_read_input_tokens": 5,
           "cache_creation_input_tokens": 7},
))

WRONG = wrong_values("text", "pause_turn", "tool_use")


@st.composite
def hostile_streams(draw, base=REALISTIC):
    events = list(base)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        at = draw(st.integers(min_value=0, max_value=len(events) - 1))
        how = draw(st.sampled_from(["swap", "swap", "swap", "drop", "repeat"]))
        name, data = events[at]
        if how == "drop":
            del events[at]
        elif how == "repeat":
            events.insert(at, (name, data))
        else:
            path = draw(st.sampled_from(list(locations(data))) | st.sampled_from(
                list(leaves(data))))
            events[at] = (name, swapped(data, path, draw(WRONG)))
    return events


def assert_sound(events, end):
    """What a consumer may rely on, whatever the stream held."""
    for event in events:
        assert type(event.text) is str
        if event.kind in (Kind.TEXT, Kind.THINKING):
            assert event.text
    # Server-side calls are closed here; local ones by the loop.
    calls = [e.tool.id for e in events if e.kind is Kind.TOOL_CALL and e.tool.server]
    results = [e.tool.id for e in events if e.kind is Kind.TOOL_RESULT]
    assert len(set(calls)) == len(calls)
    if end is None or not end.resume:
        assert sorted(calls) == sorted(results)
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
            if isinstance(part, ProviderBlock):
                assert isinstance(json.loads(part.data), dict)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(hostile_streams(), st.booleans())
def test_a_realistic_stream_with_fields_swapped_raises_nothing_but_nacelle_errors(
        events, priced):
    acc = Accumulator(pricing=Pricing(3.0, 15.0) if priced else None)
    out, end = [], None
    try:
        for name, data in events:
            out.extend(acc.feed_event(name, data))
        end = acc.finish()
    except NacelleError:
        out.extend(acc.abandon())  # what the backend yields before the error
    assert_sound(out, end)


def test_the_realistic_stream_itself_is_sound():
    acc = Accumulator()
    out = [e for name, data in REALISTIC for e in acc.feed_event(name, data)]
    end = acc.finish()
    assert_sound(out, end)
    assert [e.kind for e in out].count(Kind.TOOL_RESULT) == 2
    assert [type(p).__name__ for p in end.parts].count("ToolCall") == 2
    assert early_calls(out) == [("toolu_1", 0, "get_weather", '{"city": "Paris"}'),
                                ("toolu_2", 1, "clock", "{}")]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional={
    "input_tokens": WRONG, "output_tokens": WRONG, "cache_read_input_tokens": WRONG,
    "cache_creation_input_tokens": WRONG,
    "output_tokens_details": WRONG | st.fixed_dictionaries(
        {}, optional={"thinking_tokens": WRONG}),
}), st.booleans())
def test_usage_of_any_shape_gives_a_valid_usage(usage, priced):
    acc = Accumulator(pricing=Pricing(3.0, 15.0) if priced else None)
    for name, data in [start(), ("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": "end_turn"}, "usage": usage}), STOP]:
        acc.feed_event(name, data)
    assert_sound([], acc.finish())


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["text", "thinking", "tool_use", "server_tool_use", "mcp_tool_use",
                        "mcp_tool_result", "web_search_tool_result", "redacted_thinking"]),
       st.dictionaries(st.sampled_from(["id", "name", "text", "thinking", "signature",
                                        "server_name", "tool_use_id", "content", "input",
                                        "is_error", "data"]), WRONG, max_size=4),
       st.sampled_from(["text_delta", "thinking_delta", "signature_delta",
                        "input_json_delta"]),
       st.dictionaries(st.sampled_from(["text", "thinking", "signature", "partial_json"]),
                       WRONG, max_size=2))
def test_a_block_of_any_shape_is_read_or_is_a_stream_error(kind, fields, delta_kind, payload):
    acc = Accumulator()
    out, end = [], None
    try:
        for name, data in [start(), block_start(0, {"type": kind, **fields}),
                           delta(0, type=delta_kind, **payload), block_stop(0),
                           message_delta("end_turn"), STOP]:
            out.extend(acc.feed_event(name, data))
        end = acc.finish()
    except NacelleError:
        out.extend(acc.abandon())
    assert_sound(out, end)


def test_a_calls_input_takes_the_same_checks_and_gives_the_same_events_named_or_not():
    # Named content_block_delta events take the short path; the same data with no
    # event name (``message``) takes the long one: both give the same stream.
    events = [start(), block_start(0, {"type": "text", "text": ""}), text(0, "Hi"),
              block_stop(0),
              block_start(1, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
              partial(1, '{"face": "' + HIGH), partial(1, ""), partial(1, LOW + '"}'),
              block_stop(1),
              block_start(2, {"type": "server_tool_use", "id": "srvtoolu_1",
                              "name": "web_search", "input": {}}),
              partial(2, '{"query": "x"}'), block_stop(2), message_delta("tool_use"), STOP]
    named, named_end = run(events)
    unnamed, unnamed_end = run([("message", data) for _, data in events])
    assert named == unnamed and named_end == unnamed_end
    assert [(e.kind, e.text, e.tool.input) for e in named if e.kind is Kind.TOOL_INPUT] == [
        (Kind.TOOL_INPUT, '{"face": "', '{"face": "'),
        (Kind.TOOL_INPUT, EMOJI + '"}', '{"face": "' + EMOJI + '"}')]
    assert named_end.parts[1] == ToolCall("t", "f", '{"face": "' + EMOJI + '"}')
    assert json.loads(named_end.parts[2].data)["input"] == {"query": "x"}  # no TOOL_INPUT


@pytest.mark.parametrize("late", [
    partial(0, '"}'),
    delta(0, type="input_json_delta", partial_json=None),
])
def test_a_piece_of_input_for_a_call_already_closed_is_a_stream_error(late):
    opening = [start(), block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
               partial(0, '{"a": "'), block_stop(0)]
    with pytest.raises(StreamError, match="after it was closed"):
        feed_all(opening + [late])
