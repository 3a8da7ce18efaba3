"""The CLI for scripts: the prompt from stdin, and the --json / --jsonl encodings."""

import io
import json
from pathlib import Path

import pytest

from nacelle.cli.script import ScriptOutput, event_json, read_prompt, result_json
from nacelle.events import Event, Kind, Stop, ToolEvent, Usage
from nacelle.messages import assistant_text, user_text

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "nacelle" / "cli" /
                     "result.schema.json").read_text())


def test_the_prompt_comes_from_the_argument_stdin_or_both():
    assert read_prompt("hi", None) == "hi"
    assert read_prompt(None, None) is None
    assert read_prompt(None, io.StringIO("a\nb\n")) == "a\nb\n"
    assert read_prompt("-", io.StringIO("piped")) == "piped"
    assert read_prompt("explain", io.StringIO("the text")) == "explain\n\nthe text"
    assert read_prompt("explain", io.StringIO("  \n")) == "explain"


def events():
    call = ToolEvent("c1", 0, "read_file", '{"path": "a"}')
    return [Event(Kind.TEXT, text="Reading."), Event(Kind.TOOL_CALL, tool=call),
            Event(Kind.TURN, usage=Usage(5, 5), stop=Stop.TOOLS),
            Event(Kind.TOOL_RESULT, tool=ToolEvent("c1", 0, "read_file", '{"path": "a"}',
                                                   result="text", duration=0.5)),
            Event(Kind.TEXT, text="The "), Event(Kind.TEXT, text="answer."),
            Event(Kind.TURN, usage=Usage(5, 5), stop=Stop.END),
            Event(Kind.DONE, usage=Usage(10, 10), stop=Stop.END,
                  messages=(user_text("q"), assistant_text("The answer.")))]


class Pipe(io.StringIO):
    """A stdout that records what each flush let through."""

    def __init__(self):
        super().__init__()
        self.flushed = []

    def flush(self):
        self.flushed.append(self.getvalue())


def test_on_a_pipe_each_delta_is_written_and_flushed_as_it_comes():
    out, narrated = Pipe(), []
    script = ScriptOutput(out, io.StringIO(), narrate=narrated.append)
    for event in events()[:5]:
        script.event(event)
    assert out.flushed[-1] == "Reading.\nThe "
    for event in events()[5:]:
        script.event(event)
    assert "Reading.\nThe answer." in out.flushed


def test_every_turns_text_is_on_stdout_each_turn_on_its_own_line_ending_in_one_newline():
    out, narrated = io.StringIO(), []
    script = ScriptOutput(out, io.StringIO(), narrate=narrated.append)
    for event in events():
        script.event(event)
    assert out.getvalue() == "Reading.\nThe answer.\n"
    assert Kind.TEXT not in [e.kind for e in narrated]
    assert [e.kind for e in narrated][:2] == [Kind.TOOL_CALL, Kind.TURN]


@pytest.mark.parametrize("quiet", [False, True])
def test_on_a_terminal_markdown_lines_of_one_turn_never_run_into_the_next(quiet):
    from nacelle.cli.markdown import Markdown

    out = io.StringIO()
    script = ScriptOutput(out, io.StringIO(), narrate=None if quiet else (lambda e: None),
                          live=True, text=Markdown())
    for event in events():
        script.event(event)
    assert out.getvalue() == "Reading.\nThe answer.\n"


def test_an_interrupted_run_writes_the_line_held_for_drawing():
    from nacelle.cli.markdown import Markdown

    out = io.StringIO()
    script = ScriptOutput(out, io.StringIO(), live=True, text=Markdown())
    script.event(Event(Kind.TEXT, text="half a line"))
    assert out.getvalue() == ""
    script.interrupted()
    assert out.getvalue() == "half a line"


def test_with_a_schema_text_is_narration_and_stdout_holds_the_value():
    out, narrated = io.StringIO(), []
    script = ScriptOutput(out, io.StringIO(), narrate=narrated.append, structured=True)
    done = Event(Kind.DONE, usage=Usage(1, 1), stop=Stop.END, output={"a": 1},
                 messages=(user_text("q"), assistant_text('{"a": 1}')))
    for event in [Event(Kind.TEXT, text='{"a": 1}'), done]:
        script.event(event)
    assert out.getvalue() == '{\n  "a": 1\n}\n' and narrated[0].kind is Kind.TEXT


def test_the_result_object_matches_the_schema_and_an_unknown_cost_is_null():
    jsonschema = pytest.importorskip("jsonschema")
    done = events()[-1]
    tool = events()[3].tool
    result = result_json(done, [tool], 2)
    jsonschema.validate(result, SCHEMA)
    assert result["cost"] is None and result["tool_calls"][0]["input"] == {"path": "a"}
    priced = result_json(Event(Kind.DONE, usage=Usage(1, 1, cost=0.5, priced=True),
                               stop=Stop.MAX_TOKENS), [], 1, session="s")
    jsonschema.validate(priced, SCHEMA)
    assert priced["cost"] == 0.5 and priced["complete"] is False and priced["session"] == "s"


def test_every_event_has_a_jsonl_line_but_done_which_is_the_result():
    lines = [event_json(e) for e in events()]
    assert lines[-1] is None
    assert [line["kind"] for line in lines[:-1]] == [
        "text", "tool_call", "turn", "tool_result", "text", "text", "turn"]
    assert "result" not in lines[1]["tool"] and lines[3]["tool"]["status"] == "ok"
    json.dumps(lines[:-1])


ESCAPES = "\x1b[1A\x1b[2K\r\x1b]52;c;eA==\x07\x1b[2J\x9b2J\u202e\x7f"
INTERPRETED = set(map(chr, [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0),
                            *range(0x202a, 0x202f), *range(0x2066, 0x206a)]))


def hostile_run():
    text = "Done" + ESCAPES
    return [Event(Kind.TEXT, text="Done\x1b"), Event(Kind.TEXT, text=ESCAPES[1:]),
            Event(Kind.TURN, usage=Usage(1, 1), stop=Stop.END),
            Event(Kind.DONE, usage=Usage(1, 1), stop=Stop.END,
                  messages=(user_text("q"), assistant_text(text)))]


@pytest.mark.parametrize("live", [False, True])
def test_the_answer_on_stdout_shows_escape_sequences_instead_of_running_them(live):
    out = io.StringIO()
    script = ScriptOutput(out, io.StringIO(), live=live)
    for event in hostile_run():
        script.event(event)
    assert not set(out.getvalue()) & INTERPRETED
    assert out.getvalue() == "Done\\x1b[1A\\x1b[2K\\r\\x1b]52;c;eA==\\x07\\x1b[2J\\x9b2J\\u202e\\x7f\n"


@pytest.mark.parametrize("mode", ["json", "jsonl"])
def test_json_modes_escape_what_a_terminal_acts_on_and_keep_the_exact_text(mode):
    out = io.StringIO()
    script = ScriptOutput(out, io.StringIO(), mode=mode)
    for event in hostile_run():
        script.event(event)
    written = out.getvalue()
    assert not set(written.replace("\n", "")) & INTERPRETED
    last = json.loads(written) if mode == "json" else json.loads(written.splitlines()[-1])
    assert last["text"] == "Done" + ESCAPES
    if mode == "jsonl":
        deltas = [json.loads(line)["text"] for line in written.splitlines()[:2]]
        assert "".join(deltas) == "Done" + ESCAPES


def test_a_tools_images_and_documents_are_listed_by_type_and_size_without_their_data():
    jsonschema = pytest.importorskip("jsonschema")
    from nacelle.messages import Document, Image, Text

    tool = ToolEvent("c1", 0, "shot", "{}", result="the page", content=(
        Text("the page"), Image("image/png", "iVBORw0KGgo="), Document("application/pdf", "JVBERi0=",
                                                                    "Q3")))
    result = result_json(events()[-1], [tool], 1)
    jsonschema.validate(result, SCHEMA)
    assert result["tool_calls"][0]["media"] == [
        {"type": "image", "media_type": "image/png", "bytes": 8},
        {"type": "document", "media_type": "application/pdf", "bytes": 5, "title": "Q3"}]
    line = event_json(Event(Kind.TOOL_RESULT, tool=tool))
    assert line["tool"]["media"] == result["tool_calls"][0]["media"]
    assert "iVBOR" not in json.dumps(line)
    assert "media" not in result_json(events()[-1], [events()[3].tool], 1)["tool_calls"][0]
