"""The Gemini accumulator fed ``streamGenerateContent?alt=sse`` bodies: whole, split at
every byte, and one pitfall of the stream per test.

The bodies are built from the API reference's ``GenerateContentResponse``
(https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse: candidates
with ``content.parts``, ``finishReason``, ``usageMetadata``, ``modelVersion``,
``responseId``, ``promptFeedback``) and the google-genai SDK's ``types.Part``
(``text``, ``thought``, ``thoughtSignature``, ``functionCall`` with ``id``, ``name``,
``args``); the signature-carrying shapes follow
https://ai.google.dev/gemini-api/docs/thought-signatures (a signature on the first
function call of a step, and in streaming on a final part with empty text).
"""

import json

import pytest

from nacelle import (
    Kind, Reasoning, Stop, StreamError, StreamTruncated, Text, ToolCall, Usage, retryable,
)
from nacelle.backends.gemini.stream import Accumulator, stop_for, usage_from
from nacelle.messages import ProviderBlock
from nacelle.pricing import Price
from nacelle.sse import SSEDecoder
from nacelle.testing.wire import gemini_stream, sse_event

SIGNATURE = "CiQBjz1rX7tXb0kq3QW8oN2FmB4Ex0q2nYbNfPq0ocJm3u0cWmgKcgGPPWtf"
USAGE = {"promptTokenCount": 1300, "candidatesTokenCount": 120, "cachedContentTokenCount": 1024,
         "thoughtsTokenCount": 96, "toolUsePromptTokenCount": 4, "totalTokenCount": 1520}


def chunk(*parts, reason=None, usage=None, **extra):
    candidate = {"content": {"parts": list(parts), "role": "model"}, "index": 0}
    if reason:
        candidate["finishReason"] = reason
    body = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash",
            "responseId": "9PZCafrTOoGqz7IPjdiB4Ak", **extra}
    if usage is not None:
        body["usageMetadata"] = usage
    return body


def run(*chunks, accumulator=None):
    accumulator = accumulator or Accumulator(new_id=iter(f"call_made_{n}" for n in range(9)).__next__)
    events = []
    for value in chunks:
        events += accumulator.feed_chunk(value)
    return events, accumulator.finish()


def replay(body, size=None, accumulator=None):
    """``body`` (bytes) through the SSE decoder, fed ``size`` bytes at a time."""
    accumulator = accumulator or Accumulator(new_id=iter(f"call_made_{n}" for n in range(9)).__next__)
    decoder = SSEDecoder()
    events = []
    pieces = [body] if size is None else [body[i:i + size] for i in range(0, len(body), size)]
    for piece in pieces:
        for sse in decoder.feed(piece):
            events += accumulator.feed(sse)
    for sse in decoder.close():
        events += accumulator.feed(sse)
    return events, accumulator.finish()


THINKING_TOOL_TURN = b"".join(gemini_stream(
    ["Checking ", "the weather."], thinking_deltas=["The user wants ", "Berlin's weather."],
    signature=SIGNATURE, tool_calls=[("", "weather", '{"city": "Berlin"}'),
                                     ("", "clock", "{}")],
    usage={"input_tokens": 40, "output_tokens": 20, "thoughts_tokens": 33}))


def shown(events):
    return [(e.kind, e.text if e.kind is not Kind.TOOL_CALL else e.tool.id) for e in events]


def test_a_thinking_tool_turn_reads_the_same_whole_and_split_at_every_byte():
    whole_events, whole_end = replay(THINKING_TOOL_TURN)
    assert shown(whole_events) == [
        (Kind.THINKING, "The user wants "), (Kind.THINKING, "Berlin's weather."),
        (Kind.TEXT, "Checking "), (Kind.TEXT, "the weather."),
        (Kind.TOOL_INPUT, '{"city": "Berlin"}'), (Kind.TOOL_CALL, "call_made_0"),
        (Kind.TOOL_INPUT, "{}"), (Kind.TOOL_CALL, "call_made_1")]
    assert whole_end.parts == (
        Reasoning("The user wants Berlin's weather.", SIGNATURE, "gemini"),
        Text("Checking the weather."),
        ToolCall("call_made_0", "weather", '{"city": "Berlin"}'),
        ToolCall("call_made_1", "clock", "{}"))
    assert whole_end.stop is Stop.TOOLS
    assert whole_end.usage == Usage(40, 53, reasoning_tokens=33)
    for size in range(1, 64):
        events, end = replay(THINKING_TOOL_TURN, size)
        assert (shown(events), end) == (shown(whole_events), whole_end), size


def test_every_byte_of_a_body_is_a_split_point_once():
    body = b"".join(gemini_stream(["Grüße 🚀", " aus Berlin."]))
    whole = replay(body)
    for cut in range(1, len(body)):
        accumulator = Accumulator()
        decoder = SSEDecoder()
        events = []
        for piece in (body[:cut], body[cut:]):
            for sse in decoder.feed(piece):
                events += accumulator.feed(sse)
        assert (events, accumulator.finish()) == whole, cut


def test_a_call_comes_as_one_tool_input_holding_its_whole_args_then_its_tool_call():
    events, end = run(chunk({"functionCall": {"id": "fc-7", "name": "weather",
                                              "args": {"city": "Zürich", "days": [1, 2]}}},
                            reason="STOP"))
    assert [e.kind for e in events] == [Kind.TOOL_INPUT, Kind.TOOL_CALL]
    given, call = events
    assert given.text == given.tool.input == '{"city": "Zürich", "days": [1, 2]}'
    assert (call.tool.id, call.tool.name, call.tool.input, call.tool.server) == (
        "fc-7", "weather", given.text, "")
    assert end.parts == (ToolCall("fc-7", "weather", given.text),)


def test_a_call_without_an_id_gets_one_that_its_tool_call_and_the_message_share():
    events, end = run(chunk({"functionCall": {"name": "clock"}}, reason="STOP"))
    assert events[-1].tool.id == end.parts[0].id == "call_made_0"
    assert end.parts[0].input == "{}"
    made = Accumulator()
    made.feed_chunk(chunk({"functionCall": {"name": "clock"}}, reason="STOP"))
    [part] = made.finish().parts
    assert part.id.startswith("call_") and len(part.id) == len("call_") + 16


def test_a_signature_on_a_function_call_is_kept_for_that_call():
    _, end = run(chunk({"functionCall": {"name": "weather", "args": {}},
                        "thoughtSignature": SIGNATURE},
                       {"functionCall": {"name": "clock", "args": {}}}, reason="STOP"))
    assert end.parts == (
        ToolCall("call_made_0", "weather", "{}"),
        ProviderBlock("gemini", json.dumps({"thoughtSignature": SIGNATURE, "call": "call_made_0"},
                                           separators=(",", ":"))),
        ToolCall("call_made_1", "clock", "{}"))


def test_a_signature_on_a_last_empty_text_part_stays_with_the_text_before_it():
    _, end = run(chunk({"text": "The answer"}), chunk({"text": " is 4."}),
                 chunk({"text": "", "thoughtSignature": SIGNATURE}, reason="STOP"))
    assert end.parts == (Text("The answer is 4."),
                         ProviderBlock("gemini", json.dumps({"thoughtSignature": SIGNATURE},
                                                            separators=(",", ":"))))


def test_a_signature_closes_its_part_so_the_next_text_is_a_part_of_its_own():
    _, end = run(chunk({"text": "One.", "thoughtSignature": "s1"}),
                 chunk({"text": "Two.", "thoughtSignature": "s2"}, reason="STOP"))
    assert [type(p).__name__ for p in end.parts] == ["Text", "ProviderBlock", "Text",
                                                      "ProviderBlock"]


def test_parts_nacelle_does_not_model_are_kept_whole_in_order():
    code = {"executableCode": {"language": "PYTHON", "code": "print(2 + 2)"}}
    result = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}}
    _, end = run(chunk({"text": "Let me run it."}, code, result, {"text": "It is 4."},
                       reason="STOP"))
    assert end.parts == (Text("Let me run it."),
                         ProviderBlock("gemini", json.dumps({"part": code}, separators=(",", ":"))),
                         ProviderBlock("gemini", json.dumps({"part": result},
                                                            separators=(",", ":"))),
                         Text("It is 4."))


def test_usage_means_what_it_means_on_every_backend():
    # promptTokenCount counts the cached part; thoughts are output beside candidates.
    assert usage_from(USAGE) == Usage(input_tokens=1300 + 4 - 1024, output_tokens=120 + 96,
                                      cache_read_tokens=1024, reasoning_tokens=96)
    assert usage_from({}) == Usage()


def test_the_last_usage_metadata_is_the_turns_and_a_price_fills_its_cost():
    price = Price(0.3, 2.5, 0.03)
    _, end = run(chunk({"text": "Hi"}, usage={"promptTokenCount": 10}),
                 chunk({"text": "."}, reason="STOP", usage=USAGE),
                 accumulator=Accumulator(price=price.priced))
    assert end.usage == price.priced(usage_from(USAGE))
    assert end.usage.priced and end.usage.cost > 0


@pytest.mark.parametrize("reason, stop", [
    ("STOP", Stop.END), ("MAX_TOKENS", Stop.MAX_TOKENS), ("SAFETY", Stop.REFUSAL),
    ("RECITATION", Stop.REFUSAL), ("PROHIBITED_CONTENT", Stop.REFUSAL),
    ("BLOCKLIST", Stop.REFUSAL), ("SPII", Stop.REFUSAL), ("IMAGE_SAFETY", Stop.REFUSAL),
    ("MALFORMED_FUNCTION_CALL", Stop.OTHER), ("OTHER", Stop.OTHER), ("LANGUAGE", Stop.OTHER),
])
def test_each_finish_reason_is_its_stop(reason, stop):
    _, end = run(chunk({"text": "…"}, reason=reason))
    assert end.stop is stop
    assert stop_for(reason, calls=False) is stop


def test_a_safety_block_mid_answer_keeps_the_text_shown_and_is_a_refusal():
    events, end = run(chunk({"text": "Here is how"}),
                      chunk(reason="SAFETY", safetyRatings=[]))
    assert [e.text for e in events] == ["Here is how"]
    assert (end.parts, end.stop) == ((Text("Here is how"),), Stop.REFUSAL)


def test_a_blocked_prompt_ends_the_turn_as_a_refusal_with_nothing_said():
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
               "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
               "modelVersion": "gemini-2.5-flash"}
    accumulator = Accumulator()
    assert accumulator.feed_chunk(blocked) == []
    assert accumulator.done
    end = accumulator.finish()
    assert (end.parts, end.stop, end.usage.input_tokens) == ((), Stop.REFUSAL, 12)


def test_a_body_that_ends_before_a_finish_reason_is_truncated():
    accumulator = Accumulator()
    accumulator.feed_chunk(chunk({"text": "Half"}))
    with pytest.raises(StreamTruncated):
        accumulator.finish()


def test_an_in_band_error_is_a_stream_error_retryable_by_its_code_or_status():
    busy = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    quota = {"error": {"code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED",
                       "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                    "retryDelay": "17s"}]}}
    bad = {"error": {"code": 400, "message": "Invalid argument.", "status": "INVALID_ARGUMENT"}}
    for value, again in ((busy, True), (quota, True), (bad, False)):
        with pytest.raises(StreamError) as caught:
            Accumulator().feed_chunk(value)
        assert retryable(caught.value) is again
        assert caught.value.code == value["error"]["code"]
        assert caught.value.type == value["error"]["status"]
        assert value["error"]["message"] in str(caught.value)
    with pytest.raises(StreamError) as caught:
        Accumulator().feed_chunk(quota)
    assert caught.value.retry_after == 17.0


def test_an_echoed_key_is_scrubbed_from_an_in_band_error():
    key = "AIzaSyD-SECRET-KEY-0000"
    accumulator = Accumulator(scrub=lambda text: text.replace(key, "<hidden>"))
    with pytest.raises(StreamError) as caught:
        accumulator.feed_chunk({"error": {"code": 400, "message": f"API key {key} not valid",
                                          "status": "INVALID_ARGUMENT"}})
    assert key not in str(caught.value)


@pytest.mark.parametrize("value, said", [
    ([1, 2], "not a JSON object"),
    (chunk({"text": 7}), "text is not a string"),
    (chunk({"functionCall": {"args": {}}}), "without a name"),
    (chunk({"functionCall": {"name": "f", "args": [1]}}), "args is not an object"),
    (chunk({"functionCall": {"name": "f", "id": 5}}), "id is not a string"),
    (chunk({"text": "x", "thoughtSignature": 5}), "thoughtSignature"),
    (chunk("a part that is a string"), "part that is not a JSON object"),
])
def test_a_chunk_whose_structure_is_wrong_is_a_stream_error_naming_it(value, said):
    with pytest.raises(StreamError, match=said):
        Accumulator().feed_chunk(value)


def test_a_data_line_that_is_not_json_or_nests_too_deep_is_a_stream_error():
    decoder = SSEDecoder()
    [sse] = decoder.feed(b"data: {not json\n\n")
    with pytest.raises(StreamError, match="not JSON"):
        Accumulator().feed(sse)
    deep = {"name": "weather", "args": {"city": json.loads("[" * 200 + "]" * 200)}}
    [sse] = decoder.feed(sse_event(chunk({"functionCall": deep})))
    with pytest.raises(StreamError, match="nested deeper"):
        Accumulator().feed(sse)


def test_half_a_surrogate_pair_at_the_end_of_a_text_becomes_a_replacement_character():
    events, end = run(chunk({"text": "Hi \ud83d"}), chunk({"text": "\ude80!"}),
                      chunk({"text": " \ud83d"}, reason="STOP"))
    assert "".join(e.text for e in events) == "Hi 🚀! \ufffd"
    assert end.parts == (Text("Hi 🚀! \ufffd"),)


def test_the_response_id_and_model_version_are_kept_for_observers():
    accumulator = Accumulator()
    accumulator.feed_chunk(chunk({"text": "x"}, reason="STOP"))
    assert (accumulator.response_id, accumulator.response_model) == (
        "9PZCafrTOoGqz7IPjdiB4Ak", "gemini-2.5-flash")
    assert accumulator.abandon() == []


# -- the provider's own tools ------------------------------------------------------------

CODE = {"executableCode": {"language": "PYTHON", "code": "print(2 ** 10)"}}


def test_code_the_model_runs_is_a_server_side_call_closed_by_its_result():
    events, end = run(chunk({"text": "Computing."}), chunk(CODE),
                      chunk({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1024\n"}}),
                      chunk({"text": "It is 1024."}, reason="STOP"))
    calls = [e.tool for e in events if e.kind is Kind.TOOL_CALL]
    results = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert [(c.id, c.name, c.server, json.loads(c.input)) for c in calls] == [
        ("call_made_0", "code_execution", "gemini", CODE["executableCode"])]
    assert [(r.id, r.index, r.result, r.error) for r in results] == [
        ("call_made_0", 0, "1024\n", None)]
    assert end.stop is Stop.END  # a server-side call is not a local one
    assert [type(p).__name__ for p in end.parts] == ["Text", "ProviderBlock", "ProviderBlock",
                                                      "Text"]


def test_a_failed_run_is_a_failed_result_and_one_never_answered_is_closed_at_the_end():
    events, _ = run(chunk(CODE), chunk({"codeExecutionResult": {
        "outcome": "OUTCOME_FAILED", "output": "ZeroDivisionError"}}), chunk(CODE),
        chunk({"text": "Done."}, reason="STOP"))
    results = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert [(r.id, r.error) for r in results] == [
        ("call_made_0", "ZeroDivisionError"),
        ("call_made_1", "Gemini ended the turn without a result for this code execution")]


def test_a_stream_that_fails_closes_the_code_execution_it_announced():
    accumulator = Accumulator()
    [call] = accumulator.feed_chunk(chunk(CODE))
    [closed] = accumulator.abandon()
    assert (closed.kind, closed.tool.id, closed.tool.server) == (Kind.TOOL_RESULT,
                                                                 call.tool.id, "gemini")
    assert closed.tool.error and accumulator.abandon() == []


def test_search_grounding_becomes_the_last_texts_citations():
    grounding = {
        "webSearchQueries": ["uefa euro 2024 winner"],
        "groundingChunks": [{"web": {"uri": "https://vertexaisearch.cloud.google.com/a",
                                     "title": "uefa.com"}},
                            {"web": {"uri": "https://vertexaisearch.cloud.google.com/b",
                                     "title": "aljazeera.com"}},
                            {"web": {"uri": "https://vertexaisearch.cloud.google.com/c",
                                     "title": "bbc.co.uk"}}],
        "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 26,
                                           "text": "Spain won Euro 2024."},
                               "groundingChunkIndices": [0, 1]}]}
    # The metadata comes on the candidate of the last chunk, with the finishReason.
    _, end = run(chunk({"text": "Spain won Euro 2024."}),
                 {"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"},
                                  "index": 0, "finishReason": "STOP",
                                  "groundingMetadata": grounding}]})
    [text] = end.parts
    assert [(c.url, c.title, c.cited_text) for c in text.citations] == [
        ("https://vertexaisearch.cloud.google.com/a", "uefa.com", "Spain won Euro 2024."),
        ("https://vertexaisearch.cloud.google.com/b", "aljazeera.com", "Spain won Euro 2024."),
        ("https://vertexaisearch.cloud.google.com/c", "bbc.co.uk", "")]
    assert json.loads(text.citations[0].state)["groundingChunkIndices"] == [0, 1]
