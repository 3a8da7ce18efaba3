"""tools/call results as model text and as parts (images and PDFs checked against
their bytes), with plain dicts (the end-to-end case, every block kind from a real
server process, is in test_mcp_client.py), resource contents as parts and prompt
messages as nacelle messages."""

import base64
import time

import pytest

from nacelle import Document, Image, Text
from nacelle.messages import MAX_IMAGE_BYTES
from nacelle.mcp.content import result_parts, result_text

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")
GIF = base64.b64decode("R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==")
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


def b64(data):
    return base64.b64encode(data).decode("ascii")


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
        {"role": "user", "content": {"type": "image", "data": b64(GIF), "mimeType": "image/gif"}},
        {"role": "assistant", "content": {"type": "resource", "resource": {
            "uri": "a://t", "text": "embedded"}}},
        {"role": "user", "content": {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}}]})
    assert messages == [Message(Role.USER, (Text("Look:"),)),
                        Message(Role.USER, (Image("image/gif", b64(GIF)),)),
                        Message(Role.ASSISTANT, (Text("embedded"),)),
                        Message(Role.USER, (Text("[audio: audio/wav, 3 bytes]"),))]


def test_a_prompt_message_with_a_role_nacelle_has_no_word_for_is_refused():
    from nacelle.mcp import MCPError
    from nacelle.mcp.content import prompt_messages

    with pytest.raises(MCPError, match="cannot hold"):
        prompt_messages({"messages": [{"role": "system", "content": {"type": "text"}}]})


def test_a_prompt_image_whose_bytes_are_no_image_is_a_line_saying_so():
    from nacelle import Message, Role
    from nacelle.mcp.content import prompt_messages

    [message] = prompt_messages({"messages": [
        {"role": "user", "content": {"type": "image", "data": "AAAA", "mimeType": "image/gif"}}]})
    [part] = message.parts
    assert message.role is Role.USER and isinstance(part, Text)
    assert part.text.startswith("[image: image/gif, 3 bytes, not shown: ")


# -- tools/call results as parts ------------------------------------------------------------


def test_image_blocks_become_images_between_their_text():
    parts = result_parts({"content": [
        {"type": "text", "text": "Here:"},
        {"type": "image", "data": b64(PNG), "mimeType": "image/png"},
        {"type": "image", "data": b64(GIF)},  # no type said: the bytes name it
        {"type": "text", "text": "done"}]})
    assert parts == [Text("Here:"), Image("image/png", b64(PNG)), Image("image/gif", b64(GIF)),
                     Text("done")]


def test_an_image_the_bytes_contradict_or_that_is_not_base64_is_a_line_saying_why():
    parts = result_parts({"content": [
        {"type": "image", "data": b64(GIF), "mimeType": "image/png"},
        {"type": "image", "data": b64(b"<svg/>"), "mimeType": "image/svg+xml"},
        {"type": "image", "data": b64(PNG)[:-4] + "!!!!", "mimeType": "image/png"},
        {"type": "image", "data": b64(PNG)[:40] + "\n" + b64(PNG)[40:], "mimeType": "image/png"},
        {"type": "image", "mimeType": "image/png"},
        {"type": "image", "data": "ÿÿÿÿ", "mimeType": "image/png"}]})
    assert all(isinstance(part, Text) for part in parts)
    texts = [part.text for part in parts]
    assert texts[0].startswith("[image: image/png, 43 bytes, not shown: ")
    assert "the bytes are image/gif" in texts[0]
    assert texts[1].startswith("[image: image/svg+xml, 6 bytes, not shown: ")
    assert "not well-formed base64" in texts[2] and "not well-formed base64" in texts[3]
    assert texts[4] == "[image: image/png, no data, not shown: no base64 data]"
    assert "not well-formed base64" in texts[5]  # not even ASCII


def test_an_image_past_the_cap_is_refused_by_its_length_before_anything_is_decoded():
    huge = "A" * ((MAX_IMAGE_BYTES + 2) // 3 * 4 + 4)
    start = time.perf_counter()
    [part] = result_parts({"content": [{"type": "image", "data": huge, "mimeType": "image/png"}]})
    assert isinstance(part, Text) and f"larger than {MAX_IMAGE_BYTES:,} bytes" in part.text
    assert time.perf_counter() - start < 1.0
    # Within the cap, the length passes and the bytes decide.
    [part] = result_parts({"content": [{"type": "image", "mimeType": "image/png",
                                        "data": "A" * (MAX_IMAGE_BYTES // 3 * 4)}]})
    assert "larger than" not in part.text and "no type nacelle knows" in part.text


def test_embedded_resources_become_text_documents_images_or_a_line_saying_what_they_are():
    parts = result_parts({"content": [
        {"type": "resource", "resource": {"uri": "mem://note", "mimeType": "text/plain",
                                          "text": "inline note"}},
        {"type": "resource", "resource": {"uri": "file:///r.pdf", "mimeType": "application/pdf",
                                          "blob": b64(PDF)}},
        {"type": "resource", "resource": {"uri": "mem://dot", "mimeType": "image/png",
                                          "blob": b64(PNG)}},
        {"type": "resource", "resource": {"uri": "mem://t", "mimeType": "text/plain",
                                          "blob": b64("größe".encode())}},
        {"type": "resource", "resource": {"uri": "mem://z", "mimeType": "application/zip",
                                          "blob": "AAAA"}},
        {"type": "resource", "resource": {"uri": "mem://fake.pdf",
                                          "mimeType": "application/pdf", "blob": "AAAA"}}]})
    assert parts[:5] == [
        Text("[resource <mem://note>, text/plain]\ninline note"),
        Document("application/pdf", b64(PDF), "file:///r.pdf"),
        Image("image/png", b64(PNG)),
        Text("[resource <mem://t>, text/plain]\ngröße"),
        Text("[resource <mem://z>, application/zip, 3 bytes]")]
    assert parts[5].text.startswith("[document: application/pdf, 3 bytes, not shown: ")


def test_audio_becomes_a_line_with_its_type_and_size_and_links_a_line_with_the_uri():
    assert result_parts({"content": [
        {"type": "audio", "data": b64(b"RIFF" + bytes(2000)), "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt",
         "mimeType": "text/plain", "description": "a file"}]}) == [
        Text("[audio: audio/wav, 2,004 bytes]"),
        Text("[resource link: a.txt <file:///a.txt>, text/plain: a file]")]


def test_parts_keep_structured_content_empty_text_and_unknown_blocks_as_text_did():
    assert result_parts({"content": [], "structuredContent": {"n": 1}}) == [Text('{"n": 1}')]
    assert result_parts({"content": [{"type": "text", "text": "x"}],
                         "structuredContent": {"n": 1}}) == [Text("x")]
    assert result_parts({}) == []
    assert result_parts({"content": [{"type": "text", "text": ""}, {"type": "hologram"},
                                     "junk"]}) == [Text("[hologram content]"),
                                                   Text("[unreadable content: junk]")]


def test_turning_a_result_into_parts_does_not_mutate_it():
    result = {"content": [{"type": "image", "data": b64(PNG), "mimeType": "image/png"},
                          {"type": "resource", "resource": {"uri": "u", "blob": b64(PDF),
                                                            "mimeType": "application/pdf"}}]}
    before = repr(result)
    result_parts(result)
    assert repr(result) == before


def test_resource_contents_hold_pdfs_as_documents_and_text_blobs_as_text():
    from nacelle.mcp.content import resource_parts

    assert resource_parts({"contents": [
        {"uri": "file:///r.pdf", "mimeType": "application/pdf", "blob": b64(PDF)},
        {"uri": "mem://t", "mimeType": "text/markdown", "blob": b64(b"# hi")},
        {"uri": "mem://x", "mimeType": "text/plain", "blob": b64(b"\x00\x01")},
        {"uri": "x" * 300, "mimeType": "application/pdf", "blob": b64(PDF)}]})[:3] == [
        Document("application/pdf", b64(PDF), "file:///r.pdf"),
        Text("# hi"),
        Text("[resource <mem://x>: text/plain, 2 bytes]")]
    [*_, long] = resource_parts({"contents": [
        {"uri": "x" * 300, "mimeType": "application/pdf", "blob": b64(PDF)}]})
    assert long.title.startswith("x" * 200) and len(long.title) < 230
