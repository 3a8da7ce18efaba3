"""Compaction: shortening a conversation that has outgrown its context, and telling
when a provider says it has. Split by subject:

- :mod:`~nacelle.compaction.strategies`: :class:`Compaction` ``(threshold, strategy)``,
  what an Agent is given, and the strategies that ship — :func:`clear_tool_results`
  (the default), :func:`summarize` and :func:`drop_oldest` — with the rules every
  strategy keeps so the next request is accepted by every provider;
- :mod:`~nacelle.compaction.edits`: :func:`context_edits`, the provider's own context
  editing (Anthropic's tool-result and thinking clearing, server-side compaction) as
  a Compaction;
- :mod:`~nacelle.compaction.overflow`: :func:`is_context_overflow`, a provider's "the
  context is full" refusal recognised in the wordings each one uses.

``nacelle.compaction`` holds every name either module offers users.

Core: imports the standard library and nacelle's core modules only.
"""

from .edits import ClearThinking as ClearThinking
from .edits import ClearToolUses as ClearToolUses
from .edits import Compact as Compact
from .edits import ContextEdits as ContextEdits
from .edits import context_edits as context_edits
from .overflow import is_context_overflow as is_context_overflow
from .strategies import CLEARED as CLEARED
from .strategies import SUMMARY_PREFIX as SUMMARY_PREFIX
from .strategies import SUMMARY_PROMPT as SUMMARY_PROMPT
from .strategies import TRANSCRIPT_PART_CHARS as TRANSCRIPT_PART_CHARS
from .strategies import ClearToolResults as ClearToolResults
from .strategies import Compacted as Compacted
from .strategies import Compaction as Compaction
from .strategies import DropOldest as DropOldest
from .strategies import Strategy as Strategy
from .strategies import Summarize as Summarize
from .strategies import clear_tool_results as clear_tool_results
from .strategies import drop_oldest as drop_oldest
from .strategies import summarize as summarize
from .strategies import transcript as transcript

__all__ = [
    "CLEARED",
    "ClearThinking",
    "ClearToolUses",
    "Compact",
    "Compacted",
    "Compaction",
    "ContextEdits",
    "SUMMARY_PROMPT",
    "Strategy",
    "clear_tool_results",
    "context_edits",
    "drop_oldest",
    "is_context_overflow",
    "summarize",
]
