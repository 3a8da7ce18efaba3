"""What a model backend is and what it is given: the Backend protocol, Capabilities,
Request, Thinking, Effort, MCPServer, RunContext, and the per-turn contract.

A backend declares what it can do as data (:class:`Capabilities`); the Agent
compares a configuration against it and refuses at construction — the core never
asks ``isinstance(backend, ...)``.

A backend runs a whole run (``stream(request, ctx)``), but the HTTP backends and
the scripted test double only supply one *model turn* at a time and hand the rest
to ``loop.py``. That per-turn contract is :data:`TurnFunction`: given the request
and the conversation so far, yield the turn's :class:`~nacelle.events.Event` deltas
as they arrive (TEXT, THINKING, and server-side TOOL_CALL / TOOL_RESULT with
``server`` set), then one :class:`TurnEnd` holding the assistant message's parts in
stream order, the turn's usage and its stop.

:class:`RunContext` carries cancellation and an absolute deadline down to every
sleep and read. Time is a parameter (``clock``) so tests use a fake clock instead
of patching ``time``; a clock object with a ``sleep(seconds)`` method also takes
over the waiting, so a test's sleeps are recorded rather than slept.

Core module: imports the standard library, ``errors``, ``events`` and ``messages``.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import (
    Any, Callable, Dict, Iterator, Optional, Sequence, Tuple, Type, Union,
)

from .errors import Cancelled
from .events import Event, Stop, Usage
from .messages import Message, Part

try:  # Protocol is in typing from 3.8; runtime_checkable too.
    from typing import Protocol, runtime_checkable
except ImportError:  # pragma: no cover
    Protocol = object  # type: ignore

    def runtime_checkable(cls):  # type: ignore
        return cls

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "Backend",
    "CancelEvent",
    "Capabilities",
    "Effort",
    "MCPServer",
    "Request",
    "RunContext",
    "Thinking",
    "TurnEnd",
    "TurnFunction",
]

DEFAULT_MAX_TOKENS = 32000


class Effort(str, enum.Enum):
    """How hard the model should think, for providers that take an effort level."""

    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"
    MAX = "max"

    def __repr__(self) -> str:
        return f"Effort.{self.name}"

    __str__ = str.__str__


@dataclass(frozen=True)
class Thinking:
    """Reasoning settings: an ``effort`` level, or a token ``budget``; ``show`` decides
    only whether THINKING events are emitted — reasoning always travels back to the
    provider within a run."""

    effort: Optional[Effort] = None
    budget: int = 0
    show: bool = False

    def __post_init__(self) -> None:
        if self.effort is not None and not isinstance(self.effort, Effort):
            object.__setattr__(self, "effort", Effort(self.effort))
        if self.budget < 0:
            raise ValueError(f"a thinking budget cannot be negative, got {self.budget}")


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do. Asking an Agent for more raises ``Unsupported``."""

    mcp: bool = False
    thinking: bool = False
    effort: bool = False
    min_budget: int = 0
    cost: bool = False
    token_counting: bool = False
    images: bool = False


@dataclass(frozen=True)
class MCPServer:
    """A remote MCP server the *provider* calls (server-side MCP).

    The authorization token never appears in the repr.
    """

    name: str
    url: str
    authorization_token: Optional[str] = field(default=None, repr=False)
    allowed_tools: Optional[Tuple[str, ...]] = None

    def __post_init__(self) -> None:
        if self.allowed_tools is not None and not isinstance(self.allowed_tools, tuple):
            object.__setattr__(self, "allowed_tools", tuple(self.allowed_tools))

    def __repr__(self) -> str:
        token = ", authorization_token=<hidden>" if self.authorization_token else ""
        allowed = f", allowed_tools={self.allowed_tools!r}" if self.allowed_tools is not None else ""
        return f"MCPServer(name={self.name!r}, url={self.url!r}{token}{allowed})"


@dataclass(frozen=True)
class Request:
    """Everything one run needs, built, validated and defaulted by the Agent.

    ``messages`` is the conversation the run starts from, a tuple of Message.
    """

    system: str
    messages: Tuple[Message, ...] = ()
    tools: Tuple[Any, ...] = ()
    mcp: Tuple[MCPServer, ...] = ()
    thinking: Thinking = field(default_factory=Thinking)
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_iterations: int = 0
    approve: Optional[Callable[..., bool]] = None
    hooks: Optional[Dict[Any, Sequence[Callable]]] = None
    max_parallel_tools: int = 8
    tool_timeout: Optional[float] = None

    def __post_init__(self) -> None:
        for name in ("messages", "tools", "mcp"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))


@dataclass(frozen=True)
class TurnEnd:
    """The end of one model turn, yielded last by a :data:`TurnFunction`.

    ``parts`` is the assistant message in stream order (Reasoning, Text, ToolCall,
    ProviderBlock; no Finish — the loop adds it). ``resume`` asks the loop to record
    the message and request another turn at once without running tools (a provider
    that paused a long server-side turn); such a turn counts as an iteration.
    """

    parts: Tuple[Part, ...]
    usage: Usage = field(default_factory=Usage)
    stop: Stop = Stop.END
    resume: bool = False


TurnFunction = Callable[
    ["Request", Tuple[Message, ...], "RunContext"], Iterator[Union[Event, TurnEnd]]
]


class CancelEvent(threading.Event):
    """A ``threading.Event`` that also calls back when it is set.

    A thread blocked in a socket read cannot see a flag; the code that owns the
    socket registers a callback (close the response) so that cancelling from another
    thread unblocks it at once instead of at the next read timeout.
    """

    def __init__(self) -> None:
        super().__init__()
        self._callbacks_lock = threading.Lock()
        self._callbacks: Dict[int, Callable[[], None]] = {}
        self._next_key = 0

    def set(self) -> None:
        with self._callbacks_lock:
            first = not self.is_set()
            super().set()
            callbacks = list(self._callbacks.values()) if first else []
            self._callbacks.clear()
        for callback in callbacks:
            _call_quietly(callback)

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once when the event is set (at once if it already is).

        Returns a function that unregisters it.
        """
        with self._callbacks_lock:
            if not self.is_set():
                key = self._next_key
                self._next_key += 1
                self._callbacks[key] = callback
                return lambda: self._remove(key)
        _call_quietly(callback)
        return _nothing

    def _remove(self, key: int) -> None:
        with self._callbacks_lock:
            self._callbacks.pop(key, None)


def _nothing() -> None:
    return None


def _call_quietly(callback: Callable[[], None]) -> None:
    # A failing clean-up callback must not stop the others or the cancelling thread.
    try:
        callback()
    except Exception:  # noqa: BLE001
        logging.getLogger(__name__).debug("cancel callback failed", exc_info=True)


class RunContext:
    """Cancellation and an absolute deadline, passed down to every wait.

    ``cancelled`` is a ``threading.Event`` (a new :class:`CancelEvent` when not given,
    so :meth:`on_cancel` callbacks fire the moment it is set). ``deadline`` is
    in seconds on ``clock``; reaching it raises ``deadline_error`` (``Cancelled`` by
    default; ``Retry`` passes ``RetryBudgetExceeded``).
    """

    __slots__ = ("deadline", "cancelled", "clock", "deadline_error")

    def __init__(
        self,
        deadline: Optional[float] = None,
        *,
        cancelled: Optional[threading.Event] = None,
        clock: Callable[[], float] = time.monotonic,
        deadline_error: Type[BaseException] = Cancelled,
    ) -> None:
        self.deadline = deadline
        self.cancelled = cancelled if cancelled is not None else CancelEvent()
        self.clock = clock
        self.deadline_error = deadline_error

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled.is_set() else "active"
        left = self.remaining()
        return f"<RunContext {state}, {'no deadline' if left is None else f'{left:.3f}s left'}>"

    def remaining(self) -> Optional[float]:
        """Seconds left before the deadline (never negative), or None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self.clock())

    def cancel(self) -> None:
        """Cancel the run: set ``cancelled`` (firing any ``on_cancel`` callbacks)."""
        self.cancelled.set()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when the run is cancelled; returns an unregister function.

        With a plain ``threading.Event`` passed as ``cancelled`` nothing can call back;
        the callback is then only called if the event is already set, and blocking
        code notices cancellation at its next check.
        """
        add = getattr(self.cancelled, "add_callback", None)
        if add is not None:
            return add(callback)
        if self.cancelled.is_set():
            _call_quietly(callback)
        return _nothing

    def check(self) -> None:
        """Raise ``Cancelled`` if cancelled, ``deadline_error`` if the deadline passed."""
        if self.cancelled.is_set():
            raise Cancelled("the run was cancelled")
        if self.deadline is not None and self.clock() >= self.deadline:
            raise self._deadline_passed()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, but never past the deadline and not once cancelled.

        Returns early and raises ``Cancelled`` when cancelled; when the deadline comes
        first, waits only until it and raises ``deadline_error``.
        """
        self.check()
        seconds = max(0.0, float(seconds))
        left = self.remaining()
        hits_deadline = left is not None and seconds >= left
        if hits_deadline:
            seconds = left
        if self._wait(seconds):
            raise Cancelled("the run was cancelled")
        if hits_deadline:
            raise self._deadline_passed()

    def child(
        self,
        deadline: Optional[float] = None,
        deadline_error: Optional[Type[BaseException]] = None,
    ) -> "RunContext":
        """A context sharing this one's cancellation, with a deadline no later than
        this one's. The earlier deadline brings its own error with it."""
        if deadline is None or (self.deadline is not None and self.deadline <= deadline):
            return RunContext(self.deadline, cancelled=self.cancelled, clock=self.clock,
                              deadline_error=self.deadline_error)
        return RunContext(deadline, cancelled=self.cancelled, clock=self.clock,
                          deadline_error=deadline_error or self.deadline_error)

    # -- internals --------------------------------------------------------------

    def _wait(self, seconds: float) -> bool:
        """Wait, returning True when cancelled meanwhile."""
        fake_sleep = getattr(self.clock, "sleep", None)
        if fake_sleep is not None:
            fake_sleep(seconds)
            return self.cancelled.is_set()
        return self.cancelled.wait(seconds)

    def _deadline_passed(self) -> BaseException:
        error = self.deadline_error
        return error("the run's deadline passed")


@runtime_checkable
class Backend(Protocol):
    """A model provider, as the Agent sees it.

    ``stream`` runs a whole run and must end with DONE carrying the total usage, or
    raise. ``count_tokens`` counts the request the run would send.
    """

    name: str
    capabilities: Capabilities

    def stream(self, request: Request, ctx: RunContext) -> Iterator[Event]:
        ...

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        ...
