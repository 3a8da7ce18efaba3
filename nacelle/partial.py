"""``partial_json(text)`` and :class:`PartialJSON`: the value a JSON prefix has
streamed so far.

For progressive display of a structured answer: give ``PartialJSON().feed`` each TEXT
delta, or ``partial_json`` the deltas joined so far, and show what comes back. The
rules, so a display never jumps backwards:

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

- Containers nest at most ``bounded_json.MAX_DEPTH`` levels; deeper text reads as
  not JSON (``None``), as everywhere nacelle reads JSON it does not control.

A complete document gives exactly what ``json.loads`` gives (the tests check every
prefix of generated documents). Strict JSON: no NaN, no Infinity, no comments.

Linear, not quadratic: reading the whole text again after every delta costs the
square of its length (a 200 KB answer in 10-character deltas is 20,000 parses of up
to 200 KB). :class:`PartialJSON` keeps its place between deltas — the open containers,
the string, number or literal it is inside, an escape cut in half — so each
character is read once, and each ``feed`` costs its delta plus a join of the string
it ends inside. For that, what ``feed`` returns is the reader's own value, grown in
place by the next feed (a string still being written is replaced in its container as
it grows): a display that shows it, then shows the next one, pays for each character
once, where a fresh copy per delta would copy every open container — a list of a
thousand records a thousand times over. Keep a value across feeds with
:meth:`PartialJSON.snapshot` (or ``copy.deepcopy``). One cost stays with the reader:
a single string that is still open is joined at each feed, so a string of a megabyte
read as it grows costs its square in memory copies (C speed); to show such a string
(a file a tool call is writing), follow the deltas instead.

``partial_json`` returns values of their own (a snapshot: the containers still open
are copied, at C speed), since a function called with a text must not change what
it returned before; it keeps, per thread, the parser of the last text it was given,
and feeds it only what was added when the next text starts with that one.

Core module: imports the standard library and ``bounded_json`` (its depth cap) and
``errors`` only.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Dict, List, Optional, Union

from .bounded_json import MAX_DEPTH
from .errors import ConfigError

__all__ = ["PartialJSON", "partial_json"]

_WS = " \t\n\r"
_SKIP = re.compile(r"[ \t\n\r]*")
_SPACE = re.compile(r"\s*")  # what may come before an opening code fence
_LANGUAGE = re.compile(r"[A-Za-z0-9_-]*")
_BLANKS = re.compile(r"[ \t]*")
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')  # a string's characters up to a quote, escape or control
_DIGITS = re.compile(r"[0-9]*")
_HEX = re.compile(r"[0-9a-fA-F]*")
_LOW = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_LITERALS = {"true": True, "false": False, "null": None}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t"}

# Where the reader is, outside any value: before a code fence, inside one, reading the
# document, after it, or past text that is not JSON.
_LEAD, _TICKS, _TAG, _BLANK, _CR, _VALUE, _DONE, _DEAD = range(8)
# What an open container waits for.
_FIRST, _KEY, _COLON, _ITEM, _AFTER, _CHILD = range(6)
# Where a number is: its JSON grammar as states, and which of them end a whole number.
_SIGN, _ZERO, _INT, _DOT, _FRAC, _E, _ESIGN, _EXP = range(8)
_WHOLE = frozenset({_ZERO, _INT, _FRAC, _EXP})

_MISSING = object()

Container = Union[Dict[str, Any], List[Any]]


class _Frame:
    """An open object or array: the value so far, what comes next, the current key."""

    __slots__ = ("value", "state", "key")

    def __init__(self, value: Container) -> None:
        self.value = value
        self.state = _FIRST
        self.key = ""


class PartialJSON:
    """A JSON prefix read as it streams: :meth:`feed` takes the next delta and returns
    the value so far, by the rules of the module docstring (``None`` until something
    can be read, and for good once the text is not a JSON prefix). Each character is
    read once, so a stream costs time linear in its length. The value returned is the
    reader's own and the next feed grows it in place; :meth:`snapshot` is a copy that
    stays as it is."""

    __slots__ = ("_phase", "_ticks", "_lead_ok", "_stack", "_root", "_leaf", "_pending",
                 "_result")

    def __init__(self) -> None:
        self._phase = _LEAD
        self._ticks = 0
        self._lead_ok = True  # only " \t\n\r" so far before the value
        self._stack: List[_Frame] = []
        self._root: Any = _MISSING
        # The scalar being read: ["s", parts, is_key] / ["n", parts, state, length,
        # whole length] / ["l", letters]; None between values.
        self._leaf: Optional[List[Any]] = None
        self._pending = ""  # an escape cut in half, read again with the next delta
        self._result: Any = _MISSING

    def feed(self, delta: str) -> Any:
        """Read ``delta``, the text that follows what was fed so far; return the value
        so far (``None`` when there is none)."""
        if not isinstance(delta, str):
            raise ConfigError(f"PartialJSON.feed takes text (a str), got "
                              f"{type(delta).__name__}")
        if self._phase < _DONE and delta:
            text, self._pending = self._pending + delta, ""
            self._read(text)
        return self.value

    @property
    def value(self) -> Any:
        """The value so far, as :meth:`feed` last returned it: the reader's own, grown in
        place by the next feed (see the module docstring)."""
        if self._phase == _DONE:
            return self._result
        if self._phase != _VALUE:
            return None
        leaf = self._leaf
        if leaf is not None and leaf[0] == "s" and not leaf[2]:
            tip = "".join(leaf[1])
            leaf[1] = [tip]  # joined once: the next feed joins only what it adds
            if not self._stack:
                return tip
            self._place(tip)
        elif not self._stack:
            if leaf is not None and leaf[0] == "n" and leaf[2] in _WHOLE:
                number = _number("".join(leaf[1]))  # a bare number, as far as it goes
                return None if number is _MISSING else number
            return None
        return self._root

    def snapshot(self) -> Any:
        """The value so far as a value of its own, which later feeds never change: the
        containers still open are copied (shallow, at C speed; what is complete inside
        them is shared, so treat it as read-only). ``partial_json`` returns this."""
        value = self.value
        if self._phase != _VALUE or not self._stack:
            return value
        copies: List[Container] = [
            dict(f.value) if isinstance(f.value, dict) else list(f.value) for f in self._stack]
        for frame, parent, child in zip(self._stack, copies, copies[1:]):
            if isinstance(parent, dict):
                parent[frame.key] = child
            else:
                parent[-1] = child
        return copies[0]

    def _place(self, value: Any) -> None:
        """Put the string being read, as far as it goes, in its slot in the container
        that holds it (the slot was made when the string began)."""
        frame = self._stack[-1]
        if isinstance(frame.value, dict):
            frame.value[frame.key] = value
        else:
            frame.value[-1] = value

    # -- reading ----------------------------------------------------------------------

    def _read(self, text: str) -> None:
        at, end = 0, len(text)
        while at < end and self._phase < _DONE:
            if self._phase < _VALUE:
                at = self._fence(text, at)
            elif self._leaf is not None:
                at = self._scalar(text, at)
            else:
                at = _SKIP.match(text, at).end()  # type: ignore[union-attr]
                if at < end:
                    at = self._structure(text, at)

    def _fence(self, text: str, at: int) -> int:
        """One step through what may precede the value: whitespace, then perhaps an
        opening code fence (````json`` and the rest of its line)."""
        phase, char = self._phase, text[at]
        if phase == _LEAD:
            end = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            if end > at:
                self._lead_ok = self._lead_ok and not text[at:end].strip(_WS)
                return end
            if char == "`":
                self._phase, self._ticks = _TICKS, 1
                return at + 1
            self._phase = _VALUE if self._lead_ok else _DEAD
            return at
        if phase == _TICKS:
            if char != "`":
                self._phase = _DEAD  # one or two backticks are no fence, and no JSON
                return at
            self._ticks += 1
            if self._ticks == 3:
                self._phase = _TAG
            return at + 1
        if phase == _TAG:
            end = _LANGUAGE.match(text, at).end()  # type: ignore[union-attr]
            if end > at:
                return end
            phase = _BLANK
        if phase == _BLANK:
            end = _BLANKS.match(text, at).end()  # type: ignore[union-attr]
            if end > at:
                self._phase = _BLANK
                return end
            if char == "\r":
                self._phase = _CR
                return at + 1
        self._phase = _VALUE
        return at + 1 if char == "\n" else at

    def _structure(self, text: str, at: int) -> int:
        """Read the character at ``at`` between values: a bracket, a comma, a colon, a
        key's quote, or the first character of a value."""
        char = text[at]
        if not self._stack:
            return self._begin(char, at)
        frame = self._stack[-1]
        state, is_object = frame.state, isinstance(frame.value, dict)
        if state == _FIRST and char == ("}" if is_object else "]"):
            return self._close(at)
        if is_object and state in (_FIRST, _KEY):
            if char != '"':
                return self._die()
            self._leaf = ["s", [], True]
            return at + 1
        if state == _COLON:
            if char != ":":
                return self._die()
            frame.state = _ITEM
            return at + 1
        if state == _AFTER:
            if char == ",":
                frame.state = _KEY if is_object else _ITEM
                return at + 1
            if char == ("}" if is_object else "]"):
                return self._close(at)
            return self._die()
        return self._begin(char, at)  # an item: after ":", after "[" or after ","

    def _begin(self, char: str, at: int) -> int:
        """Start the value whose first character is ``char``."""
        if char == "{" or char == "[":
            if len(self._stack) >= MAX_DEPTH:
                return self._die()
            value: Container = {} if char == "{" else []
            self._store(value)
            self._stack.append(_Frame(value))
            return at + 1
        if char == '"':
            self._leaf = ["s", [], False]
            if self._stack:  # its slot, so the string shows as far as it goes
                self._store("")
            return at + 1
        if char == "-" or "0" <= char <= "9":
            self._leaf = ["n", [], None, 0, 0]
            return at
        if any(word.startswith(char) for word in _LITERALS):
            self._leaf = ["l", ""]
            return at
        return self._die()

    def _store(self, value: Any) -> None:
        """Put a value that has begun (a container) or ended (a scalar) in its place."""
        if not self._stack:
            if isinstance(value, (dict, list)) and self._root is _MISSING:
                self._root = value
            else:
                self._result, self._phase = value, _DONE
            return
        frame = self._stack[-1]
        if isinstance(frame.value, dict):
            frame.value[frame.key] = value
        else:
            frame.value.append(value)
        frame.state = _CHILD if isinstance(value, (dict, list)) else _AFTER

    def _close(self, at: int) -> int:
        self._stack.pop()
        if self._stack:
            self._stack[-1].state = _AFTER
        else:
            self._result, self._phase = self._root, _DONE
        return at + 1

    def _die(self) -> int:
        self._phase, self._leaf, self._stack, self._root = _DEAD, None, [], _MISSING
        return 1 << 62  # past any text: the rest is not read

    # -- scalars ----------------------------------------------------------------------

    def _scalar(self, text: str, at: int) -> int:
        leaf = self._leaf
        assert leaf is not None
        if leaf[0] == "s":
            return self._string(leaf, text, at)
        if leaf[0] == "n":
            return self._number(leaf, text, at)
        word = leaf[1] + text[at]
        for literal, value in _LITERALS.items():
            if literal == word:
                self._leaf = None
                self._store(value)
                return at + 1
            if literal.startswith(word):
                leaf[1] = word
                return at + 1
        return self._die()

    def _string(self, leaf: List[Any], text: str, at: int) -> int:
        parts: List[str] = leaf[1]
        end = _PLAIN.match(text, at).end()  # type: ignore[union-attr]
        if end > at:
            parts.append(text[at:end])
        if end >= len(text):
            return end
        char = text[end]
        if char == '"':
            self._leaf = None
            value = "".join(parts)
            if leaf[2]:  # a key: its value comes after the colon
                frame = self._stack[-1]
                frame.key, frame.state = value, _COLON
            elif self._stack:
                self._place(value)  # in the slot made when it began
            else:
                self._store(value)
            return end + 1
        if char != "\\":
            return self._die()  # a control character is not allowed in a JSON string
        return self._escape(parts, text, end)

    def _escape(self, parts: List[str], text: str, at: int) -> int:
        """Read the escape at ``at``; one cut off by the end of the text is kept for
        the next delta (at most the twelve characters of a surrogate pair)."""
        kind = text[at + 1:at + 2]
        if not kind:
            return self._hold(text, at)
        if kind in _ESCAPES:
            parts.append(_ESCAPES[kind])
            return at + 2
        if kind != "u":
            return self._die()
        digits = text[at + 2:at + 6]
        if _HEX.fullmatch(digits) is None:
            return self._die()
        if len(digits) < 4:
            return self._hold(text, at)
        code = int(digits, 16)
        if 0xD800 <= code < 0xDC00:
            # a surrogate pair: wait for its second half, as json.loads would join them
            low = text[at + 6:at + 12]
            if len(low) < 6 and "\\u".startswith(low[:2]) and _HEX.fullmatch(low[2:]):
                return self._hold(text, at)
            if _LOW.fullmatch(low):
                second = int(low[2:], 16)
                parts.append(chr(0x10000 + ((code - 0xD800) << 10) + (second - 0xDC00)))
                return at + 12
        parts.append(chr(code))
        return at + 6

    def _hold(self, text: str, at: int) -> int:
        self._pending = text[at:]
        return len(text)

    def _number(self, leaf: List[Any], text: str, at: int) -> int:
        """Follow JSON's number grammar; where a character cannot go on, the number
        ends at its longest whole prefix and what followed that is read again."""
        parts, state = leaf[1], leaf[2]
        start, end = at, len(text)
        while at < end:
            char = text[at]
            digit = "0" <= char <= "9"
            if state is None:
                state = _SIGN if char == "-" else (_ZERO if char == "0" else _INT)
            elif state in (_INT, _FRAC, _EXP) and digit:
                at = _DIGITS.match(text, at).end()  # type: ignore[union-attr]
                leaf[4] = leaf[3] + at - start
                continue
            elif state == _SIGN and digit:
                state = _ZERO if char == "0" else _INT
            elif state in (_ZERO, _INT) and char == ".":
                state = _DOT
            elif state in (_ZERO, _INT, _FRAC) and char in "eE":
                state = _E
            elif state == _DOT and digit:
                state = _FRAC
            elif state == _E and char in "+-":
                state = _ESIGN
            elif state in (_E, _ESIGN) and digit:
                state = _EXP
            else:
                break
            at += 1
            if state in _WHOLE:
                leaf[4] = leaf[3] + at - start
        parts.append(text[start:at])
        leaf[2], leaf[3] = state, leaf[3] + at - start
        if at >= end:
            return at
        number = "".join(parts)
        if leaf[4] == 0:
            return self._die()  # "-" and then something that is no digit
        self._leaf = None
        value = _number(number[:leaf[4]])
        if value is _MISSING:
            return self._die()
        self._store(value)
        rest = number[leaf[4]:]  # ".", "e" or "e+" that no digit followed
        if rest and self._phase < _DONE:
            self._read(rest)
        return at


def _number(text: str) -> Any:
    """A whole JSON number's value; ``_MISSING`` for one Python will not convert (more
    digits than ``sys.get_int_max_str_digits`` allows)."""
    try:
        return json.loads(text)
    except ValueError:
        return _MISSING


_last = threading.local()  # per thread: the last text partial_json read, and its reader


def partial_json(text: str) -> Any:
    """The value the JSON prefix ``text`` holds so far; see the module docstring.

    Called again with the same text and more, it reads only what was added: the
    reader of the last text is kept per thread. Never raises."""
    if not isinstance(text, str):
        return None
    seen: str = getattr(_last, "text", "")
    reader: Optional[PartialJSON] = getattr(_last, "reader", None)
    if reader is None or not text.startswith(seen):
        reader, seen = PartialJSON(), ""
    _last.text, _last.reader = text, reader
    reader.feed(text[len(seen):])
    value = reader.snapshot()
    return None if value is _MISSING else value
