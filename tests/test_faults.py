"""The fault matrix: real faults from a loopback server, survived by the whole stack.

Every row runs against both HTTP backends (Anthropic and OpenRouter) through
``FakeServer`` — a real socket, real timeouts, real dropped connections — and states
its exact outcome: what is raised, how many requests the server saw, what the
consumer was shown. Rows that are about waiting (Retry-After, budgets, read and stall
timeouts) use real time with small values and generous upper bounds; the others run
on a ``FakeClock`` so retry delays are recorded instead of slept.

Only loopback is ever contacted: an autouse guard refuses any other address, so even
a wrong base URL in a failing test cannot reach the network.
"""

import logging
import socket
import time
import traceback
from dataclasses import dataclass
from typing import Callable, List

import pytest

import nacelle
from nacelle import (
    Agent, APIError, Kind, Request, Retry, RetryBudgetExceeded, RetryOptions, RunContext,
    Stop, StreamError, StreamTruncated, TransportError, attempt, retryable, user_text,
)
from nacelle import ConfigError
from nacelle.backends import anthropic, openrouter
from nacelle.loop import run
from nacelle.testing import FakeClock, FakeServer, Reply
from nacelle.testing import wire

ANTHROPIC_KEY = "sk-ant-api03-FAULTS-secret-0123456789abcdef"
OPENROUTER_KEY = "sk-or-v1-FAULTS-secret-0123456789abcdef"
KEYS = (ANTHROPIC_KEY, OPENROUTER_KEY, "FAULTS-secret")

PING = b'event: ping\ndata: {"type": "ping"}\n\n'


# -- the two providers, described once -------------------------------------------------


@dataclass(frozen=True)
class Provider:
    """What differs between the backends in this matrix: the wire, not the outcome."""

    name: str
    path: str
    key: str
    key_variable: str
    overloaded_status: int
    keepalive: bytes
    garbage: bytes
    garbage_names: str  # what the error must name about the garbage
    make_backend: Callable[..., object]
    stream: Callable[..., List[bytes]]
    in_band: Callable[..., List[bytes]]
    in_band_words: str
    bad_request: dict

    def backend(self, url: str, **options):
        return self.make_backend(url, self.key, **options)


def _anthropic_backend(url, key, **options):
    return anthropic.Backend(key, base_url=url, **options)


def _openrouter_backend(url, key, **options):
    return openrouter.Backend(key, model="anthropic/claude-haiku-4.5", base_url=url + "/api/v1",
                              **options)


def _anthropic_stream(texts=("Alpha", "Beta"), tool_calls=()):
    return wire.anthropic_stream(text_deltas=texts, tool_calls=tool_calls)


def _openrouter_stream(texts=("Alpha", "Beta"), tool_calls=()):
    return wire.openrouter_stream(content_deltas=texts, tool_calls=tool_calls)


ANTHROPIC = Provider(
    name="anthropic",
    path="/v1/messages",
    key=ANTHROPIC_KEY,
    key_variable="ANTHROPIC_API_KEY",
    overloaded_status=529,
    keepalive=PING,
    garbage=b"event: content_block_delta\ndata: {not json\n\n",
    garbage_names="content_block_delta",
    make_backend=_anthropic_backend,
    stream=_anthropic_stream,
    in_band=lambda texts, tool_calls=(): wire.anthropic_stream(
        text_deltas=texts, tool_calls=tool_calls, error=("overloaded_error", "Overloaded")),
    in_band_words="overloaded_error",
    bad_request={"type": "error", "request_id": "req_011FAULTS",
                 "error": {"type": "invalid_request_error",
                           "message": "max_tokens: Field required"}},
)

OPENROUTER = Provider(
    name="openrouter",
    path="/api/v1/chat/completions",
    key=OPENROUTER_KEY,
    key_variable="OPENROUTER_API_KEY",
    overloaded_status=503,
    keepalive=wire.KEEPALIVE,
    garbage=b"data: {not json\n\n",
    garbage_names="{not json",  # an unnamed event: the error quotes its data
    make_backend=_openrouter_backend,
    stream=_openrouter_stream,
    in_band=lambda texts, tool_calls=(): wire.openrouter_stream(
        content_deltas=texts, tool_calls=tool_calls, error=(429, "Rate limit exceeded")),
    in_band_words="429",
    bad_request={"error": {"code": 400, "message": "max_tokens: Field required"}},
)


@pytest.fixture(params=[ANTHROPIC, OPENROUTER], ids=lambda p: p.name)
def provider(request):
    return request.param


@pytest.fixture
def server():
    with FakeServer() as fake:
        yield fake


@pytest.fixture(autouse=True)
def no_keys_from_the_environment(monkeypatch):
    """Keys come from the tests only; tests/conftest.py keeps proxies out and every
    connection on loopback."""
    for name in ("ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def no_key_in_logs(caplog):
    """Every row runs with DEBUG logging on, and no log line (or logged traceback) may
    hold a key."""
    with caplog.at_level(logging.DEBUG, logger="nacelle"):
        yield caplog
    for key in KEYS:
        assert key not in caplog.text


def request():
    return Request("Be brief.", messages=(user_text("Hi"),))


def run_turns(backend, request, ctx):
    """A run of the loop around ``backend.turn``, as an Agent runs one, on ``ctx``."""
    return run(request, ctx, backend.turn, backend=backend.name)


def clocked():
    """A run context whose sleeps are recorded, not slept."""
    return RunContext(clock=FakeClock())


def texts(events):
    return [e.text for e in events if e.kind is Kind.TEXT]


def assert_secret_free(err):
    for text in (str(err), repr(err), "".join(traceback.format_exception(
            type(err), err, err.__traceback__))):
        for key in KEYS:
            assert key not in text


def split_before_output(chunks):
    """The chunks before the first one carrying model text, and the index of that one."""
    first = next(i for i, chunk in enumerate(chunks) if b"Alpha" in chunk)
    return chunks[:first], first


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- 1-6: what the transport retries, and what it does not ---------------------------------


def test_1_connection_refused_is_retried_then_a_transport_error_naming_the_host(provider):
    port = closed_port()
    ctx = clocked()
    backend = provider.backend(f"http://127.0.0.1:{port}")
    with pytest.raises(TransportError) as caught:
        list(run_turns(backend, request(), ctx))
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert "connection refused" in str(caught.value)
    assert len(ctx.clock.sleeps) == 2  # the default max_retries=2, each after a refusal
    assert retryable(caught.value)
    assert_secret_free(caught.value)


def test_2_a_connection_dropped_before_the_status_line_is_retried(provider, server):
    server.queue(provider.path, Reply(chunks=[b"x"], drop_after=0),
                 Reply(chunks=provider.stream()))
    ctx = clocked()
    events = list(run_turns(provider.backend(server.url), request(), ctx))
    assert texts(events) == ["Alpha", "Beta"]
    assert events[-1].kind is Kind.DONE and events[-1].stop is Stop.END
    assert len(server.requests) == 2 and len(ctx.clock.sleeps) == 1
    server.assert_consumed()


@pytest.mark.slow
def test_3_a_429_with_retry_after_1_is_retried_once_after_a_second(provider, server):
    server.queue(provider.path, Reply.json({}, status=429, headers={"retry-after": "1"}),
                 Reply(chunks=provider.stream()))
    started = time.monotonic()
    events = list(run_turns(provider.backend(server.url), request(), RunContext()))
    elapsed = time.monotonic() - started
    assert texts(events) == ["Alpha", "Beta"]
    assert len(server.requests) == 2
    assert 1.0 <= elapsed < 4.0


def test_4_overloaded_twice_then_200_succeeds_on_the_third_request(provider, server):
    overloaded = Reply.json({"error": {"type": "overloaded_error", "message": "Overloaded"}},
                            status=provider.overloaded_status)
    server.queue(provider.path, overloaded, overloaded, Reply(chunks=provider.stream()))
    ctx = clocked()
    events = list(run_turns(provider.backend(server.url), request(), ctx))
    assert texts(events) == ["Alpha", "Beta"]
    assert len(server.requests) == 3 and len(ctx.clock.sleeps) == 2
    server.assert_consumed()


def test_5_x_should_retry_false_on_a_500_is_not_retried_by_anything(provider, server):
    server.queue(provider.path, Reply.json({"error": {"message": "boom"}}, status=500,
                                           headers={"x-should-retry": "false"}))
    ctx = clocked()
    with pytest.raises(APIError) as caught:
        list(run_turns(Retry(provider.backend(server.url)), request(), ctx))
    assert caught.value.status == 500 and not retryable(caught.value)
    assert len(server.requests) == 1 and ctx.clock.sleeps == []
    assert attempt(caught.value) == 1


def test_6_a_400_is_not_retried_and_carries_what_the_provider_said_to_fix(provider, server):
    server.queue(provider.path, Reply.json(provider.bad_request, status=400))
    ctx = clocked()
    with pytest.raises(APIError) as caught:
        list(run_turns(Retry(provider.backend(server.url)), request(), ctx))
    assert caught.value.status == 400 and not retryable(caught.value)
    assert "max_tokens: Field required" in str(caught.value)
    assert len(server.requests) == 1 and ctx.clock.sleeps == []
    assert_secret_free(caught.value)


def test_6_a_401_is_not_retried_and_names_the_key_variable_but_not_the_key(provider, server):
    server.queue(provider.path, Reply.json(
        {"error": {"type": "authentication_error", "message": "invalid x-api-key"}}, status=401))
    ctx = clocked()
    with pytest.raises(APIError) as caught:
        list(run_turns(Retry(provider.backend(server.url)), request(), ctx))
    assert caught.value.status == 401 and not retryable(caught.value)
    assert f"check the API key (${provider.key_variable}" in str(caught.value)
    assert len(server.requests) == 1 and ctx.clock.sleeps == []
    assert_secret_free(caught.value)


# -- 7-9: failures inside a 200 stream, before and after output ---------------------------


def test_7_an_in_band_error_before_output_is_rerun_by_retry_and_succeeds(provider, server):
    server.queue(provider.path, Reply(chunks=provider.in_band(())),
                 Reply(chunks=provider.stream()))
    ctx = clocked()
    events = list(run_turns(Retry(provider.backend(server.url)), request(), ctx))
    assert texts(events) == ["Alpha", "Beta"]
    assert events[-1].kind is Kind.DONE and events[-1].stop is Stop.END
    assert len(server.requests) == 2 and len(ctx.clock.sleeps) == 1
    assert server.requests[0].body == server.requests[1].body


def test_7_without_retry_an_in_band_error_before_output_is_raised_as_retryable(provider, server):
    server.queue(provider.path, Reply(chunks=provider.in_band(())))
    with pytest.raises(StreamError) as caught:
        list(run_turns(provider.backend(server.url), request(), clocked()))
    assert provider.in_band_words in str(caught.value)
    assert retryable(caught.value)
    assert len(server.requests) == 1


def test_8_an_in_band_error_after_text_is_raised_and_nothing_is_repeated(provider, server):
    server.queue(provider.path, Reply(chunks=provider.in_band(("Alpha", "Beta"))),
                 Reply(chunks=provider.stream()))
    ctx = clocked()
    seen = []
    with pytest.raises(StreamError) as caught:
        for event in run_turns(Retry(provider.backend(server.url)), request(), ctx):
            seen.append(event)
    assert provider.in_band_words in str(caught.value)
    assert [(e.kind, e.text) for e in seen] == [(Kind.TEXT, "Alpha"), (Kind.TEXT, "Beta")]
    assert retryable(caught.value) and attempt(caught.value) == 1
    assert len(server.requests) == 1 and ctx.clock.sleeps == []


def test_8_an_in_band_error_inside_a_tool_call_announces_no_call_and_runs_no_tool(
        provider, server):
    ran = []

    @nacelle.tool
    def note(city: str) -> str:
        """Note a city.

        Args:
            city: Which city.
        """
        ran.append(city)
        return "noted"

    # The call's whole input has streamed when the error arrives, before the turn ends.
    failing = provider.in_band(("Alpha",), [("call_1", "note", '{"city": "Paris"}')])
    assert b"call_1" in b"".join(failing)
    server.queue(provider.path, Reply(chunks=failing))
    seen = []
    with pytest.raises(StreamError):
        for event in Agent(Retry(provider.backend(server.url)), "Be brief.",
                           tools=[note]).stream([user_text("Note Paris")]):
            seen.append(event)
    # The input was seen as it streamed (TOOL_INPUT); the call itself never was.
    assert [(e.kind, e.text) for e in seen if e.kind is not Kind.TOOL_INPUT] == [
        (Kind.TEXT, "Alpha")]
    streamed = [e.tool.input for e in seen if e.kind is Kind.TOOL_INPUT]
    assert streamed[-1:] == ['{"city": "Paris"}']
    assert ran == [] and len(server.requests) == 1


def test_9_a_drop_mid_stream_before_any_event_is_rerun_by_retry(provider, server):
    chunks = provider.stream()
    before, first_text = split_before_output(chunks)
    assert before  # the status line and some events did arrive before the drop
    server.queue(provider.path, Reply(chunks=chunks, drop_after=first_text),
                 Reply(chunks=provider.stream()))
    ctx = clocked()
    events = list(run_turns(Retry(provider.backend(server.url)), request(), ctx))
    assert texts(events) == ["Alpha", "Beta"]
    assert len(server.requests) == 2 and len(ctx.clock.sleeps) == 1


def test_9_without_retry_that_drop_is_a_stream_truncated(provider, server):
    chunks = provider.stream()
    _, first_text = split_before_output(chunks)
    server.queue(provider.path, Reply(chunks=chunks, drop_after=first_text))
    with pytest.raises(StreamTruncated):
        list(run_turns(provider.backend(server.url), request(), clocked()))
    assert len(server.requests) == 1


def test_9_a_drop_after_text_is_stream_truncated_and_not_retried(provider, server):
    chunks = provider.stream()
    _, first_text = split_before_output(chunks)
    server.queue(provider.path, Reply(chunks=chunks, drop_after=first_text + 1),
                 Reply(chunks=provider.stream()))
    ctx = clocked()
    seen = []
    with pytest.raises(StreamTruncated) as caught:
        for event in run_turns(Retry(provider.backend(server.url)), request(), ctx):
            seen.append(event)
    assert texts(seen) == ["Alpha"] and len(seen) == 1
    assert attempt(caught.value) == 1
    assert len(server.requests) == 1 and ctx.clock.sleeps == []


# -- 10-11: stalls, read timeouts and the budget (real time) --------------------------------


@pytest.mark.slow
def test_10_a_stall_before_the_status_line_is_retried_by_the_transport(provider, server):
    server.queue(provider.path, Reply(chunks=[(b"x", 5.0)], drop_after=0),
                 Reply(chunks=provider.stream()))
    started = time.monotonic()
    events = list(run_turns(provider.backend(server.url, timeout=0.5), request(), clocked()))
    assert texts(events) == ["Alpha", "Beta"]
    assert len(server.requests) == 2
    assert time.monotonic() - started < 3.0


@pytest.mark.slow
def test_10_a_stall_mid_stream_past_the_read_timeout_is_a_transport_error(provider, server):
    chunks = provider.stream()
    server.queue(provider.path, Reply(chunks=[(chunks[0], 5.0)] + chunks[1:]))
    started = time.monotonic()
    with pytest.raises(TransportError, match="read timeout"):
        list(run_turns(provider.backend(server.url, timeout=0.5), request(), clocked()))
    assert time.monotonic() - started < 3.0
    assert len(server.requests) == 1  # the status had arrived: not the transport's to retry


@pytest.mark.slow
def test_10_retry_reruns_a_run_that_stalled_past_the_read_timeout(provider, server):
    chunks = provider.stream()
    server.queue(provider.path, Reply(chunks=[(chunks[0], 5.0)] + chunks[1:]),
                 Reply(chunks=provider.stream()))
    started = time.monotonic()
    ctx = clocked()
    events = list(run_turns(Retry(provider.backend(server.url, timeout=0.5)), request(), ctx))
    assert texts(events) == ["Alpha", "Beta"]
    assert len(server.requests) == 2 and len(ctx.clock.sleeps) == 1
    assert time.monotonic() - started < 3.0


@pytest.mark.slow
def test_10_keepalives_alone_past_the_stall_timeout_are_a_retryable_stall(provider, server):
    before, _ = split_before_output(provider.stream())
    beats = [(provider.keepalive, 0.05)] * 60  # 3 s of keepalives, never any content
    server.queue(provider.path, Reply(chunks=list(before) + beats))
    started = time.monotonic()
    with pytest.raises(StreamError, match="stalled") as caught:
        list(run_turns(provider.backend(server.url, stall_timeout=0.4), request(), clocked()))
    assert 0.3 < time.monotonic() - started < 2.5
    assert retryable(caught.value) and not isinstance(caught.value, StreamTruncated)


@pytest.mark.slow
def test_10_retry_reruns_a_run_that_only_sent_keepalives(provider, server):
    before, _ = split_before_output(provider.stream())
    beats = [(provider.keepalive, 0.05)] * 60
    server.queue(provider.path, Reply(chunks=list(before) + beats),
                 Reply(chunks=provider.stream()))
    ctx = clocked()
    events = list(run_turns(Retry(provider.backend(server.url, stall_timeout=0.4)), request(), ctx))
    assert texts(events) == ["Alpha", "Beta"]
    assert len(server.requests) == 2


@pytest.mark.slow
def test_11_a_budget_smaller_than_retry_after_ends_within_the_budget(provider, server):
    server.queue(provider.path, Reply.json({}, status=429, headers={"retry-after": "5"}))
    budget = 0.5
    backend = Retry(provider.backend(server.url), RetryOptions(budget=budget))
    started = time.monotonic()
    with pytest.raises(RetryBudgetExceeded) as caught:
        list(run_turns(backend, request(), RunContext()))
    elapsed = time.monotonic() - started
    assert elapsed < budget + 0.5
    assert elapsed >= budget * 0.9  # it waited for the budget, not gave up at once
    assert "attempt 1" in str(caught.value) and attempt(caught.value) == 1
    assert "last failure: APIError: HTTP 429" in str(caught.value)
    assert not isinstance(caught.value, nacelle.Cancelled)
    assert len(server.requests) == 1


@pytest.mark.slow
def test_11_the_budget_also_bounds_a_stalled_read(provider, server):
    chunks = provider.stream()
    server.queue(provider.path, Reply(chunks=[(chunks[0], 10.0)] + chunks[1:]))
    budget = 0.5
    backend = Retry(provider.backend(server.url), RetryOptions(budget=budget))
    started = time.monotonic()
    with pytest.raises(RetryBudgetExceeded) as caught:
        list(run_turns(backend, request(), RunContext()))
    assert time.monotonic() - started < budget + 0.5
    assert attempt(caught.value) == 1
    assert len(server.requests) == 1


# -- 12-14: the consumer, the stream's content, and tool turns -----------------------------


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "retry"])
def test_12_leaving_the_loop_mid_stream_closes_the_connection_within_a_second(
        provider, server, wrapped):
    chunks = provider.stream()
    _, first_text = split_before_output(chunks)
    held = chunks[:first_text + 1] + [(chunks[first_text + 1], 30.0)] + chunks[first_text + 2:]
    server.queue(provider.path, Reply(chunks=held))
    backend = provider.backend(server.url)
    agent = Agent(Retry(backend) if wrapped else backend, "Be brief.")
    events = agent.stream([user_text("Hi")])
    assert next(events).text == "Alpha"
    left = time.monotonic()
    events.close()
    assert server.wait_disconnects(1, timeout=1.0)
    assert time.monotonic() - left < 1.0
    assert len(server.requests) == 1


def test_13_a_data_line_that_is_not_json_is_a_stream_error_naming_the_event(provider, server):
    before, _ = split_before_output(provider.stream())
    server.queue(provider.path, Reply(chunks=list(before) + [provider.garbage]))
    with pytest.raises(StreamError) as caught:
        list(run_turns(provider.backend(server.url), request(), clocked()))
    err = caught.value
    assert "not JSON" in str(err) and provider.garbage_names in str(err)
    assert not isinstance(err, ValueError)
    shown = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    assert "JSONDecodeError" not in shown


def test_13_a_200_page_that_is_not_an_event_stream_is_a_stream_error_not_retried(
        provider, server):
    page = b"<!DOCTYPE html><html><head><title>Sign in</title></head></html>"
    server.queue(provider.path, Reply(chunks=[page], mode="length",
                                      content_type="text/html; charset=utf-8"))
    with pytest.raises(StreamError) as caught:
        list(run_turns(Retry(provider.backend(server.url)), request(), clocked()))
    assert "200 with text/html, not an event stream" in str(caught.value)
    assert "<title>Sign in</title>" in str(caught.value)
    assert not isinstance(caught.value, StreamTruncated) and not retryable(caught.value)
    assert len(server.requests) == 1


@nacelle.tool
def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: Which city.
    """
    return f"sunny in {city}"


CALLS = [("call_1", "lookup", '{"city": "Paris"}'), ("call_2", "lookup", '{"city": "Oslo"}')]


@pytest.mark.parametrize("failure", ["400", "503-exhausted"])
def test_14_a_failed_request_after_a_tool_turn_leaves_every_call_closed(
        provider, server, failure):
    # Retry retries the failed turn itself (turn 1 already yielded): a 400 is not
    # retried, a 503 is, until the attempts run out.
    if failure == "400":
        failing = [Reply.json(provider.bad_request, status=400)]
    else:
        failing = [Reply.json({"error": {"message": "unavailable"}}, status=503)] * 3
    server.queue(provider.path, Reply(chunks=provider.stream((), tool_calls=CALLS)), *failing)
    agent = Agent(Retry(provider.backend(server.url, max_retries=0),
                        RetryOptions(base=0.01, max=0.02)), "Be brief.", tools=[lookup])
    seen = []
    with pytest.raises(APIError) as caught:
        for event in agent.stream([user_text("Weather in Paris and Oslo?")]):
            seen.append(event)
    assert caught.value.status == int(failure[:3])
    calls = [e.tool.id for e in seen if e.kind is Kind.TOOL_CALL]
    results = [e for e in seen if e.kind is Kind.TOOL_RESULT]
    assert calls == ["call_1", "call_2"]
    assert sorted(e.tool.id for e in results) == calls  # exactly one result per call
    for result in results:
        called_at = next(i for i, e in enumerate(seen)
                         if e.kind is Kind.TOOL_CALL and e.tool.id == result.tool.id)
        assert seen.index(result) > called_at
        assert result.tool.error is None
    assert {e.tool.result for e in results} == {"sunny in Paris", "sunny in Oslo"}
    assert not any(e.kind is Kind.DONE for e in seen)
    # The tools ran once; only the failed turn was sent again, with their results.
    assert len(server.requests) == 1 + len(failing)
    assert all("sunny in Oslo" in r.body.decode("utf-8") for r in server.requests[1:])


def test_15_an_in_band_error_on_turn_two_of_a_tool_run_is_retried_at_that_turn(provider, server):
    server.queue(provider.path, Reply(chunks=provider.stream(("Looking.",), tool_calls=CALLS[:1])),
                 Reply(chunks=provider.in_band(())), Reply(chunks=provider.stream(("Sunny.",))))
    agent = Agent(Retry(provider.backend(server.url, max_retries=0),
                        RetryOptions(base=0.01, max=0.02)), "Be brief.", tools=[lookup])
    events = list(agent.stream([user_text("Weather in Paris?")]))
    assert texts(events) == ["Looking.", "Sunny."]
    assert events[-1].kind is Kind.DONE and events[-1].stop is Stop.END
    assert [e.tool.result for e in events if e.kind is Kind.TOOL_RESULT] == ["sunny in Paris"]
    assert len(server.requests) == 3 and server.requests[1].body == server.requests[2].body


def test_16_two_tool_calls_with_one_id_run_both_and_are_answered_under_distinct_ids(
        provider, server):
    twins = [("call_1", "lookup", '{"city": "Paris"}'), ("call_1", "lookup", '{"city": "Oslo"}')]
    server.queue(provider.path, Reply(chunks=provider.stream((), tool_calls=twins)),
                 Reply(chunks=provider.stream(("Both sunny.",))))
    agent = Agent(provider.backend(server.url), "Be brief.", tools=[lookup])
    events = list(agent.stream([user_text("Weather in Paris and Oslo?")]))
    calls = [e.tool.id for e in events if e.kind is Kind.TOOL_CALL]
    results = {e.tool.id: e.tool.result for e in events if e.kind is Kind.TOOL_RESULT}
    assert calls[0] == "call_1" and len(set(calls)) == 2 and set(results) == set(calls)
    assert [results[i] for i in calls] == ["sunny in Paris", "sunny in Oslo"]
    assert events[-1].stop is Stop.END
    sent = server.requests[1].body.decode("utf-8")
    assert sent.count(f'"{calls[1]}"') == 2 and "sunny in Oslo" in sent  # the call and its result


# -- 17: a server that sends its head or its chunk-size lines a byte at a time -------------

TRICKLE = 0.2  # seconds before each byte: every read gets its byte within the timeout


@pytest.mark.slow
def test_17_a_head_sent_a_byte_at_a_time_is_cut_at_the_read_timeout_and_retried(
        provider, server):
    server.queue(provider.path, Reply(chunks=provider.stream(), head_trickle=TRICKLE),
                 Reply(chunks=provider.stream()))
    started = time.monotonic()
    events = list(run_turns(provider.backend(server.url, timeout=0.5), request(), clocked()))
    assert texts(events) == ["Alpha", "Beta"]
    assert len(server.requests) == 2
    assert time.monotonic() - started < 3.0  # the head alone would take half a minute


@pytest.mark.slow
def test_17_the_budget_bounds_a_head_sent_a_byte_at_a_time(provider, server):
    server.queue(provider.path, Reply(chunks=provider.stream(), head_trickle=TRICKLE))
    backend = Retry(provider.backend(server.url), RetryOptions(budget=0.5))
    started = time.monotonic()
    with pytest.raises(RetryBudgetExceeded) as caught:
        list(run_turns(backend, request(), RunContext()))
    assert time.monotonic() - started < 2.0
    assert attempt(caught.value) == 1 and len(server.requests) == 1
    assert_secret_free(caught.value)


@pytest.mark.slow
def test_17_a_chunk_size_line_sent_a_byte_at_a_time_is_a_retryable_stall(provider, server):
    before, _ = split_before_output(provider.stream())
    framed = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in before)
    size_line = [(bytes([byte]), TRICKLE) for byte in b"0" * 150 + b"9\r\n"]
    server.queue(provider.path, Reply(mode="raw", headers={"Transfer-Encoding": "chunked"},
                                      chunks=[framed] + size_line))
    started = time.monotonic()
    with pytest.raises(StreamError, match="stalled") as caught:
        list(run_turns(provider.backend(server.url, stall_timeout=0.5), request(), clocked()))
    assert time.monotonic() - started < 3.0
    assert retryable(caught.value) and not isinstance(caught.value, StreamTruncated)


# -- 18: a key pasted with a character that does not belong in it --------------------------


@pytest.mark.parametrize("source", ["environment", "argument"])
@pytest.mark.parametrize("stray, named", [("\u200b", "a zero width space (U+200B)"),
                                          ("\n", "a newline (U+000A)"),
                                          ("\u00e9", "a latin small letter e with acute")],
                         ids=["zero-width-space", "newline", "latin-1"])
def test_18_a_key_with_a_stray_character_fails_at_the_first_request_with_nothing_sent(
        provider, server, monkeypatch, source, stray, named):
    key = provider.key[:12] + stray + provider.key[12:]
    if source == "environment":
        monkeypatch.setenv(provider.key_variable, key)
        backend = provider.make_backend(server.url, None)
    else:
        backend = provider.make_backend(server.url, key)
    ctx = clocked()
    with pytest.raises(ConfigError) as caught:
        list(run_turns(backend, request(), ctx))
    message = str(caught.value)
    assert f"contains {named}" in message and "at position 12" in message
    assert (f"${provider.key_variable}" in message) == (source == "environment")
    assert server.requests == [] and ctx.clock.sleeps == []  # refused, not retried
    assert_secret_free(caught.value)
