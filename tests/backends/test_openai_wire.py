"""openai_wire.to_wire: the exact Responses request bodies, as golden dicts, each one
also validated against OpenAI's published schema for ``POST /responses``
(``tests/data/openai_responses/create_response.schema.json``, see its README).

The OpenAPI document's ``oneOf`` unions overlap (a user message matches both
``EasyInputMessage`` and ``InputMessage``) and are told apart by an OpenAPI
``discriminator``, which JSON Schema does not read; so the schema is checked with
``oneOf`` read as ``anyOf`` — every body must match at least one branch of each union.
"""

import base64
import copy
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator, validators

import nacelle
from nacelle import (
    ConfigError, Document, Effort, Finish, Image, MCPServer, Message, ProviderBlock, Reasoning,
    Request, Role, Stop, Text, Thinking, ToolCall, ToolResult, Unsupported, assistant_text,
    user_text,
)
from nacelle.backend import DEFAULT_MAX_TOKENS
from nacelle.backends.openai import wire as openai_wire
from nacelle.backends.openai.wire import count_tokens_body, to_wire

DATA = Path(__file__).resolve().parent.parent / "data" / "openai_responses"
SCHEMA = json.loads((DATA / "create_response.schema.json").read_text(encoding="utf-8"))
_Lenient = validators.extend(Draft202012Validator,
                             {"oneOf": Draft202012Validator.VALIDATORS["anyOf"]})
CREATE_RESPONSE = _Lenient(SCHEMA)
TOKEN_COUNTS = _Lenient(dict(SCHEMA, **{"$ref": "#/$defs/TokenCountsBody"}))

ITEM = {"id": "rs_0fabc13af1ee0049", "type": "reasoning", "content": [],
        "encrypted_content": "gAAAAABqaR3-pGgSyJcPT3y2", "summary": [
            {"type": "summary_text", "text": "**Checking the weather**"}]}
STATE = json.dumps(ITEM, separators=(",", ":"))
FRAME = {"stream": True, "store": False, "include": ["reasoning.encrypted_content"]}


def valid(body, validator=CREATE_RESPONSE):
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(body)]
    assert errors == [], errors
    return body


def wire(request=None, messages=(), model="gpt-5-mini"):
    return valid(to_wire(request or Request("Be brief."), tuple(messages), model=model))


class FakeTool:
    def __init__(self, name, description="", schema=None):
        self.name = name
        self.description = description
        self.schema = schema if schema is not None else {
            "type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"], "additionalProperties": False}

    def run(self, input, ctx):  # pragma: no cover - never run here
        return ""


def tool_turn():
    return Message(Role.ASSISTANT, (
        Reasoning("**Checking the weather**", STATE, "openai-responses"),
        Text("Checking both."),
        ToolCall("call_Qm2dEw1uX9aB", "weather", '{"city": "Berlin"}'),
        ToolCall("call_Zr8tYp4kL0cD", "clock", ""),
        Finish(Stop.TOOLS),
    ))


def tool_results():
    return Message(Role.USER, (
        ToolResult("call_Qm2dEw1uX9aB", "weather", "15°C, cloudy"),
        ToolResult("call_Zr8tYp4kL0cD", "clock", "clock is broken", failed=True),
    ))


# -- the frame -------------------------------------------------------------------------


def test_a_one_message_body_is_stateless_and_asks_for_encrypted_reasoning():
    assert wire(messages=[user_text("Hi")]) == {
        "model": "gpt-5-mini", "instructions": "Be brief.",
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": "Hi"}]}],
        **FRAME}


def test_the_system_prompt_goes_out_as_instructions_not_as_an_input_message():
    body = wire(Request("You are a weather desk."), [user_text("Hi")])
    assert body["instructions"] == "You are a weather desk."
    assert [item.get("role") for item in body["input"]] == ["user"]


def test_no_token_cap_is_sent_unless_the_agent_chose_one():
    assert "max_output_tokens" not in wire(Request("s", max_tokens=DEFAULT_MAX_TOKENS))
    assert wire(Request("s", max_tokens=500))["max_output_tokens"] == 500


def test_a_chosen_cap_below_the_apis_minimum_of_16_is_raised_to_16():
    assert wire(Request("s", max_tokens=3))["max_output_tokens"] == 16


# -- reasoning settings ----------------------------------------------------------------


@pytest.mark.parametrize("effort", list(Effort))
def test_every_effort_level_is_sent_as_reasoning_effort(effort):
    body = wire(Request("s", thinking=Thinking(effort=effort)))
    assert body["reasoning"] == {"effort": effort.value}


def test_show_asks_for_automatic_summaries():
    body = wire(Request("s", thinking=Thinking(effort=Effort.HIGH, show=True)))
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert wire(Request("s", thinking=Thinking(show=True)))["reasoning"] == {"summary": "auto"}


@pytest.mark.parametrize("budget, effort", [(1024, "low"), (4096, "medium"), (16384, "high")])
def test_a_budget_becomes_the_effort_its_size_suggests(budget, effort):
    assert wire(Request("s", thinking=Thinking(budget=budget)))["reasoning"] == {"effort": effort}


def test_no_reasoning_field_is_sent_without_thinking_settings():
    assert "reasoning" not in wire(Request("s"))


# -- tools -----------------------------------------------------------------------------


def test_tools_are_function_tools_sorted_by_name_and_not_strict():
    schema = {"type": "object", "properties": {"q": {"type": "string"},
                                               "limit": {"type": "integer", "default": 10}},
              "required": ["q"], "additionalProperties": False}
    tools = (FakeTool("search", "Find things.", schema), FakeTool("clock"))
    body = wire(Request("s", tools=tools), [user_text("Hi")])
    assert body["tools"] == [
        {"type": "function", "name": "clock", "parameters": tools[1].schema, "strict": False},
        {"type": "function", "name": "search", "description": "Find things.",
         "parameters": schema, "strict": False}]
    body["tools"][1]["parameters"]["properties"]["q"]["type"] = "changed"
    assert schema["properties"]["q"]["type"] == "string"  # the caller's schema is a copy


def test_a_real_tool_with_an_optional_parameter_validates():
    @nacelle.tool
    def weather(city: str, units: str = "C") -> str:
        """The weather.

        Args:
            city: The city.
            units: C or F.
        """
        return ""

    body = wire(Request("s", tools=(weather,)), [user_text("Hi")])
    assert body["tools"][0]["strict"] is False
    assert body["tools"][0]["parameters"]["required"] == ["city"]


def test_mcp_servers_are_unsupported():
    with pytest.raises(Unsupported, match="nacelle.mcp"):
        to_wire(Request("s", mcp=(MCPServer("docs", "https://example.com/mcp"),)),
                (user_text("Hi"),), model="gpt-5-mini")


# -- the conversation as items ---------------------------------------------------------


def test_a_tool_round_becomes_reasoning_message_calls_and_outputs_in_order():
    body = wire(messages=[user_text("Weather and time in Berlin?"), tool_turn(),
                          tool_results()])
    assert body["input"] == [
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Weather and time in Berlin?"}]},
        ITEM,
        {"role": "assistant", "content": "Checking both."},
        {"type": "function_call", "call_id": "call_Qm2dEw1uX9aB", "name": "weather",
         "arguments": '{"city": "Berlin"}'},
        {"type": "function_call", "call_id": "call_Zr8tYp4kL0cD", "name": "clock",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_Qm2dEw1uX9aB",
         "output": "15°C, cloudy"},
        {"type": "function_call_output", "call_id": "call_Zr8tYp4kL0cD",
         "output": "clock is broken"},
    ]


def test_the_reasoning_item_goes_back_byte_for_byte():
    body = wire(messages=[user_text("Hi"), tool_turn(), tool_results()])
    sent = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    assert STATE in sent


def test_reasoning_survives_dumps_and_loads_into_a_later_run():
    conversation = nacelle.loads(nacelle.dumps([user_text("Hi"), tool_turn(), tool_results()]))
    body = wire(messages=conversation)
    assert body["input"][1] == ITEM
    assert STATE in json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def test_reasoning_and_blocks_of_another_protocol_are_dropped():
    turn = Message(Role.ASSISTANT, (
        Reasoning("thought", "EvsCsig==", "anthropic"),
        Reasoning("thought", "[]", "openrouter"),
        ProviderBlock("anthropic", '{"type":"server_tool_use","id":"srvtoolu_1"}'),
        Text("Hello."),
    ))
    body = wire(messages=[user_text("Hi"), turn, user_text("Again")])
    assert [item.get("type", item.get("role")) for item in body["input"]] == [
        "message", "assistant", "message"]


def test_a_reasoning_item_without_encrypted_content_is_not_sent():
    bare = dict(ITEM)
    del bare["encrypted_content"]
    turn = Message(Role.ASSISTANT, (Reasoning("", json.dumps(bare), "openai-responses"),
                                    Text("Hello.")))
    body = wire(messages=[user_text("Hi"), turn])
    assert all(item.get("type") != "reasoning" for item in body["input"])


def test_a_provider_block_of_this_protocol_goes_back_as_the_item_it_holds():
    block = {"type": "web_search_call", "id": "ws_1", "status": "completed",
             "action": {"type": "search", "query": "Berlin weather"}}
    turn = Message(Role.ASSISTANT, (ProviderBlock("openai-responses", json.dumps(block)),
                                    Text("Sunny.")))
    body = to_wire(Request("s"), (user_text("Hi"), turn), model="gpt-5-mini")
    assert body["input"][1] == block


@pytest.mark.parametrize("state", ["not json", "[]", '{"no": "type"}', "42",
                                   '{"type": "reasoning", "a": ' + "[" * 5000 + "]" * 5000 + "}"])
def test_reasoning_state_that_is_not_an_item_is_a_config_error_naming_the_message(state):
    turn = Message(Role.ASSISTANT, (Reasoning("t", state, "openai-responses"), Text("x")))
    with pytest.raises(ConfigError, match="message 1"):
        to_wire(Request("s"), (user_text("Hi"), turn), model="gpt-5-mini")


def test_a_call_cut_off_mid_input_and_its_result_are_never_sent():
    turn = Message(Role.ASSISTANT, (
        ToolCall("call_done", "weather", '{"city": "Berlin"}'),
        ToolCall("call_cut", "weather", '{"city": "Ham', finished=False),
        Finish(Stop.MAX_TOKENS),
    ))
    results = Message(Role.USER, (ToolResult("call_done", "weather", "15°C"),
                                  ToolResult("call_cut", "weather", "not run", failed=True)))
    body = wire(messages=[user_text("Hi"), turn, results])
    sent = [(item["type"], item["call_id"]) for item in body["input"] if "call_id" in item]
    assert sent == [("function_call", "call_done"), ("function_call_output", "call_done")]


def test_images_are_input_image_parts_with_data_urls():
    message = Message(Role.USER, (Text("What is this?"), Image("image/png", "iVBORw0KGgo=")))
    assert wire(messages=[message])["input"] == [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "detail": "auto",
         "image_url": "data:image/png;base64,iVBORw0KGgo="}]}]


def test_results_go_first_then_the_users_text_of_the_same_message():
    message = Message(Role.USER, (ToolResult("call_1", "clock", "12:00"), Text("Thanks")))
    assert [item["type"] for item in wire(messages=[message])["input"]] == [
        "function_call_output", "message"]


def test_empty_assistant_text_and_finish_parts_are_not_sent():
    turn = Message(Role.ASSISTANT, (Text(""), Finish(Stop.END)))
    body = wire(messages=[user_text("Hi"), turn, assistant_text("Hello."), user_text("Bye")])
    assert [item.get("role") for item in body["input"]] == ["user", "assistant", "user"]


def test_an_assistant_message_cannot_carry_a_tool_result():
    turn = Message(Role.ASSISTANT, (ToolResult("call_1", "clock", "12:00"),))
    with pytest.raises(ConfigError, match="message 0"):
        to_wire(Request("s"), (turn,), model="gpt-5-mini")


def test_nothing_given_is_mutated():
    messages = (user_text("Hi"), tool_turn(), tool_results())
    before = copy.deepcopy(messages)
    body = to_wire(Request("s"), messages, model="gpt-5-mini")
    body["input"][1]["summary"].append("changed")
    assert messages == before
    assert to_wire(Request("s"), messages, model="gpt-5-mini")["input"][1] == ITEM


# -- token counting ----------------------------------------------------------------------


def test_the_token_count_body_is_the_same_request_without_generation_fields():
    request = Request("Be brief.", tools=(FakeTool("weather"),),
                      thinking=Thinking(effort=Effort.LOW), max_tokens=500)
    messages = (user_text("Hi"), tool_turn(), tool_results())
    body = valid(count_tokens_body(request, messages, model="gpt-5-mini"), TOKEN_COUNTS)
    full = to_wire(request, messages, model="gpt-5-mini")
    assert body == {key: value for key, value in full.items()
                    if key not in ("stream", "store", "include", "max_output_tokens")}


# -- the schema check itself ---------------------------------------------------------------


@pytest.mark.parametrize("change", [
    lambda b: b.update(store="no"),
    lambda b: b.update(include=["reasoning.everything"]),
    lambda b: b["input"][0].update(role="wizard"),
    lambda b: b["tools"][0].pop("strict"),
    lambda b: b["input"][2]["content"][1].pop("detail"),
    lambda b: b.update(max_output_tokens=3),
    lambda b: b.update(reasoning={"effort": "enormous"}),
])
def test_the_schema_check_catches_a_body_the_api_would_refuse(change):
    message = Message(Role.USER, (Text("Look"), Image("image/png", "iVBORw0KGgo=")))
    body = wire(Request("s", tools=(FakeTool("weather"),), thinking=Thinking(effort=Effort.LOW)),
                [user_text("Hi"), assistant_text("Hello."), message])
    change(body)
    assert list(CREATE_RESPONSE.iter_errors(body)) != []


def test_the_vendored_schema_names_its_source():
    assert "openai/openai-openapi" in SCHEMA["$comment"]
    assert "f85dbe223d40e1a31cba812ab2d755c7e98a92a3" in SCHEMA["$comment"]
    assert openai_wire.PROTOCOL == "openai-responses"


# -- media: images and documents, in messages and in function_call_output ------------

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
                       "DwAChwGA60e6kgAAAABJRU5ErkJggg==")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def screenshot_round():
    """A screenshot call answered with text, a PNG, a PDF and a plain-text document."""
    result = ToolResult("call_shot_0", "screenshot", "The screen.", content=(
        Text("The screen."), Image.from_bytes(PNG), Document.from_bytes(PDF, title="page"),
        Document.from_bytes(b"Notes: all green.\n", title="notes.txt")))
    return (user_text("What is on screen?"),
            Message(Role.ASSISTANT, (ToolCall("call_shot_0", "screenshot", "{}"),)),
            Message(Role.USER, (result,)))


def test_a_tools_media_are_the_function_call_outputs_list_of_input_items():
    # The documented shape, saved with its sources in tests/data/openai_responses/;
    # wire() also validates the whole body against the published schema.
    documented = json.loads((DATA / "function_call_output_media.json").read_text("utf-8"))
    assert wire(messages=screenshot_round())["input"][-1] == documented["request"]


def test_a_users_documents_are_input_files_with_data_urls_and_file_names():
    message = Message(Role.USER, (Text("Summarise."), Document.from_bytes(PDF, title="Q3"),
                                  Document.from_bytes(b"plain words")))
    content = wire(messages=[message])["input"][0]["content"]
    assert content[1:] == [
        {"type": "input_file", "filename": "Q3.pdf",
         "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode()},
        {"type": "input_file", "filename": "document.txt",
         "file_data": "data:text/plain;base64," + base64.b64encode(b"plain words").decode()}]


def test_a_tool_result_without_media_still_sends_its_output_as_a_string():
    message = Message(Role.USER, (ToolResult("call_1", "clock", "12:00"),))
    assert wire(messages=[message])["input"][0]["output"] == "12:00"


def test_a_tool_result_of_media_only_sends_no_empty_text():
    result = ToolResult("call_1", "shot", "", content=(Image.from_bytes(PNG),))
    [item] = wire(messages=[Message(Role.USER, (result,))])["input"]
    assert [part["type"] for part in item["output"]] == ["input_image"]


# -- model settings and the prompt cache key ------------------------------------------
#
# CreateResponse's temperature, top_p, tool_choice (ToolChoiceOptions and
# ToolChoiceFunction), parallel_tool_calls and prompt_cache_key, each body checked
# against the published schema (platform.openai.com/docs/api-reference/responses/create).

@pytest.mark.parametrize("settings, fields", [
    (nacelle.ModelSettings(temperature=0.2, top_p=0.9), {"temperature": 0.2, "top_p": 0.9}),
    (nacelle.ModelSettings(tool_choice="required"), {"tool_choice": "required"}),
    (nacelle.ModelSettings(tool_choice="none"), {"tool_choice": "none"}),
    (nacelle.ModelSettings(tool_choice="weather", parallel_tool_calls=False),
     {"tool_choice": {"type": "function", "name": "weather"}, "parallel_tool_calls": False}),
    (nacelle.ModelSettings(parallel_tool_calls=True), {"parallel_tool_calls": True}),
    (nacelle.ModelSettings(extra_body={"service_tier": "flex", "temperature": 0.5}),
     {"service_tier": "flex", "temperature": 0.5}),
])
def test_model_settings_are_createresponse_fields(settings, fields):
    request = Request("Be brief.", tools=(FakeTool("weather"),), settings=settings)
    body = wire(request, [user_text("Hi")])
    assert {k: body[k] for k in fields} == fields
    assert not {"stop", "top_k", "seed"} & set(body)


def test_tool_choice_and_parallel_calls_go_only_with_tools():
    settings = nacelle.ModelSettings(tool_choice="none", parallel_tool_calls=False)
    body = wire(Request("Be brief.", settings=settings), [user_text("Hi")])
    assert "tool_choice" not in body and "parallel_tool_calls" not in body


def test_the_cache_key_is_prompt_cache_key():
    body = wire(Request("Be brief.", cache=nacelle.Cache(key="tenant-7")), [user_text("Hi")])
    assert body["prompt_cache_key"] == "tenant-7"
    assert "prompt_cache_key" not in wire(Request("Be brief.", cache=nacelle.Cache()))


def test_extra_body_is_merged_over_the_body_without_sharing_its_values():
    settings = nacelle.ModelSettings(extra_body={"metadata": {"team": "a"}})
    body = wire(Request("Be brief.", settings=settings), [user_text("Hi")])
    body["metadata"]["team"] = "changed"
    assert settings.extra_body == {"metadata": {"team": "a"}}
