"""The typed stream every run produces: Kind, Event, ToolEvent, Stop and Usage.

A run is a generator of :class:`Event` values. Consumers switch on ``event.kind``;
a terminal, a notebook, an SSE endpoint and a test all read the same stream, which
is why the loop never prints. Every value here is a frozen dataclass with value
equality and a readable repr.

Core module: imports the standard library only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional, Tuple

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
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float = 0.0

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
    messages: Tuple = ()

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
