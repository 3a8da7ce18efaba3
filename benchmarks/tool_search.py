"""Row 14: tool search — what sixty MCP-style tools cost the first request, and whether
the prompt cache's prefix survives a run that searches and loads tools.

Sixty tools shaped like a few MCP servers' (GitHub, Slack, a tracker, a database, a
file store, a calendar: a sentence of description, four or five documented
parameters). Input tokens of the first request are counted by nacelle's estimator
(``nacelle.estimate_tokens``: tools through their JSON) on the request each Agent
builds, without a network:

- without tool search: every tool is read;
- with ``ToolSearch()`` on Anthropic: the tools sent with ``defer_loading`` are not
  read by the model until found, so what it reads is the tools kept plus the search
  tool (the provider's own, counted as one small tool here);
- with ``ToolSearch()`` on a Chat Completions server: the local ``search_tools`` tool.

Row 14a is the ratio without ÷ with (Anthropic); 14b the local search's.

Row 14c runs three turns against a loopback FakeServer on each wire (Anthropic:
search and call the tool found in one reply, call it again, answer; Chat
Completions: search_tools, call the tool loaded, answer) and compares consecutive request bodies the way a prompt
cache reads them (tools, then system, then messages: the order Anthropic caches a
prefix in; https://platform.claude.com/docs/en/build-with-claude/prompt-caching):
the shared prefix of each body with the one before, in estimated tokens (characters
over four), and whether it covers the whole earlier tool list. The ratio is the
share of turns whose tools prefix held (target 1: every one). With the native search
the tools never change, so each body extends the one before whole; with the local
one a tool loaded joins the end of the list, so the tools before it still read from
the cache, but the messages after the list are written again on the turn it joins.

Alone::

    python3 benchmarks/tool_search.py

Benchmark-only: imports the standard library, nacelle and ``measure``.
"""

import json
import os
import sys
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from measure import Row  # noqa: E402

KEY = "sk-benchmark-0123456789"

SERVERS = {
    "github": ["create_issue", "get_issue", "list_issues", "update_issue", "close_issue",
               "create_pull_request", "merge_pull_request", "list_pull_requests",
               "get_file_contents", "search_code", "create_branch", "list_commits"],
    "slack": ["post_message", "list_channels", "get_channel_history", "add_reaction",
              "reply_to_thread", "get_user_profile", "search_messages", "upload_file",
              "set_channel_topic", "list_users"],
    "tracker": ["create_ticket", "get_ticket", "transition_ticket", "assign_ticket",
                "add_ticket_comment", "list_sprints", "get_sprint_report", "search_tickets",
                "link_tickets", "log_work"],
    "database": ["run_query", "list_tables", "describe_table", "explain_query",
                 "list_indexes", "get_table_stats", "export_query_csv", "list_schemas",
                 "get_slow_queries", "kill_query"],
    "files": ["read_document", "write_document", "list_folder", "move_document",
              "share_document", "get_document_history", "search_documents",
              "delete_document", "create_folder"],
    "calendar": ["get_weather_forecast", "list_events", "create_event", "update_event",
                 "delete_event", "find_free_time", "respond_to_invite", "list_calendars",
                 "get_event"],
}


class McpStyleTool:
    """A tool as an MCP server lists it: name, description, a documented schema."""

    def __init__(self, server: str, name: str) -> None:
        words = name.replace("_", " ")
        self.name = name
        self.description = (f"{words.capitalize()} on the {server} server. Use it when the "
                            f"user asks to {words}; returns JSON describing the result.")
        self.schema = {"type": "object", "properties": {
            "target": {"type": "string", "description": f"What to {words}: an id or a name."},
            "project": {"type": "string", "description": "The project, workspace or database."},
            "limit": {"type": "integer", "description": "At most this many items (1-100).",
                      "minimum": 1, "maximum": 100},
            "fields": {"type": "array", "items": {"type": "string"},
                       "description": "Fields to include; all when left out."},
            "dry_run": {"type": "boolean", "description": "Describe the change only."},
        }, "required": ["target"]}

    def run(self, input: Dict[str, Any], ctx: Any) -> str:
        return json.dumps({"ok": True, "tool": self.name})


def sixty() -> List[McpStyleTool]:
    tools = [McpStyleTool(server, name) for server, names in SERVERS.items() for name in names]
    assert len(tools) == 60
    return tools


def first_request_tokens() -> Dict[str, int]:
    """Estimated input tokens of the first request: every tool, Anthropic's native
    search and the local search."""
    from nacelle import Agent, ToolSearch, estimate_tokens, user_text
    from nacelle.backends import anthropic, chat

    messages = [user_text("Will it rain in Brest tomorrow?")]
    system = "You are a helpful assistant with access to the team's tools."
    out: Dict[str, int] = {}
    claude = anthropic.Backend(KEY, base_url="http://127.0.0.1:9")
    local = chat.Backend(base_url="http://127.0.0.1:9/v1", model="m", api_key=KEY)
    for label, backend, search in (("all", claude, None), ("native", claude, ToolSearch()),
                                   ("local", local, ToolSearch())):
        request = Agent(backend, system, tools=sixty(), tool_search=search).request(messages)
        read = [t for t in request.tools if getattr(t, "defer_loading", False) is not True]
        out[label] = estimate_tokens(messages, system, read)
    return out


def _prefix_text(body: Dict[str, Any], wire: str) -> Tuple[str, str]:
    """A body as a prompt cache reads it (tools, system, messages), without the cache
    markers, and its tools part alone."""
    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    tools = json.dumps(clean(body.get("tools", [])), sort_keys=False)
    rest = (json.dumps(clean(body.get("system", ""))) + json.dumps(clean(body["messages"])))
    return tools + rest, tools


def _shared(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def three_turns() -> Dict[str, List[Tuple[int, bool]]]:
    """Per wire, per turn after the first: (shared prefix tokens, tools prefix held)."""
    from nacelle import Agent, ToolSearch, user_text
    from nacelle.backends import anthropic, chat
    from nacelle.testing.server import FakeServer, Reply
    from nacelle.testing.wire import anthropic_stream, openrouter_stream

    found = {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "get_weather_forecast"}]}}
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25",
              "input": {"query": "weather forecast"}}
    out: Dict[str, List[Tuple[int, bool]]] = {}
    with FakeServer() as server:
        # Anthropic searches inside the turn: the tool found is called in the same reply.
        server.queue("/v1/messages",
                     Reply(chunks=anthropic_stream((), server_blocks=[search, found], tool_calls=[
                         ("toolu_1", "get_weather_forecast", '{"target": "Brest"}')])),
                     Reply(chunks=anthropic_stream((), tool_calls=[
                         ("toolu_2", "get_weather_forecast", '{"target": "Quimper"}')])),
                     Reply(chunks=anthropic_stream(["Rain."])))
        server.queue("/v1/chat/completions",
                     Reply(chunks=openrouter_stream((), tool_calls=[
                         ("call_1", "search_tools", '{"query": "weather forecast"}')])),
                     Reply(chunks=openrouter_stream((), tool_calls=[
                         ("call_2", "get_weather_forecast", '{"target": "Brest"}')])),
                     Reply(chunks=openrouter_stream(["Rain."])))
        runs = (("anthropic", anthropic.Backend(KEY, base_url=server.url), "/v1/messages"),
                ("chat", chat.Backend(base_url=server.url + "/v1", model="m", api_key=KEY),
                 "/v1/chat/completions"))
        for wire, backend, path in runs:
            agent = Agent(backend, "s", tools=sixty(), tool_search=ToolSearch(),
                          max_iterations=5)
            agent.run([user_text("Will it rain in Brest tomorrow?")])
            bodies = [_prefix_text(r.json(), wire) for r in server.requests if r.path == path]
            out[wire] = [(_shared(bodies[i - 1][0], bodies[i][0]) // 4,
                          bodies[i][1].startswith(bodies[i - 1][1][:-1]))
                         for i in range(1, len(bodies))]
    return out


def tool_search_rows() -> List[Row]:
    tokens = first_request_tokens()
    turns = three_turns()
    native = tokens["all"] / tokens["native"]
    local = tokens["all"] / tokens["local"]
    held = [ok for wire in turns.values() for _, ok in wire]
    share = sum(held) / len(held) if held else 0.0
    figures = [f"first request, 60 tools: {tokens['all']:,} tokens without tool search, "
               f"{tokens['native']:,} with Anthropic's, {tokens['local']:,} with search_tools "
               f"(nacelle.estimate_tokens)"]
    for wire, seen in turns.items():
        figures.append(f"{wire}: turns 2-3 share {', '.join(f'{n:,}' for n, _ in seen)} "
                       f"estimated tokens with the request before; tools prefix held: "
                       f"{', '.join('yes' if ok else 'NO' for _, ok in seen)}")
    return [
        Row("14a", "tool search (Anthropic): first-request tokens, all ÷ deferred", native,
            "≥ 5×", native >= 5, figures, label="tool search, Anthropic"),
        Row("14b", "tool search (local): first-request tokens, all ÷ deferred", local,
            "≥ 5×", local >= 5, [], label="tool search, local"),
        Row("14c", "tool search: turns whose tools prefix held", share, "= 1",
            share == 1.0, []),
    ]


def main() -> None:
    for row in tool_search_rows():
        ratio = "—" if row.ratio is None else f"{row.ratio:.2f}"
        print(f"{row.number}  {row.title}: {ratio} (target {row.target}: {row.verdict})")
        for line in row.figures:
            print(f"     {line}")


if __name__ == "__main__":
    main()
