"""Messages, parts, trim and the lossless JSON form."""

import dataclasses
import json

import pytest
from hypothesis import given, strategies as st

from nacelle.errors import ConversationError
from nacelle.events import Stop
from nacelle.messages import (
    Finish, Image, Message, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult,
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
    st.builds(ToolResult, text_strategy, text_strategy, text_strategy, st.booleans()),
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
