"""to_wire: the exact request bodies the Chat Completions backends send, as golden dicts.

Most tests build OpenRouter's bodies (``openrouter.to_wire``); the tests at the end
build those of the other presets' dialects."""

import base64
import copy
import json
from pathlib import Path

import jsonschema
import pytest

import nacelle
from nacelle import (
    ConfigError, Document, Effort, Finish, Image, MCPServer, Message, ProviderBlock, Reasoning,
    Request, Role, Stop, Text, Thinking, ToolCall, ToolResult, Unsupported,
    assistant_text, user_text,
)
from nacelle.backends import chat
from nacelle.backends.chat import wire as chat_wire
from nacelle.backends.openrouter import DIALECT as OPENROUTER
from nacelle.backends.openrouter import to_wire

EPHEMERAL = {"type": "ephemeral"}

DETAILS = [
    {"type": "reasoning.text", "text": "Look up the weather.", "format": "anthropic-claude-v1",
     "index": 0, "signature": "EvsCsig=="},
    {"type": "reasoning.encrypted", "data": "gAAAAB…", "format": "openai-responses-v1",
     "index": 1},
]


class FakeTool:
    def __init__(self, name, description="", schema=None):
        self.name = name
        self.description = description
        self.schema = schema if schema is not None else {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        }

    def run(self, input, ctx):  # pragma: no cover - never run here
        return ""


def weather_turn():
    return Message(Role.ASSISTANT, (
        Reasoning("Look up the weather.", json.dumps(DETAILS), "openrouter"),
        ToolCall("toolu_1", "weather", '{"city": "Berlin"}'),
        ToolCall("toolu_2", "clock", ""),
        Finish(Stop.TOOLS),
    ))


def weather_results():
    return Message(Role.USER, (
        ToolResult("toolu_1", "weather", "15°C, cloudy"),
        ToolResult("toolu_2", "clock", "clock is broken", failed=True),
    ))


# The facts of OpenRouter's ChatRequest schema that these bodies rely on, copied
# from its OpenAPI document: message shapes per role, tool calls, tools, reasoning.
TEXT_PART = {"type": "object", "required": ["type", "text"],
             "properties": {"type": {"const": "text"}, "text": {"type": "string"},
                            "cache_control": {"type": "object", "required": ["type"],
                                              "properties": {"type": {"const": "ephemeral"}}}}}
IMAGE_PART = {"type": "object", "required": ["type", "image_url"],
              "properties": {"type": {"const": "image_url"},
                             "image_url": {"type": "object", "required": ["url"],
                                           "properties": {"url": {"type": "string"}}}}}
CONTENT = {"anyOf": [{"type": "string"},
                     {"type": "array", "items": {"anyOf": [TEXT_PART, IMAGE_PART]}}]}
CHAT_REQUEST = {
    "type": "object",
    "required": ["messages"],
    "properties": {
        "model": {"type": "string"},
        "stream": {"type": "boolean"},
        "max_tokens": {"type": "integer"},
        "parallel_tool_calls": {"type": "boolean"},
        "reasoning": {"type": "object", "properties": {"effort": {"enum": [
            "max", "xhigh", "high", "medium", "low", "minimal", "none"]}}},
        "provider": {"type": "object"},
        "messages": {"type": "array", "minItems": 1, "items": {"oneOf": [
            {"type": "object", "required": ["role", "content"], "properties": {
                "role": {"const": "system"},
                "content": {"anyOf": [{"type": "string"},
                                     {"type": "array", "items": TEXT_PART}]}}},
            {"type": "object", "required": ["role", "content"], "properties": {
                "role": {"const": "user"}, "content": CONTENT}},
            {"type": "object", "required": ["role", "content", "tool_call_id"], "properties": {
                "role": {"const": "tool"}, "content": CONTENT,
                "tool_call_id": {"type": "string"}}},
            {"type": "object", "required": ["role"], "properties": {
                "role": {"const": "assistant"},
                "content": {"anyOf": [{"type": "null"}, CONTENT]},
                "reasoning": {"type": ["string", "null"]},
                "reasoning_details": {"type": "array", "items": {
                    "type": "object", "required": ["type"]}},
                "tool_calls": {"type": "array", "items": {
                    "type": "object", "required": ["id", "type", "function"], "properties": {
                        "id": {"type": "string"}, "type": {"const": "function"},
                        "function": {"type": "object", "required": ["name", "arguments"],
                                     "properties": {"name": {"type": "string"},
                                                    "arguments": {"type": "string"}}}}}}}},
        ]}},
        "tools": {"type": "array", "items": {
            "type": "object", "required": ["type", "function"], "properties": {
                "type": {"const": "function"},
                "function": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                    "description": {"type": "string"},
                    "parameters": {"type": "object"}}}}}},
    },
}


def assert_valid(body):
    jsonschema.validate(body, CHAT_REQUEST)
    return body


def test_a_first_request_is_system_then_user_with_stream_and_max_tokens():
    body = to_wire(Request("Be brief."), [user_text("Hi")], model="openai/gpt-5")
    assert assert_valid(body) == {
        "model": "openai/gpt-5",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "stream": True,
        "max_tokens": 32000,
    }


def test_a_tool_loop_turn_echoes_calls_reasoning_details_and_results_with_sorted_tools():
    request = Request("Sys.", tools=(FakeTool("weather", "Get weather"), FakeTool("clock")),
                      max_tokens=4096)
    conversation = [user_text("Weather in Berlin?"), weather_turn(), weather_results()]
    body = to_wire(request, conversation, model="google/gemini-3-pro")
    assert assert_valid(body) == {
        "model": "google/gemini-3-pro",
        "messages": [
            {"role": "system", "content": "Sys."},
            {"role": "user", "content": "Weather in Berlin?"},
            {"role": "assistant", "content": None,
             "tool_calls": [
                 {"id": "toolu_1", "type": "function",
                  "function": {"name": "weather", "arguments": '{"city": "Berlin"}'}},
                 {"id": "toolu_2", "type": "function",
                  "function": {"name": "clock", "arguments": "{}"}},
             ],
             "reasoning_details": DETAILS},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "15°C, cloudy"},
            {"role": "tool", "tool_call_id": "toolu_2", "content": "clock is broken"},
        ],
        "stream": True,
        "max_tokens": 4096,
        "tools": [
            {"type": "function", "function": {"name": "clock",
                                              "parameters": FakeTool("x").schema}},
            {"type": "function", "function": {"name": "weather", "description": "Get weather",
                                              "parameters": FakeTool("x").schema}},
        ],
        "parallel_tool_calls": True,
    }


def test_tools_travel_on_every_request_including_the_one_carrying_results():
    request = Request("Sys.", tools=(FakeTool("weather"),))
    first = to_wire(request, [user_text("Q")], model="m/x")
    second = to_wire(request, [user_text("Q"), weather_turn(), weather_results()], model="m/x")
    assert first["tools"] == second["tools"]
    assert first["parallel_tool_calls"] is second["parallel_tool_calls"] is True


def test_no_deprecated_usage_options_and_no_tool_fields_without_tools():
    body = to_wire(Request("Sys."), [user_text("Q")], model="m/x")
    for key in ("usage", "stream_options", "include_reasoning", "tools",
                "parallel_tool_calls", "tool_choice"):
        assert key not in body


def test_assistant_text_with_calls_is_sent_as_content():
    turn = Message(Role.ASSISTANT, (Text("Checking."), ToolCall("c1", "weather", "{}")))
    body = to_wire(Request("S"), [user_text("Q"), turn], model="m/x")
    assert body["messages"][2] == {
        "role": "assistant", "content": "Checking.",
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "weather", "arguments": "{}"}}],
    }


def test_tool_arguments_travel_byte_for_byte_and_blank_ones_become_empty_object():
    odd = '{ "city" :"Zürich",\n  "x": 1.50 }'
    turn = Message(Role.ASSISTANT, (ToolCall("c1", "a", odd), ToolCall("c2", "b", "  \n")))
    calls = to_wire(Request("S"), [user_text("Q"), turn], model="m/x")["messages"][2]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [odd, "{}"]


def test_a_call_cut_off_mid_input_and_its_result_are_never_sent():
    turn = Message(Role.ASSISTANT, (
        ToolCall("c1", "a", '{"q": 1}'), ToolCall("c2", "b", '{"q": "unfin', finished=False),
        Finish(Stop.MAX_TOKENS),
    ))
    results = Message(Role.USER, (ToolResult("c1", "a", "not run", failed=True),
                                  ToolResult("c2", "b", "not run", failed=True)))
    body = to_wire(Request("S"), [user_text("Q"), turn, results], model="m/x")
    assert body["messages"][2]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "a", "arguments": '{"q": 1}'}}]
    assert body["messages"][3:] == [{"role": "tool", "tool_call_id": "c1", "content": "not run"}]


def test_an_assistant_message_with_nothing_to_send_is_omitted():
    cut = Message(Role.ASSISTANT, (Reasoning("hmm", "[]", "openrouter"),
                                   ToolCall("c1", "a", "{", finished=False),
                                   Finish(Stop.MAX_TOKENS)))
    body = to_wire(Request("S"), [user_text("Q"), cut, user_text("Go on")], model="m/x")
    assert [m["role"] for m in body["messages"]] == ["system", "user", "user"]


def test_images_become_data_urls_and_mixed_parts_become_a_content_array():
    message = Message(Role.USER, (Text("What is this?"), Image("image/png", "iVBORw0KGgo=")))
    body = to_wire(Request("S"), [message], model="m/x")
    assert assert_valid(body)["messages"][1] == {"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]}


def test_text_after_tool_results_follows_the_tool_messages():
    message = Message(Role.USER, (ToolResult("toolu_1", "weather", "sunny"),
                                  Text("Also, hurry.")))
    body = to_wire(Request("S"), [user_text("Q"), weather_turn(), message], model="m/x")
    assert body["messages"][3:] == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
        {"role": "user", "content": "Also, hurry."},
    ]


def test_reasoning_and_blocks_of_another_protocol_are_dropped():
    turn = Message(Role.ASSISTANT, (
        Reasoning("secret", "sig", "anthropic"),
        ProviderBlock("anthropic", '{"type":"server_tool_use"}'),
        Text("Answer."),
    ))
    body = to_wire(Request("S"), [user_text("Q"), turn], model="m/x")
    assert body["messages"][2] == {"role": "assistant", "content": "Answer."}


def test_plain_reasoning_without_details_is_echoed_as_reasoning():
    turn = Message(Role.ASSISTANT, (Reasoning("First, think.", "", "openrouter"),
                                    ToolCall("c1", "a", "{}")))
    body = to_wire(Request("S"), [user_text("Q"), turn], model="deepseek/deepseek-v4")
    assert body["messages"][2]["reasoning"] == "First, think."
    assert "reasoning_details" not in body["messages"][2]


def test_an_empty_reasoning_details_list_is_kept():
    turn = Message(Role.ASSISTANT, (Reasoning("", "[]", "openrouter"), ToolCall("c1", "a", "{}")))
    body = to_wire(Request("S"), [user_text("Q"), turn], model="m/x")
    assert body["messages"][2]["reasoning_details"] == []


@pytest.mark.parametrize("state", ["not json", "[" * 5000 + "]" * 5000])
def test_reasoning_state_that_is_not_a_json_list_is_a_clear_error(state):
    turn = Message(Role.ASSISTANT, (Reasoning("x", state, "openrouter"), Text("A")))
    with pytest.raises(ConfigError, match=r"message 1: openrouter reasoning state"):
        to_wire(Request("S"), [user_text("Q"), turn], model="m/x")


def test_a_tool_result_in_an_assistant_message_is_a_clear_error():
    bad = Message(Role.ASSISTANT, (ToolResult("c1", "a", "r"),))
    with pytest.raises(ConfigError, match="message 0: an assistant message cannot carry a ToolResult"):
        to_wire(Request("S"), [bad], model="m/x")


def test_a_tool_call_in_a_user_message_is_a_clear_error():
    bad = Message(Role.USER, (ToolCall("c1", "a", "{}"),))
    with pytest.raises(ConfigError, match="message 0: a user message cannot carry a ToolCall"):
        to_wire(Request("S"), [bad], model="m/x")


@pytest.mark.parametrize("effort", list(Effort))
def test_every_effort_level_passes_through(effort):
    body = to_wire(Request("S", thinking=Thinking(effort=effort)), [user_text("Q")], model="m/x")
    assert assert_valid(body)["reasoning"] == {"effort": effort.value}


def test_a_budget_becomes_reasoning_max_tokens_and_wins_over_effort():
    thinking = Thinking(effort=Effort.LOW, budget=3000)
    body = to_wire(Request("S", thinking=thinking), [user_text("Q")], model="m/x")
    assert body["reasoning"] == {"max_tokens": 3000}


def test_show_never_reaches_the_wire():
    shown = to_wire(Request("S", thinking=Thinking(effort=Effort.HIGH, show=True)),
                    [user_text("Q")], model="m/x")
    hidden = to_wire(Request("S", thinking=Thinking(effort=Effort.HIGH)),
                     [user_text("Q")], model="m/x")
    assert shown == hidden


def test_anthropic_models_get_cache_breakpoints_on_system_and_newest_message():
    request = Request("Long system prompt.", tools=(FakeTool("weather"), FakeTool("clock")))
    conversation = [user_text("Weather?"), weather_turn(), weather_results()]
    body = assert_valid(to_wire(request, conversation, model="anthropic/claude-sonnet-4.5"))
    assert body["messages"][0] == {"role": "system", "content": [
        {"type": "text", "text": "Long system prompt.", "cache_control": EPHEMERAL}]}
    assert body["messages"][1] == {"role": "user", "content": "Weather?"}
    assert body["messages"][-2] == {"role": "tool", "tool_call_id": "toolu_1",
                                    "content": "15°C, cloudy"}
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "toolu_2", "content": [
        {"type": "text", "text": "clock is broken", "cache_control": EPHEMERAL}]}
    marks = json.dumps(body).count('"cache_control"')
    assert marks == 2


def test_the_cache_breakpoint_goes_on_the_last_text_part_of_a_mixed_message():
    message = Message(Role.USER, (Text("Look:"), Image("image/jpeg", "AAAA")))
    body = to_wire(Request("S"), [message], model="anthropic/claude-haiku-4.5")
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "Look:", "cache_control": EPHEMERAL},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
    ]


def test_other_models_get_no_cache_markers():
    body = to_wire(Request("S"), [user_text("Q")], model="openai/gpt-5")
    assert "cache_control" not in json.dumps(body)


def test_provider_preferences_are_copied_into_the_body():
    provider = {"order": ["anthropic"], "allow_fallbacks": False}
    body = to_wire(Request("S"), [user_text("Q")], model="m/x", provider=provider)
    assert body["provider"] == provider
    body["provider"]["order"].append("openai")
    assert provider == {"order": ["anthropic"], "allow_fallbacks": False}


def test_nothing_the_caller_passed_is_mutated():
    tool = FakeTool("weather")
    schema = copy.deepcopy(tool.schema)
    conversation = [user_text("Q"), weather_turn(), weather_results(), assistant_text("ok"),
                    user_text("again")]
    before = list(conversation)
    body = to_wire(Request("S", tools=(tool,)), conversation, model="anthropic/claude-x")
    body["tools"][0]["function"]["parameters"]["properties"].clear()
    body["messages"][2]["reasoning_details"][0]["text"] = "changed"
    assert tool.schema == schema
    assert conversation == before
    assert json.loads(conversation[1].parts[0].state) == DETAILS


def test_mcp_servers_are_refused_with_a_pointer_to_the_local_client():
    request = Request("S", mcp=(MCPServer("docs", "https://example.com/mcp"),))
    with pytest.raises(Unsupported, match=r"'openrouter' does not support MCP.*nacelle\.mcp"):
        to_wire(request, [user_text("Q")], model="m/x")


# -- the other dialects ------------------------------------------------------------------


def chat_body(dialect, request=None, messages=None, model="m"):
    return chat_wire.to_wire(request or Request("Sys."), messages or [user_text("Hi")],
                             model=model, dialect=dialect)


def test_a_plain_server_gets_usage_asked_for_and_no_default_token_cap():
    body = chat_body(chat.LLAMACPP)
    assert body == {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                    "messages": [{"role": "system", "content": "Sys."},
                                 {"role": "user", "content": "Hi"}]}


@pytest.mark.parametrize("dialect, field", [
    (chat.OPENAI, "max_completion_tokens"), (chat.GROQ, "max_completion_tokens"),
    (chat.DEEPSEEK, "max_tokens"), (chat.OLLAMA, "max_tokens"),
])
def test_a_chosen_token_cap_goes_out_under_the_dialects_field(dialect, field):
    body = chat_body(dialect, Request("Sys.", max_tokens=700))
    fields = {"max_tokens", "max_completion_tokens"} & set(body)
    assert fields == {field} and body[field] == 700


@pytest.mark.parametrize("dialect, effort, sent", [
    (chat.OPENAI, Effort.MAX, "xhigh"), (chat.OPENAI, Effort.NONE, "none"),
    (chat.VLLM, Effort.MINIMAL, "low"), (chat.VLLM, Effort.MAX, "high"),
    (chat.DEEPSEEK, Effort.MEDIUM, "high"), (chat.DEEPSEEK, Effort.XHIGH, "max"),
    (chat.XAI, Effort.MEDIUM, "high"), (chat.GEMINI, Effort.MINIMAL, "minimal"),
    (chat.MISTRAL, Effort.HIGH, "high"), (chat.MISTRAL, Effort.NONE, "none"),
    (chat.MISTRAL, Effort.MEDIUM, "high"),
])
def test_effort_becomes_the_nearest_level_the_server_has(dialect, effort, sent):
    body = chat_body(dialect, Request("Sys.", thinking=Thinking(effort=effort)))
    assert body["reasoning_effort"] == sent and "reasoning" not in body


def test_no_effort_on_a_server_without_none_leaves_the_field_out():
    body = chat_body(chat.VLLM, Request("Sys.", thinking=Thinking(effort=Effort.NONE)))
    assert "reasoning_effort" not in body


def test_deepseek_turns_thinking_off_for_no_effort_and_on_otherwise():
    off = chat_body(chat.DEEPSEEK, Request("S", thinking=Thinking(effort=Effort.NONE)))
    on = chat_body(chat.DEEPSEEK, Request("S", thinking=Thinking(effort=Effort.LOW)))
    assert off["thinking"] == {"type": "disabled"} and "reasoning_effort" not in off
    assert on["thinking"] == {"type": "enabled"} and on["reasoning_effort"] == "low"


@pytest.mark.parametrize("budget, effort", [(2000, "low"), (8000, "medium"), (20000, "high")])
def test_a_budget_becomes_an_effort_on_a_server_that_takes_no_budget(budget, effort):
    body = chat_body(chat.OPENAI, Request("S", thinking=Thinking(budget=budget)))
    assert body["reasoning_effort"] == effort


def test_vllm_is_sent_tool_choice_auto_and_openai_parallel_tool_calls():
    request = Request("Sys.", tools=(FakeTool("weather"),))
    assert chat_body(chat.VLLM, request)["tool_choice"] == "auto"
    assert "parallel_tool_calls" not in chat_body(chat.VLLM, request)
    openai = chat_body(chat.OPENAI, request)
    assert openai["parallel_tool_calls"] is True and "tool_choice" not in openai


def test_deepseek_gets_the_reasoning_of_tool_calling_turns_back_and_no_other():
    thought = Message(Role.ASSISTANT, (Reasoning("Need weather.", "", "chat"),
                                       ToolCall("c1", "weather", '{"city":"Oslo"}')))
    answer = Message(Role.ASSISTANT, (Reasoning("Easy.", "", "chat"), Text("Sunny.")))
    messages = [user_text("Q"), thought,
                Message(Role.USER, (ToolResult("c1", "weather", "sun"),)), answer,
                user_text("More?")]
    sent = [m for m in chat_body(chat.DEEPSEEK, messages=messages)["messages"]
            if m["role"] == "assistant"]
    assert sent[0]["reasoning_content"] == "Need weather."
    assert "reasoning_content" not in sent[1]


def test_reasoning_of_another_protocol_never_reaches_a_chat_server():
    turn = Message(Role.ASSISTANT, (Reasoning("x", json.dumps(DETAILS), "openrouter"),
                                    ToolCall("c1", "weather", "{}")))
    sent = chat_body(chat.DEEPSEEK, messages=[user_text("Q"), turn])["messages"][-1]
    assert set(sent) == {"role", "content", "tool_calls"}


def test_a_calls_extra_content_goes_back_on_that_call():
    extra = {"google": {"thought_signature": "CiQBsig=="}}
    turn = Message(Role.ASSISTANT, (
        ToolCall("c1", "weather", '{"city":"Oslo"}'), ToolCall("c2", "clock", "{}"),
        ProviderBlock("chat", chat_wire.call_extra_block("c1", extra))))
    sent = chat_body(chat.GEMINI, messages=[user_text("Q"), turn])["messages"][-1]
    assert sent["tool_calls"][0]["extra_content"] == extra
    assert "extra_content" not in sent["tool_calls"][1]


def test_the_request_is_not_changed_by_building_a_body():
    request = Request("Sys.", tools=(FakeTool("weather"),))
    schema = copy.deepcopy(request.tools[0].schema)
    body = chat_body(chat.OPENAI, request)
    body["tools"][0]["function"]["parameters"]["type"] = "changed"
    assert request.tools[0].schema == schema


def test_a_dialect_with_an_unknown_effort_level_is_a_config_error():
    with pytest.raises(ConfigError, match="levels no server has"):
        chat_wire.Dialect(efforts=("low", "ultra"))



def test_call_profiles_decide_the_cache_markers_on_anthropic_models():
    from nacelle.backend import CallProfile

    conversation = [user_text("Weather?"), weather_turn(), weather_results()]
    marks = {}
    for profile in CallProfile:
        body = to_wire(Request("Long system prompt.", tools=(FakeTool("weather"),),
                               profile=profile), conversation, model="anthropic/claude-sonnet-4.5")
        marks[profile] = json.dumps(body).count('"cache_control"')
        system = body["messages"][0]["content"]
        assert isinstance(system, list) == (profile in (CallProfile.AGENT_TURN,
                                                        CallProfile.COMPACTION))
    assert marks == {CallProfile.AGENT_TURN: 2, CallProfile.COMPACTION: 1, CallProfile.TITLE: 0,
                     CallProfile.EVALUATION: 0, CallProfile.PROBE: 0}


# -- media: a tool's images and PDFs follow its tool message -------------------------

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
                       "DwAChwGA60e6kgAAAABJRU5ErkJggg==")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
DATA = Path(__file__).resolve().parent.parent / "data"
FILE_PART = {"type": "object", "required": ["type", "file"],
             "properties": {"type": {"const": "file"}, "file": {
                 "type": "object", "required": ["file_data"],
                 "properties": {"filename": {"type": "string"},
                                "file_data": {"type": "string",
                                              "pattern": "^data:application/pdf;base64,"}}}}}


def screenshot_round():
    """A screenshot call answered with text, a PNG, a PDF and a plain-text document."""
    result = ToolResult("call_shot_0", "screenshot", "The screen.", content=(
        Text("The screen."), Image.from_bytes(PNG), Document.from_bytes(PDF, title="page"),
        Document.from_bytes(b"Notes: all green.\n", title="notes.txt")))
    return (user_text("What is on screen?"),
            Message(Role.ASSISTANT, (ToolCall("call_shot_0", "screenshot", "{}"),)),
            Message(Role.USER, (result,)))


@pytest.mark.parametrize("where, model, dialect", [
    ("chat", "gpt-5-mini", chat.OPENAI),
    ("openrouter", "openai/gpt-5-mini", OPENROUTER),
])
def test_a_tools_media_follow_its_tool_message_in_one_user_message(where, model, dialect):
    # The documented shapes, saved with their sources in tests/data/chat/ and
    # tests/data/openrouter/.
    documented = json.loads((DATA / where / "tool_media_follow.json").read_text("utf-8"))
    body = chat_wire.to_wire(Request("S"), screenshot_round(), model=model, dialect=dialect)
    assert body["messages"][-2:] == documented["request"]
    tool, media = body["messages"][-2:]
    assert tool["content"].startswith("The screen.\n[image: image/png, 70 bytes, sent after")
    assert media["content"][0]["text"] == "[tool call call_shot_0 (screenshot) returned these]"


def test_a_dialect_without_images_or_documents_gets_notes_naming_the_call():
    body = chat_wire.to_wire(Request("S"), screenshot_round(), model="deepseek-chat",
                             dialect=chat.DEEPSEEK)
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "call_shot_0", "content": (
        "The screen.\n[image: image/png, 70 bytes, from call call_shot_0]\n"
        "[document: application/pdf \"page\", 45 bytes, from call call_shot_0]\n"
        "Notes: all green.\n")}


def test_images_follow_but_a_pdf_is_a_note_where_the_server_takes_no_documents():
    body = chat_wire.to_wire(Request("S"), screenshot_round(), model="qwen3",
                             dialect=chat.OLLAMA)
    tool, media = body["messages"][-2:]
    assert "[document: application/pdf \"page\", 45 bytes, from call call_shot_0]" in (
        tool["content"])
    assert [part["type"] for part in media["content"]] == ["text", "image_url"]


def test_the_media_of_several_calls_come_after_all_tool_messages_each_named():
    results = Message(Role.USER, (
        ToolResult("call_a", "shot", "", content=(Image.from_bytes(PNG),)),
        ToolResult("call_b", "clock", "12:00"),
        ToolResult("call_c", "shot", "second", content=(Text("second"), Image.from_bytes(PNG))),
        Text("Compare them."),
    ))
    turn = Message(Role.ASSISTANT, tuple(ToolCall(i, "shot", "{}")
                                         for i in ("call_a", "call_b", "call_c")))
    body = to_wire(Request("S"), [user_text("Q"), turn, results], model="openai/gpt-5")
    wire = body["messages"][2:]
    assert [m["role"] for m in wire] == ["assistant", "tool", "tool", "tool", "user"]
    assert [p.get("text", p["type"]) for p in wire[-1]["content"]] == [
        "[tool call call_a (shot) returned these]", "image_url",
        "[tool call call_c (shot) returned these]", "image_url", "Compare them."]


def test_a_users_pdf_is_a_file_part_and_a_text_document_its_text():
    message = Message(Role.USER, (Text("Summarise."), Document.from_bytes(PDF, title="Q3"),
                                  Document.from_bytes(b"plain words")))
    body = chat_wire.to_wire(Request("S"), [message], model="gpt-5-mini", dialect=chat.OPENAI)
    content = body["messages"][1]["content"]
    jsonschema.validate(content[1], FILE_PART)
    assert content[1:] == [
        {"type": "file", "file": {"filename": "Q3.pdf", "file_data":
                                  "data:application/pdf;base64," + base64.b64encode(PDF).decode()}},
        {"type": "text", "text": "plain words"}]


def test_a_users_pdf_on_a_server_without_documents_is_unsupported():
    message = Message(Role.USER, (Document.from_bytes(PDF),))
    with pytest.raises(Unsupported, match="documents"):
        chat_wire.to_wire(Request("S"), [message], model="qwen3", dialect=chat.OLLAMA)


def test_documents_are_a_capability_of_the_dialects_that_document_them():
    assert chat.openai("gpt-5-mini", api_key="k").capabilities.documents
    assert not chat.ollama("qwen3").capabilities.documents
    assert not chat.openai("gpt-5-mini", api_key="k").capabilities.tool_media


# -- model settings and cache controls ---------------------------------------------------
#
# OpenAI's CreateChatCompletionRequest (platform.openai.com/docs/api-reference/chat/create:
# temperature, top_p, stop as a string or array, seed, tool_choice "none"/"auto"/"required"
# or {"type": "function", "function": {"name"}}, parallel_tool_calls, prompt_cache_key)
# and OpenRouter's ChatRequest (openrouter.ai/docs/api-reference/parameters: the same
# plus top_k; ChatContentText.cache_control {"type": "ephemeral", "ttl": "1h"}).

def test_model_settings_are_chat_completion_fields():
    settings = nacelle.ModelSettings(temperature=0.7, top_p=0.8, stop=["END", "STOP"], seed=11,
                                     tool_choice="weather", parallel_tool_calls=False)
    request = Request("Be brief.", tools=(FakeTool("weather"),), settings=settings,
                      cache=nacelle.Cache(key="k-9"))
    body = assert_valid(chat_wire.to_wire(request, [user_text("Hi")], model="gpt-4.1",
                                          dialect=chat.OPENAI))
    assert {k: body[k] for k in ("temperature", "top_p", "stop", "seed", "tool_choice",
                                 "parallel_tool_calls", "prompt_cache_key")} == {
        "temperature": 0.7, "top_p": 0.8, "stop": ["END", "STOP"], "seed": 11,
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "parallel_tool_calls": False, "prompt_cache_key": "k-9"}


def test_a_tool_choice_replaces_the_dialects_own_auto():
    request = Request("Be brief.", tools=(FakeTool("weather"),),
                      settings=nacelle.ModelSettings(tool_choice="required"))
    body = chat_wire.to_wire(request, [user_text("Hi")], model="m", dialect=chat.VLLM)
    assert body["tool_choice"] == "required"
    plain = chat_wire.to_wire(Request("Be brief.", tools=(FakeTool("weather"),)),
                              [user_text("Hi")], model="m", dialect=chat.VLLM)
    assert plain["tool_choice"] == "auto"


def test_extra_body_goes_last_over_the_dialects_extra_fields():
    settings = nacelle.ModelSettings(extra_body={"provider": {"sort": "price"}, "top_a": 0.1})
    body = to_wire(Request("Be brief.", settings=settings), [user_text("Hi")],
                   model="openai/gpt-4.1", provider={"order": ["openai"]})
    assert body["provider"] == {"sort": "price"} and body["top_a"] == 0.1


def test_openrouter_sends_top_k_and_a_one_hour_ttl_on_its_anthropic_breakpoints():
    request = Request("Be brief.", settings=nacelle.ModelSettings(top_k=20),
                      cache=nacelle.Cache(ttl="1h", key="k"))
    body = assert_valid(to_wire(request, [user_text("Hi"), weather_turn(), weather_results()],
                                model="anthropic/claude-haiku-4.5"))
    hour = {"type": "ephemeral", "ttl": "1h"}
    marks = [part["cache_control"] for m in body["messages"] if isinstance(m["content"], list)
             for part in m["content"] if "cache_control" in part]
    assert body["top_k"] == 20 and body["prompt_cache_key"] == "k"
    assert len(marks) == 2 and all(mark == hour for mark in marks)


def test_the_encoded_body_carries_the_settings_turn_after_turn():
    """encode_body reuses a run's encoded prefix; settings after the messages and the
    one-hour marker on the newest message must be what to_wire writes."""
    from nacelle.backends._wire_cache import WireCache

    request = Request("Be brief.", tools=(FakeTool("weather"),),
                      settings=nacelle.ModelSettings(temperature=0.1, tool_choice="none"),
                      cache=nacelle.Cache(ttl="1h"))
    cache = WireCache()
    turns = [(user_text("Hi"),), (user_text("Hi"), weather_turn(), weather_results())]
    for messages in turns:
        encoded = chat_wire.encode_body(request, messages, model="anthropic/claude-haiku-4.5",
                                        dialect=OPENROUTER, cache=cache)
        expected = to_wire(request, messages, model="anthropic/claude-haiku-4.5")
        assert bytes(encoded) == chat_wire.dumps(expected)
