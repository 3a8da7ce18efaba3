"""FakeServer against real clients: requests over loopback, and raw sockets where
requests would hide what is on the wire."""

import socket
import threading
import time

import pytest
import requests

from nacelle.testing import FakeServer, RecordedRequest, Reply


@pytest.fixture
def server():
    with FakeServer() as fake:
        yield fake


def raw_exchange(server, request=b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n"):
    """Send one raw request and read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request)
        received = []
        while True:
            data = sock.recv(65536)
            if not data:
                return b"".join(received)
            received.append(data)


def test_server_listens_on_loopback_with_a_free_port(server):
    assert server.url == f"http://127.0.0.1:{server.port}"
    assert server.port > 0
    with FakeServer() as other:
        assert other.port != server.port


def test_replies_are_served_in_order_and_requests_recorded(server):
    server.queue("/v1/messages", Reply(chunks=[b"one"]), Reply(status=201, chunks=[b"two"]))
    first = requests.post(server.url + "/v1/messages?beta=true", json={"a": "é"},
                          headers={"X-Custom": "v"}, timeout=5)
    second = requests.post(server.url + "/v1/messages", data=b"raw", timeout=5)
    assert (first.status_code, first.content) == (200, b"one")
    assert (second.status_code, second.content) == (201, b"two")
    recorded = server.requests
    assert [r.method for r in recorded] == ["POST", "POST"]
    assert recorded[0].path == "/v1/messages" and recorded[0].query == "beta=true"
    assert recorded[0].headers["x-custom"] == "v"
    assert recorded[0].json() == {"a": "é"}
    assert recorded[1].body == b"raw"
    server.assert_consumed()


def test_a_request_with_nothing_queued_gets_a_500_naming_it_and_is_recorded(server):
    response = requests.get(server.url + "/nowhere", timeout=5)
    assert response.status_code == 500
    assert "nothing queued for GET /nowhere" in response.json()["error"]["message"]
    assert [r.path for r in server.unexpected] == ["/nowhere"]
    with pytest.raises(AssertionError, match="unexpected GET /nowhere"):
        server.assert_consumed()


def test_assert_consumed_fails_while_replies_are_left(server):
    server.queue("/a", Reply(), Reply())
    requests.get(server.url + "/a", timeout=5)
    assert server.pending == {"/a": 1}
    with pytest.raises(AssertionError, match="1 queued reply for /a never requested"):
        server.assert_consumed()


def test_chunked_mode_frames_each_chunk_and_ends_the_body(server):
    server.queue("/s", Reply(chunks=[b"ab", b"", b"cde"]))
    raw = raw_exchange(server, b"GET /s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    assert b"Content-Type: text/event-stream" in head
    assert body == b"2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n"


def test_close_mode_sends_no_length_and_closes_the_connection(server):
    server.queue("/s", Reply(chunks=[b"ab", b"cd"], mode="close"))
    raw = raw_exchange(server)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Content-Length" not in head and b"chunked" not in head
    assert b"Connection: close" in head
    assert body == b"abcd"


def test_length_mode_sends_content_length(server):
    server.queue("/s", Reply(chunks=[b"ab", b"cd"], mode="length", content_type="text/plain"))
    response = requests.get(server.url + "/s", timeout=5)
    assert response.headers["Content-Length"] == "4"
    assert response.headers["Content-Type"] == "text/plain"
    assert response.content == b"abcd"


def test_headers_are_sent_and_can_replace_the_content_type(server):
    server.queue("/s", Reply(headers={"Retry-After": "3", "content-type": "application/x"}))
    response = requests.get(server.url + "/s", timeout=5)
    assert response.headers["Retry-After"] == "3"
    assert response.headers["Content-Type"] == "application/x"


def test_json_reply_has_a_json_body(server):
    server.queue("/count", Reply.json({"input_tokens": 14}, status=200, headers={"request-id": "r"}))
    response = requests.post(server.url + "/count", timeout=5)
    assert response.json() == {"input_tokens": 14}
    assert response.headers["request-id"] == "r"


@pytest.mark.slow
def test_delayed_chunks_arrive_one_at_a_time(server):
    server.queue("/s", Reply(chunks=[b"first", (b"second", 0.4)]))
    with requests.get(server.url + "/s", stream=True, timeout=5) as response:
        start = time.monotonic()
        first = response.raw.read1(100)
        first_at = time.monotonic() - start
        rest = response.raw.read()
        rest_at = time.monotonic() - start
    assert first == b"first" and rest == b"second"
    assert first_at < 0.3 <= rest_at


def test_drop_after_zero_drops_the_connection_before_the_status_line(server):
    server.queue("/s", Reply(chunks=[b"x"], drop_after=0))
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url + "/s", timeout=5)
    assert len(server.requests) == 1


def test_drop_after_k_cuts_a_chunked_body_after_k_chunks(server):
    server.queue("/s", Reply(chunks=[b"a", b"b", b"c"], drop_after=2))
    raw = raw_exchange(server)
    assert raw.endswith(b"1\r\na\r\n1\r\nb\r\n")


def test_drop_after_k_in_length_mode_leaves_the_body_short(server):
    server.queue("/s", Reply(chunks=[b"aa", b"bb"], mode="length", drop_after=1))
    raw = raw_exchange(server)
    assert b"Content-Length: 4" in raw and raw.endswith(b"\r\n\r\naa")


@pytest.mark.slow
def test_a_trickled_head_arrives_one_byte_at_a_time_then_the_body_at_once(server):
    server.queue("/s", Reply(chunks=[b"body"], mode="length", head_trickle=0.01))
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        reads = []
        while not b"".join(reads).endswith(b"body") and len(reads) < 1000:
            reads.append(sock.recv(65536))
    head, _, body = b"".join(reads).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"Content-Length: 4" in head
    assert body == b"body"
    assert len(reads) > len(head) // 4  # bytes came apart, not in one write
    assert time.monotonic() - started >= len(head) * 0.01 * 0.5


@pytest.mark.slow
def test_a_client_leaving_during_a_trickled_head_ends_the_trickle(server):
    server.queue("/s", Reply(head_trickle=0.2))
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n")
    assert sock.recv(1) == b"H"
    sock.close()
    assert server.wait_disconnects(1, timeout=2.0)


def test_raw_mode_writes_the_chunks_as_the_framing_and_adds_no_framing_headers(server):
    server.queue("/s", Reply(mode="raw", headers={"Transfer-Encoding": "chunked"},
                             chunks=[b"2\r\nab\r\n", (b"0", 0.05), b"3\r\ncde\r\n0\r\n\r\n"]))
    response = requests.get(server.url + "/s", timeout=5)
    assert response.content == b"abcde"
    assert "Content-Length" not in response.headers and "Connection" not in response.headers


@pytest.mark.slow
def test_raw_mode_keeps_the_connection_open_after_the_chunks(server):
    server.queue("/s", Reply(mode="raw", headers={"Content-Length": "9"}, chunks=[b"abc"]))
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while not received.endswith(b"abc"):
            received += sock.recv(65536)
        sock.settimeout(0.3)
        with pytest.raises(socket.timeout):  # no close: the client waits for 6 more bytes
            sock.recv(1)
    assert b"Content-Length: 9" in received


def test_a_client_leaving_during_a_stall_is_seen_within_a_second(server):
    server.queue("/s", Reply(chunks=[b"data: a\n\n", (b"late", 30)]))
    response = requests.get(server.url + "/s", stream=True, timeout=5)
    assert response.raw.read1(100) == b"data: a\n\n"
    left_at = time.monotonic()
    response.close()
    assert server.wait_disconnects(1, timeout=1.0)
    assert time.monotonic() - left_at < 1.0
    assert server.disconnects == 1


def test_connections_are_counted_and_reused_by_keep_alive(server):
    server.queue("/a", Reply(chunks=[b"1"]), Reply(chunks=[b"2"], mode="length"))
    with requests.Session() as session:
        session.get(server.url + "/a", timeout=5)
        session.get(server.url + "/a", timeout=5)
    requests.get(server.url + "/b", timeout=5)
    assert server.connections == 2
    assert [r.connection for r in server.requests] == [1, 1, 2]


def test_stop_is_prompt_with_a_stalled_reply_and_an_idle_connection():
    server = FakeServer().start()
    server.queue("/s", Reply(chunks=[b"x", (b"y", 60)]))
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    response = requests.get(server.url + "/s", stream=True, timeout=5)
    response.raw.read1(10)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1.0
    assert server.disconnects == 0  # the server left; the client did not
    idle.close()
    response.close()


def test_wait_requests_returns_once_requests_arrived(server):
    server.queue("/a", Reply())
    threading.Timer(0.05, lambda: requests.get(server.url + "/a", timeout=5)).start()
    assert server.wait_requests(1, timeout=2.0)
    assert not server.wait_requests(2, timeout=0.05)


def test_url_before_start_is_a_clear_error():
    with pytest.raises(RuntimeError, match="not started"):
        FakeServer().url


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"status": 99}, ValueError, "status"),
        ({"mode": "stream"}, ValueError, "mode must be one of"),
        ({"chunks": b"abc"}, TypeError, "sequence of chunks"),
        ({"chunks": ["text"]}, TypeError, "chunk 0 must be bytes"),
        ({"chunks": [(b"x", -1)]}, TypeError, "chunk 0 must be bytes"),
        ({"chunks": [b"x"], "drop_after": 2}, ValueError, "drop_after must be an int in 0..1"),
        ({"headers": {"a": 1}}, TypeError, "header names and values must be str"),
        ({"head_trickle": -0.1}, ValueError, "head_trickle must be seconds >= 0"),
        ({"head_trickle": True}, ValueError, "head_trickle must be seconds >= 0"),
    ],
)
def test_bad_reply_arguments_are_clear_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        Reply(**kwargs)


def test_reply_does_not_keep_the_callers_containers():
    headers = {"a": "1"}
    chunks = [b"x"]
    reply = Reply(headers=headers, chunks=chunks)
    headers["b"] = "2"
    chunks.append(b"y")
    assert reply.headers == {"a": "1"} and reply.chunks == ((b"x", 0.0),)


def test_queue_refuses_bad_arguments(server):
    with pytest.raises(ValueError, match="starting with '/'"):
        server.queue("v1/messages", Reply())
    with pytest.raises(TypeError, match="Reply values"):
        server.queue("/v1/messages", b"data")


def test_recorded_request_json_parses_the_body():
    assert RecordedRequest("POST", "/", {}, b'{"x": [1]}').json() == {"x": [1]}


def test_a_client_resetting_an_idle_connection_is_logged_not_printed(server, caplog, capfd):
    import logging
    import struct

    server.queue("/s", Reply(chunks=[b"done"], mode="length"))
    with caplog.at_level(logging.DEBUG, logger="nacelle.testing.server"):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sock.sendall(b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while not received.endswith(b"done"):
            received += sock.recv(65536)
        # Linger 0: closing sends a reset, as a client dropping a pooled connection can.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(
                "error serving" in r.getMessage() for r in caplog.records):
            time.sleep(0.01)
    logged = [r for r in caplog.records if "error serving" in r.getMessage()]
    assert logged and logged[0].levelno == logging.DEBUG
    assert "Traceback" not in capfd.readouterr().err
