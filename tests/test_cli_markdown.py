"""Markdown drawn on a terminal as it streams: line by line, never redrawn, only our
own SGR codes, linear in a hostile line."""

import io
import re
import time

import pytest

from nacelle.cli.markdown import Markdown, for_stream, render_line

SGR = re.compile(r"\x1b\[[0-9;]*m")
B, I, U, S, D, C, Y, R = ("\x1b[1m", "\x1b[3m", "\x1b[4m", "\x1b[9m", "\x1b[2m", "\x1b[36m",
                          "\x1b[33m", "\x1b[0m")


def draw(text, step=None):
    """What a Markdown stream writes for ``text`` fed in deltas of ``step`` characters
    (whole when None), ended."""
    md = Markdown()
    if step is None:
        return md.feed(text) + md.end()
    return "".join(md.feed(text[i:i + step]) for i in range(0, len(text), step)) + md.end()


def plain(drawn):
    return SGR.sub("", drawn)


def test_headings_are_bold_and_a_first_level_one_underlined_without_their_hashes():
    assert render_line("# Title #")[0] == B + U + "Title" + R
    assert render_line("### Part three")[0] == B + "Part three" + R
    assert render_line(" * * *")[0] == D + "-" * 40 + R and render_line("--")[0] == "--"
    assert render_line("#hashtag")[0] == "#hashtag"


def test_emphasis_inline_code_and_strikethrough_are_styled_and_their_markers_dropped():
    drawn = render_line("a **bold**, *it*, `x * y` and ~~gone~~")[0]
    assert plain(drawn) == "a bold, it, x * y and gone"
    assert B + "bold" in drawn and I + "it" in drawn and C + "x * y" + R in drawn
    assert S + "gone" in drawn


def test_a_link_is_its_text_then_its_url():
    drawn = render_line("see [the docs](https://example.com/a_b) now")[0]
    assert plain(drawn) == "see the docs <https://example.com/a_b> now"
    assert U + "the docs" + R in drawn


def test_list_markers_are_coloured_and_nested_lists_keep_their_indent():
    assert render_line("- one")[0] == Y + "*" + R + " one"
    assert render_line("  2. two")[0] == "  " + Y + "2." + R + " two"


def test_unpaired_markers_snake_case_and_escapes_are_shown_as_written():
    assert render_line("2 * 3 * 4 is 24")[0] == "2 * 3 * 4 is 24"
    assert render_line("call snake_case_name")[0] == "call snake_case_name"
    assert render_line("a **b and [c](d")[0] == "a **b and [c](d"
    assert plain(render_line(r"\*not it\*")[0]) == "*not it*"


def test_a_code_blocks_state_carries_across_lines_and_its_lines_are_not_read_as_markdown():
    text = "before\n```python\n# not a heading\nx = '**no**'\n```\n# after\n"
    drawn = draw(text).split("\n")
    assert drawn[1] == D + "```python" + R
    assert drawn[2] == C + "# not a heading" + R and drawn[3] == C + "x = '**no**'" + R
    assert drawn[4] == D + "```" + R and drawn[5] == B + U + "after" + R


def test_a_line_is_drawn_when_its_newline_arrives_and_end_draws_the_open_line():
    md = Markdown()
    assert md.feed("# Tit") == ""
    assert md.feed("le\nsome **bo") == B + U + "Title" + R + "\n"
    assert md.feed("ld**") == ""
    assert plain(md.end()) == "some bold"
    assert md.end() == ""


def test_a_stream_split_anywhere_draws_what_the_whole_draws():
    text = ("# Notes\n\nSome *emphasis* and `code`.\n\n```\nraw *text*\n```\n"
            "- [a link](http://x.y)\n> quoted **bold**\nlast line")
    whole = draw(text)
    for step in (1, 2, 3, 7, 13):
        assert draw(text, step) == whole


def test_escape_sequences_from_the_model_are_shown_and_only_our_sgr_codes_remain():
    hostile = "# \x1b[2J**x**\n`\x1b]52;c;eA==\x07` \x9b2J \u202e [l](\x1bc)\n```\n\x1b[1A\n"
    drawn = draw(hostile)
    assert "\\x1b[2J" in drawn and "\\x1b]52;c;eA==\\x07" in drawn and "\\u202e" in drawn
    rest = SGR.sub("", drawn).replace("\n", "")
    assert not [c for c in rest if ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0
                or 0x202a <= ord(c) <= 0x202e]
    assert all(code in (B, I, U, S, D, C, Y, R, "\x1b[0m")
               for code in SGR.findall(drawn)), SGR.findall(drawn)


@pytest.mark.parametrize("make", [
    lambda n: "[" * n, lambda n: "*a" * (n // 2), lambda n: "`" * n,
    lambda n: "` `` ``` " * (n // 9), lambda n: "_a " * (n // 3),
    lambda n: "# x" + " " * n + "y", lambda n: "[aa](" * (n // 5),
    lambda n: ("[" + "a" * 999) * (n // 1000), lambda n: " " * n + "x",
    lambda n: "~~a" * (n // 3), lambda n: "- " * (n // 2) + "x"])
def test_a_long_hostile_line_is_drawn_in_linear_time(make):
    def took(text):
        best = float("inf")
        for _ in range(3):  # the best of three: a loaded machine only ever adds time
            start = time.perf_counter()
            render_line(text)
            best = min(best, time.perf_counter() - start)
        return best

    small, large = took(make(25_000)), took(make(100_000))
    assert large < 5.0
    assert large < 12 * max(small, 0.01)  # four times the text: not sixteen times the work


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_only_a_terminal_without_no_color_gets_markdown(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert isinstance(for_stream(Tty()), Markdown)
    assert for_stream(io.StringIO()) is None
    monkeypatch.setenv("NO_COLOR", "1")
    assert for_stream(Tty()) is None
