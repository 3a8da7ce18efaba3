"""Text on its way to a terminal, made safe to show: the one sanitiser that every
writer of model, tool, provider or MCP server text in the CLI and the console uses.

A terminal interprets some characters instead of showing them. Cursor movement and
line erasure (``ESC[A``, ``ESC[2K``, a bare ``\\r``) let text redraw what is already on
the screen, so an approval question could read ``$ ls -la`` while another command
waits for the yes; OSC 52 writes the clipboard, ``ESC[2J`` and ``ESC c`` clear the
screen (ECMA-48, https://ecma-international.org/publications-and-standards/standards/ecma-48/;
xterm's list, https://invisible-island.net/xterm/ctlseqs/ctlseqs.html). The 8-bit C1
controls (U+0080-U+009F) are the same controls in one character: U+009B is CSI, U+009D
OSC. The bidirectional embeddings, overrides and isolates (U+202A-U+202E,
U+2066-U+2069) reorder what is shown so that code reads other than it runs ("Trojan
Source", CVE-2021-42574, https://trojansource.codes).

:func:`visible` shows each such character as its escape (ESC as ``\\x1b``, a carriage
return as ``\\r``, U+202E as ``\\u202e``); newline and tab are kept. Every character
is judged alone, with no state and no parsing of sequences, so the work is linear and
a stream split anywhere — a delta ending in ESC, the next starting with ``[2J`` —
shows exactly what the whole would. A lone surrogate (half of a character split in
two) is shown the same way, since no terminal encoding can write it.

:func:`json_text` is JSON for a stream a person may be watching (``--json``,
``--jsonl``): ``json.dumps`` already escapes C0 controls, and the rest of the set is
written as ``\\uXXXX`` escapes inside the strings, so the document decodes to exactly
the same value.

:class:`VisibleFormatter` is a :class:`logging.Formatter` for a program that shows
the library's warnings on a terminal (the ``nacelle`` command does): warnings quote
what a provider or an MCP server sent.

Leaf: imports the standard library only.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

__all__ = ["VisibleFormatter", "json_text", "visible"]

# C0 controls but tab and newline, DEL, the C1 controls, the bidi embeddings,
# overrides and isolates, and lone surrogates.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group())
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escape(match: "re.Match[str]") -> str:
    return f"\\u{ord(match.group()):04x}"


def visible(text: str) -> str:
    """``text`` with every character a terminal would act on shown as its escape."""
    return _HIDDEN.sub(_escape, text) if _HIDDEN.search(text) else text


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` with the characters
    :func:`visible` shows written as ``\\u`` escapes: the same JSON value, nothing a
    terminal acts on. Outside its strings JSON text is ASCII punctuation, names and
    numbers, so every such character found is inside a string, where any character may
    be escaped."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return _HIDDEN.sub(_json_escape, text) if _HIDDEN.search(text) else text


class VisibleFormatter(logging.Formatter):
    """A log record formatted as usual, then shown through :func:`visible`."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))
