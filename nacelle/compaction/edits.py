"""The provider edits its own context: :func:`context_edits`, a :class:`Compaction`
whose work the provider does on every request.

Anthropic's context management (https://platform.claude.com/docs/en/build-with-claude/
context-editing, the ``context-management-2025-06-27`` beta) clears, on the server,
before the prompt reaches the model:

- old tool results (``clear_tool_uses_20250919``): once the input passes ``trigger``
  tokens (the API's default 100,000), the oldest tool results are replaced by a
  placeholder, keeping the ``keep`` most recent tool uses (default 3), clearing at
  least ``clear_at_least`` tokens when given (so the cache write a clearing costs is
  worth it), never the results of ``exclude_tools``, and the calls' inputs too with
  ``clear_inputs``;
- old thinking (``clear_thinking_20251015``): thinking blocks of all but the last
  ``keep`` assistant turns ("all" keeps every one, which keeps the cache); it applies
  to a model that thinks, so an Agent that turns thinking off
  (``Thinking(effort=Effort.NONE)``) refuses it, and it is sent ahead of the tool
  clearing, the order the API asks for when both are given;

and, with :class:`Compact`, compacts (``compact_20260112``, the ``compact-2026-01-12``
beta; https://platform.claude.com/docs/en/build-with-claude/compaction): past
``trigger`` input tokens (default 150,000) the API writes a summary of the older
conversation into a ``compaction`` block of its answer, which goes back with the
conversation and stands for everything before it.

The conversation nacelle keeps is never rewritten: the edits are the provider's view
of it, made again on every request, as the docs say ("your client application
maintains the full, unmodified conversation history"). What a response says it
cleared (``context_management.applied_edits``: ``cleared_tool_uses``,
``cleared_thinking_turns``, ``cleared_input_tokens``) arrives as a COMPACTION event
whose :class:`Compacted` has the counts (``removed``: tool uses and thinking turns
cleared; ``tokens``: input tokens cleared; ``messages`` empty, the conversation being
unchanged; ``strategy`` saying what was cleared), which the console shows as a line.

A backend takes only the edits in its ``Capabilities.context_edits``; the Agent
refuses the others at construction (:class:`~nacelle.errors.Unsupported`). As a
Compaction its ``threshold`` is the one for the ``fallback`` strategy, run by the loop
as any strategy (None: the provider's edits alone; a refusal for a full context then
ends the run as it would without compaction).

Core: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from ..errors import ConfigError
from .strategies import Compacted, Compaction

__all__ = ["ClearThinking", "ClearToolUses", "Compact", "ContextEdits", "context_edits"]


def _tokens(name: str, value: Optional[int]) -> None:
    if value is not None and (type(value) is not int or value < 1):
        raise ConfigError(f"{name} must be a positive whole number, got {value!r:.40}")


@dataclass(frozen=True)
class ClearToolUses:
    """Clear old tool results past ``trigger`` input tokens (see the module docstring);
    None leaves a field to the API's default."""

    trigger: Optional[int] = None
    keep: Optional[int] = None
    clear_at_least: Optional[int] = None
    exclude_tools: Tuple[str, ...] = ()
    clear_inputs: bool = False

    kind = "clear_tool_uses"

    def __post_init__(self) -> None:
        for name in ("trigger", "keep", "clear_at_least"):
            _tokens(name, getattr(self, name))
        if isinstance(self.exclude_tools, str):
            raise ConfigError("exclude_tools takes a list of tool names, not one string")
        object.__setattr__(self, "exclude_tools", tuple(self.exclude_tools))


@dataclass(frozen=True)
class ClearThinking:
    """Keep the thinking of the last ``keep`` assistant turns ("all": every one)."""

    keep: Union[int, str, None] = None

    kind = "clear_thinking"

    def __post_init__(self) -> None:
        if self.keep != "all":
            _tokens("keep", self.keep)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Compact:
    """Let the provider compact past ``trigger`` input tokens, summarising as
    ``instructions`` say (its own instructions when None)."""

    trigger: Optional[int] = None
    instructions: Optional[str] = None

    kind = "compact"

    def __post_init__(self) -> None:
        _tokens("trigger", self.trigger)
        if self.instructions is not None and not isinstance(self.instructions, str):
            raise ConfigError("instructions must be a string")


#: What the loop's strategy does for edits made by the provider: nothing.
def _none(messages: Tuple[Any, ...], **_: Any) -> Optional[Compacted]:
    return None


_NEVER = 1 << 62  # a threshold no request reaches: the provider does the work


@dataclass(frozen=True, repr=False)  # its own __repr__ below
class ContextEdits(Compaction):
    """A Compaction made by :func:`context_edits`: ``edits`` the provider applies."""

    edits: Tuple[Any, ...] = ()

    def __repr__(self) -> str:
        return f"context_edits({', '.join(map(repr, self.edits))})"


def context_edits(clear_tool_uses: Union[bool, ClearToolUses] = True,
                  clear_thinking: Union[bool, ClearThinking] = False,
                  compact: Union[bool, Compact] = False, *,
                  fallback: Optional[Compaction] = None) -> ContextEdits:
    """The provider's own context editing as ``Agent(compaction=...)``: True for an
    edit with the API's defaults, or the edit itself (:class:`ClearToolUses`,
    :class:`ClearThinking`, :class:`Compact`). ``fallback`` is a Compaction the loop
    runs as well, at its own threshold."""
    edits = []
    # Thinking first: the API wants clear_thinking ahead of clear_tool_uses when both
    # are given ("clear_thinking must come first in edits array").
    for given, kind in ((clear_thinking, ClearThinking), (clear_tool_uses, ClearToolUses),
                        (compact, Compact)):
        if given is True:
            edits.append(kind())
        elif isinstance(given, kind):
            edits.append(given)
        elif given is not False:
            raise ConfigError(f"give True, False or a {kind.__name__}, got {given!r:.60}")
    if not edits:
        raise ConfigError("context_edits needs at least one edit")
    if fallback is not None and not isinstance(fallback, Compaction):
        raise ConfigError(f"fallback must be a nacelle.Compaction, got {type(fallback).__name__}")
    if fallback is not None:
        return ContextEdits(fallback.threshold, fallback.strategy, tuple(edits))
    return ContextEdits(_NEVER, _none, tuple(edits))
