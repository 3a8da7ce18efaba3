"""Which models refuse which sampling settings, by the providers' own rules: the
Claude families that dropped ``temperature``/``top_p``/``top_k``, and OpenAI's
reasoning models. Kept apart from any one backend because the same model is served
by several (a Claude model through Anthropic and OpenRouter, an OpenAI model through
Responses and Chat Completions), and backends never import each other.

Outer-ring module: imports the standard library and ``nacelle.backend``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, FrozenSet, Tuple

from ..backend import Capabilities

__all__ = ["CLAUDE_NOT_WHILE_THINKING", "CLAUDE_SAMPLING", "OPENAI_SAMPLING", "claude_exclusive", "claude_refuses_sampling",
           "openai_settings"]

CLAUDE_SAMPLING = frozenset({"temperature", "top_p", "top_k"})
#: What a thinking Claude refuses: temperature and top_k, top_p but from 0.95 to 1
#: (refused whole here, not half), and a forced tool choice
#: (https://platform.claude.com/docs/en/build-with-claude/extended-thinking,
#: "Feature compatibility").
CLAUDE_NOT_WHILE_THINKING = CLAUDE_SAMPLING | {"forced_tool_choice"}
OPENAI_SAMPLING = frozenset({"temperature", "top_p"})

# Patterns as text, compiled (and cached by re) at the first model name checked.
_CLAUDE = r"claude-(opus|sonnet|haiku|fable|mythos)-(\d+)(?:[-.](\d{1,2})(?!\d))?"
#: The first version of each family that refuses sampling on every request (Fable
#: and Mythos from their first).
_CLAUDE_FROM = {"opus": (4, 7), "sonnet": (5, 0), "haiku": (5, 0), "fable": (0, 0),
                "mythos": (0, 0)}
_GPT = r"gpt-(\d+)(?:\.(\d+))?"


#: The first version of each family that takes ``temperature`` or ``top_p`` but not both.
_CLAUDE_ONE_OF_FROM = {"opus": (4, 1), "sonnet": (4, 5), "haiku": (4, 5), "fable": (0, 0),
                       "mythos": (0, 0)}
_TEMPERATURE_OR_TOP_P = (frozenset({"temperature", "top_p"}),)


def _claude_version(model: str, since: Dict[str, Tuple[int, int]]) -> bool:
    found = re.search(_CLAUDE, model)
    if found is None:
        return False
    version = (int(found.group(2)), int(found.group(3) or 0))
    return version >= since[found.group(1)]


def claude_exclusive(model: str) -> Tuple[FrozenSet[str], ...]:
    """``Capabilities.exclusive_settings`` of a Claude model: from Claude Sonnet 4.5,
    Haiku 4.5 and Opus 4.1 on, "use only temperature OR top_p, not both" — a request
    with both is a 400 (https://platform.claude.com/docs/en/about-claude/models/
    migrating-to-claude-4, "Update sampling parameters"; Opus 4.1 answers "temperature
    and top_p cannot both be specified for this model", open-webui/functions#9)."""
    return _TEMPERATURE_OR_TOP_P if _claude_version(model, _CLAUDE_ONE_OF_FROM) else ()


def claude_refuses_sampling(model: str) -> bool:
    """Whether a Claude model refuses a non-default ``temperature``, ``top_p`` or
    ``top_k`` on every request, thinking or not: Opus 4.7 and later, Sonnet and Haiku
    5 and later, Fable and Mythos answer 400
    (https://platform.claude.com/docs/en/about-claude/models/migration-guide#migrating-to-claude-opus-4-7).
    Decided by family and version (``claude-opus-4-7``, ``anthropic/claude-opus-4.7``),
    so a new model of those families is covered the day it appears; an id that names
    no family this way (``claude-3-5-sonnet-20241022``) keeps them.
    """
    return _claude_version(model, _CLAUDE_FROM)


def openai_settings(caps: Capabilities, model: str) -> Capabilities:
    """``caps`` as an OpenAI ``model`` takes them.

    OpenAI's reasoning models refuse ``temperature`` and ``top_p``: the o-series and
    GPT-5 (``gpt-5``, ``gpt-5-mini``, ``gpt-5-nano``) always; GPT-5.1 and later only
    while they reason — "temperature, top_p and logprobs are only supported when using
    GPT-5.2 with reasoning effort none", and none is their default
    (https://platform.openai.com/docs/guides/latest-model, "Parameter compatibility";
    https://platform.openai.com/docs/guides/reasoning). The chat models
    (``gpt-5-chat-latest``, ``gpt-4.1``, ``gpt-4o``) take both.
    """
    name = model.rsplit("/", 1)[-1]
    if "-chat" in name:
        return caps
    without = caps.settings - OPENAI_SAMPLING
    if re.match(r"o\d", name):
        return dataclasses.replace(caps, settings=without)
    found = re.match(_GPT, name)
    if found is None or int(found.group(1)) < 5:
        return caps
    if int(found.group(1)) == 5 and not found.group(2):
        return dataclasses.replace(caps, settings=without)
    return dataclasses.replace(caps, thinking_settings=without)
