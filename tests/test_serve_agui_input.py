"""nacelle.serve.agui_input: AG-UI's RunAgentInput read into a nacelle conversation,
the front end's tools and the resume entries; every wrong shape an InputError naming
its field. The shapes are @ag-ui/core 1.0's RunAgentInputSchema and MessageSchema."""

import pytest

from nacelle.messages import Document, Image, Message, Role, Text, ToolCall, ToolResult
from nacelle.serve.agui_input import ClientToolSpec, InputError, ResumeEntry, parse_input

PNG = "iVBORw0KGgo="


def body(messages, **more):
    return {"threadId": "t", "runId": "r", "messages": messages, **more}


def test_a_user_message_and_the_fields_nacelle_does_not_use():
    run = parse_input(body([{"id": "1", "role": "user", "content": "hi"}], state={"x": 1},
                           forwardedProps={"y": 2}, parentRunId="p", protocolVersion="1.0",
                           somethingNew=True))
    assert (run.thread_id, run.run_id) == ("t", "r")
    assert run.messages == (Message(Role.USER, (Text("hi"),)),)
    assert run.tools == () and run.resume == () and dict(run.answers) == {}


def test_a_conversation_with_calls_and_results_becomes_alternating_turns():
    run = parse_input(body([
        {"id": "1", "role": "user", "content": "add 1 and 2"},
        {"id": "2", "role": "assistant", "content": "Adding.", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}}]},
        {"id": "3", "role": "tool", "toolCallId": "c1", "content": "3"},
        {"id": "4", "role": "user", "content": "thanks"},
    ]))
    assert run.messages == (
        Message(Role.USER, (Text("add 1 and 2"),)),
        Message(Role.ASSISTANT, (Text("Adding."), ToolCall("c1", "add", '{"a":1}'))),
        Message(Role.USER, (ToolResult("c1", "add", "3"), Text("thanks"))),
    )
    assert run.answers["c1"] == ToolResult("c1", "add", "3")


def test_a_tool_message_with_an_error_is_a_failed_result():
    run = parse_input(body([
        {"id": "1", "role": "user", "content": "go"},
        {"id": "2", "role": "assistant", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
        {"id": "3", "role": "tool", "toolCallId": "c1", "content": "", "error": "it broke"},
    ]))
    assert run.answers["c1"] == ToolResult("c1", "x", "it broke", failed=True)


def test_a_call_no_tool_message_answers_gets_a_failed_result():
    run = parse_input(body([
        {"id": "1", "role": "user", "content": "go"},
        {"id": "2", "role": "assistant", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
        {"id": "3", "role": "user", "content": "never mind"},
    ]))
    last = run.messages[-1]
    assert last.parts[0] == ToolResult("c1", "x", "the application sent no result for this call",
                                       failed=True)
    assert last.parts[1] == Text("never mind")


def test_inline_images_and_documents_are_parts():
    run = parse_input(body([{"id": "1", "role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image", "source": {"type": "data", "value": PNG, "mimeType": "image/png"}},
        {"type": "document", "source": {"type": "data", "value": "aGk=",
                                        "mimeType": "text/plain"}, "metadata": {"title": "n"}},
    ]}]))
    assert run.messages[0].parts == (Text("look"), Image("image/png", PNG),
                                      Document("text/plain", "aGk=", "n"))


def test_system_developer_and_context_join_the_last_user_message_as_context():
    run = parse_input(body([
        {"id": "0", "role": "system", "content": "Answer in French."},
        {"id": "1", "role": "user", "content": "hi"},
        {"id": "2", "role": "reasoning", "content": "thinking"},
        {"id": "3", "role": "activity", "activityType": "x", "content": {}},
    ], context=[{"description": "user's name", "value": "Ada"}]))
    (message,) = run.messages
    assert message.parts[0] == Text("hi")
    assert message.parts[1] == Text("Context from the application:\n- Answer in French.\n"
                                    "- user's name: Ada")


def test_tools_and_resume_entries():
    run = parse_input(body([], tools=[
        {"name": "confirm", "description": "Ask.", "parameters": {
            "type": "object", "properties": {"q": {"type": "string"}}}},
        {"name": "bare", "description": ""}],
        resume=[{"interruptId": "c1", "status": "resolved", "payload": {"approved": True}},
                {"interruptId": "c2", "status": "cancelled"}]))
    assert run.tools == (
        ClientToolSpec("confirm", "Ask.", {"type": "object", "properties": {"q": {"type": "string"}}}),
        ClientToolSpec("bare", "", {"type": "object", "properties": {}}))
    assert run.resume == (ResumeEntry("c1", "resolved", {"approved": True}),
                          ResumeEntry("c2", "cancelled"))


@pytest.mark.parametrize("data, says", [
    ("nope", "RunAgentInput"),
    ({"runId": "r", "messages": []}, "threadId"),
    ({"threadId": "t" * 600, "runId": "r", "messages": []}, "threadId is longer"),
    ({"threadId": "t", "runId": "", "messages": []}, "runId"),
    ({"threadId": "t", "runId": "r"}, "messages must be a list"),
    (body([1]), "messages[0] must be an object"),
    (body([{"id": "1", "role": "user", "content": 5}]), "messages[0].content"),
    (body([{"id": "1", "role": "user", "content": [{"type": "audio", "source": {}}]}]),
     "audio"),
    (body([{"id": "1", "role": "user", "content": [
        {"type": "image", "source": {"type": "url", "value": "http://x/y.png"}}]}]),
     "fetches no URL"),
    (body([{"id": "1", "role": "user", "content": [
        {"type": "image", "source": {"type": "data", "value": "%%%", "mimeType": "image/png"}}]}]),
     "not base64"),
    (body([{"id": "1", "role": "user", "content": [
        {"type": "image", "source": {"type": "data", "value": PNG, "mimeType": "image/tiff"}}]}]),
     "mimeType"),
    (body([{"id": "1", "role": "tool", "toolCallId": "c9", "content": "x"}]),
     "names no earlier"),
    (body([{"id": "1", "role": "assistant", "toolCalls": [{"id": "c1", "function": {}}]}]),
     "function.name"),
    (body([{"id": "1", "role": "assistant", "toolCalls": [
        {"id": "c1", "function": {"name": "a", "arguments": "{}"}},
        {"id": "c1", "function": {"name": "a", "arguments": "{}"}}]}]), "earlier call"),
    (body([{"id": "1", "role": "assistant", "toolCalls": [
        {"id": "c1", "function": {"name": "a", "arguments": "{}"}}]},
        {"id": "2", "role": "tool", "toolCallId": "c1", "content": "x"},
        {"id": "3", "role": "tool", "toolCallId": "c1", "content": "y"}]), "second time"),
    (body([], tools=[{"name": "a", "parameters": {"type": "string"}}]), "tools[0].parameters"),
    (body([], tools=[{"name": "a"}, {"name": "a"}]), "twice"),
    (body([], tools={}), "tools must be a list"),
    (body([], context=[{"description": "d"}]), "context[0].value"),
    (body([], resume=[{"interruptId": "c1", "status": "maybe"}]), "resume[0].status"),
])
def test_a_wrong_shape_is_an_input_error_naming_the_field(data, says):
    with pytest.raises(InputError) as raised:
        parse_input(data)
    assert says in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_the_input_is_not_changed():
    data = body([{"id": "1", "role": "user", "content": "hi"}],
                context=[{"description": "d", "value": "v"}])
    before = repr(data)
    parse_input(data)
    assert repr(data) == before


def test_twenty_thousand_answered_calls_are_read_in_linear_time():
    import time

    n = 20_000
    messages = [{"id": "u", "role": "user", "content": "go"},
                {"id": "a", "role": "assistant", "toolCalls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": "x", "arguments": "{}"}}
                    for i in range(n)]}]
    messages += [{"id": f"t{i}", "role": "tool", "toolCallId": f"c{i}", "content": "r"}
                 for i in range(n)]
    started = time.perf_counter()
    run = parse_input(body(messages))
    assert time.perf_counter() - started < 5  # the quadratic reader took 78 s
    assert len(run.messages[-1].parts) == n
