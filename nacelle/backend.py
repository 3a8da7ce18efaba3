"""What a model backend is and what it is given: the Backend protocol, Capabilities,
Request, Thinking, Effort, MCPServer, and the per-turn contract.

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

A backend may also expose that turn function as ``turn``: it is the seam where
``Retry`` retries one turn rather than a whole run. The run's cancellation, clock and
deadline arrive as a :class:`~nacelle.context.RunContext` (``context.py``).

Core module: imports the standard library, ``context``, ``events`` and ``messages``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Optional, Protocol, Sequence,
    Tuple, Union, runtime_checkable,
)

from .context import Budget, RunContext
from .events import Event, Stop, Usage
from .messages import Message, Part

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "Backend",
    "CallProfile",
    "Capabilities",
    "Effort",
    "MCPServer",
    "Request",
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


class CallProfile(str, enum.Enum):
    """What a model request is for, so a backend can spend on it accordingly.

    ``AGENT_TURN`` is a turn of a run that goes on: the conversation will be sent
    again, so writing a prompt cache pays. The others are one-shot — a title, a
    compaction summary, an evaluation, a probe — and write no new cache entry: a cache
    write costs more than plain input (1.25× on Anthropic) and nothing would read it.
    """

    AGENT_TURN = "agent_turn"
    TITLE = "title"
    COMPACTION = "compaction"
    EVALUATION = "evaluation"
    PROBE = "probe"

    def __repr__(self) -> str:
        return f"CallProfile.{self.name}"

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
    structured_output: bool = False


@dataclass(frozen=True)
class MCPServer:
    """A remote MCP server the *provider* calls (server-side MCP).

    The authorization token never appears in the repr.
    """

    name: str
    url: str
    authorization_token: Optional[str] = field(default=None, repr=False)
    allowed_tools: Optional[Tuple[str, ...]] = None

    if TYPE_CHECKING:  # the generated __init__, as a checker should see it
        def __init__(self, name: str, url: str, authorization_token: Optional[str] = None,
                     allowed_tools: Optional[Iterable[str]] = None) -> None:
            ...

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
    ``output`` is the run's compiled structured output (a :class:`nacelle.output.Output`)
    or None: the loop reads final answers with it, and a backend whose
    ``capabilities.structured_output`` is true sends its schema when its ``mode`` is
    "native". ``resume`` is set by ``Agent.resume`` only (a ``checkpoint.Resume``):
    the loop runs the paused calls as decided before the first model turn, and
    continues the paused run's counts. ``profile`` says what the request is for
    (:class:`CallProfile`); ``compaction`` is the run's ``nacelle.Compaction`` or None;
    ``loop_guard`` is how many identical calls a run may make before they are refused
    (0: no guard). ``toolsets`` is the Agent's ``tools`` as given when any of them is a
    toolset (``tools.is_toolset``): ``tools`` holds their tools as of the request, and
    the loop asks the toolsets again before each model turn.
    """

    system: str
    messages: Tuple[Message, ...] = ()
    tools: Tuple[Any, ...] = ()
    mcp: Tuple[MCPServer, ...] = ()
    thinking: Thinking = field(default_factory=Thinking)
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_iterations: int = 0
    approve: Optional[Callable[..., Any]] = None
    hooks: Optional[Mapping[Any, Sequence[Callable[..., Any]]]] = None
    max_parallel_tools: int = 8
    tool_timeout: Optional[float] = None
    # A tool result longer than this reaches the model cut, with a note (0: never cut;
    # a tool's own max_result_chars overrides it). 5 MB of log is no answer to read.
    max_result_chars: int = 100_000
    budget: Optional[Budget] = None
    output: Optional[Any] = None
    resume: Optional[Any] = None
    profile: CallProfile = CallProfile.AGENT_TURN
    compaction: Optional[Any] = None
    loop_guard: int = 0
    toolsets: Tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        for name in ("messages", "tools", "mcp", "toolsets"):
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


@runtime_checkable
class Backend(Protocol):
    """A model provider, as the Agent sees it.

    ``stream`` runs a whole run and must end with DONE carrying the total usage, or
    raise. ``count_tokens`` counts the request the run would send.
    """

    # Read-only for a checker, so a wrapper that passes its backend's name and
    # capabilities through as properties (Retry, Fallback) is a Backend too.
    @property
    def name(self) -> str:
        ...

    @property
    def capabilities(self) -> Capabilities:
        ...

    def stream(self, request: Request, ctx: RunContext) -> Iterator[Event]:
        ...

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        ...
