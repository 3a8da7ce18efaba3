"""Agent and Result: configuration checked once, runs as generators of events.

``Agent(backend, system, ...)`` validates everything at construction and refuses
rather than degrades: no backend, an empty system prompt, a bad tool (duplicate or
provider-rejected name, a schema that is not a JSON object schema) and every
feature the backend's Capabilities lack raise there. Two choices beyond the
contract: a thinking budget must be below ``max_tokens`` (providers count thinking
inside the output limit and reject the request otherwise), and MCP server names
must be unique (the provider addresses servers by name).

Structured output (``output=``, ``output.py``) is compiled here too, so a type the
schema generator cannot express, or ``output_mode="native"`` on a backend without it,
fails at construction. Per run, ``stream``/``run`` take ``output=`` to override the
Agent's (``None`` turns it off for that run). Tool mode adds the final-answer tool to
the run's tools (a tool of the Agent's own with its name is refused); prompted mode
appends the schema to the run's system prompt.

``resume(checkpoint, decisions)`` goes on with a run that paused for approval
(``checkpoint.py``): the decisions are checked here, before anything runs — every
pending id needs one and no other id may have one (ConfigError), an edited input must
pass the tool's schema (ConfigError) and replaces the call's input in the
conversation — it is then a new call, counted by the loop guard and asked of the
before-hooks, which may deny it (the loop does that) — and a tool the checkpoint's run had but this Agent lacks is a
CheckpointError. Any Agent with those tools can resume, in any process: the
checkpoint, not the Agent, carries the run's state.

``tools=`` is a list of tools and toolsets (anything with ``current()`` listing its
tools of the moment, as ``client.tools(live=True)`` from ``nacelle.mcp``); a toolset
given bare, not in a list, is taken as that one toolset and asked before each turn,
as it would be inside a list, which is what passing a live list means.

``tool_search=ToolSearch(defer_over=30)`` defers the tools of a run that has more than
``defer_over`` (and any ``@tool(defer=True)``), to be found by a search: the
provider's own where it has one, a local ``search_tools`` tool elsewhere
(``tool_search.py``).

``eager_tools=True`` starts a call the moment its input is whole, while the model
still writes the rest of its reply (``loop.py``). Measured on a 2-second reply of three
calls (``benchmarks/run.py --only 11``), a call started 52 ms after its last argument
byte against 604 ms: the time saved is the rest of the reply. It is off by default,
decided on what it changes rather than on the speed: a turn's TOOL_CALL and
TOOL_RESULT events then interleave with its text and come before its TURN, which a
consumer written for the first order must not meet unasked, and a call with side
effects runs even when the model's turn then fails (the failed turn is not retried,
since one of its calls has already run).

``model_settings=`` (a :class:`~nacelle.backend.ModelSettings`: sampling, stop
sequences, seed, tool choice, the parallel-call switch, extra body fields and headers)
and ``cache=`` (a :class:`~nacelle.backend.Cache`: the prompt cache's lifetime and
key) go into every request; a setting the backend or its model does not take is
``Unsupported`` here (``backend.refused_settings``, read from
``capabilities.settings``), and a ``tool_choice`` naming a tool the Agent lacks, or
asking for a call with no tool, is a ConfigError.

A run is the Agent's: it builds the run's :class:`~nacelle.backend.Request` (what the
provider sees) and :class:`~nacelle.loop.RunSettings` (the loop's policy) and runs
``loop.run`` with the backend's ``turn``, so any object with ``name``,
``capabilities`` and ``turn`` is a backend (``count_tokens`` too, for counting).

An Agent holds configuration, never run state, so one Agent serves many runs, from
many threads at once, and pickles when its backend, tools and callbacks do.

Each ``stream`` call makes its own RunContext. A caller's ``cancel`` event is only
watched, never set or cleared. A :class:`~nacelle.context.CancelEvent` (or anything
with its ``add_callback``) calls the run back the moment it is set, which closes the
backend's response and tells tools to stop — no thread, no polling. A plain
``threading.Event`` cannot call anyone back, so a small daemon thread looks at it
every 50 ms and exits when the run ends; that poll is the price of never touching
an event the library does not own, and the reason to pass a CancelEvent.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Generator, Generic, Iterable, List, Mapping, Optional,
    Sequence, Tuple, Type, TypedDict, TypeVar, Union, cast, overload,
)

from ._loggers import get_logger
from .backend import (
    DEFAULT_MAX_TOKENS, Backend, Cache, CallProfile, Effort, MCPServer, ModelSettings, Request,
    Thinking, refused_settings,
)
from .context import Budget, RunContext, ToolContext
from .errors import Cancelled, CheckpointError, ConfigError, StreamError, Unsupported
from .events import Event, Kind, Stop, Usage
from .loop import RunSettings, run
from .messages import Document, Image, Message, Role, ToolCall
from .output import FINAL_ANSWER, Output, check_options, make_output
from .toolcalls import Handover
from .tools import ToolLike, Toolset, expand_tools, is_toolset, tools_by_name

__all__ = ["Agent", "Result"]


class _ModuleAtFirstUse:
    """A module imported at the first read of one of its names, for a module that
    names it in annotations only: ``typing.get_type_hints`` evaluates them in this
    module's globals and finds the real class then."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        from importlib import import_module

        return getattr(import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported at first use>"


if not TYPE_CHECKING:
    # logging.Logger appears in annotations only; get_type_hints still resolves it.
    from ._loggers import logging_for_annotations as logging
    # nacelle.compaction: loaded when an Agent is given a Compaction (the check below)
    # or get_type_hints reads the annotations; a run without one never needs it.
    _compaction = _ModuleAtFirstUse("nacelle.compaction")
    # nacelle.checkpoint: loaded when a run pauses or is resumed; a run that never
    # pauses does not need its classes.
    _checkpoint = _ModuleAtFirstUse("nacelle.checkpoint")
    # nacelle.tool_search: loaded when an Agent is given a ToolSearch or holds a
    # deferred tool.
    _searches = _ModuleAtFirstUse("nacelle.tool_search")
    # nacelle.observe: loaded when an Agent is given observers or its logger logs DEBUG.
    _observe = _ModuleAtFirstUse("nacelle.observe")
    # nacelle.hooks: loaded when an Agent is given hooks.
    _hooks = _ModuleAtFirstUse("nacelle.hooks")
if TYPE_CHECKING:
    import logging

    from . import checkpoint as _checkpoint
    from . import compaction as _compaction
    from . import hooks as _hooks
    from . import observe as _observe
    from . import tool_search as _searches

    import typing_extensions

    # The type of a run's structured output. Its default (a PEP 696 TypeVar default,
    # from typing_extensions for checkers only) keeps a bare ``Agent`` or ``Result`` in a
    # user's annotations meaning what it meant before: any output.
    OutputT = typing_extensions.TypeVar("OutputT", covariant=True, default=Any)
else:
    OutputT = TypeVar("OutputT", covariant=True)
T = TypeVar("T")

#: ``approve(name, input, ctx)``: True runs the call; False, a reason str or PAUSE do not
#: (``toolcalls.py`` reads the answer, so any value type-checks).
Approve = Callable[[str, Dict[str, Any], ToolContext], object]
#: A decision for a paused call: run it (True), refuse it (False or the reason the model
#: reads), or run it with this input instead (a dict).
Decision = Union[bool, str, Dict[str, Any]]

_WATCH_INTERVAL = 0.05

#: ``stream``/``run`` without ``output=``: the Agent's own applies.
_AGENT_OUTPUT: Any = object()


@dataclass(frozen=True, repr=False)  # its own __repr__ below
class Result(Generic[OutputT]):
    """What ``Agent.run`` returns: the final assistant text, the whole conversation
    after the run, the total usage, why it stopped, and how many model requests it
    took; ``output`` is the typed answer of a run given ``output=`` (None otherwise, and
    when the run ended without a valid one); ``checkpoint`` resumes a run that ended
    with ``Stop.PAUSED`` (None otherwise).

    For a checker it is ``Result[T]`` with ``output: Optional[T]``, T being the type
    given as ``output=`` (``Result[None]`` without one, ``Result[Any]`` for a
    ``Schema`` or a typing form such as ``Optional[X]``). Optional, not ``T``: a run
    that stops without a valid answer (``Stop.INVALID_OUTPUT``, ``MAX_ITERATIONS``,
    ``PAUSED``, a budget) has None there, and a checker that let
    ``result.output.city`` through would hide exactly that case; test ``result.output
    is not None`` (or ``result.stop``) first.
    """

    text: str
    messages: Tuple[Message, ...]
    usage: Usage
    stop: Stop
    turns: int
    output: Optional[OutputT] = None
    checkpoint: Optional[_checkpoint.Checkpoint] = None

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return (f"Result(stop={self.stop!r}, turns={self.turns}, tokens={self.usage.total}, "
                f"cost=${self.usage.cost:.4f}, messages=<{len(self.messages)} messages>, "
                f"text={text!r}{_shown_output(self.output)})")

    def _repr_markdown_(self) -> str:
        footer = (f"*{self.stop.value} · {self.turns} turn{'s' if self.turns != 1 else ''} · "
                  f"{self.usage.total:,} tokens")
        if self.usage.cost:
            footer += f" · ${self.usage.cost:.4f}"
        if self.output is not None:
            return f"```python\n{self.output!r}\n```\n\n---\n{footer}*"
        return f"{self.text}\n\n---\n{footer}*"

    def _repr_html_(self) -> str:
        # Escaped here rather than rendered by nacelle.console: the core never imports
        # the outer ring, and a notebook needs no more than this.
        answer = repr(self.output) if self.output is not None else self.text
        facts = [self.stop.value, f"{self.turns} turn{'s' if self.turns != 1 else ''}",
                 f"{self.usage.total:,} tokens (in {self.usage.input_tokens:,}, out "
                 f"{self.usage.output_tokens:,}, cache read {self.usage.cache_read_tokens:,}, "
                 f"cache write {self.usage.cache_creation_tokens:,})"]
        if self.usage.priced or self.usage.cost:
            facts.append(f"${self.usage.cost:.4f}")
        stop = "" if self.stop.complete else ' style="color:#d0453a"'
        return (f'<div class="nacelle-result"><div style="white-space:pre-wrap">{_esc(answer)}</div>'
                f"<hr><div{stop}><small>{_esc(' · '.join(facts))}</small></div>"
                f"{_tool_calls_html(self.messages)}</div>")


def _esc(text: str) -> str:
    import html  # notebook views only: not loaded with the core

    return html.escape(text, quote=True)


def _tool_calls_html(messages: Sequence[Message]) -> str:
    """The run's tool calls, each folded in ``<details>`` with its input and result."""
    results = {r.id: r for m in messages for r in m.tool_results}
    shown = []
    for call in (c for m in messages for c in m.tool_calls):
        result = results.get(call.id)
        status = "no result" if result is None else ("failed" if result.failed else "ok")
        shown.append(f"<details><summary>{_esc(call.name)} &middot; {status}</summary>"
                     f"<pre>{_esc(call.input)}</pre>"
                     f"<pre>{_esc(result.result if result is not None else '')}</pre></details>")
    return f"<div>{len(shown)} tool call{'s' if len(shown) != 1 else ''}{''.join(shown)}</div>" \
        if shown else ""


def _shown_output(output: Any) -> str:
    if output is None:
        return ""
    text = repr(output)
    return f", output={text if len(text) <= 80 else text[:77] + '...'}"


def _with_skills(system: str, tools: Tuple[ToolLike, ...], skills: Any,
                 ) -> Tuple[str, Tuple[ToolLike, ...]]:
    """The system prompt with a SkillSet's index after it, and the tools with its
    ``skill`` tool (``nacelle.skills``; read duck-typed, the core imports no files)."""
    if skills is None:
        return system, tools
    index, tool_ = getattr(skills, "index", None), getattr(skills, "tool", None)
    if not isinstance(index, str) or tool_ is None:
        raise ConfigError(f"skills must be a nacelle.skills.SkillSet (nacelle.skills.load), "
                          f"got {type(skills).__name__}")
    if not index:
        return system, tools
    return f"{system}\n\n{index}", tools + (tool_,)


class _Options(TypedDict, total=False):
    """Agent's keyword options but ``output``, for its typed overloads (which differ
    only in ``output``); tests/test_agent.py holds it to the signature."""

    thinking: Thinking
    max_tokens: int
    max_iterations: int
    tools: Union[Iterable[ToolLike], Toolset]
    mcp: Iterable[MCPServer]
    approve: Optional[Approve]
    hooks: Optional[Mapping[_hooks.HookPoint, Union[_hooks.Hook, Sequence[_hooks.Hook]]]]
    max_parallel_tools: int
    tool_timeout: Optional[float]
    max_result_chars: int
    budget: Optional[Budget]
    output_mode: str
    output_retries: int
    profile: CallProfile
    compaction: Optional[_compaction.Compaction]
    loop_guard: int
    eager_tools: bool
    model_settings: Optional[ModelSettings]
    cache: Optional[Cache]
    tool_search: Optional[_searches.ToolSearch]
    observers: Sequence[_observe.Observer]
    logger: Optional[logging.Logger]
    skills: Any


class Agent(Generic[OutputT]):
    """A model with a system prompt and tools; see the module docstring.

    For a checker it is ``Agent[T]``, T the type of its ``output=`` (None without one,
    Any for a ``Schema`` or a typing form), which ``run`` gives its :class:`Result`.
    """

    @overload
    def __init__(self: Agent[None], backend: Backend, system: str, *, output: None = None,
                 **options: typing_extensions.Unpack[_Options]) -> None: ...
    @overload
    def __init__(self: Agent[T], backend: Backend, system: str, *, output: Type[T],
                 **options: typing_extensions.Unpack[_Options]) -> None: ...
    @overload
    def __init__(self: Agent[Any], backend: Backend, system: str, *, output: object,
                 **options: typing_extensions.Unpack[_Options]) -> None: ...

    def __init__(
        self,
        backend: Backend,
        system: str,
        *,
        thinking: Thinking = Thinking(),
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_iterations: int = 50,
        tools: Union[Iterable[ToolLike], Toolset] = (),
        mcp: Iterable[MCPServer] = (),
        approve: Optional[Approve] = None,
        hooks: Optional[Mapping[_hooks.HookPoint,
                                Union[_hooks.Hook, Sequence[_hooks.Hook]]]] = None,
        max_parallel_tools: int = 8,
        tool_timeout: Optional[float] = None,
        max_result_chars: int = 100_000,
        budget: Optional[Budget] = None,
        output: Any = None,
        output_mode: str = "auto",
        output_retries: int = 2,
        profile: CallProfile = CallProfile.AGENT_TURN,
        compaction: Optional[_compaction.Compaction] = None,
        loop_guard: int = 3,
        eager_tools: bool = False,
        model_settings: Optional[ModelSettings] = None,
        cache: Optional[Cache] = None,
        tool_search: Optional[_searches.ToolSearch] = None,
        observers: Sequence[_observe.Observer] = (),
        logger: Optional[logging.Logger] = None,
        skills: Any = None,
    ) -> None:
        if backend is None:
            raise ConfigError("an Agent needs a backend, e.g. nacelle.backends.anthropic.Backend()")
        for attribute in ("name", "capabilities", "turn"):
            if not hasattr(backend, attribute):
                raise ConfigError(f"{type(backend).__name__} is not a Backend: it has no {attribute!r}")
        if not callable(backend.turn):
            raise ConfigError(f"{type(backend).__name__} is not a Backend: its turn is not callable")
        if not isinstance(system, str) or not system.strip():
            raise ConfigError("an Agent needs a non-empty system prompt")
        if not isinstance(thinking, Thinking):
            raise ConfigError(f"thinking must be a nacelle.Thinking, got {type(thinking).__name__}")
        _check_int("max_tokens", max_tokens, 1)
        _check_int("max_iterations", max_iterations, 0)
        _check_int("max_parallel_tools", max_parallel_tools, 1)
        if tool_timeout is not None and (isinstance(tool_timeout, bool) or
                                         not isinstance(tool_timeout, (int, float)) or
                                         not tool_timeout > 0):
            raise ConfigError(f"tool_timeout must be a positive number of seconds or None, "
                              f"got {tool_timeout!r}")
        _check_int("max_result_chars", max_result_chars, 0)
        if approve is not None and not callable(approve):
            raise ConfigError(f"approve must be callable, got {type(approve).__name__}")
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"budget must be a nacelle.Budget, got {type(budget).__name__}")
        if budget is not None and budget.cost is not None and not backend.capabilities.cost:
            raise ConfigError(f"a cost budget needs prices, and backend {backend.name!r} "
                              "knows none: give it pricing= or budget by tokens")
        if not isinstance(profile, CallProfile):
            raise ConfigError(f"profile must be a nacelle.CallProfile, got {profile!r:.60}")
        if compaction is not None and not _is_compaction(compaction):
            raise ConfigError(f"compaction must be a nacelle.Compaction, got "
                              f"{type(compaction).__name__}")
        _check_edits(compaction, backend, thinking)
        _check_int("loop_guard", loop_guard, 0)
        if eager_tools is not True and eager_tools is not False:
            raise ConfigError(f"eager_tools must be True or False, got {eager_tools!r:.60}")
        if model_settings is not None and not isinstance(model_settings, ModelSettings):
            raise ConfigError(f"model_settings must be a nacelle.ModelSettings, got "
                              f"{type(model_settings).__name__}")
        if cache is not None and not isinstance(cache, Cache):
            raise ConfigError(f"cache must be a nacelle.Cache, got {type(cache).__name__}")
        # A toolset given bare (``tools=client.tools(live=True)``) is one toolset, not
        # the list it yields when iterated: read as a list it would be the server's
        # tools of this moment, and the run would never see the list change.
        held: Tuple[ToolLike, ...] = (
            (cast(Toolset, tools),) if is_toolset(tools) else tuple(cast(Iterable[ToolLike], tools)))
        system, held = _with_skills(system, held, skills)
        # A NativeTool is an instance of nacelle.native's class, so none is held while
        # that module is unloaded; a plain Agent's tools are not looked at again.
        if "nacelle.native" in sys.modules:
            from . import native

            held = native.resolve(held, getattr(backend.capabilities, "native_tools",
                                                frozenset()), backend.name)
        tools_by_name(expand_tools(held))
        mcp = tuple(mcp)
        self.backend = backend
        self.system = system
        self.thinking = thinking
        self.max_tokens = max_tokens
        self.max_iterations = max_iterations
        self.tools = held
        self.mcp = mcp
        self.approve = approve
        # An Agent without hooks does not load the hooks module.
        self.hooks = (_hooks.normalize_hooks(hooks) or None) if hooks is not None else None
        self.max_parallel_tools = max_parallel_tools
        self.tool_timeout = tool_timeout
        self.max_result_chars = max_result_chars
        self.budget = budget
        self.profile = profile
        self.compaction = compaction
        self.loop_guard = loop_guard
        self.eager_tools = eager_tools
        self.model_settings = model_settings if model_settings is not None else ModelSettings()
        self.cache = cache
        self.tool_search = _tool_search(tool_search, held)
        self.observers = (  # an Agent given no observers does not load the observe module
            () if isinstance(observers, tuple) and not observers else _observe.checked(observers))
        self.logger = logger if logger is not None else get_logger(__name__)
        self.skills = skills
        self._check_capabilities()
        self.output = output
        self.output_mode = output_mode
        self.output_retries = output_retries
        self._output = self._compile_output(output)

    def _compile_output(self, output: Any) -> Optional[Output]:
        """``output=`` compiled for this Agent's backend, mode and retries (None for None)."""
        if output is None:
            check_options(self.output_mode, self.output_retries)
            return None
        compiled = make_output(output, self.output_mode, self.output_retries,
                               capabilities=self.backend.capabilities, backend=self.backend.name)
        if compiled.tool is not None and any(t.name == FINAL_ANSWER
                                             for t in expand_tools(self.tools)):
            raise ConfigError(f"a tool is named {FINAL_ANSWER!r}, the name output_mode='tool' "
                              "gives its final-answer tool; rename the tool")
        return compiled

    def _check_capabilities(self) -> None:
        caps, name = self.backend.capabilities, self.backend.name
        names = set()
        for server in self.mcp:
            if not isinstance(server, MCPServer):
                raise ConfigError(f"mcp takes nacelle.MCPServer values, got {type(server).__name__}")
            if server.name in names:
                raise ConfigError(f"two MCP servers are named {server.name!r}")
            names.add(server.name)
        if self.mcp and not caps.mcp:
            raise Unsupported(
                name, "server-side MCP servers",
                hint="connect to the server locally with nacelle.mcp.connect_http(url) "
                     "and pass its client.tools() as tools")
        thinking = self.thinking
        if thinking.show and not caps.thinking:
            raise Unsupported(name, "showing thinking (Thinking(show=True))")
        if thinking.budget and not caps.thinking:
            raise Unsupported(name, "a thinking budget")
        if thinking.effort is not None and not caps.effort:
            raise Unsupported(name, f"an effort level (Effort.{thinking.effort.name})")
        if thinking.budget and thinking.budget < caps.min_budget:
            raise Unsupported(name, f"a thinking budget of {thinking.budget} tokens "
                                    f"(the minimum is {caps.min_budget})")
        if thinking.budget and thinking.budget >= self.max_tokens:
            raise ConfigError(f"the thinking budget ({thinking.budget}) must be below "
                              f"max_tokens ({self.max_tokens})")
        self._check_settings()

    def _check_settings(self) -> None:
        """``model_settings`` and ``cache`` against the backend's capabilities, and a
        forced tool choice against the tools: a choice that names no tool, or asks
        for a call with no tool to call, would fail at the provider on every turn."""
        settings = self.model_settings
        refused = refused_settings(self.backend.capabilities, settings, self.cache,
                                   self.thinking)
        if refused is not None:
            raise Unsupported(self.backend.name, refused[0], hint=refused[1])
        if settings.tool_choice in (None, "auto", "none") or any(
                is_toolset(t) for t in self.tools):
            return  # a toolset's tools are those of each turn, not known here
        names = {t.name for t in expand_tools(self.tools)}
        if settings.forced_tool is not None and settings.forced_tool not in names:
            raise ConfigError(f"tool_choice names {settings.forced_tool!r}, which is not "
                              f"one of the Agent's tools {sorted(names)!r}")
        if not names and not self.mcp:
            raise ConfigError("tool_choice='required' asks for a tool call, and the Agent "
                              "has no tools")

    def __repr__(self) -> str:
        tools = [getattr(t, "name", repr(t)) for t in self.tools]
        return (f"Agent(backend={self.backend.name!r}, tools={tools!r}, "
                f"mcp={[s.name for s in self.mcp]!r}, max_iterations={self.max_iterations})")

    def request(self, conversation: Iterable[Message], *,
                output: Any = _AGENT_OUTPUT) -> Request:
        """The Request a run of ``conversation`` sends: checked, defaulted, a private copy."""
        messages = tuple(conversation)
        caps = self.backend.capabilities
        for i, message in enumerate(messages):
            if not isinstance(message, Message):
                raise ConfigError(f"conversation[{i}] is a {type(message).__name__}, not a "
                                  "nacelle.Message (build one with nacelle.user_text)")
            # Only the conversation's own parts: a tool's media inside a ToolResult are
            # the backend's to send as it can (a text note, at worst), never a refusal.
            if not caps.images and any(isinstance(p, Image) for p in message.parts):
                raise Unsupported(self.backend.name, f"images (conversation[{i}] has one)")
            if not caps.documents and any(isinstance(p, Document) for p in message.parts):
                raise Unsupported(self.backend.name, f"documents (conversation[{i}] has one)")
        compiled = self._output if output is _AGENT_OUTPUT else self._compile_output(output)
        system, tools = self.system, expand_tools(self.tools)
        if self.tool_search is not None:
            tools = self.tool_search.start(self.tools, caps.tool_search, messages,
                                           servers=bool(self.mcp)).current()
        if compiled is not None and compiled.mode == "prompted":
            system = f"{system}\n\n{compiled.instructions()}"
        elif compiled is not None and compiled.tool is not None:
            tools = tools + (compiled.tool,)
        return Request(system=system, messages=messages, tools=tools, mcp=self.mcp,
                       thinking=self.thinking, max_tokens=self.max_tokens, output=compiled,
                       profile=self.profile, settings=self.model_settings, cache=self.cache,
                       context_edits=getattr(self.compaction, "edits", ()))

    def _settings(self, resume: Optional[_checkpoint.Resume] = None) -> RunSettings:
        """The loop's policy for a run of this Agent (``resume``: from ``resume``)."""
        return RunSettings(
            max_iterations=self.max_iterations, approve=self.approve, hooks=self.hooks,
            max_parallel_tools=self.max_parallel_tools, tool_timeout=self.tool_timeout,
            max_result_chars=self.max_result_chars, budget=self.budget, resume=resume,
            compaction=self.compaction, loop_guard=self.loop_guard,
            eager_tools=self.eager_tools, toolsets=self.tools if any(is_toolset(t) for t in self.tools) else ())

    def stream(self, conversation: Iterable[Message], *,
               cancel: Optional[threading.Event] = None,
               output: Any = _AGENT_OUTPUT) -> Generator[Event, None, None]:
        """Run the conversation; yield its events, ending with one DONE (or raise).

        The conversation is checked here, before any request. Leaving the loop early,
        KeyboardInterrupt, or ``cancel`` being set from another thread cancels the run;
        the last raises ``Cancelled`` from the generator. ``output`` overrides the
        Agent's structured output for this run (None: none).
        """
        if cancel is not None and not (hasattr(cancel, "is_set") and hasattr(cancel, "wait")):
            raise ConfigError(f"cancel must be a threading.Event, got {type(cancel).__name__}")
        request = self.request(conversation, output=output)
        return self._stream(request, self._settings(), cancel)

    def _stream(self, request: Request, settings: RunSettings,
                cancel: Optional[threading.Event],
                parent: Optional[ToolContext] = None,
                tags: Optional[Dict[str, Any]] = None) -> Generator[Event, None, None]:
        searching = _searching_of(request.tools)
        if searching is not None:  # the run's tool search lists its tools of now
            settings = dataclasses.replace(settings, toolsets=(searching,))
        observer = _observers(self.observers, parent)
        ctx = RunContext(observer=observer)
        hands_up = False
        if observer is None:
            # A forwarding sub-agent's run: its deltas are made tagged (RunContext._tags).
            # An observer sees the run's own events as its own, untagged.
            ctx._tags = tags
            # A run with a tool that may hand its forwarding run over (a forwarding
            # sub-agent's) has it iterated below (RunContext._hands_up).
            hands_up = ctx._hands_up = any(
                getattr(tool, "_hands_over", False) for tool in request.tools)
        unwatch = _watch(cancel, ctx) if cancel is not None else None
        if observer is not None:
            backend = self.backend
            ctx.observe("run.start", backend=backend.name, model=getattr(backend, "model", ""),
                        system=request.system, messages=request.messages,
                        tools=tuple((t.name, t.description) for t in request.tools),
                        max_tokens=request.max_tokens, profile=request.profile,
                        resumed=settings.resume is not None,
                        **({} if parent is None else _parent_data(parent)))
        done: Optional[Event] = None
        turns = 0
        failure: Optional[BaseException] = None
        # The Agent runs the loop; the backend is asked for one model turn at a time.
        events = run(request, ctx, self.backend.turn, settings=settings,
                     backend=self.backend.name)
        try:
            if observer is None and not hands_up:
                yield from events
            elif observer is None:
                for event in events:  # Events, and a Handover the round yields up
                    if type(event) is not Handover:  # type: ignore[comparison-overlap]
                        yield event
                        continue
                    # A forwarding run handed over by the round (Round.results), its
                    # events passed on in C, through a filter that keeps every one (an
                    # Event is always true) and has no close() to pass on: a consumer
                    # that stops reading leaves the run to its call's thread
                    # (toolcalls.Handover), which makes the call's result.
                    finished = False
                    try:
                        yield from filter(None, cast(Handover, event).events)
                        finished = True
                    finally:
                        cast(Handover, event).settle(finished)
            else:
                every = observer.wants_events
                for event in events:
                    if event.kind is Kind.TURN:
                        turns += 1
                    elif event.kind is Kind.DONE:
                        done = event
                    if every:
                        observer("event", {"event": event})
                    yield event
        except Cancelled as exc:
            failure = exc
            self.logger.debug("run cancelled")
            raise
        except BaseException as exc:
            failure = (Cancelled("the consumer stopped reading the run")
                       if isinstance(exc, GeneratorExit) else exc)
            if isinstance(exc, Exception) and cancel is not None and cancel.is_set():
                failure = Cancelled("the run was cancelled")
                raise failure from exc
            raise
        finally:
            if observer is not None:
                if done is None and failure is None:
                    failure = Cancelled("the consumer stopped reading the run")
                ctx.observe("run.end", stop=done.stop if done is not None else None,
                            usage=done.usage if done is not None else Usage(), turns=turns,
                            error=failure if done is None else None)
            if unwatch is not None:
                unwatch()
            # Whatever ended the run, nothing may keep working for it: the response
            # is closed and tools are told to stop (a no-op after a clean DONE).
            ctx.cancel()
            close = getattr(events, "close", None)
            if close is not None:
                close()

    def resume(self, checkpoint: _checkpoint.Checkpoint, decisions: Mapping[str, Decision], *,
               cancel: Optional[threading.Event] = None) -> Generator[Event, None, None]:
        """Go on with a paused run: its pending calls as decided, then the next turn.

        ``decisions`` maps every pending call id to True (run it), False or a reason
        str (refused; the reason is what the model reads), or an edited input dict
        (validated against the tool's schema, recorded in the conversation as what
        ran, then run as a new call: the loop guard counts it and the before-hooks
        are asked, and may deny it; approval is not asked again). The pending calls are announced again (TOOL_CALL) and closed
        in this stream; the calls that finished before the pause are not run again.
        Iterations, budgets and usage continue from the checkpoint's counts.

        A sub-agent's pause (``subagent_tool``) is decided the same way: the ids are
        those of ``checkpoint.waiting()``, the calls awaiting a person at any depth
        (two sharing an id are told apart by their path, ``"p1/call_0"``). The call
        that started the sub-agent runs again and resumes its run, then this one goes on.
        """
        return self._resumed(checkpoint, decisions, cancel)

    def _resumed(self, checkpoint: _checkpoint.Checkpoint, decisions: Mapping[str, Decision],
                 cancel: Optional[threading.Event],
                 parent: Optional[ToolContext] = None,
                 budget: Optional[Budget] = None,
                 tags: Optional[Dict[str, Any]] = None) -> Generator[Event, None, None]:
        """:meth:`resume`, for a sub-agent's run also given the ``parent`` call's context."""
        if not isinstance(checkpoint, _checkpoint.Checkpoint):
            raise ConfigError(f"resume takes a nacelle.Checkpoint (Checkpoint.loads(text)), "
                              f"got {type(checkpoint).__name__}")
        if cancel is not None and not (hasattr(cancel, "is_set") and hasattr(cancel, "wait")):
            raise ConfigError(f"cancel must be a threading.Event, got {type(cancel).__name__}")
        checkpoint.verify()
        request, verdicts, nested = self._resume_request(checkpoint, decisions)
        settings = self._settings(_checkpoint.Resume(checkpoint, verdicts, nested))
        if budget is not None:  # a sub-agent's, held to what its parent has left
            settings = dataclasses.replace(settings, budget=budget)
        return self._stream(request, settings, cancel, parent, tags)

    def _resume_request(self, checkpoint: _checkpoint.Checkpoint, decisions: Mapping[str, Decision],
                        ) -> Tuple[Request, Dict[str, Any], Dict[str, Dict[str, Any]]]:
        """The resumed run's request, the verdicts on its own pending calls and the
        decisions for each nested run; raises as :meth:`resume` says."""
        request = self.request(checkpoint.messages)
        have = {t.name: t for t in request.tools}
        lacking = sorted(set(checkpoint.tools) - set(have))
        if lacking:
            raise CheckpointError(f"the checkpoint's run had tools this agent lacks: {lacking!r}")
        messages, verdicts, nested = _decided(checkpoint, decisions, have)
        return dataclasses.replace(request, messages=messages), verdicts, nested

    def resume_run(self, checkpoint: _checkpoint.Checkpoint, decisions: Mapping[str, Decision], *,
                   cancel: Optional[threading.Event] = None) -> Result[OutputT]:
        """The blocking form of :meth:`resume`: run to the end, return a Result."""
        return self._result(self.resume(checkpoint, decisions, cancel=cancel))

    @overload
    def run(self, conversation: Iterable[Message], *,
            cancel: Optional[threading.Event] = None) -> Result[OutputT]: ...
    @overload
    def run(self, conversation: Iterable[Message], *, cancel: Optional[threading.Event] = None,
            output: None) -> Result[None]: ...
    @overload
    def run(self, conversation: Iterable[Message], *, cancel: Optional[threading.Event] = None,
            output: Type[T]) -> Result[T]: ...
    @overload
    def run(self, conversation: Iterable[Message], *, cancel: Optional[threading.Event] = None,
            output: object) -> Result[Any]: ...

    def run(self, conversation: Iterable[Message], *,
            cancel: Optional[threading.Event] = None,
            output: Any = _AGENT_OUTPUT) -> Result[Any]:
        """Run to the end and return a :class:`Result` (``output``: as for ``stream``)."""
        return self._result(self.stream(conversation, cancel=cancel, output=output))

    def _result(self, events: Generator[Event, None, None]) -> Result[Any]:
        turns = 0
        done: Optional[Event] = None
        try:
            for event in events:
                if event.kind is Kind.TURN:
                    turns += 1
                elif event.kind is Kind.DONE:
                    done = event
        finally:
            events.close()
        if done is None or done.stop is None:  # the loop always ends with DONE
            raise StreamError(f"the run of backend {self.backend.name!r} ended without DONE "
                              "and its stop")
        text = next((m.text for m in reversed(done.messages) if m.role is Role.ASSISTANT), "")
        return Result(text, done.messages, done.usage, done.stop, turns, done.output,
                      done.checkpoint)

    def count_tokens(self, conversation: Iterable[Message]) -> int:
        """Count the tokens of the request ``stream`` would send, as the provider does."""
        if not self.backend.capabilities.token_counting:
            raise Unsupported(self.backend.name, "token counting")
        count: int = self.backend.count_tokens(self.request(conversation), RunContext())
        return count


def _watch(cancel: threading.Event, ctx: RunContext) -> Callable[[], None]:
    """Cancel ``ctx`` when the caller's ``cancel`` is set; returns what stops watching.

    Only a plain Event (no ``add_callback``) needs a polling thread and its ``ended``
    Event: a run watching a CancelEvent allocates neither (eight objects the
    collector would track for every run of a thousand at once)."""
    if cancel.is_set():
        raise Cancelled("the run was cancelled before it started")
    add_callback: Optional[Callable[[Callable[[], None]], Callable[[], None]]] = getattr(
        cancel, "add_callback", None)
    if add_callback is not None:
        return add_callback(ctx.cancel)
    ended = threading.Event()
    threading.Thread(target=_poll, args=(cancel, ctx, ended),
                     name="nacelle-cancel-watch", daemon=True).start()
    return ended.set


def _poll(cancel: threading.Event, ctx: RunContext, ended: threading.Event) -> None:
    while not ended.is_set():
        if cancel.wait(_WATCH_INTERVAL):
            if not ended.is_set():
                ctx.cancel()
            return


def _decided(checkpoint: _checkpoint.Checkpoint, decisions: Mapping[str, Any],
             tools: Mapping[str, Any],
             ) -> Tuple[Tuple[Message, ...], Dict[str, Any], Dict[str, Dict[str, Any]]]:
    """The conversation with edited inputs in place, per pending id True or the
    refusal's text, and per pending call that paused from inside (a sub-agent's) the
    decisions for its nested run. Decisions are keyed by the ids of
    ``checkpoint.waiting()``, at any depth; where two of those share an id (two
    sub-agents whose providers both number calls from ``call_0``), by the call's path
    instead: the ids of the calls that started its sub-agents and its own, joined by
    ``/`` (``"p1/call_0"``), which is always accepted. A missing, unknown, ambiguous
    or malformed decision is a ConfigError, at any depth (a sub-agent tool's own agent
    checks its inputs)."""
    if not isinstance(decisions, Mapping):
        raise ConfigError(f"decisions must map pending call ids to decisions, got "
                          f"{type(decisions).__name__}")
    decisions = _by_path(checkpoint, decisions)
    pending = {p.id: p for p in checkpoint.pending if p.child is None}
    verdicts: Dict[str, Any] = {}
    nested: Dict[str, Dict[str, Any]] = {}
    for outer in checkpoint.pending:
        if outer.child is None:
            continue
        below = outer.id + "/"
        inner = {key[len(below):]: d for key, d in decisions.items() if key.startswith(below)}
        runner = getattr(tools.get(outer.name), "agent", None)
        if isinstance(runner, Agent):  # a sub-agent tool: check the decisions now
            runner._resume_request(outer.child, inner)
        nested[outer.id] = inner
        verdicts[outer.id] = True  # approved before; its nested run's calls are decided
    edited: Dict[str, str] = {}
    for call_id, decision in decisions.items():
        if call_id not in pending:
            continue
        name = pending[call_id].name
        if decision is True:
            verdicts[call_id] = True
        elif decision is False:
            verdicts[call_id] = (f"the user did not approve this call of {name}; "
                                 "do not retry it unchanged")
        elif isinstance(decision, str) and decision:
            verdicts[call_id] = decision
        elif isinstance(decision, dict):
            tool = tools.get(name)
            if tool is None:
                raise CheckpointError(f"the pending call {call_id!r} names {name!r}, a tool "
                                      "this agent lacks")
            from .validation import input_check  # on first use, as run_tool does

            problem = input_check(tool)(decision)
            if problem:
                raise ConfigError(f"the edited input for {call_id!r} ({name}) is invalid: "
                                  f"{problem}")
            edited[call_id] = json.dumps(decision, ensure_ascii=False)
            verdicts[call_id] = True
        else:
            raise ConfigError(f"the decision for {call_id!r} must be True, False, a non-empty "
                              f"reason str or an edited input dict, got {decision!r:.80}")
    messages = checkpoint.messages
    if edited:
        last = messages[-1]
        parts = tuple(ToolCall(p.id, p.name, edited[p.id], p.finished)
                      if isinstance(p, ToolCall) and p.id in edited else p for p in last.parts)
        messages = messages[:-1] + (Message(last.role, parts),)
    return messages, verdicts, nested


def _paths(checkpoint: _checkpoint.Checkpoint, above: str = "") -> List[Tuple[str, str]]:
    """(path, id) of every call ``checkpoint`` waits on, at any depth."""
    found: List[Tuple[str, str]] = []
    for p in checkpoint.pending:
        if p.child is not None:
            found += _paths(p.child, f"{above}{p.id}/")
        else:
            found.append((above + p.id, p.id))
    return found


def _by_path(checkpoint: _checkpoint.Checkpoint, decisions: Mapping[str, Any]) -> Dict[str, Any]:
    """``decisions`` keyed by each waiting call's path (see :func:`_decided`)."""
    paths = _paths(checkpoint)
    by_id: Dict[str, List[str]] = {}
    for path, call_id in paths:
        by_id.setdefault(call_id, []).append(path)
    known = {path for path, _ in paths}
    shown = sorted(call_id if len(by_id[call_id]) == 1 else path for path, call_id in paths)
    resolved: Dict[str, Any] = {}
    for key, decision in decisions.items():
        if key in known:
            path = key
        elif len(by_id.get(key, ())) == 1:
            path = by_id[key][0]
        elif key in by_id:
            raise ConfigError(f"calls waiting in several sub-agents share the id {key!r}: "
                              f"key their decisions by path ({sorted(by_id[key])!r})")
        else:
            raise ConfigError(f"decisions for calls that are not pending: {key!r} "
                              f"(pending: {shown!r})")
        if path in resolved:
            raise ConfigError(f"two decisions for the pending call {path!r}")
        resolved[path] = decision
    missing = sorted(call_id if len(by_id[call_id]) == 1 else path
                     for path, call_id in paths if path not in resolved)
    if missing:
        raise ConfigError(f"no decision for the pending calls {missing!r}; give True, "
                          "False, a reason str or an edited input dict for each")
    return resolved


_observe_log = get_logger("nacelle.observe")  # whose DEBUG level observes every request
_DEBUG = 10  # logging.DEBUG, without importing logging to name it


def _observers(observers: Sequence[_observe.Observer], parent: Optional[ToolContext],
               ) -> Optional[_observe.Observers]:
    """A run's observers: its own, and for a sub-agent's run also those of the run
    whose call started it (under a run id of its own), so one trace and one
    recording hold the whole tree. None, as ``Observers.make`` says, for a run with
    none and no DEBUG logging of ``nacelle.observe``: such a run does not load the
    observe module."""
    above = getattr(parent, "observer", None) if parent is not None else None
    if not observers and above is None and not _observe_log.isEnabledFor(_DEBUG):
        return None
    if isinstance(above, _observe.Observers):
        return _observe.Observers.make(tuple(above.observers) + tuple(
            o for o in observers if o not in above.observers))
    return _observe.Observers.make(observers)


def _parent_data(parent: ToolContext) -> Dict[str, Any]:
    """What a sub-agent's ``run.start`` says of where it runs: the parent's run id and
    the call (id and tool name) that started it."""
    above = parent.observer
    return {"parent_run": getattr(above, "run_id", ""), "via": parent.call_id,
            "agent": parent.name}


def _is_compaction(given: object) -> bool:
    """``given`` is a nacelle.Compaction (the compaction package is imported here, when
    an Agent is given one, not with the core)."""
    return isinstance(given, _compaction.Compaction)


def _check_edits(compaction: Optional[_compaction.Compaction], backend: Backend,
                 thinking: Thinking) -> None:
    """Refuse context edits the backend does not make (``compaction.context_edits``),
    and clearing thinking for a model told not to think."""
    taken: FrozenSet[str] = getattr(backend.capabilities, "context_edits", frozenset())
    for edit in getattr(compaction, "edits", ()):
        if edit.kind == "clear_thinking" and getattr(thinking, "effort", None) is Effort.NONE:
            raise ConfigError("clearing thinking needs a model that thinks; this Agent turns "
                              "thinking off (Effort.NONE)")
        if edit.kind not in taken:
            raise Unsupported(backend.name, f"the provider's context editing ({edit.kind})",
                              "use a Compaction strategy the loop runs, such as "
                              "compaction.clear_tool_results()")


def _searching_of(tools: Sequence[Any]) -> Optional[_searches.Searching]:
    """``tool_search.searching_of``, loading that module only when a tool has a
    ``searching`` (a run without a tool search never does)."""
    if any(getattr(tool, "searching", None) is not None for tool in tools):
        return _searches.searching_of(tools)
    return None


def _tool_search(given: Any, held: Sequence[Any]) -> Optional[_searches.ToolSearch]:
    """The Agent's tool search: ``given``, or the default one when a tool it holds
    now asks to be deferred (``@tool(defer=True)``) — such a tool is found only by a
    search. A toolset's tools are read when a run starts."""
    if given is not None and not isinstance(given, _searches.ToolSearch):
        raise ConfigError(f"tool_search must be a nacelle.ToolSearch, got {type(given).__name__}")
    if given is None and any(getattr(t, "defer", False) is True for t in held):
        return _searches.ToolSearch()
    return given


def _check_int(name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{name} must be an integer of at least {least}, got {value!r}")
