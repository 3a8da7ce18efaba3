"""What Claude takes and how its stream is kept, wherever it is served: the
first-party Messages API (``__init__.py``) and the clouds that carry the same wire
(``clouds.py``: Vertex AI and Bedrock) share these.

- :data:`capabilities` and :func:`settings_for`: what the Messages API does, and the
  settings a model takes (the Claude families that dropped sampling refuse
  ``temperature``, ``top_p`` and ``top_k``);
- :func:`has_output_format`: whether a model takes ``output_config.format``;
- :func:`beta_header`, :func:`is_ping` and :func:`open_server_calls`: a request's
  ``anthropic-beta`` header, the stream's keepalive, and the server-side calls a
  paused turn left open.

Outer ring: imports the standard library, nacelle's core (``backend``, ``messages``,
``sse``), ``backends._sampling`` and ``wire`` beside it; never ``__init__``, which
imports this.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Mapping, Sequence, Set, Tuple

from ...backend import SETTINGS, Capabilities, Request
from ...messages import Message, ProviderBlock, Role
from ...sse import parse_json
from .._sampling import CLAUDE_NOT_WHILE_THINKING, CLAUDE_SAMPLING, claude_refuses_sampling
from .wire import MIN_BUDGET, PROTOCOL, betas

__all__ = ["beta_header", "capabilities", "has_output_format", "is_ping", "open_server_calls",
           "settings_for"]


#: What the Anthropic backend can do. ``cost`` is true on an instance whose model has
#: a price (given, or in the table): the API reports tokens, not dollars.
capabilities = Capabilities(
    mcp=True, thinking=True, effort=True, min_budget=MIN_BUDGET, cost=False,
    token_counting=True, images=True, structured_output=True, documents=True, tool_media=True,
    native_tools=frozenset({
        "web_search", "web_search:max_uses", "web_search:allowed_domains",
        "web_search:blocked_domains", "web_fetch", "web_fetch:max_uses",
        "web_fetch:allowed_domains", "web_fetch:blocked_domains", "web_fetch:max_content_tokens",
        "code_execution"}),
    # No seed (the Messages API has none) and no prompt_cache_key (OpenAI's). While the
    # model thinks — which nacelle's requests do unless Thinking(effort=Effort.NONE) —
    # the API refuses temperature and top_k, takes top_p only from 0.95 to 1 (refused
    # here whole, not half) and tool_choice auto or none only
    # (https://platform.claude.com/docs/en/build-with-claude/extended-thinking,
    # "Feature compatibility"); temperature runs from 0 to 1
    # (https://platform.claude.com/docs/en/api/messages/create).
    settings=frozenset(SETTINGS - {"seed", "cache_key"}),
    thinking_settings=frozenset(SETTINGS - CLAUDE_NOT_WHILE_THINKING),
    thinks_by_default=True, max_temperature=1.0,
    tool_search=True,
    context_edits=frozenset({"clear_tool_uses", "clear_thinking", "compact"}),
)


def settings_for(model: str) -> FrozenSet[str]:
    """The settings ``model`` takes: :data:`capabilities`' less the sampling ones on
    the models that refuse them (``backends/_sampling.py``)."""
    if claude_refuses_sampling(model):
        return capabilities.settings - CLAUDE_SAMPLING
    return capabilities.settings


#: Models without ``output_config.format`` (prefixes of their ids).
_NO_OUTPUT_FORMAT = ("claude-3", "claude-opus-4-0", "claude-opus-4-1", "claude-opus-4-2025",
                     "claude-sonnet-4-0", "claude-sonnet-4-2025")


def has_output_format(model: str) -> bool:
    return not model.startswith(_NO_OUTPUT_FORMAT)


def beta_header(request: Request) -> Dict[str, str]:
    names = betas(request)
    return {"anthropic-beta": ",".join(names)} if names else {}


def is_ping(event: Any) -> bool:
    return bool(event.event == "ping")


def open_server_calls(messages: Sequence[Message]) -> Mapping[str, Tuple[str, str]]:
    """The server-side calls of a paused turn still waiting for their result, by id:
    their name and server.

    A paused turn is the conversation's last message (the loop asks for the next
    turn at once), so only the trailing assistant messages are read; a call of an
    older turn without a result was closed as failed when that turn ended.
    """
    calls: Dict[str, Tuple[str, str]] = {}
    answered: Set[str] = set()
    trailing = len(messages)
    while trailing and messages[trailing - 1].role is Role.ASSISTANT:
        trailing -= 1
    for message in messages[trailing:]:
        for part in message.parts:
            if type(part) is not ProviderBlock or part.protocol != PROTOCOL:
                continue
            if "_tool_use" not in part.data and "tool_use_id" not in part.data:
                continue
            try:
                block = parse_json(part.data)
            except ValueError:
                continue
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("tool_use_id"), str):
                answered.add(block["tool_use_id"])
            elif block.get("type") in ("server_tool_use", "mcp_tool_use") and isinstance(
                    block.get("id"), str):
                server = block.get("server_name")
                calls[block["id"]] = (str(block.get("name", "")),
                                      server if isinstance(server, str) and server else PROTOCOL)
    return {call_id: call for call_id, call in calls.items() if call_id not in answered}
