"""What a model backend is and what it is given: the Backend protocol, Capabilities,
Request, Thinking, Effort, MCPServer, TurnEnd and the per-turn contract.

A backend declares what it can do as data (:class:`Capabilities`); the Agent
compares a configuration against it and refuses at construction — the core never
asks ``isinstance(backend, ...)``.

The seam between the Agent and a provider is one *model turn*, never a whole run
(as httpx's transport is one request and pydantic-ai's model one response): the
Agent runs the tool loop (``loop.py``) and asks the backend's ``turn(request,
messages, ctx)`` for each model request. Given the request and the conversation so
far, a turn yields its :class:`~nacelle.events.Event` deltas as they arrive (TEXT,
THINKING, TOOL_INPUT for each delta of a local call's arguments, and server-side
TOOL_CALL / TOOL_RESULT with ``server`` set), then one
:class:`TurnEnd` holding the assistant message's parts in stream order, the turn's
usage and its stop. A turn may also yield a local call's TOOL_CALL (``server`` empty)
the moment its input is whole — its id, its index among the turn's local calls and its
complete input, the same as its ToolCall in the TurnEnd — so that
``Agent(eager_tools=True)`` can start it while the turn streams on; the loop announces
local calls itself, so a backend that never does this loses only the early start.
:data:`TurnFunction` is that contract as a type. Because the
seam is one turn, a wrapper (``Retry``, ``Fallback``, the scripted test double) is a
Backend whose ``turn`` calls another's ``turn``: none of them calls back into the
loop, and a user's backend needs nothing but ``name``, ``capabilities`` and ``turn``
(``count_tokens`` only when its capabilities claim ``token_counting``).

:class:`Request` is what a provider sees — the system prompt, the conversation the
request starts from, tools, server-side MCP servers, thinking, the output limit,
structured output and what the request is for. The loop's own policy (iterations,
approval, hooks, budgets, the loop guard, compaction, resume state) is the run's
(``loop.RunSettings``), so a backend cannot come to depend on it. The run's
cancellation, clock and deadline arrive as a :class:`~nacelle.context.RunContext`
(``context.py``).

Core module: imports the standard library, ``context``, ``events`` and ``messages``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING, Any, Callable, FrozenSet, Iterable, Iterator, Optional, Protocol, Tuple,
    Union, runtime_checkable,
)

from .context import RunContext
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
    #: the provider's own tools it sends (``nacelle.native``): each kind it has
    #: ("web_search", "web_fetch", "code_execution") and each option of one it takes,
    #: as "kind:option"; a NativeTool outside it falls back or is ``Unsupported``
    native_tools: FrozenSet[str] = frozenset()
    #: searches deferred tools itself (``ToolSearch``: tools sent with defer_loading)
    tool_search: bool = False
    #: edits its own context (``compaction.context_edits``): the edit types it takes
    context_edits: FrozenSet[str] = frozenset()
    #: takes Document parts (PDF, plain text) in user messages
    documents: bool = False
    #: takes images and documents inside a tool result; without it a tool's media
    #: follow the results in a user message naming the call they came from
    tool_media: bool = False


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
    """What a provider is asked, built, validated and defaulted by the Agent.

    ``messages`` is the conversation the request starts from (a tuple of Message):
    what ``count_tokens`` counts, and a run's first turn. Each turn is given the
    conversation as of that turn as its own argument, so a turn reads that, never
    ``messages``. ``tools`` are the tools the model is offered; ``mcp`` the servers the
    provider calls itself. ``output`` is the run's compiled structured output (a
    :class:`nacelle.output.Output`) or None: a backend whose
    ``capabilities.structured_output`` is true sends its schema when its ``mode`` is
    "native" (the loop reads the answers). ``profile`` says what the request is for
    (:class:`CallProfile`).

    One Request serves every turn of a run (the same object), so a backend may keep
    what it derived from it for the next turn (``backends/_wire_cache.py`` does).
    """

    system: str
    messages: Tuple[Message, ...] = ()
    tools: Tuple[Any, ...] = ()
    mcp: Tuple[MCPServer, ...] = ()
    thinking: Thinking = field(default_factory=Thinking)
    max_tokens: int = DEFAULT_MAX_TOKENS
    output: Optional[Any] = None
    profile: CallProfile = CallProfile.AGENT_TURN

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


@runtime_checkable
class Backend(Protocol):
    """A model provider, as the Agent sees it: one model turn at a time.

    ``turn`` is a :data:`TurnFunction`: the turn's deltas, then one TurnEnd (or an
    exception). ``count_tokens`` counts the input tokens of ``request`` (its system
    prompt, tools and ``messages``) as the provider would; it is asked only of a
    backend whose ``capabilities.token_counting`` is true, so a backend without
    counting may leave it out or raise ``Unsupported`` (a type checker, which sees
    this protocol whole, wants the method: raise ``Unsupported`` in it).
    """

    # Read-only for a checker, so a wrapper that passes its backend's name and
    # capabilities through as properties (Retry, Fallback) is a Backend too.
    @property
    def name(self) -> str:
        ...

    @property
    def capabilities(self) -> Capabilities:
        ...

    def turn(self, request: Request, messages: Tuple[Message, ...],
             ctx: RunContext) -> Iterator[Union[Event, TurnEnd]]:
        ...

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        ...
