"""The one JSON reader for text nacelle does not control: ``json.loads`` under a depth
cap, and :class:`TooDeep`, the error it raises past the cap.

Why a cap: ``json.loads`` recurses once per nesting level, and so does nearly everything
that handles the value afterwards (``json.dumps``, ``copy.deepcopy``, a fingerprint, a
renderer). Two kilobytes of ``[[[[…]]]]`` from a model, a provider, an MCP server, a
client or a file would otherwise end a run with ``RecursionError`` — in the parser, or
worse, later, in code that never expected it. :func:`loads` counts the nesting first,
outside strings and in linear time, and refuses too deep a document before parsing it,
with an error that says what was being read.

:data:`MAX_DEPTH` (128, the default of Rust's serde_json:
https://docs.rs/serde_json/latest/serde_json/de/struct.Deserializer.html, see
``disable_recursion_limit``) bounds a value a peer sends: a tool's input, a structured
answer, an event's data (``sse.parse_json`` reads with it), a request body. Real values
nest a handful of levels. :data:`DOCUMENT_DEPTH` (160) bounds a file that holds such
values inside its own structure (a checkpoint, a batch line, a recording, a cassette):
the first cap plus room for the file's own levels, so whatever passed the first fits
inside the second.

Leaf module: imports the standard library and ``nacelle.errors`` only.
"""

from __future__ import annotations

import json
import re
from typing import Any, Union

from .errors import NacelleError

__all__ = ["DOCUMENT_DEPTH", "MAX_DEPTH", "TooDeep", "brackets_exceed", "depth_exceeds", "loads"]

#: Nesting levels allowed in a value a model, provider, MCP server or client sends.
MAX_DEPTH = 128
#: Nesting levels allowed in a file whose own structure holds such values.
DOCUMENT_DEPTH = MAX_DEPTH + 32

# A bracket, or the quote that opens a string; and the rest of a string after its quote.
# The second is the "unrolled loop" form: its two parts never match the same character,
# so a match (or a failure) costs one pass over the string.
_TOKEN = re.compile(r'[\[\]{}"]')
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


class TooDeep(NacelleError, ValueError):
    """JSON nested deeper than its reader allows; nothing was parsed.

    A ``ValueError`` like ``json.JSONDecodeError``, so code that already turns bad JSON
    into its own error turns this one too. ``what`` names the text that was being read,
    ``limit`` the levels allowed."""

    def __init__(self, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        super().__init__(f"{what} nested deeper than {limit} levels")

    def __reduce__(self) -> Any:
        return (type(self), (self.what, self.limit))


#: Text shorter than this has its brackets counted (two calls); longer text is searched.
COUNT_BELOW = 4096


def brackets_exceed(text: str, limit: int) -> bool:
    """True when ``text`` holds more than ``limit`` brackets that open (``[`` and
    ``{``, inside strings or not); text with no more cannot nest past ``limit``.

    ``str.count`` looks at each character in turn; ``str.find`` goes at memory speed
    (``memchr``). A long value usually is one long string with a bracket or two (a
    file's content as a tool's input), so long text is searched, stopping past the
    limit: 4 against 97 µs over 200 KB. Short text, where two calls cost more than
    the characters, is counted."""
    if len(text) < COUNT_BELOW:
        return text.count("[") + text.count("{") > limit
    seen = 0
    find = text.find
    for char in "[{":
        at = find(char)
        while at != -1:
            seen += 1
            if seen > limit:
                return True
            at = find(char, at + 1)
    return False


def depth_exceeds(text: str, limit: int) -> bool:
    """True when the arrays and objects in ``text`` nest more than ``limit`` deep.

    Brackets inside strings do not count. The scan stops at the first level past
    ``limit``, or at a string that never closes (the parser will reject that text
    anyway), so it costs one pass at most.
    """
    if not brackets_exceed(text, limit):
        return False
    level = 0
    at = 0
    search = _TOKEN.search
    rest = _STRING_REST.match
    while True:
        token = search(text, at)
        if token is None:
            return False
        char = token.group()
        if char == '"':
            string = rest(text, token.end())
            if string is None:
                return False
            at = string.end()
            continue
        at = token.end()
        if char in "[{":
            level += 1
            if level > limit:
                return True
        else:
            level -= 1


def loads(text: Union[str, bytes, bytearray], *, what: str = "JSON",
          max_depth: int = MAX_DEPTH, **options: Any) -> Any:
    """``json.loads(text, **options)``, refusing text nested more than ``max_depth`` deep.

    Raises :class:`TooDeep` (naming ``what``) past the cap, and what ``json.loads``
    raises for text that is not JSON. Bytes are decoded as ``json.loads`` decodes them
    (UTF-8, -16 or -32, told apart by the first bytes).
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
    if depth_exceeds(text, max_depth):
        raise TooDeep(what, max_depth)
    return json.loads(text, **options)
