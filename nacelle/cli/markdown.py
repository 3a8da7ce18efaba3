"""Markdown drawn on a terminal as the model streams it: headings, emphasis, inline
code, fenced code blocks, lists, block quotes, rules, and links shown as their text
followed by the URL.

Why by hand. The answer arrives in deltas and a terminal cannot take back what it
showed, so each line is drawn once, when its newline arrives, and never redrawn; a
fenced code block's state carries from line to line. Rich and markdown-it parse a
whole document and redraw; the CommonMark subset a model writes in an answer needs
neither a dependency nor a parse tree. Where this reading is simpler than CommonMark
(https://spec.commonmark.org/0.31.2/), it errs towards showing the characters: an
emphasis marker with no partner, a link that does not close, a table, HTML — all are
shown as written.

Safety. Every line passes through :func:`nacelle.terminal_text.visible` before it is
read, so what the model wrote can carry no escape sequence of its own to the terminal;
the only SGR codes written are the fixed ones below, added afterwards. The work is
linear in the line: one scan finds the code spans, one the emphasis delimiters (paired
with a stack per kind), and the link pattern's character classes exclude the brackets
that end them, so no two attempts read the same text.

Colour only: with ``color=False`` (``NO_COLOR`` set, https://no-color.org, or not a
terminal) the text passes unchanged and unbuffered, as on a pipe, since the Markdown
source is itself the plain-text form.

Imports the standard library and :mod:`nacelle.terminal_text`.
"""

from __future__ import annotations

import os
import re
from typing import IO, Dict, List, Optional, Tuple

from ..terminal_text import visible

__all__ = ["Markdown", "for_stream", "render_line"]

_RESET, _BOLD, _DIM, _ITALIC, _UNDERLINE, _STRIKE = (
    "\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[3m", "\x1b[4m", "\x1b[9m")
_CODE = "\x1b[36m"  # cyan: inline code and code blocks
_MARK = "\x1b[33m"  # yellow: list markers

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*))?")
_QUOTE = re.compile(r" {0,3}> ?(.*)")
_BULLET = re.compile(r"([ \t]*)([-*+]|\d{1,9}[.)])([ \t]+)(.*)")
# [text](url): neither part may hold the bracket that ends it, so each attempt reads
# only as far as the next bracket, and the text is bounded besides.
_LINK = re.compile(r"\[([^\[\]]{1,1000})\]\(([^()\s]{1,2000})\)")
_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_STYLE = {"**": _BOLD, "__": _BOLD, "*": _ITALIC, "_": _ITALIC, "~~": _STRIKE}


def for_stream(out: IO[str]) -> Optional["Markdown"]:
    """A Markdown renderer for ``out`` when it is a terminal that takes colour (no
    ``NO_COLOR``); None otherwise, for the text to go out as it came."""
    if os.environ.get("NO_COLOR"):
        return None
    try:
        return Markdown() if out.isatty() else None
    except (AttributeError, ValueError):
        return None


def _code_spans(line: str) -> List[Tuple[int, int, int]]:
    """(start, end, ticks) of each code span: a run of n backticks closed by the next
    run of exactly n. Runs are listed once, then each is matched through a pointer per
    length that only moves forward, so the scan is linear."""
    runs: List[Tuple[int, int]] = []
    i, n = 0, len(line)
    while i < n:
        if line[i] == "`":
            j = i
            while j < n and line[j] == "`":
                j += 1
            runs.append((i, j - i))
            i = j
        else:
            i += 1
    by_length: Dict[int, List[int]] = {}
    for index, (_, length) in enumerate(runs):
        by_length.setdefault(length, []).append(index)
    pointer: Dict[int, int] = {}
    spans, used_to = [], -1
    for index, (start, length) in enumerate(runs):
        if index <= used_to:
            continue
        same = by_length[length]
        k = pointer.get(length, 0)
        while k < len(same) and same[k] <= index:
            k += 1
        pointer[length] = k
        if k < len(same):
            close = same[k]
            spans.append((start, runs[close][0] + length, length))
            used_to = close
    return spans


def _delimiters(text: str) -> Tuple[List[Tuple[int, str]], Dict[int, int]]:
    """The emphasis delimiters of ``text`` (position, marker) and the pairs they make
    (opener index -> closer index), with one stack per marker kind."""
    found: List[Tuple[int, str, bool, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in _PUNCT:
            i += 2
            continue
        if c in "*_~":
            j = i
            while j < n and text[j] == c:
                j += 1
            run = j - i
            marker = c * 2 if run >= 2 else c
            if c == "~" and run != 2:
                i = j
                continue
            before = text[i - 1] if i else " "
            after = text[j] if j < n else " "
            opens, closes = not after.isspace(), not before.isspace()
            if c == "_":  # snake_case is no emphasis
                opens, closes = opens and not before.isalnum(), closes and not after.isalnum()
            if run in (1, 2) or (c != "~" and run == 3):
                if run == 3:  # ***both***: bold outside, italic inside
                    found.append((i, "**", opens, closes))
                    found.append((i + 2, c, opens, closes))
                else:
                    found.append((i, marker, opens, closes))
            i = j
            continue
        i += 1
    stacks: Dict[str, List[int]] = {}
    pairs: Dict[int, int] = {}
    for index, (_, marker, opens, closes) in enumerate(found):
        stack = stacks.setdefault(marker, [])
        if closes and stack:
            pairs[stack.pop()] = index
        elif opens:
            stack.append(index)
    return [(pos, marker) for pos, marker, _, _ in found], pairs


def _emphasis(text: str, base: str) -> str:
    """``text`` with its paired emphasis markers drawn as styles over ``base``."""
    delims, pairs = _delimiters(text)
    if not pairs:
        return _unescape(text)
    role: Dict[int, Tuple[str, bool]] = {}
    for opener, closer in pairs.items():
        role[delims[opener][0]] = (delims[opener][1], True)
        role[delims[closer][0]] = (delims[closer][1], False)
    out: List[str] = []
    active: List[str] = []
    i, last = 0, 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in _PUNCT:
            i += 2
            continue
        if i in role:
            marker, opening = role[i]
            out.append(_unescape(text[last:i]))
            if opening:
                active.append(_STYLE[marker])
            elif _STYLE[marker] in active:
                active.remove(_STYLE[marker])
            out.append(_RESET + base + "".join(active))
            i += len(marker)
            last = i
            continue
        i += 1
    out.append(_unescape(text[last:]))
    return "".join(out)


def _unescape(text: str) -> str:
    r"""CommonMark's backslash escapes: ``\*`` shows ``*``."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in _PUNCT:
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _links(text: str, base: str) -> str:
    """Links as their text, underlined, then the URL in brackets, dimmed; the rest with
    its emphasis."""
    out, last = [], 0
    for match in _LINK.finditer(text):
        label, url = match.group(1), match.group(2)
        out.append(_emphasis(text[last:match.start()], base))
        out.append(_UNDERLINE + _unescape(label) + _RESET + base)
        if label != url:
            out.append(" " + _DIM + "<" + url + ">" + _RESET + base)
        last = match.end()
    out.append(_emphasis(text[last:], base))
    return "".join(out)


def _inline(line: str, base: str = "") -> str:
    """A line's inline Markdown: code spans (shown as written, coloured), links,
    emphasis."""
    out, last = [], 0
    for start, end, ticks in _code_spans(line):
        out.append(_links(line[last:start], base))
        code = line[start + ticks:end - ticks]
        if code.startswith(" ") and code.endswith(" ") and code.strip():
            code = code[1:-1]
        out.append(_CODE + code + _RESET + base)
        last = end
    out.append(_links(line[last:], base))
    return base + "".join(out) + (_RESET if base else "")


def _heading_text(text: str) -> str:
    """A heading's text without its optional closing run of ``#`` (by hand: a lazy
    pattern for it rereads a long run of spaces once per character)."""
    text = text.rstrip(" \t")
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        return bare.rstrip(" \t")
    return text


def _is_rule(line: str) -> bool:
    """``---``, ``* * *`` or ``___``: three or more of one of them, spaces between."""
    if len(line) - len(line.lstrip(" ")) > 3:
        return False
    marks = line.replace(" ", "").replace("\t", "")
    return len(marks) >= 3 and marks[0] in "-*_" and marks == marks[0] * len(marks)


def render_line(line: str, fence: str = "") -> Tuple[str, str]:
    """One line (without its newline) drawn for a terminal, and the code fence open
    after it ("" outside a code block). ``line`` must already be visible."""
    opened = _FENCE.fullmatch(line)
    if fence:
        if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                and not opened.group(2).strip():
            return _DIM + line + _RESET, ""
        return _CODE + line + _RESET, fence
    if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
        return _DIM + line + _RESET, opened.group(1)
    heading = _HEADING.fullmatch(line)
    if heading:
        style = _BOLD + _UNDERLINE if len(heading.group(1)) == 1 else _BOLD
        return _inline(_heading_text(heading.group(2) or ""), style), ""
    if _is_rule(line):
        return _DIM + "-" * 40 + _RESET, ""
    quote = _QUOTE.fullmatch(line)
    if quote:
        return _DIM + "| " + _RESET + _inline(quote.group(1), _DIM), ""
    item = _BULLET.fullmatch(line)
    if item:
        indent, marker, space, rest = item.groups()
        shown = "*" if marker in "-*+" else marker
        return indent + _MARK + shown + _RESET + space + _inline(rest), ""
    return _inline(line), ""


class Markdown:
    """Streams Markdown to a terminal a line at a time: ``feed(delta)`` returns what
    can be drawn now (each line whose newline has come), ``end()`` the line still
    open, drawn as it stands, and closes any code block (the text it belonged to is
    over: a tool call or the end of the turn)."""

    def __init__(self) -> None:
        self._pending: List[str] = []  # the open line's deltas, joined once it ends
        self._fence = ""

    def feed(self, text: str) -> str:
        if "\n" not in text:
            if text:
                self._pending.append(text)
            return ""
        lines = text.split("\n")
        self._pending.append(lines[0])
        lines[0] = "".join(self._pending)
        tail = lines.pop()  # the part after the last newline: a line still open
        self._pending = [tail] if tail else []
        out: List[str] = []
        for line in lines:
            drawn, self._fence = render_line(visible(line), self._fence)
            out.append(drawn + "\n")
        return "".join(out)

    def end(self) -> str:
        line = "".join(self._pending)
        self._pending = []
        drawn = render_line(visible(line), self._fence)[0] if line else ""
        self._fence = ""
        return drawn

