"""Tool search on the wire of each backend: deferred tools sent with defer_loading
beside the provider's search tool (Anthropic, OpenAI gpt-5.4+), or a local
search_tools tool that loads what it finds (a Chat Completions server, older OpenAI
models); the tools list only grows within a run.

Shapes: Anthropic's tool search tool page (``tool_search_tool_bm25_20251119``,
``defer_loading``, the ``advanced-tool-use-2025-11-20`` beta; a server_tool_use
named tool_search_tool_bm25 answered by a tool_search_tool_result holding
tool_reference blocks; https://platform.claude.com/docs/en/agents-and-tools/tool-use/
tool-search-tool) and OpenAI's (``{"type": "tool_search"}``, ``defer_loading`` on
functions; https://developers.openai.com/api/docs/guides/tools-tool-search).
"""

import json

import pytest

import nacelle
from nacelle import Agent, ConfigError, ToolSearch, user_text
from nacelle.backends import anthropic, chat, openai
from nacelle.messages import Message, Role, ToolResult
from nacelle.testing.server import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream, openrouter_stream, sse_event
from nacelle.tool_search import BM25, SEARCH_TOOL, _words

KEY = "sk-test-0123456789"


@pytest.fixture
def server():
    with FakeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


class Named:
    """An MCP-style tool: a name, a description, a schema."""

    def __init__(self, name, description):
        self.name, self.description = name, description
        self.schema = {"type": "object", "properties": {"id": {"type": "string"}}}

    def run(self, input, ctx):
        return f"{self.name} ran"


def many(count=40):
    subjects = ["issue", "pull_request", "branch", "commit", "release", "label", "milestone",
                "comment"]
    verbs = ["create", "get", "list", "update", "delete"]
    tools = [Named(f"{verb}_{subject}", f"{verb.title()} a GitHub {subject.replace('_', ' ')}.")
             for subject in subjects for verb in verbs]
    return tools[:count - 1] + [Named("get_weather_forecast", "Tomorrow's weather for a city.")]


def test_bm25_ranks_names_and_descriptions_by_the_query_words():
    docs = [_words("create_issue Create a GitHub issue."), _words("getWeatherForecast Weather."),
            _words("list_issues List the issues of a repository.")]
    ranking = BM25(docs)
    assert ranking.top(_words("weather forecast"), 2) == [1]
    assert ranking.top(_words("issues"), 5) == [2]  # a word is a word: "issue" is another
    assert _words("getWeatherForecast HTTPServer_v2") == ["get", "weather", "forecast", "http",
                                                          "server", "v", "2"]
    assert BM25([]).top(["x"], 3) == []


def test_anthropic_sends_every_tool_deferred_beside_its_search_tool_and_the_list_never_changes(
        server):
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25",
              "input": {"query": "weather"}}
    found = {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "get_weather_forecast"}]}}
    server.queue("/v1/messages", Reply(chunks=anthropic_stream(
        (), server_blocks=[search, found],
        tool_calls=[("toolu_1", "get_weather_forecast", '{"id": "Brest"}')])),
        Reply(chunks=anthropic_stream(["Rain."])))
    agent = Agent(anthropic.Backend(KEY, base_url=server.url), "s", tools=many(),
                  tool_search=ToolSearch(defer_over=30, keep=("get_issue",)))
    result = agent.run([user_text("Weather in Brest tomorrow?")])
    assert result.text == "Rain."
    first, second = (r.json() for r in server.requests)
    tools = first["tools"]
    assert len(tools) == 41 and tools[-1]["type"] == "tool_search_tool_bm25_20251119"
    assert tools[-1]["name"] == "tool_search_tool_bm25"
    deferred = [t["name"] for t in tools if t.get("defer_loading")]
    assert len(deferred) == 39 and "get_issue" not in deferred
    assert "advanced-tool-use-2025-11-20" in server.requests[0].headers["anthropic-beta"]
    assert second["tools"] == first["tools"]  # the cached prefix of tools holds
    ran = [p for m in result.messages for p in m.parts if isinstance(p, ToolResult)]
    assert [r.result for r in ran] == ["get_weather_forecast ran"]


def local_turns():
    return [
        Reply(chunks=openrouter_stream((), tool_calls=[
            ("call_1", SEARCH_TOOL, '{"query": "weather forecast"}')])),
        Reply(chunks=openrouter_stream((), tool_calls=[
            ("call_2", "get_weather_forecast", '{"id": "Brest"}')])),
        Reply(chunks=openrouter_stream(["Rain."])),
    ]


def test_a_chat_backend_searches_locally_and_a_loaded_tool_joins_the_end_of_the_list(server):
    server.queue("/v1/chat/completions", *local_turns())
    agent = Agent(chat.Backend(base_url=server.url + "/v1", model="m", api_key=KEY), "s",
                  tools=many(), tool_search=ToolSearch(max_results=1))
    result = agent.run([user_text("Weather in Brest tomorrow?")])
    assert result.text == "Rain."
    names = [[t["function"]["name"] for t in r.json()["tools"]] for r in server.requests]
    assert names[0] == [SEARCH_TOOL]
    assert names[1] == [SEARCH_TOOL, "get_weather_forecast"]
    assert names[2] == names[1]
    searched = next(p for m in result.messages for p in m.parts
                    if isinstance(p, ToolResult) and p.name == SEARCH_TOOL)
    assert json.loads(searched.result)["loaded"] == ["get_weather_forecast"]
    sent = server.requests[0].json()["tools"][0]["function"]
    assert "40 tools" in sent["description"] and sent["parameters"]["required"] == ["query"]


def test_a_loaded_tool_goes_after_every_tool_sent_before_it_whatever_its_name(server):
    tools = many(35) + [Named("aaa_first", "Always there.")]
    server.queue("/v1/chat/completions", *local_turns())
    agent = Agent(chat.Backend(base_url=server.url + "/v1", model="m", api_key=KEY), "s",
                  tools=tools, tool_search=ToolSearch(keep=("aaa_first", "zzz_absent")))
    agent.run([user_text("Weather?")])
    second = [t["function"]["name"] for t in server.requests[1].json()["tools"]]
    assert second[:2] == ["aaa_first", SEARCH_TOOL]
    assert second[2:][0] == "get_weather_forecast"


def test_openai_searches_natively_from_gpt_5_4_and_locally_before(server):
    def done():
        return Reply(chunks=[sse_event({"type": "response.completed", "response": {
            "id": "r", "status": "completed", "output": [], "usage": {
                "input_tokens": 1, "output_tokens": 1}}})])
    server.queue("/v1/responses", done(), done())
    for model in ("gpt-5.5", "gpt-5-mini"):
        backend = openai.Backend(api_key=KEY, model=model, base_url=server.url + "/v1")
        Agent(backend, "s", tools=many(), tool_search=ToolSearch()).run([user_text("hi")])
    native, local = (r.json()["tools"] for r in server.requests)
    assert [t for t in native if t["type"] != "function"] == [{"type": "tool_search"}]
    assert sum(t.get("defer_loading") is True for t in native) == 40
    assert [t["name"] for t in local] == [SEARCH_TOOL]


def test_nothing_is_deferred_at_or_under_the_threshold_but_a_tool_that_asks():
    backend = chat.Backend(base_url="http://127.0.0.1:9/v1", model="m", api_key=KEY)
    agent = Agent(backend, "s", tools=many(30), tool_search=ToolSearch(defer_over=30))
    assert len(agent.request([user_text("q")]).tools) == 30

    @nacelle.tool(defer=True)
    def rarely(x: int) -> str:
        """Seldom needed."""
        return str(x)

    agent = Agent(backend, "s", tools=many(3) + [rarely])
    assert isinstance(agent.tool_search, ToolSearch)  # a deferred tool needs a search
    assert [t.name for t in agent.request([user_text("q")]).tools] == [
        "create_issue", "get_issue", "get_weather_forecast", SEARCH_TOOL]
    assert nacelle.tool(defer=True, name="x")(lambda: "x").defer is True


def test_a_resumed_conversation_loads_again_what_its_searches_loaded():
    backend = chat.Backend(base_url="http://127.0.0.1:9/v1", model="m", api_key=KEY)
    agent = Agent(backend, "s", tools=many(), tool_search=ToolSearch())
    earlier = [user_text("q"), Message(Role.USER, (ToolResult(
        "call_1", SEARCH_TOOL, json.dumps({"loaded": ["delete_label"], "tools": []})),))]
    names = [t.name for t in agent.request(earlier).tools]
    assert names == [SEARCH_TOOL, "delete_label"]


def test_tool_search_settings_are_checked():
    for bad in (dict(defer_over=-1), dict(max_results=0), dict(variant="fuzzy"),
                dict(keep="one")):
        with pytest.raises(ConfigError):
            ToolSearch(**bad)
    backend = chat.Backend(base_url="http://127.0.0.1:9/v1", model="m", api_key=KEY)
    with pytest.raises(ConfigError, match="tool_search"):
        Agent(backend, "s", tool_search=30)  # type: ignore[arg-type]


def test_a_deferred_or_loaded_tool_copies_and_pickles_as_its_tool_does():
    import copy
    import pickle

    from nacelle.tool_search import _Deferred, _Loaded

    @nacelle.tool
    def plain(x: int) -> str:
        """Plain."""
        return str(x)

    for wrapped in (_Deferred(many(1)[0]), _Loaded(many(1)[0], 1)):
        assert copy.copy(wrapped).name == "get_weather_forecast"
        assert pickle.loads(pickle.dumps(wrapped)).name == "get_weather_forecast"
    assert _Loaded(plain, 2).run({"x": 3}, None) == "3"


def test_anthropic_defers_a_server_side_mcp_toolset_of_a_run_that_searches():
    from nacelle.backends.anthropic.wire import to_wire
    server = nacelle.MCPServer("docs", "https://mcp.example.org/mcp", allowed_tools=["read"])
    agent = Agent(anthropic.Backend(KEY), "s", tools=many(3), mcp=[server],
                  tool_search=ToolSearch())
    request = agent.request([user_text("q")])
    tools = to_wire(request, request.messages)["tools"]
    assert [t.get("defer_loading") for t in tools[:3]] == [None, None, None]  # 3 <= 30
    assert tools[3]["type"] == "tool_search_tool_bm25_20251119"
    assert tools[4]["default_config"] == {"enabled": False, "defer_loading": True}
    assert tools[4]["configs"] == {"read": {"enabled": True}}
    plain = Agent(anthropic.Backend(KEY), "s", tools=many(3), mcp=[server])
    request = plain.request([user_text("q")])
    assert "defer_loading" not in to_wire(request, request.messages)["tools"][-1]["default_config"]
