"""nacelle tools as an MCP server offers them (nacelle.mcp.server.served): the tool
list with its annotations, content blocks for media, and a call run through run_tool
— validation, the tool's timeout and result cap, cancellation, progress."""

import base64
import threading
import time

import pytest

import nacelle
from nacelle import Agent, Document, Image, Text, ToolContext
from nacelle.errors import ConfigError
from nacelle.mcp import MCPError
from nacelle.mcp.server.served import ServedTools, content_blocks, tool_entry
from nacelle.testing import ScriptedBackend

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")


@nacelle.tool(read_only=True, idempotent=True, open_world=False)
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


class Bare:
    """A tool that declares no metadata: MCP's cautious defaults."""

    name = "bare"
    description = "Does something."
    schema = {"type": "object", "properties": {}}

    def run(self, input, ctx):
        return "done"


def call(served, name, arguments, **options):
    options.setdefault("cancelled", threading.Event())
    return served.call(name, arguments, call_id="c1", **options)


def test_tool_metadata_becomes_mcp_annotations_with_mcps_defaults_for_a_silent_tool():
    assert tool_entry(add) == {
        "name": "add", "description": "Add two whole numbers.",
        "inputSchema": add.schema,
        "annotations": {"readOnlyHint": True, "destructiveHint": False,
                        "idempotentHint": True, "openWorldHint": False}}
    assert tool_entry(Bare())["annotations"] == {
        "readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
        "openWorldHint": True}


def test_an_agent_is_served_as_one_subagent_tool():
    served = ServedTools(Agent(ScriptedBackend(["Paris."]), "Answer briefly."))
    (entry,) = served.listing()
    assert entry["name"] == "subagent" and entry["inputSchema"]["required"] == ["task"]
    result = call(served, "subagent", {"task": "Capital of France?"})
    assert result == {"content": [{"type": "text", "text": "Paris."}], "isError": False}


def test_a_toolset_is_asked_again_at_every_listing():
    class Growing:
        def __init__(self):
            self.tools = [add]

        def current(self):
            return list(self.tools)

    toolset = Growing()
    served = ServedTools([toolset])
    assert [t["name"] for t in served.listing()] == ["add"]
    toolset.tools.append(Bare())
    assert [t["name"] for t in served.listing()] == ["add", "bare"]


def test_what_is_not_a_tool_or_two_tools_of_one_name_fail_when_the_server_is_made():
    with pytest.raises(ConfigError, match="not a Tool"):
        ServedTools([add, "add"])
    with pytest.raises(ConfigError, match="unique"):
        ServedTools([add, add])
    with pytest.raises(ConfigError, match="at least one tool"):
        ServedTools([])


def test_media_parts_become_text_image_and_embedded_resource_blocks():
    pdf = Document.from_bytes(b"%PDF-1.4\n%%EOF\n", title="q3 report.pdf")
    note = Document.from_bytes("naïve\n".encode(), title="file:///tmp/note.txt")
    blocks = content_blocks([Text("see:"), Image.from_bytes(PNG), pdf, note])
    assert blocks[0] == {"type": "text", "text": "see:"}
    assert blocks[1] == {"type": "image", "data": base64.b64encode(PNG).decode(),
                         "mimeType": "image/png"}
    assert blocks[2] == {"type": "resource", "resource": {
        "uri": "nacelle:document/q3%20report.pdf", "mimeType": "application/pdf",
        "blob": pdf.data}}
    assert blocks[3] == {"type": "resource", "resource": {
        "uri": "file:///tmp/note.txt", "mimeType": "text/plain", "text": "naïve\n"}}


def test_a_call_answers_text_and_a_failure_or_bad_input_is_an_error_result():
    @nacelle.tool
    def broken() -> str:
        """Fails."""
        raise RuntimeError("no luck")

    served = ServedTools([add, broken])
    assert call(served, "add", {"a": 2, "b": 3}) == {
        "content": [{"type": "text", "text": "5"}], "isError": False}
    assert call(served, "broken", {}) == {
        "content": [{"type": "text", "text": "no luck"}], "isError": True}
    invalid = call(served, "add", {"a": 2})
    assert invalid["isError"] and "'b' is a required property" in invalid["content"][0]["text"]


def test_an_unknown_tool_is_a_json_rpc_invalid_params_error():
    with pytest.raises(MCPError) as caught:
        call(ServedTools([add]), "nope", {})
    assert caught.value.code == -32602 and "nope" in str(caught.value)


def test_the_tools_timeout_closes_the_call_and_cancels_its_context():
    seen = []

    @nacelle.tool(timeout=0.2)
    def slow(ctx: ToolContext) -> str:
        """Waits for its cancel."""
        seen.append(ctx.cancelled.wait(5))
        return "late"

    started = time.monotonic()
    result = call(ServedTools([slow]), "slow", {})
    assert result == {"content": [{"type": "text", "text": "timed out after 0.2 s"}],
                      "isError": True}
    assert time.monotonic() - started < 2
    for _ in range(100):
        if seen:
            break
        time.sleep(0.01)
    assert seen == [True]


def test_the_servers_tool_timeout_applies_when_sooner_than_the_tools():
    @nacelle.tool(timeout=30)
    def slow(ctx: ToolContext) -> str:
        """Waits."""
        ctx.cancelled.wait(5)
        return "late"

    result = call(ServedTools([slow], tool_timeout=0.1), "slow", {})
    assert result["content"][0]["text"] == "timed out after 0.1 s"


def test_a_cancelled_request_gets_no_answer_and_its_tool_sees_the_cancel():
    seen = []

    @nacelle.tool
    def waits(ctx: ToolContext) -> str:
        """Waits for its cancel."""
        seen.append(ctx.cancelled.wait(5))
        return "done"

    from nacelle.context import CancelEvent

    cancel = CancelEvent()
    threading.Timer(0.1, cancel.set).start()
    assert call(ServedTools([waits]), "waits", {}, cancelled=cancel) is None
    for _ in range(100):
        if seen:
            break
        time.sleep(0.01)
    assert seen == [True]


def test_the_result_is_cut_at_the_tools_cap_else_the_servers():
    @nacelle.tool(max_result_chars=10)
    def own() -> str:
        """Long."""
        return "y" * 50

    @nacelle.tool
    def other() -> str:
        """Long."""
        return "z" * 50

    served = ServedTools([own, other], max_result_chars=20)
    own_text = call(served, "own", {})["content"][0]["text"]
    other_text = call(served, "other", {})["content"][0]["text"]
    assert own_text.startswith("y" * 10) and "y" * 11 not in own_text
    assert other_text.startswith("z" * 20) and "z" * 21 not in other_text


def test_progress_the_tool_reports_is_handed_on():
    @nacelle.tool
    def counts(ctx: ToolContext) -> str:
        """Counts."""
        ctx.progress(1, 2, "half")
        ctx.progress(2, 2)
        return "ok"

    notes = []
    call(ServedTools([counts]), "counts", {}, progress=lambda *note: notes.append(note))
    assert notes == [(1.0, 2, "half"), (2.0, 2, "")]
