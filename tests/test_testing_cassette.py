"""Cassette against real parts: a FakeServer as the upstream, the real Anthropic
backend driven by an Agent, and replays from the saved file alone after the upstream
has stopped. Raw sockets where requests would hide what is on the wire."""

import base64
import json
import socket
import time

import pytest
import requests

import nacelle
from nacelle import APIError, user_text
from nacelle.backends import anthropic
from nacelle.testing import Cassette, FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

KEY = "sk-ant-api03-SECRET-do-not-leak-0123456789"
PATH = "/v1/messages"


@pytest.fixture(autouse=True)
def no_environment(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("NACELLE_CASSETTE", raising=False)


@pytest.fixture
def upstream():
    with FakeServer() as server:
        yield server


@pytest.fixture
def path(tmp_path):
    return tmp_path / "cassettes" / "weather.json"


@nacelle.tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city.
    """
    return {"Paris": "21 degrees, sun", "Rome": "25 degrees, sun"}[city]


def weather_agent(cassette, key=KEY):
    backend = anthropic.Backend(key, base_url=cassette.url, max_retries=2)
    return nacelle.Agent(backend, "You report the weather.", tools=[get_weather])


def queue_weather_run(upstream):
    upstream.queue(PATH,
                   Reply(chunks=anthropic_stream(["Let me check."], tool_calls=[
                       ("toolu_1", "get_weather", '{"city": "Paris"}')])),
                   Reply(chunks=anthropic_stream(["Paris: 21 degrees", ", sun."])))


def record_weather_run(upstream, path, question="Weather in Paris?"):
    queue_weather_run(upstream)
    with Cassette(path, upstream=upstream.url) as cassette:
        assert cassette.mode == "record"
        result = weather_agent(cassette).run([user_text(question)])
    upstream.assert_consumed()
    return result


def read(path):
    return json.loads(path.read_text(encoding="utf-8"))


def raw_get(cassette, target="/s"):
    """One raw request; the response bytes as they arrived, read by read."""
    with socket.create_connection(("127.0.0.1", cassette.port), timeout=5) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        received = b""
        while True:
            data = sock.recv(65536)
            if not data:
                return received
            received += data


# -- recording, then replaying from the file alone ----------------------------------------

def test_a_recorded_agent_run_replays_from_the_file_alone_with_the_same_result(upstream, path):
    recorded = record_weather_run(upstream, path)
    address = upstream.url
    upstream.stop()
    with Cassette(path, upstream=address) as cassette:  # the file exists: replay
        assert cassette.mode == "replay"
        replayed = weather_agent(cassette, key="sk-test").run([user_text("Weather in Paris?")])
    assert recorded.text == "Paris: 21 degrees, sun." and recorded.turns == 2
    assert replayed == recorded


def test_the_saved_file_holds_no_api_key_and_is_versioned_indented_json(upstream, path):
    record_weather_run(upstream, path)
    raw = path.read_bytes()
    assert KEY.encode() not in raw
    document = read(path)
    assert document["version"] == 1 and len(document["exchanges"]) == 2
    request = document["exchanges"][0]["request"]
    assert request["headers"]["x-api-key"] == "<scrubbed>"
    assert "host" not in request["headers"] and "content-length" not in request["headers"]
    assert json.loads(request["body"])["messages"][0]["content"][0]["text"] == "Weather in Paris?"
    assert raw.startswith(b'{\n  "version": 1,')


def test_a_key_echoed_in_an_error_body_or_sent_in_the_query_is_scrubbed(upstream, path):
    upstream.queue("/v1/models", Reply.json({"error": f"bad key {KEY}"}, status=401))
    with Cassette(path, upstream=upstream.url) as cassette:
        response = requests.get(cassette.url + f"/v1/models?api_key={KEY}&page=2",
                                headers={"Authorization": f"Bearer {KEY}",
                                         "X-Goog-Api-Key": KEY, "Cookie": "session=abcdefgh123"},
                                timeout=5)
        assert response.status_code == 401 and KEY in response.text  # the client sees it
    raw = path.read_bytes()
    assert KEY.encode() not in raw and b"abcdefgh123" not in raw
    exchange = read(path)["exchanges"][0]
    assert exchange["request"]["query"] == "api_key=<scrubbed>&page=2"
    assert {exchange["request"]["headers"][n] for n in ("authorization", "x-goog-api-key", "cookie")} \
        == {"<scrubbed>"}
    with Cassette(path) as cassette:  # a replay with another key still matches
        response = requests.get(cassette.url + "/v1/models?api_key=sk-other-key-1234&page=2",
                                timeout=5)
        assert response.status_code == 401
        assert response.json() == {"error": "bad key <scrubbed>"}
        assert int(response.headers["Content-Length"]) == len(response.content)


@pytest.mark.slow
def test_a_key_echoed_across_two_upstream_reads_is_scrubbed_whole(upstream, path):
    head, tail = KEY[:17].encode(), KEY[17:].encode()
    upstream.queue("/s", Reply(chunks=[b"data: {\"echo\": \"" + head,
                                       (tail + b"\"}\n\n", 0.1), (b"data: end\n\n", 0.1)]))
    with Cassette(path, upstream=upstream.url) as cassette:
        response = requests.get(cassette.url + "/s", headers={"x-api-key": KEY}, timeout=5)
        assert KEY in response.text  # the recording client sees what the upstream said
    raw = path.read_bytes()
    assert head not in raw and tail not in raw
    chunks = read(path)["exchanges"][0]["response"]["chunks"]
    assert chunks == ['data: {"echo": "<scrubbed>', '"}\n\n', "data: end\n\n"]
    upstream.stop()
    with Cassette(path) as cassette:
        response = requests.get(cassette.url + "/s", timeout=5)
    assert response.text == 'data: {"echo": "<scrubbed>"}\n\ndata: end\n\n'


def test_a_key_cut_off_at_the_end_of_a_dropped_body_is_not_saved_in_part(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"echo " + KEY[:20].encode(), b"rest"], drop_after=1))
    with Cassette(path, upstream=upstream.url) as cassette:
        with pytest.raises(requests.RequestException):
            requests.get(cassette.url + "/s", headers={"x-api-key": KEY}, timeout=5).content
    assert KEY[:8].encode() not in path.read_bytes()
    assert read(path)["exchanges"][0]["response"]["chunks"] == ["echo <scrubbed>"]


def test_a_key_echoed_in_a_response_header_is_scrubbed(upstream, path):
    upstream.queue("/s", Reply(headers={"x-echo": f"your key {KEY}", "X-Api-Key": "other-key-0123",
                                        "request-id": "req_1"}, chunks=[b"ok"]))
    with Cassette(path, upstream=upstream.url) as cassette:
        requests.get(cassette.url + "/s", headers={"Authorization": f"Bearer {KEY}"},
                     timeout=5)
    assert KEY.encode() not in path.read_bytes()
    saved = read(path)["exchanges"][0]["response"]["headers"]
    assert "x-echo: your key <scrubbed>" in saved and "X-Api-Key: <scrubbed>" in saved
    assert "request-id: req_1" in saved


def test_hop_by_hop_headers_and_set_cookie_are_not_saved_or_replayed(upstream, path):
    upstream.queue("/s", Reply(headers={"Set-Cookie": "id=1", "Keep-Alive": "timeout=5",
                                        "request-id": "req_1"}, chunks=[b"ok"]))
    with Cassette(path, upstream=upstream.url) as cassette:
        requests.get(cassette.url + "/s", timeout=5)
    saved = [line.split(":")[0].lower() for line in read(path)["exchanges"][0]["response"]["headers"]]
    assert "request-id" in saved and "content-type" in saved
    assert not {"set-cookie", "keep-alive", "transfer-encoding", "connection"} & set(saved)
    upstream.stop()
    with Cassette(path) as cassette:
        response = requests.get(cassette.url + "/s", timeout=5)
    assert response.content == b"ok" and response.headers["request-id"] == "req_1"
    assert "Set-Cookie" not in response.headers and "Keep-Alive" not in response.headers


@pytest.mark.slow
def test_sse_chunks_replay_with_the_boundaries_they_were_recorded_with(upstream, path):
    events = anthropic_stream(["Hel", "lo"])
    upstream.queue("/s", Reply(chunks=[(event, 0.02) for event in events]))
    with Cassette(path, upstream=upstream.url) as cassette:
        requests.get(cassette.url + "/s", timeout=5)
    chunks = read(path)["exchanges"][0]["response"]["chunks"]
    assert chunks == [event.decode() for event in events]  # one saved chunk per read
    upstream.stop()
    with Cassette(path) as cassette:
        raw = raw_get(cassette)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head and head.startswith(b"HTTP/1.1 200 OK")
    assert body == b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


@pytest.mark.slow
def test_timing_is_saved_and_replayed_only_when_asked(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"a", (b"b", 0.2)]), Reply(chunks=[b"a", (b"b", 0.2)]))
    with Cassette(path, upstream=upstream.url, timing=True) as cassette:
        requests.get(cassette.url + "/s", timeout=5)
    chunks = read(path)["exchanges"][0]["response"]["chunks"]
    assert chunks[1]["text"] == "b" and chunks[1]["delay"] >= 0.15
    untimed = path.with_name("untimed.json")
    with Cassette(untimed, upstream=upstream.url) as cassette:
        requests.get(cassette.url + "/s", timeout=5)
    assert read(untimed)["exchanges"][0]["response"]["chunks"] == ["a", "b"]
    for timing, slow in ((True, True), (False, False)):
        with Cassette(path, timing=timing) as cassette:
            with requests.get(cassette.url + "/s", stream=True, timeout=5) as response:
                started = time.monotonic()
                assert response.raw.read(1) == b"a" and response.raw.read() == b"b"
                assert (time.monotonic() - started >= 0.15) is slow


def test_a_non_utf8_body_round_trips_as_base64(upstream, path):
    upstream.queue("/bin", Reply(chunks=[b"\xff\x00\xfe", b"text"], content_type="application/octet-stream"))
    with Cassette(path, upstream=upstream.url) as cassette:
        recorded = requests.post(cassette.url + "/bin", data=b"\x80\x81", timeout=5).content
    exchange = read(path)["exchanges"][0]
    assert exchange["request"]["body"] == {"base64": base64.b64encode(b"\x80\x81").decode()}
    assert exchange["response"]["chunks"][1] == "text"
    upstream.stop()
    with Cassette(path) as cassette:
        replayed = requests.post(cassette.url + "/bin", data=b"\x80\x81", timeout=5).content
    assert replayed == recorded == b"\xff\x00\xfetext"


def test_upstream_http_errors_are_recorded_and_replayed_the_same_way(upstream, path):
    overloaded = Reply.json({"type": "error", "error": {"type": "overloaded_error",
                                                        "message": "Overloaded"}},
                            status=529, headers={"retry-after-ms": "20"})
    upstream.queue(PATH, overloaded, Reply(chunks=anthropic_stream(["Sunny."])))
    with Cassette(path, upstream=upstream.url) as cassette:
        recorded = weather_agent(cassette).run([user_text("Weather?")])
    assert [e["response"]["status"] for e in read(path)["exchanges"]] == [529, 200]
    upstream.stop()
    with Cassette(path) as cassette:
        replayed = weather_agent(cassette).run([user_text("Weather?")])
        assert len(cassette.requests) == 2  # the backend retried the replayed 529
    assert replayed == recorded and replayed.text == "Sunny."


# -- matching -----------------------------------------------------------------------------

def test_a_changed_prompt_fails_fast_naming_the_field_that_differs(upstream, path):
    record_weather_run(upstream, path)
    upstream.stop()
    with pytest.raises(AssertionError) as failed:
        with Cassette(path) as cassette:
            started = time.monotonic()
            with pytest.raises(APIError) as refused:
                weather_agent(cassette).run([user_text("Weather in Rome?")])
            assert time.monotonic() - started < 1.0 and len(cassette.requests) == 1
    where = '/body/messages/0/content/0/text: recorded "Weather in Paris?", now "Weather in Rome?"'
    assert refused.value.status == 400 and where in str(refused.value)
    assert "POST /v1/messages matches no recording; nearest is #1" in str(failed.value)
    assert where in str(failed.value)
    assert "2 recorded exchanges never replayed" in str(failed.value)


def test_identical_requests_replay_their_recordings_in_order(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"one"]), Reply(chunks=[b"two"]))
    with Cassette(path, upstream=upstream.url) as cassette:
        for _ in range(2):
            requests.post(cassette.url + "/s", json={"q": 1}, timeout=5)
    upstream.stop()
    with pytest.raises(AssertionError, match="sent more often than recorded: its 2 recordings"):
        with Cassette(path) as cassette:
            answers = [requests.post(cassette.url + "/s", json={"q": 1}, timeout=5)
                       for _ in range(3)]
            assert [a.content for a in answers[:2]] == [b"one", b"two"]
            assert answers[2].status_code == 400
            assert answers[2].headers["x-should-retry"] == "false"


def test_json_bodies_match_whatever_their_key_order_and_spacing(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"ok"]))
    with Cassette(path, upstream=upstream.url) as cassette:
        requests.post(cassette.url + "/s", data=b'{"a": 1, "b": [2]}', timeout=5)
    with Cassette(path) as cassette:
        assert requests.post(cassette.url + "/s", data=b'{"b":[2],"a":1}', timeout=5).content == b"ok"


def test_ignored_fields_may_differ_and_others_may_not(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"ok"]))
    recorded = {"metadata": {"user_id": "u1"}, "messages": [{"id": "m1", "text": "hi"}]}
    with Cassette(path, upstream=upstream.url) as cassette:
        requests.post(cassette.url + "/s", json=recorded, timeout=5)
    with Cassette(path, match=("metadata.user_id", "messages.*.id")) as cassette:
        sent = {"metadata": {"user_id": "u2"}, "messages": [{"id": "m2", "text": "hi"}]}
        assert requests.post(cassette.url + "/s", json=sent, timeout=5).content == b"ok"
    with pytest.raises(AssertionError, match='/body/messages/0/text: recorded "hi", now "bye"'):
        with Cassette(path, match=("metadata.user_id",)) as cassette:
            sent = {"metadata": {"user_id": "u2"}, "messages": [{"id": "m1", "text": "bye"}]}
            assert requests.post(cassette.url + "/s", json=sent, timeout=5).status_code == 400


def test_a_match_callable_decides_which_requests_are_the_same(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"ok"]))
    with Cassette(path, upstream=upstream.url) as cassette:
        requests.post(cassette.url + "/s?page=1", json={"q": "a"}, timeout=5)
    by_path = lambda request: {"path": request.path}  # noqa: E731
    with Cassette(path, match=by_path) as cassette:
        assert requests.post(cassette.url + "/s?page=9", json={"q": "z"}, timeout=5).content == b"ok"
    with pytest.raises(AssertionError, match='/path: recorded "/s", now "/t"'):
        with Cassette(path, match=by_path) as cassette:
            requests.post(cassette.url + "/t", timeout=5)


def test_a_different_method_path_or_query_is_named(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"ok"]))
    with Cassette(path, upstream=upstream.url) as cassette:
        requests.get(cassette.url + "/s?page=1", timeout=5)
    with pytest.raises(AssertionError) as failed:
        with Cassette(path) as cassette:
            requests.put(cassette.url + "/s?page=2", timeout=5)
    assert '/method: recorded "GET", now "PUT"' in str(failed.value)
    assert '/query: recorded "page=1", now "page=2"' in str(failed.value)


# -- modes, the file and failures ---------------------------------------------------------

def test_record_true_records_again_over_an_existing_file(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"old"]), Reply(chunks=[b"new"]))
    for _ in range(2):
        with Cassette(path, upstream=upstream.url, record=True) as cassette:
            assert cassette.mode == "record"
            requests.get(cassette.url + "/s", timeout=5)
    assert read(path)["exchanges"][0]["response"]["chunks"] == ["new"]


def test_the_environment_can_force_recording_or_forbid_it(upstream, path, monkeypatch):
    upstream.queue("/s", Reply(chunks=[b"ok"]))
    monkeypatch.setenv("NACELLE_CASSETTE", "replay")
    with pytest.raises(FileNotFoundError, match="no cassette at"):
        Cassette(path, upstream=upstream.url)
    monkeypatch.setenv("NACELLE_CASSETTE", "record")
    with Cassette(path, upstream=upstream.url) as cassette:
        requests.get(cassette.url + "/s", timeout=5)
    assert Cassette(path, upstream=upstream.url).mode == "record"  # again, file or not
    assert Cassette(path).mode == "replay"  # nothing to record from
    monkeypatch.setenv("NACELLE_CASSETTE", "sometimes")
    with pytest.raises(ValueError, match="NACELLE_CASSETTE must be auto, record or replay"):
        Cassette(path)


def test_an_unknown_version_is_a_clear_error(path):
    path.parent.mkdir()
    path.write_text('{"version": 2, "exchanges": []}')
    with pytest.raises(ValueError, match="has version 2; this nacelle reads version 1"):
        Cassette(path)


@pytest.mark.parametrize("text, message", [
    ("not json", "is not JSON"),
    ('{"version": 1, "exchanges": ' + "[" * 5000 + "]" * 5000 + "}",
     "is not JSON: cassette nested deeper than 160 levels"),
    ("[]", "has version None"),
    ('{"version": 1}', "no list of exchanges"),
    ('{"version": 1, "exchanges": [{"request": {}}]}', "exchange #1 is malformed"),
    ('{"version": 1, "exchanges": [{"request": {"method": "GET", "path": "/", "query": "",'
     ' "headers": {}, "body": {"base64": "!!"}}, "response": {"status": 200, "headers": [],'
     ' "chunks": []}}]}', "exchange #1 is malformed"),
])
def test_a_malformed_file_is_an_error_naming_it(path, text, message):
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as caught:
        Cassette(path)
    assert str(path) in str(caught.value)


def test_replaying_a_missing_file_says_how_to_record_it(path):
    with pytest.raises(FileNotFoundError, match="give upstream= to record it"):
        Cassette(path)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"record": True}, ValueError, "record=True needs upstream="),
    ({"upstream": "api.anthropic.com"}, ValueError, "http.s. base URL"),
    ({"upstream": "ftp://x"}, ValueError, "http.s. base URL"),
    ({"match": "metadata.user_id"}, TypeError, "sequence of dotted field paths"),
    ({"timing": 1}, TypeError, "timing must be True or False"),
])
def test_bad_arguments_are_clear_errors(path, kwargs, error, message):
    with pytest.raises(error, match=message):
        Cassette(path, **kwargs)


def test_an_error_in_the_block_is_not_masked_and_saves_nothing(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"ok"]))
    with pytest.raises(KeyError):
        with Cassette(path, upstream=upstream.url) as cassette:
            requests.get(cassette.url + "/s", timeout=5)
            raise KeyError("the test failed")
    assert not path.parent.exists() or list(path.parent.iterdir()) == []


def test_an_unreachable_upstream_is_a_502_and_no_file(path):
    with FakeServer() as gone:
        address = gone.url
    with pytest.raises(AssertionError, match="upstream http://127.0.0.1:\\d+ failed"):
        with Cassette(path, upstream=address) as cassette:
            response = requests.get(cassette.url + "/s", timeout=5)
            assert response.status_code == 502
    assert not path.exists()


def test_the_file_is_replaced_whole_and_no_temporary_file_is_left(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"1"]), Reply(chunks=[b"2"]))
    for _ in range(2):
        with Cassette(path, upstream=upstream.url, record=True) as cassette:
            requests.get(cassette.url + "/s", timeout=5)
    assert [p.name for p in path.parent.iterdir()] == ["weather.json"]
    assert path.stat().st_mode & 0o777 == 0o644


def test_the_cassette_listens_on_loopback_with_a_free_port(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"ok"]))
    with Cassette(path, upstream=upstream.url) as cassette, FakeServer() as other:
        assert cassette.url == f"http://127.0.0.1:{cassette.port}" != other.url
        requests.get(cassette.url + "/s", timeout=5)
    assert Cassette(path).mode == "replay" and len(read(path)["exchanges"]) == 1


def test_url_before_start_is_a_clear_error(path):
    with pytest.raises(RuntimeError, match="not started"):
        Cassette(path, upstream="http://127.0.0.1:9").url


def test_a_body_the_upstream_cut_short_replays_cut_short(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"a", b"b"], drop_after=1))
    with Cassette(path, upstream=upstream.url) as cassette:
        with pytest.raises(requests.RequestException):
            requests.get(cassette.url + "/s", timeout=5).content
    response = read(path)["exchanges"][0]["response"]
    assert response["chunks"] == ["a"] and response["dropped"] is True
    with Cassette(path) as cassette:
        raw = raw_get(cassette)
    assert raw.endswith(b"1\r\na\r\n")  # no terminating chunk: the connection closed


@pytest.mark.slow
def test_stop_is_prompt_with_a_timed_replay_stalled(upstream, path):
    upstream.queue("/s", Reply(chunks=[b"a", (b"b", 0.3)]))
    with Cassette(path, upstream=upstream.url, timing=True) as cassette:
        requests.get(cassette.url + "/s", timeout=5)
    exchange = read(path)
    exchange["exchanges"][0]["response"]["chunks"][1]["delay"] = 60
    path.write_text(json.dumps(exchange))
    cassette = Cassette(path, timing=True).start()
    response = requests.get(cassette.url + "/s", stream=True, timeout=5)
    assert response.raw.read(1) == b"a"
    started = time.monotonic()
    cassette.stop()
    assert time.monotonic() - started < 1.0
    response.close()
