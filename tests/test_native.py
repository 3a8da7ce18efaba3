"""The providers' own tools (nacelle.native) and the citations they bring, on the wire
of each backend: the request bodies a loopback FakeServer received, and streams built
from the documented shapes.

Shapes: Anthropic's web search tool page (server_tool_use, web_search_tool_result,
text blocks whose citations_delta carry web_search_result_location citations with an
encrypted_index; https://platform.claude.com/docs/en/agents-and-tools/tool-use/
web-search-tool) and the SDK's ``types/citations_delta.py``; OpenAI's web search guide
(a web_search_call item, then a message whose output_text carries url_citation
annotations with start_index / end_index; https://developers.openai.com/api/docs/
guides/tools-web-search) and openai-python's ``ResponseOutputText``.
"""

import json

import pytest

import nacelle
from nacelle import Agent, ConfigError, Message, Role, Text, Unsupported, native, user_text
from nacelle.backends import anthropic, chat, openai
from nacelle.console import Renderer, sources
from nacelle.messages import Citation, ProviderBlock, dumps, loads
from nacelle.testing.server import FakeServer, Reply
from nacelle.testing.wire import sse_event

KEY = "sk-test-0123456789"


@pytest.fixture
def server():
    with FakeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def lookup(city: str) -> str:
    """Look a city up locally."""
    return f"{city}: found"


def local_search() -> nacelle.tools.FunctionTool:  # type: ignore[type-arg]
    return nacelle.tool(lookup)


# -- Anthropic ------------------------------------------------------------------------

def anthropic_events(blocks, stop="end_turn"):
    """A Messages stream of ``blocks``: each ``(start, deltas)`` sent as
    content_block_start, its deltas and content_block_stop."""
    out = [sse_event({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "claude-opus-5", "usage": {"input_tokens": 30, "output_tokens": 1}}},
        "message_start")]
    for index, (start, deltas) in enumerate(blocks):
        out.append(sse_event({"type": "content_block_start", "index": index,
                              "content_block": start}, "content_block_start"))
        for delta in deltas:
            out.append(sse_event({"type": "content_block_delta", "index": index,
                                  "delta": delta}, "content_block_delta"))
        out.append(sse_event({"type": "content_block_stop", "index": index},
                             "content_block_stop"))
    out.append(sse_event({"type": "message_delta", "delta": {"stop_reason": stop},
                          "usage": {"output_tokens": 20}}, "message_delta"))
    out.append(sse_event({"type": "message_stop"}, "message_stop"))
    return out


CITATION = {"type": "web_search_result_location", "url": "https://example.org/tides",
            "title": "Tides of Brest", "encrypted_index": "Eo8BCioIAhgBIiQ",
            "cited_text": "High tide at 06:12."}

SEARCH_CALL = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
               "input": {}}
SEARCH_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
    {"type": "web_search_result", "url": "https://example.org/tides", "title": "Tides of Brest",
     "encrypted_content": "EqgfCioIARgBIiQ", "page_age": None}]}


def searched_answer():
    return [
        (SEARCH_CALL, [{"type": "input_json_delta", "partial_json": '{"query": "tides brest"}'}]),
        (SEARCH_RESULT, []),
        ({"type": "text", "text": ""}, [
            {"type": "citations_delta", "citation": CITATION},
            {"type": "text_delta", "text": "High tide is at 06:12."}]),
    ]


def test_anthropic_sends_each_native_tool_as_its_server_tool_type_with_its_beta(server):
    server.queue("/v1/messages", Reply(chunks=anthropic_events(searched_answer())))
    backend = anthropic.Backend(KEY, base_url=server.url)
    agent = Agent(backend, "Be brief.", tools=[
        native.web_search(max_uses=3, allowed_domains=["example.org"]),
        native.web_fetch(max_content_tokens=5000), native.code_execution(), nacelle.tool(lookup)])
    agent.run([user_text("When is high tide?")])
    sent = server.requests[0]
    tools = sent.json()["tools"]
    assert [t.get("type") for t in tools] == [None, "code_execution_20250825",
                                              "web_fetch_20250910", "web_search_20250305"]
    assert tools[0]["name"] == "lookup"
    assert tools[1] == {"type": "code_execution_20250825", "name": "code_execution"}
    assert tools[2] == {"type": "web_fetch_20250910", "name": "web_fetch",
                        "max_content_tokens": 5000, "citations": {"enabled": True}}
    assert tools[3]["cache_control"] == {"type": "ephemeral"}  # the prefix ends on the last
    assert tools[3]["max_uses"] == 3 and tools[3]["allowed_domains"] == ["example.org"]
    betas = sent.headers["anthropic-beta"].split(",")
    assert betas == ["code-execution-2025-08-25", "web-fetch-2025-09-10"]


def test_an_anthropic_answer_keeps_its_web_citations_and_sends_them_back(server):
    server.queue("/v1/messages", Reply(chunks=anthropic_events(searched_answer())))
    backend = anthropic.Backend(KEY, base_url=server.url)
    agent = Agent(backend, "Be brief.", tools=[native.web_search()])
    result = agent.run([user_text("When is high tide?")])
    answer = result.messages[-1]
    texts = [p for p in answer.parts if isinstance(p, Text)]
    first = texts[0].citations[0]
    assert (first.url, first.title, first.cited_text) == (
        "https://example.org/tides", "Tides of Brest", "High tide at 06:12.")
    assert json.loads(first.state) == CITATION
    assert sum(isinstance(p, ProviderBlock) for p in answer.parts) == 2
    assert loads(dumps(result.messages)) == list(result.messages)

    server.queue("/v1/messages", Reply(chunks=anthropic_events(
        [({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Yes."}])])))
    agent.run(list(result.messages) + [user_text("Sure?")])
    replayed = server.requests[1].json()["messages"][1]["content"]
    assert [b["type"] for b in replayed] == ["server_tool_use", "web_search_tool_result", "text"]
    assert replayed[0]["input"] == {"query": "tides brest"}
    assert replayed[2]["citations"] == [CITATION]


def test_a_paused_anthropic_search_turn_goes_on_with_its_server_blocks_replayed(server):
    paused = anthropic_events(searched_answer()[:1], stop="pause_turn")
    rest = anthropic_events(searched_answer()[1:])
    server.queue("/v1/messages", Reply(chunks=paused), Reply(chunks=rest))
    agent = Agent(anthropic.Backend(KEY, base_url=server.url), "Be brief.",
                  tools=[native.web_search()])
    events = list(agent.stream([user_text("When is high tide?")]))
    second = server.requests[1].json()["messages"]
    assert second[-1]["role"] == "assistant"
    assert second[-1]["content"][0]["type"] == "server_tool_use"
    calls = [e for e in events if e.kind is nacelle.Kind.TOOL_CALL]
    results = [e for e in events if e.kind is nacelle.Kind.TOOL_RESULT]
    assert [c.tool.server for c in calls] == ["anthropic"]
    assert [r.tool.id for r in results] == ["srvtoolu_01"] and results[0].tool.error is None
    assert events[-1].stop is nacelle.Stop.END


def test_a_non_web_citation_goes_back_as_plain_text():
    from nacelle.backends.anthropic.wire import to_wire
    char = {"type": "char_location", "cited_text": "x", "document_index": 0,
            "document_title": "Doc", "start_char_index": 0, "end_char_index": 1}
    message = Message(Role.ASSISTANT, (Text("Said x.", (Citation("", "Doc", "x", json.dumps(char)),
                                                        Citation("u", "t", "c", "not json"))),))
    body = to_wire(nacelle.Request("s", profile=nacelle.CallProfile.TITLE),
                   [user_text("q"), message])
    assert body["messages"][1]["content"] == [{"type": "text", "text": "Said x."}]


# -- OpenAI ---------------------------------------------------------------------------

def openai_events(text, annotations):
    call = {"type": "web_search_call", "id": "ws_1", "status": "completed",
            "action": {"type": "search", "query": "tides brest"}}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": annotations}]}
    started = dict(message, content=[], status="in_progress")
    return [
        sse_event({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5.5"}}),
        sse_event({"type": "response.output_item.added", "output_index": 0, "item": call}),
        sse_event({"type": "response.output_item.done", "output_index": 0, "item": call}),
        sse_event({"type": "response.output_item.added", "output_index": 1, "item": started}),
        sse_event({"type": "response.output_text.delta", "output_index": 1, "item_id": "msg_1",
                   "content_index": 0, "delta": text}),
        sse_event({"type": "response.output_item.done", "output_index": 1, "item": message}),
        sse_event({"type": "response.completed", "response": {
            "id": "resp_1", "status": "completed", "output": [call, message],
            "usage": {"input_tokens": 40, "output_tokens": 9}}}),
    ]


def test_openai_sends_hosted_tools_and_reads_url_citations(server):
    text = "High tide is at 06:12 (example.org)."
    note = {"type": "url_citation", "url": "https://example.org/tides", "title": "Tides of Brest",
            "start_index": 0, "end_index": 21}
    server.queue("/v1/responses", Reply(chunks=openai_events(text, [note])))
    backend = openai.Backend(api_key=KEY, model="gpt-5.5", base_url=server.url + "/v1")
    agent = Agent(backend, "Be brief.", tools=[
        native.web_search(allowed_domains=["example.org"]), native.code_execution()])
    result = agent.run([user_text("When is high tide?")])
    assert server.requests[0].json()["tools"] == [
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "web_search", "filters": {"allowed_domains": ["example.org"]}}]
    answer = result.messages[-1]
    assert isinstance(answer.parts[0], ProviderBlock)
    cited = answer.parts[1]
    assert isinstance(cited, Text)
    first = cited.citations[0]
    assert (first.url, first.title, first.cited_text) == (
        "https://example.org/tides", "Tides of Brest", "High tide is at 06:12")
    server.queue("/v1/responses", Reply(chunks=openai_events("Yes.", [])))
    agent.run(list(result.messages) + [user_text("Sure?")])
    sent = server.requests[1].json()["input"]
    assert sent[1]["type"] == "web_search_call"
    assert sent[2] == {"role": "assistant", "content": text}


def test_openai_has_no_fetch_tool_so_it_is_refused_or_falls_back(server):
    backend = openai.Backend(api_key=KEY, model="gpt-5.5", base_url=server.url + "/v1")
    with pytest.raises(Unsupported, match="web_fetch"):
        Agent(backend, "s", tools=[native.web_fetch()])
    with pytest.raises(Unsupported, match="max_uses"):
        Agent(backend, "s", tools=[native.web_search(max_uses=2)])
    agent = Agent(backend, "s", tools=[native.web_fetch(fallback=nacelle.tool(lookup))])
    assert [t.name for t in agent.tools] == ["lookup"]


# -- backends without native tools ---------------------------------------------------

def test_a_chat_completions_backend_uses_the_fallback_on_the_wire(server):
    server.queue("/v1/chat/completions", Reply(chunks=[
        sse_event({"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}]}),
        sse_event({"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
            {"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        b"data: [DONE]\n\n"]))
    backend = chat.Backend(base_url=server.url + "/v1", model="m", api_key=KEY)
    with pytest.raises(Unsupported, match="native web_search"):
        Agent(backend, "s", tools=[native.web_search()])
    agent = Agent(backend, "s", tools=[native.web_search(fallback=[nacelle.tool(lookup)])])
    agent.run([user_text("hi")])
    tools = server.requests[0].json()["tools"]
    assert [t["function"]["name"] for t in tools] == ["lookup"]


def test_native_tool_options_are_checked_when_built():
    with pytest.raises(ConfigError):
        native.web_search(max_uses=0)
    with pytest.raises(ConfigError):
        native.web_search(allowed_domains=["a"], blocked_domains=["b"])
    with pytest.raises(ConfigError):
        native.web_search(allowed_domains="example.org")
    with pytest.raises(ConfigError):
        native.code_execution(fallback="not a tool")
    with pytest.raises(ConfigError, match="run by the provider"):
        native.web_search().run({}, None)


# -- showing citations ----------------------------------------------------------------

def test_the_console_lists_the_cited_sources_after_the_answer_through_the_sanitiser():
    cited = Text("Tide at 06:12.", (Citation("https://example.org/t", "Tides\x1b[2J", "x"),
                                    Citation("https://example.org/t", "Tides\x1b[2J", "y"),
                                    Citation("https://b.example/", "", "z")))
    messages = (user_text("q"), Message(Role.ASSISTANT, (cited,)))
    assert sources(messages) == ["sources:", "  [1] Tides\x1b[2J <https://example.org/t>",
                                 "  [2] https://b.example/"]
    import io
    out = io.StringIO()
    Renderer(out=out, color=False).event(nacelle.Event(
        nacelle.Kind.DONE, stop=nacelle.Stop.END, messages=messages))
    shown = out.getvalue()
    assert "[1] Tides\\x1b[2J <https://example.org/t>" in shown and "\x1b" not in shown


def test_the_run_report_links_only_web_citations():
    from nacelle.report.page import messages_html
    cited = Text("a", (Citation("https://example.org/t", "T<b>", "q"),
                       Citation("javascript:alert(1)", "bad", "")))
    html = messages_html(json.loads(dumps([Message(Role.ASSISTANT, (cited,))])))
    assert '<a href="https://example.org/t" rel="noopener noreferrer">T&lt;b&gt;</a>' in html
    assert 'href="javascript' not in html and "<li>bad</li>" in html
