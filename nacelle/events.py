"""The typed stream every run produces: Kind, Event, ToolEvent, Stop and Usage.

A run is a generator of :class:`Event` values. Consumers switch on ``event.kind``;
a terminal, a notebook, an SSE endpoint and a test all read the same stream, which
is why the loop never prints. Every value here is a frozen dataclass with value
equality and a readable repr.

Core module: imports the standard library and ``errors``.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

from .errors import ConfigError

__all__ = ["Event", "Kind", "Stop", "ToolEvent", "Usage"]


class Kind(str, enum.Enum):
    """What an :class:`Event` carries."""

    TEXT = "text"
    THINKING = "thinking"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    TURN = "turn"
    DONE = "done"

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
    counted apart, so the fields mean the same on every backend. ``reasoning_tokens``
    are already inside ``output_tokens``. ``cost`` is US dollars, 0.0 where unknown.

    Every count is a whole number of zero or more and ``cost`` a finite float of
    zero or more (a whole number of dollars is kept as a float); anything else is a
    :class:`~nacelle.errors.ConfigError` when the value is made. A negative or NaN
    usage would spread through every sum it joins — a run's total, a budget check —
    so it is refused where it is made, not discovered later. What a provider's odd
    number becomes is the backend's decision, made before it gets here.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float = 0.0

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
        cost = self.cost
        if type(cost) is not float or not 0.0 <= cost <= _LARGEST_FLOAT:
            object.__setattr__(self, "cost", _checked_cost(cost))

    def __add__(self, other: "Usage") -> "Usage":
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_creation_tokens + other.cache_creation_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cost + other.cost,
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


_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens",
           "reasoning_tokens")
_LARGEST_FLOAT = sys.float_info.max


def _checked_count(name: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ConfigError(f"Usage.{name} must be a whole number of tokens, zero or more; "
                      f"got {_shown(value)}")


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


@dataclass(frozen=True)
class ToolEvent:
    """One tool call, or its result, as the consumer sees it.

    ``input`` is the raw JSON text the model wrote. ``error`` is the failure text the
    model read, or None. A TOOL_RESULT carries the ``id`` of the TOOL_CALL it closes.
    ``index`` is the call's position among its turn's local calls (server-side calls
    are numbered among themselves). ``server`` is empty for local tools and names who
    ran a server-side call.
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

    @property
    def failed(self) -> bool:
        """True when the model read a failure for this call."""
        return self.error is not None


@dataclass(frozen=True)
class Event:
    """One item of a run's stream; switch on :attr:`kind`.

    ``text`` is one provider delta, never merged or split. ``usage`` is the turn's
    cost on TURN and the run's total on DONE. ``stop`` is set on TURN and DONE.
    ``messages`` is set on DONE only: the whole conversation after the run, ready for
    the next call.
    """

    kind: Kind
    text: str = ""
    tool: Optional[ToolEvent] = None
    usage: Usage = field(default_factory=Usage)
    stop: Optional[Stop] = None
    messages: Tuple[Any, ...] = ()

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
        return f"Event({', '.join(shown)})"
