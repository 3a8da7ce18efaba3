"""The model transport against a real loopback server: streaming, the final event
and the connection going back to the pool, retries, time limits (servers that trickle
included), cancellation, Content-Length, and the key never showing — with the key
and header checks of nacelle._net.headers and the cut-off sessions of _http_session, which
only the transport uses. What an error response becomes is in test_http_errors."""

import logging
import pickle
import re
import socket
import sys
import threading
import time

import pytest

from nacelle.backend import RunContext
from nacelle.backends import _http
from nacelle.backends._http import DRAIN_SECONDS, Transport, iter_sse
from nacelle.backends._wire_cache import Body
from nacelle.errors import (
    APIError, Cancelled, ConfigError, RetryBudgetExceeded, StreamError, StreamTruncated,
    TransportError, retryable,
)
from nacelle.sse import SSEEvent
from nacelle.testing import FakeClock, FakeServer, Reply

from hostile import chain
from servers import free_port

KEY = "sk-ant-test-0123456789-SECRET"
PATH = "/v1/messages"


@pytest.fixture
def server():
    with FakeServer() as fake:
        yield fake


def make(server, **options):
    options.setdefault("key_variable", "ANTHROPIC_API_KEY")
    return Transport(server.url, {"x-api-key": KEY, "anthropic-version": "2023-06-01"}, **options)


def fake_ctx(**kwargs):
    return RunContext(clock=FakeClock(), **kwargs)


def stream(transport, ctx=None, keepalive=lambda event: False, final=None):
    ctx = ctx or RunContext()
    response = transport.post_stream(PATH, {"model": "m"}, ctx)
    return transport.events(response, ctx, keepalive=keepalive, final=final)


# -- the request ----------------------------------------------------------------------


def test_post_stream_sends_compact_utf8_json_and_the_headers(server):
    server.queue(PATH, Reply(chunks=[b"data: a\n\n"]))
    body = {"text": "héllo 日本", "n": [1, 2]}
    headers = {"anthropic-beta": "x"}
    transport = make(server)
    events = list(transport.events(transport.post_stream(PATH, body, RunContext(), headers),
                                   RunContext()))
    assert events == [SSEEvent("message", "a")]
    request = server.requests[0]
    assert request.body == '{"text":"héllo 日本","n":[1,2]}'.encode("utf-8")
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-beta"] == "x"
    assert request.headers["accept"] == "text/event-stream"
    assert body == {"text": "héllo 日本", "n": [1, 2]} and headers == {"anthropic-beta": "x"}


def test_post_json_returns_the_parsed_answer(server):
    server.queue("/v1/messages/count_tokens", Reply.json({"input_tokens": 14}))
    assert make(server).post_json("/v1/messages/count_tokens", {}, RunContext()) == {
        "input_tokens": 14}


def test_a_body_in_pieces_goes_out_whole_with_its_length_and_again_on_a_retry(server):
    pieces = [b'{"a":', "\"grüß\"".encode("utf-8"), b',"b":[1,2', b"]}"]
    server.queue("/count", Reply.json({}, status=503), Reply.json({"ok": True}))
    transport = make(server, max_retries=1)
    assert transport.post_json("/count", Body(pieces), fake_ctx()) == {"ok": True}
    sent = server.requests
    assert [r.body for r in sent] == [b"".join(pieces)] * 2
    assert [r.headers.get("content-length") for r in sent] == [str(len(b"".join(pieces)))] * 2
    assert all("transfer-encoding" not in r.headers for r in sent)


def test_post_json_with_a_body_that_is_not_json_is_a_stream_error(server):
    server.queue("/count", Reply(chunks=[b"<html>oops</html>"], mode="length"))
    with pytest.raises(StreamError, match="not JSON: '<html>oops</html>'"):
        make(server).post_json("/count", {}, RunContext())


def test_post_json_with_a_body_nested_five_thousand_deep_is_a_stream_error(server):
    server.queue("/count", Reply(chunks=[b"[" * 5000 + b"]" * 5000], mode="length"))
    with pytest.raises(StreamError, match="nested deeper than 128 levels"):
        make(server).post_json("/count", {}, RunContext())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"base_url": "ftp://x"}, "base_url must be an http"),
        ({"base_url": "localhost:8080"}, "base_url must be an http"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout": 0}, "timeout must be a positive"),
        ({"stall_timeout": -5}, "stall_timeout must be a positive"),
    ],
)
def test_bad_transport_arguments_are_clear_errors(kwargs, message):
    base_url = kwargs.pop("base_url", "http://127.0.0.1:1")
    with pytest.raises(ValueError, match=message):
        Transport(base_url, {}, **kwargs)


# -- streaming ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["chunked", "close"])
def test_the_first_event_arrives_while_the_server_stalls(server, mode):
    server.queue(PATH, Reply(chunks=[b"event: e\ndata: first\n\n", (b"data: late\n\n", 2.0)],
                             mode=mode))
    events = stream(make(server))
    started = time.monotonic()
    first = next(events)
    assert time.monotonic() - started < 0.5
    assert first == SSEEvent("e", "first")
    events.close()


def test_leaving_the_loop_mid_stream_closes_the_connection_within_a_second(server):
    server.queue(PATH, Reply(chunks=[b"data: a\n\n", (b"data: b\n\n", 10)]))
    for event in stream(make(server)):
        break
    assert server.wait_disconnects(1, timeout=1.0)


def test_event_stream_without_charset_is_decoded_as_utf8(server):
    text = "héllo 日本 😀 \u2028 ü"
    body = ("data: " + text + "\n\n").encode("utf-8")
    server.queue(PATH, Reply(chunks=[body[:9], body[9:20], body[20:]],
                             content_type="text/event-stream"))
    assert [e.data for e in stream(make(server))] == [text]


@pytest.mark.parametrize("mode", ["chunked", "close", "length"])
def test_a_clean_end_of_body_ends_the_iteration(server, mode):
    server.queue(PATH, Reply(chunks=[b"data: a\n\n", b": done\n\n"], mode=mode))
    assert [e.data for e in stream(make(server))] == ["a"]


@pytest.mark.parametrize("tail", [b"data: b\n", b"data: partial", b"event: e\ndata: b"])
def test_a_body_ending_inside_an_event_raises_stream_truncated(server, tail):
    server.queue(PATH, Reply(chunks=[b"data: a\n\n", tail], mode="close"))
    seen = []
    with pytest.raises(StreamTruncated, match="ended in the middle of an event"):
        for event in stream(make(server)):
            seen.append(event.data)
    assert seen == ["a"]


@pytest.mark.parametrize("mode", ["chunked", "length"])
def test_a_connection_dropped_mid_stream_raises_stream_truncated(server, mode):
    server.queue(PATH, Reply(chunks=[b"data: a\n\n", b"data: b\n\n"], mode=mode, drop_after=1))
    seen = []
    with pytest.raises(StreamTruncated, match="dropped in the middle of the stream"):
        for event in stream(make(server)):
            seen.append(event.data)
    assert seen == ["a"]


def test_streams_fully_read_on_one_thread_reuse_one_connection(server):
    server.queue(PATH, Reply(chunks=[b"data: 1\n\n"]), Reply(chunks=[b"data: 2\n\n"]))
    transport = make(server)
    assert [e.data for e in stream(transport)] == ["1"]
    assert [e.data for e in stream(transport)] == ["2"]
    assert server.connections == 1


# -- the final event, and the connection going back to the pool ---------------------------

DONE = b"data: [DONE]\n\n"


def is_done(event):
    return event.data == "[DONE]"


@pytest.mark.slow
@pytest.mark.parametrize("mode, connections", [("chunked", 1), ("length", 1), ("close", 2)])
def test_a_stream_ended_by_its_final_event_leaves_the_connection_to_the_next_request(
        server, mode, connections):
    # The end of the body comes a moment after the final event, as over a real network.
    server.queue(PATH, Reply(chunks=[b"data: 1\n\n", DONE, (b"", 0.2)], mode=mode),
                 Reply(chunks=[b"data: 2\n\n", DONE], mode=mode))
    transport = make(server)
    assert [e.data for e in stream(transport, final=is_done)] == ["1", "[DONE]"]
    assert [e.data for e in stream(transport, final=is_done)] == ["2", "[DONE]"]
    assert server.connections == connections and server.disconnects == 0


def test_final_is_asked_after_the_consumer_took_the_event_and_nothing_after_it_is_yielded(
        server):
    server.queue(PATH, Reply(chunks=[b"data: a\n\ndata: b\n\ndata: c\n\n"]))
    seen = []
    for event in stream(make(server), final=lambda event: seen[-1] == "b"):
        seen.append(event.data)
    assert seen == ["a", "b"]


@pytest.mark.slow
@pytest.mark.parametrize("after", ["keepalives", "silence"])
def test_a_server_keeping_the_stream_open_after_the_final_event_costs_at_most_the_drain_bound(
        server, after):
    tail = [(b": keepalive\n\n", 0.05)] * 200 if after == "keepalives" else [(b": late\n\n", 30)]
    server.queue(PATH, Reply(chunks=[b"data: 1\n\n", DONE] + tail), ok())
    transport = make(server)
    events = stream(transport, final=is_done)
    assert [next(events).data, next(events).data] == ["1", "[DONE]"]
    started = time.monotonic()
    assert list(events) == []
    assert DRAIN_SECONDS * 0.8 <= time.monotonic() - started < DRAIN_SECONDS + 1.5
    assert server.wait_disconnects(1, timeout=1.0)
    assert [e.data for e in stream(transport)] == ["ok"]
    assert server.connections == 2


def test_a_flood_after_the_final_event_is_cut_at_the_byte_bound_not_waited_out(
        server, monkeypatch):
    monkeypatch.setattr(_http, "DRAIN_SECONDS", 30.0)
    flood = b": " + b"x" * (16 * 1024) + b"\n\n"
    server.queue(PATH, Reply(chunks=[DONE] + [flood] * 8 + [(b": late\n\n", 30)]))
    started = time.monotonic()
    assert [e.data for e in stream(make(server), final=is_done)] == ["[DONE]"]
    assert time.monotonic() - started < 5.0
    assert server.wait_disconnects(1, timeout=2.0)


@pytest.mark.slow
@pytest.mark.parametrize("bound", ["deadline", "read timeout"])
def test_the_drain_never_outlasts_the_deadline_or_the_read_timeout(server, monkeypatch, bound):
    monkeypatch.setattr(_http, "DRAIN_SECONDS", 30.0)
    server.queue(PATH, Reply(chunks=[DONE, (b": late\n\n", 30)]))
    if bound == "deadline":
        transport = make(server)
        ctx = RunContext(time.monotonic() + 0.5, deadline_error=RetryBudgetExceeded)
    else:
        transport, ctx = make(server, timeout=0.3), RunContext()
    started = time.monotonic()
    assert [e.data for e in stream(transport, ctx, final=is_done)] == ["[DONE]"]
    assert time.monotonic() - started < 5.0
    assert server.wait_disconnects(1, timeout=1.0)


@pytest.mark.slow
def test_cancelling_while_draining_after_the_final_event_closes_at_once(server, monkeypatch):
    monkeypatch.setattr(_http, "DRAIN_SECONDS", 30.0)
    server.queue(PATH, Reply(chunks=[DONE, (b": late\n\n", 30)]))
    ctx = RunContext()
    events = stream(make(server), ctx, final=is_done)
    assert next(events).data == "[DONE]"
    threading.Timer(0.2, ctx.cancel).start()
    started = time.monotonic()
    assert list(events) == []  # the stream was whole; the run's own check raises Cancelled
    assert time.monotonic() - started < 5.0
    assert server.wait_disconnects(1, timeout=1.0)


def test_a_consumer_that_leaves_at_the_final_event_closes_at_once_without_draining(
        server, monkeypatch):
    monkeypatch.setattr(_http, "DRAIN_SECONDS", 30.0)
    server.queue(PATH, Reply(chunks=[DONE, (b": late\n\n", 30)]))
    for event in stream(make(server), final=is_done):
        break
    assert server.wait_disconnects(1, timeout=1.0)


def _sessions_held_at_once(transport, count):
    """Start ``count`` threads that each take their session of ``transport`` and wait;
    returns the sessions, once all are taken, and a function that lets the threads
    end and joins them."""
    sessions, hold = [], threading.Event()

    def use():
        sessions.append(transport.session)
        hold.wait(5)

    threads = [threading.Thread(target=use) for _ in range(count)]
    for thread in threads:
        thread.start()
    while len(sessions) < count:
        time.sleep(0.001)

    def end():
        hold.set()
        for thread in threads:
            thread.join()

    return sessions, end


def test_threads_running_at_once_each_get_their_own_session():
    transport = Transport("http://127.0.0.1:1", {})
    sessions, end = _sessions_held_at_once(transport, 3)
    mine = transport.session
    end()
    assert transport.session is mine
    assert len({id(s) for s in sessions + [mine]}) == 4


def test_a_thread_that_ended_leaves_its_session_to_the_next_thread():
    transport = Transport("http://127.0.0.1:1", {})
    sessions = []
    for _ in range(3):
        thread = threading.Thread(target=lambda: sessions.append(transport.session))
        thread.start()
        thread.join()
        deadline = time.monotonic() + 5  # the thread's values go as its state is freed
        while not transport._idle and time.monotonic() < deadline:
            time.sleep(0.001)
    assert sessions[0] is sessions[1] is sessions[2]
    assert transport.session is sessions[0]


def test_a_transport_keeps_a_few_sessions_of_ended_threads():
    transport = Transport("http://127.0.0.1:1", {})
    sessions, end = _sessions_held_at_once(transport, _http.IDLE_SESSIONS + 3)
    end()
    deadline = time.monotonic() + 5
    while len(transport._idle) < _http.IDLE_SESSIONS and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)
    assert len(transport._idle) == _http.IDLE_SESSIONS
    assert all(any(s is held for held in sessions) for s in transport._idle)



def test_a_forked_child_never_takes_a_session_its_parent_s_threads_left(monkeypatch):
    # Their pools hold the parent's connections: two processes must not share one.
    import os

    transport = Transport("http://127.0.0.1:1", {})
    sessions, end = _sessions_held_at_once(transport, 1)
    end()
    deadline = time.monotonic() + 5
    while not transport._idle and time.monotonic() < deadline:
        time.sleep(0.001)
    assert transport._idle == sessions
    parent = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: parent + 1)  # as after os.fork()
    taken = []
    thread = threading.Thread(target=lambda: taken.append(transport.session))
    thread.start()
    thread.join()
    assert taken[0] is not sessions[0]

# -- retries ------------------------------------------------------------------------------


def ok():
    return Reply(chunks=[b"data: ok\n\n"])


def test_retry_honours_retry_after_header(server):
    server.queue(PATH, Reply.json({}, status=429, headers={"retry-after": "3"}), ok())
    clock_ctx = fake_ctx()
    assert [e.data for e in stream(make(server), clock_ctx)] == ["ok"]
    assert clock_ctx.clock.sleeps == [3.0]


def test_retry_prefers_retry_after_ms(server):
    server.queue(PATH, Reply.json({}, status=429, headers={"retry-after-ms": "1500",
                                                           "retry-after": "9"}), ok())
    ctx = fake_ctx()
    list(stream(make(server), ctx))
    assert ctx.clock.sleeps == [1.5]


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 529])
def test_retryable_statuses_are_retried_with_jittered_backoff(server, status):
    server.queue(PATH, Reply.json({}, status=status), Reply.json({}, status=status), ok())
    ctx = fake_ctx()
    assert [e.data for e in stream(make(server), ctx)] == ["ok"]
    first, second = ctx.clock.sleeps
    assert 0.375 <= first <= 0.5 and 0.75 <= second <= 1.0
    assert len(server.requests) == 3


def test_retries_stop_after_max_retries_with_the_last_error(server):
    server.queue(PATH, *[Reply.json({"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}}, status=529)] * 2)
    ctx = fake_ctx()
    with pytest.raises(APIError) as info:
        make(server, max_retries=1).post_stream(PATH, {}, ctx)
    assert (info.value.status, info.value.type, info.value.retryable) == (529, "overloaded_error", True)
    assert len(ctx.clock.sleeps) == 1 and len(server.requests) == 2


@pytest.mark.parametrize(
    "reply",
    [
        Reply.json({}, status=400),
        Reply.json({}, status=401),
        Reply.json({}, status=404),
        Reply.json({}, status=529, headers={"x-should-retry": "false"}),
    ],
)
def test_non_retryable_answers_are_not_retried(server, reply):
    server.queue(PATH, reply)
    ctx = fake_ctx()
    with pytest.raises(APIError) as info:
        make(server).post_stream(PATH, {}, ctx)
    assert info.value.retryable is False
    assert ctx.clock.sleeps == [] and len(server.requests) == 1


def test_x_should_retry_true_retries_even_a_400(server):
    server.queue(PATH, Reply.json({}, status=400, headers={"x-should-retry": "true"}), ok())
    ctx = fake_ctx()
    assert [e.data for e in stream(make(server), ctx)] == ["ok"]
    assert len(ctx.clock.sleeps) == 1


def test_a_connection_dropped_before_the_status_line_is_retried(server):
    server.queue(PATH, Reply(chunks=[b"x"], drop_after=0), ok())
    ctx = fake_ctx()
    assert [e.data for e in stream(make(server), ctx)] == ["ok"]
    assert len(ctx.clock.sleeps) == 1


def test_connection_refused_is_a_transport_error_naming_host_and_port_after_retries():
    port = free_port()
    ctx = fake_ctx()
    transport = Transport(f"http://127.0.0.1:{port}", {"x-api-key": KEY})
    with pytest.raises(TransportError, match=f"cannot connect to 127.0.0.1:{port}: connection refused"):
        transport.post_stream(PATH, {}, ctx)
    assert len(ctx.clock.sleeps) == 2


def test_a_long_retry_after_is_cut_to_the_deadline(server):
    server.queue(PATH, Reply.json({}, status=429, headers={"retry-after": "30"}))
    ctx = fake_ctx(deadline=2.0, deadline_error=RetryBudgetExceeded)
    with pytest.raises(RetryBudgetExceeded):
        make(server).post_stream(PATH, {}, ctx)
    assert ctx.clock.sleeps == [2.0]


def test_a_deadline_during_a_retry_wait_is_chained_from_what_was_being_retried(server):
    server.queue(PATH, Reply.json({"error": {"message": "slow down"}}, status=429,
                                  headers={"retry-after": "30"}))
    ctx = fake_ctx(deadline=2.0, deadline_error=RetryBudgetExceeded)
    with pytest.raises(RetryBudgetExceeded) as info:
        make(server).post_stream(PATH, {}, ctx)
    cause = info.value.__cause__
    assert isinstance(cause, APIError) and cause.status == 429 and "slow down" in str(cause)


@pytest.mark.slow
def test_cancelling_during_a_retry_wait_is_not_chained(server):
    server.queue(PATH, Reply.json({}, status=503))
    ctx = RunContext()
    threading.Timer(0.2, ctx.cancel).start()
    with pytest.raises(Cancelled) as info:
        make(server, max_retries=5).post_stream(PATH, {}, ctx)
    assert info.value.__cause__ is None


def test_retries_are_logged_at_debug_without_the_key(server, caplog):
    server.queue(PATH, Reply.json({}, status=503), ok())
    with caplog.at_level(logging.DEBUG, logger="nacelle"):
        list(stream(make(server), fake_ctx()))
    retries = [r for r in caplog.records if "retry 1 of 2" in r.getMessage()]
    assert retries and retries[0].levelno == logging.DEBUG
    assert "HTTP 503" in retries[0].getMessage()


# -- time limits ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_read_timeout_with_no_bytes_is_a_transport_error(server):
    server.queue(PATH, Reply(chunks=[b"data: a\n\n", (b"data: b\n\n", 5)]))
    events = stream(make(server, timeout=0.3, max_retries=0))
    assert next(events).data == "a"
    started = time.monotonic()
    with pytest.raises(TransportError, match=r"no data from 127\.0\.0\.1:\d+ for 0\.3s"):
        next(events)
    assert time.monotonic() - started < 2.0


@pytest.mark.slow
def test_a_read_timeout_waiting_for_the_status_is_a_transport_error(server):
    server.queue(PATH, Reply(chunks=[(b"x", 5)], drop_after=0))
    with pytest.raises(TransportError, match=r"no response from 127\.0\.0\.1:\d+ within 0\.3s"):
        make(server, timeout=0.3, max_retries=0).post_stream(PATH, {}, RunContext())


@pytest.mark.slow
@pytest.mark.parametrize("comment", [False, True])
def test_keepalive_only_traffic_stalls_into_a_retryable_stream_error(server, comment):
    beat = b": OPENROUTER PROCESSING\n\n" if comment else b'event: ping\ndata: {"type":"ping"}\n\n'
    server.queue(PATH, Reply(chunks=[b"data: real\n\n"] + [(beat, 0.05)] * 60))
    events = stream(make(server, stall_timeout=0.4), keepalive=lambda e: e.event == "ping")
    assert next(events).data == "real"
    started = time.monotonic()
    with pytest.raises(StreamError, match="stalled: no event for 0.4s") as info:
        for event in events:
            assert event.event == "ping"
    assert 0.3 < time.monotonic() - started < 2.0
    assert retryable(info.value) and not isinstance(info.value, StreamTruncated)


@pytest.mark.slow
def test_events_that_are_not_keepalives_keep_the_stream_alive(server):
    server.queue(PATH, Reply(chunks=[(b"data: x\n\n", 0.15)] * 6))
    assert len(list(stream(make(server, stall_timeout=0.4)))) == 6


@pytest.mark.slow
def test_the_deadline_caps_the_wait_for_the_status_line(server):
    server.queue(PATH, Reply(chunks=[(b"x", 5)], drop_after=0))
    ctx = RunContext(time.monotonic() + 0.3, deadline_error=RetryBudgetExceeded)
    started = time.monotonic()
    with pytest.raises(RetryBudgetExceeded):
        make(server).post_stream(PATH, {}, ctx)
    assert time.monotonic() - started < 2.0


@pytest.mark.slow
def test_the_deadline_caps_a_read_mid_stream(server):
    server.queue(PATH, Reply(chunks=[b"data: a\n\n", (b"data: b\n\n", 5)]))
    ctx = RunContext(time.monotonic() + 0.4, deadline_error=RetryBudgetExceeded)
    events = stream(make(server), ctx)
    assert next(events).data == "a"
    started = time.monotonic()
    with pytest.raises(RetryBudgetExceeded):
        next(events)
    assert time.monotonic() - started < 2.0


# -- a server that trickles: every read gets a byte in time, the whole never ends ----------

TRICKLE = 0.2  # seconds before each byte: inside every timeout these tests set


def trickled_head():
    """A reply whose status line and headers (about 140 bytes) take half a minute."""
    return Reply(chunks=[b"data: a\n\n"], head_trickle=TRICKLE)


def trickled(data):
    """``data`` as one-byte chunks, each written TRICKLE seconds after the last."""
    return [(data[i:i + 1], TRICKLE) for i in range(len(data))]


def trickled_size_line():
    """A chunked body whose second chunk-size line (150 padding zeros) takes 30 s."""
    return Reply(mode="raw", headers={"Transfer-Encoding": "chunked"},
                 chunks=[b"9\r\ndata: a\n\n\r\n"] + trickled(b"0" * 150 + b"9\r\n")
                 + [b"data: b\n\n\r\n0\r\n\r\n"])


class TricklingProxy:
    """A raw loopback server that answers any request with a status line sent one
    byte every TRICKLE seconds, until the client leaves or 30 s have passed."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            received = b""
            while b"\r\n\r\n" not in received and len(received) < 65536:
                more = conn.recv(65536)
                if not more:
                    return
                received += more
            self.requests += 1
            for byte in (b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 150)[:150]:
                time.sleep(TRICKLE)
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self):
        self.listener.close()


@pytest.mark.slow
def test_a_status_line_and_headers_trickled_a_byte_at_a_time_fail_at_the_read_timeout(server):
    server.queue(PATH, trickled_head())
    started = time.monotonic()
    with pytest.raises(TransportError, match=r"no response from 127\.0\.0\.1:\d+ within 0\.5s"):
        make(server, timeout=0.5, max_retries=0).post_stream(PATH, {}, RunContext())
    assert time.monotonic() - started < 3.0
    assert server.wait_disconnects(1, timeout=2.0)


@pytest.mark.slow
def test_a_trickled_answer_to_post_json_fails_at_the_read_timeout(server):
    server.queue(PATH, Reply(chunks=[b"{}"], mode="length", head_trickle=TRICKLE))
    started = time.monotonic()
    with pytest.raises(TransportError, match="read timeout"):
        make(server, timeout=0.5, max_retries=0).post_json(PATH, {}, RunContext())
    assert time.monotonic() - started < 3.0


@pytest.mark.slow
def test_a_trickled_head_is_retried_by_the_transport_like_a_stalled_one(server):
    server.queue(PATH, trickled_head(), ok())
    started = time.monotonic()
    assert [e.data for e in stream(make(server, timeout=0.5), fake_ctx())] == ["ok"]
    assert time.monotonic() - started < 3.0 and len(server.requests) == 2


@pytest.mark.slow
def test_the_deadline_cuts_a_trickled_head(server):
    server.queue(PATH, trickled_head())
    ctx = RunContext(time.monotonic() + 0.5, deadline_error=RetryBudgetExceeded)
    started = time.monotonic()
    with pytest.raises(RetryBudgetExceeded):
        make(server).post_stream(PATH, {}, ctx)
    assert time.monotonic() - started < 3.0


@pytest.mark.slow
@pytest.mark.parametrize("call", ["post_stream", "post_json"])
def test_cancelling_from_another_thread_cuts_a_trickled_head(server, call):
    server.queue(PATH, Reply(chunks=[b"{}"], mode="length", content_type="application/json",
                             head_trickle=TRICKLE))
    ctx = RunContext()
    threading.Timer(0.3, ctx.cancel).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        getattr(make(server), call)(PATH, {}, ctx)
    assert time.monotonic() - started < 2.0


@pytest.mark.slow
def test_a_proxy_from_the_environment_that_trickles_is_cut_at_the_read_timeout(
        server, monkeypatch):
    proxy = TricklingProxy()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        started = time.monotonic()
        with pytest.raises(TransportError, match="read timeout"):
            make(server, timeout=0.5, max_retries=0).post_stream(PATH, {}, RunContext())
        assert time.monotonic() - started < 3.0
    finally:
        proxy.close()
    assert proxy.requests == 1 and server.requests == []


@pytest.mark.slow
@pytest.mark.parametrize("limit", ["stall", "read timeout", "deadline"])
def test_a_chunk_size_line_trickled_mid_stream_is_cut_at_the_limit(server, limit):
    server.queue(PATH, trickled_size_line())
    ctx = RunContext()
    if limit == "stall":
        transport, error, words = make(server, stall_timeout=0.5), StreamError, "stalled"
    elif limit == "read timeout":
        transport, error, words = make(server, timeout=0.5), TransportError, "read timeout"
    else:
        ctx = RunContext(time.monotonic() + 0.8, deadline_error=RetryBudgetExceeded)
        transport, error, words = make(server), RetryBudgetExceeded, "deadline"
    events = stream(transport, ctx)
    assert next(events).data == "a"
    started = time.monotonic()
    with pytest.raises(error, match=words):
        next(events)
    assert time.monotonic() - started < 3.0
    assert server.wait_disconnects(1, timeout=2.0)


@pytest.mark.slow
def test_cancelling_during_a_trickled_chunk_size_line_unblocks_at_once(server):
    server.queue(PATH, trickled_size_line())
    ctx = RunContext()
    events = stream(make(server), ctx)
    assert next(events).data == "a"
    threading.Timer(0.3, ctx.cancel).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        next(events)
    assert time.monotonic() - started < 2.0


@pytest.mark.slow
def test_a_trailer_trickled_after_the_final_event_costs_at_most_the_drain_bound(server):
    server.queue(PATH, Reply(mode="raw", headers={"Transfer-Encoding": "chunked"},
                             chunks=[b"e\r\ndata: [DONE]\n\n\r\n0\r\n"]
                             + trickled(b"X-Padding: " + b"a" * 150 + b"\r\n\r\n")))
    started = time.monotonic()
    assert [e.data for e in stream(make(server), final=is_done)] == ["[DONE]"]
    assert time.monotonic() - started < DRAIN_SECONDS + 2.0
    assert server.wait_disconnects(1, timeout=2.0)


# -- cancellation -------------------------------------------------------------------------


@pytest.mark.slow
def test_cancelling_from_another_thread_unblocks_a_stalled_read(server):
    server.queue(PATH, Reply(chunks=[b"data: a\n\n", (b"data: b\n\n", 30)]))
    ctx = RunContext()
    events = stream(make(server), ctx)
    assert next(events).data == "a"
    threading.Timer(0.2, ctx.cancel).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        next(events)
    assert time.monotonic() - started < 1.0
    assert server.wait_disconnects(1, timeout=1.0)


def test_a_cancel_set_between_events_of_one_read_stops_the_next_event(server):
    # Every event arrives in one chunk, so one read holds them all.
    body = b"".join(b"data: %d\n\n" % n for n in range(200))
    server.queue(PATH, Reply(chunks=[body, (b"data: late\n\n", 30)]))
    ctx = RunContext()
    events = stream(make(server), ctx)
    assert next(events).data == "0"
    ctx.cancel()
    with pytest.raises(Cancelled):
        next(events)


def test_a_deadline_passed_between_events_of_one_read_stops_the_next_event(server):
    clock = FakeClock()
    body = b"".join(b"data: %d\n\n" % n for n in range(200))
    server.queue(PATH, Reply(chunks=[body, (b"data: late\n\n", 30)]))
    ctx = RunContext(deadline=10.0, clock=clock)
    events = stream(make(server), ctx)
    assert next(events).data == "0"
    clock.advance(11)
    with pytest.raises(Cancelled):
        next(events)


@pytest.mark.slow
def test_cancelling_while_waiting_for_the_status_line_unblocks_at_once(server):
    server.queue(PATH, Reply(chunks=[(b"x", 30)], drop_after=0))
    ctx = RunContext()
    threading.Timer(0.2, ctx.cancel).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        make(server).post_stream(PATH, {}, ctx)
    assert time.monotonic() - started < 1.0


def test_a_cancelled_context_sends_nothing(server):
    ctx = RunContext()
    ctx.cancel()
    with pytest.raises(Cancelled):
        make(server).post_stream(PATH, {}, ctx)
    assert server.requests == []


# -- Content-Length: digits, or the response is unusable ---------------------------------

def wire(text):
    """A header value whose bytes on the wire are ``text`` in UTF-8 (FakeServer writes
    header values as latin-1, as http.server does)."""
    return text.encode("utf-8").decode("latin-1")


NOT_A_LENGTH = ["+9", "0_9", wire("٩"), wire("١٢٣"), "\xb2", "9" * 30, "-9", "0x9", "9.0",
                "9, 8", "9 9", "", "9;"]
A_LENGTH = ["9", " 9 ", "09", "9, 9", "9,9"]
SSE_BODY = b"data: a\n\n"  # 9 bytes
JSON_BODY = b'{"a": 12}'  # 9 bytes


def with_length(value, status=200):
    """A keep-alive reply whose Content-Length field is ``value`` and whose body is the
    9 bytes the call expects: a client that misreads the length waits, or stops early."""
    return {"stream": Reply(status=status, mode="raw", headers={"Content-Length": value},
                            chunks=[SSE_BODY]),
            "json": Reply(status=status, mode="raw", headers={"Content-Length": value},
                          chunks=[JSON_BODY], content_type="application/json")}


def call(transport, kind):
    if kind == "stream":
        return [e.data for e in stream(transport)]
    return transport.post_json(PATH, {}, RunContext())


@pytest.mark.parametrize("kind", ["stream", "json"])
@pytest.mark.parametrize("value", NOT_A_LENGTH)
def test_a_content_length_that_is_not_ascii_digits_is_a_transport_error_at_once(
        server, kind, value):
    server.queue(PATH, with_length(value)[kind])
    started = time.monotonic()
    with pytest.raises(TransportError, match="Content-Length") as info:
        call(make(server, timeout=3, max_retries=0), kind)
    assert time.monotonic() - started < 2.0  # refused on sight, not waited out
    assert info.value.__cause__ is None and retryable(info.value)


def test_an_error_status_with_a_content_length_that_is_not_digits_is_a_transport_error(server):
    server.queue(PATH, with_length("+9", status=500)["json"])
    with pytest.raises(TransportError, match=r"Content-Length '\+9' is not a number of bytes"):
        make(server, max_retries=0).post_stream(PATH, {}, fake_ctx())


@pytest.mark.parametrize("final", [None, is_done])
def test_a_body_of_its_stated_length_from_a_server_that_then_closes_ends_cleanly(server, final):
    # urllib3 closes the connection once it has read the stated length of a body the
    # server will close: the next read finds a closed socket, which is the body's end.
    server.queue(PATH, Reply(mode="raw", headers={"Content-Length": "14", "Connection": "close"},
                             chunks=[DONE]))
    assert [e.data for e in stream(make(server), final=final)] == ["[DONE]"]


@pytest.mark.parametrize("kind", ["stream", "json"])
@pytest.mark.parametrize("value", A_LENGTH)
def test_a_content_length_of_digits_is_read_as_that_length(server, kind, value):
    server.queue(PATH, with_length(value)[kind], with_length(value)[kind])
    transport = make(server, timeout=3)
    expected = ["a"] if kind == "stream" else {"a": 12}
    for _ in range(2):
        started = time.monotonic()
        assert call(transport, kind) == expected
        assert time.monotonic() - started < 2.0  # the body ended at its length, not a timeout
    # One length keeps the connection; a list of one repeated length is read right, but
    # http.client, which saw no length in it, has already marked the connection to close.
    assert server.connections == (1 if "," not in value else 2)


# -- errors -------------------------------------------------------------------------------


def test_a_redirect_is_not_followed(server):
    server.queue(PATH, Reply(status=307, headers={"Location": "http://127.0.0.1:1/elsewhere"}))
    with pytest.raises(APIError, match="redirects are not followed — check base_url"):
        make(server).post_stream(PATH, {}, fake_ctx())
    assert len(server.requests) == 1


@pytest.mark.parametrize("media, body, said", [
    ("text/html", b"<html><body>Welcome to   our site</body></html>", "<html><body>Welcome to our"),
    ("application/json", b'{"error":{"message":"stream must be true"}}', ": stream must be true"),
])
def test_a_2xx_that_is_not_an_event_stream_is_a_stream_error_not_a_truncation(
        server, media, body, said):
    server.queue(PATH, Reply(chunks=[body], mode="length", content_type=media + "; charset=utf-8"))
    with pytest.raises(StreamError) as info:
        make(server).post_stream(PATH, {}, fake_ctx())
    message = str(info.value)
    assert f"answered 200 with {media}, not an event stream" in message
    assert said in message and f"check base_url ({server.url})" in message
    assert not isinstance(info.value, StreamTruncated) and not retryable(info.value)
    assert len(server.requests) == 1


def test_a_2xx_stream_without_a_content_type_is_still_read_as_sse(server):
    server.queue(PATH, Reply(chunks=[b"data: ok\n\n"], content_type=""))
    assert [e.data for e in stream(make(server))] == ["ok"]


@pytest.mark.slow
def test_the_key_never_appears_in_errors_reprs_or_logs(server, caplog):
    echo = {"type": "error", "error": {"type": "authentication_error",
                                       "message": f"invalid x-api-key {KEY}"}}
    server.queue(PATH, Reply.json(echo, status=401),
                 Reply(status=500, chunks=[b"upstream said Bearer " + KEY.encode()], mode="length"),
                 Reply.json(echo, status=429, headers={"retry-after": "1"}),
                 Reply.json(echo, status=429, headers={"retry-after": "1"}),
                 Reply(chunks=[b"data: a\n\n", b"data: b\n"], mode="close"),
                 Reply(chunks=[b"data: a\n\n", (b"x", 5)]))
    messages = []
    bearer = Transport(server.url, {"Authorization": "Bearer " + KEY}, max_retries=0,
                       timeout=0.3, name="openrouter")
    with caplog.at_level(logging.DEBUG):
        for transport in (make(server, max_retries=0), bearer, make(server, max_retries=1)):
            with pytest.raises(APIError) as info:
                transport.post_stream(PATH, {}, fake_ctx())
            messages += [str(info.value), repr(info.value), info.value.message]
        for transport in (make(server), bearer):
            with pytest.raises((StreamTruncated, TransportError)) as info:
                list(stream(transport))
            messages += [str(info.value), repr(info.value)]
        with pytest.raises(TransportError) as info:
            Transport(f"http://127.0.0.1:{free_port()}", {"x-api-key": KEY},
                      max_retries=1).post_stream(PATH, {}, fake_ctx())
        messages += [str(info.value), repr(info.value), repr(info.value.__cause__)]
    messages += [repr(make(server)), repr(bearer), str(pickle.loads(pickle.dumps(make(server))))]
    messages += [record.getMessage() for record in caplog.records]
    assert "invalid x-api-key <hidden>" in messages[0]
    assert len(messages) > 20 and caplog.records
    leaks = [m for m in messages if KEY in m or KEY[:12] in m]
    assert leaks == []


def test_a_transport_pickles_without_its_sessions_and_works_after(server):
    server.queue(PATH, ok(), ok())
    transport = make(server)
    list(stream(transport))
    copy = pickle.loads(pickle.dumps(transport))
    assert copy.headers == transport.headers and copy.base_url == transport.base_url
    assert copy.session is not transport.session
    assert [e.data for e in stream(copy)] == ["ok"]


def test_iter_sse_closes_the_response_when_the_consumer_leaves(server):
    server.queue(PATH, Reply(chunks=[b"data: a\n\ndata: b\n\n"]))
    transport = make(server)
    response = transport.post_stream(PATH, {}, RunContext())
    events = iter_sse(response, RunContext())
    assert next(events).data == "a"
    events.close()
    assert response.raw.closed


# -- secret headers -----------------------------------------------------------------------

def test_secret_headers_are_asked_once_at_the_first_request_and_sent_every_time(server):
    asked = []

    def secrets():
        asked.append(threading.current_thread().name)
        return {"x-api-key": KEY}

    transport = Transport(server.url, {"anthropic-version": "2023-06-01"}, secret_headers=secrets)
    assert asked == []  # building a transport needs no key
    server.queue(PATH, Reply.json({"ok": 1}), Reply.json({"ok": 2}), Reply.json({"ok": 3}))
    threads = [threading.Thread(target=transport.post_json, args=(PATH, {}, RunContext()))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(asked) == 1
    assert [r.headers["x-api-key"] for r in server.requests] == [KEY] * 3
    assert all(r.headers["anthropic-version"] == "2023-06-01" for r in server.requests)


def test_a_missing_key_fails_at_the_first_request_with_nothing_sent(server):
    from nacelle.errors import ConfigError

    def secrets():
        raise ConfigError("no key: set $SOME_API_KEY")

    transport = Transport(server.url, {}, secret_headers=secrets)
    with pytest.raises(ConfigError, match="SOME_API_KEY"):
        transport.post_json(PATH, {}, RunContext())
    assert server.requests == []


def test_a_pickled_transport_leaves_the_secret_headers_behind_and_asks_again(server):
    transport = Transport(server.url, {}, secret_headers=_secret_from_module)
    server.queue(PATH, Reply.json({}), Reply.json({}))
    transport.post_json(PATH, {}, RunContext())
    data = pickle.dumps(transport)
    assert KEY.encode() not in data
    pickle.loads(data).post_json(PATH, {}, RunContext())
    assert [r.headers["x-api-key"] for r in server.requests] == [KEY, KEY]


def _secret_from_module():
    return {"x-api-key": KEY}


# -- a key with a character that has no business in it ------------------------------------

def at(position, char):
    return lambda key: key[:position] + char + key[position:]


STRAYS = [
    (at(12, "\u200b"), "contains a zero width space (U+200B) at position 12"),
    (at(12, "\n"), "contains a newline (U+000A) at position 12"),
    (at(12, "\r\n"), "contains a carriage return (U+000D) at position 12"),
    (at(12, "\t"), "contains a tab (U+0009) at position 12"),
    (at(12, " "), "contains a space (U+0020) at position 12"),
    (at(12, "\x00"), "contains a control character (U+0000) at position 12"),
    (at(12, "\u00a0"), "contains a no-break space (U+00A0) at position 12"),
    (at(12, "é"), "contains a latin small letter e with acute (U+00E9) at position 12"),
    (at(12, "ж"), "contains a cyrillic small letter zhe (U+0436) at position 12"),
    (at(12, "\u2014"), "contains an em dash (U+2014) at position 12"),
    (at(0, "\ufeff"), "contains a byte order mark (U+FEFF) at position 0"),
    (lambda key: key + "\n", "ends with a newline (U+000A)"),
    (lambda key: key + " ", "ends with a space (U+0020)"),
    (lambda key: " " + key, "starts with a space (U+0020)"),
    (lambda key: "\t" + key + "\t", "starts with a tab (U+0009)"),
]


def assert_key_nowhere(error):
    for link in chain(error):
        for text in (str(link), repr(link), repr(link.args)):
            assert "0123456789" not in text and "SECRET" not in text, text


# An environment variable cannot hold a NUL byte; an argument can.
KEY_CASES = [(source, spoil, problem) for source in ("environment", "argument")
             for spoil, problem in STRAYS if source == "argument" or "\x00" not in spoil(KEY)]


@pytest.mark.parametrize("source, spoil, problem", KEY_CASES)
def test_a_key_with_a_stray_character_is_a_config_error_naming_it_and_not_the_key(
        server, monkeypatch, source, spoil, problem):
    bad = spoil(KEY)
    if source == "environment":
        monkeypatch.setenv("ANTHROPIC_API_KEY", bad)
        given, named = None, "the Anthropic API key from $ANTHROPIC_API_KEY"
    else:
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        given, named = bad, "the api_key given to anthropic.Backend"
    transport = Transport(server.url, {}, secret_headers=lambda: {
        "x-api-key": _http.read_key(given, "ANTHROPIC_API_KEY", "Anthropic", "anthropic")})
    ctx = fake_ctx()
    for send in (transport.post_json, transport.post_stream):  # the first request, and again
        with pytest.raises(ConfigError) as info:
            send(PATH, {}, ctx)
        assert str(info.value).startswith(f"{named} {problem}")
        assert not isinstance(info.value, TransportError) and not retryable(info.value)
        assert_key_nowhere(info.value)
    assert server.requests == [] and ctx.clock.sleeps == []


@pytest.mark.parametrize("spoil, problem", STRAYS[:3])
def test_a_secret_header_with_a_stray_character_is_a_config_error_naming_the_header_only(
        server, spoil, problem):
    transport = Transport(server.url, {}, secret_headers=lambda: {
        "Authorization": "Bearer " + spoil(KEY)})
    with pytest.raises(ConfigError) as info:
        transport.post_json(PATH, {}, fake_ctx())
    assert str(info.value).startswith("the Authorization header contains")
    assert_key_nowhere(info.value)
    assert server.requests == []


@pytest.mark.parametrize("value, problem", [
    ("Caf\u00e9 \u2615", "contains a hot beverage (U+2615) at position 5"),
    ("my app\r\nX-Injected: 1", "contains a carriage return (U+000D) at position 6"),
    (" padded", "starts with a space (U+0020)"),
])
def test_a_header_value_http_cannot_carry_is_a_config_error_when_the_transport_is_made(
        value, problem):
    with pytest.raises(ConfigError, match="^" + re.escape(f"the X-Title header {problem}")):
        Transport("http://127.0.0.1:1", {"X-Title": value})


def test_a_latin1_header_value_is_carried():
    assert Transport("http://127.0.0.1:1", {"X-Title": "Caf\u00e9"}).headers == {"X-Title": "Café"}


def test_a_key_of_printable_ascii_is_sent_as_it_is(server, monkeypatch):
    odd = "sk-!#$%&'*+./:;<=>?@[]^_`{|}~0123456789"
    monkeypatch.setenv("SOME_API_KEY", odd)
    server.queue(PATH, Reply.json({}))
    Transport(server.url, {}, secret_headers=lambda: {
        "x-api-key": _http.read_key(None, "SOME_API_KEY", "Some", "some")}).post_json(
        PATH, {}, RunContext())
    assert server.requests[0].headers["x-api-key"] == odd


@pytest.mark.parametrize("value", ["", "   ", "\n"])
def test_a_blank_key_in_the_environment_is_no_key(monkeypatch, value):
    monkeypatch.setenv("SOME_API_KEY", value)
    with pytest.raises(ConfigError, match=r"^no Some API key: pass api_key= to some\.Backend"):
        _http.read_key(None, "SOME_API_KEY", "Some", "some")


# -- the environment ------------------------------------------------------------------------

def test_a_proxy_from_the_environment_is_used(server, monkeypatch):
    with FakeServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        with pytest.raises(APIError):  # the proxy has nothing queued: a 500
            make(server, max_retries=0).post_json(PATH, {}, RunContext())
    assert server.requests == []
    assert [r.path for r in proxy.requests] == [server.url + PATH]  # absolute form: a proxy request


def test_no_proxy_in_the_environment_is_honoured(server, monkeypatch):
    with FakeServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        server.queue(PATH, Reply.json({"ok": True}))
        assert make(server).post_json(PATH, {}, RunContext()) == {"ok": True}
    assert proxy.requests == [] and len(server.requests) == 1


def test_a_streamed_request_leaves_no_reference_cycle_holding_its_connection(server):
    # A thousand runs at once would otherwise keep a thousand connections (sockets,
    # buffers) alive until the collector came round.
    import gc

    transport = make(server)
    server.queue(PATH, *[Reply(chunks=[b"data: a\n\n"]) for _ in range(3)])
    ctx = RunContext()
    list(transport.events(transport.post_stream(PATH, {}, ctx), ctx))  # warm: the session
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(2):
            list(transport.events(transport.post_stream(PATH, {}, ctx), ctx))
        gc.collect()
        ours = [type(o).__name__ for o in gc.garbage
                if type(o).__module__.startswith(("nacelle", "urllib3", "requests"))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert ours == []


def test_the_environment_is_read_once_per_session_not_per_request(server, monkeypatch):
    transport = make(server)
    server.queue(PATH, Reply.json({}), Reply.json({}))
    transport.post_json(PATH, {}, RunContext())
    with FakeServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)  # too late for this session
        transport.post_json(PATH, {}, RunContext())
    assert proxy.requests == [] and len(server.requests) == 2


def test_a_stream_is_read_on_a_blocking_socket_and_still_cut_at_the_read_timeout(server):
    # A socket with a timeout polls before every recv: a second system call per read,
    # each letting go of the interpreter lock. The cutoff armed around each read is
    # the limit instead.
    from nacelle._net.sockets import socket_of

    server.queue(PATH, Reply(chunks=[b"data: a\n\n", (b"data: b\n\n", 5)]))
    transport = make(server, timeout=0.3, max_retries=0)
    ctx = RunContext()
    response = transport.post_stream(PATH, {}, ctx)
    sock = socket_of(response)
    assert sock is not None and sock.gettimeout() is not None  # the request's own
    events = transport.events(response, ctx)
    assert next(events).data == "a"
    assert sock.gettimeout() is None
    started = time.monotonic()
    with pytest.raises(TransportError, match=r"no data from 127\.0\.0\.1:\d+ for 0\.3s"):
        next(events)
    assert time.monotonic() - started < 2.0


def test_a_connection_reused_after_a_blocking_stream_has_its_timeout_again(server):
    server.queue(PATH, Reply(chunks=[b"data: a\n\n"]),
                 Reply(chunks=[(b"x", 5)], drop_after=0))
    transport = make(server, timeout=0.3, max_retries=0)
    assert [e.data for e in stream(transport)] == ["a"]
    started = time.monotonic()
    with pytest.raises(TransportError, match=r"no response from 127\.0\.0\.1:\d+ within 0\.3s"):
        transport.post_stream(PATH, {}, RunContext())
    assert time.monotonic() - started < 2.0
    assert server.connections == 1


def test_a_short_body_in_pieces_is_sent_joined_and_a_long_one_in_its_pieces(server):
    # http.client sends each piece of an iterable body with a system call of its own.
    sent = []
    transport = make(server)
    session = transport.session
    send = session.send

    def spy(request, **kwargs):
        sent.append(type(request.body).__name__)
        return send(request, **kwargs)

    session.send = spy
    short = Body([b'{"a":', b'"b"}'])
    long = Body([b'{"a":"', b"x" * (_http._JOIN_BODY + 1), b'"}'])
    server.queue("/count", Reply.json({"ok": 1}), Reply.json({"ok": 2}))
    assert transport.post_json("/count", short, RunContext()) == {"ok": 1}
    assert transport.post_json("/count", long, RunContext()) == {"ok": 2}
    assert sent == ["bytes", "Body"]
    assert [r.body for r in server.requests] == [bytes(short), bytes(long)]


def test_a_stream_reads_a_little_at_a_time_until_a_read_comes_back_full(server, monkeypatch):
    # Each read makes a bytes of the size asked for, held while the thread waits in
    # recv: a thousand streams waiting on 64 KiB each cost resident memory, so reads
    # ask for a bytes object Python's small-object pools serve (512 bytes with its
    # header), and for 64 KiB only while the body arrives faster than that.
    reads = []
    reader = _http._reader

    def spy(response):
        read = reader(response)

        def recorded(size):
            data = read(size)
            reads.append((size, len(data)))
            return data
        return recorded

    monkeypatch.setattr(_http, "_reader", spy)
    big = "x" * (100 * 1024)
    server.queue(PATH, Reply(chunks=[b"data: a\n\n", ("data: %s\n\n" % big).encode(),
                                     (b"data: b\n\n", 0.05)]))
    assert [e.data for e in stream(make(server))] == ["a", big, "b"]
    assert reads[0][0] == _http._READ_SMALL and sys.getsizeof(b"x" * _http._READ_SMALL) <= 512
    for (asked, got), (next_asked, _) in zip(reads, reads[1:]):
        assert next_asked == (_http._READ_SIZE if got >= asked else _http._READ_SMALL)
    assert (_http._READ_SIZE, _http._READ_SIZE) in reads  # the big event moved in 64 KiB
    assert reads[-2:] == [(_http._READ_SMALL, 9), (_http._READ_SMALL, 0)]


def test_a_stream_gzipped_against_accept_encoding_identity_is_still_decoded(server):
    # Such a body is left to urllib3's reader, which decodes it; an uncoded one is
    # read from http.client's response directly.
    import gzip

    body = gzip.compress(b"data: gr\xc3\xbc\xc3\x9f\n\ndata: b\n\n")
    server.queue(PATH, Reply(chunks=[body], mode="length",
                             headers={"Content-Encoding": "gzip"}))
    assert [e.data for e in stream(make(server))] == ["grüß", "b"]


@pytest.mark.parametrize("mode", ["chunked", "length"])
def test_streams_read_to_their_end_leave_their_connection_to_the_next(server, mode):
    server.queue(PATH, *[Reply(chunks=[b"data: %d\n\n" % i], mode=mode) for i in range(3)])
    transport = make(server)
    assert [[e.data for e in stream(transport)] for _ in range(3)] == [["0"], ["1"], ["2"]]
    assert server.connections == 1
