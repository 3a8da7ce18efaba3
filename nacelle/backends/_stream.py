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

A local call's arguments as the model writes them: :class:`ToolInputs` is a turn's
local calls in order of first appearance. Each delta of a call's arguments becomes one
TOOL_INPUT (its text the delta made well-formed, its ``tool`` the call's id, name,
index and the input so far); and the moment an accumulator knows a call's input is
whole, :meth:`ToolInputs.whole` gives its TOOL_CALL (``server`` empty), which the loop
holds, or starts at once with ``Agent(eager_tools=True)``. A call is announced only
when every earlier local call of the turn is known to be finished, so its ``index`` is
the one the loop gives it at the turn's end (its place among the finished calls), and
never twice; a call that may still end unfinished (cut by the output limit) is never
announced early.

Two more rules every OpenAI-style stream shares: :func:`transient_code` says whether an
in-band error's ``code`` means "try again" (408, 429, 5xx, or a word in
:data:`TRANSIENT_CODES`, in any case), and :func:`token_count` reads one count of a
usage object, a value that is not a count logged and taken as 0.

Outer ring: imports the standard library and nacelle's core only.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar, cast

from .._loggers import get_logger
from ..events import (
    Event, Kind, ToolEvent, _input_class, _tagged_delta, _wire_count,
)
from ..messages import REPLACEMENT, well_formed
from ..sse import parse_json

__all__ = ["REPLACEMENT", "TRANSIENT_CODES", "Deltas", "Tagging", "ToolInput", "ToolInputs",
           "clean", "complete_json", "token_count", "transient_code", "well_formed"]

logger = get_logger(__name__)

#: In-band error codes that mean "the same request may well succeed later".
TRANSIENT_CODES = frozenset({
    "server_error", "rate_limit_exceeded", "server_is_overloaded", "slow_down",
    "internal_error", "service_unavailable", "overloaded", "timeout",
})

_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXTS = (Kind.TEXT, Kind.THINKING)
_TOOL_INPUT = Kind.TOOL_INPUT

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

    @property
    def last(self) -> str:
        """The last piece shown (``""`` before any)."""
        return self._parts[-1] if self._parts else ""

    def __bool__(self) -> bool:
        return bool(self._parts or self._held)


def clean(value: T) -> T:
    """``value`` (an Event, a TurnEnd, a part, a string, or a tuple of them) with every
    string in it well-formed; ``value`` itself when nothing changes.

    A TOOL_INPUT passes as it is: :class:`ToolInput` makes every string in it
    well-formed already (the id and name once, the delta through :class:`Deltas`),
    and this runs once per delta, where walking the event's fields would cost more
    than making it. A dataclass's fields to walk are found once per class
    (:func:`_walked`): ``dataclasses.fields`` and ``is_dataclass`` at every level of
    every turn's end cost more than the walk itself."""
    if isinstance(value, Event):
        kind = value.kind
        if kind is _TOOL_INPUT:
            return value
        if kind in _TEXTS and value.tool is None:
            text = well_formed(value.text)  # a delta: only its text can carry one
            return value if text is value.text else dataclasses.replace(value, text=text)
    elif isinstance(value, str):
        return cast(T, well_formed(value))
    if isinstance(value, tuple):
        items = tuple(clean(item) for item in value)
        return value if all(a is b for a, b in zip(items, value)) else cast(T, items)
    names = _WALKED.get(type(value))
    if names is None:
        names = _walked(type(value))
    if not names:
        return value
    changed: Dict[str, Any] = {}
    for name in names:
        current = getattr(value, name)
        if isinstance(current, str):
            if current.isascii():
                continue
            now: Any = well_formed(current)
        elif isinstance(current, tuple) or _WALKED.get(type(current), True):
            now = clean(current)  # a tuple, a dataclass, or a type not seen yet
        else:
            continue
        if now is not current:
            changed[name] = now
    return dataclasses.replace(value, **changed) if changed else value  # type: ignore[type-var]


#: The fields ``clean`` walks, by class: a dataclass's fields that ``__init__`` takes,
#: ``()`` for any other class (a dataclass with no such field walks nothing either).
_WALKED: Dict[type, Tuple[str, ...]] = {}


def _walked(cls: type) -> Tuple[str, ...]:
    """The fields of ``cls`` that :func:`clean` walks, found once and kept."""
    names = tuple(field.name for field in dataclasses.fields(cls) if field.init) \
        if dataclasses.is_dataclass(cls) else ()
    _WALKED[cls] = names
    return names


_new = object.__new__


class ToolInput:
    """One local call of a turn, as its arguments stream.

    ``index`` is its place among the turn's local calls by first appearance; ``id``
    and ``name`` are what the provider has sent so far (:meth:`rename` updates them);
    ``settled`` is true once :meth:`ToolInputs.whole` said it finished, with ``final``
    its input as the turn's ToolCall will hold it (None: not to be announced early);
    ``announced`` is true once its TOOL_CALL was given, after which its input may not
    change; :attr:`text` is the arguments shown so far. :attr:`raw` is the call's
    arguments as a :class:`Deltas` whose pieces are the call's: an accumulator that
    feeds the provider's deltas through it (:meth:`take`) keeps no second copy.

    :meth:`add` makes one TOOL_INPUT per delta, at a cost that does not grow with the
    input: the delta is appended to the call's list of pieces, and the event's
    ``tool.input`` (the input so far) is that list's prefix, joined only when a reader
    asks for it (``events._input_so_far``). A reader that joins every event's input
    pays for those joins (the square of the input's length over a long argument); one
    that follows ``event.text`` pays nothing. The Event and its ToolEvent are made
    by writing into new instances' dicts the fields that differ from the defaults
    (the Event's kind, delta and ToolEvent, and a forwarding sub-agent's ``agent``
    and ``via``, given as ``tags``; the ToolEvent's pieces and their count, its
    class holding the call's id, index and name: ``events._input_class``) rather
    than by the dataclasses' ``__init__`` (most of their cost, on the path every
    delta takes); the values are equal to ones built the usual way.
    """

    __slots__ = ("index", "id", "name", "announced", "settled", "final", "raw", "_tool", "_tags")

    def __init__(self, index: int, call_id: str, name: str,
                 tags: Optional[Tuple[Tuple[str, ...], str]] = None) -> None:
        self.index = index
        self._tags = tags  # (agent, via) its events are made with, as ToolInputs.tags
        self.announced = False
        self.raw = Deltas()
        self.settled = False
        self.final: Optional[str] = None
        self.id, self.name = well_formed(call_id), well_formed(name)
        self._tool = _input_class(self.id, index, self.name)

    def rename(self, call_id: str, name: str) -> None:
        """Take the call's id and name (a provider may send them after its first
        delta, or make the id only at the end; some send them again with every
        fragment, which changes nothing)."""
        call_id, name = well_formed(call_id), well_formed(name)
        if call_id != self.id or name != self.name:
            self.id, self.name = call_id, name
            # The class of the call's TOOL_INPUT ToolEvents from now on (the events
            # already made keep the id and name they were made with).
            self._tool = _input_class(call_id, self.index, name)

    @property
    def text(self) -> str:
        """The arguments shown so far."""
        return "".join(self.raw._parts)

    def add(self, shown: str) -> Event:
        """The TOOL_INPUT of one non-empty delta, already made well-formed
        (:meth:`Deltas.add`'s answer)."""
        parts = self.raw._parts
        parts.append(shown)
        tool = _new(self._tool)  # as in _event, inline: the path of every delta
        held = tool.__dict__
        held["_parts"] = parts
        held["_count"] = len(parts)
        event = _new(Event)
        fields = event.__dict__
        fields["kind"] = _TOOL_INPUT
        fields["text"] = shown
        fields["tool"] = tool
        tags = self._tags
        if tags is not None:
            fields["agent"], fields["via"] = tags
        return event

    def take(self, delta: str) -> List[Event]:
        """One delta of the arguments as the provider sent it, through :attr:`raw`:
        the TOOL_INPUT of what it shows, or none (empty, or half a character held
        for the next delta)."""
        raw = self.raw
        if raw._held or not (delta.isascii() or _SURROGATE.search(delta) is None):
            shown = raw.add(delta)  # a surrogate's half to hold or pair: Deltas decides
            return [self._event(shown, raw._parts)] if shown else []
        if not delta:
            return []
        # What raw.add does with a delta that has no surrogate in it, then the event,
        # as in _event: inline, on the path of every delta (a call each was an eighth
        # of an argument delta's cost in the accumulator).
        parts = raw._parts
        parts.append(delta)
        tool = _new(self._tool)
        held = tool.__dict__
        held["_parts"] = parts
        held["_count"] = len(parts)
        event = _new(Event)
        fields = event.__dict__
        fields["kind"] = _TOOL_INPUT
        fields["text"] = delta
        fields["tool"] = tool
        tags = self._tags
        if tags is not None:
            fields["agent"], fields["via"] = tags
        return [event]

    def end(self) -> List[Event]:
        """Close :attr:`raw`: the TOOL_INPUT of the U+FFFD a half held at the end
        becomes (:meth:`Deltas.end`, which appends it), or none."""
        raw = self.raw
        held = raw.end()
        return [self._event(held, raw._parts)] if held else []

    def _event(self, shown: str, parts: List[str]) -> Event:
        # Event(TOOL_INPUT, text=shown, tool=events._input_so_far(...)) where the
        # pieces already end with ``shown``, each filled from its class's defaults:
        # the fields left at them are read from the class, where the dataclass keeps
        # them, so only what differs is written (the values are equal to those built
        # the usual way; the tests hold them so).
        tool = _new(self._tool)
        held = tool.__dict__
        held["_parts"] = parts
        held["_count"] = len(parts)
        event = _new(Event)
        fields = event.__dict__
        fields["kind"] = _TOOL_INPUT
        fields["text"] = shown
        fields["tool"] = tool
        tags = self._tags
        if tags is not None:
            fields["agent"], fields["via"] = tags
        return event


class Tagging:
    """What an accumulator needs to make a forwarding sub-agent's deltas tagged.

    A sub-agent whose events flow into its parent's stream (``forward=True``) has
    each of them carry ``agent`` and ``via``; its run's text, reasoning and argument
    deltas are nearly all of them, and are tagged as they are made rather than
    copied afterwards (``subagent._tagged`` passes a delta so made as it is).
    ``_turn.stream_turn`` calls :meth:`tag` on a new accumulator of such a run
    (``RunContext._tags``); the accumulator makes its text and reasoning deltas with
    :attr:`_made` and its calls' TOOL_INPUTs through its :class:`ToolInputs`
    ``_inputs``. Until then both make untagged events, at no cost."""

    _inputs: "ToolInputs"
    #: Makes a text or reasoning delta: ``events._delta``, set by the accumulator's
    #: ``__init__`` (an instance attribute is read quicker than a class's
    #: staticmethod, on the path of every delta), or its tagged twin.
    _made: Callable[[Kind, str], Event]

    def tag(self, agent: Tuple[str, ...], via: str) -> None:
        """Make this turn's deltas with ``agent`` and ``via``."""
        self._made = _tagged_delta(agent, via)
        self._inputs.tags = (agent, via)


class ToolInputs:
    """A turn's local calls in order of first appearance (see the module docstring)."""

    __slots__ = ("calls", "_next", "tags")

    def __init__(self) -> None:
        self.calls: List[ToolInput] = []
        self._next = 0  # the first call not yet known to be finished
        #: (agent, via) the TOOL_INPUTs of calls started from now on are made with
        #: (:meth:`Tagging.tag`); None: untagged.
        self.tags: Optional[Tuple[Tuple[str, ...], str]] = None

    def start(self, call_id: str = "", name: str = "") -> ToolInput:
        """A new local call, the next in order."""
        call = ToolInput(len(self.calls), call_id, name, self.tags)
        self.calls.append(call)
        return call

    def whole(self, call: ToolInput, final: Optional[str]) -> List[Event]:
        """``call`` is finished; ``final`` is its input exactly as the turn's ToolCall
        will hold it, or None for a call that is finished but whose input is not to
        be announced before the turn ends (not JSON). Returns the TOOL_CALLs due now:
        this call's and any later one's waiting for it, in order. A call said whole
        twice keeps the first answer."""
        if call.settled:
            return []
        call.settled, call.final = True, final
        events: List[Event] = []
        calls = self.calls
        while self._next < len(calls) and calls[self._next].settled:
            ready = calls[self._next]
            self._next += 1
            if ready.final is not None:
                ready.announced = True
                events.append(Event(Kind.TOOL_CALL, tool=ToolEvent(
                    ready.id, ready.index, ready.name, ready.final)))
        return events


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
