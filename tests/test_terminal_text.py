"""The terminal sanitiser: what a terminal would act on is shown, never interpreted."""

import json
import time

import pytest

from nacelle.terminal_text import json_text, visible

# What a hostile model, tool or server might send: cursor moves and line erasure that
# redraw an approval, OSC 52 (clipboard), clear screen, reset, the 8-bit CSI, DEL,
# a carriage return, bidi overrides and isolates, a lone surrogate.
HOSTILE = ("rm -rf ~\x1b[A\x1b[2K\r  $ ls -la"
           "\x1b]52;c;ZWNobyBodWg=\x07"
           "\x1b[2J\x1bc\x9b2J\x9d0;title\x9c\x7f\x00\x08"
           "\u202eexe.txt\u202c\u2066x\u2069\ud83d")
INTERPRETED = set(map(chr, [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0),
                            *range(0x202a, 0x202f), *range(0x2066, 0x206a)]))


def no_control(text):
    return not (set(text) & INTERPRETED) and not any("\ud800" <= c <= "\udfff" for c in text)


def test_every_control_escape_and_bidi_character_is_shown_not_interpreted():
    shown = visible(HOSTILE)
    assert no_control(shown)
    assert shown.startswith("rm -rf ~\\x1b[A\\x1b[2K\\r  $ ls -la\\x1b]52;c;")
    assert "\\x9b2J" in shown and "\\x7f" in shown and "\\x00\\x08" in shown
    assert "\\u202eexe.txt\\u202c\\u2066x\\u2069" in shown and shown.endswith("\\ud83d")


def test_newline_tab_and_ordinary_unicode_pass_unchanged():
    text = "line one\n\tindented: caf\u00e9, \u05e9\u05dc\u05d5\u05dd, \U0001f600, \u00a0\u2028"
    assert visible(text) is text or visible(text) == text


def test_every_character_is_either_kept_or_shown_as_its_escape():
    for code in list(range(0x00, 0x300)) + list(range(0x2000, 0x2070)):
        char = chr(code)
        shown = visible(char)
        if char in INTERPRETED:
            assert shown == ("\\r" if char == "\r" else f"\\x{code:02x}" if code < 0x100
                             else f"\\u{code:04x}")
        else:
            assert shown == char


@pytest.mark.parametrize("text", [HOSTILE, "a\x1b", "\x1b[2J", "\r\n\x1b]52;c;eA==\x07"])
def test_a_stream_split_anywhere_shows_what_the_whole_would(text):
    whole = visible(text)
    for cut in range(len(text) + 1):
        assert visible(text[:cut]) + visible(text[cut:]) == whole
    assert "".join(visible(c) for c in text) == whole


@pytest.mark.slow
def test_the_work_is_linear_in_the_text():
    started = time.perf_counter()
    shown = visible("\x1b[" * 500_000 + "x")
    assert len(shown) == 500_000 * 5 + 1 and time.perf_counter() - started < 5


def test_json_text_decodes_to_the_same_value_with_nothing_a_terminal_acts_on():
    value = {"text": HOSTILE[:-1], "nested": [HOSTILE[:-1], 1, None], "lone": "\ud83d"}
    for options in ({}, {"indent": 2}):
        text = json_text(value, **options)
        assert no_control(text.replace("\n", ""))
        assert json.loads(text) == value
