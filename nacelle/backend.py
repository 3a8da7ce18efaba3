"""What a model backend is and what it is given: the Backend protocol, Capabilities,
Request, Thinking, Effort, ModelSettings, Cache, MCPServer, TurnEnd and the per-turn
contract.

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

:class:`ModelSettings` (sampling, stop sequences, seed, tool choice, the parallel-call
switch, extra body fields and headers) and :class:`Cache` (the prompt cache's lifetime
and key) ride in the Request; each backend maps every field to its provider's
documented form and says which it sends in ``Capabilities.settings``
(:func:`refused_settings` is the rule the Agent applies at construction).

Core module: imports the standard library, ``context``, ``errors``, ``events`` and
``messages``.
"""

from __future__ import annotations

import enum
import json
import math
import re
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional,
    Protocol, Tuple, Union, runtime_checkable,
)

from .context import RunContext
from .errors import ConfigError
from .events import Event, Stop, Usage
from .messages import Message, Part

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "SETTINGS",
    "Backend",
    "Cache",
    "CallProfile",
    "Capabilities",
    "Effort",
    "MCPServer",
    "ModelSettings",
    "Request",
    "Thinking",
    "TurnEnd",
    "TurnFunction",
    "refused_settings",
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
    #: the :data:`SETTINGS` this backend sends for its model (ModelSettings fields,
    #: "forced_tool_choice" for tool_choice "required" or a tool's name, "cache_ttl"
    #: for ``Cache(ttl="1h")``, "cache_key" for ``Cache(key=...)``); asking for one
    #: outside it is ``Unsupported`` at construction
    settings: FrozenSet[str] = frozenset()
    #: what of ``settings`` the model still takes while it thinks (None: all of it)
    thinking_settings: Optional[FrozenSet[str]] = None
    #: the model thinks unless told ``Effort.NONE`` (Anthropic's adaptive default)
    thinks_by_default: bool = False
    #: the highest ``temperature`` the provider takes (Anthropic's is 1)
    max_temperature: float = 2.0
    #: groups of settings of which a request may carry one at most (Claude 4.5's
    #: temperature or top_p)
    exclusive_settings: Tuple[FrozenSet[str], ...] = ()


#: Every name ``Capabilities.settings`` may hold.
SETTINGS = frozenset({
    "temperature", "top_p", "top_k", "stop", "seed", "tool_choice", "forced_tool_choice",
    "parallel_tool_calls", "extra_body", "extra_headers", "cache_ttl", "cache_key",
})

#: Body fields ``extra_body`` may not set: they carry the conversation and the run's
#: shape, which the loop reads back and the wire cache encodes once; a body that said
#: otherwise would be a run nacelle does not know it is running.
RESERVED_BODY = frozenset({"model", "messages", "input", "system", "instructions", "tools",
                           "stream"})

# A header name is an HTTP token; one that looks like a credential is refused, since
# the key travels in the backend's own header (api_key= or its variable) and a
# header given here would be logged nowhere but also hidden nowhere.
# Patterns as text, compiled (and cached by ``re``) when extra_headers are first given.
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_CREDENTIAL = r"(?i)authorization|api[-_]?key|token|secret|cookie|password"
_TOOL_CHOICES = ("auto", "required", "none")


def _number(name: str, value: Any, low: float, high: float) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and low <= value <= high):
        raise ConfigError(f"{name} must be a number from {low:g} to {high:g} or None, "
                          f"got {value!r:.60}")
    return float(value)


@dataclass(frozen=True, repr=False)  # its own __repr__ below
class ModelSettings:
    """How the model samples and calls tools, sent on every request of a run.

    ``temperature`` (0 to 2; Anthropic takes 0 to 1), ``top_p`` (0 to 1), ``top_k``
    (a whole number of at least 1), ``stop`` (sequences that end the answer; a str is
    one), ``seed``, ``tool_choice`` ("auto", "required" — some tool must be called —
    "none", or a tool's name), ``parallel_tool_calls`` (False: at most one call a
    turn), ``extra_body`` (fields merged into the JSON body last, over what nacelle
    wrote, as the official SDKs' ``extra_body`` does; the fields of
    :data:`RESERVED_BODY` are refused) and ``extra_headers`` (sent on each model
    request; a name that looks like a credential, or one the backend already sends —
    its key header above all — is refused rather than replaced). None (or empty)
    leaves the provider's default. Bad values are a ConfigError here; a setting the
    backend or its model does not take is ``Unsupported`` when the Agent is made.

    The fields and their ranges are those the providers document, and each backend
    writes them in its provider's form: Anthropic's Messages API
    (https://platform.claude.com/docs/en/api/messages/create: ``stop_sequences``,
    ``tool_choice`` types ``auto``/``any``/``tool``/``none`` with
    ``disable_parallel_tool_use``), OpenAI's Responses API
    (https://platform.openai.com/docs/api-reference/responses/create), Chat Completions
    (https://platform.openai.com/docs/api-reference/chat/create) and OpenRouter
    (https://openrouter.ai/docs/api-reference/parameters). ``extra_body`` and
    ``extra_headers`` follow the official SDKs' per-request options of those names.

    The repr names the extra headers but never shows their values.
    """

    temperature: Optional[float] = None
    top_p: Optional[float] = None
    top_k: Optional[int] = None
    stop: Tuple[str, ...] = ()
    seed: Optional[int] = None
    tool_choice: Optional[str] = None
    parallel_tool_calls: Optional[bool] = None
    extra_body: Optional[Mapping[str, Any]] = None
    extra_headers: Optional[Mapping[str, str]] = None

    if TYPE_CHECKING:  # the generated __init__, as a checker should see it
        def __init__(self, temperature: Optional[float] = None, top_p: Optional[float] = None,
                     top_k: Optional[int] = None, stop: Union[str, Iterable[str]] = (),
                     seed: Optional[int] = None, tool_choice: Optional[str] = None,
                     parallel_tool_calls: Optional[bool] = None,
                     extra_body: Optional[Mapping[str, Any]] = None,
                     extra_headers: Optional[Mapping[str, str]] = None) -> None:
            ...

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "temperature", _number("temperature", self.temperature, 0.0, 2.0))
        put(self, "top_p", _number("top_p", self.top_p, 0.0, 1.0))
        for name in ("top_k", "seed"):
            value = getattr(self, name)
            least = 1 if name == "top_k" else -(2 ** 63)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not least <= value < 2 ** 63):
                raise ConfigError(f"{name} must be a whole number of at least {least:,} or "
                                  f"None, got {value!r:.60}")
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        try:
            stop = tuple(stop)
        except TypeError:
            raise ConfigError(f"stop must be a str or a sequence of str, got "
                              f"{type(self.stop).__name__}") from None
        if not all(isinstance(s, str) and s for s in stop):
            raise ConfigError(f"stop sequences must be non-empty strings, got {stop!r:.80}")
        put(self, "stop", stop)
        choice = self.tool_choice
        if choice is not None and (not isinstance(choice, str) or not choice.strip()):
            raise ConfigError(f"tool_choice must be 'auto', 'required', 'none', a tool's "
                              f"name or None, got {choice!r:.60}")
        if not (self.parallel_tool_calls is None or isinstance(self.parallel_tool_calls, bool)):
            raise ConfigError(f"parallel_tool_calls must be True, False or None, got "
                              f"{self.parallel_tool_calls!r:.60}")
        put(self, "extra_body", _extra_body(self.extra_body))
        put(self, "extra_headers", _extra_headers(self.extra_headers))

    @property
    def forced_tool(self) -> Optional[str]:
        """The tool ``tool_choice`` names, if it names one."""
        choice = self.tool_choice
        return choice if choice is not None and choice not in _TOOL_CHOICES else None

    def used(self) -> List[str]:
        """The :data:`SETTINGS` names this value asks a backend for."""
        names = [name for name in ("temperature", "top_p", "top_k", "seed", "tool_choice",
                                   "parallel_tool_calls", "extra_body", "extra_headers")
                 if getattr(self, name) is not None]
        if self.stop:
            names.append("stop")
        if self.tool_choice == "required" or self.forced_tool is not None:
            names.append("forced_tool_choice")
        return names

    def __repr__(self) -> str:
        shown = []
        for name in ("temperature", "top_p", "top_k", "stop", "seed", "tool_choice",
                     "parallel_tool_calls", "extra_body"):
            value = getattr(self, name)
            if value is not None and value != ():
                shown.append(f"{name}={value!r}")
        if self.extra_headers is not None:
            shown.append(f"extra_headers=<{', '.join(sorted(self.extra_headers))}>")
        return f"ModelSettings({', '.join(shown)})"

    def __hash__(self) -> int:
        return hash(repr(self))


def _extra_body(body: Any) -> Optional[Dict[str, Any]]:
    if body is None:
        return None
    if not isinstance(body, Mapping) or not all(isinstance(k, str) for k in body):
        raise ConfigError(f"extra_body must be a mapping of str keys to JSON values, got "
                          f"{type(body).__name__}")
    reserved = sorted(RESERVED_BODY.intersection(body))
    if reserved:
        raise ConfigError(f"extra_body may not set {reserved}: the conversation, the tools "
                          "and the model are the Agent's to send")
    try:
        # A private copy (a caller's dict is never shared, nor later changes to it),
        # and proof now that the body can be sent.
        copied: Dict[str, Any] = json.loads(json.dumps(dict(body), allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"extra_body must hold JSON values only: {exc}"[:200]) from None
    return copied


def _extra_headers(headers: Any) -> Optional[Dict[str, str]]:
    if headers is None:
        return None
    if not isinstance(headers, Mapping):
        raise ConfigError(f"extra_headers must be a mapping of header names to str values, "
                          f"got {type(headers).__name__}")
    out: Dict[str, str] = {}
    seen = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not re.fullmatch(_TOKEN, name):
            raise ConfigError("an extra_headers name is not an HTTP token (letters, digits "
                              "and !#$%&'*+-.^_`|~)")
        if re.search(_CREDENTIAL, name):
            raise ConfigError(f"extra_headers may not carry {name!r}: credentials go in the "
                              "backend's api_key= (or its environment variable), whose "
                              "header is never logged or recorded")
        if name.lower() in seen:
            raise ConfigError(f"extra_headers names {name!r} twice")
        seen.add(name.lower())
        # The value is never shown: it is checked by kind, not echoed.
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ConfigError(f"the extra_headers value of {name!r} must be a str without "
                              "line breaks or NUL")
        out[name] = value
    return out


@dataclass(frozen=True)
class Cache:
    """How the provider's prompt cache is asked to keep a run's prefix.

    ``ttl`` is the lifetime of each cache write: "5m" (the default everywhere) or "1h",
    Anthropic's one-hour cache (``cache_control: {"type": "ephemeral", "ttl": "1h"}``
    on the breakpoints the backend places; a one-hour write costs 2x base input, a
    five-minute one 1.25x:
    https://platform.claude.com/docs/en/build-with-claude/prompt-caching), also on
    OpenRouter's Anthropic models. ``key`` is OpenAI's ``prompt_cache_key`` (Responses
    and Chat Completions, and OpenRouter's), which routes requests sharing a prefix to
    the same cache: https://platform.openai.com/docs/guides/prompt-caching.
    """

    ttl: str = "5m"
    key: Optional[str] = None

    def __post_init__(self) -> None:
        if self.ttl not in ("5m", "1h"):
            raise ConfigError(f"Cache ttl must be '5m' or '1h', got {self.ttl!r:.40}")
        if self.key is not None and (not isinstance(self.key, str) or not self.key.strip()
                                     or len(self.key) > 1024):
            raise ConfigError("Cache key must be a non-empty str of at most 1,024 "
                              "characters, or None")

    def used(self) -> List[str]:
        """The :data:`SETTINGS` names this value asks a backend for ("5m" is every
        provider's own lifetime, so it asks nothing)."""
        return (["cache_ttl"] if self.ttl == "1h" else []) + (
            ["cache_key"] if self.key is not None else [])


def refused_settings(caps: Capabilities, settings: ModelSettings, cache: Optional[Cache],
                     thinking: Thinking) -> Optional[Tuple[str, str]]:
    """What of ``settings`` and ``cache`` a backend with ``caps`` does not take, as
    (what, hint) for ``Unsupported``, or None when it takes all of it.

    A model that thinks (a budget, an effort other than NONE, or, with
    ``thinks_by_default``, no ``Effort.NONE``) is held to ``thinking_settings``.
    """
    wanted = settings.used() + (cache.used() if cache is not None else [])
    for name in wanted:
        if name not in caps.settings:
            return (f"the {name} setting", "leave it out for this backend or model")
    thinks = bool(thinking.budget) or (
        thinking.effort is not None and thinking.effort is not Effort.NONE) or (
        caps.thinks_by_default and thinking.effort is not Effort.NONE)
    if thinks and caps.thinking_settings is not None:
        for name in wanted:
            if name not in caps.thinking_settings:
                return (f"the {name} setting while the model thinks",
                        "turn thinking off with Thinking(effort=Effort.NONE), or leave "
                        "the setting out")
    for group in caps.exclusive_settings:
        given = sorted(group.intersection(wanted))
        if len(given) > 1:
            return (f"{' and '.join(given)} together", "give one of them")
    if settings.temperature is not None and settings.temperature > caps.max_temperature:
        return (f"a temperature of {settings.temperature:g} (its highest is "
                f"{caps.max_temperature:g})", "")
    return None


@dataclass(frozen=True, repr=False)  # its own __repr__ below
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
    (:class:`CallProfile`). ``settings`` and ``cache`` are the Agent's
    :class:`ModelSettings` and :class:`Cache` (None: the backend's own caching).

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
    settings: ModelSettings = field(default_factory=ModelSettings)
    cache: Optional[Cache] = None
    #: the edits the provider makes to its view of the conversation
    #: (``compaction.context_edits``), for a backend whose capabilities take them
    context_edits: Tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        for name in ("messages", "tools", "mcp", "context_edits"):
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
