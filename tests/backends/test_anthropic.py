"""The Anthropic backend end to end over HTTP: recorded-shape streams from a loopback
FakeServer, the transport's retries, keys, pickling, token counting, and an Agent run."""

import dataclasses
import logging
import pickle
import threading
import time
from pathlib import Path

import pytest

import nacelle
from nacelle import (
    APIError, ConfigError, Kind, MCPServer, Message, ProviderBlock, Request, Role, RunContext,
    Stop, StreamError, StreamTruncated, Text, ToolCall, Usage, user_text,
)
from nacelle import loop
from nacelle.backend import TurnEnd
from nacelle.backends import anthropic
from nacelle.pricing import price_for
from nacelle.testing.scripted import FakeClock
from nacelle.testing.server import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream, rechunk

from hostile import EMOJI, HIGH, LOW, assert_well_formed, chain

DATA = Path(__file__).resolve().parent.parent / "data" / "anthropic"
KEY = "sk-ant-api03-SECRET-do-not-leak-0123456789"
PATH = "/v1/messages"


def body(name, size=None):
    """A recorded-shape stream as chunks: one per event, or cut every ``size`` bytes."""
    raw = (DATA / name).read_bytes()
    if size:
        return rechunk([raw], size)
    return [event + b"\n\n" for event in raw.split(b"\n\n") if event]


def sse(name, size=None, **kw):
    return Reply(chunks=body(name, size), **kw)


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture(autouse=True)
def no_env_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def make(server, **kw):
    kw.setdefault("max_retries", 2)
    return anthropic.Backend(kw.pop("api_key", KEY), base_url=server.url, **kw)


def one_turn(backend, request=None, ctx=None):
    request = request or Request("Be brief.", messages=(user_text("hi"),))
    items = list(backend.turn(request, request.messages, ctx or RunContext()))
    assert isinstance(items[-1], TurnEnd)
    return items[:-1], items[-1]


def run_turns(backend, request, ctx, **settings):
    """A run of the loop around ``backend.turn``, as an Agent runs one."""
    return loop.run(request, ctx, backend.turn, settings=loop.RunSettings(**settings),
                    backend=backend.name)


def run(backend, request, ctx=None, **settings):
    return list(run_turns(backend, request, ctx or RunContext(), **settings))


# -- streams ----------------------------------------------------------------------------

def test_a_text_stream_with_pings_and_keepalive_comments_yields_each_delta(server):
    server.queue(PATH, sse("text_with_pings.sse"))
    events, end = one_turn(make(server))
    assert [(e.kind, e.text) for e in events] == [
        (Kind.TEXT, "Hello"), (Kind.TEXT, " — wörld"), (Kind.TEXT, "!")]
    assert end.parts == (Text("Hello — wörld!"),)
    assert end.stop is Stop.END
    tokens = Usage(input_tokens=14, output_tokens=12, cache_creation_tokens=2051)
    assert end.usage == price_for("anthropic", "claude-opus-5").priced(tokens)
    assert end.usage.priced and end.usage.cost > 0
    sent = server.requests[0]
    assert sent.path == PATH and sent.method == "POST"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert "anthropic-beta" not in sent.headers
    assert sent.json()["stream"] is True and sent.json()["model"] == "claude-opus-5"


@pytest.mark.parametrize("size", [None, 1, 5])
def test_an_emoji_split_into_surrogate_halves_over_two_deltas_arrives_whole(server, size):
    # fragments() cuts tool input every 7 characters: the pair falls across two deltas.
    chunks = anthropic_stream(
        ["Hi " + HIGH, LOW + "!", HIGH], thinking_deltas=[HIGH, LOW + " hm"],
        tool_calls=[("toolu_1", "face", '{"face": "abc' + HIGH + LOW + '"}')])
    server.queue(PATH, Reply(chunks=rechunk(chunks, size) if size else chunks))
    events, end = one_turn(make(server))
    assert [(e.kind, e.text) for e in events] == [
        (Kind.THINKING, EMOJI + " hm"), (Kind.TEXT, "Hi "), (Kind.TEXT, EMOJI + "!"),
        (Kind.TEXT, "\ufffd"),  # the last half never met its partner
        (Kind.TOOL_INPUT, '{"face"'), (Kind.TOOL_INPUT, ': "abc'),
        (Kind.TOOL_INPUT, EMOJI + '"}'), (Kind.TOOL_CALL, "")]
    assert events[-2].tool.input == events[-1].tool.input == '{"face": "abc' + EMOJI + '"}'
    assert end.parts[0].text == EMOJI + " hm"
    assert end.parts[1] == Text("Hi " + EMOJI + "!\ufffd")
    assert end.parts[2].input == '{"face": "abc' + EMOJI + '"}'
    assert_well_formed(events, end)


@pytest.mark.parametrize("size", [1, 7, 64])
def test_tool_input_split_mid_token_and_across_reads_is_reassembled(server, size):
    server.queue(PATH, sse("tool_use_split.sse", size))
    events, end = one_turn(make(server))
    assert [(e.kind, e.text) for e in events] == [
        (Kind.THINKING, "The user wants the weather; "),
        (Kind.THINKING, "I'll call get_weather."),
        (Kind.TEXT, "Let me check."),
        (Kind.TOOL_INPUT, '{"ci'), (Kind.TOOL_INPUT, 'ty": "San Fr'),
        (Kind.TOOL_INPUT, 'ancisco", "unit": "celsi'), (Kind.TOOL_INPUT, 'us"}'),
        (Kind.TOOL_CALL, "")]
    assert end.parts[1:] == (
        Text("Let me check."),
        ToolCall("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather",
                 '{"city": "San Francisco", "unit": "celsius"}'))
    assert end.parts[0].state == "EqQBCkgIARABGAIiQL5dfl1k3jQwPpK9v0ZC0Dg8pq4Jv2m3uwH0XlTfzX"
    assert end.stop is Stop.TOOLS
    assert end.usage.reasoning_tokens == 31 and end.usage.cache_read_tokens == 2410


def test_a_max_tokens_stop_inside_a_tool_call_keeps_it_unfinished_and_runs_nothing(server):
    server.queue(PATH, sse("max_tokens_in_tool.sse"))
    ran = []

    @nacelle.tool
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        ran.append(path)
        return "ok"

    events = run(make(server), Request("sys", messages=(user_text("write"),),
                                       tools=(write_file,)))
    # The cut call's input streamed; it was never announced, so nothing closes it.
    assert [e.kind for e in events] == [Kind.TOOL_INPUT, Kind.TOOL_INPUT, Kind.TURN, Kind.DONE]
    assert events[-1].stop is Stop.MAX_TOKENS and ran == []
    assistant = events[-1].messages[1]
    assert assistant.parts[0] == ToolCall(
        "toolu_01EKyzFxDkrqxoKzFPQnKm6t", "write_file",
        '{"path": "notes.md", "content": "# Notes\\n\\nThe first point is', finished=False)


def test_a_refusal_ends_the_run_with_stop_refusal(server):
    server.queue(PATH, sse("refusal.sse"))
    events = run(make(server), Request("sys", messages=(user_text("x"),)))
    assert events[0].text == "I can't help with that."
    assert events[-1].kind is Kind.DONE and events[-1].stop is Stop.REFUSAL


def test_an_overloaded_error_after_text_is_surfaced_not_retried(server):
    server.queue(PATH, sse("overloaded_after_text.sse"), sse("text_with_pings.sse"))
    clock = FakeClock()
    retrying = nacelle.Retry(make(server))
    seen = []
    with pytest.raises(StreamError) as caught:
        for event in run_turns(retrying, Request("sys", messages=(user_text("x"),)),
                                     RunContext(clock=clock)):
            seen.append(event)
    assert [e.text for e in seen] == ["Here is the start"]
    assert caught.value.type == "overloaded_error"
    assert "req_011CSHoEeqs5C35K2UUqR7Fy" in str(caught.value)
    assert nacelle.retryable(caught.value)  # retryable, but output was already shown
    assert len(server.requests) == 1 and clock.sleeps == []


def test_an_overloaded_error_before_any_output_is_retried_by_retry(server):
    server.queue(PATH, sse("overloaded_before_output.sse"), sse("text_with_pings.sse"))
    clock = FakeClock()
    events = list(run_turns(
        nacelle.Retry(make(server)), Request("sys", messages=(user_text("x"),)), RunContext(clock=clock)))
    assert "".join(e.text for e in events if e.kind is Kind.TEXT) == "Hello — wörld!"
    assert events[-1].stop is Stop.END
    assert len(server.requests) == 2 and len(clock.sleeps) == 1
    assert server.requests[0].body == server.requests[1].body


def test_a_body_that_ends_before_message_stop_is_truncated(server):
    chunks = body("text_with_pings.sse")[:-1]  # everything but message_stop, then EOF
    server.queue(PATH, Reply(chunks=chunks))
    with pytest.raises(StreamTruncated, match="message_stop"):
        one_turn(make(server))


def test_a_connection_dropped_mid_stream_is_truncated(server):
    server.queue(PATH, Reply(chunks=body("text_with_pings.sse", 40), drop_after=5))
    with pytest.raises(StreamTruncated):
        one_turn(make(server))


def test_a_data_line_that_is_not_json_is_a_stream_error(server):
    server.queue(PATH, Reply(chunks=[b"event: message_start\ndata: {not json\n\n"]))
    with pytest.raises(StreamError, match="not JSON"):
        one_turn(make(server))


def test_pricing_fills_each_turns_cost(server):
    server.queue(PATH, sse("tool_use_split.sse"))
    backend = make(server, pricing=anthropic.Pricing(5.0, 25.0, 0.5, 6.25))
    _, end = one_turn(backend)
    # 9 input, 89 output, 2410 cache reads, 0 cache writes
    assert end.usage.cost == pytest.approx((9 * 5 + 89 * 25 + 2410 * 0.5) / 1e6)
    assert backend.capabilities.cost and not anthropic.capabilities.cost


# -- server-side tools ------------------------------------------------------------------

def test_mcp_servers_send_the_beta_header_and_report_server_calls(server):
    server.queue(PATH, sse("mcp_tool.sse"))
    mcp = MCPServer("perception", "https://mcp.example.com/mcp", authorization_token="tok")
    events = run(make(server), Request("sys", messages=(user_text("today?"),), mcp=(mcp,)))
    calls = [e for e in events if e.kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT)]
    assert [(e.kind, e.tool.name, e.tool.server) for e in calls] == [
        (Kind.TOOL_CALL, "search_events", "perception"),
        (Kind.TOOL_RESULT, "search_events", "perception")]
    assert calls[0].tool.input == '{"query": "today"}'
    assert calls[1].tool.result == "3 events: launch, review, retro"
    sent = server.requests[0]
    assert sent.headers["anthropic-beta"] == "mcp-client-2025-11-20"
    assert sent.json()["mcp_servers"] == [{"type": "url", "url": "https://mcp.example.com/mcp",
                                           "name": "perception", "authorization_token": "tok"}]
    assert events[-1].stop is Stop.END


def test_a_paused_turn_is_sent_back_as_is_and_the_server_continues(server):
    server.queue(PATH, sse("pause_turn.sse"), sse("pause_resumed.sse"))
    events = run(make(server), Request("sys", messages=(user_text("news?"),)))
    kinds = [e.kind for e in events]
    assert kinds == [Kind.TEXT, Kind.TOOL_CALL, Kind.TURN, Kind.TOOL_RESULT, Kind.TEXT,
                     Kind.TURN, Kind.DONE]
    result = events[3].tool
    assert (result.id, result.name, result.server) == (
        "srvtoolu_014hJH82Qum7Td6UV8gDXThB", "web_search", "anthropic")
    second = server.requests[1].json()["messages"]
    assert second[-1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Searching.", "cache_control": {"type": "ephemeral"}},
        {"type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
         "name": "web_search", "input": {"query": "nacelle release notes"}}]}
    assert events[-1].stop is Stop.END


def test_a_paused_server_call_is_closed_when_the_iteration_cap_ends_the_run(server):
    server.queue(PATH, sse("pause_turn.sse"))
    events = run(make(server), Request("sys", messages=(user_text("news?"),)), max_iterations=1)
    kinds = [e.kind for e in events]
    assert kinds == [Kind.TEXT, Kind.TOOL_CALL, Kind.TURN, Kind.TOOL_RESULT, Kind.DONE]
    call, result = events[1].tool, events[3].tool
    assert (result.id, result.server) == (call.id, "anthropic")
    assert result.error == "not finished: the run ended before the server answered this call"
    assert events[-1].stop is Stop.ITERATIONS


# -- HTTP errors and retries ------------------------------------------------------------

def overloaded():
    return Reply.json({"type": "error", "error": {"type": "overloaded_error",
                                                  "message": "Overloaded"}}, status=529)


def test_a_529_is_retried_by_the_transport(server):
    server.queue(PATH, overloaded(), sse("text_with_pings.sse"))
    clock = FakeClock()
    _, end = one_turn(make(server), ctx=RunContext(clock=clock))
    assert end.parts == (Text("Hello — wörld!"),)
    assert len(server.requests) == 2 and len(clock.sleeps) == 1
    assert 0.375 <= clock.sleeps[0] <= 0.5


def test_a_429_honours_retry_after(server):
    limited = Reply.json({"type": "error", "error": {"type": "rate_limit_error",
                                                     "message": "Slow down"}},
                         status=429, headers={"retry-after": "7"})
    server.queue(PATH, limited, sse("text_with_pings.sse"))
    clock = FakeClock()
    one_turn(make(server), ctx=RunContext(clock=clock))
    assert clock.sleeps == [7.0] and len(server.requests) == 2


def test_retries_stop_after_max_retries(server):
    server.queue(PATH, overloaded(), overloaded())
    with pytest.raises(APIError) as caught:
        one_turn(make(server, max_retries=1), ctx=RunContext(clock=FakeClock()))
    assert caught.value.status == 529 and len(server.requests) == 2


def test_a_400_is_not_retried_and_says_what_the_api_said(server, caplog):
    server.queue(PATH, Reply.json(
        {"type": "error", "error": {"type": "invalid_request_error",
                                    "message": "max_tokens: must be at most 128000"},
         "request_id": "req_011CSHoBad"},
        status=400, headers={"request-id": "req_011CSHoBad"}))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(APIError) as caught:
        one_turn(make(server))
    err = caught.value
    assert (err.status, err.type, err.request_id) == (400, "invalid_request_error",
                                                      "req_011CSHoBad")
    assert "max_tokens: must be at most 128000" in str(err)
    assert len(server.requests) == 1
    assert KEY not in str(err) and KEY not in repr(err) and KEY not in caplog.text


def test_a_401_is_not_retried_and_names_the_key_variable_but_not_the_key(server, caplog):
    server.queue(PATH, Reply.json(
        {"type": "error", "error": {"type": "authentication_error",
                                    "message": f"invalid x-api-key {KEY}"}}, status=401))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(APIError) as caught:
        one_turn(make(server))
    text = str(caught.value)
    assert caught.value.status == 401 and "ANTHROPIC_API_KEY" in text
    assert KEY not in text and KEY not in repr(caught.value) and KEY not in caplog.text
    assert len(server.requests) == 1


# -- keys, construction, pickling -------------------------------------------------------

def test_a_missing_key_is_a_config_error_at_the_first_request_not_at_construction(server):
    backend = anthropic.Backend(base_url=server.url)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        one_turn(backend)
    assert server.requests == []


def test_the_environment_key_is_read_at_the_first_request(server, monkeypatch):
    backend = anthropic.Backend(base_url=server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    server.queue(PATH, sse("text_with_pings.sse"))
    one_turn(backend)
    assert server.requests[0].headers["x-api-key"] == "sk-ant-from-env"


def test_the_key_is_in_no_repr_or_log_line(server, caplog):
    caplog.set_level(logging.DEBUG)
    backend = make(server)
    server.queue(PATH, overloaded(), sse("text_with_pings.sse"))
    one_turn(backend, ctx=RunContext(clock=FakeClock()))
    assert KEY not in repr(backend) and KEY not in repr(backend._endpoint.transport)
    assert KEY not in caplog.text and caplog.text  # the retry was logged


@pytest.mark.parametrize("kwargs, match", [
    ({"model": ""}, "model"),
    ({"model": None}, "model"),
    ({"api_key": ""}, "api_key"),
    ({"api_key": 42}, "api_key"),
    ({"pricing": {"input": 5}}, "Pricing"),
    ({"base_url": "api.anthropic.com"}, "base_url"),
    ({"max_retries": -1}, "max_retries"),
    ({"timeout": 0}, "timeout"),
    ({"stall_timeout": -5}, "stall_timeout"),
])
def test_bad_construction_arguments_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        anthropic.Backend(**kwargs)


def test_the_defaults_and_capabilities(server):
    backend = anthropic.Backend()
    assert (backend.model, backend.base_url, backend.name) == (
        "claude-opus-5", "https://api.anthropic.com", "anthropic")
    assert anthropic.capabilities == nacelle.Capabilities(
        mcp=True, thinking=True, effort=True, min_budget=1024, cost=False,
        token_counting=True, images=True, structured_output=True, documents=True,
        tool_media=True, tool_search=True,
        context_edits=frozenset({"clear_tool_uses", "clear_thinking", "compact"}),
        native_tools=frozenset({
            "web_search", "web_search:max_uses", "web_search:allowed_domains",
            "web_search:blocked_domains", "web_fetch", "web_fetch:max_uses",
            "web_fetch:allowed_domains", "web_fetch:blocked_domains",
            "web_fetch:max_content_tokens", "code_execution"}),
        settings=frozenset({"temperature", "top_p", "top_k", "stop", "tool_choice",
                            "forced_tool_choice", "parallel_tool_calls", "extra_body",
                            "extra_headers", "cache_ttl"}),
        thinking_settings=frozenset({"stop", "seed", "tool_choice", "parallel_tool_calls",
                                     "extra_body", "extra_headers", "cache_ttl",
                                     "cache_key"}),
        thinks_by_default=True, max_temperature=1.0)
    # The default model has a published price, so this instance reports dollars; it
    # is a Claude that takes no sampling settings.
    assert backend.pricing == price_for("anthropic", "claude-opus-5") is not None
    assert backend.capabilities == dataclasses.replace(
        anthropic.capabilities, cost=True,
        settings=anthropic.capabilities.settings - {"temperature", "top_p", "top_k"},
        exclusive_settings=(frozenset({"temperature", "top_p"}),))
    assert isinstance(backend, nacelle.Backend)


def test_a_model_without_a_published_price_reports_no_dollars(server):
    server.queue(PATH, sse("text_with_pings.sse"))
    backend = make(server, model="claude-unreleased-9")
    assert backend.capabilities.cost is False
    _, end = one_turn(backend)
    assert (end.usage.cost, end.usage.priced) == (0.0, False)


def test_a_used_backend_pickles_and_the_copy_works(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env-key-12345")
    backend = anthropic.Backend(base_url=server.url, pricing=anthropic.Pricing(1.0, 2.0))
    server.queue(PATH, sse("text_with_pings.sse"), sse("text_with_pings.sse"))
    one_turn(backend)
    data = pickle.dumps(backend)
    assert b"sk-ant-env-key-12345" not in data  # an environment key stays behind
    copy = pickle.loads(data)
    assert copy.pricing == backend.pricing and copy.capabilities.cost
    one_turn(copy)
    assert server.requests[1].headers["x-api-key"] == "sk-ant-env-key-12345"


def test_an_explicit_key_travels_in_the_pickle(server):
    copy = pickle.loads(pickle.dumps(make(server)))
    server.queue(PATH, sse("text_with_pings.sse"))
    one_turn(copy)
    assert server.requests[0].headers["x-api-key"] == KEY


# -- count_tokens -----------------------------------------------------------------------

def test_count_tokens_posts_the_body_without_max_tokens_and_stream(server):
    server.queue("/v1/messages/count_tokens", Reply.json({"input_tokens": 2095}))
    mcp = MCPServer("perception", "https://mcp.example.com/mcp")
    request = Request("sys", messages=(user_text("count me"),), mcp=(mcp,))
    assert make(server).count_tokens(request, RunContext()) == 2095
    sent = server.requests[0]
    assert sent.path == "/v1/messages/count_tokens"
    assert "max_tokens" not in sent.json() and "stream" not in sent.json()
    assert sent.json()["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "count me", "cache_control": {"type": "ephemeral"}}]}]
    assert sent.headers["anthropic-beta"] == "mcp-client-2025-11-20"


def test_a_count_without_input_tokens_is_a_stream_error(server):
    server.queue("/v1/messages/count_tokens", Reply.json({"tokens": 3}))
    with pytest.raises(StreamError, match="input_tokens"):
        make(server).count_tokens(Request("sys", messages=(user_text("x"),)), RunContext())


# -- an Agent run across three turns ----------------------------------------------------

@nacelle.tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: The city.
        unit: celsius or fahrenheit.
    """
    return {"San Francisco": "18 degrees, fog", "Paris": "21 degrees, sun"}[city]


def test_an_agent_runs_a_real_tool_across_three_turns_and_sends_exact_bodies(server):
    server.queue(PATH, sse("tool_use_split.sse", 13), sse("second_tool_use.sse"),
                 sse("text_with_pings.sse"))
    agent = nacelle.Agent(make(server), "You report the weather.", tools=[get_weather],
                          max_tokens=2048)
    result = agent.run([user_text("Weather in SF, then Paris?")])

    assert result.text == "Hello — wörld!" and result.stop is Stop.END and result.turns == 3
    assert result.usage.input_tokens == 9 + 40 + 14
    cache = {"type": "ephemeral"}
    schema = get_weather.schema
    tools = [{"name": "get_weather", "description": get_weather.description,
              "input_schema": schema, "eager_input_streaming": True, "cache_control": cache}]
    system = [{"type": "text", "text": "You report the weather.", "cache_control": cache}]
    head = {"model": "claude-opus-5", "max_tokens": 2048, "system": system}
    tail = {"tools": tools, "thinking": {"type": "adaptive"}, "stream": True}
    question = {"type": "text", "text": "Weather in SF, then Paris?"}
    first_answer = [
        {"type": "thinking",
         "thinking": "The user wants the weather; I'll call get_weather.",
         "signature": "EqQBCkgIARABGAIiQL5dfl1k3jQwPpK9v0ZC0Dg8pq4Jv2m3uwH0XlTfzX"},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather",
         "input": {"city": "San Francisco", "unit": "celsius"}},
    ]
    first_result = {"type": "tool_result", "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                    "content": "18 degrees, fog", "is_error": False}
    second_answer = [{"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9",
                      "name": "get_weather", "input": {"city": "Paris", "unit": "celsius"}}]
    second_result = {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                     "content": "21 degrees, sun", "is_error": False}

    bodies = [r.json() for r in server.requests]
    assert bodies[0] == {**head, "messages": [
        {"role": "user", "content": [{**question, "cache_control": cache}]},
    ], **tail}
    assert bodies[1] == {**head, "messages": [
        {"role": "user", "content": [{**question, "cache_control": cache}]},
        {"role": "assistant", "content": first_answer},
        {"role": "user", "content": [{**first_result, "cache_control": cache}]},
    ], **tail}
    assert bodies[2] == {**head, "messages": [
        {"role": "user", "content": [question]},
        {"role": "assistant", "content": first_answer},
        {"role": "user", "content": [{**first_result, "cache_control": cache}]},
        {"role": "assistant", "content": second_answer},
        {"role": "user", "content": [{**second_result, "cache_control": cache}]},
    ], **tail}
    # Replayed tool input keeps the model's bytes (and key order) exactly.
    assert '"input":{"city":"San Francisco","unit":"celsius"}' in server.requests[1].body.decode()
    # Fine-grained tool streaming is the tool's field, with no beta header to send.
    assert all("anthropic-beta" not in r.headers for r in server.requests)
    server.assert_consumed()


def test_an_agent_streams_each_calls_input_as_it_is_written_then_announces_the_call(server):
    # The FakeServer's Anthropic body streams each tool input in 7-character fragments.
    calls = [("toolu_1", "get_weather", '{"city": "Paris", "unit": "celsius"}'),
             ("toolu_2", "get_weather", '{"city": "Zürich", "unit": "celsius"}')]
    server.queue(PATH, Reply(chunks=anthropic_stream(["Checking."], tool_calls=calls)),
                 Reply(chunks=anthropic_stream(["Both sunny."])))
    agent = nacelle.Agent(make(server), "You report the weather.", tools=[get_weather])
    events = list(agent.stream([user_text("Paris and Zürich?")]))

    kinds = [e.kind for e in events]
    assert kinds[:kinds.index(Kind.TURN)] == [Kind.TEXT] + [Kind.TOOL_INPUT] * 6 + [
        Kind.TOOL_INPUT] * 6 + [Kind.TOOL_CALL] * 2
    streamed = [e for e in events if e.kind is Kind.TOOL_INPUT]
    for index, (call_id, name, arguments) in enumerate(calls):
        own = [e for e in streamed if e.tool.index == index]
        assert {(e.tool.id, e.tool.name) for e in own} == {(call_id, name)}
        assert "".join(e.text for e in own) == own[-1].tool.input == arguments
        assert len(own) > 3
    announced = [e.tool for e in events if e.kind is Kind.TOOL_CALL]
    assert [(t.id, t.index, t.input) for t in announced] == [
        (call_id, index, arguments) for index, (call_id, _, arguments) in enumerate(calls)]
    assert [e.tool.id for e in events if e.kind is Kind.TOOL_RESULT] == ["toolu_1", "toolu_2"]
    assert events[-1].stop is Stop.END
    server.assert_consumed()


def test_a_three_turn_tool_run_uses_one_connection(server):
    server.queue(PATH, sse("tool_use_split.sse", 13), sse("second_tool_use.sse"),
                 sse("text_with_pings.sse"))
    agent = nacelle.Agent(make(server), "You report the weather.", tools=[get_weather])
    result = agent.run([user_text("Weather in SF, then Paris?")])
    assert result.turns == 3 and result.stop is Stop.END
    assert [r.connection for r in server.requests] == [1, 1, 1]
    assert server.connections == 1 and server.disconnects == 0


@pytest.mark.slow
def test_pings_after_message_stop_delay_the_turn_by_at_most_the_drain_bound(server):
    pings = [(b'event: ping\ndata: {"type": "ping"}\n\n', 0.05)] * 100  # 5 s of them
    server.queue(PATH, Reply(chunks=body("tool_use_split.sse") + pings),
                 sse("text_with_pings.sse"))
    agent = nacelle.Agent(make(server), "You report the weather.", tools=[get_weather])
    started = time.monotonic()
    result = agent.run([user_text("Weather in SF?")])
    assert time.monotonic() - started < 3.0  # about one second of draining, not five
    assert result.turns == 2 and result.text == "Hello — wörld!"
    assert server.connections == 2 and server.wait_disconnects(1, timeout=1.0)


# -- cancellation, stalls and what the Agent refuses ------------------------------------

@pytest.mark.slow
def test_cancelling_mid_stream_closes_the_response_at_once(server):
    chunks = body("text_with_pings.sse")
    server.queue(PATH, Reply(chunks=chunks[:4] + [(chunks[4], 30.0)] + chunks[5:]))
    ctx = RunContext()
    timer = threading.Timer(0.2, ctx.cancel)
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(nacelle.Cancelled):
            run(make(server), Request("sys", messages=(user_text("x"),)), ctx)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 5.0  # not the 30 s the server would have waited
    assert server.wait_disconnects(1, timeout=5.0)


@pytest.mark.slow
def test_pings_alone_do_not_keep_a_stalled_stream_alive(server):
    chunks = body("text_with_pings.sse")[:2]
    ping = b"event: ping\ndata: {\"type\": \"ping\"}\n\n"
    server.queue(PATH, Reply(chunks=chunks + [(ping, 0.1)] * 40))
    started = time.monotonic()
    with pytest.raises(StreamError, match="stall") as caught:
        one_turn(make(server, stall_timeout=0.5))
    assert time.monotonic() - started < 3.0
    assert nacelle.retryable(caught.value)


def test_an_agent_refuses_a_thinking_budget_below_1024():
    with pytest.raises(nacelle.Unsupported, match="anthropic"):
        nacelle.Agent(anthropic.Backend(), "sys", thinking=nacelle.Thinking(budget=1000))


def test_an_agent_accepts_mcp_servers_effort_and_a_budget_of_1024():
    agent = nacelle.Agent(
        anthropic.Backend(), "sys",
        thinking=nacelle.Thinking(effort=nacelle.Effort.HIGH, budget=1024, show=True),
        mcp=[MCPServer("perception", "https://mcp.example.com/mcp")])
    assert pickle.loads(pickle.dumps(agent)).backend.name == "anthropic"


# -- hostile streams and answers through the real transport ------------------------------

def assert_no_key(err):
    texts = [str(err), repr(err), repr(err.args), repr(getattr(err, "type", None)),
             repr(getattr(err, "request_id", None))]
    texts += [f"{type(e).__name__} {e!r} {e.args!r}" for e in chain(err)]
    for text in texts:
        assert KEY[:16] not in text  # not even the part a preview's cut would leave


def raw_events(*lines):
    return Reply(chunks=[line.encode() + b"\n\n" for line in lines])


START = ('event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
         '"type":"message","role":"assistant","content":[],"usage":{"input_tokens":3}}}')


@pytest.mark.parametrize("line", [
    'event: error\ndata: {"type":"error","error":{"type":"authentication_error",'
    f'"message":"x-api-key {KEY} is invalid; header was Bearer {KEY}"}},'
    f'"request_id":"req_{KEY}"}}',
    'event: error\ndata: {"type":"error","error":{"type":"invalid_' + KEY + '"}}',
    'event: content_block_delta\ndata: {"type": "content_block_delta", "echo": "'
    + "x" * 140 + KEY + '", ',
    'event: ping\ndata: {"key": "Bearer ' + KEY + '", "n": NaN}',
], ids=["in-band error", "error type", "broken line", "NaN line"])
def test_a_key_echoed_inside_the_stream_never_reaches_the_error(server, line):
    server.queue(PATH, raw_events(START, line))
    with pytest.raises(StreamError) as caught:
        one_turn(make(server))
    assert_no_key(caught.value)
    assert "<hidden>" in str(caught.value)


@pytest.mark.parametrize("data", ["[" * 100_000, '{"type":"ping","n":Infinity}',
                                  '{"type":"ping","n":1e400}'],
                         ids=["100k lists", "Infinity", "1e400"])
def test_a_data_line_json_cannot_hold_is_a_stream_error(server, data):
    server.queue(PATH, raw_events(START, f"event: ping\ndata: {data}"))
    with pytest.raises(StreamError, match="not JSON"):
        one_turn(make(server))


def test_server_calls_announced_before_a_failure_are_closed_before_the_error(server):
    server.queue(PATH, raw_events(
        START,
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        '"content_block":{"type":"server_tool_use","id":"srvtoolu_9","name":"web_search",'
        '"input":{"query":"x"}}}',
        'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
        'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        '"message":"Overloaded"}}'))
    seen = []
    with pytest.raises(StreamError, match="overloaded_error"):
        for event in run_turns(make(server), Request("sys", messages=(user_text("q"),)),
                                         RunContext()):
            seen.append(event)
    assert [(e.kind, e.tool.id, e.tool.failed) for e in seen] == [
        (Kind.TOOL_CALL, "srvtoolu_9", False), (Kind.TOOL_RESULT, "srvtoolu_9", True)]


@pytest.mark.parametrize("body", [
    b"[" * 100_000, b'{"input_tokens": ' + b"[" * 100_000, b'{"input_tokens": NaN}',
    b'{"input_tokens": Infinity}', b'{"input_tokens": -5}', b'{"input_tokens": 1e400}',
    b'{"input_tokens": 1' + b"0" * 400 + b"}", b'{"input_tokens": 12.0}',
    b'{"input_tokens": true}', b'{"input_tokens": "12"}',
], ids=["100k lists", "100k inside", "NaN", "Infinity", "-5", "1e400", "10**400", "12.0",
        "true", "a string"])
def test_a_token_count_that_is_no_count_is_a_stream_error(server, body):
    server.queue("/v1/messages/count_tokens", Reply(chunks=(body,), mode="length",
                                                    content_type="application/json"))
    with pytest.raises(StreamError):
        make(server).count_tokens(Request("sys", messages=(user_text("x"),)), RunContext())


def test_a_paused_turns_open_calls_are_read_from_the_trailing_assistant_messages():
    call = ProviderBlock("anthropic", '{"type":"server_tool_use","id":"s1","name":"web_search"}')
    answered = ProviderBlock("anthropic", '{"type":"server_tool_use","id":"s2","name":"f"}')
    result = ProviderBlock("anthropic", '{"type":"web_search_tool_result","tool_use_id":"s2"}')
    old = ProviderBlock("anthropic", '{"type":"mcp_tool_use","id":"s0","name":"g",'
                                     '"server_name":"p"}')
    messages = (user_text("q"), Message(Role.ASSISTANT, (old,)), user_text("more"),
                Message(Role.ASSISTANT, (call, answered, result)))
    assert anthropic._open_server_calls(messages) == {"s1": ("web_search", "anthropic")}
    assert anthropic._open_server_calls(messages + (user_text("next"),)) == {}


def test_the_base_url_comes_from_anthropic_base_url_unless_given(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    assert anthropic.Backend(api_key="sk-ant-x").base_url == "http://127.0.0.1:9"
    assert anthropic.Backend(api_key="sk-ant-x", base_url="http://127.0.0.1:8").base_url == (
        "http://127.0.0.1:8")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    assert anthropic.Backend(api_key="sk-ant-x").base_url == "https://api.anthropic.com"


# -- model settings and the one-hour cache, on the wire ---------------------------------
#
# Shapes from the Messages API reference (https://platform.claude.com/docs/en/api/
# messages/create) and the SDK's MessageCreateParams / ToolChoiceParam /
# CacheControlEphemeralParam (anthropic-sdk-python src/anthropic/types/).

def settings_agent(server, settings=None, cache=None, **kw):
    kw.setdefault("thinking", nacelle.Thinking(effort=nacelle.Effort.NONE))
    kw.setdefault("tools", [get_weather])
    backend = make(server, model=kw.pop("model", "claude-sonnet-4-5"))
    return nacelle.Agent(backend, "You report the weather.", model_settings=settings,
                         cache=cache, **kw)


def test_model_settings_go_out_as_the_messages_api_fields(server):
    """temperature, top_k, stop_sequences, tool_choice {"type": "tool", "name"} with
    disable_parallel_tool_use, extra_body merged last, extra_headers beside the key."""
    server.queue(PATH, Reply(chunks=anthropic_stream(["Fog."])))
    settings = nacelle.ModelSettings(
        temperature=0.3, top_k=40, stop=["\n\nEND"], tool_choice="get_weather",
        parallel_tool_calls=False, extra_body={"metadata": {"user_id": "u-1"}},
        extra_headers={"X-Trace-Id": "trace-1"})
    settings_agent(server, settings).run([user_text("Weather in SF?")])
    sent = server.requests[0]
    body = sent.json()
    assert (body["temperature"], body["top_k"], body["stop_sequences"]) == (0.3, 40, ["\n\nEND"])
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather",
                                   "disable_parallel_tool_use": True}
    assert body["metadata"] == {"user_id": "u-1"}
    assert "top_p" not in body and "seed" not in body
    assert sent.headers["x-trace-id"] == "trace-1" and sent.headers["x-api-key"] == KEY


@pytest.mark.parametrize("settings, choice", [
    ({"tool_choice": "required"}, {"type": "any"}),
    ({"tool_choice": "auto", "parallel_tool_calls": False},
     {"type": "auto", "disable_parallel_tool_use": True}),
    ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
    ({"tool_choice": "none", "parallel_tool_calls": False}, {"type": "none"}),
    ({"parallel_tool_calls": True}, None),
])
def test_tool_choice_takes_the_apis_types(server, settings, choice):
    """ToolChoiceAnyParam, ToolChoiceAutoParam and ToolChoiceNoneParam (the last has no
    disable_parallel_tool_use); parallel calls allowed is the API's default."""
    server.queue(PATH, Reply(chunks=anthropic_stream(["Fog."])))
    settings_agent(server, nacelle.ModelSettings(**settings)).run([user_text("SF?")])
    assert server.requests[0].json().get("tool_choice") == choice


def test_a_run_without_tools_sends_no_tool_choice(server):
    server.queue(PATH, Reply(chunks=anthropic_stream(["Hi."])))
    settings_agent(server, nacelle.ModelSettings(tool_choice="none", top_p=0.5),
                   tools=[]).run([user_text("Hi")])
    body = server.requests[0].json()
    assert "tool_choice" not in body and body["top_p"] == 0.5


@pytest.mark.parametrize("model, options, settings, match", [
    # Claude Opus 4.7 and later refuse sampling on every request
    ("claude-opus-5", {}, {"temperature": 0.2}, "the temperature setting"),
    ("claude-opus-4-7", {}, {"top_p": 0.9}, "the top_p setting"),
    ("claude-sonnet-5", {}, {"top_k": 5}, "the top_k setting"),
    ("claude-fable-5", {}, {"temperature": 1}, "the temperature setting"),
    # the Messages API has no seed
    ("claude-sonnet-4-5", {}, {"seed": 1}, "the seed setting"),
    # temperature runs from 0 to 1 there
    ("claude-sonnet-4-5", {}, {"temperature": 1.5}, "a temperature of 1.5"),
    # while the model thinks (nacelle's default: adaptive thinking)
    ("claude-sonnet-4-5", {"thinking": nacelle.Thinking()}, {"temperature": 0.5},
     "the temperature setting while the model thinks"),
    ("claude-sonnet-4-5", {"thinking": nacelle.Thinking(budget=2048)}, {"top_k": 5},
     "the top_k setting while the model thinks"),
    ("claude-sonnet-4-5", {"thinking": nacelle.Thinking()}, {"tool_choice": "required"},
     "the forced_tool_choice setting while the model thinks"),
])
def test_what_the_model_refuses_is_unsupported_at_construction(server, model, options,
                                                               settings, match):
    with pytest.raises(nacelle.Unsupported, match=match):
        settings_agent(server, nacelle.ModelSettings(**settings), model=model, **options)
    assert server.requests == []


def test_settings_the_model_takes_while_thinking_are_accepted(server):
    settings_agent(server, nacelle.ModelSettings(stop="END", tool_choice="auto"),
                   model="claude-opus-5", thinking=nacelle.Thinking())
    settings_agent(server, nacelle.ModelSettings(temperature=0.0), model="claude-3-5-haiku-20241022")


def test_the_prompt_cache_key_is_openais_and_unsupported_here(server):
    with pytest.raises(nacelle.Unsupported, match="the cache_key setting"):
        settings_agent(server, cache=nacelle.Cache(key="run-1"))


def test_a_one_hour_cache_marks_every_breakpoint_of_every_turn_with_its_ttl(server):
    """cache_control {"type": "ephemeral", "ttl": "1h"} on the last tool, the system
    block and the conversation's breakpoints, the second turn's included (whose body
    reuses the first turn's encoded prefix)."""
    server.queue(PATH, Reply(chunks=anthropic_stream(
        [], tool_calls=[("toolu_1", "get_weather", '{"city": "Paris"}')])),
        Reply(chunks=anthropic_stream(["Sunny."])))
    settings_agent(server, cache=nacelle.Cache(ttl="1h")).run([user_text("Paris?")])
    hour = {"type": "ephemeral", "ttl": "1h"}
    for sent in server.requests:
        body = sent.json()
        marks = [b["cache_control"] for m in body["messages"] for b in m["content"]
                 if "cache_control" in b]
        assert body["tools"][-1]["cache_control"] == hour
        assert body["system"][0]["cache_control"] == hour
        assert marks and all(mark == hour for mark in marks)
    assert len([b for m in server.requests[1].json()["messages"] for b in m["content"]
                if "cache_control" in b]) == 2


def test_a_five_minute_cache_sends_the_plain_marker(server):
    server.queue(PATH, Reply(chunks=anthropic_stream(["Hi."])))
    settings_agent(server, cache=nacelle.Cache(ttl="5m")).run([user_text("Hi")])
    assert server.requests[0].json()["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_one_hour_writes_are_priced_at_twice_the_input_rate(server):
    """usage.cache_creation splits the writes by lifetime (the SDK's CacheCreation);
    Anthropic prices a five-minute write at 1.25x base input and a one-hour write at
    2x (https://platform.claude.com/docs/en/about-claude/pricing)."""
    # 100,000 tokens: under the long-context threshold, where other rates apply
    usage = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 100_000,
             "cache_creation": {"ephemeral_5m_input_tokens": 40_000,
                                "ephemeral_1h_input_tokens": 60_000}}
    server.queue(PATH, Reply(chunks=anthropic_stream(["Hi."], usage=usage)))
    price = price_for("anthropic", "claude-sonnet-4-5")
    result = settings_agent(server, cache=nacelle.Cache(ttl="1h")).run([user_text("Hi")])
    assert (result.usage.cache_creation_tokens, result.usage.cache_write_1h_tokens) == (
        100_000, 60_000)
    assert result.usage.cost == pytest.approx((0.04 * 1.25 + 0.06 * 2) * price.input)
    assert price.cache_write_1h == 2 * price.input and price.cache_write == 1.25 * price.input


@pytest.mark.parametrize("name", ["anthropic-version", "Content-Type", "Accept"])
def test_extra_headers_never_replace_a_header_the_backend_sends(server, name):
    agent = settings_agent(server, nacelle.ModelSettings(extra_headers={name: "other"}))
    with pytest.raises(ConfigError, match=f"may not replace the {name} header") as caught:
        agent.run([user_text("Hi")])
    assert KEY not in str(caught.value) and server.requests == []


def test_extra_headers_join_the_beta_header_the_request_needs(server):
    server.queue(PATH, Reply(chunks=anthropic_stream(["Hi."])))
    settings = nacelle.ModelSettings(extra_headers={"anthropic-beta": "context-1m-2025-08-07"})
    settings_agent(server, settings, tools=[],
                   mcp=[MCPServer("docs", "https://mcp.example.com/sse")]).run([user_text("Hi")])
    assert server.requests[0].headers["anthropic-beta"] == (
        "mcp-client-2025-11-20,context-1m-2025-08-07")


def test_extra_headers_values_stay_out_of_logs_and_reprs(server, caplog):
    caplog.set_level(logging.DEBUG)
    server.queue(PATH, Reply(chunks=anthropic_stream(["Hi."])))
    settings = nacelle.ModelSettings(extra_headers={"X-Tenant": "tenant-hush-42"})
    agent = settings_agent(server, settings)
    agent.run([user_text("Hi")])
    assert "tenant-hush-42" not in caplog.text + repr(agent) + repr(settings)
    assert KEY not in caplog.text


@pytest.mark.parametrize("model, refused", [
    ("claude-sonnet-4-5", True), ("claude-haiku-4-5-20251001", True),
    ("claude-opus-4-1", True), ("claude-sonnet-4-0", False),
    ("claude-3-7-sonnet-20250219", False),
])
def test_temperature_and_top_p_together_are_refused_where_claude_takes_one_only(
        server, model, refused):
    """"Use only temperature OR top_p, not both" from Claude Sonnet 4.5 on
    (https://platform.claude.com/docs/en/about-claude/models/migrating-to-claude-4)."""
    both = nacelle.ModelSettings(temperature=0.5, top_p=0.9)
    if refused:
        with pytest.raises(nacelle.Unsupported, match="temperature and top_p together"):
            settings_agent(server, both, model=model)
        settings_agent(server, nacelle.ModelSettings(top_p=0.9), model=model)
    else:
        settings_agent(server, both, model=model)
