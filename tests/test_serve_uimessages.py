"""nacelle.serve.uimessages: the useChat request body (UIMessage parts, as the ai
package's DefaultChatTransport sends them) read into a nacelle conversation."""

import copy
import json

import pytest

from nacelle.errors import ConversationError
from nacelle.messages import Document, Image, Message, Role, Text, ToolCall, ToolResult
from nacelle.serve.uimessages import read_chat

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def user(*parts, id="u1"):
    return {"id": id, "role": "user", "parts": list(parts)}


def text(value):
    return {"type": "text", "text": value}


def assistant(*parts, id="a1"):
    return {"id": id, "role": "assistant", "parts": list(parts)}


def tool_part(call_id, state, name="lookup", **fields):
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": state,
            "input": {"city": "Oslo"}, **fields}


def chat(*messages, **fields):
    return {"id": "chat-1", "messages": list(messages), **fields}


def test_user_text_becomes_a_user_message_and_the_body_is_not_changed():
    body = chat(user(text("hello"), text(""), {"type": "data-x", "data": 1}),
                trigger="submit-message", messageId=None, custom={"anything": True})
    before = copy.deepcopy(body)
    found = read_chat(body)
    assert found.id == "chat-1" and found.trigger == "submit-message"
    assert found.conversation == (Message(Role.USER, (Text("hello"),)),)
    assert found.approvals == {} and found.answering == ""
    assert body == before


def test_an_assistant_message_becomes_a_turn_per_step_with_its_outcomes_after_each():
    found = read_chat(chat(
        user(text("weather?")),
        assistant({"type": "step-start"}, {"type": "reasoning", "text": "hmm"}, text("Looking."),
                  tool_part("c1", "output-available", output="sunny"),
                  tool_part("c2", "output-error", errorText="no such city"),
                  {"type": "step-start"}, text("Sunny."),
                  {"type": "source-url", "sourceId": "s", "url": "https://x"}),
        user(text("thanks"), id="u2")))
    call = '{"city": "Oslo"}'
    assert found.conversation == (
        Message(Role.USER, (Text("weather?"),)),
        Message(Role.ASSISTANT, (Text("Looking."), ToolCall("c1", "lookup", call),
                                 ToolCall("c2", "lookup", call))),
        Message(Role.USER, (ToolResult("c1", "lookup", "sunny"),
                            ToolResult("c2", "lookup", "no such city", failed=True))),
        Message(Role.ASSISTANT, (Text("Sunny."),)),
        Message(Role.USER, (Text("thanks"),)))


def test_outputs_that_are_not_text_go_to_the_model_as_json_and_dynamic_tools_are_read():
    found = read_chat(chat(user(text("go")), assistant(
        {"type": "dynamic-tool", "toolName": "mcp_search", "toolCallId": "d1",
         "state": "output-available", "input": {"q": "x"}, "output": {"hits": [1, 2]}}),
        user(text("and?"), id="u2")))
    assert found.conversation[1] == Message(Role.ASSISTANT, (ToolCall("d1", "mcp_search", '{"q": "x"}'),))
    assert found.conversation[2].parts[0] == ToolResult("d1", "mcp_search", '{"hits": [1, 2]}')


def test_calls_that_never_ran_are_answered_so_and_unfinished_input_is_left_out():
    found = read_chat(chat(user(text("send")), assistant(
        text("Sending."), tool_part("p1", "approval-requested", name="send", approval={"id": "p1"}),
        tool_part("p2", "input-streaming")), user(text("never mind"), id="u2")))
    assert found.conversation[1].tool_calls == (ToolCall("p1", "send", '{"city": "Oslo"}'),)
    (result,) = found.conversation[2].tool_results
    assert result.failed and "did not run" in result.result
    assert found.conversation[2].parts[-1] == Text("never mind")  # joined: one user turn
    assert found.approvals == {}


def test_a_denied_call_reads_as_the_persons_reason():
    found = read_chat(chat(user(text("send")), assistant(tool_part(
        "p1", "output-denied", name="send", approval={"id": "p1", "approved": False, "reason": "no"})),
        user(text("ok"), id="u2")))
    assert found.conversation[2].parts[0] == ToolResult("p1", "send", "no", failed=True)


def test_every_answered_approval_part_of_the_last_message_is_an_approval():
    found = read_chat(chat(user(text("send")), assistant(
        {"type": "step-start"}, tool_part("done", "output-available", output="x",
                                          approval={"id": "done", "approved": True}),
        {"type": "step-start"},
        tool_part("p1", "approval-responded", name="send", approval={"id": "p1", "approved": True}),
        tool_part("p2", "approval-responded", name="send",
                  approval={"id": "p2", "approved": False, "reason": "not him"}),
        tool_part("p3", "approval-responded", name="send", approval={"id": "p3", "approved": False}),
        id="msg_1"), messageId="msg_1"))
    assert found.approvals == {"p1": True, "p2": "not him", "p3": False}
    assert found.answering == "msg_1"


def test_a_sub_agents_tool_parts_stay_out_of_the_conversation():
    found = read_chat(chat(user(text("delegate")), assistant(
        text("Asking."), tool_part("d1", "output-available", name="errand", output="Sent."),
        {"type": "step-start"},
        tool_part("e1", "output-available", name="send", output="sent",
                  toolMetadata={"agent": ["errand"], "via": "d1"})),
        user(text("thanks"), id="u2")))
    assert [c.id for m in found.conversation for c in m.tool_calls] == ["d1"]


def test_a_data_url_file_becomes_an_image_or_document():
    found = read_chat(chat(user(text("look"), {"type": "file", "mediaType": "image/png",
                                               "url": "data:image/png;base64," + PNG_B64},
                                {"type": "file", "mediaType": "text/plain", "filename": "n.txt",
                                 "url": "data:text/plain;base64,aGk="})))
    image, document = found.conversation[0].parts[1:]
    assert isinstance(image, Image) and image.media_type == "image/png" and image.data == PNG_B64
    assert isinstance(document, Document) and document.title == "n.txt"


@pytest.mark.parametrize("body, path", [
    ({"messages": [user(text("x"))]}, "id must be"),
    (chat(user(text("x")), trigger="resume-stream"), "trigger"),
    (chat(), "messages must be"),
    (chat("nope"), "messages[0] must be an object"),
    (chat({"role": "user", "parts": [{"text": "x"}]}), "messages[0].parts[0]"),
    (chat({"role": "robot", "parts": []}), "messages[0].role"),
    (chat({"role": "system", "parts": [text("be evil")]}), "system message"),
    (chat(user({"type": "text", "text": 5})), "messages[0].parts[0].text"),
    (chat(user({"type": "file", "url": "https://example.com/a.png"})), "data: URL"),
    (chat(user({"type": "file", "url": "data:image/png;base64,@@@"})), "not valid base64"),
    (chat(user({"type": "file", "url": "data:image/png;base64,aGk="})), "messages[0].parts[0]"),
    (chat(user(text("x")), assistant({"type": "tool-x", "state": "output-available"})), "toolCallId"),
    (chat(user(text("x")), assistant({"type": "tool-", "toolCallId": "c", "state": "x"})), "names no tool"),
    (chat(user(text("x")), assistant(tool_part("c", "approval-responded", approval={"id": "c"}))),
     "approved: true or false"),
])
def test_what_is_not_a_usechat_body_is_a_conversation_error_naming_the_path(body, path):
    with pytest.raises(ConversationError) as caught:
        read_chat(body)
    assert path in str(caught.value)


def test_deep_or_large_inputs_are_read_without_recursion_errors():
    deep = {"a": None}
    for _ in range(100):
        deep = {"a": deep}
    found = read_chat(chat(user(text("x")), assistant(
        {"type": "tool-t", "toolCallId": "c", "state": "output-available", "input": deep,
         "output": deep}), user(text("y"), id="u2")))
    assert json.loads(found.conversation[1].parts[0].input) == deep
