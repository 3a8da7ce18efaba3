"""The console renderer: golden output with and without colour."""

import base64
import io
import time

import pytest

import nacelle

from nacelle.console import Renderer, describe_usage, render
from nacelle.events import Event, Kind, Stop, ToolEvent, Usage

CALL = ToolEvent("c1", 0, "read_file", '{"path": "README.md",\n "limit": 5}')
EVENTS = [
    Event(Kind.THINKING, text="Let me "),
    Event(Kind.THINKING, text="look."),
    Event(Kind.TEXT, text="Reading"),
    Event(Kind.TEXT, text=" it."),
    Event(Kind.TOOL_CALL, tool=CALL),
    Event(Kind.TURN, usage=Usage(100, 20, cache_read_tokens=300), stop=Stop.TOOLS),
    Event(Kind.TOOL_RESULT, tool=ToolEvent("c1", 0, "read_file", CALL.input,
                                           result="# nacelle\nmore", duration=0.0123)),
    Event(Kind.TOOL_CALL, tool=ToolEvent("c2", 1, "write_file", "{}")),
    Event(Kind.TOOL_RESULT, tool=ToolEvent("c2", 1, "write_file", "{}",
                                           error="refused by the user", refused=True)),
    Event(Kind.TEXT, text="Done."),
    Event(Kind.TURN, usage=Usage(10, 5, cost=0.5, priced=True), stop=Stop.END),
    Event(Kind.DONE, usage=Usage(110, 25, cache_read_tokens=300, cost=0.5, priced=True),
          stop=Stop.END),
]

PLAIN = """\
thinking: Let me look.
Reading it.
-> read_file {"path":"README.md","limit":5}
-- turn 1: 420 tokens (in 100, out 20, cache 75% hit), cost unknown
   ok read_file 0.01s: # nacelle
-> write_file {}
   refused write_file: refused by the user
Done.
-- turn 2: 15 tokens (in 10, out 5), $0.5000
== done: 435 tokens (in 110, out 25, cache 73% hit), $0.5000
"""


def rendered(events, color):
    out = io.StringIO()
    done = render(events, out, color=color)
    return out.getvalue(), done


def test_plain_output_is_the_golden_text():
    text, done = rendered(EVENTS, color=False)
    assert text == PLAIN
    assert done is EVENTS[-1]


class Upper:
    """A text formatter that holds its text until the line ends, as a Markdown one does."""

    def __init__(self):
        self.held, self.fed = [], []

    def feed(self, delta):
        self.fed.append(delta)
        self.held.append(delta.upper())
        return ""

    def end(self):
        text, self.held = "".join(self.held), []
        return text


def test_a_text_formatter_gets_the_runs_own_text_and_is_ended_before_anything_else():
    out, upper = io.StringIO(), Upper()
    Renderer(out, color=False, text=upper).render(EVENTS)
    assert out.getvalue() == PLAIN.replace("Reading it.", "READING IT.").replace(
        "Done.", "DONE.")
    assert upper.fed == ["Reading", " it.", "Done."]


def test_a_sub_agents_text_bypasses_the_text_formatter():
    out, upper = io.StringIO(), Upper()
    renderer = Renderer(out, color=False, text=upper)
    for event in [Event(Kind.TEXT, text="mine "), Event(Kind.TEXT, text="child", agent=("r",)),
                  Event(Kind.TEXT, text="back")]:
        renderer.event(event)
    renderer.event(Event(Kind.DONE, usage=Usage(1, 1), stop=Stop.END))
    assert out.getvalue().startswith("MINE \n  r: child\nBACK\n")


def test_coloured_output_is_the_plain_text_plus_ansi_codes():
    text, _ = rendered(EVENTS, color=True)
    assert "\x1b[2mthinking: \x1b[0m" in text
    assert "\x1b[32mok\x1b[0m" in text and "\x1b[33mrefused\x1b[0m" in text
    import re
    assert re.sub(r"\x1b\[\d+m", "", text) == PLAIN


WRITING = [
    Event(Kind.TEXT, text="Writing."),
    Event(Kind.TOOL_INPUT, text='{"path": "a.txt", ',
          tool=ToolEvent("w1", 0, "write_file", '{"path": "a.txt", ')),
    Event(Kind.TOOL_INPUT, text='"content": "hi\x1b[2J"}',
          tool=ToolEvent("w1", 0, "write_file", '{"path": "a.txt", "content": "hi\x1b[2J"}')),
    Event(Kind.TOOL_CALL, tool=ToolEvent("w1", 0, "write_file",
                                         '{"path": "a.txt", "content": "hi\x1b[2J"}')),
]


def test_a_call_being_written_is_a_progress_line_redrawn_in_place_on_a_terminal():
    out = io.StringIO()
    renderer = Renderer(out, color=True)
    for event in WRITING:
        renderer.event(event)
    text = out.getvalue()
    assert "~> writing write_file: 18 characters" in text
    assert "~> writing write_file: 38 characters" in text
    # The progress line is erased before the call's own line takes its place.
    progress_end = text.rindex("38 characters")
    assert "\r\x1b[2K" in text[progress_end:text.index("-> ")]
    assert "\x1b[2J" not in text  # the model's escape is shown, never obeyed


def test_a_call_being_written_shows_nothing_on_a_pipe_until_its_input_is_whole():
    text, _ = rendered(WRITING, color=False)
    assert text == 'Writing.\n-> write_file {"path": "a.txt", "content": "hi\\x1b[2J"}\n'


def test_streamed_arguments_are_written_as_they_come_dimmed_and_made_visible():
    out = io.StringIO()
    renderer = Renderer(out, color=False, arguments="stream")
    for event in WRITING:
        renderer.event(event)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Writing."
    assert lines[1] == '~> write_file {"path": "a.txt", "content": "hi\\x1b[2J"}'
    assert lines[2].startswith("-> write_file ")


def test_the_arguments_option_is_checked():
    with pytest.raises(ValueError, match="arguments"):
        Renderer(io.StringIO(), arguments="loud")


def test_an_incomplete_answer_is_marked_loudly():
    text, _ = rendered([Event(Kind.TEXT, text="partial"),
                        Event(Kind.DONE, usage=Usage(1, 2), stop=Stop.MAX_TOKENS)], color=False)
    assert text == "partial\n!! INCOMPLETE ANSWER: stopped with 'max_tokens'; 3 tokens (in 1, out 2), cost unknown\n"


def test_failed_discarded_and_paused_results_say_so():
    text, _ = rendered([
        Event(Kind.TOOL_RESULT, tool=ToolEvent("a", 0, "t", "{}", error="boom\nstack")),
        Event(Kind.TOOL_RESULT, tool=ToolEvent("b", 1, "t", "{}", error="not run", discarded=True)),
        Event(Kind.TOOL_RESULT, tool=ToolEvent("c", 2, "t", "{}", error="waiting", paused=True)),
    ], color=False)
    assert text == "   failed t: boom\n   not run t: not run\n   paused t: waiting\n"


def test_a_compaction_says_what_it_removed():
    from nacelle.compaction import Compacted

    done = Compacted(messages=(), removed=12, tokens=48_000, strategy="clear_tool_results")
    text, _ = rendered([Event(Kind.COMPACTION, compaction=done)], color=False)
    assert text == "-- compacted (clear_tool_results): 12 messages, ~48,000 tokens\n"


def test_server_side_calls_name_their_server():
    text, _ = rendered([Event(Kind.TOOL_CALL, tool=ToolEvent("s", 0, "web_search", '{"q":"x"}',
                                                             server="anthropic"))], color=False)
    assert text == '-> web_search [anthropic] {"q":"x"}\n'


# Cursor up, erase line, carriage return: on a terminal this would redraw the line
# above; then OSC 52 (clipboard), clear screen, reset, the 8-bit CSI and a bidi override.
ESCAPES = ("\x1b[1A\x1b[2K\r  $ ls -la\x1b]52;c;ZWNobw==\x07\x1b[2J\x1bc\x9b2J"
           "\u202etxt.exe\x7f")
INTERPRETED = set(map(chr, [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0),
                            *range(0x202a, 0x202f), *range(0x2066, 0x206a)]))


def test_model_tool_and_server_text_reaches_the_stream_only_as_visible_escapes():
    import re

    call = ToolEvent("c1", 0, "t" + ESCAPES, '{"command": "' + ESCAPES.replace("\x1b", "\\u001b")
                     + '"}', server="srv" + ESCAPES)
    events = [Event(Kind.THINKING, text="think" + ESCAPES[:1]), Event(Kind.THINKING, text=ESCAPES[1:]),
              Event(Kind.TEXT, text="said\x1b"), Event(Kind.TEXT, text="[2J" + ESCAPES),
              Event(Kind.TOOL_CALL, tool=call),
              Event(Kind.TOOL_RESULT, tool=ToolEvent("c1", 0, call.name, call.input,
                                                     result=ESCAPES + "\nmore")),
              Event(Kind.TOOL_RESULT, tool=ToolEvent("c2", 1, call.name, "{}", error=ESCAPES))]
    for color in (False, True):
        text, _ = rendered(events, color=color)
        own = re.sub(r"\x1b\[\d+m", "", text) if color else text
        assert not set(own) & INTERPRETED, repr(own)
        assert "said\\x1b[2J\\x1b[1A\\x1b[2K\\r  $ ls -la\\x1b]52;c;" in own
        assert "think\\x1b[1A" in own and "\\u202etxt.exe\\x7f" in own and "\\x9b2J" in own
    assert "\x1b[2mthinking: \x1b[0m" in text and "\x1b[31mfailed\x1b[0m" in text


def test_long_inputs_and_results_are_shortened():
    text, _ = rendered([Event(Kind.TOOL_CALL, tool=ToolEvent("a", 0, "t", '{"x":"' + "y" * 500 + '"}'))],
                       color=False)
    assert len(text.strip()) < 120 and text.strip().endswith("...")


def test_a_tool_input_nested_a_thousand_deep_is_shown_as_written_not_a_crash():
    deep = '{"x": ' + "[" * 1000 + "]" * 1000 + "}"
    text, _ = rendered([Event(Kind.TOOL_CALL, tool=ToolEvent("a", 0, "t", deep))], color=False)
    assert text.strip() == "-> t " + deep[:97] + "..."


@pytest.mark.parametrize("no_color,isatty,expected", [
    ("", True, True), ("1", True, False), ("", False, False),
])
def test_colour_only_on_a_tty_without_no_color(monkeypatch, no_color, isatty, expected):
    monkeypatch.setenv("NO_COLOR", no_color)

    class Out(io.StringIO):
        def isatty(self):
            return isatty

    assert Renderer(Out()).color is expected


def test_no_colour_in_jupyter(monkeypatch):
    import sys
    import types

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert Renderer(Tty()).color is False


def test_describe_usage_leaves_out_what_is_unknown():
    assert describe_usage(Usage(3, 4, priced=True)) == "7 tokens (in 3, out 4), $0.0000"
    assert describe_usage(Usage(1000, 4, reasoning_tokens=2, cost=0.01, priced=True)) == (
        "1,004 tokens (in 1,000, out 4, reasoning 2), $0.0100")
    assert describe_usage(Usage()) == "0 tokens (in 0, out 0)"


def test_describe_usage_says_cost_unknown_never_zero_dollars_for_an_unpriced_model():
    assert describe_usage(Usage(3, 4)) == "7 tokens (in 3, out 4), cost unknown"
    assert "$0.0000" not in describe_usage(Usage(3, 4))


def test_describe_usage_shows_a_partly_priced_total_as_a_lower_bound():
    total = Usage(1, 1, cost=0.25, priced=True) + Usage(5, 5)
    assert not total.priced
    assert describe_usage(total).endswith(", at least $0.2500 (part of the cost unknown)")


# -- notebooks ----------------------------------------------------------------------------

import sys
import types

from nacelle.console import display, html
from nacelle.messages import Message, Role, Text, ToolCall, ToolResult

HOSTILE = "<script>alert(1)</script>"


def test_html_escapes_the_conversation_and_folds_tool_calls_and_results():
    page = html([Message(Role.USER, (Text(HOSTILE),)),
                 Message(Role.ASSISTANT, (ToolCall("c1", "read", '{"p": "<b>"}'),)),
                 Message(Role.USER, (ToolResult("c1", "read", HOSTILE, failed=True),))])
    assert "<script>" not in page and page.count("&lt;script&gt;") == 2
    assert page.count("<details>") == 2 and "&rarr; read" in page and "failed" in page
    assert '&quot;p&quot;: &quot;&lt;b&gt;&quot;' in page


def test_importing_the_console_does_not_import_ipython():
    import subprocess
    code = "import sys, nacelle.console; print('IPython' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


class FakeHandle:
    def __init__(self, shown):
        self.shown = shown

    def update(self, obj):
        self.shown.append(obj.data)


def fake_ipython(monkeypatch):
    shown = []
    module = types.ModuleType("IPython.display")
    module.HTML = lambda data: types.SimpleNamespace(data=data)

    def show(obj, display_id=False):
        assert display_id is True
        shown.append(obj.data)
        return FakeHandle(shown)

    module.display = show
    monkeypatch.setitem(sys.modules, "IPython", types.ModuleType("IPython"))
    monkeypatch.setitem(sys.modules, "IPython.display", module)
    return shown


def test_display_updates_one_live_output_and_ends_with_the_whole_run(monkeypatch):
    shown = fake_ipython(monkeypatch)
    stream = EVENTS[:3] + [Event(Kind.TEXT, text=HOSTILE)] + EVENTS[3:]
    done = display(stream, interval=3600)
    assert done is EVENTS[-1]
    assert len(shown) == 2  # the empty cell, then one update: the throttle held the rest
    final = shown[-1]
    assert "&lt;script&gt;" in final and "<script>" not in final
    assert "Let me look." in final and "&rarr; read_file" in final and "refused write_file" in final
    assert "<b>done</b>: 435 tokens" in final


@pytest.mark.slow
def test_display_of_a_long_answer_joins_its_deltas_once_not_at_every_delta(monkeypatch):
    shown = fake_ipython(monkeypatch)
    deltas = [Event(Kind.TEXT, text=f"{i % 10}" * 10) for i in range(200_000)]
    started = time.monotonic()
    display(deltas, interval=3600)
    # A fraction of a second; adding each delta to the text so far took 40 s here.
    assert time.monotonic() - started < 10
    assert "".join(e.text for e in deltas) in shown[-1]


def test_display_updates_as_events_come_when_the_interval_allows(monkeypatch):
    shown = fake_ipython(monkeypatch)
    display(EVENTS, interval=0)
    assert len(shown) == len(EVENTS) + 2


def test_display_without_ipython_renders_text(monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython.display", None)  # import raises ImportError
    out = io.StringIO()
    assert display(EVENTS, out=out) is EVENTS[-1]
    assert out.getvalue() == PLAIN


def test_display_outside_a_notebook_falls_back_to_text_even_with_ipython_installed():
    import io

    pytest.importorskip("IPython", reason="IPython is not installed here")
    from nacelle.testing import ScriptedBackend

    out = io.StringIO()
    import nacelle.console

    done = nacelle.console.display(
        nacelle.Agent(ScriptedBackend(["Hello."]), "sys").stream([nacelle.user_text("hi")]),
        out=out)
    assert done is not None and done.kind is nacelle.Kind.DONE
    assert "Hello." in out.getvalue()


# -- images and documents ----------------------------------------------------------------

from nacelle.messages import Document, Image

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(1226)  # 1,234 bytes
SHOT = ToolEvent("s1", 0, "screenshot", "{}", result="the page", duration=0.5, content=(
    Text("the page"), Image("image/png", base64.b64encode(PNG_BYTES).decode()),
    Document("application/pdf", base64.b64encode(b"%PDF-1.4\n").decode(), "Q3\nreport")))


def test_a_tool_results_media_are_one_line_notes_under_its_result():
    text, _ = rendered([Event(Kind.TOOL_RESULT, tool=SHOT)], color=False)
    assert text == ("   ok screenshot 0.50s: the page\n"
                    "      [image image/png 1,234 bytes]\n"
                    "      [document application/pdf 9 bytes: Q3 report]\n")


def test_a_media_type_or_title_reaches_the_terminal_only_as_visible_escapes():
    hostile = ToolEvent("s1", 0, "shot", "{}", content=(
        Image("image/png\x1b[2J", "AAAA"), Document("text/plain", "", "\x1b]52;c;eA==\x07\u202eevil")))
    text, _ = rendered([Event(Kind.TOOL_RESULT, tool=hostile)], color=True)
    assert "\x1b[2J" not in text and "\x1b]52" not in text and "\u202e" not in text
    assert "[image image/png\\x1b[2J 3 bytes]" in text
    assert "[document text/plain 0 bytes: \\x1b]52;c;eA==\\x07\\u202eevil]" in text


def test_the_live_notebook_view_shows_a_tool_image():
    from nacelle.console import _Live

    live = _Live()
    live.add(Event(Kind.TOOL_RESULT, tool=SHOT))
    page = live.html()
    assert f'<img src="data:image/png;base64,{SHOT.content[1].data}"' in page
    assert 'download="Q3_report.pdf">Q3\nreport</a>' in page


def test_a_sub_agent_s_forwarded_work_is_indented_under_the_call_that_started_it():
    one, two = ("researcher",), ("researcher", "reader")
    events = [
        Event(Kind.TEXT, text="Asking."),
        Event(Kind.TOOL_CALL, tool=ToolEvent("p1", 0, "researcher", '{"task": "t"}')),
        Event(Kind.TURN, usage=Usage(10, 1), stop=Stop.TOOLS),
        Event(Kind.TEXT, text="Looking\nhard.", agent=one, via="p1"),
        Event(Kind.TOOL_CALL, tool=ToolEvent("r1", 0, "reader", '{"task": "u"}'), agent=one,
              via="p1"),
        Event(Kind.TURN, usage=Usage(20, 2), stop=Stop.TOOLS, agent=one, via="p1"),
        Event(Kind.TEXT, text="Read \x1b[2J it.", agent=two, via="r1"),
        Event(Kind.TURN, usage=Usage(30, 3), stop=Stop.END, agent=two, via="r1"),
        Event(Kind.TOOL_RESULT, tool=ToolEvent("r1", 0, "reader", "{}", result="Read it."),
              agent=one, via="p1"),
        Event(Kind.TEXT, text="Found.", agent=one, via="p1"),
        Event(Kind.TURN, usage=Usage(20, 2), stop=Stop.END, agent=one, via="p1"),
        Event(Kind.TOOL_RESULT, tool=ToolEvent("p1", 0, "researcher", "{}", result="Found.")),
        Event(Kind.TEXT, text="Done."),
        Event(Kind.TURN, usage=Usage(10, 1), stop=Stop.END),
        Event(Kind.DONE, usage=Usage(90, 9), stop=Stop.END),
    ]
    text, _ = rendered(events, color=False)
    assert text == """\
Asking.
-> researcher {"task":"t"}
-- turn 1: 11 tokens (in 10, out 1), cost unknown
  researcher: Looking
    hard.
  -> reader {"task":"u"}
  -- researcher turn: 22 tokens (in 20, out 2), cost unknown
    reader: Read \\x1b[2J it.
    -- reader turn: 33 tokens (in 30, out 3), cost unknown
     ok reader: Read it.
  researcher: Found.
  -- researcher turn: 22 tokens (in 20, out 2), cost unknown
   ok researcher: Found.
Done.
-- turn 2: 11 tokens (in 10, out 1), cost unknown
== done: 99 tokens (in 90, out 9), cost unknown
"""
