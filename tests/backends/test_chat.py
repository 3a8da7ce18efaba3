"""The Chat Completions backend and its presets against a real loopback server.

The bodies in ``tests/data/openai`` are written in the shape of OpenAI's streamed
Chat Completions (``chat.completion.chunk`` objects, a first delta carrying the role,
an ``obfuscation`` field on every chunk, the usage in a last chunk with no choices,
``[DONE]``), as its API reference shows them.
"""

import json
import logging
import pickle
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import nacelle
from nacelle import (
    Agent, APIError, ConfigError, Effort, Kind, Request, RunContext, Stop, Thinking,
    ToolCall, TransportError, Unsupported, user_text,
)
from nacelle.backend import TurnEnd
from nacelle.backends import chat
from nacelle.pricing import Price, price_for
from nacelle.testing import FakeServer, Reply, sse_event

from hostile import EMOJI, HIGH, LOW, assert_well_formed, chain

DATA = Path(__file__).resolve().parent.parent / "data" / "openai"
KEY = "sk-proj-0123456789abcdef-SECRET"
PATH = "/v1/chat/completions"


def recorded(name):
    body = (DATA / name).read_bytes()
    return Reply(chunks=[piece + b"\n\n" for piece in body.split(b"\n\n") if piece])


@pytest.fixture
def server():
    with FakeServer() as running:
        yield running


def openai_backend(server, **options):
    options.setdefault("api_key", KEY)
    return chat.openai("gpt-5-mini", base_url=server.url + "/v1", **options)


def one_turn(backend, request=None, messages=None, ctx=None):
    request = request or Request("Be brief.")
    messages = messages if messages is not None else (user_text("Hi"),)
    items = list(backend.turn(request, tuple(messages), ctx or RunContext()))
    assert isinstance(items[-1], TurnEnd)
    return items[:-1], items[-1]


@nacelle.tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"15°C in {city}"


@nacelle.tool
def clock(zone: str) -> str:
    """The time in a zone."""
    return "14:05"


# -- OpenAI, end to end --------------------------------------------------------------


def test_an_openai_text_answer_streams_its_deltas_and_its_usage(server):
    server.queue(PATH, recorded("text.sse"))
    events, end = one_turn(openai_backend(server))
    assert "".join(e.text for e in events) == "Berlin is the capital of Germany — Grüße!"
    assert [e.kind for e in events] == [Kind.TEXT] * 9
    assert end.stop is Stop.END
    # prompt_tokens counts the cached part: 1321 - 1152 are billed at the full rate.
    assert (end.usage.input_tokens, end.usage.cache_read_tokens) == (169, 1152)
    assert (end.usage.output_tokens, end.usage.reasoning_tokens) == (75, 64)


def test_an_emoji_split_into_surrogate_halves_over_two_deltas_arrives_whole(server):
    def chunk(delta, finish=None):
        return sse_event({"id": "c1", "object": "chat.completion.chunk", "model": "m",
                          "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def call(arguments, **start):
        return {"tool_calls": [{"index": 0, **start, "function": {
            "arguments": arguments, **({"name": "face"} if start else {})}}]}

    server.queue(PATH, Reply(chunks=[
        chunk({"role": "assistant", "reasoning_content": "hm " + HIGH}),
        chunk({"reasoning_content": LOW}),
        chunk({"content": "Hi " + HIGH}), chunk({"content": LOW + "!"}),
        chunk({"content": HIGH}),  # never joined: the finish comes next
        chunk(call('{"face": "' + HIGH, id="call_1", type="function")),
        chunk(call(LOW + '"}')), chunk({}, "tool_calls"), b"data: [DONE]\n\n"]))
    backend = chat.vllm("m", base_url=server.url + "/v1")
    events, end = one_turn(backend)
    assert [(e.kind, e.text) for e in events] == [
        (Kind.THINKING, "hm "), (Kind.THINKING, EMOJI), (Kind.TEXT, "Hi "),
        (Kind.TEXT, EMOJI + "!"), (Kind.TOOL_INPUT, '{"face": "'),
        (Kind.TOOL_INPUT, EMOJI + '"}'), (Kind.TEXT, "\ufffd"), (Kind.TOOL_CALL, "")]
    assert events[-1].tool.input == events[-3].tool.input == '{"face": "' + EMOJI + '"}'
    assert end.parts[:2] == (nacelle.Reasoning("hm " + EMOJI, "", "chat"),
                             nacelle.Text("Hi " + EMOJI + "!\ufffd"))
    assert end.parts[2].input == '{"face": "' + EMOJI + '"}'
    assert_well_formed(events, end)


def test_an_openai_tool_loop_runs_both_calls_and_sends_their_results_back(server):
    for name in ("tool_calls.sse", "answer.sse"):
        server.queue(PATH, recorded(name))
    agent = Agent(openai_backend(server), "Be brief.", tools=[weather, clock])
    result = agent.run([user_text("Weather and time in Berlin?")])
    assert result.text == "It is 15°C and 14:05 in Berlin."
    second = json.loads(server.requests[1].body)
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("call_Qm2dEw1uX9aB", "15°C in Berlin"), ("call_Zr8tYp4kL0cD", "14:05")]
    calls = [m for m in second["messages"] if m["role"] == "assistant"][0]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [
        '{"city":"Berlin"}', '{"zone":"Europe/Berlin"}']
    assert result.usage.output_tokens == 58 + 14


def test_the_openai_request_asks_for_usage_and_sends_no_default_token_cap(server):
    server.queue(PATH, recorded("text.sse"))
    one_turn(openai_backend(server))
    body = json.loads(server.requests[0].body)
    assert body["stream_options"] == {"include_usage": True}
    assert "max_tokens" not in body and "max_completion_tokens" not in body
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_chosen_token_cap_goes_out_as_max_completion_tokens_on_openai(server):
    server.queue(PATH, recorded("text.sse"))
    one_turn(openai_backend(server), Request("Be brief.", max_tokens=500))
    body = json.loads(server.requests[0].body)
    assert body["max_completion_tokens"] == 500 and "max_tokens" not in body


def test_effort_is_sent_in_openais_spelling(server):
    server.queue(PATH, recorded("text.sse"))
    one_turn(openai_backend(server), Request("x", thinking=Thinking(effort=Effort.MAX)))
    body = json.loads(server.requests[0].body)
    assert body["reasoning_effort"] == "xhigh" and "reasoning" not in body


def test_a_length_stop_mid_call_keeps_the_call_unfinished(server):
    server.queue(PATH, recorded("length_in_tool.sse"))
    _, end = one_turn(openai_backend(server))
    assert end.stop is Stop.MAX_TOKENS
    assert end.parts == (ToolCall("call_Lx0", "weather", '{"city":"Ber', False),)


def test_a_refusal_is_shown_kept_as_text_and_ends_the_turn_as_a_refusal(server):
    server.queue(PATH, recorded("refusal.sse"))
    events, end = one_turn(openai_backend(server))
    assert "".join(e.text for e in events) == "I'm sorry, I can't help with that."
    assert end.stop is Stop.REFUSAL


def test_a_price_given_fills_the_cost_of_every_turn(server):
    price = Price(0.25, 2.0, cache_read=0.025)
    server.queue(PATH, recorded("text.sse"))
    _, end = one_turn(openai_backend(server, pricing=price))
    assert end.usage.priced
    # 169 full-rate input, 1152 cached and 75 output tokens at those prices.
    assert end.usage.cost == pytest.approx((169 * 0.25 + 1152 * 0.025 + 75 * 2.0) / 1e6)
    assert end.usage.cost_without_cache == pytest.approx((1321 * 0.25 + 75 * 2.0) / 1e6)


def test_a_model_the_table_does_not_price_reports_no_dollars(server):
    server.queue(PATH, recorded("text.sse"))
    backend = chat.openai("an-unreleased-model", base_url=server.url + "/v1", api_key=KEY)
    assert price_for("openai", "an-unreleased-model") is None
    assert backend.capabilities.cost is False
    _, end = one_turn(backend)
    assert (end.usage.cost, end.usage.priced) == (0.0, False)


# -- local servers: no key --------------------------------------------------------------


def local_stream(texts=("Hi", " there"), reasoning=(), field="reasoning_content",
                 usage=True, calls=()):
    out = []
    for text in reasoning:
        out.append(sse_event({"choices": [{"index": 0, "delta": {field: text}}]}))
    for text in texts:
        out.append(sse_event({"choices": [{"index": 0, "delta": {"content": text}}]}))
    for call in calls:
        out.append(sse_event({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
    out.append(sse_event({"choices": [{"index": 0, "delta": {},
                                       "finish_reason": "tool_calls" if calls else "stop"}]}))
    if usage:
        out.append(sse_event({"choices": [], "usage": {"prompt_tokens": 11,
                                                       "completion_tokens": 2}}))
    out.append(b"data: [DONE]\n\n")
    return Reply(chunks=out)


def test_a_local_server_is_sent_no_authorization_header(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(PATH, local_stream())
    backend = chat.ollama("qwen3", base_url=server.url + "/v1")
    events, end = one_turn(backend)
    assert "authorization" not in {k.lower() for k in server.requests[0].headers}
    assert "".join(e.text for e in events) == "Hi there"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (11, 2)
    assert not end.usage.priced


@pytest.mark.parametrize("preset, field", [
    (chat.llamacpp, "reasoning_content"), (chat.vllm, "reasoning_content"),
    (chat.ollama, "reasoning"), (chat.lmstudio, "reasoning_content"),
])
def test_reasoning_deltas_of_local_servers_become_thinking(server, preset, field):
    server.queue(PATH, local_stream(reasoning=("Let me", " think."), field=field))
    backend = preset("m", base_url=server.url + "/v1")
    events, end = one_turn(backend)
    assert [(e.kind, e.text) for e in events[:2]] == [
        (Kind.THINKING, "Let me"), (Kind.THINKING, " think.")]
    assert end.parts[0].text == "Let me think."


def test_calls_without_ids_get_the_same_ids_when_the_conversation_is_replayed(server):
    call = {"function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}
    for _ in range(2):
        server.queue(PATH, local_stream(texts=(), calls=(call,)))
    backend = chat.llamacpp(base_url=server.url + "/v1")
    ids = [one_turn(backend)[1].parts[0].id for _ in range(2)]
    assert ids[0] == ids[1] and ids[0].startswith("call_")
    server.queue(PATH, local_stream(texts=(), calls=(call,)))
    later = one_turn(backend, messages=(user_text("Hi"), user_text("again")))[1]
    assert later.parts[0].id != ids[0]  # a later turn of a conversation is another call


def test_a_server_that_cannot_stream_tools_is_asked_again_without_streaming(server):
    refusal = {"error": {"message": "Cannot use tools with stream", "type": "invalid_request_error"}}
    answer = {"id": "x", "object": "chat.completion", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4}}
    final = {"id": "y", "object": "chat.completion", "choices": [{
        "index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                          "content": "Sunny."}}]}
    server.queue(PATH, Reply.json(refusal, status=400))
    server.queue(PATH, Reply.json(answer))
    server.queue(PATH, Reply.json(final))
    backend = chat.llamacpp(base_url=server.url + "/v1")
    result = Agent(backend, "Be brief.", tools=[weather]).run([user_text("Rome?")])
    assert result.text == "Sunny."
    bodies = [json.loads(r.body) for r in server.requests]
    assert [b.get("stream") for b in bodies] == [True, None, None]
    assert "stream_options" not in bodies[2]
    assert any(m.get("role") == "tool" and m["content"] == "15°C in Rome"
               for m in bodies[2]["messages"])


# -- errors name the server -------------------------------------------------------------


def test_a_401_names_the_presets_key_variable_and_never_the_key(server, caplog):
    caplog.set_level(logging.DEBUG)
    server.queue(PATH, Reply.json({"error": {"message": f"Incorrect API key {KEY}"}},
                                  status=401))
    backend = chat.groq("openai/gpt-oss-20b", base_url=server.url + "/v1", api_key=KEY,
                        max_retries=0)
    with pytest.raises(APIError) as info:
        one_turn(backend)
    assert "$GROQ_API_KEY" in str(info.value)
    assert "OpenRouter" not in str(info.value)
    seen = [str(info.value), repr(info.value), caplog.text, repr(backend),
            repr(pickle.loads(pickle.dumps(backend)))] + [repr(e) for e in chain(info.value)]
    assert not [text for text in seen if KEY in text]


def test_a_404_names_the_server_and_its_base_url(server):
    server.queue(PATH, Reply.json({"error": {"message": "model not found"}}, status=404))
    backend = chat.ollama("nope", base_url=server.url + "/v1", max_retries=0)
    with pytest.raises(APIError, match="check the model name and base_url") as info:
        one_turn(backend)
    said = str(info.value)
    assert "Ollama" in said and f"({server.url}/v1/chat/completions)" in said
    assert "OpenRouter" not in said


def test_a_refused_connection_names_the_server_and_its_address():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    backend = chat.llamacpp(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(TransportError, match=f"llama.cpp: cannot connect to 127.0.0.1:{port}: "
                                             "connection refused"):
        one_turn(backend)


def test_a_missing_key_for_a_cloud_preset_names_its_variable_at_the_first_request(
        server, monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    backend = chat.deepseek("deepseek-chat", base_url=server.url)
    with pytest.raises(ConfigError, match="DEEPSEEK_API_KEY"):
        one_turn(backend)
    assert server.requests == []


def test_an_in_band_error_names_the_server(server):
    server.queue(PATH, Reply(chunks=[sse_event({"error": {"code": 503, "message": "busy"}})]))
    backend = chat.vllm("m", base_url=server.url + "/v1")
    with pytest.raises(nacelle.StreamError, match="vLLM stream error 503") as info:
        one_turn(backend)
    assert nacelle.retryable(info.value)


# -- construction -----------------------------------------------------------------------


@pytest.mark.parametrize("options, message", [
    ({"model": ""}, "model must name"),
    ({"model": "m", "base_url": "localhost:8080"}, "base_url must be an http"),
    ({"model": "m", "dialect": "openai"}, "dialect must be a chat.Dialect"),
    ({"model": "m", "key_env": ""}, "key_env must name"),
    ({"model": "m", "api_key": ""}, "api_key must be a non-empty string"),
    ({"model": "m", "timeout": 0}, "timeout must be a positive"),
])
def test_bad_arguments_are_config_errors(options, message):
    options.setdefault("base_url", "http://127.0.0.1:1/v1")
    with pytest.raises(ConfigError, match=message):
        chat.Backend(**options)


def test_every_preset_builds_a_backend_for_its_server():
    presets = {"openai": "https://api.openai.com/v1", "ollama": "http://localhost:11434/v1",
               "vllm": "http://localhost:8000/v1", "llamacpp": "http://localhost:8080/v1",
               "lmstudio": "http://localhost:1234/v1",
               "groq": "https://api.groq.com/openai/v1", "deepseek": "https://api.deepseek.com",
               "gemini": "https://generativelanguage.googleapis.com/v1beta/openai",
               "mistral": "https://api.mistral.ai/v1", "together": "https://api.together.xyz/v1",
               "xai": "https://api.x.ai/v1"}
    for name, url in presets.items():
        backend = getattr(chat, name)("some-model")
        assert backend.base_url == url, name
        assert "OpenRouter" not in backend.dialect.name
        assert backend.capabilities.mcp is False


def test_the_mistral_preset_takes_thinking_shown_and_an_effort():
    # docs.mistral.ai/capabilities/reasoning/: reasoning_effort "high" or "none" on
    # mistral-small-latest and mistral-medium-3-5.
    backend = chat.mistral("mistral-small-latest", api_key="k")
    assert backend.capabilities.thinking and backend.capabilities.effort
    for thinking in (Thinking(show=True), Thinking(effort=Effort.HIGH, show=True)):
        Agent(backend, "Think.", thinking=thinking)  # not Unsupported


def test_count_tokens_is_unsupported():
    backend = chat.ollama("m")
    with pytest.raises(Unsupported):
        backend.count_tokens(Request("x"), RunContext())


@pytest.mark.slow
def test_importing_the_chat_backend_does_not_import_requests():
    code = ("import sys; import nacelle.backends.chat as c; c.ollama('m'); "
            "assert 'requests' not in sys.modules, 'requests imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_cancelling_a_silent_local_server_ends_the_turn_promptly(server):
    server.queue(PATH, Reply(chunks=[b": waiting\n\n", (b"data: [DONE]\n\n", 30)]))
    backend = chat.llamacpp(base_url=server.url + "/v1")
    cancel = nacelle.CancelEvent()
    ctx = RunContext(cancelled=cancel)
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(nacelle.Cancelled):
        one_turn(backend, ctx=ctx)
    assert time.monotonic() - started < 5


def test_the_openai_preset_reads_openai_base_url_unless_given_one(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert chat.openai("gpt-5", api_key="sk-x").base_url == "http://127.0.0.1:9/v1"
    assert chat.openai("gpt-5", api_key="sk-x", base_url="http://127.0.0.1:8/v1").base_url == (
        "http://127.0.0.1:8/v1")
    assert chat.ollama("qwen3").base_url == "http://localhost:11434/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    assert chat.openai("gpt-5", api_key="sk-x").base_url == "https://api.openai.com/v1"


def test_every_preset_is_a_function_of_its_own_name_with_the_backends_options():
    # A preset made by a factory was a (*Any, **Any) function named "make" to a type
    # checker and to help(); tests/typing/mistakes.py holds what a checker now sees.
    import inspect

    for name in ("openai", "ollama", "vllm", "llamacpp", "lmstudio", "groq", "deepseek",
                 "gemini", "mistral", "together", "xai"):
        preset = getattr(chat, name)
        assert preset.__name__ == name and preset.__qualname__ == name
        assert "model" in inspect.signature(preset).parameters
        assert name.replace("lmstudio", "LM Studio").replace("llamacpp", "llama.cpp").lower() \
            in preset.__doc__.lower()
    backend = chat.ollama("m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=5.0,
                          stall_timeout=6.0, key_env="OLLAMA_KEY", api_key="k")
    assert (backend.base_url, backend.key_env) == ("http://127.0.0.1:9/v1", "OLLAMA_KEY")


# -- model settings, on the wire and refused at construction -----------------------------

def test_model_settings_and_extra_headers_reach_an_openai_chat_server(server):
    """CreateChatCompletionRequest's fields (platform.openai.com/docs/api-reference/chat/
    create) and the extra header beside the key."""
    server.queue(PATH, recorded("text.sse"))
    settings = nacelle.ModelSettings(temperature=0.4, stop="END", seed=5,
                                     tool_choice="weather", parallel_tool_calls=False,
                                     extra_headers={"OpenAI-Organization": "org-1"})
    backend = chat.openai("gpt-4.1", api_key=KEY, base_url=server.url + "/v1")
    nacelle.Agent(backend, "s", tools=[weather, clock], model_settings=settings,
                  cache=nacelle.Cache(key="conv-1")).run([user_text("Hi")])
    sent = server.requests[0]
    body = sent.json()
    assert {k: body[k] for k in ("temperature", "stop", "seed", "tool_choice",
                                 "parallel_tool_calls", "prompt_cache_key")} == {
        "temperature": 0.4, "stop": ["END"], "seed": 5,
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "parallel_tool_calls": False, "prompt_cache_key": "conv-1"}
    assert sent.headers["openai-organization"] == "org-1"
    assert sent.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("preset, model, settings, match", [
    (chat.openai, "gpt-5-mini", {"temperature": 0.2}, "the temperature setting"),
    (chat.openai, "o3", {"top_p": 0.2}, "the top_p setting"),
    (chat.openai, "gpt-4.1", {"top_k": 2}, "the top_k setting"),
    (chat.deepseek, "deepseek-chat", {"seed": 2}, "the seed setting"),
    (chat.mistral, "mistral-small-latest", {"seed": 2}, "the seed setting"),
    (chat.ollama, "llama3.2", {"top_k": 2}, "the top_k setting"),
])
def test_what_a_server_or_model_refuses_is_unsupported_at_construction(
        server, preset, model, settings, match):
    backend = preset(model, api_key=KEY, base_url=server.url + "/v1")
    with pytest.raises(nacelle.Unsupported, match=match):
        nacelle.Agent(backend, "s", model_settings=nacelle.ModelSettings(**settings))


def test_top_k_goes_to_the_servers_that_document_it(server):
    for preset in (chat.vllm, chat.llamacpp):
        backend = preset("local", base_url=server.url + "/v1")
        nacelle.Agent(backend, "s", model_settings=nacelle.ModelSettings(top_k=20))


def test_cache_controls_are_unsupported_where_the_server_has_none(server):
    backend = chat.ollama("llama3.2", base_url=server.url + "/v1")
    for cache, match in ((nacelle.Cache(ttl="1h"), "cache_ttl"),
                         (nacelle.Cache(key="k"), "cache_key")):
        with pytest.raises(nacelle.Unsupported, match=match):
            nacelle.Agent(backend, "s", cache=cache)


def test_extra_headers_reach_the_unstreamed_retry_too(server):
    """A server that cannot stream tools is asked again without streaming; the extra
    header goes on that request as well."""
    refusal = {"error": {"message": "Cannot use tools with stream",
                         "type": "invalid_request_error"}}
    server.queue(PATH, Reply.json(refusal, status=400),
                 Reply.json({"id": "c1", "object": "chat.completion", "model": "m",
                             "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                 "role": "assistant", "content": "Hi."}}]}))
    backend = chat.llamacpp("local", base_url=server.url + "/v1")
    settings = nacelle.ModelSettings(extra_headers={"X-Request-Tag": "t2"})
    nacelle.Agent(backend, "s", tools=[weather], model_settings=settings).run([user_text("Hi")])
    assert [r.headers.get("x-request-tag") for r in server.requests] == ["t2", "t2"]
