"""The OpenAI Responses backend against a real loopback server, replaying the bodies in
``tests/data/openai_responses`` (recorded ones and ones written in the documented
shape: its README says which)."""

import json
import logging
import pickle
import threading
import time
from pathlib import Path

import pytest

import nacelle
from nacelle import (
    Agent, APIError, ConfigError, Effort, Image, Kind, Message, Reasoning, Request, Retry,
    RetryOptions, Role, RunContext, Stop, StreamError, Text, Thinking, ToolCall, Unsupported,
    retryable, user_text,
)
from nacelle.backend import TurnEnd
from nacelle.backends import openai
from nacelle.pricing import Price, price_for
from nacelle.testing import FakeServer, Reply, sse_event

from hostile import EMOJI, HIGH, LOW, assert_well_formed, chain

DATA = Path(__file__).resolve().parent.parent / "data" / "openai_responses"
KEY = "sk-proj-RESPONSES-0123456789-SECRET"
PATH = "/v1/responses"


def body(name):
    return (DATA / name).read_bytes()


def recorded(name, stall=None):
    """A reply of one body, one chunk per SSE event (``stall``: seconds before the
    second event)."""
    pieces = [piece + b"\n\n" for piece in body(name).split(b"\n\n") if piece]
    if stall is not None:
        pieces[1] = (pieces[1], stall)
    return Reply(chunks=pieces)


def done_item(name, kind):
    """The item of ``kind`` from a recording's ``response.output_item.done``."""
    for line in body(name).decode("utf-8").splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            if event["type"] == "response.output_item.done" and event["item"]["type"] == kind:
                return event["item"]
    raise AssertionError(f"no {kind} item in {name}")


def compact(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def server():
    with FakeServer() as running:
        yield running


def make(server, **options):
    options.setdefault("api_key", KEY)
    options.setdefault("model", "gpt-5.5")
    return openai.Backend(base_url=server.url + "/v1", **options)


def one_turn(backend, request=None, messages=None, ctx=None):
    request = request or Request("Be brief.")
    messages = messages if messages is not None else (user_text("Hi"),)
    items = list(backend.turn(request, tuple(messages), ctx or RunContext()))
    assert isinstance(items[-1], TurnEnd)
    return items[:-1], items[-1]



def test_an_emoji_split_into_surrogate_halves_over_two_deltas_arrives_whole(server):
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "face"}

    def event(kind, **fields):
        return sse_event({"type": kind, **fields})

    def delta(kind, index, text):
        return event(kind, output_index=index, delta=text)

    server.queue(PATH, Reply(chunks=[
        event("response.created", response={"id": "resp_1", "model": "gpt-5.5"}),
        event("response.output_item.added", output_index=0, item=reasoning),
        delta("response.reasoning_summary_text.delta", 0, "hm " + HIGH),
        delta("response.reasoning_summary_text.delta", 0, LOW),
        event("response.output_item.done", output_index=0, item=reasoning),
        event("response.output_item.added", output_index=1, item=message),
        delta("response.output_text.delta", 1, "Hi " + HIGH),
        delta("response.output_text.delta", 1, LOW + "!"),
        delta("response.output_text.delta", 1, HIGH),  # the item ends before its partner
        event("response.output_item.done", output_index=1, item=message),
        event("response.output_item.added", output_index=2, item=call),
        delta("response.function_call_arguments.delta", 2, '{"face": "' + HIGH),
        delta("response.function_call_arguments.delta", 2, LOW + '"}'),
        event("response.output_item.done", output_index=2, item=call),
        event("response.completed", response={"id": "resp_1", "output": [], "usage": {}}),
    ]))
    events, end = one_turn(make(server))
    assert [(e.kind, e.text) for e in events] == [
        (Kind.THINKING, "hm "), (Kind.THINKING, EMOJI), (Kind.TEXT, "Hi "),
        (Kind.TEXT, EMOJI + "!"), (Kind.TEXT, "\ufffd"), (Kind.TOOL_INPUT, '{"face": "'),
        (Kind.TOOL_INPUT, EMOJI + '"}'), (Kind.TOOL_CALL, "")]
    assert events[-1].tool.input == events[-2].tool.input == '{"face": "' + EMOJI + '"}'
    assert end.parts[0].text == "hm " + EMOJI
    assert end.parts[1] == nacelle.Text("Hi " + EMOJI + "!\ufffd")
    assert end.parts[2].input == '{"face": "' + EMOJI + '"}'
    assert_well_formed(events, end)

@nacelle.tool
def get_capital(country: str) -> str:
    """The capital of a country.

    Args:
        country: The country.
    """
    return "Potato City"


@nacelle.tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"15°C in {city}"


@nacelle.tool
def clock() -> str:
    """The time."""
    return "14:05"


# -- a tool-using run with reasoning, end to end -------------------------------------


def test_a_tool_run_with_reasoning_sends_the_reasoning_item_back_byte_for_byte(server):
    server.queue(PATH, recorded("tool_call_with_reasoning.sse"),
                 recorded("answer_after_tool.sse"))
    agent = Agent(make(server), "Briefly narrate what you are about to do before calling "
                  "each tool.", tools=[get_capital], thinking=Thinking(effort=Effort.MEDIUM))
    result = agent.run([user_text("What is the capital of PotatoLand?")])

    assert result.text == "The capital of PotatoLand is **Potato City**."
    assert result.stop is Stop.END and result.turns == 2
    first, second = server.requests
    assert (first.path, second.path) == (PATH, PATH)
    item = done_item("tool_call_with_reasoning.sse", "reasoning")
    assert compact(item).encode("utf-8") in second.body  # the very bytes, unchanged
    sent = second.json()
    assert sent["store"] is False and sent["include"] == ["reasoning.encrypted_content"]
    assert [i.get("type", "message") for i in sent["input"]] == [
        "message", "reasoning", "message", "function_call", "function_call_output"]
    assert sent["input"][1] == item
    assert sent["input"][3]["call_id"] == sent["input"][4]["call_id"] == (
        "call_LabG58Uhrq9kZvR52BYKjToD")
    assert sent["input"][4]["output"] == "Potato City"
    assert result.usage.output_tokens == 69 + 16


def test_reasoning_is_replayed_unchanged_in_a_later_run_after_dumps_and_loads(server):
    server.queue(PATH, recorded("tool_call_with_reasoning.sse"),
                 recorded("answer_after_tool.sse"), recorded("answer_after_tool.sse"))
    agent = Agent(make(server), "Narrate.", tools=[get_capital])
    first = agent.run([user_text("What is the capital of PotatoLand?")])
    saved = nacelle.dumps(first.messages)
    later = agent.run(nacelle.loads(saved) + [user_text("And its population?")])
    assert later.stop is Stop.END
    item = done_item("tool_call_with_reasoning.sse", "reasoning")
    assert compact(item).encode("utf-8") in server.requests[2].body


def test_reasoning_of_this_backend_is_dropped_when_the_conversation_moves_elsewhere():
    reasoning = Reasoning("", compact(done_item("tool_call_with_reasoning.sse", "reasoning")),
                          "openai-responses")
    assert reasoning.protocol == openai.PROTOCOL
    turn = Message(Role.ASSISTANT, (reasoning, Text("Hello.")))
    from nacelle.backends.chat import wire as chat_wire

    body = chat_wire.to_wire(Request("s"), (user_text("Hi"), turn), model="gpt-5-mini")
    assert "encrypted_content" not in json.dumps(body)


def test_an_agent_streams_each_calls_arguments_as_written_then_announces_the_calls(server):
    server.queue(PATH, recorded("parallel_calls.sse"), recorded("answer_after_tool.sse"))
    agent = Agent(make(server), "Be brief.", tools=[weather, clock])
    events = list(agent.stream([user_text("Weather and time in Berlin?")]))

    kinds = [e.kind for e in events]
    assert kinds[:kinds.index(Kind.TURN)] == [Kind.TOOL_INPUT] * 6 + [Kind.TOOL_CALL] * 2
    streamed = [(e.tool.index, e.tool.name, e.text, e.tool.input) for e in events
                if e.kind is Kind.TOOL_INPUT]
    assert streamed == [
        (0, "weather", '{"', '{"'), (0, "weather", "city", '{"city'),
        (0, "weather", '":"', '{"city":"'), (0, "weather", "Berlin", '{"city":"Berlin'),
        (0, "weather", '"}', '{"city":"Berlin"}'), (1, "clock", "{}", "{}")]
    announced = [(e.tool.id, e.tool.index, e.tool.input) for e in events
                 if e.kind is Kind.TOOL_CALL]
    assert announced == [("call_Qm2dEw1uX9aBtW3c", 0, '{"city":"Berlin"}'),
                         ("call_Zr8tYp4kL0cDvN7e", 1, "{}")]
    assert [e.tool.result for e in events if e.kind is Kind.TOOL_RESULT] == [
        "15°C in Berlin", "14:05"]
    server.assert_consumed()


def test_parallel_calls_both_run_and_their_outputs_go_back_in_call_order(server):
    server.queue(PATH, recorded("parallel_calls.sse"), recorded("answer_after_tool.sse"))
    events = list(Agent(make(server), "Be brief.", tools=[weather, clock]).stream(
        [user_text("Weather and time in Berlin?")]))
    calls = [e.tool for e in events if e.kind is Kind.TOOL_CALL]
    results = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert [(c.id, c.name, c.index) for c in calls] == [
        ("call_Qm2dEw1uX9aBtW3c", "weather", 0), ("call_Zr8tYp4kL0cDvN7e", "clock", 1)]
    assert sorted(r.id for r in results) == sorted(c.id for c in calls)
    outputs = [i for i in server.requests[1].json()["input"]
               if i.get("type") == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [
        ("call_Qm2dEw1uX9aBtW3c", "15°C in Berlin"), ("call_Zr8tYp4kL0cDvN7e", "14:05")]
    turn = [e for e in events if e.kind is Kind.TURN][0]
    assert (turn.usage.input_tokens, turn.usage.cache_read_tokens) == (169, 1152)


def test_shown_thinking_streams_the_reasoning_summaries(server):
    server.queue(PATH, recorded("reasoning_summary.sse"))
    agent = Agent(make(server, model="o3-mini"), "Be helpful.",
                  thinking=Thinking(effort=Effort.HIGH, show=True))
    events = list(agent.stream([user_text("How do I cross the street?")]))
    assert events[0].kind is Kind.THINKING and events[0].text == "**Providing"
    assert server.requests[0].json()["reasoning"] == {"effort": "high", "summary": "auto"}


def test_a_refusal_ends_the_run_with_stop_refusal(server):
    server.queue(PATH, recorded("refusal.sse"))
    result = Agent(make(server), "Be brief.").run([user_text("Help me with something bad")])
    assert result.stop is Stop.REFUSAL
    assert result.text == "I'm sorry, but I can't help with that."


def test_an_incomplete_response_ends_the_run_at_max_tokens_running_nothing(server):
    server.queue(PATH, recorded("incomplete.sse"))
    agent = Agent(make(server), "Be brief.", tools=[weather], max_tokens=64)
    events = list(agent.stream([user_text("Weather in Berlin and Hamburg?")]))
    # The cut call's input streamed; it was never announced, so nothing closes it.
    assert [e.kind for e in events] == [Kind.TEXT, Kind.TEXT, Kind.TOOL_INPUT, Kind.TOOL_INPUT,
                                        Kind.TURN, Kind.DONE]
    assert events[-1].stop is Stop.MAX_TOKENS
    assert server.requests[0].json()["max_output_tokens"] == 64
    [call] = [p for p in events[-1].messages[-1].parts if isinstance(p, ToolCall)]
    assert call.finished is False


@pytest.mark.slow
def test_a_rate_limited_failure_is_retried_by_retry_and_recovers(server):
    server.queue(PATH, recorded("failed_rate_limit.sse"), recorded("answer_after_tool.sse"))
    retrying = Retry(make(server), RetryOptions(attempts=2, base=0.01, max=0.01))
    result = Agent(retrying, "Be brief.").run([user_text("Hi")])
    assert result.text == "The capital of PotatoLand is **Potato City**."
    first, again = server.requests
    assert first.body == again.body


def test_a_failure_that_is_not_transient_is_not_retried(server):
    server.queue(PATH, recorded("failed_invalid_prompt.sse"), recorded("answer_after_tool.sse"))
    retrying = Retry(make(server), RetryOptions(attempts=3, base=0.01, max=0.01))
    with pytest.raises(StreamError, match="invalid_prompt") as caught:
        Agent(retrying, "Be brief.").run([user_text("Hi")])
    assert not retryable(caught.value)
    assert len(server.requests) == 1


def test_an_error_event_after_text_is_raised_after_the_text_was_shown(server):
    server.queue(PATH, recorded("error_event.sse"))
    seen = []
    with pytest.raises(StreamError, match="server_error"):
        for event in Agent(make(server), "Be brief.").stream([user_text("Hi")]):
            seen.append(event.text)
    assert seen == ["The answer", " starts"]


@pytest.mark.slow
def test_cancelling_while_the_server_stalls_ends_the_run_promptly(server):
    server.queue(PATH, recorded("answer_after_tool.sse", stall=30.0))
    cancel = nacelle.CancelEvent()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(nacelle.Cancelled):
        list(Agent(make(server), "Be brief.").stream([user_text("Hi")], cancel=cancel))
    assert time.monotonic() - started < 5.0
    assert server.wait_disconnects(1, timeout=5.0)


def test_images_go_out_as_input_image_parts(server):
    server.queue(PATH, recorded("answer_after_tool.sse"))
    message = Message(Role.USER, (Text("What is this?"), Image("image/png", "iVBORw0KGgo=")))
    Agent(make(server), "Be brief.").run([message])
    [item] = server.requests[0].json()["input"]
    assert item["content"][1] == {"type": "input_image", "detail": "auto",
                                  "image_url": "data:image/png;base64,iVBORw0KGgo="}


# -- keys ------------------------------------------------------------------------------


def test_the_key_goes_in_a_bearer_header_and_never_in_an_error_repr_or_log(server, caplog):
    caplog.set_level(logging.DEBUG)
    server.queue(PATH, Reply.json({"error": {
        "message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error",
        "param": None, "code": "invalid_api_key"}}, status=401))
    backend = make(server)
    with pytest.raises(APIError) as caught:
        Agent(backend, "Be brief.").run([user_text("Hi")])
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert len(server.requests) == 1 and "OPENAI_API_KEY" in str(caught.value)
    texts = [repr(backend), caplog.text]
    texts += [f"{type(e).__name__} {e} {e!r} {e.args!r}" for e in chain(caught.value)]
    for text in texts:
        assert KEY not in text and "RESPONSES-0123456789" not in text


def test_a_missing_key_is_a_config_error_at_the_first_request_not_at_construction(server):
    backend = openai.Backend(model="gpt-5.5", base_url=server.url + "/v1")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        one_turn(backend)
    assert server.requests == []


def test_the_environment_key_is_read_at_the_first_request(server, monkeypatch):
    backend = openai.Backend(model="gpt-5.5", base_url=server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-from-the-environment")
    server.queue(PATH, recorded("answer_after_tool.sse"))
    one_turn(backend)
    assert server.requests[0].headers["authorization"] == "Bearer sk-proj-from-the-environment"


def test_an_environment_key_stays_out_of_a_pickle_and_the_copy_works(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-env-key-12345")
    backend = openai.Backend(model="gpt-5.5", base_url=server.url + "/v1")
    server.queue(PATH, recorded("answer_after_tool.sse"), recorded("answer_after_tool.sse"))
    one_turn(backend)
    data = pickle.dumps(backend)
    assert b"sk-proj-env-key-12345" not in data
    one_turn(pickle.loads(data))
    assert len(server.requests) == 2


# -- construction and capabilities -----------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    ({"model": ""}, "model"), ({"model": None}, "model"),
    ({"model": "gpt-5", "api_key": ""}, "api_key"),
    ({"model": "gpt-5", "pricing": {"input": 1}}, "pricing"),
    ({"model": "gpt-5", "base_url": "api.openai.com"}, "base_url"),
    ({"model": "gpt-5", "max_retries": -1}, "max_retries"),
    ({"model": "gpt-5", "timeout": 0}, "timeout"),
])
def test_bad_construction_arguments_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        openai.Backend(**kwargs)


def test_the_defaults_and_capabilities():
    backend = openai.Backend(model="gpt-5-mini")
    assert (backend.base_url, backend.name) == ("https://api.openai.com/v1", "openai")
    assert backend.pricing == price_for("openai", "gpt-5-mini") is not None
    assert backend.capabilities == nacelle.Capabilities(
        mcp=False, thinking=True, effort=True, min_budget=0, cost=True,
        token_counting=True, images=True, structured_output=True, documents=True,
        tool_media=True, native_tools=frozenset({
            "web_search", "web_search:allowed_domains", "code_execution"}),
        # a reasoning model: no temperature or top_p
        settings=frozenset({"tool_choice", "forced_tool_choice", "parallel_tool_calls",
                            "extra_body", "extra_headers", "cache_key"}))
    # the hosted tool search is gpt-5.4's and later's
    assert not backend.capabilities.tool_search
    assert openai.Backend(model="gpt-5.5").capabilities.tool_search
    assert not openai.Backend(model="o3").capabilities.tool_search
    assert isinstance(backend, nacelle.Backend)
    assert repr(backend) == ("openai.Backend(model='gpt-5-mini', "
                             "base_url='https://api.openai.com/v1', "
                             f"pricing={backend.pricing!r})")


def test_an_agent_refuses_server_side_mcp_at_construction():
    with pytest.raises(Unsupported, match="openai"):
        Agent(openai.Backend(model="gpt-5-mini"), "s",
              mcp=[nacelle.MCPServer("docs", "https://example.com/mcp")])


def test_an_agent_accepts_every_effort_and_shown_thinking():
    for effort in Effort:
        Agent(openai.Backend(model="gpt-5-mini"), "s",
              thinking=Thinking(effort=effort, show=True))


def test_a_given_price_fills_each_turns_cost(server):
    server.queue(PATH, recorded("parallel_calls.sse"), recorded("answer_after_tool.sse"))
    backend = make(server, pricing=Price(1.25, 10.0, 0.125))
    assert backend.capabilities.cost
    result = Agent(backend, "Be brief.", tools=[weather, clock]).run([user_text("Hi")])
    assert result.usage.priced
    first = (169 * 1.25 + 1152 * 0.125 + 133 * 10.0) / 1e6
    second = (147 * 1.25 + 16 * 10.0) / 1e6
    assert result.usage.cost == pytest.approx(first + second)


def test_a_model_without_a_published_price_reports_no_dollars(server):
    server.queue(PATH, recorded("answer_after_tool.sse"))
    _, end = one_turn(make(server, model="gpt-unreleased"))
    assert (end.usage.cost, end.usage.priced) == (0.0, False)


# -- count_tokens --------------------------------------------------------------------------


def test_count_tokens_asks_the_input_tokens_endpoint_with_the_request_body(server):
    server.queue("/v1/responses/input_tokens",
                 Reply.json({"object": "response.input_tokens", "input_tokens": 2095}))
    agent = Agent(make(server), "Be brief.", tools=[weather], max_tokens=500)
    assert agent.count_tokens([user_text("count me")]) == 2095
    sent = server.requests[0].json()
    assert server.requests[0].path == "/v1/responses/input_tokens"
    assert sent["instructions"] == "Be brief." and sent["tools"][0]["name"] == "weather"
    assert not {"stream", "store", "include", "max_output_tokens"} & set(sent)


@pytest.mark.parametrize("answer", [{"input_tokens": -1}, {"input_tokens": 1.5},
                                    {"tokens": 3}, [], {"input_tokens": True}])
def test_a_token_count_that_is_no_count_is_a_stream_error(server, answer):
    server.queue("/v1/responses/input_tokens", Reply.json(answer))
    with pytest.raises(StreamError, match="input_tokens"):
        make(server).count_tokens(Request("s", messages=(user_text("x"),)), RunContext())


def test_the_base_url_comes_from_openai_base_url_unless_given(monkeypatch):
    from nacelle.backends import openai as module

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert module.Backend(api_key="sk-x", model="gpt-5").base_url == "http://127.0.0.1:9/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert module.Backend(api_key="sk-x", model="gpt-5").base_url == "https://api.openai.com/v1"


# -- model settings, on the wire and refused at construction -----------------------------

@nacelle.tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def test_model_settings_and_headers_go_out_on_the_request(server):
    server.queue(PATH, recorded("answer_after_tool.sse"))
    settings = nacelle.ModelSettings(temperature=0.1, tool_choice="lookup",
                                     parallel_tool_calls=False,
                                     extra_headers={"OpenAI-Project": "proj_1"})
    Agent(make(server, model="gpt-4.1"), "s", tools=[lookup], model_settings=settings,
          cache=nacelle.Cache(key="run-1")).run([user_text("Hi")])
    sent = server.requests[0]
    body = sent.json()
    assert (body["temperature"], body["tool_choice"], body["parallel_tool_calls"],
            body["prompt_cache_key"]) == (
        0.1, {"type": "function", "name": "lookup"}, False, "run-1")
    assert sent.headers["openai-project"] == "proj_1"
    assert sent.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("model, thinking, settings, match", [
    ("gpt-5-mini", Thinking(), {"temperature": 0.2}, "the temperature setting"),
    ("o4-mini", Thinking(), {"top_p": 0.5}, "the top_p setting"),
    ("gpt-5.2", Thinking(effort=Effort.HIGH), {"temperature": 0.2},
     "the temperature setting while the model thinks"),
    ("gpt-4.1", Thinking(), {"stop": "END"}, "the stop setting"),
    ("gpt-4.1", Thinking(), {"top_k": 3}, "the top_k setting"),
    ("gpt-4.1", Thinking(), {"seed": 3}, "the seed setting"),
])
def test_what_the_responses_api_or_model_refuses_is_unsupported_at_construction(
        server, model, thinking, settings, match):
    with pytest.raises(Unsupported, match=match):
        Agent(make(server, model=model), "s", thinking=thinking,
              model_settings=nacelle.ModelSettings(**settings))


def test_sampling_is_taken_where_the_model_takes_it(server):
    for model, thinking in (("gpt-4.1", Thinking()), ("gpt-5-chat-latest", Thinking()),
                            ("gpt-5.2", Thinking()), ("gpt-5.2", Thinking(effort=Effort.NONE))):
        Agent(make(server, model=model), "s", thinking=thinking,
              model_settings=nacelle.ModelSettings(temperature=0.2, top_p=0.9))


def test_a_one_hour_cache_is_unsupported_on_responses(server):
    with pytest.raises(Unsupported, match="the cache_ttl setting"):
        Agent(make(server), "s", cache=nacelle.Cache(ttl="1h"))


def test_extra_headers_never_replace_the_key(server):
    agent = Agent(make(server, model="gpt-4.1"), "s",
                  model_settings=nacelle.ModelSettings(extra_headers={"Accept-Encoding": "gzip"}))
    with pytest.raises(ConfigError, match="may not replace the Accept-Encoding header"):
        agent.run([user_text("Hi")])
    with pytest.raises(ConfigError, match="credentials"):
        nacelle.ModelSettings(extra_headers={"Authorization": "Bearer sk-other"})
