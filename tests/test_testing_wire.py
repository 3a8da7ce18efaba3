"""The wire-format builders produce the streams the references describe, decodable by
nacelle's own decoder and servable by FakeServer."""

import json

import pytest

from nacelle.backend import RunContext
from nacelle.backends._http import Transport
from nacelle.sse import SSEDecoder
from nacelle.testing import (
    FakeServer, Reply, anthropic_stream, openrouter_stream, rechunk, responses_stream, sse_event,
)
from nacelle.testing.wire import anthropic_error, fragments


def events_of(chunks):
    decoder = SSEDecoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)]
    decoder.close()
    assert not decoder.truncated
    return events


def anthropic_payloads(chunks):
    events = events_of(chunks)
    payloads = [json.loads(e.data) for e in events]
    for event, payload in zip(events, payloads):
        assert event.event == payload["type"]  # the event name equals data.type
    return payloads


def test_anthropic_stream_has_the_documented_event_order():
    types = [p["type"] for p in anthropic_payloads(anthropic_stream(["Hel", "lo"], pings=False))]
    assert types == ["message_start", "content_block_start", "content_block_delta",
                     "content_block_delta", "content_block_stop", "message_delta", "message_stop"]


def test_anthropic_stream_carries_text_thinking_signature_and_tool_input():
    payloads = anthropic_payloads(anthropic_stream(
        ["Hel", "lo"], thinking_deltas=["Let me", " think"], signature="sig",
        tool_calls=[("toolu_1", "get_weather", '{"city": "Paris", "unit": "c"}'),
                    ("toolu_2", "noop", "")]))
    starts = [p["content_block"] for p in payloads if p["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["thinking", "text", "tool_use", "tool_use"]
    deltas = {}
    for p in payloads:
        if p["type"] == "content_block_delta":
            deltas.setdefault(p["index"], []).append(p["delta"])
    assert [d["thinking"] for d in deltas[0][:-1]] == ["Let me", " think"]
    assert deltas[0][-1] == {"type": "signature_delta", "signature": "sig"}
    assert "".join(d["text"] for d in deltas[1]) == "Hello"
    tool_input = [d["partial_json"] for d in deltas[2]]
    assert tool_input[0] == "" and len(tool_input) > 3
    assert json.loads("".join(tool_input)) == {"city": "Paris", "unit": "c"}
    assert [d["partial_json"] for d in deltas[3]] == [""]
    assert payloads[-2]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_stream_has_pings_and_cumulative_usage():
    payloads = anthropic_payloads(anthropic_stream(usage={"input_tokens": 100, "output_tokens": 40,
                                                          "cache_read_input_tokens": 7}))
    assert sum(p["type"] == "ping" for p in payloads) == 2
    assert payloads[0]["message"]["usage"]["input_tokens"] == 100
    assert payloads[0]["message"]["usage"]["output_tokens"] == 1
    assert payloads[-2]["usage"] == {"input_tokens": 100, "output_tokens": 40,
                                     "cache_read_input_tokens": 7, "cache_creation_input_tokens": 0}
    assert payloads[-2]["delta"]["stop_reason"] == "end_turn"


def test_anthropic_in_band_error_ends_the_stream_without_message_stop():
    payloads = anthropic_payloads(anthropic_stream(error=("overloaded_error", "Overloaded")))
    assert payloads[-1] == {"type": "error", "error": {"type": "overloaded_error",
                                                       "message": "Overloaded"}}
    assert not {"message_delta", "message_stop"} & {p["type"] for p in payloads}
    assert anthropic_error() == (b'event: error\ndata: {"type":"error","error":'
                                 b'{"type":"overloaded_error","message":"Overloaded"}}\n\n')


def test_anthropic_stream_can_be_cut_before_message_stop():
    assert anthropic_payloads(anthropic_stream(message_stop=False))[-1]["type"] == "message_delta"


def test_anthropic_server_blocks_are_sent_whole_with_streamed_input():
    payloads = anthropic_payloads(anthropic_stream([], server_blocks=[
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
         "input": {"query": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}]))
    types = [(p["type"], p.get("index")) for p in payloads if p["type"] != "ping"]
    assert types[1:6] == [("content_block_start", 0), ("content_block_delta", 0),
                          ("content_block_stop", 0), ("content_block_start", 1),
                          ("content_block_stop", 1)]
    assert payloads[2]["content_block"]["input"] == {}


def openrouter_chunks(chunks):
    events = events_of(chunks)
    assert events[-1].data == "[DONE]"
    return [json.loads(e.data) for e in events[:-1]]


def test_openrouter_stream_opens_with_keepalive_comments_and_ends_with_done():
    chunks = openrouter_stream(["Hi"], keepalives=3)
    assert chunks[:3] == [b": OPENROUTER PROCESSING\n\n"] * 3
    assert chunks[-1] == b"data: [DONE]\n\n"
    assert b": OPENROUTER PROCESSING\n\n" in chunks[4:]


def test_openrouter_stream_carries_content_reasoning_and_tool_fragments():
    parsed = openrouter_chunks(openrouter_stream(
        ["Hel", "lo"], reasoning_deltas=["The user", " asks"], reasoning_signature="sig",
        tool_calls=[("toolu_1", "get_weather", '{"city": "Berlin"}'), ("toolu_2", "noop", "")]))
    deltas = [c["choices"][0]["delta"] for c in parsed if c["choices"]]
    assert all(d["role"] == "assistant" for d in deltas)
    assert "".join(d.get("reasoning") or "" for d in deltas) == "The user asks"
    details = [x for d in deltas for x in d.get("reasoning_details", [])]
    assert details[-1]["signature"] == "sig" and "text" not in details[-1]
    assert "".join(d.get("content") or "" for d in deltas) == "Hello"
    arguments = {}
    for d in deltas:
        for call in d.get("tool_calls", []):
            arguments.setdefault(call["index"], []).append(call["function"]["arguments"])
    assert json.loads("".join(arguments[0])) == {"city": "Berlin"}
    assert arguments[1] == [""]
    first_fragments = [d["tool_calls"][0] for d in deltas if d.get("tool_calls")]
    assert first_fragments[0]["id"] == "toolu_1" and "id" not in first_fragments[1]


def test_openrouter_finish_is_repeated_with_the_usage_by_default():
    parsed = openrouter_chunks(openrouter_stream(usage={"prompt_tokens": 5}))
    finishes = [c["choices"][0]["finish_reason"] for c in parsed if c["choices"][0]["finish_reason"]]
    assert finishes == ["stop", "stop"]
    assert parsed[-1]["usage"] == {"prompt_tokens": 5} and "usage" not in parsed[-2]


def test_openrouter_usage_can_come_with_empty_choices_or_not_at_all():
    assert openrouter_chunks(openrouter_stream(usage_chunk="empty"))[-1]["choices"] == []
    assert all("usage" not in c for c in openrouter_chunks(openrouter_stream(usage_chunk="none")))
    with pytest.raises(ValueError, match="usage_chunk must be"):
        openrouter_stream(usage_chunk="twice")


def test_openrouter_in_band_error_has_a_numeric_code_and_no_done():
    events = events_of(openrouter_stream(error=(429, "Rate limit exceeded")))
    last = json.loads(events[-1].data)
    assert last["error"]["code"] == 429 and last["error"]["message"] == "Rate limit exceeded"
    assert last["choices"][0]["finish_reason"] == "error"
    assert all(e.data != "[DONE]" for e in events)


def test_openrouter_tool_calls_finish_with_tool_calls():
    parsed = openrouter_chunks(openrouter_stream([], tool_calls=[("c", "f", "{}")]))
    assert parsed[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_sse_event_frames_multi_line_text_and_json():
    assert sse_event("a\nb", event="e") == b"event: e\ndata: a\ndata: b\n\n"
    assert sse_event({"t": "é"}) == 'data: {"t":"é"}\n\n'.encode()


def test_rechunk_keeps_the_bytes_and_cuts_at_the_size():
    chunks = anthropic_stream()
    pieces = rechunk(chunks, 5)
    assert b"".join(pieces) == b"".join(chunks)
    assert {len(p) for p in pieces[:-1]} == {5}
    with pytest.raises(ValueError):
        rechunk(chunks, 0)


def test_fragments_cut_mid_token():
    assert fragments('{"city": "Paris"}', 5) == ['{"cit', 'y": "', 'Paris', '"}']
    assert fragments("") == [""]


@pytest.mark.parametrize("mode", ["chunked", "close", "length"])
def test_builder_streams_travel_through_fake_server_and_the_transport(monkeypatch, mode):
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    chunks = openrouter_stream(["héllo ", "wörld"], tool_calls=[("c", "f", '{"a": "日本"}')])
    with FakeServer() as server:
        server.queue("/chat/completions", Reply(chunks=rechunk(chunks, 7), mode=mode))
        transport = Transport(server.url, {"Authorization": "Bearer k"}, name="openrouter")
        ctx = RunContext()
        response = transport.post_stream("/chat/completions", {}, ctx)
        received = list(transport.events(response, ctx))
    assert received == events_of(chunks)


# -- OpenAI Responses -------------------------------------------------------------------

def responses_events(chunks):
    events = events_of(chunks)
    payloads = [json.loads(e.data) for e in events]
    for event, payload in zip(events, payloads):
        assert event.event == payload["type"]  # the event line repeats the type
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    return payloads


def test_responses_stream_has_the_documented_event_order_for_text_and_a_call():
    payloads = responses_events(responses_stream(
        ["Hel", "lo"], tool_calls=[("call_1", "get_weather", '{"city": "Berlin"}')]))
    types = [p["type"] for p in payloads]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[2:9] == [
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done"]
    arguments = [p["delta"] for p in payloads
                 if p["type"] == "response.function_call_arguments.delta"]
    assert len(arguments) > 1 and "".join(arguments) == '{"city": "Berlin"}'
    assert types[-3:] == ["response.function_call_arguments.done", "response.output_item.done",
                          "response.completed"]
    final = payloads[-1]["response"]
    assert [i["type"] for i in final["output"]] == ["message", "function_call"]
    assert final["output"][1]["arguments"] == '{"city": "Berlin"}'


def test_responses_stream_read_by_the_accumulator_gives_text_tool_input_and_the_call():
    from nacelle import Kind, Stop, ToolCall
    from nacelle.backends.openai.stream import Accumulator

    accumulator, events = Accumulator(), []
    for event in events_of(responses_stream(["Hi"], tool_calls=[("call_1", "f", '{"a": 1}')],
                                            usage={"input_tokens": 5, "cached_tokens": 3})):
        events += accumulator.feed(event)
    end = accumulator.finish()
    assert [e.kind for e in events] == [Kind.TEXT, Kind.TOOL_INPUT, Kind.TOOL_INPUT,
                                        Kind.TOOL_CALL]
    assert end.parts[1] == ToolCall("call_1", "f", '{"a": 1}') and end.stop is Stop.TOOLS
    assert (end.usage.input_tokens, end.usage.cache_read_tokens) == (5, 3)


def test_responses_stream_cut_by_the_output_limit_leaves_the_last_call_unfinished():
    from nacelle import Stop
    from nacelle.backends.openai.stream import Accumulator

    accumulator = Accumulator()
    for event in events_of(responses_stream(
            [], tool_calls=[("call_1", "f", '{"text": "a long one"}')],
            incomplete="max_output_tokens")):
        accumulator.feed(event)
    end = accumulator.finish()
    assert end.stop is Stop.MAX_TOKENS and end.parts[0].finished is False


def test_every_builders_tool_call_reaches_an_agent_as_tool_input_then_the_call():
    import nacelle
    from nacelle import Agent, Kind, user_text
    from nacelle.backends import anthropic, openai, openrouter

    @nacelle.tool
    def write(path: str, text: str) -> str:
        """Write a file.

        Args:
            path: Where.
            text: What.
        """
        return "written"

    arguments = '{"path": "notes.md", "text": "# Notes\\n\\nThe first point."}'
    calls = [("call_1", "write", arguments)]
    with FakeServer() as server:
        wires = [
            (anthropic.Backend("k", base_url=server.url), "/v1/messages", anthropic_stream),
            (openrouter.Backend(api_key="k", model="m", base_url=server.url + "/api/v1"),
             "/api/v1/chat/completions", openrouter_stream),
            (openai.Backend("k", model="m", base_url=server.url + "/v1"), "/v1/responses",
             responses_stream),
        ]
        for backend, path, build in wires:
            server.queue(path, Reply(chunks=build((), tool_calls=calls)),
                         Reply(chunks=build(("Done.",))))
            events = list(Agent(backend, "sys", tools=[write]).stream([user_text("Write.")]))
            kinds = [e.kind for e in events]
            streamed = [e for e in events if e.kind is Kind.TOOL_INPUT]
            assert len(streamed) > 3 and "".join(e.text for e in streamed) == arguments
            assert streamed[-1].tool.input == arguments
            last_input = len(kinds) - 1 - kinds[::-1].index(Kind.TOOL_INPUT)
            assert last_input < kinds.index(Kind.TOOL_CALL)
            assert [e.tool.result for e in events if e.kind is Kind.TOOL_RESULT] == ["written"]
        server.assert_consumed()


def test_anthropic_stream_carries_citations_and_the_context_edits_applied():
    cited = {"type": "web_search_result_location", "url": "https://example.org",
             "title": "Example", "cited_text": "x", "encrypted_index": "Eo8B"}
    applied = {"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2,
                                  "cleared_input_tokens": 900}]}
    payloads = anthropic_payloads(anthropic_stream(["Hi"], citations=[cited],
                                                   context_management=applied))
    deltas = [p["delta"] for p in payloads if p["type"] == "content_block_delta"]
    assert deltas[0] == {"type": "citations_delta", "citation": cited}
    assert deltas[1]["type"] == "text_delta"
    ending = next(p for p in payloads if p["type"] == "message_delta")
    assert ending["context_management"] == applied


def test_responses_stream_sends_hosted_items_first_and_the_texts_annotations():
    searched = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    note = {"type": "url_citation", "url": "https://example.org", "title": "Example",
            "start_index": 0, "end_index": 2}
    payloads = [json.loads(e.data) for e in events_of(
        responses_stream(["Hi"], hosted=[searched], annotations=[note]))]
    added = [p for p in payloads if p["type"] == "response.output_item.added"]
    assert added[0]["item"] == searched and added[1]["output_index"] == 1
    assert [p["annotation"] for p in payloads
            if p["type"] == "response.output_text.annotation.added"] == [note]
    done = [p for p in payloads if p["type"] == "response.output_item.done"][-1]
    assert done["item"]["content"][0]["annotations"] == [note]
    final = payloads[-1]["response"]["output"]
    assert [item["type"] for item in final] == ["web_search_call", "message"]
