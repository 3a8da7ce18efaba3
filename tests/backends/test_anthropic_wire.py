"""to_wire, count_tokens_body and betas: the Anthropic request body, on plain values."""

import base64
import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict

import pytest

from nacelle.backend import CallProfile, Effort, MCPServer, Request, Thinking
from nacelle.backends.anthropic.wire import (
    MCP_BETA, betas, count_tokens_body, to_wire,
)
from nacelle.errors import ConfigError
from nacelle.events import Stop
from nacelle.messages import (
    Document, Finish, Image, Message, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult,
    user_text,
)

CACHE = {"type": "ephemeral"}


@dataclass
class FakeTool:
    name: str
    description: str = ""
    schema: Dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def run(self, input, ctx):  # pragma: no cover - never run here
        return ""


WEATHER = FakeTool(
    "get_weather", "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ALPHA = FakeTool("alpha", "First by name.")


def assistant(*parts):
    return Message(Role.ASSISTANT, parts)


def user(*parts):
    return Message(Role.USER, parts)


def cache_marks(body):
    """Every block carrying cache_control, as (where, block) pairs in body order."""
    found = []
    for block in body.get("tools", []):
        if "cache_control" in block:
            found.append(("tools", block))
    for block in body.get("system", []):
        if "cache_control" in block:
            found.append(("system", block))
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(message["content"]):
            if "cache_control" in block:
                found.append((f"messages[{i}].content[{j}]", block))
    return found


# -- golden bodies ----------------------------------------------------------------------

def test_a_tool_round_trip_makes_the_golden_body():
    request = Request("Be brief.", tools=(WEATHER, ALPHA), max_tokens=1000)
    conversation = [
        user_text("Weather in Paris?"),
        assistant(
            Text("Checking."),
            ToolCall("toolu_1", "get_weather", '{"city": "Paris"}'),
            Finish(Stop.TOOLS),
        ),
        user(ToolResult("toolu_1", "get_weather", "21C, sunny")),
    ]
    assert to_wire(request, conversation, model="claude-test") == {
        "model": "claude-test",
        "max_tokens": 1000,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": CACHE}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Weather in Paris?", "cache_control": CACHE}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                 "input": {"city": "Paris"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21C, sunny",
                 "is_error": False, "cache_control": CACHE},
            ]},
        ],
        "tools": [
            {"name": "alpha", "description": "First by name.",
             "input_schema": {"type": "object", "properties": {}},
             "eager_input_streaming": True},
            {"name": "get_weather", "description": "Weather for a city.",
             "input_schema": WEATHER.schema, "eager_input_streaming": True,
             "cache_control": CACHE},
        ],
        "thinking": {"type": "adaptive"},
        "stream": True,
    }


def test_thinking_is_replayed_byte_for_byte_and_in_order_with_its_signature():
    redacted = json.dumps({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"})
    conversation = [
        user_text("Sum 2 and 2 with the tool."),
        assistant(
            Reasoning("I should call add.", "EqQBCkgIARABGAIiQL", "anthropic"),
            Reasoning("", redacted, "anthropic"),
            Reasoning("", "Ek8KAw", "anthropic"),
            ToolCall("toolu_9", "add", '{"a": 2, "b": 2}'),
        ),
        user(ToolResult("toolu_9", "add", "4")),
    ]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I should call add.", "signature": "EqQBCkgIARABGAIiQL"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "thinking", "thinking": "", "signature": "Ek8KAw"},
        {"type": "tool_use", "id": "toolu_9", "name": "add", "input": {"a": 2, "b": 2}},
    ]}


def test_reasoning_state_nested_five_thousand_deep_goes_as_a_signature_not_a_crash():
    state = '{"type": "redacted_thinking", "data": ' + "[" * 5000 + "]" * 5000 + "}"
    conversation = [user_text("hi"), assistant(Reasoning("t", state, "anthropic"), Text("ok"))]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"][1]["content"][0] == {"type": "thinking", "thinking": "t",
                                                 "signature": state}


def test_reasoning_from_another_protocol_is_dropped():
    conversation = [
        user_text("hi"),
        assistant(Reasoning("thought", "gAAAA-encrypted", "openrouter"), Text("hello")),
        user_text("again"),
    ]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "hello"}]


def test_images_are_sent_as_base64_sources():
    conversation = [user(Text("What is this?"), Image("image/png", "iVBORw0KGgo="))]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0KGgo="}, "cache_control": CACHE},
    ]}]


def test_mcp_servers_become_servers_toolsets_and_a_beta_header():
    request = Request(
        "sys",
        tools=(WEATHER,),
        mcp=(
            MCPServer("perception", "https://example.com/mcp", authorization_token="tok-1"),
            MCPServer("calendar", "https://cal.example.com/mcp",
                      allowed_tools=("list_events", "find_slot")),
        ),
    )
    body = to_wire(request, [user_text("hi")])
    assert body["mcp_servers"] == [
        {"type": "url", "url": "https://example.com/mcp", "name": "perception",
         "authorization_token": "tok-1"},
        {"type": "url", "url": "https://cal.example.com/mcp", "name": "calendar"},
    ]
    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather for a city.",
         "input_schema": WEATHER.schema, "eager_input_streaming": True},
        {"type": "mcp_toolset", "mcp_server_name": "perception"},
        {"type": "mcp_toolset", "mcp_server_name": "calendar",
         "default_config": {"enabled": False},
         "configs": {"list_events": {"enabled": True}, "find_slot": {"enabled": True}},
         "cache_control": CACHE},
    ]
    assert betas(request) == [MCP_BETA] == ["mcp-client-2025-11-20"]
    assert betas(Request("sys")) == []


def test_mcp_blocks_are_replayed_as_the_json_they_hold():
    use = {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "echo",
           "server_name": "perception", "input": {"z": 1, "a": 2}}
    result = {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": False,
              "content": [{"type": "text", "text": "Hello"}]}
    conversation = [
        user_text("echo"),
        assistant(ProviderBlock("anthropic", json.dumps(use)),
                  ProviderBlock("anthropic", json.dumps(result)), Text("Done.")),
        user_text("thanks"),
    ]
    body = to_wire(Request("sys", mcp=(MCPServer("perception", "https://x.example/mcp"),)),
                   conversation)
    assert body["messages"][1]["content"] == [use, result, {"type": "text", "text": "Done."}]
    assert list(body["messages"][1]["content"][0]["input"]) == ["z", "a"]


def test_provider_blocks_of_another_protocol_are_dropped():
    conversation = [user_text("hi"),
                    assistant(ProviderBlock("openrouter", '{"type": "x"}'), Text("ok")),
                    user_text("and?")]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "ok"}]


@pytest.mark.parametrize("data", ["not json", "[1, 2]", '{"no_type": 1}',
                                  '{"type": "x", "a": ' + "[" * 5000 + "]" * 5000 + "}"])
def test_a_broken_anthropic_provider_block_is_a_config_error(data):
    conversation = [user_text("hi"), assistant(ProviderBlock("anthropic", data))]
    with pytest.raises(ConfigError, match="ProviderBlock"):
        to_wire(Request("sys"), conversation)


# -- tools ------------------------------------------------------------------------------

def test_tools_are_sorted_by_name_whatever_order_they_were_given_in():
    tools = (FakeTool("zeta"), FakeTool("Beta"), FakeTool("alpha"), FakeTool("beta_2"))
    names = [t["name"] for t in to_wire(Request("sys", tools=tools), [user_text("x")])["tools"]]
    assert names == ["Beta", "alpha", "beta_2", "zeta"]


def test_a_tool_without_a_description_sends_none():
    body = to_wire(Request("sys", tools=(FakeTool("bare"),)), [user_text("x")])
    assert body["tools"] == [{"name": "bare", "input_schema": {"type": "object", "properties": {}},
                              "eager_input_streaming": True, "cache_control": CACHE}]


def test_every_local_tool_asks_for_its_input_streamed_as_written_and_no_beta_is_needed():
    # platform.claude.com/docs/en/agents-and-tools/tool-use/fine-grained-tool-streaming:
    # "set eager_input_streaming to true on any user-defined tool", no beta header.
    request = Request("sys", tools=(WEATHER, ALPHA), mcp=(MCPServer("m", "https://m.example/mcp"),))
    body = to_wire(request, [user_text("x")])
    assert [t.get("eager_input_streaming") for t in body["tools"]] == [True, True, None]
    assert count_tokens_body(request, [user_text("x")])["tools"] == body["tools"]
    assert betas(request) == ["mcp-client-2025-11-20"]
    assert betas(Request("sys", tools=(WEATHER,))) == []


def test_no_tools_key_without_tools_or_mcp():
    body = to_wire(Request("sys"), [user_text("x")])
    assert "tools" not in body and "mcp_servers" not in body


# -- messages ---------------------------------------------------------------------------

def test_tool_input_keeps_the_models_key_order():
    conversation = [user_text("x"),
                    assistant(ToolCall("t1", "f", '{"zebra": 1, "apple": {"y": 2, "b": 3}}')),
                    user(ToolResult("t1", "f", "ok"))]
    body = to_wire(Request("sys"), conversation)
    sent = body["messages"][1]["content"][0]["input"]
    assert json.dumps(sent) == '{"zebra": 1, "apple": {"y": 2, "b": 3}}'


@pytest.mark.parametrize("raw", ["", "   ", "{not json", "[1]", '"text"'])
def test_tool_input_that_is_not_a_json_object_is_replayed_as_an_empty_object(raw):
    conversation = [user_text("x"), assistant(ToolCall("t1", "f", raw)),
                    user(ToolResult("t1", "f", "invalid input", failed=True))]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"][1]["content"][0]["input"] == {}
    assert body["messages"][2]["content"][0]["is_error"] is True


def test_a_call_cut_off_mid_input_is_never_sent():
    conversation = [user_text("x"),
                    assistant(Text("Let me"), ToolCall("t1", "f", '{"a": "ha', finished=False),
                              Finish(Stop.MAX_TOKENS)),
                    user_text("go on")]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "Let me"}]


def test_tool_results_come_first_in_a_user_message_and_same_role_neighbours_merge():
    conversation = [
        user_text("x"),
        assistant(ToolCall("t1", "f", "{}")),
        assistant(ToolCall("t2", "g", "{}")),
        user(Text("also this"), ToolResult("t1", "f", "one")),
        user(ToolResult("t2", "g", "two")),
    ]
    body = to_wire(Request("sys"), conversation)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use", "tool_use"]
    assert [(b["type"], b.get("tool_use_id")) for b in body["messages"][2]["content"]] == [
        ("tool_result", "t1"), ("tool_result", "t2"), ("text", None)]


def test_empty_text_finish_parts_and_empty_messages_are_not_sent():
    conversation = [user(Text(""), Text("hi")), assistant(Finish(Stop.END)),
                    assistant(Text(""), Finish(Stop.END)), user_text("next")]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "hi"},
        {"type": "text", "text": "next", "cache_control": CACHE},
    ]}]


def test_an_empty_tool_result_is_sent_without_content():
    conversation = [user_text("x"), assistant(ToolCall("t1", "f", "{}")),
                    user(ToolResult("t1", "f", ""))]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result", "tool_use_id": "t1", "is_error": False, "cache_control": CACHE}


def test_a_paused_turn_is_sent_back_as_the_last_message():
    block = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
             "input": {"query": "nacelle"}}
    conversation = [user_text("search"),
                    assistant(Text("Searching."), ProviderBlock("anthropic", json.dumps(block)))]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"][-1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Searching.", "cache_control": CACHE}, block]}


def test_nothing_passed_in_is_mutated():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    tool = FakeTool("search", "Search.", schema)
    conversation = [user_text("x"), assistant(ToolCall("t1", "search", '{"q": "a"}')),
                    user(ToolResult("t1", "search", "r"))]
    before_schema, before_conv = copy.deepcopy(schema), list(conversation)
    body = to_wire(Request("sys", tools=(tool,)), conversation)
    body["tools"][0]["input_schema"]  # shared on purpose, read only
    assert schema == before_schema and "cache_control" not in schema
    assert conversation == before_conv
    # A second body is identical: no state leaks between calls.
    assert to_wire(Request("sys", tools=(tool,)), conversation) == body


def test_an_empty_system_prompt_sends_no_system_block():
    assert "system" not in to_wire(Request(""), [user_text("x")])


# -- cache breakpoints ------------------------------------------------------------------

def long_run(turns):
    conversation = [user_text("start")]
    for n in range(turns):
        conversation.append(assistant(
            Reasoning(f"thinking {n}", f"sig{n}", "anthropic"),
            *(ToolCall(f"t{n}_{k}", "f", '{"k": %d}' % k) for k in range(12)),
        ))
        conversation.append(user(*(ToolResult(f"t{n}_{k}", "f", str(k)) for k in range(12))))
    return conversation


@pytest.mark.parametrize("turns", [0, 1, 2, 9])
def test_cache_breakpoints_never_exceed_four(turns):
    body = to_wire(Request("sys", tools=(WEATHER, ALPHA),
                           mcp=(MCPServer("m", "https://m.example/mcp"),)), long_run(turns))
    assert 1 <= len(cache_marks(body)) <= 4


def test_cache_breakpoints_sit_on_last_tool_system_newest_block_and_previous_request_end():
    conversation = long_run(2)
    body = to_wire(Request("sys", tools=(WEATHER, ALPHA)), conversation)
    where = [w for w, _ in cache_marks(body)]
    # The previous request ended with messages[2]; this one ends with messages[4].
    assert where == ["tools", "system", "messages[2].content[11]", "messages[4].content[11]"]
    assert body["tools"][-1]["name"] == "get_weather"
    # 25 blocks were added since the previous request's end: more than the API looks back.
    added = sum(len(m["content"]) for m in body["messages"][3:])
    assert added > 20


def test_the_first_request_has_three_breakpoints():
    body = to_wire(Request("sys", tools=(WEATHER,)), [user_text("hi")])
    assert [w for w, _ in cache_marks(body)] == ["tools", "system", "messages[0].content[0]"]


def test_thinking_blocks_never_carry_a_breakpoint():
    conversation = [user_text("x"), assistant(Text("a"), Reasoning("t", "sig", "anthropic"))]
    body = to_wire(Request("sys"), conversation)
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "a", "cache_control": CACHE},
        {"type": "thinking", "thinking": "t", "signature": "sig"},
    ]


# -- thinking ---------------------------------------------------------------------------

@pytest.mark.parametrize("thinking, expected", [
    (Thinking(), {"thinking": {"type": "adaptive"}}),
    (Thinking(show=True), {"thinking": {"type": "adaptive", "display": "summarized"}}),
    (Thinking(effort=Effort.NONE), {"thinking": {"type": "disabled"}}),
    (Thinking(effort=Effort.NONE, show=True), {"thinking": {"type": "disabled"}}),
    (Thinking(effort=Effort.MINIMAL),
     {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}}),
    (Thinking(effort=Effort.LOW),
     {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}}),
    (Thinking(effort=Effort.MEDIUM),
     {"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}}),
    (Thinking(effort=Effort.HIGH, show=True),
     {"thinking": {"type": "adaptive", "display": "summarized"},
      "output_config": {"effort": "high"}}),
    (Thinking(effort=Effort.XHIGH),
     {"thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"}}),
    (Thinking(effort=Effort.MAX),
     {"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}}),
    (Thinking(budget=1024), {"thinking": {"type": "enabled", "budget_tokens": 1024}}),
    (Thinking(budget=4000, show=True),
     {"thinking": {"type": "enabled", "budget_tokens": 4000, "display": "summarized"}}),
])
def test_thinking_settings_map_to_the_wire(thinking, expected):
    body = to_wire(Request("sys", thinking=thinking), [user_text("x")])
    assert {k: body[k] for k in ("thinking", "output_config") if k in body} == expected


def test_a_budget_below_1024_is_refused():
    with pytest.raises(ConfigError, match="at least 1024"):
        to_wire(Request("sys", thinking=Thinking(budget=1023)), [user_text("x")])


def test_a_budget_with_effort_none_is_refused():
    with pytest.raises(ConfigError, match="Effort.NONE"):
        to_wire(Request("sys", thinking=Thinking(effort=Effort.NONE, budget=2000)),
                [user_text("x")])


# -- count_tokens -----------------------------------------------------------------------

def test_the_count_tokens_body_is_the_message_body_without_max_tokens_and_stream():
    request = Request("sys", tools=(WEATHER,), mcp=(MCPServer("m", "https://m.example/mcp"),),
                      thinking=Thinking(effort=Effort.LOW), max_tokens=500)
    conversation = [user_text("count me")]
    full = to_wire(request, conversation, model="claude-x")
    counted = count_tokens_body(request, conversation, model="claude-x")
    assert "max_tokens" not in counted and "stream" not in counted
    full.pop("max_tokens"), full.pop("stream")
    assert counted == full


# -- call profiles ------------------------------------------------------------------------

def profiled(profile):
    conversation = [user_text("Weather?"), Message(Role.ASSISTANT, (
        ToolCall("toolu_1", "get_weather", '{"city": "Paris"}'),)),
        user(ToolResult("toolu_1", "get_weather", "15°C")), user_text("And Rome?")]
    return Request("Be brief.", tools=(WEATHER,), profile=profile), conversation


def test_an_agent_turn_marks_tools_system_and_the_conversation():
    request, conversation = profiled(CallProfile.AGENT_TURN)
    places = [where for where, _ in cache_marks(to_wire(request, conversation))]
    assert places[:2] == ["tools", "system"] and len(places) >= 3


def test_a_compaction_request_reads_the_cached_system_and_tools_and_marks_no_message():
    request, conversation = profiled(CallProfile.COMPACTION)
    places = [where for where, _ in cache_marks(to_wire(request, conversation))]
    assert places == ["tools", "system"]


@pytest.mark.parametrize("profile", [CallProfile.TITLE, CallProfile.EVALUATION, CallProfile.PROBE])
def test_one_shot_profiles_write_no_cache(profile):
    request, conversation = profiled(profile)
    body = to_wire(request, conversation)
    assert cache_marks(body) == [] and "cache_control" not in json.dumps(body)


@pytest.mark.parametrize("profile", list(CallProfile))
def test_every_profiles_encoded_body_is_its_to_wire(profile):
    from nacelle.backends._wire_cache import WireCache
    from nacelle.backends.anthropic.wire import encode_body

    request, conversation = profiled(profile)
    encoded = encode_body(request, conversation, cache=WireCache())
    assert json.loads(bytes(encoded)) == to_wire(request, conversation)



@pytest.mark.parametrize("newest", [
    ToolResult("t1", "f", "caf\u00e9 " * 20_000),
    ToolResult("t1", "f", 'a "cache_control": {"type": "ephemeral"} in the text'),
    Text("plain words"),
    ToolCall("t2", "f", '{"cache_control": 1, "nested": {"cache_control": 2}}'),
], ids=["long result", "key in a string", "text", "key in an input"])
def test_a_marked_block_is_encoded_as_its_dict_would_be_key_for_key(newest):
    # The breakpoint's key is appended to the block's encoding where the block has
    # none (wire._marked): the bytes must be those of encoding the marked dict.
    from nacelle.backends._wire_cache import WireCache, dumps
    from nacelle.backends.anthropic.wire import encode_body

    request = Request("sys", tools=(WEATHER,))
    role = Role.ASSISTANT if isinstance(newest, (Text, ToolCall)) else Role.USER
    conversation = [user_text("go"), assistant(ToolCall("t1", "f", "{}")), Message(role, (newest,))]
    if role is Role.ASSISTANT:
        conversation = [user_text("go"), Message(role, (newest,))]
    cache = WireCache()
    for _ in range(2):  # encoded afresh, then from the cache's blocks
        assert bytes(encode_body(request, conversation, cache=cache)) == dumps(
            to_wire(request, conversation))


# -- media: images and documents, in messages and in tool results --------------------

DATA = Path(__file__).resolve().parent.parent / "data" / "anthropic"
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
                       "DwAChwGA60e6kgAAAABJRU5ErkJggg==")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def screenshot_round():
    """A screenshot call answered with text, a PNG, a PDF and a plain-text document."""
    result = ToolResult("call_shot_0", "screenshot", "The screen.", content=(
        Text("The screen."), Image.from_bytes(PNG), Document.from_bytes(PDF, title="page"),
        Document.from_bytes(b"Notes: all green.\n", title="notes.txt")))
    return (user_text("What is on screen?"),
            assistant(ToolCall("call_shot_0", "screenshot", "{}")), user(result))


def test_a_tools_image_and_documents_go_inside_its_tool_result_as_blocks():
    # The documented shape, saved with its sources in tests/data/anthropic/.
    documented = json.loads((DATA / "tool_result_media.json").read_text(encoding="utf-8"))
    body = to_wire(Request("sys"), screenshot_round())
    last = copy.deepcopy(body["messages"][-1])
    del last["content"][0]["cache_control"]
    assert last == documented["request"]


def test_a_tool_result_without_media_still_sends_its_text_as_a_string():
    conversation = (user_text("Weather?"), assistant(ToolCall("t1", "weather", "{}")),
                    user(ToolResult("t1", "weather", "15°C")))
    [block] = to_wire(Request("sys"), conversation)["messages"][-1]["content"]
    assert block["content"] == "15°C"


def test_a_users_pdf_and_text_document_are_document_blocks():
    conversation = [user(Text("Summarise these."), Document.from_bytes(PDF, title="Q3"),
                         Document.from_bytes(b"plain words"))]
    content = to_wire(Request("sys"), conversation)["messages"][0]["content"]
    assert content[1] == {"type": "document", "title": "Q3", "source": {
        "type": "base64", "media_type": "application/pdf",
        "data": base64.b64encode(PDF).decode()}}
    assert content[2]["source"] == {"type": "text", "media_type": "text/plain",
                                    "data": "plain words"}
    assert "title" not in content[2]


def test_a_text_document_that_is_not_base64_of_utf8_is_a_config_error():
    with pytest.raises(ConfigError, match="text/plain Document"):
        to_wire(Request("sys"), [user(Document("text/plain", "//79"))])


def test_the_encoded_body_holds_a_results_media_and_changes_with_them():
    from nacelle.backends._wire_cache import WireCache
    from nacelle.backends.anthropic.wire import encode_body

    request = Request("sys")
    cache = WireCache()
    conversation = screenshot_round()
    encoded = encode_body(request, conversation, cache=cache)
    assert json.loads(bytes(encoded)) == to_wire(request, conversation)
    other = ToolResult("call_shot_0", "screenshot", "The screen.", content=(
        Text("The screen."), Image("image/png", "AAAA")))
    changed = conversation[:2] + (user(other),)
    again = encode_body(request, changed, cache=cache)
    assert json.loads(bytes(again)) == to_wire(request, changed)
    assert b"AAAA" in bytes(again) and base64.b64encode(PNG) not in bytes(again)


def big_image():
    """An Image whose base64 is one character over Anthropic's 5 MB per-image limit
    (built directly: no decoding is needed to judge its size)."""
    return Image("image/png", "A" * (5 * 1024 * 1024 + 1))


def test_a_tools_image_over_the_per_image_limit_is_a_note_and_the_rest_is_sent():
    result = ToolResult("call_big", "screenshot", "Whole page.", content=(
        Text("Whole page."), big_image(), Image.from_bytes(PNG)))
    conversation = (user_text("Look."), assistant(ToolCall("call_big", "screenshot", "{}")),
                    user(result))
    [block] = to_wire(Request("sys"), conversation)["messages"][-1]["content"]
    kinds = [b["type"] for b in block["content"]]
    assert kinds == ["text", "text", "image"]
    assert "not sent" in block["content"][1]["text"] and "5,242,880" in block["content"][1]["text"]
    assert "A" * 1000 not in json.dumps(block)


def test_a_users_image_over_the_per_image_limit_is_refused_before_any_request():
    with pytest.raises(ConfigError, match="over the 5,242,880 Anthropic takes per image"):
        to_wire(Request("sys"), [user(Text("Look."), big_image())])
