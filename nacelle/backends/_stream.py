"""What every stream accumulator shares: text made well-formed as it streams.

JSON writes a character outside the Basic Multilingual Plane as two ``\\u`` escapes, a
UTF-16 surrogate pair (RFC 8259, section 7: https://www.rfc-editor.org/rfc/rfc8259#section-7),
and a server that cuts its deltas by UTF-16 code units can put the two halves of one
emoji in two deltas. Decoded alone, each half is a lone surrogate: a ``str`` Python holds
but no UTF-8 encoder takes, so a terminal, a session file, a results line or an HTTP
answer raises ``UnicodeEncodeError`` on it, long after the stream, and the answer is
lost. So no lone surrogate leaves a backend:

- :class:`Deltas` is one streamed text (a block's text or reasoning, a call's
  arguments): a high surrogate that ends a delta is held and joined with the low one
  that starts the next; a half with no partner becomes U+FFFD (REPLACEMENT CHARACTER),
  as a UTF-8 decoder does with a broken sequence. What :meth:`Deltas.add` returns is
  what to show now, and the events of a text joined are its part's text.
- :func:`well_formed` (from ``nacelle.messages``, where the rule is stated for every
  stored text) does the same to a text read whole (an id, a name, a block kept
  as JSON); :func:`clean` to every string of an event or a turn's end, which
  ``_turn.stream_turn`` applies to all a backend yields, whatever its accumulator
  missed.

And whether a call's streamed input is whole: :func:`complete_json` is the one test
the three accumulators use (a call cut by the output limit, or whose stream ended
before its input did, is reported unfinished rather than run on half its input).
Blank input is not complete JSON, and input nested past ``sse.MAX_JSON_DEPTH`` is not
JSON at all (``parse_json`` says ``ValueError``, never ``RecursionError``); what each
accumulator does with a blank input (``{}`` for a call that closed) is its own rule.

Two more rules every OpenAI-style stream shares: :func:`transient_code` says whether an
in-band error's ``code`` means "try again" (408, 429, 5xx, or a word in
:data:`TRANSIENT_CODES`, in any case), and :func:`token_count` reads one count of a
usage object, a value that is not a count logged and taken as 0.

Outer ring: imports the standard library and nacelle's core only.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, Dict, List, Mapping, TypeVar, cast

from ..events import Event, Kind, ToolEvent, _input_so_far, _wire_count
from ..messages import REPLACEMENT, well_formed
from ..sse import parse_json

__all__ = ["REPLACEMENT", "TRANSIENT_CODES", "Deltas", "clean", "complete_json", "token_count",
           "transient_code", "well_formed"]

logger = logging.getLogger(__name__)

#: In-band error codes that mean "the same request may well succeed later".
TRANSIENT_CODES = frozenset({
    "server_error", "rate_limit_exceeded", "server_is_overloaded", "slow_down",
    "internal_error", "service_unavailable", "overloaded", "timeout",
})

_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXTS = (Kind.TEXT, Kind.THINKING)

T = TypeVar("T")


def _is_high(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


class Deltas:
    """One text as a provider streams it, kept well-formed across its deltas.

    :meth:`add` takes a delta and returns the text to show now (empty while a held
    half waits for its partner); :meth:`end` closes the text, returning U+FFFD for a
    half still held; :attr:`text` is everything shown, joined once when asked.
    """

    __slots__ = ("_parts", "_held")

    def __init__(self) -> None:
        self._parts: List[str] = []
        self._held = ""

    def add(self, delta: str) -> str:
        """Take one delta; return its text to show now."""
        if not self._held and (delta.isascii() or _SURROGATE.search(delta) is None):
            if delta:
                self._parts.append(delta)
            return delta
        text, self._held = self._held + delta, ""
        if text and _is_high(text[-1]):
            text, self._held = text[:-1], text[-1]
        text = well_formed(text)
        if text:
            self._parts.append(text)
        return text

    def end(self) -> str:
        """Close the text: U+FFFD for a high surrogate whose partner never came (it is
        part of :attr:`text` from now on), else ``""``."""
        if not self._held:
            return ""
        self._held = ""
        self._parts.append(REPLACEMENT)
        return REPLACEMENT

    def replace(self, text: str) -> None:
        """Make the text ``text`` read whole (a final event that repeats it all)."""
        self._parts, self._held = [well_formed(text)] if text else [], ""

    @property
    def text(self) -> str:
        """The text so far, a half still held read as U+FFFD."""
        return "".join(self._parts) + (REPLACEMENT if self._held else "")

    def so_far(self, call_id: str, index: int, name: str) -> ToolEvent:
        """The ToolEvent of a TOOL_INPUT for this text as a call's input: its ``input``
        is the text shown so far, joined only if a reader asks (``events._input_so_far``:
        an event per delta costs the same at the first delta and the ten-thousandth)."""
        return _input_so_far(call_id, index, name, self._parts, len(self._parts))

    @property
    def last(self) -> str:
        """The last piece shown (``""`` before any)."""
        return self._parts[-1] if self._parts else ""

    def __bool__(self) -> bool:
        return bool(self._parts or self._held)


def clean(value: T) -> T:
    """``value`` (an Event, a TurnEnd, a part, a string, or a tuple of them) with every
    string in it well-formed; ``value`` itself when nothing changes."""
    if isinstance(value, str):
        return cast(T, well_formed(value))
    if isinstance(value, Event) and value.kind in _TEXTS and value.tool is None:
        text = well_formed(value.text)  # a delta: only its text can carry one
        return value if text is value.text else dataclasses.replace(value, text=text)
    if isinstance(value, tuple):
        items = tuple(clean(item) for item in value)
        return value if all(a is b for a, b in zip(items, value)) else cast(T, items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed: Dict[str, Any] = {}
        for field in dataclasses.fields(value):
            if not field.init:
                continue
            current = getattr(value, field.name)
            if isinstance(current, (str, tuple)) or (
                    dataclasses.is_dataclass(current) and not isinstance(current, type)):
                now = clean(current)
                if now is not current:
                    changed[field.name] = now
        return dataclasses.replace(value, **changed) if changed else value
    return value


def complete_json(raw: str) -> bool:
    """Whether ``raw`` (a call's input as streamed) is one whole JSON value: not blank,
    and parsed by ``parse_json`` within its depth cap."""
    if not raw.strip():
        return False
    try:
        parse_json(raw)
    except ValueError:
        return False
    return True


def transient_code(code: Any) -> bool:
    """Whether an in-band error's ``code`` (a number, a string holding one, or a word)
    means the request may succeed if sent again."""
    if isinstance(code, str):
        word = code.strip().lower()
        if word in TRANSIENT_CODES:
            return True
        try:
            code = int(word)
        except ValueError:
            return False
    if isinstance(code, bool) or not isinstance(code, int):
        return False
    return code in (408, 429) or 500 <= code <= 599


def token_count(holder: Mapping[str, Any], key: str, name: str) -> int:
    """The token count ``holder[key]``; 0, with a warning naming the provider, for a
    value that is not one (absent is 0 without a word)."""
    value = holder.get(key)
    count = _wire_count(value)
    if count is None:
        if value is not None:
            logger.warning("%s reported a %s that is not a token count (%s); counted as 0",
                           name, key, type(value).__name__)
        return 0
    return count
