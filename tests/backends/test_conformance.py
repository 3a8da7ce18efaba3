"""What every HTTP backend promises, tested once for all of them.

Each *flavour* is one backend (or Chat Completions preset) as a small adapter: where
it posts, how to point it at a FakeServer, how its wire spells an answer, a tool
turn, an in-band error and a 401, and how to read the calls and results back out of
the request it sent. Every test runs for every flavour, against the real loopback
server, through ``nacelle.Agent``: the event order and pairing rules of DESIGN.md's
"Events", usage on TURN and DONE, in-band errors before and after output, a cut
body, cancellation while the server stalls, keys kept out of errors, and the lazy
``requests`` import. A backend-specific behaviour belongs in that backend's module.
"""

import base64
import functools
import json
import logging
import operator
import subprocess
import sys
import threading
import time
from collections import namedtuple

import pytest

import nacelle
from nacelle import (
    Agent, APIError, Kind, Retry, RetryOptions, Stop, StreamError, StreamTruncated, Usage,
    retryable, user_text,
)
from nacelle.backends import anthropic, chat, gemini, openai, openrouter
from nacelle.testing import FakeServer, Reply
from nacelle.testing.wire import (
    anthropic_stream, fragments, gemini_stream, openrouter_stream, sse_event,
)

from hostile import chain

#: Tokens as a provider reports them: full-rate input, output, cache reads.
Sent = namedtuple("Sent", "input output cache_read", defaults=(0,))

#: One local tool call as the model writes it: (id, name, input JSON text).
CALLS = [("call_weather_0", "weather", '{"city": "Berlin"}'),
         ("call_clock_1", "clock", "{}")]

STALL = 30.0  # seconds a stalled reply waits; every bound below is far shorter


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


def _data_url(url):
    """(media type, base64) of a ``data:`` URL."""
    head, _, data = url.partition(",")
    return head[len("data:"):-len(";base64")], data


def _text_of(content):
    """A message content as text: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


# -- flavours ---------------------------------------------------------------------------


class AnthropicFlavour:
    name = "anthropic"
    path = "/v1/messages"
    key = "sk-ant-api03-CONFORMANCE-SECRET-4242"
    key_variable = "ANTHROPIC_API_KEY"
    caches = True
    build = "from nacelle.backends import anthropic; b = anthropic.Backend('k', base_url=URL)"

    def backend(self, server, **options):
        return anthropic.Backend(self.key, base_url=server.url, **options)

    def answer(self, deltas, usage, calls=()):
        return anthropic_stream(tuple(deltas), tool_calls=calls, usage={
            "input_tokens": usage.input, "output_tokens": usage.output,
            "cache_read_input_tokens": usage.cache_read})

    def failure(self, deltas=()):
        # What a 529 becomes once the 200 was sent.
        return anthropic_stream(tuple(deltas), error=("overloaded_error", "Overloaded"))

    def unauthorized(self):
        return Reply.json({"type": "error", "request_id": "req_011conformance", "error": {
            "type": "authentication_error", "message": f"invalid x-api-key {self.key}"}},
            status=401)

    def sent_calls(self, body):
        blocks = body["messages"][-2]["content"]
        return [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]

    def sent_results(self, body):
        blocks = body["messages"][-1]["content"]
        return [(b["tool_use_id"], _text_of(b["content"])) for b in blocks
                if b["type"] == "tool_result"]

    documents = True

    def sent_media(self, body):
        """(call id, kind, media type, base64) of each image and document the model
        was sent in a tool result: inside its ``tool_result`` block."""
        out = []
        for block in body["messages"][-1]["content"]:
            if block["type"] == "tool_result" and isinstance(block.get("content"), list):
                out += [(block["tool_use_id"], inner["type"], inner["source"]["media_type"],
                         inner["source"]["data"]) for inner in block["content"]
                        if inner["type"] in ("image", "document")]
        return out


class ChatFlavour:
    """What every Chat Completions flavour shares: how calls and results go back."""

    caches = True

    def sent_calls(self, body):
        [assistant] = [m for m in body["messages"] if m.get("tool_calls")]
        return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in assistant["tool_calls"]]

    def sent_results(self, body):
        return [(m["tool_call_id"], _text_of(m["content"]))
                for m in body["messages"] if m["role"] == "tool"]

    documents = True

    def sent_media(self, body):
        """The same, from the user message after the tool messages: each call's media
        follow a line naming the call."""
        out, call = [], None
        for part in body["messages"][-1]["content"]:
            if part["type"] == "text" and part["text"].startswith("[tool call "):
                call = part["text"].split()[2]
            elif part["type"] == "image_url":
                out.append((call, "image") + _data_url(part["image_url"]["url"]))
            elif part["type"] == "file":
                out.append((call, "document") + _data_url(part["file"]["file_data"]))
        return out


class OpenRouterFlavour(ChatFlavour):
    name = "openrouter"
    path = "/api/v1/chat/completions"
    key = "sk-or-v1-CONFORMANCE-SECRET-4242"
    key_variable = "OPENROUTER_API_KEY"
    model = "openai/gpt-5-mini"
    build = ("from nacelle.backends import openrouter; "
             "b = openrouter.Backend(model='openai/gpt-5-mini', api_key='k', base_url=URL)")

    def backend(self, server, **options):
        return openrouter.Backend(api_key=self.key, model=self.model,
                                  base_url=server.url + "/api/v1", **options)

    def answer(self, deltas, usage, calls=()):
        prompt = usage.input + usage.cache_read  # OpenRouter counts cache reads inside
        return openrouter_stream(tuple(deltas), tool_calls=calls, model=self.model, usage={
            "prompt_tokens": prompt, "completion_tokens": usage.output,
            "total_tokens": prompt + usage.output, "cost": 0.000042, "is_byok": False,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read,
                                      "cache_write_tokens": 0}})

    def failure(self, deltas=()):
        return openrouter_stream(tuple(deltas), model=self.model,
                                 error=(429, "Rate limit exceeded"))

    def unauthorized(self):
        return Reply.json({"error": {"code": 401, "message": f"Invalid key {self.key}"}},
                          status=401)


class OpenAIFlavour(ChatFlavour):
    """The ``chat.openai`` preset, its stream in the shape api.openai.com sends."""

    name = "chat-openai"
    path = "/v1/chat/completions"
    key = "sk-proj-CONFORMANCE-SECRET-4242"
    key_variable = "OPENAI_API_KEY"
    build = ("from nacelle.backends import chat; "
             "b = chat.openai('gpt-5-mini', base_url=URL, api_key='k')")

    def backend(self, server, **options):
        return chat.openai("gpt-5-mini", base_url=server.url + "/v1", api_key=self.key,
                           **options)

    def _chunk(self, delta, finish=None, **extra):
        return sse_event({
            "id": "chatcmpl-CvQconformance", "object": "chat.completion.chunk",
            "created": 1764590000, "model": "gpt-5-mini-2025-08-07",
            "service_tier": "default", "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish}],
            "usage": None, **extra})

    def _head(self, deltas, calls=()):
        out = [self._chunk({"role": "assistant", "content": None if calls and not deltas
                            else "", "refusal": None})]
        out += [self._chunk({"content": text}) for text in deltas]
        for index, (call_id, name, arguments) in enumerate(calls):
            out.append(self._chunk({"tool_calls": [{
                "index": index, "id": call_id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}))
            out += [self._chunk({"tool_calls": [{"index": index, "function": {
                "arguments": piece}}]}) for piece in fragments(arguments)]
        return out

    def answer(self, deltas, usage, calls=()):
        prompt = usage.input + usage.cache_read
        out = self._head(deltas, calls)
        out.append(self._chunk({}, "tool_calls" if calls else "stop"))
        out.append(sse_event({
            "id": "chatcmpl-CvQconformance", "object": "chat.completion.chunk",
            "created": 1764590000, "model": "gpt-5-mini-2025-08-07", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": usage.output,
                      "total_tokens": prompt + usage.output,
                      "prompt_tokens_details": {"cached_tokens": usage.cache_read,
                                                "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0,
                                                    "audio_tokens": 0}}}))
        return out + [b"data: [DONE]\n\n"]

    def failure(self, deltas=()):
        return self._head(deltas) + [sse_event({"error": {
            "code": 429, "message": "Rate limit reached for gpt-5-mini", "type": "requests"}})]

    def unauthorized(self):
        return Reply.json({"error": {
            "message": f"Incorrect API key provided: {self.key}.", "param": None,
            "type": "invalid_request_error", "code": "invalid_api_key"}}, status=401)


class OllamaFlavour(ChatFlavour):
    """The keyless ``chat.ollama`` preset: whole tool calls in one chunk, usage with
    no cache fields (Ollama reports none)."""

    name = "chat-ollama"
    path = "/v1/chat/completions"
    key = None
    key_variable = ""
    caches = False
    documents = False
    build = "from nacelle.backends import chat; b = chat.ollama('qwen3:8b', base_url=URL)"

    def backend(self, server, **options):
        return chat.ollama("qwen3:8b", base_url=server.url + "/v1", **options)

    def _chunk(self, delta, finish=None):
        return sse_event({
            "id": "chatcmpl-417", "object": "chat.completion.chunk", "created": 1764590000,
            "model": "qwen3:8b", "system_fingerprint": "fp_ollama",
            "choices": [{"index": 0, "delta": dict({"role": "assistant"}, **delta),
                         "finish_reason": finish}]})

    def answer(self, deltas, usage, calls=()):
        assert usage.cache_read == 0, "Ollama reports no cache reads"
        out = [self._chunk({"content": text}) for text in deltas]
        if calls:
            out.append(self._chunk({"content": "", "tool_calls": [
                {"id": call_id, "index": index, "type": "function",
                 "function": {"name": name, "arguments": arguments}}
                for index, (call_id, name, arguments) in enumerate(calls)]}))
        out.append(self._chunk({"content": ""}, "tool_calls" if calls else "stop"))
        out.append(sse_event({
            "id": "chatcmpl-417", "object": "chat.completion.chunk", "created": 1764590000,
            "model": "qwen3:8b", "system_fingerprint": "fp_ollama", "choices": [],
            "usage": {"prompt_tokens": usage.input, "completion_tokens": usage.output,
                      "total_tokens": usage.input + usage.output}}))
        return out + [b"data: [DONE]\n\n"]

    def failure(self, deltas=()):
        return [self._chunk({"content": text}) for text in deltas] + [sse_event({"error": {
            "code": 502, "message": "llama runner process has terminated"}})]

    def unauthorized(self):
        # An Ollama behind an authenticating proxy: the client sent no key at all.
        return Reply.json({"error": {"message": "unauthorized", "type": "api_error",
                                     "param": None, "code": None}}, status=401)


class ResponsesFlavour:
    """``openai.Backend``: OpenAI's Responses API, its stream in the shape of the
    recordings in ``tests/data/openai_responses``."""

    name = "openai"
    path = "/v1/responses"
    key = "sk-proj-CONFORMANCE-SECRET-4242"
    key_variable = "OPENAI_API_KEY"
    caches = True
    build = ("from nacelle.backends import openai; "
             "b = openai.Backend(model='gpt-5-mini', api_key='k', base_url=URL)")

    def backend(self, server, **options):
        return openai.Backend(self.key, model="gpt-5-mini", base_url=server.url + "/v1",
                              **options)

    def _event(self, data):
        return sse_event(data, event=data["type"])

    def _head(self, deltas, calls=()):
        response = {"id": "resp_conformance", "object": "response", "status": "in_progress",
                    "model": "gpt-5-mini-2025-08-07", "output": [], "usage": None}
        out = [self._event({"type": "response.created", "response": response}),
               self._event({"type": "response.in_progress", "response": response})]
        if deltas:
            item = {"id": "msg_conformance", "type": "message", "status": "in_progress",
                    "content": [], "role": "assistant"}
            out.append(self._event({"type": "response.output_item.added", "item": item,
                                    "output_index": 0}))
            out += [self._event({"type": "response.output_text.delta", "delta": text,
                                 "item_id": "msg_conformance", "output_index": 0,
                                 "content_index": 0}) for text in deltas]
            done = dict(item, status="completed", content=[
                {"type": "output_text", "annotations": [], "text": "".join(deltas)}])
            out.append(self._event({"type": "response.output_item.done", "item": done,
                                    "output_index": 0}))
        for index, (call_id, name, arguments) in enumerate(calls, start=1):
            item = {"id": f"fc_{index}", "type": "function_call", "status": "in_progress",
                    "arguments": "", "call_id": call_id, "name": name}
            out.append(self._event({"type": "response.output_item.added", "item": item,
                                    "output_index": index}))
            out += [self._event({"type": "response.function_call_arguments.delta",
                                 "delta": piece, "item_id": f"fc_{index}",
                                 "output_index": index}) for piece in fragments(arguments)]
            out.append(self._event({"type": "response.output_item.done", "output_index": index,
                                    "item": dict(item, status="completed", arguments=arguments)}))
        return out

    def answer(self, deltas, usage, calls=()):
        prompt = usage.input + usage.cache_read  # input_tokens counts the cached part
        return self._head(deltas, calls) + [self._event({"type": "response.completed", "response": {
            "id": "resp_conformance", "object": "response", "status": "completed",
            "incomplete_details": None, "usage": {
                "input_tokens": prompt, "input_tokens_details": {
                    "cached_tokens": usage.cache_read, "cache_write_tokens": 0},
                "output_tokens": usage.output, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + usage.output}}})]

    def failure(self, deltas=()):
        return self._head(deltas) + [self._event({"type": "response.failed", "response": {
            "id": "resp_conformance", "object": "response", "status": "failed", "error": {
                "code": "rate_limit_exceeded", "message": "Rate limit reached for gpt-5-mini"}}})]

    def unauthorized(self):
        return Reply.json({"error": {
            "message": f"Incorrect API key provided: {self.key}.", "param": None,
            "type": "invalid_request_error", "code": "invalid_api_key"}}, status=401)

    def sent_calls(self, body):
        return [(i["call_id"], i["name"], json.loads(i["arguments"])) for i in body["input"]
                if i.get("type") == "function_call"]

    def sent_results(self, body):
        return [(i["call_id"], i["output"] if isinstance(i["output"], str)
                 else _text_of(i["output"])) for i in body["input"]
                if i.get("type") == "function_call_output"]

    documents = True

    def sent_media(self, body):
        """The same, inside each ``function_call_output``'s list of input items."""
        out = []
        for item in body["input"]:
            if item.get("type") == "function_call_output" and isinstance(item["output"], list):
                for part in item["output"]:
                    if part["type"] == "input_image":
                        out.append((item["call_id"], "image") + _data_url(part["image_url"]))
                    elif part["type"] == "input_file":
                        out.append((item["call_id"], "document")
                                   + _data_url(part["file_data"]))
        return out


class GeminiFlavour:
    """``gemini.Backend``: Gemini's native ``streamGenerateContent?alt=sse``, its chunks
    in the shape of ``GenerateContentResponse`` (ai.google.dev/api/generate-content,
    the google-genai SDK's types): each call whole in one ``functionCall`` part, the
    contents of the next request as ``functionCall`` / ``functionResponse`` parts."""

    name = "gemini"
    path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    key = "AIzaSyCONFORMANCE-SECRET-4242"
    key_variable = "GEMINI_API_KEY"
    caches = True
    documents = True
    #: functionCall.args is a JSON object inside the chunk, not a string: an input
    #: nested past the reader's cap makes the whole chunk too deep to read (a
    #: StreamError, tests/backends/test_gemini_stream.py); Google's servers, which
    #: write args from a protobuf Struct, cannot send one that deep anyway.
    args_are_text = False
    build = ("from nacelle.backends import gemini; "
             "b = gemini.Backend('k', model='gemini-2.5-flash', base_url=URL)")

    def backend(self, server, **options):
        return gemini.Backend(self.key, model="gemini-2.5-flash",
                              base_url=server.url + "/v1beta", **options)

    def streaming(self, request):
        return request.query == "alt=sse"

    def answer(self, deltas, usage, calls=()):
        return gemini_stream(tuple(deltas), tool_calls=calls, usage={
            "input_tokens": usage.input, "output_tokens": usage.output,
            "cached_tokens": usage.cache_read})

    def failure(self, deltas=()):
        head = [sse_event({"candidates": [{"content": {"parts": [{"text": text}],
                                                       "role": "model"}, "index": 0}],
                           "modelVersion": "gemini-2.5-flash"}) for text in deltas]
        return head + [sse_event({"error": {
            "code": 429, "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED"}})]

    def unauthorized(self):
        # Google's 401 shape (UNAUTHENTICATED); the key is echoed to test the scrubbing.
        return Reply.json({"error": {
            "code": 401, "status": "UNAUTHENTICATED",
            "message": f"Request had invalid authentication credentials: {self.key}"}},
            status=401)

    def sent_calls(self, body):
        [model] = [c for c in body["contents"] if c["role"] == "model"]
        return [(p["functionCall"]["id"], p["functionCall"]["name"], p["functionCall"]["args"])
                for p in model["parts"] if "functionCall" in p]

    def sent_results(self, body):
        return [(p["functionResponse"]["id"], p["functionResponse"]["response"].get(
            "output", p["functionResponse"]["response"].get("error")))
            for p in body["contents"][-1]["parts"] if "functionResponse" in p]

    def sent_media(self, body):
        """The same: inside each ``functionResponse``'s ``parts`` (Gemini 3), or after
        the responses, each call's media after a line naming it (Gemini 2.5, this
        flavour's model)."""
        out, call = [], None
        for part in body["contents"][-1]["parts"]:
            response = part.get("functionResponse")
            inside = [(response["id"], p) for p in (response or {}).get("parts", ())]
            if part.get("text", "").startswith("[tool call "):
                call = part["text"].split()[2]
            for call_id, inner in inside + ([(call, part)] if "inlineData" in part else []):
                media = inner["inlineData"]["mimeType"]
                kind = "image" if media.startswith("image/") else "document"
                out.append((call_id, kind, media, inner["inlineData"]["data"]))
        return out


FLAVOURS = [AnthropicFlavour(), OpenRouterFlavour(), OpenAIFlavour(), OllamaFlavour(),
            ResponsesFlavour(), GeminiFlavour()]
KEY_VARIABLES = ("ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY",
                 "GEMINI_API_KEY")


@pytest.fixture(params=FLAVOURS, ids=lambda flavour: flavour.name)
def flavour(request):
    return request.param


@pytest.fixture(autouse=True)
def no_keys_in_the_environment(monkeypatch):
    for variable in KEY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def server():
    with FakeServer() as running:
        yield running


def cut_after(chunks, text):
    """``chunks`` up to the one carrying the delta ``text``: what a body cut off there
    holds (no finish, no final event)."""
    marker = json.dumps(text).encode("utf-8")
    for number, chunk in enumerate(chunks):
        if marker in chunk:
            return chunks[:number + 1]
    raise AssertionError(f"no chunk carries {text!r}")


def kinds(events):
    return [event.kind for event in events]


def total(usages):
    return functools.reduce(operator.add, usages, Usage())


def counted(usage):
    return (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens)


def tool_run(flavour, server, usages=(Sent(31, 17), Sent(44, 9))):
    """A two-turn run: two local calls, then an answer. One tool at a time, so the
    results land in index order whatever the thread scheduler does (the order of
    results finishing together is the tool runner's business, not the backend's)."""
    first, second = usages
    server.queue(flavour.path,
                 Reply(chunks=flavour.answer(["Checking", " both."], first, calls=CALLS)),
                 Reply(chunks=flavour.answer(["It is 15°C", " at 12:00."], second)))
    agent = Agent(flavour.backend(server), "You are a weather desk.",
                  tools=[weather, clock], max_parallel_tools=1)
    return list(agent.stream([user_text("Weather in Berlin, and the time?")]))


PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
                       "DwAChwGA60e6kgAAAABJRU5ErkJggg==")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


@nacelle.tool
def screenshot():
    """The screen as a picture, and the page as a PDF."""
    return [nacelle.Text("The login page."), nacelle.Image.from_bytes(PNG),
            nacelle.Document.from_bytes(PDF, title="page")]


# -- media ------------------------------------------------------------------------------


def test_a_tools_screenshot_and_pdf_reach_the_model_on_the_wire(flavour, server):
    server.queue(flavour.path,
                 Reply(chunks=flavour.answer(["Looking."], Sent(20, 5),
                                             calls=[("call_shot_0", "screenshot", "{}")])),
                 Reply(chunks=flavour.answer(["A login page."], Sent(90, 6))))
    agent = Agent(flavour.backend(server), "You look at screens.", tools=[screenshot])
    events = list(agent.stream([user_text("What is on the screen?")]))

    [result] = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert not result.failed and events[-1].stop is Stop.END
    body = server.requests[1].json()
    png, pdf = (base64.b64encode(data).decode() for data in (PNG, PDF))
    expected = [("call_shot_0", "image", "image/png", png)]
    if flavour.documents:
        expected.append(("call_shot_0", "document", "application/pdf", pdf))
    assert flavour.sent_media(body) == expected
    [(_, text)] = flavour.sent_results(body)
    assert text.startswith("The login page.")
    if not flavour.documents:  # a server that takes no PDF is told there was one
        assert '[document: application/pdf "page", 45 bytes, from call call_shot_0]' in text
    server.assert_consumed()


# -- event order and pairing ------------------------------------------------------------


def test_text_deltas_arrive_in_order_then_turn_then_done(flavour, server):
    deltas = ["Ber", "lin is the ", "capital — ", "wörld 🚀", " "]
    server.queue(flavour.path, Reply(chunks=flavour.answer(deltas, Sent(25, 12))))
    events = list(Agent(flavour.backend(server), "Be brief.").stream([user_text("Hi")]))

    assert kinds(events) == [Kind.TEXT] * len(deltas) + [Kind.TURN, Kind.DONE]
    assert [e.text for e in events[:-2]] == deltas  # one event per delta, never merged
    turn, done = events[-2:]
    assert turn.stop is Stop.END and done.stop is Stop.END
    assert counted(turn.usage) == (25, 12, 0)
    assert done.usage == turn.usage
    assert done.messages[-1].text == "".join(deltas)
    [request] = server.requests
    assert (request.method, request.path) == ("POST", flavour.path)
    if hasattr(flavour, "streaming"):  # a wire that asks for a stream in the URL
        assert flavour.streaming(request)
    else:
        assert request.json()["stream"] is True
    server.assert_consumed()


def streamed_inputs(events):
    """Each call's TOOL_INPUT events, which come before any TOOL_CALL, by index; the
    events without them."""
    inputs = [e for e in events if e.kind is Kind.TOOL_INPUT]
    first_call = kinds(events).index(Kind.TOOL_CALL)
    assert all(events.index(e) < first_call for e in inputs)
    by_index = {}
    for event in inputs:
        assert event.tool.input == "".join(e.text for e in by_index.get(
            event.tool.index, [])) + event.text
        by_index.setdefault(event.tool.index, []).append(event)
    return by_index, [e for e in events if e.kind is not Kind.TOOL_INPUT]


def test_every_tool_call_is_closed_by_exactly_one_result_in_index_order(flavour, server):
    events = tool_run(flavour, server)
    inputs, events = streamed_inputs(events)
    # Every wire shows each call's arguments as they are written, before its TOOL_CALL.
    assert {index: (e[-1].tool.id, e[-1].tool.name, e[-1].tool.input)
            for index, e in inputs.items()} == dict(enumerate(CALLS))

    assert kinds(events) == [
        Kind.TEXT, Kind.TEXT, Kind.TOOL_CALL, Kind.TOOL_CALL, Kind.TURN,
        Kind.TOOL_RESULT, Kind.TOOL_RESULT, Kind.TEXT, Kind.TEXT, Kind.TURN, Kind.DONE]
    calls = [e.tool for e in events if e.kind is Kind.TOOL_CALL]
    results = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert [(c.id, c.name, c.input) for c in calls] == CALLS  # input byte for byte
    assert [c.index for c in calls] == [0, 1]
    assert [(r.id, r.index, r.name) for r in results] == [
        (c.id, c.index, c.name) for c in calls]
    assert [(r.result, r.error) for r in results] == [("15°C, cloudy in Berlin", None),
                                                       ("12:00", None)]
    assert events[4].stop is Stop.TOOLS and events[-1].stop is Stop.END

    first, second = (r.json() for r in server.requests)
    assert flavour.sent_results(first) == []
    assert flavour.sent_calls(second) == [
        (call_id, name, json.loads(arguments)) for call_id, name, arguments in CALLS]
    assert flavour.sent_results(second) == [("call_weather_0", "15°C, cloudy in Berlin"),
                                            ("call_clock_1", "12:00")]
    server.assert_consumed()


def test_a_forwarding_sub_agents_deltas_are_made_tagged_by_its_wire_never_copied(
        flavour, server, monkeypatch):
    # A forwarding sub-agent's events carry its name and the parent's call id; its
    # text and argument deltas are nearly all of them, and each wire's accumulator
    # makes them so (_stream.Tagging) rather than subagent._tagged copying each.
    from nacelle import subagent
    from nacelle.messages import Message, Role, Text, ToolCall
    from nacelle.testing import ScriptedBackend

    copied = []
    made = subagent._new

    def counted_copy(cls):
        copied.append(cls)
        return made(cls)

    monkeypatch.setattr(subagent, "_new", counted_copy)
    server.queue(flavour.path,
                 Reply(chunks=flavour.answer(["Checking", " both."], Sent(5, 5), calls=CALLS)),
                 Reply(chunks=flavour.answer(["It is 15°C", " at 12:00."], Sent(5, 5))))
    child = Agent(flavour.backend(server), "You are a weather desk.",
                  tools=[weather, clock], max_parallel_tools=1)
    parent = Agent(ScriptedBackend([
        Message(Role.ASSISTANT, (ToolCall("p1", "subagent", '{"task": "Weather?"}'),)),
        Message(Role.ASSISTANT, (Text("Done."),))]), "sys",
        tools=[nacelle.subagent_tool(child, forward=True)])
    events = list(parent.stream([user_text("Go")]))
    deltas = [e for e in events if e.kind in (Kind.TEXT, Kind.TOOL_INPUT) and e.via]
    assert {(e.agent, e.via) for e in deltas} == {(("subagent",), "p1")}
    assert "".join(e.text for e in deltas if e.kind is Kind.TEXT) == \
        "Checking both.It is 15°C at 12:00."
    assert {e.tool.index for e in deltas if e.kind is Kind.TOOL_INPUT} == {0, 1}
    # What was copied to be tagged: the child's calls, results and turns, not a delta.
    forwarded = [e for e in events if e.via and e.kind is not Kind.TOOL_INPUT
                 and e.kind is not Kind.TEXT]
    assert copied and len(copied) == len(forwarded)
    server.assert_consumed()


def test_a_tool_input_nested_a_thousand_deep_is_one_failed_result_and_the_run_goes_on(
        flavour, server):
    if not getattr(flavour, "args_are_text", True):
        pytest.skip(f"{flavour.name} sends a call's input as a JSON object, not text")
    deep = '{"city": ' + "[" * 1000 + "]" * 1000 + "}"
    server.queue(flavour.path,
                 Reply(chunks=flavour.answer([], Sent(5, 5), calls=[("call_0", "weather", deep)])),
                 Reply(chunks=flavour.answer(["Sorry."], Sent(5, 5))))
    agent = Agent(flavour.backend(server), "You are a weather desk.", tools=[weather])
    events = list(agent.stream([user_text("Weather?")]))
    inputs, events = streamed_inputs(events)
    assert inputs[0][-1].tool.input == deep  # streamed as written, never parsed

    assert kinds(events) == [Kind.TOOL_CALL, Kind.TURN, Kind.TOOL_RESULT, Kind.TEXT, Kind.TURN,
                             Kind.DONE]
    call, result = events[0].tool, events[2].tool
    assert (call.id, call.input) == ("call_0", deep)
    assert result.id == "call_0" and "nested deeper than 128 levels" in result.error
    second = server.requests[1].json()
    assert flavour.sent_results(second) == [("call_0", result.error)]
    server.assert_consumed()


def test_usage_is_reported_on_turn_and_done(flavour, server):
    cache = 100 if flavour.caches else 0
    sent = (Sent(31, 17, cache), Sent(44, 9, cache + 40 if cache else 0))
    events = tool_run(flavour, server, usages=sent)

    turns = [e for e in events if e.kind is Kind.TURN]
    assert [counted(t.usage) for t in turns] == [tuple(s) for s in sent]
    done = events[-1]
    assert done.usage == total(t.usage for t in turns)
    assert counted(done.usage) == (31 + 44, 17 + 9, 2 * cache + (40 if cache else 0))
    # Nothing but TURN and DONE carries usage.
    assert all(e.usage == Usage() for e in events if e.kind not in (Kind.TURN, Kind.DONE))


def test_a_turn_is_priced_exactly_when_the_backend_says_it_knows_dollars(flavour, server):
    events = tool_run(flavour, server)
    backend_knows = flavour.backend(server).capabilities.cost
    turns = [e for e in events if e.kind is Kind.TURN]
    assert [t.usage.priced for t in turns] == [backend_knows] * 2
    assert events[-1].usage.priced is backend_knows


def test_no_request_is_sent_before_the_first_turn(flavour, server):
    backend = flavour.backend(server)
    agent = Agent(backend, "Be brief.")
    events = agent.stream([user_text("Hi")])
    assert server.requests == []  # built, configured, a stream asked for: nothing sent

    server.queue(flavour.path, Reply(chunks=flavour.answer(["Hel", "lo"], Sent(5, 2))))
    assert next(events).text == "Hel"
    assert len(server.requests) == 1
    assert kinds(events) == [Kind.TEXT, Kind.TURN, Kind.DONE]
    assert len(server.requests) == 1


@pytest.mark.slow
def test_importing_the_backend_and_building_an_agent_does_not_import_requests(flavour):
    source = "\n".join([
        "import sys",
        "URL = 'http://127.0.0.1:9/v1'",
        flavour.build,
        "import nacelle",
        "nacelle.Agent(b, 'Be brief.')",
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('requests', 'urllib3'))",
        "assert not loaded, loaded",
    ])
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


# -- failures inside a 200 --------------------------------------------------------------


def test_an_in_band_error_before_output_is_a_retryable_stream_error(flavour, server):
    server.queue(flavour.path, Reply(chunks=flavour.failure()))
    seen = []
    with pytest.raises(StreamError) as caught:
        for event in Agent(flavour.backend(server), "Be brief.").stream([user_text("Hi")]):
            seen.append(event)
    assert seen == []
    assert not isinstance(caught.value, StreamTruncated)
    assert retryable(caught.value)

    # The same failure, then a good answer: Retry recovers, showing the answer once.
    server.queue(flavour.path, Reply(chunks=flavour.failure()),
                 Reply(chunks=flavour.answer(["Recovered", "."], Sent(8, 3))))
    retrying = Retry(flavour.backend(server), RetryOptions(attempts=2, base=0.01, max=0.01))
    result = Agent(retrying, "Be brief.").run([user_text("Hi")])
    assert result.text == "Recovered." and result.stop is Stop.END and result.turns == 1
    first, again, second = server.requests
    assert second.body == again.body == first.body
    server.assert_consumed()


def test_an_in_band_error_after_text_is_raised_after_the_text_was_shown(flavour, server):
    deltas = ["The answer", " starts"]
    server.queue(flavour.path, Reply(chunks=flavour.failure(deltas)),
                 Reply(chunks=flavour.answer(["Never", " read"], Sent(1, 1))))
    retrying = Retry(flavour.backend(server), RetryOptions(attempts=3, base=0.01, max=0.01))
    seen = []
    with pytest.raises(StreamError) as caught:
        for event in Agent(retrying, "Be brief.").stream([user_text("Hi")]):
            seen.append(event)
    assert [(e.kind, e.text) for e in seen] == [(Kind.TEXT, text) for text in deltas]
    assert not isinstance(caught.value, StreamTruncated)
    assert retryable(caught.value)  # worth retrying in itself; not once text was shown
    assert len(server.requests) == 1
    assert server.pending == {flavour.path: 1}


@pytest.mark.parametrize("ending", ["cleanly", "abruptly"])
def test_a_truncated_body_is_stream_truncated(flavour, server, ending):
    deltas = ["Half", " an answer", " and then"]
    chunks = cut_after(flavour.answer(deltas, Sent(9, 9)), " an answer")
    # Cleanly: the HTTP body ends where the stream was cut. Abruptly: the connection
    # is dropped there, with no end to the chunked encoding.
    drop = len(chunks) if ending == "abruptly" else None
    server.queue(flavour.path, Reply(chunks=chunks, drop_after=drop))
    seen = []
    with pytest.raises(StreamTruncated) as caught:
        for event in Agent(flavour.backend(server), "Be brief.").stream([user_text("Hi")]):
            seen.append(event)
    assert [(e.kind, e.text) for e in seen] == [(Kind.TEXT, "Half"), (Kind.TEXT, " an answer")]
    assert retryable(caught.value)
    assert len(server.requests) == 1


def test_cancelling_mid_stream_ends_the_run_promptly_with_cancelled(flavour, server):
    chunks = flavour.answer(["Before", " the stall", " and after"], Sent(4, 4))
    head = cut_after(chunks, "Before")
    rest = chunks[len(head):]
    server.queue(flavour.path, Reply(chunks=head + [(rest[0], STALL)] + rest[1:]))
    cancel = nacelle.CancelEvent()
    seen, setter, asked = [], None, None
    with pytest.raises(nacelle.Cancelled):
        for event in Agent(flavour.backend(server), "Be brief.").stream(
                [user_text("Hi")], cancel=cancel):
            seen.append(event)
            if setter is None:  # the server is stalling now, for STALL seconds
                setter = threading.Thread(target=cancel.set)
                asked = time.monotonic()
                setter.start()
    took = time.monotonic() - asked
    setter.join(timeout=5.0)
    assert [(e.kind, e.text) for e in seen] == [(Kind.TEXT, "Before")]
    assert took < 5.0, f"the run ended {took:.1f}s after cancel was set"
    assert server.wait_disconnects(1, timeout=5.0)  # the response was closed, not drained


# -- keys -------------------------------------------------------------------------------


def test_an_http_401_names_the_servers_key_variable_and_never_the_key(
        flavour, server, caplog):
    caplog.set_level(logging.DEBUG)
    server.queue(flavour.path, flavour.unauthorized())
    with pytest.raises(APIError) as caught:
        Agent(flavour.backend(server, max_retries=2), "Be brief.").run([user_text("Hi")])
    error = caught.value
    assert error.status == 401 and not retryable(error)
    [request] = server.requests  # not retried
    message = str(error)
    assert "api_key" in message  # the hint says what to fix
    assert "OpenRouter" not in message or flavour.name == "openrouter"
    if flavour.key is None:
        assert "authorization" not in request.headers  # a keyless server is sent none
        assert "$" not in message  # no variable to name
        return
    assert request.headers.get("authorization", request.headers.get(
        "x-api-key", request.headers.get("x-goog-api-key", ""))).endswith(flavour.key)
    assert f"${flavour.key_variable}" in message
    texts = [message, repr(error), repr(error.args), caplog.text]
    texts += [f"{type(e).__name__} {e} {e!r} {e.args!r}" for e in chain(error)]
    for text in texts:
        assert flavour.key not in text
        assert "CONFORMANCE-SECRET" not in text  # nor the part a preview's cut would leave
