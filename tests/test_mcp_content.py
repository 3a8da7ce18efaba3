"""tools/call results as model text, with plain dicts (the end-to-end case, every block
kind from a real server process, is in test_mcp.py)."""

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
