"""What a failed model HTTP exchange becomes: error bodies of Anthropic, OpenRouter and
anything else parsed into ``APIError``, the hint that says what to fix, the retry
delay rule, failures before a response in words naming host and port, and secrets
scrubbed from all of it. The pure rules are tested with plain values; the hints also
through a real transport against a loopback server, where they are seen."""

import socket
import time

import pytest
import requests

from nacelle.backend import RunContext
from nacelle.backends import _http, _http_errors
from nacelle.backends._http import Transport
from nacelle.backends._http_errors import (
    PREVIEW_CHARS, api_error, describe, hint, parse_error, preview, retry_delay, scrub, stalled,
    where,
)
from nacelle.errors import APIError, StreamError, StreamTruncated, retryable
from nacelle.testing import FakeClock, FakeServer, Reply

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


def test_the_transport_still_exports_parse_error_and_retry_delay():
    assert _http.parse_error is parse_error and _http.retry_delay is retry_delay
    assert {"parse_error", "retry_delay"} <= set(_http.__all__)
    assert set(_http_errors.__all__) <= set(dir(_http_errors))


# -- the retry delay --------------------------------------------------------------------


def test_retry_delay_follows_the_sdk_rule():
    assert retry_delay({"retry-after": "3"}, 0) == 3.0
    assert retry_delay({"Retry-After-Ms": "250"}, 4) == 0.25
    assert [retry_delay({}, n, rng=lambda: 0.0) for n in range(6)] == [0.5, 1, 2, 4, 8, 8]
    assert retry_delay({}, 0, rng=lambda: 1.0) == 0.375
    # Outside (0, 60] seconds a server's value is not trusted.
    assert retry_delay({"retry-after": "61"}, 1, rng=lambda: 0.0) == 1.0
    assert retry_delay({"retry-after": "0"}, 1, rng=lambda: 0.0) == 1.0
    assert retry_delay({"retry-after": "soon"}, 0, rng=lambda: 0.0) == 0.5


def test_retry_delay_reads_an_http_date():
    in_ten = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 10))
    assert 8.0 <= retry_delay({"retry-after": in_ten}, 0) <= 10.0


# -- parsing error bodies ----------------------------------------------------------------


def test_parse_error_reads_openrouter_provider_metadata():
    body = (b'{"error":{"code":400,"message":"Provider returned error","metadata":'
            b'{"raw":"thought_signature missing","provider_name":"Google AI Studio",'
            b'"error_type":"invalid_request"}},"user_id":"u"}')
    error = parse_error(400, {"X-Request-Id": "r1", "Retry-After": "7"}, body)
    assert error.message == "Provider returned error (Google AI Studio: thought_signature missing)"
    assert (error.type, error.request_id, error.retry_after) == ("invalid_request", "r1", 7.0)


def test_parse_error_copes_with_empty_and_odd_bodies():
    assert parse_error(500, {}, b"").message == ""
    assert parse_error(500, {}, b"[1, 2]").message == "[1, 2]"
    assert parse_error(503, {}, b'{"error": "busy"}').message == "busy"
    assert parse_error(400, {}, b"\xff\xfe").message == "\ufffd\ufffd"


# -- hints, through a real transport ------------------------------------------------------


def test_anthropic_error_shape_is_parsed(server):
    server.queue(PATH, Reply.json(
        {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too big"},
         "request_id": "req_body"}, status=400, headers={"request-id": "req_011"}))
    with pytest.raises(APIError) as info:
        make(server).post_stream(PATH, {}, fake_ctx())
    error = info.value
    assert (error.status, error.type, error.message, error.request_id) == (
        400, "invalid_request_error", "max_tokens: too big", "req_011")
    assert str(error) == "HTTP 400 invalid_request_error: max_tokens: too big (request id req_011)"


def test_openrouter_402_says_to_add_credits(server):
    server.queue(PATH, Reply.json(
        {"error": {"code": 402, "message": "Insufficient credits"}}, status=402,
        headers={"x-generation-id": "gen-1"}))
    transport = Transport(server.url, {"Authorization": "Bearer " + KEY}, name="openrouter",
                          key_variable="OPENROUTER_API_KEY")
    with pytest.raises(APIError) as info:
        transport.post_stream(PATH, {}, fake_ctx())
    assert info.value.request_id == "gen-1"
    assert "Insufficient credits — the openrouter account is out of credits" in info.value.message


def test_401_names_the_key_variable(server):
    server.queue(PATH, Reply.json({"type": "error", "error": {
        "type": "authentication_error", "message": "invalid x-api-key"}}, status=401))
    with pytest.raises(APIError, match=r"invalid x-api-key — check the API key "
                                       r"\(\$ANTHROPIC_API_KEY or the api_key argument\)"):
        make(server).post_stream(PATH, {}, fake_ctx())


def test_404_points_at_the_model_and_base_url(server):
    server.queue(PATH, Reply.json({"error": {"code": 404, "message": "No such model"}}, status=404))
    with pytest.raises(APIError, match=f"check the model name and base_url \\({server.url}{PATH}\\)"):
        make(server).post_stream(PATH, {}, fake_ctx())


def test_a_non_json_error_body_is_previewed_briefly(server):
    server.queue(PATH, Reply(status=502, chunks=[b"<html>\n  Bad   gateway" + b"!" * 1000],
                             mode="length", content_type="text/html"))
    with pytest.raises(APIError) as info:
        make(server, max_retries=0).post_stream(PATH, {}, fake_ctx())
    assert info.value.message.startswith("<html> Bad gateway!!!")
    assert len(info.value.message) <= 300 and info.value.retryable


# -- hints, scrubbing and the message an APIError carries ---------------------------------


def test_api_error_adds_the_hint_and_hides_the_key_the_provider_echoed():
    body = (b'{"type":"error","error":{"type":"authentication_error","message":'
            b'"invalid x-api-key ' + KEY.encode() + b'"},"request_id":"req_' + KEY.encode() + b'"}')
    headers = {"Retry-After": "2"}
    secrets = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    error = api_error(401, headers, body, name="anthropic", base_url="http://127.0.0.1:9",
                      path=PATH, key_variable="ANTHROPIC_API_KEY", secrets=secrets)
    assert error.message == ("invalid x-api-key <hidden> — check the API key "
                             "($ANTHROPIC_API_KEY or the api_key argument)")
    assert (error.status, error.type, error.request_id) == (401, "authentication_error",
                                                            "req_<hidden>")
    assert error.retry_after == 2.0 and error.retryable is False
    assert headers == {"Retry-After": "2"} and secrets["x-api-key"] == KEY


def test_api_error_with_an_empty_body_is_the_hint_alone():
    error = api_error(402, {}, b"", name="openrouter", base_url="http://127.0.0.1:9", path="/c")
    assert error.message == "the openrouter account is out of credits or over its spending limit"


@pytest.mark.parametrize("status, location, expected", [
    (401, "", "check the API key (the api_key argument)"),
    (403, "", "the API key is not allowed to make this request"),
    (404, "", "check the model name and base_url (http://127.0.0.1:9/v1/messages) "
                "for anthropic"),
    (307, "http://127.0.0.1:1/x", "the server redirected to http://127.0.0.1:1/x; redirects "
                                  "are not followed — check base_url (http://127.0.0.1:9)"),
    (301, "", "the server redirected to another address; redirects are not followed — "
              "check base_url (http://127.0.0.1:9)"),
    (400, "", ""),
    (500, "", ""),
])
def test_hint_says_what_to_fix_only_where_the_status_makes_it_clear(status, location, expected):
    assert hint(status, name="anthropic", base_url="http://127.0.0.1:9", path=PATH,
                location=location) == expected


def test_the_redirect_hint_reads_the_location_header_in_any_case():
    error = api_error(302, {"LOCATION": "http://127.0.0.1:2/"}, b"", name="anthropic",
                      base_url="http://127.0.0.1:9", path=PATH)
    assert "redirected to http://127.0.0.1:2/;" in error.message


def test_scrub_hides_secret_header_values_and_a_bearer_token_alone():
    headers = {"Authorization": "Bearer " + KEY, "x-api-key": "other-secret",
               "anthropic-version": "2023-06-01", "x-token": "abc"}
    text = f"got Bearer {KEY}, then {KEY} alone, other-secret, 2023-06-01 and abc"
    assert scrub(text, headers) == (
        "got <hidden>, then <hidden> alone, <hidden>, 2023-06-01 and abc")


# -- failures before a response ----------------------------------------------------------


def _wrapped(reason):
    error = requests.ConnectionError("failed")
    error.__cause__ = reason
    return error


@pytest.mark.parametrize("exc, expected", [
    (requests.ConnectTimeout("t"), "timed out connecting to 127.0.0.1:9 after 5s"),
    (requests.ReadTimeout("t"), "no response from 127.0.0.1:9 within 30s (read timeout)"),
    (requests.ConnectionError(ConnectionRefusedError(111, "Connection refused")),
     "cannot connect to 127.0.0.1:9: connection refused"),
    (_wrapped(ConnectionRefusedError(111, "Connection refused")),
     "cannot connect to 127.0.0.1:9: connection refused"),
    (requests.exceptions.SSLError("bad certificate"), "TLS handshake with 127.0.0.1:9 failed"),
    (_wrapped(socket.gaierror(-2, "Name or service not known")),
     "cannot resolve the host of 127.0.0.1:9"),
    (_wrapped(ConnectionResetError(104, "Connection reset by peer")),
     "connection to 127.0.0.1:9 failed before a response: Connection reset by peer"),
    (requests.ConnectionError("odd"),
     "connection to 127.0.0.1:9 failed before a response (ConnectionError)"),
])
def test_describe_says_what_went_wrong_and_where(exc, expected):
    assert describe(exc, "127.0.0.1:9", 5.0, 30.0) == expected


def test_describe_survives_a_cause_that_points_back_at_itself():
    error = requests.ConnectionError("loop")
    error.__cause__ = error
    assert describe(error, "h:1", 5.0, 30.0) == (
        "connection to h:1 failed before a response (ConnectionError)")


@pytest.mark.parametrize("url, expected", [
    ("https://api.anthropic.com/v1/messages?key=x", "api.anthropic.com:443"),
    ("http://example.test/path", "example.test:80"),
    ("http://127.0.0.1:8080", "127.0.0.1:8080"),
    ("http://[::1]:9000/x", "[::1]:9000"),
    ("http://host:notaport/", "host:?"),
    ("", "?:80"),
])
def test_where_names_host_and_port_only(url, expected):
    assert where(url) == expected


def test_stalled_is_a_retryable_stream_error_that_is_not_a_truncation():
    error = stalled("127.0.0.1:9", 0.5)
    assert isinstance(error, StreamError) and not isinstance(error, StreamTruncated)
    assert retryable(error)
    assert str(error) == "the stream from 127.0.0.1:9 stalled: no event for 0.5s (stall_timeout)"


def test_preview_is_one_short_line_of_replaced_invalid_utf8():
    text = preview(b"line one\n\n  line\ttwo \xff" + b"x" * 5000)
    assert text.startswith("line one line two \ufffdxxx")
    assert len(text) == PREVIEW_CHARS and text.endswith("…")


# -- hostile error bodies ---------------------------------------------------------------

SECRETS = {"x-api-key": KEY, "authorization": f"Bearer {KEY}"}


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"error":' * 100_000,
                                  b'{"error": {"message": ' + b"[" * 100_000 + b"}}"],
                         ids=["lists", "objects", "inside a message"])
def test_an_error_body_nested_100k_deep_is_an_api_error_with_a_preview(body):
    error = parse_error(500, {}, body)
    assert isinstance(error, APIError) and error.status == 500
    assert error.message.startswith("[") or error.message.startswith("{")
    assert len(error.message) <= PREVIEW_CHARS


@pytest.mark.parametrize("body", [b'{"error": {"message": NaN}}', b'{"error": Infinity}',
                                  b'{"error": {"type": "x", "message": 1e400}}'])
def test_an_error_body_with_numbers_json_has_not_is_previewed(body):
    error = parse_error(400, {}, body)
    assert error.status == 400 and error.message == body.decode()


def test_a_key_cut_in_half_by_the_preview_limit_leaves_no_part_of_it_behind():
    for at in range(PREVIEW_CHARS - len(KEY), PREVIEW_CHARS + 2):
        message = "x" * at + KEY + " was refused"
        for body in (f'{{"error": {{"message": "{message}"}}}}'.encode(), message.encode()):
            error = api_error(401, {}, body, name="anthropic", base_url="https://a",
                              path=PATH, secrets=SECRETS)
            assert KEY[:10] not in str(error), at


def test_a_key_echoed_in_the_error_type_or_provider_metadata_is_scrubbed():
    body = ('{"error": {"type": "bad_%s", "message": "no", "metadata": {"raw": "Bearer %s", '
            '"provider_name": "%s"}}, "request_id": "req_%s"}' % (KEY, KEY, KEY, KEY)).encode()
    error = api_error(400, {"request-id": f"id-{KEY}"}, body, name="openrouter",
                      base_url="https://o", path=PATH, secrets=SECRETS)
    for text in (str(error), repr(error), repr(error.args), error.type, error.message,
                 error.request_id):
        assert KEY not in text


def test_parse_error_reads_googles_status_and_retry_info():
    body = (b'{"error": {"code": 429, "message": "Quota exceeded for metric.", '
            b'"status": "RESOURCE_EXHAUSTED", "details": [{"@type": '
            b'"type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}]}}')
    error = parse_error(429, {}, body)
    assert (error.type, error.message, error.retry_after, error.retryable) == (
        "RESOURCE_EXHAUSTED", "Quota exceeded for metric.", 17.0, True)
    assert parse_error(429, {"retry-after": "3"}, body).retry_after == 3.0  # a header wins
    odd = b'{"error": {"code": 429, "details": [{"@type": "x.RetryInfo", "retryDelay": "soon"}]}}'
    assert parse_error(429, {}, odd).retry_after is None


def test_a_google_429_is_retried_after_the_delay_its_body_asks_for():
    clock = FakeClock()
    with FakeServer() as server:
        server.queue("/v1beta/m", Reply.json({"error": {
            "code": 429, "status": "RESOURCE_EXHAUSTED", "message": "slow down",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                         "retryDelay": "7s"}]}}, status=429),
            Reply.json({"ok": True}))
        transport = Transport(server.url, {}, max_retries=1, name="gemini")
        assert transport.post_json("/v1beta/m", {}, RunContext(clock=clock)) == {"ok": True}
    assert clock.sleeps == [7.0]
