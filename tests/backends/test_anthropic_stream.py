"""The Anthropic accumulator, fed decoded events as plain dicts."""

import json

import pytest

from nacelle.backends.anthropic_stream import Accumulator, Pricing
from nacelle.errors import ConfigError, StreamError, StreamTruncated, retryable
from nacelle.events import Event, Kind, Stop, ToolEvent, Usage
from nacelle.messages import ProviderBlock, Reasoning, Text, ToolCall


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
        out.extend(acc.feed(name, data))
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
    assert events == []  # local calls are announced by the loop, not the backend
    assert end.parts == (ToolCall("toolu_1", "get_weather", '{"city": "Paris", "unit": "c"}'),)
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
    assert events == [Event(Kind.TEXT, text="Writing.")]
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
        acc.feed(name, data)
    assert acc.feed(*text(0, "late")) == []
    assert acc.stopped


def test_the_event_type_is_taken_from_the_data_when_the_sse_event_has_no_name():
    acc = Accumulator()
    acc.feed("message", start()[1])
    acc.feed("message", block_start(0, {"type": "text", "text": ""})[1])
    assert acc.feed("message", text(0, "x")[1]) == [Event(Kind.TEXT, text="x")]


def test_a_delta_for_a_block_never_started_is_a_stream_error():
    acc = Accumulator()
    acc.feed(*start())
    with pytest.raises(StreamError, match="never started"):
        acc.feed(*text(3, "x"))


def test_a_block_started_twice_is_a_stream_error():
    acc = Accumulator()
    acc.feed(*start())
    acc.feed(*block_start(0, {"type": "text", "text": ""}))
    with pytest.raises(StreamError, match="twice"):
        acc.feed(*block_start(0, {"type": "text", "text": ""}))


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


def test_without_pricing_the_cost_is_zero():
    _, end = run([start(input_tokens=1000), message_delta("end_turn"), STOP])
    assert end.usage.cost == 0.0


@pytest.mark.parametrize("bad", [-1, "5", None, True])
def test_pricing_refuses_what_is_not_a_non_negative_number(bad):
    with pytest.raises(ConfigError, match="Pricing.input"):
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
    acc.feed(*start())
    with pytest.raises(StreamError) as caught:
        acc.feed("error", {"type": "error", "error": {"type": kind, "message": "Overloaded",
                                                      "details": None},
                           "request_id": "req_011"})
    assert caught.value.type == kind and retryable(caught.value)
    assert str(caught.value) == f"Anthropic stream error {kind}: Overloaded (request id req_011)"
    assert not isinstance(caught.value, StreamTruncated)


def test_an_invalid_request_error_event_is_not_retryable():
    with pytest.raises(StreamError) as caught:
        Accumulator().feed("error", {"type": "error", "error": {
            "type": "invalid_request_error", "message": "bad"}})
    assert caught.value.type == "invalid_request_error" and not retryable(caught.value)


def test_a_stream_that_ends_before_message_stop_is_truncated():
    acc = Accumulator()
    for name, data in [start(), block_start(0, {"type": "text", "text": ""}), text(0, "Hal"),
                       message_delta("end_turn")]:
        acc.feed(name, data)
    with pytest.raises(StreamTruncated, match="message_stop"):
        acc.finish()


def test_an_empty_stream_is_truncated():
    with pytest.raises(StreamTruncated):
        Accumulator().finish()
