"""The OpenRouter backend against a real loopback server replaying recorded-shape bodies."""

import json
import logging
import pickle
import threading
import time
from pathlib import Path

import pytest

import nacelle
from nacelle import (
    Agent, APIError, ConfigError, Effort, Event, Kind, MCPServer, Reasoning, Request, Retry,
    RetryOptions, RunContext, Stop, StreamError, StreamTruncated, Text, Thinking, ToolCall,
    Unsupported, Usage, retryable, user_text,
)
from nacelle.backend import TurnEnd
from nacelle.backends import openrouter
from nacelle.loop import run
from nacelle.testing import FakeClock, FakeServer, Reply
from nacelle.testing.wire import openrouter_stream

from hostile import EMOJI, HIGH, LOW, assert_well_formed, chain

DATA = Path(__file__).resolve().parent.parent / "data" / "openrouter"
KEY = "sk-or-v1-0123456789abcdef-SECRET"
PATH = "/api/v1/chat/completions"


def run_turns(backend, request, ctx):
    """A run of the loop around ``backend.turn``, as an Agent runs one."""
    return run(request, ctx, backend.turn, backend=backend.name)


def sse_chunks(name):
    """The recorded body split where the provider flushed: after each event."""
    body = (DATA / name).read_bytes()
    pieces = body.split(b"\n\n")
    chunks = [piece + b"\n\n" for piece in pieces[:-1]]
    if pieces[-1]:
        chunks.append(pieces[-1])
    return chunks


def stream_reply(name, **options):
    return Reply(chunks=sse_chunks(name), **options)


@pytest.fixture
def server():
    with FakeServer() as running:
        yield running


def make_backend(server, **options):
    options.setdefault("model", "anthropic/claude-haiku-4.5")
    options.setdefault("api_key", KEY)
    return openrouter.Backend(base_url=server.url + "/api/v1", **options)


def one_turn(backend, request=None, messages=None, ctx=None):
    request = request or Request("Be brief.")
    messages = messages if messages is not None else (user_text("Hi"),)
    items = list(backend.turn(request, tuple(messages), ctx or RunContext()))
    assert isinstance(items[-1], TurnEnd)
    return items[:-1], items[-1]


@nacelle.tool
def weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    return f"15°C, cloudy in {city}"


@nacelle.tool
def clock() -> str:
    """The current time."""
    return "12:00"


# -- construction -------------------------------------------------------------------



def test_an_emoji_split_over_two_deltas_arrives_whole_in_text_reasoning_and_details(server):
    server.queue(PATH, Reply(chunks=openrouter_stream(
        ["Hi " + HIGH, LOW + "!"], reasoning_deltas=["hm " + HIGH, LOW])))
    events, end = one_turn(make_backend(server))
    assert [(e.kind, e.text) for e in events] == [
        (Kind.THINKING, "hm "), (Kind.THINKING, EMOJI), (Kind.TEXT, "Hi "),
        (Kind.TEXT, EMOJI + "!")]
    reasoning, text = end.parts
    assert text == nacelle.Text("Hi " + EMOJI + "!") and reasoning.text == "hm " + EMOJI
    assert json.loads(reasoning.state)[0]["text"] == "hm " + EMOJI
    assert_well_formed(events, end)


def test_the_capability_row_is_declared_as_data():
    assert openrouter.capabilities == nacelle.Capabilities(
        mcp=False, thinking=True, effort=True, min_budget=0, cost=True,
        token_counting=False, images=True, structured_output=True, documents=True,
        tool_media=False,
        settings=frozenset({"temperature", "top_p", "top_k", "stop", "seed", "tool_choice",
                            "forced_tool_choice", "parallel_tool_calls", "extra_body",
                            "extra_headers", "cache_key"}))
    backend = openrouter.Backend(model="openai/gpt-5")
    assert backend.name == "openrouter"
    assert backend.capabilities == openrouter.capabilities
    assert isinstance(backend, nacelle.Backend)


def test_model_is_required_and_must_be_a_non_empty_name():
    with pytest.raises(TypeError):
        openrouter.Backend()  # noqa: the missing keyword is the point
    with pytest.raises(ConfigError, match="model must name an OpenRouter model"):
        openrouter.Backend(model="  ")


@pytest.mark.parametrize("options, message", [
    ({"base_url": "openrouter.ai/api/v1"}, "base_url must be an http"),
    ({"max_retries": -1}, "max_retries"),
    ({"timeout": 0}, "timeout must be a positive number"),
    ({"stall_timeout": "10"}, "stall_timeout must be a positive number"),
    ({"provider": ["anthropic"]}, "provider must be a dict"),
    ({"api_key": ""}, "api_key must be a non-empty string"),
])
def test_bad_options_are_config_errors_at_construction(options, message):
    with pytest.raises(ConfigError, match=message):
        openrouter.Backend(model="m/x", **options)


def test_constructing_without_a_key_works_and_the_first_request_names_the_variable(
        server, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    backend = make_backend(server, api_key=None)
    with pytest.raises(ConfigError, match=r"\$OPENROUTER_API_KEY"):
        one_turn(backend)
    assert server.requests == []


def test_the_key_is_read_from_the_environment_at_the_first_request(server, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    backend = make_backend(server, api_key=None)
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-from-env")
    server.queue(PATH, stream_reply("text_keepalive.sse"))
    one_turn(backend)
    assert server.requests[0].headers["authorization"] == "Bearer sk-or-from-env"


def test_count_tokens_is_unsupported():
    backend = openrouter.Backend(model="m/x", api_key=KEY)
    with pytest.raises(Unsupported, match="'openrouter' does not support token counting"):
        backend.count_tokens(Request("S"), RunContext())


def test_an_agent_with_mcp_servers_fails_at_construction_pointing_to_the_local_client():
    backend = openrouter.Backend(model="m/x", api_key=KEY)
    with pytest.raises(Unsupported, match=r"openrouter.*MCP.*nacelle\.mcp\.connect_http"):
        Agent(backend, "S", mcp=[MCPServer("docs", "https://example.com/mcp")])


def test_an_agent_accepts_every_effort_and_a_small_budget():
    backend = openrouter.Backend(model="m/x", api_key=KEY)
    for effort in Effort:
        Agent(backend, "S", thinking=Thinking(effort=effort, show=True))
    Agent(backend, "S", thinking=Thinking(budget=1))


def test_the_backend_pickles_and_streams_after_unpickling(server):
    backend = make_backend(server, provider={"sort": "price"})
    server.queue(PATH, stream_reply("text_keepalive.sse"), stream_reply("text_keepalive.sse"))
    one_turn(backend)
    copy = pickle.loads(pickle.dumps(backend))
    _, end = one_turn(copy)
    assert end.parts == (Text("Bonjour ! Comment puis-je aider ?"),)
    assert server.requests[1].json()["provider"] == {"sort": "price"}


def test_a_key_from_the_environment_stays_out_of_the_pickle(server, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-env-key-98765")
    backend = make_backend(server, api_key=None)
    server.queue(PATH, stream_reply("text_keepalive.sse"), stream_reply("text_keepalive.sse"))
    one_turn(backend)
    assert server.requests[0].headers["authorization"] == "Bearer sk-or-env-key-98765"
    data = pickle.dumps(backend)
    assert b"sk-or-env-key-98765" not in data
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-other-key-11111")
    one_turn(pickle.loads(data))
    assert server.requests[1].headers["authorization"] == "Bearer sk-or-other-key-11111"


def test_the_key_never_appears_in_repr_errors_or_logs(server, caplog):
    caplog.set_level(logging.DEBUG)
    backend = make_backend(server, max_retries=1)
    echoed = {"error": {"code": 401, "message": f"Invalid key {KEY}",
                        "metadata": {"raw": f"Bearer {KEY} rejected"}}}
    server.queue(PATH, Reply.json(echoed, status=401))
    with pytest.raises(APIError) as info:
        one_turn(backend)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    seen = [repr(backend), str(backend), repr(backend._endpoint.transport), str(info.value),
            repr(info.value), caplog.text, repr(pickle.loads(pickle.dumps(info.value)))]
    for text in seen:
        assert KEY not in text
        assert "0123456789abcdef" not in text


# -- the request ----------------------------------------------------------------------


def test_a_turn_posts_to_chat_completions_with_bearer_and_attribution_headers(server):
    backend = make_backend(server, app_name="Weather Desk", app_url="https://desk.example")
    server.queue(PATH, stream_reply("text_keepalive.sse"))
    one_turn(backend)
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", PATH)
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["http-referer"] == "https://desk.example"
    assert request.headers["x-openrouter-title"] == "Weather Desk"
    assert request.headers["content-type"] == "application/json"
    assert request.json() == openrouter.to_wire(
        Request("Be brief."), [user_text("Hi")], model="anthropic/claude-haiku-4.5")


def test_no_attribution_headers_unless_given(server):
    server.queue(PATH, stream_reply("text_keepalive.sse"))
    one_turn(make_backend(server))
    headers = server.requests[0].headers
    assert "http-referer" not in headers and "x-openrouter-title" not in headers


# -- streams --------------------------------------------------------------------------


def test_keepalives_before_and_between_chunks_and_usage_in_a_repeated_finish(server):
    server.queue(PATH, stream_reply("text_keepalive.sse"))
    events, end = one_turn(make_backend(server))
    assert events == [Event(Kind.TEXT, text="Bonjour"), Event(Kind.TEXT, text=" ! Comment"),
                      Event(Kind.TEXT, text=" puis-je aider ?")]
    assert end == TurnEnd(parts=(Text("Bonjour ! Comment puis-je aider ?"),),
                          usage=Usage(input_tokens=412, output_tokens=11, cost=0.000467, priced=True),
                          stop=Stop.END)


def test_usage_in_a_chunk_with_empty_choices(server):
    server.queue(PATH, stream_reply("loop_turn3_answer.sse"))
    _, end = one_turn(make_backend(server))
    assert end.usage == Usage(input_tokens=60, output_tokens=19, cache_read_tokens=790,
                              cost=0.000165, priced=True)
    assert end.stop is Stop.END


def test_non_ascii_text_with_a_charset_less_content_type_arrives_intact(server):
    body = (DATA / "non_ascii.sse").read_bytes()
    # Seven-byte HTTP chunks split multi-byte characters and lines alike.
    server.queue(PATH, Reply(chunks=[body[i:i + 7] for i in range(0, len(body), 7)],
                             content_type="text/event-stream"))
    events, end = one_turn(make_backend(server))
    assert [e.text for e in events] == ["Grüße aus Zürich", " — ☃ 日本語", " 🚀 a\u2028b"]
    assert end.parts == (Text("Grüße aus Zürich — ☃ 日本語 🚀 a\u2028b"),)


@pytest.mark.slow
def test_a_close_delimited_body_streams_each_event_as_it_arrives(server):
    chunks = sse_chunks("text_keepalive.sse")
    delayed = [chunks[0], chunks[1], chunks[2], chunks[3]] + [(chunks[4], 1.5)] + chunks[5:]
    server.queue(PATH, Reply(chunks=delayed, mode="close"))
    backend = make_backend(server)
    started = time.monotonic()
    turn = backend.turn(Request("S"), (user_text("Hi"),), RunContext())
    first = next(turn)
    first_at = time.monotonic() - started
    rest = list(turn)
    ended_at = time.monotonic() - started
    assert first == Event(Kind.TEXT, text="Bonjour")
    # Buffering to the end of the body would deliver both at once; streaming puts the
    # chunk's delay between them, whatever the machine's load.
    assert ended_at - first_at >= 1.2
    assert isinstance(rest[-1], TurnEnd)


def test_a_body_ending_without_done_or_finish_is_truncated(server):
    chunks = sse_chunks("text_keepalive.sse")[:6]  # keepalives and two text chunks
    server.queue(PATH, Reply(chunks=chunks))
    turn = make_backend(server).turn(Request("S"), (user_text("Hi"),), RunContext())
    assert next(turn) == Event(Kind.TEXT, text="Bonjour")
    with pytest.raises(StreamTruncated):
        list(turn)


def test_a_connection_dropped_mid_stream_is_truncated(server):
    server.queue(PATH, stream_reply("text_keepalive.sse", drop_after=5))
    with pytest.raises(StreamTruncated):
        one_turn(make_backend(server))


def test_an_in_band_429_before_any_output_is_retryable_and_retry_restarts_the_run(server):
    server.queue(PATH, stream_reply("error_429_before_output.sse"))
    with pytest.raises(StreamError, match="429 from OpenAI: Rate limit exceeded") as info:
        one_turn(make_backend(server))
    assert retryable(info.value)

    server.queue(PATH, stream_reply("error_429_before_output.sse"),
                 stream_reply("text_keepalive.sse"))
    agent = Agent(Retry(make_backend(server), RetryOptions(attempts=3, base=0.01, max=0.02)),
                  "Be brief.")
    result = agent.run([user_text("Hi")])
    assert result.text == "Bonjour ! Comment puis-je aider ?"
    assert len(server.requests) == 3
    server.assert_consumed()


def test_an_in_band_429_after_text_is_surfaced_not_retried(server):
    server.queue(PATH, stream_reply("error_429_after_text.sse"),
                 stream_reply("text_keepalive.sse"))
    agent = Agent(Retry(make_backend(server), RetryOptions(attempts=3, base=0.01, max=0.02)),
                  "Be brief.")
    seen = []
    with pytest.raises(StreamError, match="429") as info:
        for event in agent.stream([user_text("Hi")]):
            seen.append(event)
    assert [e.text for e in seen] == ["The answer", " starts"]
    assert retryable(info.value)  # worth retrying in itself; Retry declined: text was shown
    assert nacelle.attempt(info.value) == 1
    assert len(server.requests) == 1


@pytest.mark.parametrize("status, body, message", [
    (402, {"error": {"code": 402, "message": "Insufficient credits. Add more using "
                                             "https://openrouter.ai/credits"}},
     r"HTTP 402: Insufficient credits.*out of credits"),
    (401, {"error": {"code": 401, "message": "No cookie auth credentials found"}},
     r"HTTP 401: No cookie auth credentials found.*OPENROUTER_API_KEY"),
    (400, {"error": {"code": 400, "message": "Reasoning is mandatory for this endpoint and "
                                             "cannot be disabled."}},
     r"HTTP 400: Reasoning is mandatory for this endpoint and cannot be disabled\."),
])
def test_client_errors_are_not_retried_and_say_what_happened(server, status, body, message):
    server.queue(PATH, Reply.json(body, status=status))
    request = Request("S", thinking=Thinking(effort=Effort.NONE))
    with pytest.raises(APIError, match=message) as info:
        one_turn(make_backend(server, max_retries=2), request=request)
    assert info.value.status == status
    assert not retryable(info.value)
    assert len(server.requests) == 1
    assert server.requests[0].json()["reasoning"] == {"effort": "none"}


def test_a_429_before_the_stream_is_retried_after_its_retry_after(server):
    limited = Reply.json({"error": {"code": 429, "message": "Rate limit exceeded"}},
                         status=429, headers={"Retry-After": "7"})
    server.queue(PATH, limited, stream_reply("text_keepalive.sse"))
    clock = FakeClock()
    _, end = one_turn(make_backend(server), ctx=RunContext(clock=clock))
    assert clock.sleeps == [7.0]
    assert end.stop is Stop.END
    assert len(server.requests) == 2


def test_a_three_turn_tool_loop_echoes_reasoning_details_byte_for_byte(server):
    server.queue(PATH, stream_reply("loop_turn1_weather.sse"),
                 stream_reply("loop_turn2_clock.sse"), stream_reply("loop_turn3_answer.sse"))
    request = Request("You are a weather desk.", messages=(user_text("Berlin?"),),
                      tools=(weather, clock), thinking=Thinking(effort=Effort.LOW, show=True))
    events = list(run_turns(make_backend(server), request, RunContext()))

    kinds = [e.kind for e in events]
    assert kinds.count(Kind.THINKING) == 4
    calls = [e.tool for e in events if e.kind is Kind.TOOL_CALL]
    assert [(c.id, c.name, c.input) for c in calls] == [
        ("toolu_bdrk_01L9WeAtHeR", "weather", '{"city": "Berlin"}'),
        ("toolu_bdrk_02ClOcK", "clock", "{}")]
    results = [e.tool.result for e in events if e.kind is Kind.TOOL_RESULT]
    assert results == ["15°C, cloudy in Berlin", "12:00"]
    done = events[-1]
    assert done.kind is Kind.DONE and done.stop is Stop.END

    first_details = (
        '[{"type":"reasoning.text","text":"The user is asking about the weather in Berlin.'
        ' I should call the weather tool.","format":"anthropic-claude-v1","index":0,'
        '"signature":"EvsCCkYIBxgCKkBsig1+/Q=="}]')
    second_details = (
        '[{"type":"reasoning.text","text":"Now the local time.","format":'
        '"anthropic-claude-v1","index":0,"signature":"ErUBCkYIBxgCsig2=="}]')
    bodies = [r.body.decode("utf-8") for r in server.requests]
    assert len(bodies) == 3
    assert '"reasoning_details"' not in bodies[0]
    assert f'"reasoning_details":{first_details}' in bodies[1]
    assert f'"reasoning_details":{first_details}' in bodies[2]
    assert f'"reasoning_details":{second_details}' in bodies[2]
    for body in bodies:
        parsed = json.loads(body)
        assert [t["function"]["name"] for t in parsed["tools"]] == ["clock", "weather"]
        assert parsed["reasoning"] == {"effort": "low"}
    assistant = done.messages[1]
    assert assistant.parts[0] == Reasoning(
        "The user is asking about the weather in Berlin. I should call the weather tool.",
        first_details, "openrouter")


def test_a_three_turn_tool_run_through_an_agent_uses_one_connection(server):
    server.queue(PATH, stream_reply("loop_turn1_weather.sse"),
                 stream_reply("loop_turn2_clock.sse"), stream_reply("loop_turn3_answer.sse"))
    agent = Agent(make_backend(server), "You are a weather desk.", tools=[weather, clock])
    result = agent.run([user_text("Berlin?")])
    assert result.turns == 3 and result.stop is Stop.END
    assert [r.connection for r in server.requests] == [1, 1, 1]
    assert server.connections == 1 and server.disconnects == 0


@pytest.mark.slow
def test_keepalives_after_done_delay_the_turn_by_at_most_the_drain_bound(server):
    keepalives = [(b": OPENROUTER PROCESSING\n\n", 0.05)] * 100  # 5 s of them
    server.queue(PATH, Reply(chunks=sse_chunks("loop_turn1_weather.sse") + keepalives),
                 stream_reply("loop_turn3_answer.sse"))
    agent = Agent(make_backend(server), "You are a weather desk.", tools=[weather, clock])
    started = time.monotonic()
    result = agent.run([user_text("Berlin?")])
    assert time.monotonic() - started < 3.0  # about one second of draining, not five
    assert result.turns == 2 and result.stop is Stop.END
    assert server.connections == 2 and server.wait_disconnects(1, timeout=1.0)


@pytest.mark.slow
def test_cancelling_mid_stream_closes_the_connection_at_once(server):
    chunks = sse_chunks("loop_turn3_answer.sse")
    server.queue(PATH, Reply(chunks=chunks[:3] + [(chunks[3], 30.0)] + chunks[4:]))
    ctx = RunContext()
    timer = threading.Timer(0.2, ctx.cancel)
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(nacelle.Cancelled):
            list(run_turns(make_backend(server), Request("sys", messages=(user_text("x"),)), ctx))
    finally:
        timer.cancel()
    assert time.monotonic() - started < 5.0  # not the 30 s the server would have waited
    assert server.wait_disconnects(1, timeout=1.0)


def test_agent_end_to_end_with_real_tools_sends_exactly_these_bodies(server):
    server.queue(PATH, stream_reply("loop_turn1_weather.sse"),
                 stream_reply("loop_turn2_clock.sse"), stream_reply("loop_turn3_answer.sse"))
    backend = make_backend(server, provider={"order": ["amazon-bedrock"]})
    agent = Agent(backend, "You are a weather desk.", tools=[weather, clock], max_tokens=4096)
    result = agent.run([user_text("Weather in Berlin, and the time?")])

    assert result.text == "In Berlin it is 15°C and cloudy; the clock says 12:00."
    assert result.stop is Stop.END and result.turns == 3
    assert result.usage.input_tokens == 626 + 190 + 60
    assert result.usage.output_tokens == 106 + 48 + 19
    assert result.usage.cache_read_tokens == 600 + 790
    assert result.usage.reasoning_tokens == 54 + 12
    assert result.usage.cost == pytest.approx(0.001156 + 0.000462 + 0.000165)

    marked = {"type": "ephemeral"}
    tools = [
        {"type": "function", "function": {"name": "clock", "description": clock.description,
                                          "parameters": clock.schema}},
        {"type": "function", "function": {"name": "weather",
                                          "description": weather.description,
                                          "parameters": weather.schema}},
    ]
    system = {"role": "system", "content": [
        {"type": "text", "text": "You are a weather desk.", "cache_control": marked}]}
    question = "Weather in Berlin, and the time?"
    first_turn = {
        "role": "assistant", "content": "Let me check.",
        "tool_calls": [{"id": "toolu_bdrk_01L9WeAtHeR", "type": "function", "function": {
            "name": "weather", "arguments": '{"city": "Berlin"}'}}],
        "reasoning_details": [{
            "type": "reasoning.text",
            "text": "The user is asking about the weather in Berlin. I should call the "
                    "weather tool.",
            "format": "anthropic-claude-v1", "index": 0,
            "signature": "EvsCCkYIBxgCKkBsig1+/Q=="}],
    }
    second_turn = {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "toolu_bdrk_02ClOcK", "type": "function", "function": {
            "name": "clock", "arguments": "{}"}}],
        "reasoning_details": [{
            "type": "reasoning.text", "text": "Now the local time.",
            "format": "anthropic-claude-v1", "index": 0, "signature": "ErUBCkYIBxgCsig2=="}],
    }
    common = {"model": "anthropic/claude-haiku-4.5", "stream": True, "max_tokens": 4096,
              "tools": tools, "parallel_tool_calls": True,
              "provider": {"order": ["amazon-bedrock"]}}
    expected = [
        {**common, "messages": [
            system,
            {"role": "user", "content": [{"type": "text", "text": question,
                                          "cache_control": marked}]},
        ]},
        {**common, "messages": [
            system, {"role": "user", "content": question}, first_turn,
            {"role": "tool", "tool_call_id": "toolu_bdrk_01L9WeAtHeR", "content": [
                {"type": "text", "text": "15°C, cloudy in Berlin", "cache_control": marked}]},
        ]},
        {**common, "messages": [
            system, {"role": "user", "content": question}, first_turn,
            {"role": "tool", "tool_call_id": "toolu_bdrk_01L9WeAtHeR",
             "content": "15°C, cloudy in Berlin"},
            second_turn,
            {"role": "tool", "tool_call_id": "toolu_bdrk_02ClOcK", "content": [
                {"type": "text", "text": "12:00", "cache_control": marked}]},
        ]},
    ]
    assert [r.json() for r in server.requests] == expected
    server.assert_consumed()

    # The conversation continues: a follow-up replays the whole run, reasoning included.
    server.queue(PATH, stream_reply("text_keepalive.sse"))
    follow = agent.run(list(result.messages) + [user_text("Merci")])
    assert follow.text == "Bonjour ! Comment puis-je aider ?"
    replayed = server.requests[3].json()["messages"]
    assert replayed[2] == first_turn and replayed[4] == second_turn
    assert replayed[6] == {"role": "assistant",
                           "content": "In Berlin it is 15°C and cloudy; the clock says 12:00."}


def test_thinking_events_are_hidden_unless_shown_but_reasoning_still_travels(server):
    server.queue(PATH, stream_reply("loop_turn1_weather.sse"),
                 stream_reply("loop_turn3_answer.sse"))
    agent = Agent(make_backend(server), "S", tools=[weather])
    events = list(agent.stream([user_text("Berlin?")]))
    assert Kind.THINKING not in [e.kind for e in events]
    assert "reasoning_details" in server.requests[1].json()["messages"][2]


def test_a_turn_cut_at_max_tokens_mid_call_keeps_it_unfinished_and_ends_the_run(server):
    chunks = [
        b": OPENROUTER PROCESSING\n\n",
        b'data: {"id":"gen-x","object":"chat.completion.chunk","created":1,"model":"m/x",'
        b'"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
        b'"function":{"name":"weather","arguments":"{\\"city\\": \\"Ber"}}]},'
        b'"finish_reason":null}]}\n\n',
        b'data: {"id":"gen-x","object":"chat.completion.chunk","created":1,"model":"m/x",'
        b'"choices":[{"index":0,"delta":{},"finish_reason":"length"}],'
        b'"usage":{"prompt_tokens":50,"completion_tokens":16}}\n\n',
        b"data: [DONE]\n\n",
    ]
    server.queue(PATH, Reply(chunks=chunks))
    result = Agent(make_backend(server), "S", tools=[weather]).run([user_text("Berlin?")])
    assert result.stop is Stop.MAX_TOKENS
    assert result.messages[1].parts[0] == ToolCall("c1", "weather", '{"city": "Ber', False)
    assert len(server.requests) == 1


# -- hostile streams through the real transport ------------------------------------------

def assert_no_key(err):
    texts = [str(err), repr(err), repr(err.args), repr(getattr(err, "code", None))]
    texts += [f"{type(e).__name__} {e!r} {e.args!r}" for e in chain(err)]
    for text in texts:
        assert KEY[:14] not in text  # not even the part a preview's cut would leave


@pytest.mark.parametrize("line", [
    json.dumps({"id": "gen-1", "choices": [], "error": {
        "code": 401, "message": f"Invalid header Authorization: Bearer {KEY} for {KEY}"}}),
    json.dumps({"id": "gen-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "error",
                                           "error": {"code": f"bad_{KEY}", "message": "no"}}]}),
    '{"id": "gen-1", "echo": "' + "x" * 40 + KEY + '", ',
    '{"id": "gen-1", "echo": "Bearer ' + KEY + '", "n": NaN}',
], ids=["top-level error", "choice error", "broken line", "NaN line"])
def test_a_key_echoed_inside_the_stream_never_reaches_the_error(server, line):
    server.queue(PATH, Reply(chunks=[f"data: {line}\n\n".encode()]))
    with pytest.raises(StreamError) as caught:
        one_turn(make_backend(server, max_retries=0))
    assert_no_key(caught.value)
    assert "<hidden>" in str(caught.value)


@pytest.mark.parametrize("line", ["[" * 100_000, '{"usage": {"cost": Infinity}}'],
                         ids=["100k lists", "Infinity"])
def test_a_data_line_json_cannot_hold_is_a_stream_error(server, line):
    server.queue(PATH, Reply(chunks=[f"data: {line}\n\n".encode()]))
    with pytest.raises(StreamError, match="not JSON"):
        one_turn(make_backend(server, max_retries=0))


def test_an_sse_retry_of_five_thousand_digits_is_harmless(server):
    body = b"retry: " + b"9" * 5000 + b"\n\n" + b"".join(sse_chunks("text_keepalive.sse"))
    server.queue(PATH, Reply(chunks=[body]))
    _, end = one_turn(make_backend(server))
    assert end.stop is Stop.END


def test_the_base_url_comes_from_openrouter_base_url_unless_given(monkeypatch):
    from nacelle.backends import openrouter as module

    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://127.0.0.1:9/api/v1")
    assert module.Backend(api_key="sk-or-x", model="m/x").base_url == "http://127.0.0.1:9/api/v1"
    monkeypatch.delenv("OPENROUTER_BASE_URL")
    assert module.Backend(api_key="sk-or-x", model="m/x").base_url == "https://openrouter.ai/api/v1"


def test_an_agent_streams_each_calls_arguments_as_they_are_written_then_announces_the_call(
        server):
    # The FakeServer's OpenRouter body sends each call's id and name in its first
    # fragment and the arguments after it in 7-character fragments.
    calls = [("toolu_1", "weather", '{"city": "Paris"}'), ("toolu_2", "clock", "{}")]
    server.queue(PATH, Reply(chunks=openrouter_stream(["Checking."], tool_calls=calls)),
                 Reply(chunks=openrouter_stream(["Sunny, 12:00."])))
    agent = Agent(make_backend(server), "Be brief.", tools=[weather, clock])
    events = list(agent.stream([user_text("Weather and time?")]))

    kinds = [e.kind for e in events]
    assert kinds[:kinds.index(Kind.TURN)] == [Kind.TEXT] + [Kind.TOOL_INPUT] * 4 + [
        Kind.TOOL_CALL] * 2
    streamed = [e for e in events if e.kind is Kind.TOOL_INPUT]
    assert [(e.tool.id, e.tool.index, e.tool.name, e.text) for e in streamed] == [
        ("toolu_1", 0, "weather", '{"city"'), ("toolu_1", 0, "weather", ': "Pari'),
        ("toolu_1", 0, "weather", 's"}'), ("toolu_2", 1, "clock", "{}")]
    assert streamed[2].tool.input == '{"city": "Paris"}'
    announced = [e.tool for e in events if e.kind is Kind.TOOL_CALL]
    assert [(t.id, t.index, t.input) for t in announced] == [
        ("toolu_1", 0, '{"city": "Paris"}'), ("toolu_2", 1, "{}")]
    assert [e.tool.result for e in events if e.kind is Kind.TOOL_RESULT] == [
        "15°C, cloudy in Paris", "12:00"]
    server.assert_consumed()


# -- model settings and the one-hour cache, on the wire ----------------------------------
#
# OpenRouter's ChatRequest (https://openrouter.ai/docs/api-reference/parameters): OpenAI's
# sampling and tool fields plus top_k and prompt_cache_key; cache_control {"type":
# "ephemeral", "ttl": "1h"} on the text parts of its Anthropic models
# (https://openrouter.ai/docs/features/prompt-caching).

def test_model_settings_and_a_one_hour_cache_go_out_to_openrouter(server):
    server.queue(PATH, stream_reply("text_keepalive.sse"))
    settings = nacelle.ModelSettings(temperature=0.5, top_k=30, seed=4, stop=("END",),
                                     extra_headers={"X-Title-Extra": "demo"})
    Agent(make_backend(server), "Be brief.", model_settings=settings,
          cache=nacelle.Cache(ttl="1h", key="conv-2")).run([user_text("Hi")])
    sent = server.requests[0]
    body = sent.json()
    assert {k: body[k] for k in ("temperature", "top_k", "seed", "stop", "prompt_cache_key")} == {
        "temperature": 0.5, "top_k": 30, "seed": 4, "stop": ["END"], "prompt_cache_key": "conv-2"}
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral",
                                                                  "ttl": "1h"}
    assert sent.headers["x-title-extra"] == "demo"
    assert sent.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("model, settings, cache, match", [
    ("openai/gpt-4.1", {}, nacelle.Cache(ttl="1h"), "the cache_ttl setting"),
    ("anthropic/claude-opus-4.7", {"temperature": 0.3}, None, "the temperature setting"),
    ("anthropic/claude-sonnet-5", {"top_k": 3}, None, "the top_k setting"),
])
def test_what_openrouter_would_drop_is_unsupported_at_construction(server, model, settings,
                                                                   cache, match):
    with pytest.raises(Unsupported, match=match):
        Agent(make_backend(server, model=model), "s",
              model_settings=nacelle.ModelSettings(**settings), cache=cache)


def test_a_reasoning_claude_behind_openrouter_takes_no_temperature(server):
    """Extended thinking refuses temperature, top_k and a forced tool choice
    (https://platform.claude.com/docs/en/build-with-claude/extended-thinking)."""
    backend = make_backend(server, model="anthropic/claude-sonnet-4.5")
    with pytest.raises(Unsupported, match="the temperature setting while the model thinks"):
        Agent(backend, "s", thinking=Thinking(effort=Effort.LOW),
              model_settings=nacelle.ModelSettings(temperature=0.3))
    Agent(backend, "s", model_settings=nacelle.ModelSettings(temperature=0.3))
    Agent(make_backend(server, model="openai/gpt-4.1"), "s", thinking=Thinking(effort=Effort.LOW),
          model_settings=nacelle.ModelSettings(temperature=0.3))
