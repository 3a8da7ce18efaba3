"""Claude through Vertex AI and Bedrock end to end, against loopback fakes of their wires.

The fakes follow the providers' documentation and the official SDK's ``lib/vertex`` and
``lib/bedrock``: Vertex's ``streamRawPredict`` URL, ``anthropic_version`` in the body and
no ``model`` there, the Anthropic SSE stream back
(https://platform.claude.com/docs/en/build-with-claude/claude-on-vertex-ai); Bedrock's
``invoke-with-response-stream`` URL, ``anthropic_version`` and ``anthropic_beta`` in the
body and no ``model`` or ``stream``, the event-stream body of base64 ``chunk`` payloads
and exceptions (the ``ResponseStream`` of
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html),
HTTP errors as ``{"message"}`` with ``x-amzn-ErrorType``. Every Bedrock request signed
with SigV4 is checked against the bytes the fake received (:func:`signed_by`), every
Vertex request for its bearer token."""

import base64
import datetime
import json
import pickle
import re
import subprocess
import sys
from typing import Any, List

import pytest

import nacelle
from nacelle import (
    APIError, ConfigError, Kind, Request, RunContext, Stop, StreamError, StreamTruncated,
    user_text,
)
from nacelle.backend import TurnEnd
from nacelle.backends import anthropic
from nacelle.backends.anthropic import aws
from nacelle.backends.anthropic.clouds import claude_name
from nacelle.native import web_search
from nacelle.testing.clouds import EVENTSTREAM, bedrock_exception, bedrock_stream
from nacelle.testing.server import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream, rechunk

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY-do-not-leak"
SESSION = "FwoGZXIvYXdzSESSION-do-not-leak"
BEARER = "ABSKQmVkcm9ja0FQSUtleS-do-not-leak"
TOKEN = "ya29.a0-vertex-token-do-not-leak"
CREDS = aws.Credentials("AKIDEXAMPLE", SECRET, SESSION)
VERTEX_MODEL = "claude-sonnet-4-5@20250929"
VERTEX_PATH = ("/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
               "claude-sonnet-4-5@20250929:streamRawPredict")
BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
BEDROCK_PATH = "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK",
                 "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL",
                 "ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT", "CLOUD_ML_REGION",
                 "GOOGLE_CLOUD_LOCATION", "GCE_METADATA_HOST", "K_SERVICE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def host(server: FakeServer) -> str:
    return server.url.split("//", 1)[1]


def signed_by(request: Any, server: FakeServer, creds: aws.Credentials = CREDS,
              region: str = "us-west-2") -> bool:
    """Whether a recorded request carries a SigV4 signature by ``creds`` over what the
    fake received: its method, path, signed headers (Host among them) and body."""
    authorization = request.headers.get("authorization", "")
    found = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/bedrock/"
                         r"aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=[0-9a-f]{64}",
                         authorization)
    if found is None or found.group(1) != creds.access_key or found.group(3) != region:
        return False
    names = found.group(4).split(";")
    assert {"host", "x-amz-date", "content-type"} <= set(names)
    assert request.headers["host"] == host(server)
    if creds.token:
        assert request.headers["x-amz-security-token"] == creds.token
    moment = datetime.datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
    again = aws.sign(request.method, f"http://{host(server)}{request.path}",
                     {name: request.headers[name] for name in names}, request.body, creds,
                     region, "bedrock", now=moment.replace(tzinfo=datetime.timezone.utc))
    return bool(again["Authorization"] == authorization)


def vertex(server: FakeServer, **kw: Any) -> anthropic.clouds.VertexBackend:
    kw.setdefault("token", TOKEN)
    return anthropic.vertex(model=kw.pop("model", VERTEX_MODEL), project="my-project",
                            region="us-east5", base_url=server.url + "/v1", **kw)


def bedrock(server: FakeServer, **kw: Any) -> anthropic.clouds.BedrockBackend:
    return anthropic.bedrock(model=kw.pop("model", BEDROCK_MODEL), region="us-west-2",
                             base_url=server.url, **kw)


def keys(monkeypatch: Any, creds: aws.Credentials = CREDS) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds.secret_key)
    if creds.token:
        monkeypatch.setenv("AWS_SESSION_TOKEN", creds.token)


def eventstream(chunks: List[bytes], **kw: Any) -> Reply:
    return Reply(chunks=bedrock_stream(chunks), content_type=EVENTSTREAM, **kw)


def one_turn(backend: Any, request: Any = None) -> Any:
    request = request or Request("Be brief.", messages=(user_text("hi"),))
    items = list(backend.turn(request, request.messages, RunContext()))
    assert isinstance(items[-1], TurnEnd)
    return items[:-1], items[-1]


@nacelle.tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return {"Paris": "21 degrees, sun"}.get(city, "unknown")


# -- model names ---------------------------------------------------------------------------

@pytest.mark.parametrize("model,claude", [
    ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5-20250929"),
    ("claude-opus-4-1", "claude-opus-4-1"),
    ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
    ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5-20251001"),
    ("arn:aws:bedrock:eu-west-3:123456789012:inference-profile/eu.anthropic."
     "claude-opus-4-1-20250805-v1:0", "claude-opus-4-1-20250805"),
    ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet-20240620"),
])
def test_a_clouds_model_id_names_its_claude_model(model: str, claude: str) -> None:
    assert claude_name(model) == claude


# -- Vertex AI ---------------------------------------------------------------------------

def test_vertex_posts_to_stream_raw_predict_with_its_version_and_no_model(server):
    server.queue(VERTEX_PATH, Reply(chunks=anthropic_stream(["Hel", "lo"])))
    events, end = one_turn(vertex(server))
    assert "".join(e.text for e in events if e.kind is Kind.TEXT) == "Hello"
    assert end.stop is Stop.END and end.usage.priced and end.usage.cost > 0
    sent = server.requests[0]
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert "x-api-key" not in sent.headers and "anthropic-version" not in sent.headers
    body = sent.json()
    assert body["anthropic_version"] == "vertex-2023-10-16" and body["stream"] is True
    assert "model" not in body and body["max_tokens"] > 0
    server.assert_consumed()


def test_a_vertex_token_callable_is_asked_for_every_request(server):
    given = iter(["first-token", "second-token"])
    server.queue(VERTEX_PATH, Reply(status=529, chunks=[b"{}"], content_type="application/json"),
                 Reply(chunks=anthropic_stream()))
    backend = vertex(server, token=lambda: next(given))
    one_turn(backend)
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer first-token", "Bearer second-token"]


def test_a_vertex_token_callable_returning_nothing_is_a_config_error(server):
    with pytest.raises(ConfigError, match="token callable returned NoneType"):
        one_turn(vertex(server, token=lambda: None))
    assert server.requests == []


@pytest.mark.parametrize("region,base", [
    ("global", "https://aiplatform.googleapis.com/v1"),
    ("us-east5", "https://us-east5-aiplatform.googleapis.com/v1"),
    ("eu", "https://aiplatform.eu.rep.googleapis.com/v1"),
])
def test_vertex_reaches_the_regions_endpoint(region: str, base: str) -> None:
    backend = anthropic.vertex(model=VERTEX_MODEL, project="p", region=region, token="t")
    assert backend.base_url == base


def test_vertex_takes_region_and_project_from_the_sdks_variables(monkeypatch, server):
    monkeypatch.setenv("CLOUD_ML_REGION", "europe-west1")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "env-project")
    monkeypatch.setenv("ANTHROPIC_VERTEX_BASE_URL", server.url + "/v1")
    backend = anthropic.vertex(model=VERTEX_MODEL, token="t")
    server.queue("/v1/projects/env-project/locations/europe-west1/publishers/anthropic/"
                 "models/claude-sonnet-4-5@20250929:streamRawPredict",
                 Reply(chunks=anthropic_stream()))
    one_turn(backend)
    server.assert_consumed()


def test_vertex_without_a_region_or_a_project_says_what_to_set(server):
    with pytest.raises(ConfigError, match="CLOUD_ML_REGION"):
        anthropic.vertex(model=VERTEX_MODEL, token="t")
    with pytest.raises(ConfigError, match="region must be"):
        anthropic.vertex(model=VERTEX_MODEL, region="us east", token="t")
    backend = anthropic.vertex(model=VERTEX_MODEL, region="us-east5", token="t",
                               base_url=server.url)
    with pytest.raises(ConfigError, match="ANTHROPIC_VERTEX_PROJECT_ID"):
        one_turn(backend)
    assert server.requests == []


def test_vertex_counts_tokens_at_count_tokens_raw_predict(server):
    server.queue("/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
                 "count-tokens:rawPredict", Reply.json({"input_tokens": 42}))
    backend = vertex(server)
    assert backend.capabilities.token_counting
    request = Request("Be brief.", messages=(user_text("hi"),), tools=(get_weather,))
    assert backend.count_tokens(request, RunContext()) == 42
    body = server.requests[0].json()
    assert body["tools"][0]["name"] == "get_weather"
    assert "eager_input_streaming" not in body["tools"][0]
    assert body["model"] == VERTEX_MODEL and body["anthropic_version"] == "vertex-2023-10-16"
    assert "max_tokens" not in body and "stream" not in body


def test_vertex_web_search_sends_googles_beta_header(server):
    server.queue(VERTEX_PATH, Reply(chunks=anthropic_stream()))
    backend = vertex(server)
    assert "web_search" in backend.capabilities.native_tools
    assert "web_fetch" not in backend.capabilities.native_tools
    one_turn(backend, Request("Be brief.", messages=(user_text("news?"),),
                              tools=(web_search(),)))
    sent = server.requests[0]
    assert sent.headers["anthropic-beta"] == "web-search-2025-03-05"
    assert sent.json()["tools"][0]["type"] == "web_search_20250305"


def test_a_vertex_401_says_to_check_the_google_credentials_not_an_api_key(server):
    server.queue(VERTEX_PATH, Reply.json({"error": {
        "code": 401, "status": "UNAUTHENTICATED",
        "message": f"Request had invalid authentication credentials: {TOKEN}"}}, status=401))
    with pytest.raises(APIError) as caught:
        one_turn(vertex(server))
    said = str(caught.value)
    assert caught.value.status == 401 and "Google Cloud credentials" in said
    assert "api_key" not in said and TOKEN not in said and len(server.requests) == 1


def test_a_vertex_error_in_googles_shape_is_retried_or_raised_by_its_status(server):
    quota = {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}
    bad = {"error": {"code": 400, "message": f"bad request from {TOKEN}",
                     "status": "INVALID_ARGUMENT"}}
    server.queue(VERTEX_PATH, Reply.json(quota, status=429), Reply.json(bad, status=400))
    with pytest.raises(APIError) as caught:
        one_turn(vertex(server, max_retries=1))
    assert caught.value.status == 400 and caught.value.type == "INVALID_ARGUMENT"
    assert TOKEN not in str(caught.value) and len(server.requests) == 2


# -- Bedrock -----------------------------------------------------------------------------

def test_bedrock_posts_a_sigv4_signed_invoke_with_its_version_and_no_model(monkeypatch, server):
    keys(monkeypatch)
    server.queue(BEDROCK_PATH, eventstream(anthropic_stream(["Hel", "lo"])))
    events, end = one_turn(bedrock(server))
    assert "".join(e.text for e in events if e.kind is Kind.TEXT) == "Hello"
    assert end.stop is Stop.END and end.usage.priced and end.usage.cost > 0
    sent = server.requests[0]
    assert signed_by(sent, server)
    assert sent.headers["accept"] == EVENTSTREAM
    body = sent.json()
    assert body["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in body and "stream" not in body and "anthropic_beta" not in body
    server.assert_consumed()


def test_a_signature_covers_a_retry_made_again(monkeypatch, server):
    keys(monkeypatch)
    throttled = Reply.json({"message": "Too many requests, please wait."}, status=429,
                           headers={"x-amzn-ErrorType": "ThrottlingException:http://internal"})
    server.queue(BEDROCK_PATH, throttled, eventstream(anthropic_stream()))
    one_turn(bedrock(server))
    assert len(server.requests) == 2 and all(signed_by(r, server) for r in server.requests)


def test_bedrock_reads_the_event_stream_however_it_is_cut(monkeypatch, server):
    keys(monkeypatch)
    frames = bedrock_stream(anthropic_stream(["Grüße", " 🌍"], tool_calls=[
        ("toolu_1", "get_weather", '{"city": "Paris"}')]))
    for size in (1, 7, 1000):
        server.queue(BEDROCK_PATH, Reply(chunks=rechunk(frames, size), content_type=EVENTSTREAM))
        events, end = one_turn(bedrock(server))
        assert "".join(e.text for e in events if e.kind is Kind.TEXT) == "Grüße 🌍"
        assert end.stop is Stop.TOOLS and [e.tool.input for e in events
                                          if e.kind is Kind.TOOL_CALL] == ['{"city": "Paris"}']


def test_a_bedrock_api_key_from_the_environment_is_a_bearer_token(monkeypatch, server):
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", BEARER)
    keys(monkeypatch)  # the key wins over the AWS keys, as in the SDK
    server.queue(BEDROCK_PATH, eventstream(anthropic_stream()))
    backend = bedrock(server)
    one_turn(backend)
    sent = server.requests[0]
    assert sent.headers["authorization"] == f"Bearer {BEARER}"
    assert "x-amz-date" not in sent.headers
    assert BEARER not in repr(backend) and BEARER not in repr(pickle.dumps(backend))


def test_a_profile_signs_with_its_keys_from_the_aws_files(monkeypatch, tmp_path, server):
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", BEARER)  # a named profile signs anyway
    (tmp_path / "credentials").write_text(
        f"[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = {SECRET}\n")
    (tmp_path / "config").write_text("[profile work]\nregion = us-west-2\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    backend = anthropic.bedrock(model=BEDROCK_MODEL, profile="work", base_url=server.url)
    assert backend.region == "us-west-2"
    server.queue(BEDROCK_PATH, eventstream(anthropic_stream()))
    one_turn(backend)
    assert signed_by(server.requests[0], server, aws.Credentials("AKIDWORK", SECRET))


def test_rotated_temporary_keys_are_picked_up_by_the_next_request(monkeypatch, server):
    keys(monkeypatch)
    server.queue(BEDROCK_PATH, eventstream(anthropic_stream()), eventstream(anthropic_stream()))
    backend = bedrock(server)
    one_turn(backend)
    rotated = aws.Credentials("ASIAROTATED", SECRET + "2", SESSION + "2")
    keys(monkeypatch, rotated)
    one_turn(backend)
    assert signed_by(server.requests[0], server)
    assert signed_by(server.requests[1], server, rotated)


def test_extra_headers_may_not_replace_the_signature(monkeypatch, server):
    keys(monkeypatch)
    settings = nacelle.ModelSettings(extra_headers={"X-Amz-Date": "20200101T000000Z"})
    request = Request("Be brief.", messages=(user_text("hi"),), settings=settings)
    with pytest.raises(ConfigError, match="X-Amz-Date"):
        one_turn(bedrock(server), request)
    assert server.requests == []


def test_bedrock_refuses_what_cannot_work_before_sending(server):
    with pytest.raises(ConfigError, match="AWS_REGION"):
        anthropic.bedrock(model=BEDROCK_MODEL)
    with pytest.raises(ConfigError, match="not both"):
        anthropic.bedrock(model=BEDROCK_MODEL, region="us-east-1", api_key="k", profile="p")
    with pytest.raises(ConfigError, match="AWS_ACCESS_KEY_ID"):
        one_turn(bedrock(server))
    assert server.requests == []


def test_betas_travel_in_the_body_on_bedrock(monkeypatch, server):
    keys(monkeypatch)
    server.queue(BEDROCK_PATH, eventstream(anthropic_stream()))
    backend = bedrock(server)
    request = Request("Be brief.", messages=(user_text("hi"),))
    body = backend._body(request, request.messages)
    assert "anthropic_beta" not in body
    monkeypatch.setattr("nacelle.backends.anthropic.clouds.betas", lambda request: ["b-1"])
    one_turn(backend)
    assert server.requests[0].json()["anthropic_beta"] == ["b-1"]
    assert "anthropic-beta" not in server.requests[0].headers


@pytest.mark.parametrize("kind,retryable", [
    ("throttlingException", True), ("modelStreamErrorException", True),
    ("serviceUnavailableException", True), ("validationException", False),
])
def test_an_exception_inside_the_stream_is_a_stream_error_of_its_type(monkeypatch, server,
                                                                      kind, retryable):
    keys(monkeypatch)
    frames = bedrock_stream(anthropic_stream(["partial"]))[:3]
    server.queue(BEDROCK_PATH, Reply(chunks=frames + [bedrock_exception(
        kind, f"it failed; key {SESSION}")], content_type=EVENTSTREAM))
    with pytest.raises(StreamError) as caught:
        one_turn(bedrock(server))
    assert caught.value.type == kind and caught.value.retryable is retryable
    assert SESSION not in str(caught.value) and "it failed" in str(caught.value)


def test_a_corrupt_frame_is_a_stream_error(monkeypatch, server):
    keys(monkeypatch)
    frames = bedrock_stream(anthropic_stream(["fine"]))
    broken = frames[2][:-1] + bytes([frames[2][-1] ^ 1])
    server.queue(BEDROCK_PATH, Reply(chunks=frames[:2] + [broken] + frames[3:],
                                     content_type=EVENTSTREAM))
    with pytest.raises(StreamError, match="CRC"):
        one_turn(bedrock(server))


def test_bedrock_http_errors_map_to_api_errors_without_secrets(monkeypatch, server):
    keys(monkeypatch)
    echo = f"The security token included in the request is invalid: {SESSION}"
    server.queue(BEDROCK_PATH, Reply.json({"message": echo}, status=403, headers={
        "x-amzn-ErrorType": "UnrecognizedClientException:http://internal.amazon.com/",
        "x-amzn-RequestId": "req-123"}))
    with pytest.raises(APIError) as caught:
        one_turn(bedrock(server))
    error = caught.value
    assert error.status == 403 and error.type == "UnrecognizedClientException"
    assert error.request_id == "req-123" and not error.retryable
    assert "AWS_BEARER_TOKEN_BEDROCK" in str(error) and "AWS_ACCESS_KEY_ID" in str(error)
    assert SESSION not in str(error) and SECRET not in str(error)


def test_bedrock_counts_tokens_with_count_tokens(monkeypatch, server):
    keys(monkeypatch)
    server.queue("/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens",
                 Reply.json({"inputTokens": 17}))
    backend = bedrock(server)
    request = Request("Be brief.", messages=(user_text("hi"),))
    assert backend.capabilities.token_counting
    assert backend.count_tokens(request, RunContext()) == 17
    sent = server.requests[0]
    assert signed_by(sent, server)
    invoke = json.loads(base64.b64decode(sent.json()["input"]["invokeModel"]["body"]))
    assert invoke["anthropic_version"] == "bedrock-2023-05-31" and "model" not in invoke


def test_a_pickled_bedrock_backend_carries_no_key_it_read(monkeypatch, server):
    keys(monkeypatch)
    server.queue(BEDROCK_PATH, eventstream(anthropic_stream()))
    backend = bedrock(server)
    one_turn(backend)
    data = pickle.dumps(backend)
    assert SECRET.encode() not in data and SESSION.encode() not in data
    assert SECRET not in repr(backend) and SESSION not in repr(backend)
    copy = pickle.loads(data)
    server.queue(BEDROCK_PATH, eventstream(anthropic_stream()))
    one_turn(copy)
    assert signed_by(server.requests[-1], server)


# -- what each cloud does ---------------------------------------------------------------------

def test_capabilities_say_what_each_cloud_does_not_do():
    v = anthropic.vertex(model=VERTEX_MODEL, project="p", region="global", token="t")
    b = anthropic.bedrock(model=BEDROCK_MODEL, region="us-east-1", api_key="k")
    for backend in (v, b):
        assert not backend.capabilities.mcp and not backend.capabilities.tool_search
        assert backend.capabilities.thinking and backend.capabilities.cost
    assert b.capabilities.native_tools == frozenset()
    assert not v.capabilities.structured_output and b.capabilities.structured_output
    old = anthropic.bedrock(model="anthropic.claude-opus-4-1-20250805-v1:0",
                            region="us-east-1", api_key="k")
    assert not old.capabilities.structured_output
    newest = anthropic.bedrock(model="anthropic.claude-opus-4-7-v1:0", region="us-east-1",
                               api_key="k")
    assert "temperature" not in newest.capabilities.settings


@pytest.mark.parametrize("cloud", ["vertex", "bedrock"])
def test_an_agent_streams_calls_a_tool_and_reports_cost_through_each_cloud(
        monkeypatch, server, cloud):
    keys(monkeypatch)
    turns = [anthropic_stream(["Checking."], tool_calls=[
                 ("toolu_1", "get_weather", '{"city": "Paris"}')]),
             anthropic_stream(["Sunny, 21 degrees."])]
    if cloud == "vertex":
        backend: Any = vertex(server)
        server.queue(VERTEX_PATH, *(Reply(chunks=chunks) for chunks in turns))
    else:
        backend = bedrock(server)
        server.queue(BEDROCK_PATH, *(eventstream(chunks) for chunks in turns))
    agent = nacelle.Agent(backend, "You report the weather.", tools=[get_weather])
    events = list(agent.stream([user_text("Weather in Paris?")]))
    kinds = [e.kind for e in events]
    assert Kind.TOOL_INPUT in kinds and Kind.TOOL_CALL in kinds and Kind.TOOL_RESULT in kinds
    result = next(e for e in events if e.kind is Kind.TOOL_RESULT)
    assert result.tool.result == "21 degrees, sun" and result.tool.error is None
    text = "".join(e.text for e in events if e.kind is Kind.TEXT)
    assert text == "Checking.Sunny, 21 degrees."
    assert kinds.count(Kind.DONE) == 1 and kinds[-1] is Kind.DONE
    usage = events[-1].usage
    assert usage is not None and usage.priced and usage.cost > 0
    assert usage.cost == pytest.approx(2 * next(
        e.usage.cost for e in events if e.kind is Kind.TURN))
    second = server.requests[1].json()
    assert [tool["name"] for tool in second["tools"]] == ["get_weather"]
    assert "eager_input_streaming" not in json.dumps(second)  # refused by both clouds
    if cloud == "bedrock":  # Bedrock streams tool input with the older beta instead
        assert second["anthropic_beta"] == ["fine-grained-tool-streaming-2025-05-14"]
    else:  # Vertex's proxy takes neither
        assert "anthropic-beta" not in server.requests[1].headers
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"
    assert "21 degrees, sun" in json.dumps(second["messages"][-1])
    if cloud == "bedrock":
        assert all(signed_by(r, server) for r in server.requests)
    else:
        assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in server.requests)


@pytest.mark.parametrize("cloud", ["vertex", "bedrock"])
def test_every_turn_of_a_run_sends_exactly_the_clouds_body_from_messages_encoded_once(
        monkeypatch, server, cloud):
    # The body goes out as the Anthropic wire's cached encoding in the cloud's frame;
    # what arrives must be, byte for byte, json.dumps of the body built whole.
    keys(monkeypatch)
    backend: Any = vertex(server) if cloud == "vertex" else bedrock(server)
    path = VERTEX_PATH if cloud == "vertex" else BEDROCK_PATH
    request = Request("Be brief.", tools=(get_weather,))
    messages: Any = (user_text("Weather in Paris? é ✓"),)
    for n in range(4):
        chunks = anthropic_stream([f"Checking {n}."])
        server.queue(path, Reply(chunks=chunks) if cloud == "vertex" else eventstream(chunks))
        list(backend.turn(request, messages, RunContext()))
        whole = json.dumps(backend._body(request, messages), ensure_ascii=False,
                           separators=(",", ":")).encode("utf-8")
        assert server.requests[-1].body == whole
        call = nacelle.ToolCall(f"toolu_{n}", "get_weather", '{"city": "Paris"}')
        messages += (nacelle.Message(nacelle.Role.ASSISTANT, (nacelle.Text("Let me see."), call)),
                     nacelle.Message(nacelle.Role.USER, (nacelle.ToolResult(
                         call.id, call.name, "21 degrees, sun"),)))
    assert "1 requests" in repr(backend._wire_cache)  # the run's prefix was kept
    if cloud == "bedrock":
        assert all(signed_by(r, server) for r in server.requests)


# -- what every backend promises, on the clouds' wires ----------------------------------------

def test_a_bedrock_body_cut_inside_a_message_is_stream_truncated(monkeypatch, server):
    keys(monkeypatch)
    frames = bedrock_stream(anthropic_stream(["Half", " an answer", " and more"]))
    body = b"".join(frames)
    cut = body[: len(b"".join(frames[:5])) + 9]  # nine bytes into a message
    for drop in (None, 1):
        server.queue(BEDROCK_PATH, Reply(chunks=[cut], content_type=EVENTSTREAM,
                                         drop_after=drop))
        with pytest.raises(StreamTruncated) as caught:
            one_turn(bedrock(server))
        assert nacelle.retryable(caught.value)


def test_throttling_inside_the_stream_before_output_is_retried_by_retry(monkeypatch, server):
    keys(monkeypatch)
    server.queue(BEDROCK_PATH,
                 Reply(chunks=[bedrock_exception("throttlingException", "Too many tokens")],
                       content_type=EVENTSTREAM),
                 eventstream(anthropic_stream(["Recovered."])))
    retrying = nacelle.Retry(bedrock(server), nacelle.RetryOptions(attempts=2, base=0.01,
                                                                   max=0.01))
    result = nacelle.Agent(retrying, "Be brief.").run([user_text("Hi")])
    assert result.text == "Recovered." and len(server.requests) == 2
    assert all(signed_by(r, server) for r in server.requests)


@pytest.mark.slow
def test_building_either_cloud_and_an_agent_does_not_import_requests():
    source = "\n".join([
        "import sys",
        "from nacelle.backends import anthropic",
        "import nacelle",
        "v = anthropic.vertex(model='claude-sonnet-4-5@20250929', project='p', region='global')",
        "b = anthropic.bedrock(model='anthropic.claude-sonnet-4-5-20250929-v1:0',"
        " region='us-east-1')",
        "nacelle.Agent(v, 'Be brief.'); nacelle.Agent(b, 'Be brief.')",
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('requests', 'urllib3', 'google', 'botocore', 'boto3'))",
        "assert not loaded, loaded",
    ])
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
