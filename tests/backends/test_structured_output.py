"""Structured output on every HTTP backend, through FakeServer: the native request
field in each provider's documented shape, ``agent.run(conv, output=Weather)``
returning a ``Weather``, the validation retry loop, tool mode, tools and output in one
run, a refusal, and an answer cut mid-JSON."""

import json

import pytest

import nacelle
from nacelle import Agent, Kind, Schema, Stop, user_text
from nacelle.backends import anthropic, chat, openrouter
from nacelle.output import FINAL_ANSWER, make_output
from nacelle.output.schema import for_anthropic, for_gemini, for_openai
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream, sse_event

from test_conformance import (
    GeminiFlavour,
    FLAVOURS, AnthropicFlavour, OllamaFlavour, OpenAIFlavour, OpenRouterFlavour,
    ResponsesFlavour, Sent, weather,
)
from test_output import PARIS, WEATHER, Weather

HI = [user_text("What is the weather in Paris?")]
USAGE = Sent(12, 30)


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture(params=FLAVOURS, ids=lambda flavour: flavour.name)
def flavour(request):
    return request.param


def bodies(server):
    return [json.loads(r.body) for r in server.requests]


def format_in(flavour, body):
    """The schema a native request sent, however its wire spells it."""
    if isinstance(flavour, AnthropicFlavour):
        return body["output_config"]["format"]["schema"]
    if isinstance(flavour, ResponsesFlavour):
        return body["text"]["format"]["schema"]
    if isinstance(flavour, GeminiFlavour):
        return body["generationConfig"]["responseJsonSchema"]
    return body["response_format"]["json_schema"]["schema"]


def test_run_returns_a_weather_on_every_backend(server, flavour):
    server.queue(flavour.path, Reply(chunks=flavour.answer([PARIS[:20], PARIS[20:]], USAGE)))
    result = Agent(flavour.backend(server), "You report weather.").run(HI, output=Weather)
    assert result.output == WEATHER and result.stop is Stop.END
    assert result.usage.input_tokens == 12
    schema = format_in(flavour, bodies(server)[0])
    assert schema["type"] == "object" and schema["additionalProperties"] is False


def test_an_invalid_answer_is_retried_through_the_server_on_every_backend(server, flavour):
    server.queue(flavour.path, Reply(chunks=flavour.answer(['{"city": "Paris"}'], USAGE)),
                 Reply(chunks=flavour.answer([PARIS], USAGE)))
    result = Agent(flavour.backend(server), "You report weather.", output=Weather).run(HI)
    assert result.output == WEATHER and result.turns == 2
    second = json.dumps(bodies(server)[1], ensure_ascii=False)
    assert "temp_c" in second and "required" in second


def test_tools_and_output_in_one_run_on_every_backend(server, flavour):
    calls = [("call_weather_0", "weather", '{"city": "Paris"}')]
    server.queue(flavour.path, Reply(chunks=flavour.answer([], USAGE, calls)),
                 Reply(chunks=flavour.answer([PARIS], USAGE)))
    agent = Agent(flavour.backend(server), "You report weather.", tools=[weather],
                  output=Weather)
    events = list(agent.stream(HI))
    assert [e.kind for e in events].count(Kind.TOOL_RESULT) == 1
    assert events[-1].output == WEATHER
    first, second = bodies(server)
    assert format_in(flavour, first) == format_in(flavour, second)
    assert flavour.sent_results(second)[0][1].startswith("15°C")


def test_tool_mode_on_every_backend_never_forces_the_tool(server, flavour):
    calls = [("call_final_0", FINAL_ANSWER, '{"city": "Paris", "temp_c": "warm"}')]
    fixed = [("call_final_1", FINAL_ANSWER, PARIS)]
    server.queue(flavour.path, Reply(chunks=flavour.answer([], USAGE, calls)),
                 Reply(chunks=flavour.answer([], USAGE, fixed)))
    agent = Agent(flavour.backend(server), "You report weather.", output=Weather,
                  output_mode="tool")
    result = agent.run(HI)
    assert result.output == WEATHER and result.stop is Stop.END
    first, second = bodies(server)
    text = json.dumps(first)
    assert FINAL_ANSWER in text and "tool_choice" not in first
    assert "response_format" not in first and "output_config" not in first
    assert "temp_c" in flavour.sent_results(second)[0][1]


# -- each wire's documented shape ------------------------------------------------------

def test_anthropic_sends_output_config_format_beside_the_effort(server):
    server.queue(AnthropicFlavour.path, Reply(chunks=AnthropicFlavour().answer([PARIS], USAGE)))
    backend = anthropic.Backend("k", base_url=server.url)
    agent = Agent(backend, "sys", thinking=nacelle.Thinking(effort=nacelle.Effort.HIGH))
    agent.run(HI, output=Weather)
    [body] = bodies(server)
    assert body["output_config"] == {"effort": "high", "format": {
        "type": "json_schema", "schema": for_anthropic(make_output(Weather).schema)}}
    assert "anthropic-beta" not in server.requests[0].headers


def test_anthropic_models_without_output_format_fall_back_to_the_tool():
    assert anthropic.Backend("k", model="claude-3-5-haiku-latest").capabilities \
        .structured_output is False
    agent = Agent(anthropic.Backend("k", model="claude-sonnet-4-0"), "sys", output=Weather)
    assert agent._output.mode == "tool"
    assert anthropic.Backend("k", model="claude-haiku-4-5").capabilities.structured_output


def test_chat_openai_sends_strict_json_schema_response_format(server):
    server.queue(OpenAIFlavour.path, Reply(chunks=OpenAIFlavour().answer([PARIS], USAGE)))
    Agent(OpenAIFlavour().backend(server), "sys").run(HI, output=Weather)
    [body] = bodies(server)
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "Weather", "schema": for_openai(make_output(Weather).schema), "strict": True}}


def test_a_non_strict_schema_is_sent_as_it_is(server):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    server.queue(OpenAIFlavour.path, Reply(chunks=OpenAIFlavour().answer(['{"n": 2}'], USAGE)))
    result = Agent(OpenAIFlavour().backend(server), "sys").run(
        HI, output=Schema("count", schema, strict=False))
    assert result.output == {"n": 2}
    assert bodies(server)[0]["response_format"]["json_schema"] == {
        "name": "count", "schema": schema, "strict": False}


@pytest.mark.parametrize("preset, form", [
    (chat.llamacpp, "full"), (chat.ollama, "full"), (chat.vllm, "full"),
    (chat.lmstudio, "full")])
def test_local_servers_get_the_full_schema_for_their_grammar(server, preset, form):
    server.queue("/v1/chat/completions",
                 Reply(chunks=OllamaFlavour().answer([PARIS], Sent(3, 4))))
    backend = preset(model="local", base_url=server.url + "/v1")
    assert backend.capabilities.structured_output
    assert Agent(backend, "sys").run(HI, output=Weather).output == WEATHER
    sent = bodies(server)[0]["response_format"]["json_schema"]
    assert sent["schema"] == make_output(Weather).schema and sent["strict"] is True


def test_gemini_gets_its_schema_subset():
    output = make_output(Weather, "native")
    request = nacelle.Request(system="s", output=output)
    body = chat.to_wire(request, HI, model="gemini-2.5-flash", dialect=chat.GEMINI)
    assert body["response_format"]["json_schema"]["schema"] == for_gemini(output.schema)


def test_deepseek_has_no_native_output_so_auto_uses_the_tool():
    backend = chat.deepseek("deepseek-chat", api_key="k")
    assert not backend.capabilities.structured_output
    assert Agent(backend, "sys", output=Weather)._output.mode == "tool"
    with pytest.raises(nacelle.Unsupported, match="DeepSeek|chat"):
        Agent(backend, "sys", output=Weather, output_mode="native")


def test_openrouter_requires_providers_that_honour_the_schema(server):
    flavour = OpenRouterFlavour()
    server.queue(flavour.path, Reply(chunks=flavour.answer([PARIS], USAGE)),
                 Reply(chunks=flavour.answer(["plain"], USAGE)))
    backend = flavour.backend(server, provider={"order": ["openai"]})
    Agent(backend, "sys").run(HI, output=Weather)
    Agent(backend, "sys").run(HI)
    native, plain = bodies(server)
    assert native["provider"] == {"order": ["openai"], "require_parameters": True}
    assert native["response_format"]["json_schema"]["strict"] is True
    assert plain["provider"] == {"order": ["openai"]} and "response_format" not in plain
    request = nacelle.Request(system="s", output=make_output(Weather, "native"))
    assert openrouter.to_wire(request, HI, model="m")["provider"] == {"require_parameters": True}


def test_responses_sends_text_format(server):
    flavour = ResponsesFlavour()
    server.queue(flavour.path, Reply(chunks=flavour.answer([PARIS], USAGE)))
    Agent(flavour.backend(server), "sys").run(HI, output=Weather)
    [body] = bodies(server)
    assert body["text"] == {"format": {
        "type": "json_schema", "name": "Weather",
        "schema": for_openai(make_output(Weather).schema), "strict": True}}


def test_the_responses_body_validates_against_the_vendored_create_response_schema():
    from test_openai_wire import valid

    from nacelle.backends import openai

    request = nacelle.Request(system="s", output=make_output(Weather, "native"))
    valid(openai.to_wire(request, HI, model="gpt-5-mini"))


# -- refusals and truncation -----------------------------------------------------------------

def test_an_anthropic_refusal_ends_the_run_as_a_refusal(server):
    server.queue(AnthropicFlavour.path, Reply(chunks=anthropic_stream(
        ["I can't help with that."], stop_reason="refusal")))
    result = Agent(anthropic.Backend("k", base_url=server.url), "sys").run(HI, output=Weather)
    assert result.stop is Stop.REFUSAL and result.output is None and len(server.requests) == 1


def test_an_openai_refusal_ends_the_run_as_a_refusal(server):
    flavour = OpenAIFlavour()
    chunks = [flavour._chunk({"role": "assistant", "content": None, "refusal": ""}),
              flavour._chunk({"refusal": "I'm sorry, I can't help."}),
              flavour._chunk({}, "stop"), b"data: [DONE]\n\n"]
    server.queue(flavour.path, Reply(chunks=chunks))
    result = Agent(flavour.backend(server), "sys").run(HI, output=Weather)
    assert result.stop is Stop.REFUSAL and result.output is None
    assert result.text == "I'm sorry, I can't help."


def test_an_answer_cut_mid_json_by_max_tokens_is_max_tokens_and_no_value(server):
    server.queue(AnthropicFlavour.path, Reply(chunks=anthropic_stream(
        ['{"city": "Paris", "te'], stop_reason="max_tokens")))
    flavour = OpenAIFlavour()
    server.queue(flavour.path, Reply(chunks=flavour._head(['{"city": "Pa']) + [
        flavour._chunk({}, "length"), b"data: [DONE]\n\n"]))
    for backend in (anthropic.Backend("k", base_url=server.url), flavour.backend(server)):
        result = Agent(backend, "sys").run(HI, output=Weather)
        assert result.stop is Stop.MAX_TOKENS and result.output is None
    assert len(server.requests) == 2


def test_the_streamed_text_can_be_shown_progressively_with_partial_json(server):
    flavour = OpenAIFlavour()
    pieces = [PARIS[i:i + 9] for i in range(0, len(PARIS), 9)]
    server.queue(flavour.path, Reply(chunks=flavour.answer(pieces, USAGE)))
    seen, text = [], ""
    for event in Agent(flavour.backend(server), "sys").stream(HI, output=Weather):
        if event.kind is Kind.TEXT:
            text += event.text
            seen.append(nacelle.partial_json(text))
    assert seen[-1] == json.loads(PARIS)
    assert any(isinstance(v, dict) and v.get("city") == "Paris" and "temp_c" not in v
               for v in seen)


def test_encoded_bodies_with_output_are_byte_for_byte_to_wire():
    from nacelle.backends.anthropic import wire as anthropic_wire
    from nacelle.backends.chat import wire as chat_wire
    from nacelle.backends._wire_cache import WireCache, dumps

    request = nacelle.Request(system="s", output=make_output(Weather, "native"),
                              thinking=nacelle.Thinking(effort=nacelle.Effort.LOW))
    conversation = list(HI)
    anthropic_cache, chat_cache = WireCache(), WireCache()
    for turn in range(3):
        messages = tuple(conversation)
        assert anthropic_wire.encode_body(request, messages, cache=anthropic_cache) == dumps(
            anthropic_wire.to_wire(request, messages))
        assert chat_wire.encode_body(request, messages, model="m", dialect=chat.OPENAI,
                                     cache=chat_cache) == dumps(
            chat_wire.to_wire(request, messages, model="m", dialect=chat.OPENAI))
        conversation += [nacelle.assistant_text(f"answer {turn}"), user_text("again")]


def test_gemini_native_sends_the_json_schema_as_it_is_and_reads_the_answer(server):
    flavour = GeminiFlavour()
    server.queue(flavour.path, Reply(chunks=flavour.answer([PARIS[:20], PARIS[20:]], USAGE)))
    result = Agent(flavour.backend(server), "sys").run(HI, output=Weather)
    assert result.output == WEATHER and result.stop is Stop.END
    [body] = bodies(server)
    assert body["generationConfig"] == {"responseMimeType": "application/json",
                                        "responseJsonSchema": make_output(Weather).schema}


def test_gemini_sends_a_schema_that_is_not_strict_the_same_way():
    from nacelle.backends import gemini

    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
              "required": ["n"], "additionalProperties": False}
    output = make_output(Schema("Count", schema, strict=False), "native")
    body = gemini.to_wire(nacelle.Request(system="s", output=output), HI)
    assert body["generationConfig"] == {"responseMimeType": "application/json",
                                        "responseJsonSchema": schema}
