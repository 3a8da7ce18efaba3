"""The Chat Completions request body, built without I/O: :class:`Dialect`,
:func:`to_wire` and :func:`encode_body` (its bytes, each message encoded once a run).

Pure: no I/O, no clock, nothing a caller passed is mutated (tool schemas and extra
body fields are deep-copied into the body). ``__init__.py`` beside it does the sending and
``stream.py`` reads the answer; OpenRouter (``backends/openrouter.py``) is this dialect
with its own :class:`Dialect`.

Many servers speak Chat Completions and each is loose in its own place. A
:class:`Dialect` value records where, so one body builder serves them all:

- **Max tokens.** OpenAI's reasoning models refuse ``max_tokens`` and want
  ``max_completion_tokens``; DeepSeek's chat model refuses anything above 8,192; a
  local server with a 4,096-token context refuses a 32,000-token cap. So the cap is
  sent, under the dialect's field name, only when the Agent was given one
  (``max_tokens`` other than the default); otherwise the server's own default
  applies. ``Dialect.always_max_tokens`` sends it anyway (OpenRouter, whose thinking
  budgets are derived from it).
- **Effort.** ``reasoning_effort`` (OpenAI, Groq, Gemini, DeepSeek, Mistral, vLLM, Ollama) or
  ``reasoning.effort`` (OpenRouter), in the levels the dialect accepts: a level the
  server lacks becomes the nearest it has (``max`` on a server whose top is
  ``high`` is ``high``). ``Effort.NONE`` is sent where the server has it and drops
  the field where it does not. A token budget is ``reasoning.max_tokens`` where the
  dialect takes one (OpenRouter) and otherwise the effort its size suggests
  (under 4,096 tokens ``low``, under 16,384 ``medium``, else ``high``), the mapping
  LiteLLM and the OpenAI-compatible gateways use. DeepSeek also takes
  ``thinking: {"type": "enabled"|"disabled"}`` and ``Effort.NONE`` disables it.
- **Usage.** Most servers stream usage only when asked with
  ``stream_options: {"include_usage": true}``; OpenRouter always streams it and calls
  the option deprecated, so its dialect never sends it.
- **Tools.** ``tool_choice: "auto"`` is sent explicitly where a server wants it
  (vLLM answers tool calls only with it); ``parallel_tool_calls: true`` where the
  server takes it. Calls are sent with their ``arguments`` byte for byte (blank
  input becomes ``"{}"``); a call cut off mid-input (``ToolCall(finished=False)``)
  is never sent, nor any result carrying its id. Each ToolResult is one ``tool``
  message, in order, before the rest of its user message.
- **Reasoning going back.** The dialect names the field that carries plain reasoning
  text back (``reasoning`` on OpenRouter, ``reasoning_content`` on DeepSeek, whose
  thinking mode refuses a tool loop whose earlier calls come back without their
  reasoning) and whether it goes on every assistant message or only those with
  tool calls. OpenRouter's ``reasoning_details`` go back exactly as streamed. A
  tool call's ``extra_content`` (Gemini's thought signature, which Gemini 3 refuses
  a function-calling turn without) rides in a ProviderBlock of the turn and goes
  back on its call. Reasoning and blocks of another protocol are dropped, as are
  Finish parts.
- **Messages.** The system prompt is the first message. A user message of one Text
  part is a plain string; images are ``image_url`` parts holding a ``data:`` URL.
  A PDF is a ``file`` part, ``{"type": "file", "file": {"filename", "file_data":
  "data:application/pdf;base64,..."}}``, where ``Dialect.documents`` says the server
  takes one (OpenAI: "Chat Completions accepts only PDF files as file content parts",
  developers.openai.com/api/docs/guides/file-inputs; OpenRouter:
  openrouter.ai/docs/features/multimodal/pdfs); a plain-text document is a ``text``
  part of its text, as OpenAI's guide asks.
- **A tool's media.** A ``tool`` message holds text only (openai-python's
  ``ChatCompletionToolMessageParam.content``: a string or text parts), so a result
  with images or PDFs sends its text, saying what follows, and the media go in the
  one user message after the results, each call's after a line naming the call. Media
  the dialect cannot take at all (images on DeepSeek, PDFs where ``documents`` is
  false) become a note in the result's text (``backends/_media.py``).
  An assistant message sends ``content: null`` (not ``""``, which some upstreams
  refuse) when it holds only tool calls, and is omitted when it holds nothing.
- **Structured output** (a Request whose ``output`` mode is "native") is
  ``response_format: {"type": "json_schema", "json_schema": {"name", "schema",
  "strict"}}`` (platform.openai.com/docs/api-reference/chat/create), in the form
  ``Dialect.output_schema`` names: ``"openai"`` — OpenAI's strict subset
  (``output.schema.for_openai``: every property required, optional ones nullable,
  ``additionalProperties: false``), which OpenRouter, Groq, Mistral, Together and xAI
  also take; ``"gemini"`` — Gemini's schema subset (``output.schema.for_gemini``);
  ``"full"`` — the schema as it is, for servers that compile any JSON Schema into a
  grammar (llama.cpp, vLLM, Ollama, LM Studio), with ``strict`` as asked. ``""``:
  the server has no native structured output (``capabilities.structured_output``
  false; ``output_mode="auto"`` uses the final-answer tool). A ``Schema(...,
  strict=False)`` is sent as it is with ``strict: false`` everywhere.
- **Settings** (``request.settings``) are ``CreateChatCompletionRequest``'s fields
  (``_settings`` below names each); ``Dialect.settings`` says which a server takes,
  and the Agent refuses the others at construction. ``extra_body`` is merged last,
  over the body and the dialect's own extra fields.
- **Prompt caching**, for the models whose name starts with one of
  ``Dialect.cache_prefixes`` (OpenRouter's ``anthropic/``): a ``cache_control``
  breakpoint on the system prompt and one on the last text of the newest message.
  Other servers cache automatically or not at all, and get no markers. As on the
  Anthropic backend, a ``CallProfile.COMPACTION`` request marks the system prompt
  only, and one-shot profiles (TITLE, EVALUATION, PROBE) mark nothing.
  ``Cache(ttl="1h")`` adds ``"ttl": "1h"`` to each marker and ``Cache(key=...)`` is
  ``prompt_cache_key`` where the dialect takes one (OpenAI, OpenRouter).

Where the contract is silent the choice follows the official OpenAI SDK's request
shapes and the providers' compatibility pages (platform.openai.com/docs/api-reference/chat,
api-docs.deepseek.com/guides/thinking_mode, ai.google.dev/gemini-api/docs/openai).

May import: the standard library, nacelle's core and ``backends._wire_cache``. Never
``requests``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import AbstractSet, Any, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from ...backend import DEFAULT_MAX_TOKENS, CallProfile, Effort, Request
from ...errors import ConfigError, Unsupported
from ...messages import (
    Document, Finish, Image, Message, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult,
)
from ...output.schema import for_gemini, for_openai
from ...sse import parse_json
from .._media import Takes, document_text, filename, follow_parts, joined, split
from .._wire_cache import Body, Run, WireCache, assemble, dumps, grow, split_frame

__all__ = ["Dialect", "PROTOCOL", "encode_body", "to_wire"]

#: The ``Reasoning.protocol`` / ``ProviderBlock.protocol`` of a plain Chat
#: Completions server.
PROTOCOL = "chat"

_EPHEMERAL = {"type": "ephemeral"}
_EPHEMERAL_1H = {"type": "ephemeral", "ttl": "1h"}
#: What a Chat Completions server takes unless its dialect says otherwise: the
#: fields of OpenAI's ``CreateChatCompletionRequest`` that servers commonly honour
#: (platform.openai.com/docs/api-reference/chat/create).
CHAT_SETTINGS = frozenset({"temperature", "top_p", "stop", "seed", "tool_choice",
                           "forced_tool_choice", "parallel_tool_calls", "extra_body",
                           "extra_headers"})
_PDF = frozenset({"application/pdf"})
_LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
#: ``Dialect.output_schema`` forms and their normalisers (None: the schema as it is).
_OUTPUT_FORMS = {"": None, "openai": for_openai, "gemini": for_gemini, "full": None}

MCP_HINT = (
    "Chat Completions servers have no server-side MCP; connect the server locally with "
    "nacelle.mcp.connect_stdio() or nacelle.mcp.connect_http() and pass its "
    ".tools() to the Agent"
)


@dataclass(frozen=True)
class Dialect:
    """What one Chat Completions server does its own way; see the module docstring.

    ``name`` is how errors and logs name the server ("Ollama", "OpenAI"), never
    "OpenRouter" for another server; ``key_env`` is the variable its key is read
    from (empty for a server that needs none); ``pricing`` the provider name in
    :mod:`nacelle.pricing`.
    """

    name: str = "the Chat Completions server"
    protocol: str = PROTOCOL
    key_env: str = ""
    max_tokens: Optional[str] = "max_tokens"
    always_max_tokens: bool = False
    effort: Optional[str] = "reasoning_effort"
    efforts: Tuple[str, ...] = ("low", "medium", "high")
    budget: bool = False
    thinking_toggle: bool = False
    reasoning_fields: Tuple[str, ...] = ("reasoning_content", "reasoning")
    reasoning_details: bool = False
    echo_reasoning: Optional[str] = None
    echo_with_calls_only: bool = True
    include_usage: bool = True
    tool_choice: bool = False
    parallel_tool_calls: bool = False
    cache_prefixes: Tuple[str, ...] = ()
    cost_in_usage: bool = False
    images: bool = True
    documents: bool = False
    pricing: str = ""
    output_schema: str = ""
    #: the ModelSettings (and "cache_key") this server takes, as
    #: ``Capabilities.settings`` names them
    settings: FrozenSet[str] = CHAT_SETTINGS
    #: whether OpenAI's reasoning models refuse sampling here (``backends/_sampling.py``)
    openai_models: bool = False

    def __post_init__(self) -> None:
        unknown = [level for level in self.efforts if level not in _LEVELS]
        if unknown:
            raise ConfigError(f"Dialect.efforts holds levels no server has: {unknown}; "
                              f"the levels are {list(_LEVELS)}")
        if self.effort not in (None, "reasoning_effort", "reasoning.effort"):
            raise ConfigError(f"Dialect.effort must be 'reasoning_effort', "
                              f"'reasoning.effort' or None, got {self.effort!r}")
        if self.output_schema not in _OUTPUT_FORMS:
            raise ConfigError(f"Dialect.output_schema must be one of {sorted(_OUTPUT_FORMS)}, "
                              f"got {self.output_schema!r}")


def to_wire(
    request: Request,
    messages: Sequence[Message],
    *,
    model: str,
    dialect: Dialect = Dialect(),
    extra: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """The JSON body of one ``POST /chat/completions`` for ``messages``.

    ``extra`` fields are added to the body as given (OpenRouter's ``provider``).
    Raises :class:`~nacelle.errors.Unsupported` for MCP servers and
    :class:`~nacelle.errors.ConfigError` for a conversation that cannot be expressed
    (a ToolResult in an assistant message, reasoning state that is not what this
    dialect wrote, ...), naming the message.
    """
    if request.mcp:
        raise Unsupported(dialect.name, "MCP servers", MCP_HINT)
    cache = model.startswith(dialect.cache_prefixes) if dialect.cache_prefixes else False
    profile = request.profile
    prefix = cache and profile in (CallProfile.AGENT_TURN, CallProfile.COMPACTION)
    wire: List[Dict[str, Any]] = []
    if request.system:
        if prefix:
            system: Any = [{"type": "text", "text": request.system,
                            "cache_control": _marker(request)}]
        else:
            system = request.system
        wire.append({"role": "system", "content": system})
    unsent: Set[str] = {
        p.id for m in messages for p in m.parts if isinstance(p, ToolCall) and not p.finished
    }
    for position, message in enumerate(messages):
        if message.role is Role.ASSISTANT:
            item = assistant(message, position, dialect)
            if item is not None:
                wire.append(item)
        else:
            wire.extend(user(message, position, unsent, dialect))
    if cache and profile is CallProfile.AGENT_TURN and len(wire) > 1:
        _mark_newest(wire[-1], _marker(request))

    body: Dict[str, Any] = {"model": model, "messages": wire, "stream": True}
    if dialect.include_usage:
        body["stream_options"] = {"include_usage": True}
    if dialect.max_tokens and (dialect.always_max_tokens
                               or request.max_tokens != DEFAULT_MAX_TOKENS):
        body[dialect.max_tokens] = request.max_tokens
    # By name, but a tool a local tool search loaded after every tool sent before it,
    # so the prefix a server caches holds (nacelle.tool_search).
    tools = sorted(request.tools, key=lambda t: (getattr(t, "loaded_at", 0), t.name))
    if tools:
        body["tools"] = [_tool(t) for t in tools]
        if dialect.tool_choice:
            body["tool_choice"] = "auto"
        if dialect.parallel_tool_calls:
            body["parallel_tool_calls"] = True
    _reasoning(body, request, dialect)
    output = request.output
    if output is not None and output.mode == "native" and dialect.output_schema:
        body["response_format"] = response_format(output, dialect.output_schema)
    _settings(body, request, dialect)
    for key, value in (extra or {}).items():
        body[key] = copy.deepcopy(value)
    if request.settings.extra_body:
        body.update(copy.deepcopy(request.settings.extra_body))
    return body


def _settings(body: Dict[str, Any], request: Request, dialect: Dialect) -> None:
    """``request.settings`` and the cache key as ``CreateChatCompletionRequest``
    fields (platform.openai.com/docs/api-reference/chat/create): ``temperature``,
    ``top_p``, ``stop`` (a list), ``seed``, ``top_k`` where the dialect takes it
    (OpenRouter's ``ChatRequest``, vLLM's and llama.cpp's extra sampling fields),
    ``tool_choice`` as "auto", "required", "none" or ``{"type": "function",
    "function": {"name": ...}}``, ``parallel_tool_calls`` (the last two only with
    tools, replacing the dialect's own defaults), and ``prompt_cache_key``."""
    settings = request.settings
    for name in ("temperature", "top_p", "top_k", "seed"):
        value = getattr(settings, name)
        if value is not None:
            body[name] = value
    if settings.stop:
        body["stop"] = list(settings.stop)
    if request.tools:
        if settings.forced_tool is not None:
            body["tool_choice"] = {"type": "function",
                                   "function": {"name": settings.forced_tool}}
        elif settings.tool_choice is not None:
            body["tool_choice"] = settings.tool_choice
        if settings.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
    if request.cache is not None and request.cache.key is not None:
        body["prompt_cache_key"] = request.cache.key


def _marker(request: Request) -> Dict[str, Any]:
    """A breakpoint's ``cache_control``, with the request's lifetime (OpenRouter's
    ``ChatContentText.cache_control`` takes Anthropic's ``ttl``)."""
    cache = request.cache
    return dict(_EPHEMERAL_1H if cache is not None and cache.ttl == "1h" else _EPHEMERAL)


def response_format(output: Any, form: str) -> Dict[str, Any]:
    """The ``response_format`` of a native structured-output request (``output`` a
    :class:`nacelle.output.Output`) in the dialect's schema ``form``."""
    normalise = _OUTPUT_FORMS.get(form)
    strict = bool(output.strict)
    schema = normalise(output.schema) if strict and normalise is not None else copy.deepcopy(
        output.schema)
    return {"type": "json_schema",
            "json_schema": {"name": output.name, "schema": schema, "strict": strict}}


def _tool(tool: Any) -> Dict[str, Any]:
    function: Dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = copy.deepcopy(tool.schema)
    return {"type": "function", "function": function}


def _reasoning(body: Dict[str, Any], request: Request, dialect: Dialect) -> None:
    thinking = request.thinking
    if thinking.budget and dialect.budget:
        body["reasoning"] = {"max_tokens": thinking.budget}
        return
    effort = thinking.effort.value if thinking.effort is not None else None
    if effort is None and thinking.budget:
        effort = "low" if thinking.budget < 4096 else (
            "medium" if thinking.budget < 16384 else "high")
    if effort is None:
        return
    if dialect.thinking_toggle:
        body["thinking"] = {"type": "disabled" if effort == Effort.NONE.value else "enabled"}
    level = _nearest(effort, dialect.efforts)
    if level is None or dialect.effort is None:
        return
    if dialect.effort == "reasoning.effort":
        body["reasoning"] = {"effort": level}
    else:
        body["reasoning_effort"] = level


def _nearest(effort: str, levels: Tuple[str, ...]) -> Optional[str]:
    """``effort`` if the server has it, else the nearest level it has (ties go up);
    None for ``none`` on a server without it: the field is then left out."""
    if effort in levels:
        return effort
    if effort == "none" or not levels:
        return None
    want = _LEVELS.index(effort)
    return min(levels, key=lambda level: (abs(_LEVELS.index(level) - want),
                                          -_LEVELS.index(level)))


def user(message: Message, position: int, unsent: AbstractSet[str],
         dialect: Dialect = Dialect()) -> List[Dict[str, Any]]:
    """The wire messages of one user message: its tool results first, each a ``tool``
    message of text; then one user message holding the results' media (each call's
    after a line naming it, see ``backends/_media.py``) and the user's own parts."""
    results: List[Dict[str, Any]] = []
    content: List[Dict[str, Any]] = []
    followed: List[Any] = []
    takes = _takes(dialect)
    for part in message.parts:
        if isinstance(part, ToolResult):
            if part.id not in unsent:
                if part.content:
                    inline, follow = split(part, takes)
                    text = joined(inline)
                    followed.append((part, follow))
                else:
                    text = part.result
                results.append({"role": "tool", "tool_call_id": part.id, "content": text})
        elif isinstance(part, (Text, Image, Document)):
            content.append(_content(part, position, dialect))
        elif isinstance(part, (Reasoning, ProviderBlock, Finish)):
            continue
        else:
            raise ConfigError(
                f"message {position}: a user message cannot carry a {type(part).__name__}"
            )
    if followed:
        content[:0] = [_content(p, position, dialect) for p in follow_parts(followed)]
    if not content:
        if results or message.parts:
            return results
        return [{"role": "user", "content": ""}]
    if len(content) == 1 and content[0]["type"] == "text":
        item: Dict[str, Any] = {"role": "user", "content": content[0]["text"]}
    else:
        item = {"role": "user", "content": content}
    return results + [item]


def _takes(dialect: Dialect) -> Takes:
    # A tool message holds text only: a tool's media follow the results.
    return Takes(images=dialect.images,
                 documents=_PDF if dialect.documents else frozenset(), tool_media=False)


def _content(part: Any, position: int, dialect: Dialect) -> Dict[str, Any]:
    """One Text, Image or Document as a user message's content part."""
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        return {"type": "image_url",
                "image_url": {"url": f"data:{part.media_type};base64,{part.data}"}}
    if part.media_type == "text/plain":
        return {"type": "text", "text": document_text(part)}
    if not dialect.documents:
        raise Unsupported(dialect.name, f"documents (message {position} has a "
                          f"{part.media_type} one)", "use a backend that takes PDFs")
    return {"type": "file", "file": {
        "filename": filename(part), "file_data": f"data:{part.media_type};base64,{part.data}"}}


def assistant(message: Message, position: int, dialect: Dialect) -> Optional[Dict[str, Any]]:
    """The wire message of one assistant message, or None when it holds nothing to send."""
    text: List[str] = []
    calls: List[Dict[str, Any]] = []
    details: Optional[List[Any]] = None
    reasoning_text: List[str] = []
    extras: Dict[str, Any] = {}
    for part in message.parts:
        if isinstance(part, Text):
            text.append(part.text)
        elif isinstance(part, ToolCall):
            if part.finished:
                arguments = part.input if part.input.strip() else "{}"
                calls.append({"id": part.id, "type": "function",
                              "function": {"name": part.name, "arguments": arguments}})
        elif isinstance(part, Reasoning):
            if part.protocol != dialect.protocol:
                continue
            reasoning_text.append(part.text)
            if part.state and dialect.reasoning_details:
                details = (details or []) + _details(part.state, position, dialect)
        elif isinstance(part, ProviderBlock):
            if part.protocol == dialect.protocol:
                _call_extra(part.data, extras)
        elif isinstance(part, Finish):
            continue
        else:
            raise ConfigError(
                f"message {position}: an assistant message cannot carry a {type(part).__name__}"
            )
    joined = "".join(text)
    if not joined and not calls:
        return None
    for call in calls:
        if call["id"] in extras:
            call["extra_content"] = copy.deepcopy(extras[call["id"]])
    item: Dict[str, Any] = {"role": "assistant", "content": joined or None}
    if calls:
        item["tool_calls"] = calls
    if details is not None:
        item["reasoning_details"] = details
    elif (dialect.echo_reasoning and "".join(reasoning_text)
          and (calls or not dialect.echo_with_calls_only)):
        item[dialect.echo_reasoning] = "".join(reasoning_text)
    return item


def call_extra_block(call_id: str, extra: Any) -> str:
    """The ProviderBlock data that carries a tool call's ``extra_content`` back."""
    return json.dumps({"call": call_id, "extra_content": extra}, ensure_ascii=False,
                      separators=(",", ":"))


def _call_extra(data: str, extras: Dict[str, Any]) -> None:
    try:
        block = parse_json(data)
    except ValueError:
        return
    if isinstance(block, dict) and isinstance(block.get("call"), str) and "extra_content" in block:
        extras[block["call"]] = block["extra_content"]


def _details(state: str, position: int, dialect: Dialect) -> List[Any]:
    try:
        value = parse_json(state)
    except ValueError:
        value = None
    if not isinstance(value, list):
        raise ConfigError(
            f"message {position}: {dialect.protocol} reasoning state must be the JSON list of "
            f"reasoning_details the stream produced; got {state[:60]!r}"
        )
    return value


def _mark_newest(item: Dict[str, Any], marker: Dict[str, Any]) -> None:
    """Put a cache breakpoint on the last text part of the newest wire message."""
    content = item.get("content")
    if isinstance(content, str):
        if content:
            item["content"] = [{"type": "text", "text": content,
                                "cache_control": dict(marker)}]
        return
    if isinstance(content, list):
        for part in reversed(content):
            if part.get("type") == "text" and part.get("text"):
                part["cache_control"] = dict(marker)
                return


# -- the body as bytes, each message encoded once -----------------------------------

def encode_body(
    request: Request,
    messages: Sequence[Message],
    *,
    model: str,
    dialect: Dialect = Dialect(),
    extra: Optional[Dict[str, Any]] = None,
    cache: Optional[WireCache] = None,
) -> Body:
    """:func:`to_wire`'s body as the bytes the transport sends, exactly
    ``json.dumps(to_wire(...), ensure_ascii=False, separators=(",", ":"))`` in UTF-8,
    with each message encoded once per ``cache`` and a run's stable prefix reused
    whole (see ``_wire_cache``); without a cache, that very ``json.dumps``.

    What is not a function of one message is done again every turn: the breakpoint on
    the newest message (so the messages from the newest one holding anything are the
    next turn's to encode again), and results whose call was left unfinished, which a
    later message can name (a turn adding such a call starts from the per-message
    table instead of the run's prefix).
    """
    if (cache is None or request.profile is not CallProfile.AGENT_TURN
            or (extra and ("model" in extra or "messages" in extra))):
        return Body((dumps(to_wire(request, messages, model=model, dialect=dialect,
                                   extra=extra)),))
    frame = to_wire(request, (), model=model, dialect=dialect, extra=extra)
    head, system, tail = split_frame(frame)
    mark = model.startswith(dialect.cache_prefixes) if dialect.cache_prefixes else False
    space = (PROTOCOL, dialect, mark)
    run = cache.resume(request, messages, space)
    body = None if run is None else _encode(cache, request, messages, space, run,
                                           (head, system, tail))
    if body is None:
        body = _encode(cache, request, messages, space, None, (head, system, tail))
    assert body is not None  # without a Run nothing can be in the way
    return body


def _encode(cache: WireCache, request: Request, messages: Sequence[Message],
            space: Tuple[str, Dialect, bool], run: Optional[Run],
            frame: Tuple[bytes, List[bytes], bytes]) -> Optional[Body]:
    """The body from ``run``'s prefix on, or None when ``run`` cannot be used."""
    head, system, tail = frame
    _, dialect, mark = space
    start = run.stable if run is not None else 0
    kept: FrozenSet[str] = run.info if run is not None else frozenset()
    fresh = _unfinished(messages[start:])
    if fresh and run is not None:
        return None  # a new unfinished call may take back a result the prefix sent
    unsent = kept | fresh
    table = cache.table(space[:2])
    groups: List[Tuple[bytes, ...]] = []
    for position in range(start, len(messages)):
        message = messages[position]
        items, results = cache.encoded(table, message, _plain, position, dialect)
        if results is not None and not results.isdisjoint(unsent):
            items = tuple(map(dumps, _items(message, position, dialect, unsent)))
        groups.append(items)
    earlier = run.count if run is not None else 0
    newest = len(groups) - 1
    while newest >= 0 and not groups[newest]:
        newest -= 1
    if mark and len(system) + earlier + sum(map(len, groups)) > 1:
        if newest < 0:
            return None  # the newest item is in the prefix, which was sent unmarked
        last = _items(messages[start + newest], start + newest, dialect, unsent)[-1]
        _mark_newest(last, _marker(request))
        groups[newest] = groups[newest][:-1] + (dumps(last),)
    stable = (max(newest, 0) if mark else len(groups))
    kept_region = run.region if run is not None else ()
    pieces = list(system) + list(kept_region)
    for group in groups:
        pieces.extend(group)
    body = assemble(head, pieces, tail)
    if not _unfinished(messages[start + stable:]):
        added = [item for group in groups[:stable] for item in group]
        count = earlier + len(added)
        cache.keep(request, Run(space, tuple(messages), start + stable,
                                grow(kept_region, added), count,
                                kept | _unfinished(messages[start:start + stable])), run)
    return body


def _unfinished(messages: Sequence[Message]) -> FrozenSet[str]:
    return frozenset(p.id for m in messages for p in m.parts
                     if isinstance(p, ToolCall) and not p.finished)


def _items(message: Message, position: int, dialect: Dialect,
           unsent: AbstractSet[str]) -> List[Dict[str, Any]]:
    """The wire messages of one message, as :func:`to_wire` makes them."""
    if message.role is Role.ASSISTANT:
        item = assistant(message, position, dialect)
        return [] if item is None else [item]
    return user(message, position, unsent, dialect)


def _plain(message: Message, position: int,
           dialect: Dialect) -> Tuple[Tuple[bytes, ...], Optional[FrozenSet[str]]]:
    """A message's wire messages encoded with every result sent, and the ids of its
    results (None for none): what the per-message table keeps."""
    results = frozenset(p.id for p in message.parts if isinstance(p, ToolResult))
    items = tuple(map(dumps, _items(message, position, dialect, frozenset())))
    return items, results or None
