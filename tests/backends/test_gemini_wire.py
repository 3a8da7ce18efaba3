"""The Gemini request body, built without I/O: one test per rule of ``wire.py``.

Shapes are those of ``GenerateContentRequest`` (https://ai.google.dev/api/generate-content)
and the google-genai SDK's types (``Content``, ``Part``, ``FunctionCall``,
``FunctionResponse``, ``FunctionDeclaration.parametersJsonSchema``,
``FunctionCallingConfig``, ``ThinkingConfig``), in the REST API's camelCase.
"""

import copy
import json

import pytest

import nacelle
from nacelle import (
    ConfigError, Document, Effort, Image, Message, ModelSettings, Reasoning, Role, Text, Thinking,
    ToolCall, ToolResult, Unsupported, user_text,
)
from nacelle.backends.gemini import to_wire
from nacelle.messages import Finish, ProviderBlock
from nacelle.events import Stop

SIG = "CiQBjz1rX7tXb0kq3QW8oN2FmB4Ex0q2nYbNfPq0ocJm3u0cWmgKcgGPPWtf"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


@nacelle.tool
def weather(city: str, days: int = 1) -> str:
    """Weather for a city.

    Args:
        city: The city.
        days: How many days.
    """
    return "sunny"


def wire(messages=(), **request):
    request.setdefault("system", "Be brief.")
    return to_wire(nacelle.Request(**request), tuple(messages) or (user_text("Hi"),))


def block(value):
    return ProviderBlock("gemini", json.dumps(value, separators=(",", ":")))


def assistant(*parts):
    return Message(Role.ASSISTANT, parts)


def user(*parts):
    return Message(Role.USER, parts)


def test_a_first_turn_is_the_system_instruction_and_one_user_content():
    assert wire() == {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
                      "systemInstruction": {"parts": [{"text": "Be brief."}]}}
    assert "systemInstruction" not in wire(system="")


def test_a_tool_round_trip_pairs_each_call_with_its_response_by_id():
    messages = [
        user_text("Weather in Berlin, and the time?"),
        assistant(Reasoning("Two tools.", SIG, "gemini"), Text("Checking."),
                  ToolCall("call_a", "weather", '{"city": "Berlin"}'),
                  block({"thoughtSignature": "sig-call", "call": "call_a"}),
                  ToolCall("call_b", "clock", "")),
        user(ToolResult("call_a", "weather", "15°C"),
             ToolResult("call_b", "clock", "clock is broken", failed=True)),
    ]
    contents = wire(messages)["contents"]
    assert contents[1] == {"role": "model", "parts": [
        {"text": "Two tools.", "thought": True, "thoughtSignature": SIG},
        {"text": "Checking."},
        {"functionCall": {"id": "call_a", "name": "weather", "args": {"city": "Berlin"}},
         "thoughtSignature": "sig-call"},
        {"functionCall": {"id": "call_b", "name": "clock", "args": {}}}]}
    assert contents[2] == {"role": "user", "parts": [
        {"functionResponse": {"id": "call_a", "name": "weather", "response": {"output": "15°C"}}},
        {"functionResponse": {"id": "call_b", "name": "clock",
                              "response": {"error": "clock is broken"}}}]}


def test_a_text_signature_goes_back_on_the_text_it_came_on():
    contents = wire([user_text("Q"), assistant(Text("A."), block({"thoughtSignature": SIG})),
                     user_text("Q2")])["contents"]
    assert contents[1]["parts"] == [{"text": "A.", "thoughtSignature": SIG}]


def test_a_signature_with_no_text_before_it_goes_back_on_an_empty_text_part():
    contents = wire([user_text("Q"), assistant(block({"thoughtSignature": SIG})),
                     user_text("Q2")])["contents"]
    assert contents[1]["parts"] == [{"text": "", "thoughtSignature": SIG}]


def test_a_part_nacelle_does_not_model_goes_back_as_it_came():
    code = {"executableCode": {"language": "PYTHON", "code": "print(4)"}}
    contents = wire([user_text("Q"), assistant(block({"part": code}), Text("4")),
                     user_text("Q2")])["contents"]
    assert contents[1]["parts"] == [code, {"text": "4"}]


def test_another_providers_reasoning_and_blocks_and_finish_parts_are_not_sent():
    contents = wire([user_text("Q"), assistant(
        Reasoning("x", "sig", "anthropic"), ProviderBlock("openai-responses", "{}"),
        Text("A"), Finish(Stop.END)), user_text("Q2")])["contents"]
    assert contents[1]["parts"] == [{"text": "A"}]


def test_an_unfinished_call_its_signature_and_its_result_are_not_sent():
    contents = wire([
        user_text("Q"),
        assistant(Text("Calling."), ToolCall("call_cut", "weather", '{"ci', finished=False),
                  block({"thoughtSignature": SIG, "call": "call_cut"})),
        user(ToolResult("call_cut", "weather", "not run", failed=True), Text("Go on."))])[
        "contents"]
    assert contents[1]["parts"] == [{"text": "Calling."}]
    assert contents[2]["parts"] == [{"text": "Go on."}]


def test_images_and_documents_are_inline_data_in_messages_and_tool_responses():
    pdf = Document.from_bytes(b"%PDF-1.4\n%%EOF\n", title="page")
    image = Image("image/png", PNG)
    contents = to_wire(nacelle.Request(system=""), (
        user(Text("Look."), image, pdf), assistant(ToolCall("c1", "screenshot", "{}")),
        user(ToolResult("c1", "screenshot", "The page.",
                        content=(Text("The page."), image, pdf)))),
        model="gemini-3-pro-preview")["contents"]
    assert contents[0]["parts"] == [
        {"text": "Look."}, {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"inlineData": {"mimeType": "application/pdf", "data": pdf.data}}]
    assert contents[2]["parts"] == [{"functionResponse": {
        "id": "c1", "name": "screenshot", "response": {"output": "The page."},
        "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG}},
                  {"inlineData": {"mimeType": "application/pdf", "data": pdf.data}}]}}]


def test_a_gemini_2_model_gets_a_tools_media_after_the_responses():
    pdf = Document.from_bytes(b"%PDF-1.4\n%%EOF\n", title="page")
    image = Image("image/png", PNG)
    messages = (user_text("Look."), assistant(ToolCall("c1", "screenshot", "{}"),
                                              ToolCall("c2", "clock", "{}")),
                user(ToolResult("c1", "screenshot", "The page.",
                                content=(Text("The page."), image, pdf)),
                     ToolResult("c2", "clock", "12:00"), Text("Go on.")))
    for model in ("gemini-2.5-flash", "models/gemini-2.0-flash", "gemini-1.5-pro"):
        parts = to_wire(nacelle.Request(system=""), messages, model=model)["contents"][2][
            "parts"]
        [screenshot, clock] = [p["functionResponse"] for p in parts[:2]]
        assert "parts" not in screenshot and clock["response"] == {"output": "12:00"}
        assert screenshot["response"]["output"].startswith("The page.\n[image: image/png")
        assert "sent after the tool results" in screenshot["response"]["output"]
        assert parts[2:] == [
            {"text": "[tool call c1 (screenshot) returned these]"},
            {"inlineData": {"mimeType": "image/png", "data": PNG}},
            {"inlineData": {"mimeType": "application/pdf", "data": pdf.data}},
            {"text": "Go on."}]
    from nacelle.backends.gemini.wire import media_inside

    assert [media_inside(m) for m in ("gemini-3-flash-preview", "gemini-3.5-flash",
                                      "tunedModels/x", "gemini-2.5-pro", "gemini-2-flash")] == [
        True, True, True, False, False]


def test_tools_are_function_declarations_with_their_json_schema_as_it_is():
    body = wire(tools=(weather,))
    assert body["tools"] == [{"functionDeclarations": [{
        "name": "weather", "description": weather.description,
        "parametersJsonSchema": weather.schema}]}]
    assert "toolConfig" not in body
    assert "days" not in body["tools"][0]["functionDeclarations"][0][
        "parametersJsonSchema"]["required"]  # optional stays optional


@pytest.mark.parametrize("settings, config", [
    (ModelSettings(tool_choice="auto"), {"mode": "AUTO"}),
    (ModelSettings(tool_choice="required"), {"mode": "ANY"}),
    (ModelSettings(tool_choice="none"), {"mode": "NONE"}),
    (ModelSettings(tool_choice="weather"), {"mode": "ANY", "allowedFunctionNames": ["weather"]}),
])
def test_tool_choice_is_the_function_calling_config(settings, config):
    assert wire(tools=(weather,), settings=settings)["toolConfig"] == {
        "functionCallingConfig": config}


@pytest.mark.parametrize("thinking, config", [
    (Thinking(budget=2048), {"thinkingBudget": 2048}),
    (Thinking(budget=2048, show=True), {"thinkingBudget": 2048, "includeThoughts": True}),
    (Thinking(effort=Effort.NONE, show=True), {"thinkingBudget": 0}),
    (Thinking(effort=Effort.LOW), {"thinkingLevel": "low"}),
    (Thinking(effort=Effort.MAX, show=True), {"thinkingLevel": "high", "includeThoughts": True}),
    (Thinking(show=True), {"includeThoughts": True}),
])
def test_thinking_is_the_thinking_config(thinking, config):
    assert wire(thinking=thinking)["generationConfig"]["thinkingConfig"] == config
    assert "generationConfig" not in wire(thinking=Thinking())


def test_a_gemini_2_model_is_given_an_effort_as_a_budget():
    def config(effort, model):
        request = nacelle.Request(system="", thinking=Thinking(effort=effort))
        return to_wire(request, (user_text("Hi"),), model=model)["generationConfig"][
            "thinkingConfig"]

    assert [config(e, "gemini-2.5-pro")["thinkingBudget"] for e in (
        Effort.MINIMAL, Effort.LOW, Effort.MEDIUM, Effort.HIGH, Effort.MAX)] == [
        512, 1024, 8192, 24576, 24576]
    assert config(Effort.NONE, "gemini-2.5-flash") == {"thinkingBudget": 0}
    assert config(Effort.MEDIUM, "gemini-3-pro-preview") == {"thinkingLevel": "medium"}


def test_settings_and_a_chosen_output_cap_are_the_generation_config():
    body = wire(max_tokens=512, settings=ModelSettings(
        temperature=0.2, top_p=0.9, top_k=40, stop=("END",), seed=7,
        extra_body={"safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT",
                                        "threshold": "BLOCK_NONE"}]}))
    assert body["generationConfig"] == {"temperature": 0.2, "topP": 0.9, "topK": 40,
                                        "seed": 7, "stopSequences": ["END"],
                                        "maxOutputTokens": 512}
    assert body["safetySettings"][0]["threshold"] == "BLOCK_NONE"


def test_mcp_servers_are_unsupported():
    with pytest.raises(Unsupported, match="MCP"):
        wire(mcp=(nacelle.MCPServer("docs", "https://example.com/mcp"),))


def test_the_providers_own_tools_are_tool_entries_of_their_own():
    body = wire(tools=(weather, nacelle.native.web_search(), nacelle.native.web_fetch(),
                       nacelle.native.code_execution()), settings=ModelSettings(tool_choice="auto"))
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "weather"
    assert body["tools"][1:] == [{"codeExecution": {}}, {"urlContext": {}},
                                 {"googleSearch": {}}]
    alone = wire(tools=(nacelle.native.web_search(),), settings=ModelSettings(tool_choice="auto"))
    assert alone["tools"] == [{"googleSearch": {}}] and "toolConfig" not in alone


def test_an_agent_falls_back_from_a_native_tool_option_gemini_cannot_send():
    from nacelle.backends import gemini

    backend = gemini.Backend("k", model="gemini-2.5-flash")
    agent = nacelle.Agent(backend, "s", tools=[nacelle.native.web_search()])
    assert agent is not None
    with pytest.raises(Unsupported, match="allowed_domains"):
        nacelle.Agent(backend, "s", tools=[nacelle.native.web_search(
            allowed_domains=["example.com"])])


def test_a_call_whose_input_is_not_a_json_object_cannot_be_sent():
    for text in ('{"city": ', "[1, 2]"):
        with pytest.raises(ConfigError, match="message 1"):
            wire([user_text("Q"), assistant(ToolCall("c", "weather", text)),
                  user(ToolResult("c", "weather", "x"))])


def test_a_block_of_this_protocol_that_is_neither_a_part_nor_a_signature_is_refused():
    with pytest.raises(ConfigError, match="thoughtSignature"):
        wire([user_text("Q"), assistant(ProviderBlock("gemini", "[]")), user_text("Q2")])


def test_nothing_a_caller_passed_is_mutated():
    messages = [user_text("Q"), assistant(Text("A."), block({"thoughtSignature": SIG}),
                                          block({"part": {"executableCode": {"code": "1"}}})),
                user_text("Q2")]
    schema = copy.deepcopy(weather.schema)
    extra = {"cachedContent": "cachedContents/abc"}
    body = wire(messages, tools=(weather,), settings=ModelSettings(extra_body=extra))
    body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["x"] = 1
    body["contents"][1]["parts"][1]["executableCode"]["code"] = "2"
    assert weather.schema == schema and extra == {"cachedContent": "cachedContents/abc"}
    assert wire(messages)["contents"][1]["parts"][1] == {"executableCode": {"code": "1"}}


def test_an_empty_user_message_is_one_empty_text_part():
    assert wire([user()])["contents"] == [{"role": "user", "parts": [{"text": ""}]}]
