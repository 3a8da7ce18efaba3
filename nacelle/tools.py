"""Tools: the Tool protocol and ToolContext.

(The ``@tool`` decorator, schema generation and input validation land here too.)

Core module: imports the standard library, ``errors``.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Optional

from .errors import Cancelled

try:
    from typing import Protocol, runtime_checkable
except ImportError:  # pragma: no cover
    Protocol = object  # type: ignore

    def runtime_checkable(cls):  # type: ignore
        return cls

__all__ = ["Tool", "ToolContext"]


class ToolContext:
    """What a running tool may know about its call, and how it learns to stop.

    ``cancelled`` is set when the run is cancelled or the call timed out; a tool that
    can take long should check it (or call :meth:`check`) at convenient points.
    ``deadline`` is in ``time.monotonic()`` seconds, or None.
    """

    __slots__ = ("call_id", "index", "name", "cancelled", "deadline")

    def __init__(
        self,
        call_id: str = "",
        index: int = 0,
        name: str = "",
        cancelled: Optional[threading.Event] = None,
        deadline: Optional[float] = None,
    ) -> None:
        self.call_id = call_id
        self.index = index
        self.name = name
        self.cancelled = cancelled if cancelled is not None else threading.Event()
        self.deadline = deadline

    def __repr__(self) -> str:
        return (f"ToolContext(call_id={self.call_id!r}, index={self.index}, "
                f"name={self.name!r}, cancelled={self.cancelled.is_set()})")

    def remaining(self) -> Optional[float]:
        """Seconds left before the deadline (never negative), or None."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def check(self) -> None:
        """Raise ``Cancelled`` if the call was cancelled or its deadline passed."""
        if self.cancelled.is_set():
            raise Cancelled(f"tool call {self.call_id or self.name} was cancelled")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise Cancelled(f"tool call {self.call_id or self.name} ran out of time")


@runtime_checkable
class Tool(Protocol):
    """Anything with a name, a description, a JSON object schema and ``run``.

    ``run`` gets the validated input and a :class:`ToolContext` and returns text; it
    reports failure by raising, and the message is what the model reads. A tool may
    also set ``exclusive`` (its calls in one turn run one at a time, in the model's
    order — writers and commands) and ``read_only``.
    """

    name: str
    description: str
    schema: Dict[str, Any]

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> str:
        ...
