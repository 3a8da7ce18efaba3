"""The OpenAI Responses request body, built without I/O: :func:`to_wire` and
:func:`count_tokens_body`.

Pure: no I/O, no clock, nothing a caller passed is mutated (tool schemas are
deep-copied into the body). ``__init__.py`` beside it does the sending and ``stream.py``
reads the answer. The shapes are those of ``CreateResponse`` in OpenAI's OpenAPI
document (github.com/openai/openai-openapi ``openapi.yaml``, the copy the tests
validate every body against is ``tests/data/openai_responses/``).

Choices where the contract is silent:

- **Stateless.** Every body carries ``store: false`` and the whole conversation as
  ``input`` items, and asks for ``include: ["reasoning.encrypted_content"]`` — the
  spec's own description of that value: "enables reasoning items to be used in
  multi-turn conversations when using the Responses API statelessly (like when the
  ``store`` parameter is set to ``false``)". The conversation stays a value nacelle
  owns; nothing is looked up by ``previous_response_id``.
- **The system prompt is ``instructions``**, not a system or developer message: the
  spec defines it as "a system (or developer) message inserted into the model's
  context", it sits outside ``input`` (so the items are only the conversation), and
  it is what OpenAI's Agents SDK and pydantic-ai send (pydantic-ai's recorded
  requests in ``tests/data/openai_responses/`` carry it).
- **Items.** A user message is one ``message`` item of ``input_text`` and
  ``input_image`` parts (an image as a ``data:`` URL, ``detail: "auto"``, which the
  spec requires); its ToolResults go first, each a ``function_call_output`` item
  with the call's ``call_id``. An assistant message becomes, in its own order: each
  Reasoning of this protocol as the reasoning item it came from, replayed unchanged
  (its ``state`` is the item's JSON, encrypted content included); each Text as an
  ``{"role": "assistant", "content": text}`` message; each finished ToolCall as a
  ``function_call`` item (``arguments`` byte for byte, blank as ``"{}"``); each
  ProviderBlock of this protocol as the item it holds. The server's ids of messages
  and calls are not sent: with ``store: false`` there is nothing stored for them to
  name, and ``call_id`` is what pairs a call with its output. Reasoning and blocks
  of another protocol, Finish parts, a call cut off mid-input
  (``ToolCall(finished=False)``) and any result carrying its id are never sent, nor
  a reasoning item without ``encrypted_content`` (stateless, the API could only
  look it up by id, and answers that it is not stored).
- **Media.** An Image is an ``input_image`` holding a ``data:`` URL; a Document an
  ``input_file`` with ``file_data`` as a ``data:`` URL and a ``filename`` (its title,
  given the type's extension; the API reads PDFs as text and page images, and plain
  text as text — developers.openai.com/api/docs/guides/file-inputs). A ToolResult
  with media sends ``output`` as a list of ``input_text``, ``input_image`` and
  ``input_file`` items in the tool's order (the spec's
  ``FunctionCallOutputItemParam.output``: a string or an array of
  ``InputTextContentParam``, ``InputImageContentParamAutoParam`` and
  ``InputFileContentParam``; openai-python's ``ResponseFunctionCallOutputItemListParam``);
  one without media sends its text as the string it always did.
- **Tools** are ``function`` tools with ``strict: false``: the spec requires the
  field, and strict mode would refuse the optional parameters ``@tool`` schemas
  have (strict asks for every property to be required). The provider's own tools
  (``nacelle.native``) are its hosted ``web_search`` and ``code_interpreter``; their
  ``web_search_call`` and ``code_interpreter_call`` items come back as provider blocks
  and are replayed as they came. A deferred tool (``nacelle.tool_search``) carries
  ``defer_loading: true`` beside the hosted ``tool_search`` tool, whose
  ``tool_search_call`` and ``tool_search_output`` items are replayed the same way
  (developers.openai.com/api/docs/guides/tools-tool-search).
- **Reasoning.** ``Thinking(effort=...)`` is ``reasoning.effort`` (the spec's
  ``ReasoningEffort`` has all seven of nacelle's levels, ``none`` to ``max``); a
  budget, which the Responses API does not take, becomes the effort its size
  suggests (under 4,096 tokens ``low``, under 16,384 ``medium``, else ``high``, as
  the Chat Completions dialects do). ``show`` asks for ``summary: "auto"`` — the
  summaries are what the API shows of OpenAI's reasoning.
- **Structured output** (a Request whose ``output`` mode is "native") is
  ``text.format: {"type": "json_schema", "name", "schema", "strict"}`` (the spec's
  ``TextResponseFormatJsonSchema``), the schema in OpenAI's strict subset
  (``output.schema.for_openai``) unless a ``Schema(..., strict=False)`` asks otherwise.
- **Settings** (``request.settings``) are ``CreateResponse``'s own fields
  (platform.openai.com/docs/api-reference/responses/create): ``temperature``,
  ``top_p``, ``tool_choice`` as "auto", "required", "none" or ``{"type": "function",
  "name": ...}`` (the spec's ``ToolChoiceFunction``) and ``parallel_tool_calls``, the
  last two only on a request with tools. The Responses API has no ``stop``, ``top_k``
  or ``seed``, so those are refused when the Agent is made. ``Cache(key=...)`` is
  ``prompt_cache_key``. ``extra_body`` is merged over the body last.
- **Max tokens.** ``max_output_tokens`` is sent only when the Agent chose a cap
  (``max_tokens`` other than ``DEFAULT_MAX_TOKENS``), as on Chat Completions, and
  never below the spec's minimum of 16.

:func:`encode_body` is that body as the bytes sent, each message's items encoded once
a run (``backends._wire_cache``), so a turn's build costs what the turn adds rather
than the whole conversation again.

May import: the standard library, nacelle's core and ``backends._wire_cache``. Never
``requests``.
"""

from __future__ import annotations

import copy
from typing import AbstractSet, Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ..._loggers import get_logger
from ...backend import DEFAULT_MAX_TOKENS, CallProfile, Request
from ...errors import ConfigError, Unsupported
from ...messages import (
    Document, Finish, Image, Message, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult,
)
from ...native import is_native
from ...output.schema import for_openai
from ...sse import parse_json
from .._media import ALL_DOCUMENTS, Takes, filename, split
from .._wire_cache import Body, WireCache, dumps, encode_items, split_frame

__all__ = ["INCLUDE", "MCP_HINT", "MIN_OUTPUT_TOKENS", "PROTOCOL", "count_tokens_body",
           "encode_body", "to_wire"]

logger = get_logger(__name__)

#: The ``Reasoning.protocol`` / ``ProviderBlock.protocol`` of this backend.
PROTOCOL = "openai-responses"

#: What every request asks to be included: the reasoning a stateless request replays.
INCLUDE = ("reasoning.encrypted_content",)

#: ``CreateResponse.max_output_tokens`` has ``minimum: 16``.
MIN_OUTPUT_TOKENS = 16

#: Images and both document types, inside tool results too (see the module docstring).
TAKES = Takes(images=True, documents=ALL_DOCUMENTS, tool_media=True)

MCP_HINT = (
    "the OpenAI backend sends no server-side MCP servers; connect the server locally "
    "with nacelle.mcp.connect_stdio() or nacelle.mcp.connect_http() and pass its "
    ".tools() to the Agent"
)


def to_wire(request: Request, messages: Sequence[Message], *, model: str) -> Dict[str, Any]:
    """The JSON body of one streamed ``POST /responses`` for ``messages``.

    Raises :class:`~nacelle.errors.Unsupported` for MCP servers and
    :class:`~nacelle.errors.ConfigError` for a conversation that cannot be expressed
    (a ToolResult in an assistant message, reasoning state that is not an item
    this protocol wrote), naming the message.
    """
    body = _frame(request, messages, model=model)
    body["stream"] = True
    body["store"] = False
    body["include"] = list(INCLUDE)
    if request.max_tokens != DEFAULT_MAX_TOKENS:
        body["max_output_tokens"] = max(MIN_OUTPUT_TOKENS, request.max_tokens)
    output = request.output
    if output is not None and output.mode == "native":
        strict = bool(output.strict)
        body["text"] = {"format": {
            "type": "json_schema", "name": output.name,
            "schema": for_openai(output.schema) if strict else copy.deepcopy(output.schema),
            "strict": strict}}
    _settings(body, request)
    return body


def _settings(body: Dict[str, Any], request: Request) -> None:
    """``request.settings`` and the cache key into ``body`` (see the module docstring)."""
    settings = request.settings
    for name in ("temperature", "top_p"):
        value = getattr(settings, name)
        if value is not None:
            body[name] = value
    if request.tools:
        if settings.forced_tool is not None:
            body["tool_choice"] = {"type": "function", "name": settings.forced_tool}
        elif settings.tool_choice is not None:
            body["tool_choice"] = settings.tool_choice
        if settings.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
    if request.cache is not None and request.cache.key is not None:
        body["prompt_cache_key"] = request.cache.key
    if settings.extra_body:
        body.update(copy.deepcopy(settings.extra_body))


def count_tokens_body(request: Request, messages: Sequence[Message], *,
                      model: str) -> Dict[str, Any]:
    """The ``POST /responses/input_tokens`` body (the spec's ``TokenCountsBody``):
    :func:`to_wire`'s without what only a generation takes."""
    return _frame(request, messages, model=model)


def _frame(request: Request, messages: Sequence[Message], *, model: str) -> Dict[str, Any]:
    if request.mcp:
        raise Unsupported("openai", "MCP servers", MCP_HINT)
    body: Dict[str, Any] = {"model": model}
    if request.system:
        body["instructions"] = request.system
    body["input"] = items(messages)
    tools = sorted(request.tools, key=send_order)
    if tools:
        body["tools"] = [_tool(t) for t in tools]
    reasoning = _reasoning(request)
    if reasoning:
        body["reasoning"] = reasoning
    return body


def items(messages: Sequence[Message]) -> List[Dict[str, Any]]:
    """The ``input`` items of a conversation (see the module docstring)."""
    unsent = _unfinished(messages)
    out: List[Dict[str, Any]] = []
    for position, message in enumerate(messages):
        out.extend(_message_items(message, position, unsent))
    return out


def _message_items(message: Message, position: int,
                   unsent: AbstractSet[str]) -> List[Dict[str, Any]]:
    if message.role is Role.ASSISTANT:
        return _assistant(message, position)
    return _user(message, position, unsent)


def _unfinished(messages: Sequence[Message]) -> FrozenSet[str]:
    """The ids of the calls left unfinished: their results are not sent."""
    return frozenset(p.id for m in messages for p in m.parts
                     if isinstance(p, ToolCall) and not p.finished)


# -- the body as bytes, each message encoded once -----------------------------------

def encode_body(request: Request, messages: Sequence[Message], *, model: str,
                cache: Optional[WireCache] = None) -> Body:
    """:func:`to_wire`'s body as the bytes the transport sends, exactly
    ``json.dumps(to_wire(...), ensure_ascii=False, separators=(",", ":"))`` in UTF-8,
    with each message's items encoded once per ``cache`` and a run's items so far
    reused whole (see ``_wire_cache``); without a cache, that very ``json.dumps``.

    Each message's items are a function of the message alone, but for results whose
    call was left unfinished, which a later message can name: such a result is
    encoded again each turn, and a turn adding an unfinished call starts from the
    per-message table instead of the run's prefix.
    """
    extra = request.settings.extra_body
    if (cache is None or request.profile is not CallProfile.AGENT_TURN
            or (extra and "input" in extra)):
        return Body((dumps(to_wire(request, messages, model=model)),))
    head, _, tail = split_frame(to_wire(request, (), model=model), key="input")
    return encode_items(cache, request, messages, PROTOCOL, (head, tail), _plain, _again,
                        _unfinished)


def _plain(message: Message,
           position: int) -> Tuple[Tuple[bytes, ...], Optional[FrozenSet[str]]]:
    """A message's items encoded with every result sent, and the ids of its results
    (None for none): what the per-message table keeps."""
    results = frozenset(p.id for p in message.parts if isinstance(p, ToolResult))
    encoded = tuple(map(dumps, _message_items(message, position, frozenset())))
    return encoded, results or None


def _again(message: Message, position: int, unsent: FrozenSet[str]) -> Tuple[bytes, ...]:
    return tuple(map(dumps, _message_items(message, position, unsent)))


def _tool(tool: Any) -> Dict[str, Any]:
    if is_native(tool):
        return _hosted(tool)
    item: Dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        item["description"] = tool.description
    item["parameters"] = copy.deepcopy(tool.schema)
    item["strict"] = False
    if getattr(tool, "defer_loading", False) is True:
        item["defer_loading"] = True
    return item


def send_order(tool: Any) -> Tuple[int, str]:
    """Where a tool goes in the list sent: by name, but a tool a local search loaded
    after every tool sent before it (``loaded_at``), so a cached prefix holds."""
    return getattr(tool, "loaded_at", 0), tool.name


def _hosted(tool: Any) -> Dict[str, Any]:
    """A ``nacelle.native`` tool as the hosted tool it is here: ``web_search`` (its
    ``filters.allowed_domains``) or ``code_interpreter`` in an ``auto`` container (the
    spec's ``WebSearchTool`` and ``CodeInterpreterTool``)."""
    if tool.kind == "web_search":
        item: Dict[str, Any] = {"type": "web_search"}
        allowed = tool.option("allowed_domains")
        if allowed:
            item["filters"] = {"allowed_domains": list(allowed)}
        return item
    if tool.kind == "code_execution":
        return {"type": "code_interpreter", "container": {"type": "auto"}}
    if tool.kind == "tool_search":
        return {"type": "tool_search"}
    raise Unsupported("openai", f"the native {tool.kind} tool")


def _reasoning(request: Request) -> Dict[str, Any]:
    thinking = request.thinking
    reasoning: Dict[str, Any] = {}
    effort = thinking.effort.value if thinking.effort is not None else None
    if effort is None and thinking.budget:
        effort = "low" if thinking.budget < 4096 else (
            "medium" if thinking.budget < 16384 else "high")
    if effort is not None:
        reasoning["effort"] = effort
    if thinking.show:
        reasoning["summary"] = "auto"
    return reasoning


def _user(message: Message, position: int, unsent: AbstractSet[str]) -> List[Dict[str, Any]]:
    results: List[Dict[str, Any]] = []
    content: List[Dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResult):
            if part.id not in unsent:
                results.append({"type": "function_call_output", "call_id": part.id,
                                "output": _output(part)})
        elif isinstance(part, (Text, Image, Document)):
            content.append(_input(part))
        elif isinstance(part, (Reasoning, ProviderBlock, Finish)):
            continue
        else:
            raise ConfigError(
                f"message {position}: a user message cannot carry a {type(part).__name__}")
    if content:
        results.append({"type": "message", "role": "user", "content": content})
    elif not message.parts:
        results.append({"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": ""}]})
    return results


def _input(part: Any) -> Dict[str, Any]:
    """One Text, Image or Document as an input content item."""
    if isinstance(part, Text):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, Image):
        return {"type": "input_image", "detail": "auto",
                "image_url": f"data:{part.media_type};base64,{part.data}"}
    return {"type": "input_file", "filename": filename(part),
            "file_data": f"data:{part.media_type};base64,{part.data}"}


def _output(result: ToolResult) -> Any:
    """A ``function_call_output``'s ``output``: the text as a string, as always, or
    with media the list of input items the API takes there."""
    if not result.content:
        return result.result
    inline, _ = split(result, TAKES)  # nothing follows: media go inside
    return [_input(part) for part in inline] or ""


def _assistant(message: Message, position: int) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, Text):
            if part.text:
                out.append({"role": "assistant", "content": part.text})
        elif isinstance(part, ToolCall):
            if part.finished:
                out.append({"type": "function_call", "call_id": part.id, "name": part.name,
                            "arguments": part.input if part.input.strip() else "{}"})
        elif isinstance(part, Reasoning):
            if part.protocol == PROTOCOL and part.state:
                item = _item(part.state, position, "reasoning")
                if item.get("encrypted_content"):
                    out.append(item)
                else:
                    logger.debug("message %d: a reasoning item without encrypted_content "
                                 "is not sent (store is false)", position)
        elif isinstance(part, ProviderBlock):
            if part.protocol == PROTOCOL:
                out.append(_item(part.data, position, "provider block"))
        elif isinstance(part, Finish):
            continue
        else:
            raise ConfigError(
                f"message {position}: an assistant message cannot carry a {type(part).__name__}")
    return out


def _item(text: str, position: int, what: str) -> Dict[str, Any]:
    """The output item a part's JSON holds, to go back as it came."""
    try:
        value: Optional[Any] = parse_json(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ConfigError(
            f"message {position}: {PROTOCOL} {what} state must be the JSON of the output "
            f"item the stream produced; got {text[:60]!r}")
    return value
