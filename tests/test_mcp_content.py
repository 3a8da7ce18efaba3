"""tools/call results as model text, with plain dicts (the end-to-end case, every block
kind from a real server process, is in test_mcp_client.py), resource contents as
parts and prompt messages as nacelle messages."""

import pytest

from nacelle.mcp.content import result_text


def test_text_blocks_are_joined_by_newlines():
    assert result_text({"content": [{"type": "text", "text": "a"},
                                    {"type": "text", "text": "b"}]}) == "a\nb"


def test_structured_content_is_the_text_only_when_there_is_no_content_block():
    assert result_text({"content": [], "structuredContent": {"n": 1}}) == '{"n": 1}'
    assert result_text({"structuredContent": {"ü": 1}}) == '{"ü": 1}'
    assert result_text({"content": [{"type": "text", "text": "x"}],
                        "structuredContent": {"n": 1}}) == "x"


def test_an_empty_result_is_empty_text():
    assert result_text({}) == ""
    assert result_text({"content": None}) == ""


def test_binary_content_is_described_with_its_type_and_decoded_size():
    assert result_text({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/gif"}]}
                       ) == "[image: image/gif, 3 bytes]"
    assert result_text({"content": [{"type": "audio"}]}) == "[audio: unknown type, no data]"


def test_unknown_or_malformed_blocks_are_named_not_dropped():
    assert result_text({"content": [{"type": "hologram"}, "junk"]}) == (
        "[hologram content]\n[unreadable content: junk]")


def test_the_result_is_not_mutated():
    result = {"content": [{"type": "text", "text": "a"}], "structuredContent": {"n": [1]}}
    before = repr(result)
    result_text(result)
    assert repr(result) == before


def test_resource_contents_become_text_images_and_described_blobs():
    from nacelle import Image, Text
    from nacelle.mcp.content import resource_parts

    parts = resource_parts({"contents": [
        {"uri": "a://t", "mimeType": "text/plain", "text": "hello"},
        {"uri": "a://i", "mimeType": "image/png", "blob": "iVBORw0KGgo="},
        {"uri": "a://b", "mimeType": "application/zip", "blob": "AAAA"},
        {"uri": "a://n", "blob": "AAAA"}, "junk"]})
    assert parts == [Text("hello"), Image("image/png", "iVBORw0KGgo="),
                     Text("[resource <a://b>: application/zip, 3 bytes]"),
                     Text("[resource <a://n>: unknown type, 3 bytes]"),
                     Text("[unreadable content: junk]")]


def test_a_read_result_without_contents_is_an_mcp_error():
    from nacelle.mcp import MCPError
    from nacelle.mcp.content import prompt_messages, resource_parts

    with pytest.raises(MCPError, match="without a list of contents"):
        resource_parts({})
    with pytest.raises(MCPError, match="without a list of messages"):
        prompt_messages({"messages": "no"})


def test_prompt_messages_keep_their_roles_and_carry_images_and_resources():
    from nacelle import Image, Message, Role, Text
    from nacelle.mcp.content import prompt_messages

    messages = prompt_messages({"messages": [
        {"role": "user", "content": {"type": "text", "text": "Look:"}},
        {"role": "user", "content": {"type": "image", "data": "AAAA", "mimeType": "image/gif"}},
        {"role": "assistant", "content": {"type": "resource", "resource": {
            "uri": "a://t", "text": "embedded"}}},
        {"role": "user", "content": {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}}]})
    assert messages == [Message(Role.USER, (Text("Look:"),)),
                        Message(Role.USER, (Image("image/gif", "AAAA"),)),
                        Message(Role.ASSISTANT, (Text("embedded"),)),
                        Message(Role.USER, (Text("[audio: audio/wav, 3 bytes]"),))]


def test_a_prompt_message_with_a_role_nacelle_has_no_word_for_is_refused():
    from nacelle.mcp import MCPError
    from nacelle.mcp.content import prompt_messages

    with pytest.raises(MCPError, match="cannot hold"):
        prompt_messages({"messages": [{"role": "system", "content": {"type": "text"}}]})
