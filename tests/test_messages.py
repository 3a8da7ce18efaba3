"""Messages, parts, trim and the lossless JSON form."""

import dataclasses
import json

import pytest
from hypothesis import given, strategies as st

from nacelle.errors import ConfigError, ConversationError
from nacelle.events import Stop
from nacelle.messages import (
    MAX_DOCUMENT_BYTES, MAX_IMAGE_BYTES, Document, Finish, Image, Message, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult,
    assistant_text, dumps, loads, trim, user_text,
)

U, A = Role.USER, Role.ASSISTANT


def call(i):
    return Message(A, (ToolCall(f"c{i}", "t", "{}"),))


def result(i):
    return Message(U, (ToolResult(f"c{i}", "t", "ok"),))


def test_user_and_assistant_text_build_one_text_part():
    assert user_text("hi") == Message(U, (Text("hi"),))
    assert assistant_text("yo") == Message(A, (Text("yo"),))


def test_parts_given_as_a_list_become_a_tuple():
    m = Message(U, [Text("a")])
    assert m.parts == (Text("a"),) and hash(m) == hash(Message(U, (Text("a"),)))


def test_a_role_given_as_a_string_becomes_a_role():
    assert Message("assistant", ()).role is Role.ASSISTANT


def test_a_foreign_object_is_not_a_part():
    with pytest.raises(ConversationError, match="got dict"):
        Message(U, ({"type": "text"},))


def test_messages_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        user_text("x").parts = ()  # type: ignore[misc]


def test_message_helpers_read_text_calls_and_results():
    m = Message(A, (Text("a"), ToolCall("1", "t", "{}"), Text("b")))
    assert m.text == "ab" and m.tool_calls == (ToolCall("1", "t", "{}"),)
    assert result(1).tool_results == (ToolResult("c1", "t", "ok"),)


def test_image_repr_does_not_dump_the_data():
    assert "<4000 base64 chars>" in repr(Image("image/png", "A" * 4000))


# -- trim ------------------------------------------------------------------------

def test_trim_keeps_the_newest_messages():
    conv = [user_text(str(i)) for i in range(5)]
    kept, dropped = trim(conv, 2)
    assert kept == conv[3:] and dropped == 3


def test_trim_keeps_everything_when_there_is_room():
    conv = [user_text("a"), assistant_text("b")]
    assert trim(conv, 5) == (conv, 0)


def test_trim_advances_past_a_cut_call_result_pair():
    conv = [user_text("q"), call(1), result(1), assistant_text("done")]
    kept, dropped = trim(conv, 2)  # would start with the result of call 1
    assert kept == [assistant_text("done")] and dropped == 3


def test_trim_may_start_with_a_call_whose_result_follows():
    conv = [user_text("q"), call(1), result(1), assistant_text("done")]
    assert trim(conv, 3) == (conv[1:], 1)


def test_trim_to_zero_keeps_nothing():
    assert trim([user_text("a")], 0) == ([], 1)


def test_trim_refuses_a_negative_keep():
    with pytest.raises(ValueError):
        trim([], -1)


def test_trim_does_not_mutate_its_input():
    conv = [user_text("q"), call(1), result(1), assistant_text("done")]
    copy = list(conv)
    trim(conv, 2)
    assert conv == copy


@pytest.mark.slow
@given(st.lists(st.sampled_from(["text", "call", "result"]), max_size=30),
       st.integers(min_value=0, max_value=35))
def test_trim_never_keeps_more_than_asked_nor_starts_with_a_result(kinds, keep):
    conv = [user_text("x") if k == "text" else call(0) if k == "call" else result(0)
            for k in kinds]
    kept, dropped = trim(conv, keep)
    assert len(kept) <= keep
    assert kept == conv[dropped:]
    assert not (kept and kept[0].tool_results)


def test_trim_never_orphans_a_result_with_messages_between_it_and_its_call():
    conv = [user_text("q"), call(1), user_text("also this"), result(1), assistant_text("done")]
    kept, dropped = trim(conv, 3)  # would keep the note and the result, not the call
    assert kept == [assistant_text("done")] and dropped == 4


def test_trim_keeps_a_paused_server_tool_turn_with_its_result():
    use = ProviderBlock("anthropic", '{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search"}')
    found = ProviderBlock("anthropic", '{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1"}')
    conv = [user_text("q"), Message(A, (use, Finish(Stop.OTHER))),
            Message(A, (found, Text("Found it."), Finish(Stop.END)))]
    assert trim(conv, 1) == ([], 3)
    assert trim(conv, 2) == (conv[1:], 1)


def test_trim_keeps_a_server_tool_call_answered_in_its_own_message():
    both = Message(A, (ProviderBlock("anthropic", '{"type":"mcp_tool_use","id":"m1"}'),
                       ProviderBlock("anthropic", '{"type":"mcp_tool_result","tool_use_id":"m1"}'),
                       Text("ok")))
    assert trim([user_text("q"), both], 1) == ([both], 1)


def test_trim_reads_past_provider_blocks_that_are_not_json():
    odd = Message(A, (ProviderBlock("anthropic", "not json tool_use"), Text("x")))
    assert trim([user_text("q"), odd], 1) == ([odd], 1)


@pytest.mark.slow
@given(st.lists(st.tuples(st.sampled_from(["text", "call", "result", "note"]),
                          st.integers(0, 4)), max_size=30),
       st.integers(min_value=0, max_value=35))
def test_trim_keeps_every_result_with_its_call(shape, keep):
    conv = [call(i) if k == "call" else result(i) if k == "result" else user_text(k)
            for k, i in shape]
    kept, dropped = trim(conv, keep)
    assert len(kept) <= keep and kept == conv[dropped:]
    for at, message in enumerate(kept):
        for part in message.tool_results:
            assert any(isinstance(p, ToolCall) and p.id == part.id
                       for m in kept[:at] for p in m.parts)


# -- JSON ------------------------------------------------------------------------

EVERY_PART = [
    Message(U, (Text("hello \u2028 line sep \U0001F600 astral"), Image("image/png", "iVBORw0="))),
    Message(A, (
        Reasoning("thinking…", state="sig==", protocol="anthropic"),
        Text("I'll look."),
        ToolCall("toolu_1", "search", '{"b":1, "a":2}'),
        ToolCall("toolu_2", "search", '{"q": "cut', finished=False),
        ProviderBlock("anthropic", '{"type":"server_tool_use","id":"srv_1"}'),
        Finish(Stop.TOOLS),
    )),
    Message(U, (ToolResult("toolu_1", "search", "found ✓"),
                ToolResult("toolu_9", "search", "boom", failed=True))),
    Message(U, (Text("read this"), Document("application/pdf", "JVBERi0=", title="a.pdf"),
                Document("text/plain", "aGk="))),
    Message(A, (ToolCall("toolu_3", "shot", "{}"),)),
    Message(U, (ToolResult("toolu_3", "shot", "the page", content=(
        Text("the page"), Image("image/png", "iVBORw0="), Document("application/pdf", "JVBERi0=")
    )),)),
]


def test_every_part_survives_a_round_trip():
    assert loads(dumps(EVERY_PART)) == EVERY_PART


def test_tool_input_is_kept_byte_for_byte():
    back = loads(dumps(EVERY_PART))
    assert back[1].parts[2].input == '{"b":1, "a":2}'


def test_loads_accepts_bytes():
    assert loads(dumps(EVERY_PART).encode("utf-8")) == EVERY_PART


text_strategy = st.text()
part_strategy = st.one_of(
    st.builds(Text, text_strategy),
    st.builds(Image, text_strategy, text_strategy),
    st.builds(Reasoning, text_strategy, text_strategy, text_strategy),
    st.builds(ToolCall, text_strategy, text_strategy, text_strategy, st.booleans()),
    st.builds(ToolResult, text_strategy, text_strategy, text_strategy, st.booleans(),
              st.lists(st.one_of(st.builds(Text, text_strategy),
                                 st.builds(Image, text_strategy, text_strategy),
                                 st.builds(Document, text_strategy, text_strategy, text_strategy)),
                       max_size=3)),
    st.builds(Document, text_strategy, text_strategy, text_strategy),
    st.builds(Finish, st.sampled_from(list(Stop))),
    st.builds(ProviderBlock, text_strategy, text_strategy),
)


@pytest.mark.slow
@given(st.lists(st.builds(Message, st.sampled_from([U, A]), st.lists(part_strategy, max_size=5))))
def test_any_conversation_round_trips(conv):
    assert loads(dumps(conv)) == conv


@pytest.mark.parametrize("text,path", [
    ("not json", "not JSON"),
    ('{"role": "user"}', r"\$: expected a list"),
    ('[1]', r"\[0\]: expected an object"),
    ('[{"role": "system", "parts": []}]', r"\[0\]\.role: unknown role"),
    ('[{"role": "user"}]', r"\[0\]\.parts: expected a list"),
    ('[{"role": "user", "parts": [], "x": 1}]', r"\[0\]\.x: unknown message field"),
    ('[{"role": "user", "parts": [{"type": "video"}]}]', r"\[0\]\.parts\[0\]\.type: unknown part type 'video'"),
    ('[{"role": "user", "parts": [{"type": "text"}]}]', r"\[0\]\.parts\[0\]\.text: missing"),
    ('[{"role": "user", "parts": [{"type": "text", "text": 5}]}]', r"\[0\]\.parts\[0\]\.text: expected str, got int"),
    ('[{"role": "user", "parts": [{"type": "text", "text": "a", "z": 1}]}]', r"\[0\]\.parts\[0\]\.z: unknown field"),
    ('[{"role": "assistant", "parts": [{"type": "finish", "stop": "later"}]}]', r"\[0\]\.parts\[0\]\.stop: unknown stop"),
    ('[{"role": "assistant", "parts": [{"type": "tool_call", "id": "1", "name": "t", "input": "{}", "finished": 1}]}]',
     r"\[0\]\.parts\[0\]\.finished: expected bool, got int"),
])
def test_loads_names_the_path_of_what_it_cannot_read(text, path):
    with pytest.raises(ConversationError, match=path) as info:
        loads(text)
    assert isinstance(info.value, ValueError)


# -- hostile conversation JSON: always a ConversationError --------------------------------

@pytest.mark.parametrize("text", ["[" * 100_000, '[{"role": "user", "parts": ' + "[" * 100_000,
                                  '[{"role": "user", "parts": [{"type": "text", "text": '
                                  + '{"a":' * 100_000],
                         ids=["lists", "parts", "a text of objects"])
def test_loads_refuses_100k_levels_of_nesting_with_a_conversation_error(text):
    with pytest.raises(ConversationError, match="not JSON"):
        loads(text)


@pytest.mark.parametrize("kind", ["[]", '{"a": 1}', "[1, [2]]"])
def test_loads_refuses_a_part_type_that_is_a_list_or_an_object(kind):
    with pytest.raises(ConversationError, match=r"\[0\]\.parts\[0\]\.type: unknown part type"):
        loads('[{"role": "user", "parts": [{"type": %s}]}]' % kind)


@pytest.mark.parametrize("text", [
    "NaN", "[NaN]", '[{"role": "user", "parts": [{"type": "text", "text": NaN}]}]',
    '[{"role": "user", "parts": [{"type": "text", "text": Infinity}]}]',
    '[{"role": "user", "parts": [{"type": "text", "text": 1e400}]}]',
])
def test_loads_refuses_numbers_json_does_not_have(text):
    with pytest.raises(ConversationError):
        loads(text)


def test_an_unreadable_value_is_named_briefly_however_large_it_is():
    for text in ('[{"role": "%s", "parts": []}]' % ("x" * 100_000),
                 '[{"role": "user", "parts": [{"type": %s}]}]' % json.dumps(["y"] * 50_000)):
        with pytest.raises(ConversationError) as info:
            loads(text)
        assert len(str(info.value)) < 300


def test_loads_refuses_bytes_that_are_not_text():
    with pytest.raises(ConversationError, match="not JSON"):
        loads(b"\xff\xfe\xfa[]")


def test_dumps_joins_a_split_surrogate_pair_and_replaces_a_lone_half_so_utf8_takes_it():
    conversation = [user_text("a \ud83d\ude00 b"), assistant_text("lone \ud83d and \ude00 here")]
    text = dumps(conversation)
    text.encode("utf-8")  # raises on any lone half
    assert [m.parts[0].text for m in loads(text)] == ["a \U0001F600 b", "lone \ufffd and \ufffd here"]


def test_well_formed_leaves_text_without_surrogates_as_it_is():
    from nacelle.messages import well_formed

    for text in ("", "plain", "ünïcode ✓ \U0001F600"):
        assert well_formed(text) is text



def test_well_formed_finds_a_surrogate_anywhere_in_a_text_longer_than_one_checked_slice():
    from nacelle.messages import _CHECK_SLICE, has_surrogate, well_formed

    body = "\u00e9" * (3 * _CHECK_SLICE)
    for at in (0, _CHECK_SLICE - 1, _CHECK_SLICE, 2 * _CHECK_SLICE + 7, len(body)):
        text = body[:at] + "\ud83d" + body[at:]
        assert has_surrogate(text)
        assert well_formed(text) == body[:at] + "\ufffd" + body[at:]
    paired = body[:_CHECK_SLICE - 1] + "\ud83d\ude00" + body[_CHECK_SLICE - 1:]  # cut by a slice
    assert well_formed(paired) == body[:_CHECK_SLICE - 1] + "\U0001F600" + body[_CHECK_SLICE - 1:]
    assert not has_surrogate(body) and well_formed(body) is body

# -- media -----------------------------------------------------------------------

import base64  # noqa: E402
import struct  # noqa: E402
import zlib  # noqa: E402


def png_bytes():
    """A valid 1x1 PNG, written with zlib and struct."""
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
WEBP = b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00/\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00"
PDF = (b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
       b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")


@pytest.mark.parametrize("data, media_type", [
    (png_bytes(), "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp"),
])
def test_image_from_bytes_names_the_type_from_the_magic_number(data, media_type):
    image = Image.from_bytes(data)
    assert image == Image(media_type, base64.b64encode(data).decode("ascii"))


def test_image_from_bytes_accepts_a_media_type_that_agrees_with_the_bytes():
    assert Image.from_bytes(JPEG, "image/jpg").media_type == "image/jpeg"
    assert Image.from_bytes(png_bytes(), "IMAGE/PNG").media_type == "image/png"


def test_image_from_bytes_refuses_a_media_type_that_contradicts_the_bytes():
    with pytest.raises(ConfigError, match="image/png"):
        Image.from_bytes(png_bytes(), "image/jpeg")


@pytest.mark.parametrize("data", [b"", b"\x00\x01\x02 not an image", b"BM\x00\x00 a bitmap"])
def test_image_from_bytes_refuses_bytes_it_cannot_name(data):
    with pytest.raises(ConfigError):
        Image.from_bytes(data)


def test_image_from_bytes_refuses_a_pdf_and_points_at_document():
    with pytest.raises(ConfigError, match="Document"):
        Image.from_bytes(PDF)


def test_image_from_bytes_refuses_what_is_not_bytes():
    with pytest.raises(ConfigError, match="bytes"):
        Image.from_bytes("iVBORw0=")


def test_image_from_path_sniffs_the_bytes_not_the_file_name(tmp_path):
    path = tmp_path / "photo.jpg"
    path.write_bytes(png_bytes())
    assert Image.from_path(path).media_type == "image/png"
    assert Image.from_path(str(path)).media_type == "image/png"


def test_image_from_path_of_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        Image.from_path(tmp_path / "nope.png")


def test_an_image_larger_than_any_provider_takes_is_refused_before_it_is_encoded(tmp_path):
    big = png_bytes() + b"\x00" * MAX_IMAGE_BYTES
    with pytest.raises(ConfigError, match="larger than"):
        Image.from_bytes(big)
    path = tmp_path / "big.png"
    path.write_bytes(big)
    with pytest.raises(ConfigError, match="larger than"):
        Image.from_path(path)


def test_an_endless_file_is_refused_after_reading_one_byte_past_the_cap():
    import os
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    with pytest.raises(ConfigError, match="larger than"):
        Document.from_path("/dev/zero")


def test_document_from_bytes_names_a_pdf_and_plain_text():
    assert Document.from_bytes(PDF).media_type == "application/pdf"
    text = Document.from_bytes("notes ✓\n".encode("utf-8"), title="notes")
    assert text == Document("text/plain", base64.b64encode("notes ✓\n".encode()).decode(), "notes")


@pytest.mark.parametrize("data", [b"", b"text with a \x00 NUL", b"\xff\xfe not utf-8 \x80"])
def test_document_from_bytes_refuses_bytes_it_cannot_name(data):
    with pytest.raises(ConfigError):
        Document.from_bytes(data)


def test_document_from_bytes_refuses_an_image_and_points_at_image():
    with pytest.raises(ConfigError, match="Image"):
        Document.from_bytes(png_bytes())


def test_document_from_bytes_refuses_a_media_type_that_contradicts_the_bytes():
    with pytest.raises(ConfigError, match="application/pdf"):
        Document.from_bytes(b"plain words", "application/pdf")
    with pytest.raises(ConfigError, match="must be one of"):
        Document.from_bytes(PDF, "application/msword")


def test_document_from_path_titles_it_with_the_file_name(tmp_path):
    path = tmp_path / "report.bin"
    path.write_bytes(PDF)
    assert Document.from_path(path) == Document(
        "application/pdf", base64.b64encode(PDF).decode(), "report.bin")
    assert Document.from_path(path, title="Q3").title == "Q3"


def test_a_document_larger_than_any_provider_takes_is_refused():
    with pytest.raises(ConfigError, match="larger than"):
        Document.from_bytes(PDF + b" " * MAX_DOCUMENT_BYTES)


def test_a_document_repr_hides_the_data():
    text = repr(Document("application/pdf", "J" * 5000, title="a.pdf"))
    assert "<5000 base64 chars>" in text and "JJJ" not in text and "a.pdf" in text


def test_a_tool_result_takes_its_content_as_a_tuple_of_media_parts():
    part = ToolResult("c1", "t", "x", content=[Text("x"), Image("image/png", "AA==")])
    assert part.content == (Text("x"), Image("image/png", "AA=="))
    assert ToolResult("c1", "t", "x").content == ()
    with pytest.raises(ConversationError, match="ToolCall"):
        ToolResult("c1", "t", "x", content=[ToolCall("c", "t", "{}")])


def test_a_text_only_tool_result_is_written_as_before():
    raw = json.loads(dumps([Message(U, (ToolResult("c1", "t", "ok"),))]))
    assert raw[0]["parts"][0] == {"type": "tool_result", "id": "c1", "name": "t",
                                  "result": "ok", "failed": False}


def test_loads_refuses_a_tool_result_content_part_that_is_not_media():
    raw = json.dumps([{"role": "user", "parts": [{
        "type": "tool_result", "id": "c", "name": "t", "result": "",
        "content": [{"type": "finish", "stop": "end"}]}]}])
    with pytest.raises(ConversationError, match=r"\[0\]\.parts\[0\]\.content\[0\]"):
        loads(raw)
    raw = json.dumps([{"role": "user", "parts": [{
        "type": "tool_result", "id": "c", "name": "t", "result": "", "content": "x"}]}])
    with pytest.raises(ConversationError, match="content"):
        loads(raw)


def test_utf8_text_split_across_the_checking_steps_is_plain_text():
    text = ("é" * (1 << 20)).encode("utf-8")  # 2 MB: a character straddles each step
    assert Document.from_bytes(text).media_type == "text/plain"
    with pytest.raises(ConfigError):
        Document.from_bytes(text[:-1])  # ends inside a character


def test_text_citations_round_trip_and_a_bad_citation_is_named_by_its_path():
    from nacelle.messages import Citation
    cited = Text("Tide at 06:12.", [Citation("https://example.org", "Tides", "06:12", '{"a":1}')])
    assert isinstance(cited.citations, tuple)
    conversation = [Message(Role.ASSISTANT, (cited, Text("plain")))]
    text = dumps(conversation)
    assert loads(text) == conversation
    assert '"citations"' in text and text.count('"citations"') == 1  # plain text as before
    bad = text.replace('"title": "Tides"', '"title": 3')
    with pytest.raises(ConversationError, match=r"\[0\]\.parts\[0\]\.citations\[0\]\.title"):
        loads(bad)
    with pytest.raises(ConversationError, match="unknown field for a citation"):
        loads(text.replace('"title": "Tides"', '"page": "Tides"'))
