"""backends/_stream.py: text deltas kept well-formed whatever a provider cut, and the
net every backend's turn passes through."""

from hypothesis import given, strategies as st

from nacelle import Event, Kind, Text, ToolCall
from nacelle.backend import TurnEnd
from nacelle.events import ToolEvent
from nacelle.backends._stream import Deltas, ToolInputs, clean, well_formed

from hostile import EMOJI, HIGH, LOW, assert_well_formed


def utf16_units(text):
    """``text`` as a list of one-character strings, one per UTF-16 code unit."""
    raw = text.encode("utf-16-le", "surrogatepass")
    return [raw[i:i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(raw), 2)]


@given(st.text(alphabet=st.sampled_from(["a", "é", EMOJI, "\U0001f914", HIGH, LOW]),
               max_size=12), st.data())
def test_deltas_cut_anywhere_give_what_the_whole_text_gives(text, data):
    units = utf16_units(text)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(units)))))
    pieces = ["".join(units[a:b]) for a, b in zip([0] + cuts, cuts + [len(units)])]
    deltas = Deltas()
    shown = "".join(deltas.add(piece) for piece in pieces) + deltas.end()
    assert shown == deltas.text == well_formed("".join(pieces))
    assert_well_formed(shown)


def test_a_pair_split_over_two_deltas_is_one_character_and_a_lone_half_is_a_replacement():
    deltas = Deltas()
    assert [deltas.add("a" + HIGH), deltas.add(LOW + "b"), deltas.add(HIGH), deltas.add("c")] \
        == ["a", EMOJI + "b", "", "\ufffdc"]
    assert deltas.add(LOW) == "\ufffd" and deltas.add(HIGH) == "" and deltas.end() == "\ufffd"
    assert deltas.text == "a" + EMOJI + "b\ufffdc\ufffd\ufffd"


def test_text_without_surrogates_is_returned_as_it_is():
    text = "plain, é and " + EMOJI
    assert well_formed(text) is text
    event = Event(Kind.TEXT, text=text)
    assert clean(event) is event


def test_clean_replaces_a_lone_half_in_any_string_of_an_event_or_a_turn_end():
    event = Event(Kind.TOOL_CALL, tool=ToolEvent(id="c" + HIGH, index=0, name="n", input="{}"))
    assert clean(event).tool.id == "c\ufffd"
    end = TurnEnd((Text("x" + LOW), ToolCall("c", "n" + HIGH + LOW, "{}")))
    assert clean(end).parts == (Text("x\ufffd"), ToolCall("c", "n" + EMOJI, "{}"))
    assert_well_formed(clean(event), clean(end))


def test_whether_a_calls_input_is_whole_is_one_rule_for_every_accumulator():
    from nacelle.backends._stream import complete_json

    assert complete_json('{"a": [1, 2]}') and complete_json(' {} ')
    assert not complete_json("") and not complete_json("  \n")
    assert not complete_json('{"a": [1, 2')
    assert not complete_json("[" * 5000 + "]" * 5000)  # past the depth cap: not JSON here


# -- a turn's local calls as they stream -------------------------------------------------

def test_a_tool_input_is_the_event_the_dataclasses_would_build_and_passes_clean_as_it_is():
    call = ToolInputs().start("c" + HIGH, "n" + LOW)  # an id and a name made well-formed once
    first, second = call.add('{"a'), call.add('": 1}')
    assert second == Event(Kind.TOOL_INPUT, text='": 1}', tool=ToolEvent(
        "c\ufffd", 0, "n\ufffd", '{"a": 1}'))
    assert hash(second) == hash(Event(Kind.TOOL_INPUT, text='": 1}', tool=ToolEvent(
        "c\ufffd", 0, "n\ufffd", '{"a": 1}')))
    assert first.tool.input == '{"a' and first.agent == () and first.via == ""
    assert clean(second) is second
    assert_well_formed(first, second)


def test_tagged_deltas_and_tool_inputs_equal_events_built_with_their_tags():
    from nacelle.events import _delta, _tagged_delta

    made = _tagged_delta(("child",), "p1")(Kind.TEXT, "hi")
    assert made == Event(Kind.TEXT, text="hi", agent=("child",), via="p1")
    assert vars(made) == vars(Event(Kind.TEXT, text="hi", agent=("child",), via="p1"))
    assert _delta(Kind.TEXT, "hi").agent == ()  # the untagged maker is left as it was
    calls = ToolInputs()
    untagged = calls.start("c0", "f")
    calls.tags = (("child",), "p1")  # Tagging.tag: calls started from now on
    tagged = calls.start("c1", "g")
    [event] = tagged.take('{"a": 1}')
    assert event == Event(Kind.TOOL_INPUT, text='{"a": 1}', agent=("child",), via="p1",
                          tool=ToolEvent("c1", 1, "g", '{"a": 1}'))
    assert clean(event) is event
    assert (untagged.add("{").agent, untagged.add("}").via) == ((), "")


def test_a_call_is_announced_once_and_only_after_every_earlier_one_is_finished():
    calls = ToolInputs()
    first, second, third = calls.start("a", "f"), calls.start("b", "g"), calls.start("c", "h")
    assert calls.whole(second, '{"b": 1}') == []  # the first may still end unfinished
    assert calls.whole(second, '{"other": 1}') == []
    announced = calls.whole(first, None)  # finished, its input left for the loop
    assert [(e.kind, e.tool.id, e.tool.index, e.tool.input, e.tool.server)
            for e in announced] == [(Kind.TOOL_CALL, "b", 1, '{"b": 1}', "")]
    assert (first.announced, second.announced, third.announced) == (False, True, False)
    assert [e.tool.index for e in calls.whole(third, "{}")] == [2]
    assert calls.whole(third, "{}") == []


def test_rename_gives_later_tool_inputs_the_id_a_provider_sent_late():
    call = ToolInputs().start()
    early = call.add("{")
    assert early.tool.id == ""
    call.rename("call_1", "f")
    assert (call.add("}").tool.id, call.text) == ("call_1", "{}")
    assert (early.tool.id, early.tool.name, early.tool.input) == ("", "", "{")


def test_a_call_renamed_to_the_id_and_name_it_has_keeps_its_events_class():
    # Some Chat Completions servers send the call's id and name with every fragment:
    # a class made per fragment would cost more than the fragment.
    call = ToolInputs().start("call_1", "f")
    kind = type(call.add("{").tool)
    for _ in range(3):
        call.rename("call_1", "f")
    assert type(call.add("}").tool) is kind
    call.rename("call_1", "g")
    assert type(call.add(" ").tool) is not kind


def test_a_calls_tool_inputs_share_a_class_that_holds_its_fields_but_none_of_its_pieces():
    calls = ToolInputs()
    first, second = calls.start("c1", "read"), calls.start("c2", "write")
    events = [first.add("{"), second.add("["), first.add("}")]
    kinds = [type(e.tool) for e in events]
    assert kinds[0] is kinds[2] and kinds[0] is not kinds[1]
    assert isinstance(events[1].tool, ToolEvent)
    # An unread event holds the call's pieces and its count only; the class, which
    # only the cyclic collector frees, holds no piece, so a long input goes with the
    # last event or stream that holds it.
    assert vars(events[2].tool) == {"_parts": ["{", "}"], "_count": 2}
    assert not any(isinstance(value, list) for value in vars(kinds[0]).values())
    assert [(e.tool.id, e.tool.index, e.tool.name, e.tool.input) for e in events] == [
        ("c1", 0, "read", "{"), ("c2", 1, "write", "["), ("c1", 0, "read", "{}")]


def test_take_feeds_a_calls_raw_deltas_and_its_pieces_are_the_calls_input():
    call = ToolInputs().start("c", "n")
    first = call.take('{"face": "' + HIGH)  # the half waits for its partner
    assert [(e.text, e.tool.input) for e in first] == [('{"face": "', '{"face": "')]
    assert call.take("") == []
    [second] = call.take(LOW + '"}')
    assert second == Event(Kind.TOOL_INPUT, text=EMOJI + '"}', tool=ToolEvent(
        "c", 0, "n", '{"face": "' + EMOJI + '"}'))
    assert call.text == call.raw.text == '{"face": "' + EMOJI + '"}'  # one list of pieces
    assert call.end() == []


@given(st.text(alphabet=st.sampled_from(["a", '"', "é", EMOJI, HIGH, LOW]), max_size=12),
       st.data())
def test_take_cut_anywhere_shows_what_deltas_show_and_each_input_is_the_text_so_far(text, data):
    units = utf16_units(text)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(units)))))
    pieces = ["".join(units[a:b]) for a, b in zip([0] + cuts, cuts + [len(units)])]
    call, deltas = ToolInputs().start("c", "n"), Deltas()
    events = [event for piece in pieces for event in call.take(piece)] + call.end()
    expected = [shown for shown in [deltas.add(piece) for piece in pieces] + [deltas.end()]
                if shown]
    assert [event.text for event in events] == expected
    assert [event.tool.input for event in events] == [
        "".join(expected[:n + 1]) for n in range(len(expected))]
    assert all(clean(event) is event and event.tool.id == "c" for event in events)
    assert call.text == deltas.text == well_formed("".join(pieces))


def test_end_gives_the_u_fffd_a_held_half_becomes_as_one_more_tool_input():
    call = ToolInputs().start("c", "n")
    assert [e.text for e in call.take('{"a": 1}' + HIGH)] == ['{"a": 1}']
    [last] = call.end()
    assert last == Event(Kind.TOOL_INPUT, text="\ufffd", tool=ToolEvent(
        "c", 0, "n", '{"a": 1}\ufffd'))
    assert call.raw.text == '{"a": 1}\ufffd' and call.end() == []
