"""The text ``html_to_text`` writes, finished line by line as it is written.

:class:`TextLines` takes pieces of text and, whenever a newline arrives, finishes
the line before it: strips its trailing whitespace, drops it if it would make a
second blank line in a row (blank lines inside a fenced code block are kept), and
files it. Finished lines are joined into chunks of a few hundred, and the pieces of
a long line into runs, so a page's text is held as a few large strings rather than
as one small string per piece (a page without a line break is one line), and
nothing is ever re-read to be cleaned up afterwards. That is what keeps the
conversion's memory near the size of its output and its time linear in it: a
whole-text pass with a regular expression (the obvious way to squeeze blank lines
outside code) backtracks over every line that looks like a fence.

Blank lines at the start and at the end of the text are dropped, as
``str.strip("\\n")`` would.

Outer ring: imports the standard library only.
"""

from __future__ import annotations

from typing import List

__all__ = ["TextLines"]

CHUNK_LINES = 512
RUN_PIECES = 256


class TextLines:
    """Pieces of text in, finished Markdown lines out."""

    def __init__(self) -> None:
        self._chunks: List[str] = []  # runs of finished lines, each joined with "\n"
        self._lines: List[str] = []  # finished lines not yet joined into a chunk
        self._line: List[str] = []  # the latest pieces of the line being written
        self._runs: List[str] = []  # its earlier pieces, joined
        self._blanks = 0  # blank lines held back until a non-blank line follows
        self._blanks_kept = False  # whether those blank lines were inside code
        self._started = False  # a non-blank line has been filed
        self.verbatim = False  # inside a fenced code block: blank lines are kept
        self.written = False  # anything at all has been written
        self.last = "\n"  # the last character written, "\n" before anything

    def write(self, text: str) -> None:
        if not text:
            return
        self.written = True
        self.last = text[-1]
        first, *rest = text.split("\n")
        if first:
            self._add(first)
        for part in rest:
            self._finish_line()
            if part:
                self._add(part)

    def _add(self, piece: str) -> None:
        self._line.append(piece)
        if len(self._line) > RUN_PIECES:
            # The last piece stays loose: trim_spaces may still need to cut it.
            self._runs.append("".join(self._line[:-1]))
            del self._line[:-1]

    def trim_spaces(self) -> bool:
        """Strip trailing spaces from the latest pieces of the line being written;
        whether there were any."""
        trimmed = False
        while self._line:
            piece = self._line[-1]
            kept = piece.rstrip(" ")
            if kept == piece:
                break
            trimmed = True
            if kept:
                self._line[-1] = kept
                break
            self._line.pop()
        if trimmed:
            self.last = (self._line[-1][-1] if self._line
                         else self._runs[-1][-1] if self._runs else "\n")
        return trimmed

    def _finish_line(self) -> None:
        line = "".join(self._runs + self._line).rstrip()
        self._line = []
        self._runs = []
        if not line:
            if self._started:
                self._blanks += 1
                self._blanks_kept = self.verbatim
            return
        if self._blanks:
            self._lines.extend([""] * (self._blanks if self._blanks_kept else 1))
            self._blanks = 0
        self._started = True
        self._lines.append(line)
        if len(self._lines) >= CHUNK_LINES:
            self._chunks.append("\n".join(self._lines))
            self._lines = []

    def text(self) -> str:
        """The whole text, ending in one newline (or empty); call once, at the end."""
        self._finish_line()
        if self._lines:
            self._chunks.append("\n".join(self._lines))
            self._lines = []
        if not self._chunks:
            return ""
        return "\n".join(self._chunks) + "\n"
