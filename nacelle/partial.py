"""``partial_json(text)``: the value a JSON prefix has streamed so far.

For progressive display of a structured answer: feed it the TEXT deltas joined so
far and show what comes back. The rules, so a display never jumps backwards:

- A string cut mid-way is returned as far as it goes (an escape cut in half is left
  out until it is whole); an object's key cut mid-way, or a key whose value has not
  started, is left out; an array's unfinished last item is kept when it is a string,
  an object or an array, and left out when it is a number or a literal (``12`` may
  yet be ``123``, ``t`` is not yet ``true``). A bare number as the whole text is
  read as far as it goes.
- Whitespace, and one opening Markdown code fence (`````json``), before the value
  are skipped, and whatever follows a complete value is ignored: prompted models
  write both.
- Never raises. ``None`` when nothing can be read yet — or when the text is not a
  JSON prefix at all (which is also what ``None`` the JSON value reads as; the two
  are told apart by the final, complete text, which ``json.loads`` reads).

A complete document gives exactly what ``json.loads`` gives (the tests check every
prefix of generated documents). Strict JSON: no NaN, no Infinity, no comments.

Core module: imports the standard library only.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["partial_json"]

_FENCE = re.compile(r"\s*```[A-Za-z0-9_-]*[ \t]*\r?\n?")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_WS = " \t\n\r"
_LITERALS = {"true": True, "false": False, "null": None}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t"}


class _Stop(Exception):
    """The text is not a JSON prefix."""


_MISSING = object()


def partial_json(text: str) -> Any:
    """The value the JSON prefix ``text`` holds so far; see the module docstring."""
    if not isinstance(text, str):
        return None
    fence = _FENCE.match(text)
    start = fence.end() if fence is not None and "```" in fence.group() else 0
    at = _skip(text, start)
    try:
        value, _, _ = _value(text, at)
    except (_Stop, RecursionError):
        return None
    if value is _MISSING:
        # A bare number is the whole document once the text ends: shown as far as it
        # goes (inside a container it waits for what follows it).
        match = _NUMBER.match(text, at)
        if match is not None and not text[match.end():].strip(_WS):
            return json.loads(match.group())
        return None
    return value


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WS:
        at += 1
    return at


def _value(text: str, at: int) -> Tuple[Any, int, bool]:
    """(value or _MISSING, where it ends, whether it is complete)."""
    if at >= len(text):
        return _MISSING, at, False
    char = text[at]
    if char == "{":
        return _object(text, at + 1)
    if char == "[":
        return _array(text, at + 1)
    if char == '"':
        return _string(text, at + 1)
    if char == "-" or char.isdigit():
        match = _NUMBER.match(text, at)
        if match is None:
            if text[at:] == "-":
                return _MISSING, len(text), False
            raise _Stop
        end = match.end()
        if re.fullmatch(r"(?:\.|[eE][+-]?)?", text[end:]):
            return _MISSING, len(text), False  # the number may go on
        number = match.group()
        return json.loads(number), end, True
    for word, literal in _LITERALS.items():
        if text.startswith(word, at):
            return literal, at + len(word), True
        if word.startswith(text[at:]):
            return _MISSING, len(text), False
    raise _Stop


def _string(text: str, at: int) -> Tuple[Any, int, bool]:
    out: List[str] = []
    while True:
        end = at
        while end < len(text) and text[end] not in '"\\' and text[end] >= " ":
            end += 1
        out.append(text[at:end])
        if end >= len(text):
            return "".join(out), end, False
        char = text[end]
        if char == '"':
            return "".join(out), end + 1, True
        if char < " ":
            raise _Stop  # a control character is not allowed in a JSON string
        # a backslash escape
        if end + 1 >= len(text):
            return "".join(out), len(text), False
        kind = text[end + 1]
        if kind in _ESCAPES:
            out.append(_ESCAPES[kind])
            at = end + 2
            continue
        if kind != "u":
            raise _Stop
        digits = text[end + 2:end + 6]
        if not re.fullmatch(r"[0-9a-fA-F]*", digits):
            raise _Stop
        if len(digits) < 4:
            return "".join(out), len(text), False
        code = int(digits, 16)
        at = end + 6
        if 0xD800 <= code < 0xDC00:
            # a surrogate pair: wait for its second half, as json.loads would join them
            low = text[at:at + 6]
            if len(low) < 6 and ("\\u".startswith(low[:2]) and
                                 re.fullmatch(r"[0-9a-fA-F]*", low[2:])):
                return "".join(out), len(text), False
            if re.fullmatch(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}", low):
                second = int(low[2:], 16)
                out.append(chr(0x10000 + ((code - 0xD800) << 10) + (second - 0xDC00)))
                at += 6
                continue
        out.append(chr(code))


def _object(text: str, at: int) -> Tuple[Any, int, bool]:
    out: Dict[str, Any] = {}
    at = _skip(text, at)
    if at < len(text) and text[at] == "}":
        return out, at + 1, True
    while True:
        at = _skip(text, at)
        if at >= len(text):
            return out, at, False
        if text[at] != '"':
            raise _Stop
        key, at, whole = _string(text, at + 1)
        if not whole:
            return out, at, False
        at = _skip(text, at)
        if at >= len(text):
            return out, at, False
        if text[at] != ":":
            raise _Stop
        value, at, whole = _value(text, _skip(text, at + 1))
        if value is not _MISSING:
            out[key] = value
        if not whole:
            return out, at, False
        at, closed = _after_item(text, at, "}")
        if closed is not None:
            return out, at, closed


def _after_item(text: str, at: int, close: str) -> Tuple[int, Optional[bool]]:
    """What follows a container's item: ``(after it, True)`` at the closing bracket,
    ``(at, False)`` where the text ends, ``(after the comma, None)`` when another item
    follows; anything else stops the parse."""
    at = _skip(text, at)
    if at >= len(text):
        return at, False
    if text[at] == close:
        return at + 1, True
    if text[at] != ",":
        raise _Stop
    return at + 1, None


def _array(text: str, at: int) -> Tuple[Any, int, bool]:
    out: List[Any] = []
    at = _skip(text, at)
    if at < len(text) and text[at] == "]":
        return out, at + 1, True
    while True:
        at = _skip(text, at)
        if at >= len(text):
            return out, at, False
        value, at, whole = _value(text, at)
        if value is not _MISSING:
            out.append(value)
        if not whole:
            return out, at, False
        at, closed = _after_item(text, at, "]")
        if closed is not None:
            return out, at, closed
