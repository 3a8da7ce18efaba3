"""The typed stream every run produces: Kind, Event, ToolEvent, Stop and Usage.

A run is a generator of :class:`Event` values. Consumers switch on ``event.kind``;
a terminal, a notebook, an SSE endpoint and a test all read the same stream, which
is why the loop never prints. Every value here is a frozen dataclass with value
equality and a readable repr.

Core module: imports the standard library and ``errors`` (and, for a type checker
only, ``messages``, ``checkpoint`` and ``compaction``, which import this module).
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Type

from .errors import ConfigError

if TYPE_CHECKING:  # for a checker only: each of these imports this module
    from .checkpoint import Checkpoint
    from .compaction import Compacted
    from .messages import Message, ToolMedia

__all__ = ["Event", "Kind", "Stop", "ToolEvent", "Usage"]


class Kind(str, enum.Enum):
    """What an :class:`Event` carries."""

    TEXT = "text"
    THINKING = "thinking"
    #: one provider delta of a local call's arguments, while the model writes them:
    #: ``event.tool`` has the call's id, name and index and the input so far,
    #: ``event.text`` the delta. Every TOOL_INPUT of a call comes before its TOOL_CALL.
    #: The id is ``""`` while the provider has not sent it yet (a Chat Completions server
    #: may send it late, or never: the call's TOOL_CALL then carries the one made for it).
    TOOL_INPUT = "tool_input"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    TURN = "turn"
    DONE = "done"
    #: the conversation was shortened before the next request; ``Event.compaction`` says how
    COMPACTION = "compaction"

    def __repr__(self) -> str:
        return f"Kind.{self.name}"

    __str__ = str.__str__


class Stop(str, enum.Enum):
    """Why a turn, or a run, ended. Only :attr:`END` is a complete answer."""

    END = "end"
    TOOLS = "tools"
    MAX_TOKENS = "max_tokens"
    CONTEXT = "context"
    REFUSAL = "refusal"
    ITERATIONS = "iterations"
    OTHER = "other"
    BUDGET = "budget"
    INVALID_OUTPUT = "invalid_output"
    #: approval returned ``nacelle.PAUSE`` for a call; ``Event.checkpoint`` resumes the run
    PAUSED = "paused"
    #: the model repeated one tool call (same tool, same input) past the run's loop guard
    LOOP = "loop"

    @property
    def complete(self) -> bool:
        """True only for a finished answer (:attr:`END`)."""
        return self is Stop.END

    def __repr__(self) -> str:
        return f"Stop.{self.name}"

    __str__ = str.__str__


@dataclass(frozen=True)
class Usage:
    """Tokens (and dollars, where known) billed for a turn or a run.

    ``input_tokens`` is input billed at the full rate; cache reads and writes are
    counted apart, so the fields mean the same on every backend.
    ``cache_write_1h_tokens`` is the part of ``cache_creation_tokens`` written to
    live an hour (Anthropic's ``usage.cache_creation.ephemeral_1h_input_tokens``, asked
    for with ``Cache(ttl="1h")``), priced at 2x input against 1.25x for the rest; 0
    elsewhere. It is never more than ``cache_creation_tokens``. ``reasoning_tokens``
    are already inside ``output_tokens``. ``cost`` is US dollars, 0.0 where unknown;
    ``priced`` is True when ``cost`` is known (a price was applied, or the provider
    reported it) rather than unknown-and-zero.

    Every count is a whole number of zero or more and ``cost`` a finite float of
    zero or more (a whole number of dollars is kept as a float); anything else is a
    :class:`~nacelle.errors.ConfigError` when the value is made. A negative or NaN
    usage would spread through every sum it joins — a run's total, a budget check —
    so it is refused where it is made, not discovered later. What a provider's odd
    number becomes is the backend's decision, made before it gets here.

    Dollars are counted in whole pico-dollars (10**-12 USD) inside, and ``cost`` is
    that integer shown as a float. A float that sums a million turns of $0.000001
    ends at 1.000000000007918; the integer ends at exactly one dollar. Pico-dollars,
    not micro-: one token at $0.10 per million is 10**-7 dollars. A ``cost`` given
    as a float is taken at its shortest decimal reading (``0.1`` is 100,000,000,000
    pico-dollars, not the binary fraction nearest it), rounded to the pico-dollar.

    ``a + b`` adds field by field, and the dollars as integers. The sum is
    ``priced`` when both sides are, or when one side is the empty ``Usage()`` (the
    start of every total); a sum with an unpriced part that used tokens is not
    priced, because its ``cost`` then leaves out that part's dollars — it is a lower
    bound, not the bill.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float = 0.0
    priced: bool = False
    # The same dollars as whole pico-dollars, and what the tokens would have cost
    # with no cache. Both are filled by __post_init__ (from ``cost``), by
    # ``Price.priced`` and by ``__add__``; a value that disagrees with ``cost``
    # (``dataclasses.replace(usage, cost=...)`` copies the old one) is dropped.
    # Not compared: ``cost`` already is, and two equal costs are equal usages.
    _pico: Optional[int] = field(default=None, repr=False, compare=False)
    _pico_without_cache: Optional[int] = field(default=None, repr=False, compare=False)
    # Last, so that positional construction keeps its meaning.
    cache_write_1h_tokens: int = 0

    def __post_init__(self) -> None:
        # Every Event makes a Usage, so the common case is kept to a few type tests.
        if not (
            type(self.input_tokens) is int and self.input_tokens >= 0
            and type(self.output_tokens) is int and self.output_tokens >= 0
            and type(self.cache_read_tokens) is int and self.cache_read_tokens >= 0
            and type(self.cache_creation_tokens) is int and self.cache_creation_tokens >= 0
            and type(self.reasoning_tokens) is int and self.reasoning_tokens >= 0
        ):
            for name in _COUNTS:
                object.__setattr__(self, name, _checked_count(name, getattr(self, name)))
        hour = self.cache_write_1h_tokens
        if hour:
            hour = _checked_count("cache_write_1h_tokens", hour)
            if hour > self.cache_creation_tokens:
                raise ConfigError(f"Usage.cache_write_1h_tokens ({hour}) is part of "
                                  f"cache_creation_tokens ({self.cache_creation_tokens}) "
                                  "and cannot be more")
            object.__setattr__(self, "cache_write_1h_tokens", hour)
        cost = self.cost
        if type(cost) is not float or not 0.0 <= cost <= _LARGEST_FLOAT:
            cost = _checked_cost(cost)
            object.__setattr__(self, "cost", cost)
        if self.priced is not False and self.priced is not True:
            raise ConfigError(f"Usage.priced must be True or False; got {_shown(self.priced)}")
        pico = self._pico
        if pico is None:
            if cost:  # zero needs no integer: None reads as zero
                pico = _pico_of(cost)
                object.__setattr__(self, "cost", _dollars(pico))
                object.__setattr__(self, "_pico", pico)
                object.__setattr__(self, "_pico_without_cache", None)
        elif type(pico) is not int or pico < 0 or _dollars(pico) != cost:
            # A copy whose cost was changed under it, or a hand-made value: the
            # cost is what the caller said, and nothing is known without the cache.
            object.__setattr__(self, "_pico", None)
            object.__setattr__(self, "_pico_without_cache", None)
            self.__post_init__()
        elif not _is_count(self._pico_without_cache):
            object.__setattr__(self, "_pico_without_cache", None)

    def __add__(self, other: "Usage") -> "Usage":
        if not isinstance(other, Usage):
            return NotImplemented
        pico = (self._pico or 0) + (other._pico or 0)
        if self.priced and other.priced:
            priced = True
        elif self.priced or other.priced:
            priced = _is_empty(other) or _is_empty(self)
        else:
            priced = False
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_creation_tokens + other.cache_creation_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            _dollars(pico),
            priced,
            pico,
            self._uncached_pico() + other._uncached_pico(),
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )

    @property
    def total(self) -> int:
        """Every billed token: input, output, cache reads and cache writes."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_creation_tokens
        )

    @property
    def cache_hit_rate(self) -> float:
        """Cache reads over (reads + full-rate input); 0.0 with no input.

        Cache writes are not misses: they are what makes the next read possible.
        """
        seen = self.cache_read_tokens + self.input_tokens
        return self.cache_read_tokens / seen if seen else 0.0

    @property
    def cost_without_cache(self) -> float:
        """US dollars the same tokens would have cost with no cache.

        Cache reads and writes billed as full-rate input, so ``cost_without_cache -
        cost`` is what caching saved (negative when writes were never read back).
        Known only for a cost that :meth:`nacelle.pricing.Price.priced` worked out;
        for a cost given as a number (a provider's report) it is ``cost`` itself, a
        saving of zero rather than a guess. A sum adds the parts' figures.
        """
        return _dollars(self._uncached_pico())

    def _uncached_pico(self) -> int:
        if self._pico_without_cache is not None:
            return self._pico_without_cache
        return self._pico or 0


_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens",
           "reasoning_tokens")
_LARGEST_FLOAT = sys.float_info.max


def _checked_count(name: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ConfigError(f"Usage.{name} must be a whole number of tokens, zero or more; "
                      f"got {_shown(value)}")


_PICO_PER_DOLLAR = 10**12


def _dollars(pico: int) -> float:
    """Whole pico-dollars as a float of dollars, correctly rounded."""
    try:
        return pico / _PICO_PER_DOLLAR  # int / int rounds once, exactly
    except OverflowError:
        raise ConfigError("Usage.cost must be a finite number of dollars, zero or more; "
                          "got a sum beyond the largest float") from None


def _pico_of(dollars: float) -> int:
    """A float of dollars as whole pico-dollars, read at its shortest decimal."""
    # repr() is the shortest decimal that reads back as the same float, so 0.1
    # becomes exactly 10**11 rather than the binary fraction nearest a tenth.
    from decimal import ROUND_HALF_EVEN, Decimal  # only a nonzero float cost needs it

    return int(Decimal(repr(dollars)).scaleb(12).to_integral_value(ROUND_HALF_EVEN))


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _is_empty(usage: Usage) -> bool:
    """True for a usage with no tokens and no dollars: ``Usage()`` or its like."""
    return not (usage.total or usage.reasoning_tokens or usage._pico)


def _with_cost(usage: Usage, pico: int, pico_without_cache: int) -> Usage:
    """``usage`` priced: ``pico`` dollars, ``pico_without_cache`` with no cache.

    For :mod:`nacelle.pricing`, which works the integers out; nothing else sets them.
    """
    return Usage(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                 usage.cache_creation_tokens, usage.reasoning_tokens, _dollars(pico), True,
                 pico, pico_without_cache, usage.cache_write_1h_tokens)


def _checked_cost(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if 0 <= value <= _LARGEST_FLOAT:  # false for NaN; exact for a huge int
            return float(value)
    raise ConfigError(f"Usage.cost must be a finite number of dollars, zero or more; "
                      f"got {_shown(value)}")


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"  # repr() of 10**5000 raises
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


# -- numbers a provider reported ------------------------------------------------------
# Backends read counts and costs out of provider JSON, where anything can arrive: a
# string, null, a bool, -5, NaN, 1e400, a 400-digit integer. These two say whether a
# value is one a provider could mean; the backend decides (and logs) what to do with
# one that is not. The bounds are far beyond any real turn, and keep every sum and
# every price computed from them finite: 2**53 is the largest integer a float holds
# exactly, and no request costs a billion dollars.

_MAX_WIRE_COUNT = 2**53
_MAX_WIRE_COST = 1e9


def _wire_count(value: Any) -> Optional[int]:
    """``value`` as a token count read from a provider, or None when it is not one."""
    if type(value) is int:  # type(), not isinstance(): a bool is no count
        return value if 0 <= value <= _MAX_WIRE_COUNT else None
    if type(value) is float and value.is_integer() and 0 <= value <= _MAX_WIRE_COUNT:
        return int(value)  # some upstreams send 12.0
    return None


def _wire_cost(value: Any) -> Optional[float]:
    """``value`` as US dollars read from a provider, or None when it is not an amount."""
    if type(value) in (int, float) and 0 <= value <= _MAX_WIRE_COST:  # false for NaN
        return float(value)
    return None


_NO_USAGE = Usage()


@dataclass(frozen=True)
class ToolEvent:
    """One tool call, or its result, as the consumer sees it.

    ``input`` is the raw JSON text the model wrote. ``error`` is the failure text the
    model read, or None. A TOOL_RESULT carries the ``id`` of the TOOL_CALL it closes.
    ``index`` is the call's position among its turn's local calls (server-side calls
    are numbered among themselves). ``server`` is empty for local tools and names who
    ran a server-side call. ``paused`` marks a TOOL_RESULT that closes a call whose
    approval returned ``nacelle.PAUSE``: it has not run, and the run's checkpoint holds
    it for :meth:`Agent.resume <nacelle.Agent.resume>`. ``content`` is set on a
    TOOL_RESULT whose tool returned media: the parts (Text, Image, Document) of the
    result, ``result`` being their text.
    """

    id: str
    index: int
    name: str
    input: str
    result: str = ""
    error: Optional[str] = None
    duration: float = 0.0
    discarded: bool = False
    refused: bool = False
    server: str = ""
    paused: bool = False
    content: Tuple[ToolMedia, ...] = ()

    @property
    def failed(self) -> bool:
        """True when the model read a failure for this call."""
        return self.error is not None


class _InputSoFar(ToolEvent):
    """The ToolEvent of a TOOL_INPUT: ``input`` (the call's input so far) is joined
    from the stream's pieces only when read, then kept.

    A call's input streams in deltas of a few characters, and a long one (a file being
    written) in tens of thousands: a string of everything so far made for every delta
    would copy the square of the input's length whether anyone reads it or not. The
    pieces are shared between the events of one call (each sees its own prefix of
    them), so an event costs the same at the first delta and the ten-thousandth; a
    reader who joins every event's input pays for that join, and one that follows
    ``event.text`` (the delta) pays nothing. Everywhere else it is a ToolEvent:
    equality, repr, ``dataclasses.replace`` and pickling read ``input`` as text.

    Each call's events are instances of a subclass of their own (:func:`_input_class`)
    that holds the call's id, index and name as class attributes; an event's own
    dict holds only the call's list of pieces and ``_count``, how many of them are its
    input. The fields a TOOL_INPUT leaves at their defaults (``result``, ``error``,
    ``server``...) are read from the class too, where the dataclass keeps every
    default. So making one is an allocation and two stores: with the call's fields
    copied into each event's dict, the ToolEvent was most of what a TOOL_INPUT cost
    over a text delta. A class costs about 5 µs and 2.4 KB once a call (more than it
    saves on a call of fewer than about fifty deltas, a small part of what running
    a call costs; far less than it saves on a file written in thousands), and is
    freed by the cyclic collector (every class is a cycle), which is why the pieces,
    which may be megabytes, are not among its attributes: they are freed with the
    last event or stream that holds them.
    """

    def _joined(self) -> str:
        held = self.__dict__
        text: Optional[str] = held.get("_text")
        if text is None:
            text = held["_text"] = "".join(held["_parts"][:held["_count"]])
        return text

    def _keep(self, value: str) -> None:  # dataclass __init__ and replace() set it so
        object.__setattr__(self, "_text", value)

    input = property(_joined, _keep)

    def __reduce__(self) -> Any:
        return (ToolEvent, (self.id, self.index, self.name, self.input))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ToolEvent):
            return _fields_of(self) == _fields_of(other)
        return NotImplemented

    __hash__ = ToolEvent.__hash__

    def __repr__(self) -> str:
        return "ToolEvent" + ToolEvent.__repr__(self)[len(type(self).__qualname__):]


def _fields_of(event: ToolEvent) -> Tuple[Any, ...]:
    return tuple(getattr(event, name) for name in _TOOL_EVENT_COMPARED)


def _input_class(call_id: str, index: int, name: str) -> Type[_InputSoFar]:
    """The class of one call's TOOL_INPUT ToolEvents (see :class:`_InputSoFar`). A
    call renamed mid-stream gets another; the events made before keep the id and
    name they had."""
    return type(_InputSoFar.__name__, (_InputSoFar,), {
        "__slots__": (), "__module__": __name__, "__qualname__": _InputSoFar.__qualname__,
        "id": call_id, "index": index, "name": name})


def _input_so_far(made: Type[_InputSoFar], parts: List[str], count: int) -> ToolEvent:
    """A TOOL_INPUT's ToolEvent of the call whose class is ``made``: its input is
    ``parts[:count]``, joined when first read (``parts`` may grow afterwards, and is
    never replaced)."""
    event = _new(made)
    held = event.__dict__
    held["_parts"] = parts
    held["_count"] = count
    return event


_TOOL_EVENT_COMPARED = tuple(f.name for f in dataclasses.fields(ToolEvent) if f.compare)


@dataclass(frozen=True, init=False, repr=False)  # its own __repr__ below
class Event:
    """One item of a run's stream; switch on :attr:`kind`.

    ``text`` is one provider delta, never merged or split. ``usage`` is the turn's
    cost on TURN and the run's total on DONE. ``stop`` is set on TURN and DONE.
    ``messages`` is set on DONE only: the whole conversation after the run, ready for
    the next call. ``output`` is set on DONE only, for a run given ``output=``: the
    validated, typed answer (None when the run ended without one). ``checkpoint`` is set
    on a DONE with ``Stop.PAUSED`` only: the :class:`nacelle.Checkpoint` that resumes
    the run. ``compaction`` is set on COMPACTION only: a
    :class:`nacelle.compaction.Compacted` saying what was removed, and ``text`` is then
    the summary that replaced it (empty when the strategy wrote none).

    ``agent`` and ``via`` say whose event it is: for the run itself ``()`` and ``""``;
    for an event a sub-agent's run made and its tool forwarded
    (``subagent_tool(..., forward=True)``), the path of sub-agent names from the top
    (a grandchild's is two names long) and the id of the parent's tool call that
    started that sub-agent.
    """

    kind: Kind
    text: str = ""
    tool: Optional[ToolEvent] = None
    usage: Usage = _NO_USAGE  # one shared empty value: Usage is frozen, and most events have none
    stop: Optional[Stop] = None
    messages: Tuple[Message, ...] = ()
    # object, not Any: the stream is not generic in the output's type, so a checker
    # cannot know it here; Agent.run's Result[T] has it typed.
    output: object = None
    checkpoint: Optional[Checkpoint] = None
    compaction: Optional[Compacted] = None
    agent: Tuple[str, ...] = ()
    via: str = ""

    def __init__(self, kind: Kind, text: str = "", tool: Optional[ToolEvent] = None,
                 usage: Usage = _NO_USAGE, stop: Optional[Stop] = None,
                 messages: Tuple[Message, ...] = (), output: object = None,
                 checkpoint: Optional[Checkpoint] = None,
                 compaction: Optional[Compacted] = None, agent: Tuple[str, ...] = (),
                 via: str = "") -> None:
        # The dataclass's own __init__ of a frozen class sets each field through
        # object.__setattr__, a call per field: on the path every delta takes that was
        # most of an event's cost. Filling the instance dict is what it amounts to
        # (the class defines no __setattr__ hook to honour); the fields, their order
        # and defaults are the dataclass's, which a test holds this signature to.
        fields = self.__dict__
        fields["kind"] = kind
        fields["text"] = text
        fields["tool"] = tool
        fields["usage"] = usage
        fields["stop"] = stop
        fields["messages"] = messages
        fields["output"] = output
        fields["checkpoint"] = checkpoint
        fields["compaction"] = compaction
        fields["agent"] = agent
        fields["via"] = via

    def __repr__(self) -> str:
        # Only the fields that mean something for this kind, so a printed stream reads.
        shown = [f"kind={self.kind!r}"]
        if self.text:
            shown.append(f"text={self.text!r}")
        if self.tool is not None:
            shown.append(f"tool={self.tool!r}")
        if self.kind in (Kind.TURN, Kind.DONE):
            shown.append(f"usage={self.usage!r}")
        if self.stop is not None:
            shown.append(f"stop={self.stop!r}")
        if self.messages:
            shown.append(f"messages=<{len(self.messages)} messages>")
        if self.output is not None:
            shown.append(f"output={self.output!r}")
        if self.checkpoint is not None:
            shown.append(f"checkpoint={self.checkpoint!r}")
        if self.compaction is not None:
            shown.append(f"compaction={self.compaction!r}")
        if self.agent:
            shown.append(f"agent={self.agent!r}")
        if self.via:
            shown.append(f"via={self.via!r}")
        return f"Event({', '.join(shown)})"


_new = object.__new__
# Every field of an Event at its default, as __init__ sets them.
_DEFAULTS = dict(Event(Kind.TEXT).__dict__)


def _delta_maker(defaults: Dict[str, Any]) -> Callable[[Kind, str], Event]:
    """What makes ``Event(kind, text=text)`` by filling a new instance's dict from
    ``defaults`` (every field of an Event): a text or thinking delta is the event a
    stream makes most, and this costs a third of the call to ``__init__``. The value
    is the same as one built the usual way with the fields ``defaults`` holds."""

    def made(kind: Kind, text: str) -> Event:
        event = _new(Event)
        fields = event.__dict__
        fields.update(defaults)
        fields["kind"] = kind
        fields["text"] = text
        return event

    return made


#: ``Event(kind, text=text)`` for a delta (:func:`_delta_maker`).
_delta = _delta_maker(_DEFAULTS)


def _tagged_delta(agent: Tuple[str, ...], via: str) -> Callable[[Kind, str], Event]:
    """:data:`_delta` for a run whose deltas are made tagged (a forwarding
    sub-agent's, ``RunContext._tags``): ``agent`` and ``via`` are among the defaults
    its events' dicts are filled from, so a delta costs what an untagged one does."""
    return _delta_maker(dict(_DEFAULTS, agent=agent, via=via))
