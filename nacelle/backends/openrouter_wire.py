"""The OpenRouter request body: ``to_wire(request, messages, model=...) -> dict``.

Pure: no I/O, no clock, nothing a caller passed is mutated (tool schemas and the
``provider`` preferences are deep-copied into the body). The I/O half lives in
``openrouter.py``; the stream half in ``openrouter_stream.py``.

How a conversation maps onto OpenRouter's Chat Completions dialect:

- The system prompt is the first message. User Text parts become text content
  (a plain string when the message is one Text part), Image parts become
  ``image_url`` parts holding a ``data:`` URL.
- An assistant message sends its text as ``content`` — ``null``, not ``""``, when it
  holds only tool calls, since an empty string is rejected by some upstreams — its
  finished tool calls with their ``arguments`` byte for byte (empty or blank input
  becomes ``"{}"``), and the ``reasoning_details`` the turn produced, echoed unchanged:
  signed and encrypted reasoning must come back exactly as it was streamed or the
  next request is refused. A turn that streamed only plain reasoning text (no
  ``reasoning_details``) echoes it as ``reasoning``. Reasoning from another protocol
  is dropped, as are ProviderBlocks of another protocol and Finish parts.
- A call cut off mid-input (``ToolCall(finished=False)``) is never sent, nor is any
  result carrying its id. An assistant message left with no text and no calls (a
  turn that hit max_tokens while reasoning) is omitted: an empty assistant message
  is refused by several upstreams, and consecutive user messages are merged by the
  providers that need alternation.
- ToolResults become one ``tool`` message each, in the order they appear, before any
  other parts of the same user message (a ``tool`` message must directly follow the
  assistant message that asked for it). A failed result is sent as its text: that
  text is exactly what the model is meant to read.
- The tool schemas, sorted by name, go on every request, including those carrying
  tool results; ``parallel_tool_calls`` is sent whenever tools are. ``tool_choice``
  is left at the provider's default (``auto``). The deprecated usage options
  (``usage.include``, ``stream_options.include_usage``) are never sent: usage is
  always streamed.
- ``max_tokens`` is used rather than ``max_completion_tokens``: OpenRouter maps it
  for every provider and derives Anthropic thinking budgets from it.
- Reasoning: a token ``budget`` becomes ``reasoning.max_tokens`` and wins over an
  ``effort``; otherwise every :class:`~nacelle.backend.Effort` level, ``none``
  included, passes through as ``reasoning.effort``. With neither, ``reasoning`` is
  omitted and the model's default applies. ``Thinking.show`` never reaches the wire
  (``exclude`` is never sent): reasoning always travels back to the provider.
- Prompt caching for ``anthropic/*`` models: a ``cache_control`` breakpoint on the
  system prompt and one on the last text part of the newest message (two of the four
  Anthropic allows). Caching is not a knob: a tool-using run always sends a second
  request sharing the first one's prefix, which is where a cache write pays for
  itself. Other models cache automatically or not at all, so they get no markers.

May import: the standard library and nacelle's core (``errors``, ``backend``,
``messages``). Never ``requests``.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Optional, Sequence, Set

from ..backend import Request
from ..errors import ConfigError, Unsupported
from ..messages import (
    Finish, Image, Message, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult,
)

__all__ = ["PROTOCOL", "to_wire"]

#: The ``Reasoning.protocol`` / ``ProviderBlock.protocol`` this backend produces.
PROTOCOL = "openrouter"

_EPHEMERAL = {"type": "ephemeral"}

MCP_HINT = (
    "OpenRouter has no server-side MCP; connect the server locally with "
    "nacelle.mcp.connect_stdio() or nacelle.mcp.connect_http() and pass its "
    ".tools() to the Agent"
)


def to_wire(
    request: Request,
    messages: Sequence[Message],
    *,
    model: str,
    provider: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """The JSON body of one ``POST /chat/completions`` for ``messages``.

    Raises :class:`~nacelle.errors.Unsupported` for MCP servers (OpenRouter has no
    server-side MCP) and :class:`~nacelle.errors.ConfigError` for a conversation that
    cannot be expressed (a ToolResult in an assistant message, reasoning state that
    is not the JSON list this backend wrote, ...), naming the message.
    """
    if request.mcp:
        raise Unsupported("openrouter", "MCP servers", MCP_HINT)
    cache = model.startswith("anthropic/")
    wire: List[Dict[str, Any]] = []
    if request.system:
        if cache:
            system: Any = [{"type": "text", "text": request.system,
                            "cache_control": dict(_EPHEMERAL)}]
        else:
            system = request.system
        wire.append({"role": "system", "content": system})
    unsent: Set[str] = {
        p.id for m in messages for p in m.parts if isinstance(p, ToolCall) and not p.finished
    }
    for position, message in enumerate(messages):
        if message.role is Role.ASSISTANT:
            item = _assistant(message, position)
            if item is not None:
                wire.append(item)
        else:
            wire.extend(_user(message, position, unsent))
    if cache and len(wire) > 1:
        _mark_newest(wire[-1])

    body: Dict[str, Any] = {"model": model, "messages": wire, "stream": True,
                            "max_tokens": request.max_tokens}
    tools = sorted(request.tools, key=lambda t: t.name)
    if tools:
        body["tools"] = [_tool(t) for t in tools]
        body["parallel_tool_calls"] = True
    reasoning = _reasoning(request)
    if reasoning is not None:
        body["reasoning"] = reasoning
    if provider:
        body["provider"] = copy.deepcopy(provider)
    return body


def _tool(tool: Any) -> Dict[str, Any]:
    function: Dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = copy.deepcopy(tool.schema)
    return {"type": "function", "function": function}


def _reasoning(request: Request) -> Optional[Dict[str, Any]]:
    thinking = request.thinking
    if thinking.budget:
        return {"max_tokens": thinking.budget}
    if thinking.effort is not None:
        return {"effort": thinking.effort.value}
    return None


def _user(message: Message, position: int, unsent: Set[str]) -> List[Dict[str, Any]]:
    results: List[Dict[str, Any]] = []
    content: List[Dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResult):
            if part.id not in unsent:
                results.append({"role": "tool", "tool_call_id": part.id,
                                "content": part.result})
        elif isinstance(part, Text):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, Image):
            content.append({"type": "image_url", "image_url": {
                "url": f"data:{part.media_type};base64,{part.data}"}})
        elif isinstance(part, (Reasoning, ProviderBlock, Finish)):
            continue
        else:
            raise ConfigError(
                f"message {position}: a user message cannot carry a {type(part).__name__}"
            )
    if not content:
        if results or message.parts:
            return results
        return [{"role": "user", "content": ""}]
    if len(content) == 1 and content[0]["type"] == "text":
        user: Dict[str, Any] = {"role": "user", "content": content[0]["text"]}
    else:
        user = {"role": "user", "content": content}
    return results + [user]


def _assistant(message: Message, position: int) -> Optional[Dict[str, Any]]:
    text: List[str] = []
    calls: List[Dict[str, Any]] = []
    details: Optional[List[Any]] = None
    reasoning_text: List[str] = []
    for part in message.parts:
        if isinstance(part, Text):
            text.append(part.text)
        elif isinstance(part, ToolCall):
            if part.finished:
                arguments = part.input if part.input.strip() else "{}"
                calls.append({"id": part.id, "type": "function",
                              "function": {"name": part.name, "arguments": arguments}})
        elif isinstance(part, Reasoning):
            if part.protocol != PROTOCOL:
                continue
            reasoning_text.append(part.text)
            if part.state:
                details = (details or []) + _details(part.state, position)
        elif isinstance(part, (ProviderBlock, Finish)):
            continue
        else:
            raise ConfigError(
                f"message {position}: an assistant message cannot carry a {type(part).__name__}"
            )
    joined = "".join(text)
    if not joined and not calls:
        return None
    item: Dict[str, Any] = {"role": "assistant", "content": joined or None}
    if calls:
        item["tool_calls"] = calls
    if details is not None:
        item["reasoning_details"] = details
    elif "".join(reasoning_text):
        item["reasoning"] = "".join(reasoning_text)
    return item


def _details(state: str, position: int) -> List[Any]:
    try:
        value = json.loads(state)
    except ValueError:
        value = None
    if not isinstance(value, list):
        raise ConfigError(
            f"message {position}: openrouter reasoning state must be the JSON list of "
            f"reasoning_details the stream produced; got {state[:60]!r}"
        )
    return value


def _mark_newest(item: Dict[str, Any]) -> None:
    """Put a cache breakpoint on the last text part of the newest wire message."""
    content = item.get("content")
    if isinstance(content, str):
        if content:
            item["content"] = [{"type": "text", "text": content,
                                "cache_control": dict(_EPHEMERAL)}]
        return
    if isinstance(content, list):
        for part in reversed(content):
            if part.get("type") == "text" and part.get("text"):
                part["cache_control"] = dict(_EPHEMERAL)
                return
