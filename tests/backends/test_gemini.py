"""``gemini.Backend`` against a FakeServer speaking Gemini's wire: where it posts, the key
in its header, thought signatures across a run, and Google's error shapes.

The streams come from ``nacelle.testing.wire.gemini_stream`` (``GenerateContentResponse``
chunks, https://ai.google.dev/api/generate-content); the error bodies are Google's
``{"error": {"code", "message", "status", "details"}}``
(https://ai.google.dev/gemini-api/docs/troubleshooting), the bad-key one as the API
answers it (400 ``INVALID_ARGUMENT`` with an ``ErrorInfo`` whose reason is
``API_KEY_INVALID``).
"""

import pickle

import pytest

import nacelle
from nacelle import (
    Agent, APIError, ConfigError, Effort, Kind, Reasoning, Retry, RetryOptions, Stop, Thinking,
    user_text,
)
from nacelle.backends import gemini
from nacelle.pricing import Price, price_for
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import gemini_stream

KEY = "AIzaSyA-TEST-KEY-0123456789abcdefghij"
PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
SIG = "CiQBjz1rX7tXb0kq3QW8oN2FmB4Ex0q2nYbNfPq0ocJm3u0cWmgKcgGPPWtf"


@nacelle.tool
def weather(city: str) -> str:
    """Weather for a city.

    Args:
        city: The city.
    """
    return f"15°C in {city}"


@pytest.fixture
def server():
    with FakeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def no_gemini_environment(monkeypatch):
    for variable in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)


def make(server, **options):
    options.setdefault("model", "gemini-2.5-flash")
    return gemini.Backend(options.pop("api_key", KEY), base_url=server.url + "/v1beta",
                          **options)


def test_a_turn_posts_to_stream_generate_content_with_the_key_in_a_header_only(server):
    server.queue(PATH, Reply(chunks=gemini_stream(["Hel", "lo"])))
    result = Agent(make(server), "Be brief.").run([user_text("Hi")])
    assert result.text == "Hello" and result.stop is Stop.END
    [request] = server.requests
    assert (request.method, request.path, request.query) == ("POST", PATH, "alt=sse")
    assert request.headers["x-goog-api-key"] == KEY
    assert KEY not in request.path + request.query
    assert request.headers["accept"] == "text/event-stream"


def test_the_key_comes_from_gemini_api_key_at_the_first_request(server, monkeypatch):
    backend = gemini.Backend(model="gemini-2.5-flash", base_url=server.url + "/v1beta")
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    server.queue(PATH, Reply(chunks=gemini_stream(["Hi"])))
    Agent(backend, "Be brief.").run([user_text("Hi")])
    assert server.requests[0].headers["x-goog-api-key"] == KEY


def test_no_key_is_a_config_error_naming_the_variable(server):
    backend = gemini.Backend(model="gemini-2.5-flash", base_url=server.url + "/v1beta")
    with pytest.raises(ConfigError, match=r"\$GEMINI_API_KEY"):
        Agent(backend, "Be brief.").run([user_text("Hi")])
    assert server.requests == []


def test_the_base_url_comes_from_the_sdks_variable_when_not_given(monkeypatch):
    assert gemini.Backend(KEY, model="m").base_url == (
        "https://generativelanguage.googleapis.com/v1beta")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "https://gateway.example.com/gemini")
    assert gemini.Backend(KEY, model="m").base_url == "https://gateway.example.com/gemini"


def test_a_resource_name_is_posted_as_it_is(server):
    for model, path in (("models/gemini-2.5-pro", "/v1beta/models/gemini-2.5-pro"),
                        ("tunedModels/my-model-7", "/v1beta/tunedModels/my-model-7")):
        server.queue(path + ":streamGenerateContent", Reply(chunks=gemini_stream(["ok"])))
        Agent(make(server, model=model), "s").run([user_text("Hi")])
    assert [r.path for r in server.requests] == [
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
        "/v1beta/tunedModels/my-model-7:streamGenerateContent"]
    assert make(server, model="models/gemini-2.5-pro").pricing == price_for(
        "gemini", "gemini-2.5-pro")


@pytest.mark.parametrize("kwargs, match", [
    ({"model": ""}, "model"), ({"model": None}, "model"),
    ({"model": "gemini-2.5-flash", "api_key": ""}, "api_key"),
    ({"model": "gemini-2.5-flash", "pricing": {"input": 1}}, "pricing"),
    ({"model": "gemini-2.5-flash", "base_url": "generativelanguage.googleapis.com"}, "base_url"),
])
def test_bad_construction_arguments_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        gemini.Backend(**kwargs)


def test_capabilities_say_what_the_backend_does_and_a_priced_model_knows_dollars():
    backend = gemini.Backend(KEY, model="gemini-2.5-flash")
    assert backend.pricing == price_for("gemini", "gemini-2.5-flash") is not None
    caps = backend.capabilities
    assert (caps.thinking, caps.effort, caps.images, caps.documents,
            caps.structured_output, caps.cost) == (True,) * 6
    assert not caps.tool_media  # a Gemini 2 model: media follow the responses
    assert (caps.mcp, caps.token_counting) == (False, True)
    assert caps.native_tools == {"web_search", "web_fetch", "code_execution"}
    assert not gemini.Backend(KEY, model="gemini-2.5-pro").capabilities.tool_media
    assert gemini.Backend(KEY, model="gemini-3-pro-preview").capabilities.tool_media
    unpriced = gemini.Backend(KEY, model="gemini-unreleased")
    assert unpriced.pricing is None and not unpriced.capabilities.cost
    given = gemini.Backend(KEY, model="gemini-unreleased", pricing=Price(1, 2))
    assert given.capabilities.cost


def test_the_key_is_in_no_repr_and_a_key_read_from_the_environment_stays_there(
        server, monkeypatch):
    backend = make(server)
    assert KEY not in repr(backend) and KEY not in repr(backend._endpoint)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    from_environment = gemini.Backend(model="gemini-2.5-flash", base_url=server.url + "/v1beta")
    server.queue(PATH, Reply(chunks=gemini_stream(["Hi"])))
    Agent(from_environment, "s").run([user_text("Hi")])
    assert KEY.encode() not in pickle.dumps(from_environment)


def test_thought_signatures_go_back_on_the_parts_they_came_on_across_a_tool_loop(server):
    server.queue(PATH,
                 Reply(chunks=gemini_stream(["Checking."], thinking_deltas=["Need ", "weather."],
                                            signature=SIG,
                                            tool_calls=[("", "weather", '{"city": "Berlin"}')])),
                 Reply(chunks=gemini_stream(["15°C."])))
    agent = Agent(make(server), "Be brief.", tools=[weather],
                  thinking=Thinking(effort=Effort.LOW, show=True))
    events = list(agent.stream([user_text("Weather in Berlin?")]))
    assert [e.text for e in events if e.kind is Kind.THINKING] == ["Need ", "weather."]
    call = next(e.tool for e in events if e.kind is Kind.TOOL_CALL)
    first, second = (r.json() for r in server.requests)
    # Gemini 2.5 takes budgets, not levels: the effort becomes one.
    assert first["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 1024,
                                                           "includeThoughts": True}
    assert second["contents"][1] == {"role": "model", "parts": [
        {"text": "Need weather.", "thought": True, "thoughtSignature": SIG},
        {"text": "Checking."},
        {"functionCall": {"id": call.id, "name": "weather", "args": {"city": "Berlin"}}}]}
    assert second["contents"][2] == {"role": "user", "parts": [{"functionResponse": {
        "id": call.id, "name": "weather", "response": {"output": "15°C in Berlin"}}}]}
    done = events[-1]
    assert isinstance(done.messages[1].parts[0], Reasoning)
    # The conversation, saved and loaded, replays the same request.
    again = nacelle.loads(nacelle.dumps(done.messages))
    assert gemini.to_wire(nacelle.Request(system="Be brief."), tuple(again[:3]))[
        "contents"] == second["contents"]


def test_a_signature_on_a_call_goes_back_on_that_call(server):
    server.queue(PATH,
                 Reply(chunks=gemini_stream([], signature=SIG, tool_calls=[
                     ("fc-1", "weather", '{"city": "Oslo"}')])),
                 Reply(chunks=gemini_stream(["Cold."])))
    Agent(make(server), "s", tools=[weather]).run([user_text("Oslo?")])
    model = server.requests[1].json()["contents"][1]
    assert model["parts"] == [{"functionCall": {"id": "fc-1", "name": "weather",
                                                "args": {"city": "Oslo"}},
                               "thoughtSignature": SIG}]


def test_a_bad_key_is_a_400_whose_error_says_to_check_the_key_and_never_shows_it(server):
    server.queue(PATH, Reply.json({"error": {
        "code": 400, "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT", "details": [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"}}]}}, status=400))
    with pytest.raises(APIError) as caught:
        Agent(make(server), "s").run([user_text("Hi")])
    error = caught.value
    assert (error.status, error.type, error.retryable) == (400, "INVALID_ARGUMENT", False)
    assert "API key not valid" in str(error) and "$GEMINI_API_KEY" in str(error)
    assert KEY not in str(error) + repr(error)
    assert len(server.requests) == 1


def test_a_429_is_retried_and_the_retry_recovers(server):
    server.queue(PATH, Reply.json({"error": {
        "code": 429, "message": "Resource has been exhausted (e.g. check quota).",
        "status": "RESOURCE_EXHAUSTED"}}, status=429, headers={"Retry-After": "0"}),
        Reply(chunks=gemini_stream(["Fine."])))
    result = Agent(make(server, max_retries=1), "s").run([user_text("Hi")])
    assert result.text == "Fine." and len(server.requests) == 2


def test_an_unknown_model_is_a_404_whose_error_names_the_url_to_check(server):
    path = "/v1beta/models/gemini-9:streamGenerateContent"
    server.queue(path, Reply.json({"error": {
        "code": 404, "status": "NOT_FOUND",
        "message": "models/gemini-9 is not found for API version v1beta"}}, status=404))
    with pytest.raises(APIError) as caught:
        Agent(make(server, model="gemini-9"), "s").run([user_text("Hi")])
    assert caught.value.type == "NOT_FOUND" and "check the model name" in str(caught.value)


def test_an_in_band_overload_is_retried_by_retry(server):
    server.queue(PATH, Reply(chunks=[b'data: {"error": {"code": 503, "message": '
                                     b'"The model is overloaded.", "status": "UNAVAILABLE"}}\n\n']),
                 Reply(chunks=gemini_stream(["Back."])))
    retrying = Retry(make(server), RetryOptions(attempts=2, base=0.01, max=0.01))
    assert Agent(retrying, "s").run([user_text("Hi")]).text == "Back."


def test_a_safety_block_ends_the_run_as_a_refusal(server):
    server.queue(PATH, Reply(chunks=gemini_stream(["I can't"], finish="SAFETY")))
    result = Agent(make(server), "s").run([user_text("Something harmful")])
    assert result.stop is Stop.REFUSAL and result.text == "I can't"


def test_count_tokens_asks_count_tokens_with_the_request_a_turn_would_send(server):
    server.queue("/v1beta/models/gemini-2.5-flash:countTokens",
                 Reply.json({"totalTokens": 31, "promptTokensDetails": [
                     {"modality": "TEXT", "tokenCount": 31}]}))
    agent = Agent(make(server), "Be brief.", tools=[weather], max_tokens=100)
    assert agent.count_tokens([user_text("Weather in Berlin?")]) == 31
    [request] = server.requests
    assert request.headers["x-goog-api-key"] == KEY
    sent = request.json()["generateContentRequest"]
    assert sent["model"] == "models/gemini-2.5-flash"
    assert sent["contents"] == [{"role": "user", "parts": [{"text": "Weather in Berlin?"}]}]
    assert sent["tools"][0]["functionDeclarations"][0]["name"] == "weather"
    assert "generationConfig" not in sent


@pytest.mark.parametrize("answer", [{}, {"totalTokens": -1}, {"totalTokens": "31"}, [31]])
def test_a_count_without_a_plausible_total_is_a_stream_error(server, answer):
    server.queue("/v1beta/models/gemini-2.5-flash:countTokens", Reply.json(answer))
    with pytest.raises(nacelle.StreamError, match="totalTokens"):
        Agent(make(server), "s").count_tokens([user_text("Hi")])
