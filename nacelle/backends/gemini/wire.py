"""The Gemini ``generateContent`` request body, built without I/O: :func:`to_wire`.

Pure: no I/O, no clock, nothing a caller passed is mutated (schemas are deep-copied
into the body). ``__init__.py`` beside it does the sending and ``stream.py`` reads the
answer. The shapes are those of ``GenerateContentRequest`` in the API reference
(https://ai.google.dev/api/generate-content) and of the google-genai SDK's types
(``google/genai/types.py``: ``Content``, ``Part``, ``FunctionCall``,
``FunctionResponse``, ``Tool``, ``ToolConfig``, ``GenerationConfig``,
``ThinkingConfig``), in the REST API's camelCase.

Choices where the contract is silent:

- **Roles.** ``contents`` alternate ``user`` and ``model``; the system prompt is
  ``systemInstruction`` (a Content of one text part), outside the conversation.
- **A user message** is one ``user`` Content: its ToolResults first, each a
  ``functionResponse`` part ``{"id", "name", "response": {"output": text}}`` (or
  ``{"error": text}`` for a failed call: the SDK's ``FunctionResponse.response``
  says "Use 'output' key to specify function output and 'error' key to specify error
  details"), then its Text, Image and Document parts as ``text`` and ``inlineData``
  (``{"mimeType", "data"}``, base64) parts. A tool's images and documents go inside
  its ``functionResponse`` as ``parts`` of ``inlineData`` (``FunctionResponsePart``,
  the multimodal function responses of
  https://ai.google.dev/gemini-api/docs/function-calling, which came with Gemini 3);
  for a Gemini 1 or 2 model they follow the responses in the same Content, after a
  line naming the call, and the response's text says they follow (``_media``).
- **An assistant message** is one ``model`` Content, in its own order: Reasoning of
  this protocol as a ``{"text", "thought": true}`` part with its
  ``thoughtSignature`` (the state); Text as a ``text`` part; each finished ToolCall
  as a ``functionCall`` part ``{"id", "name", "args"}``. A ProviderBlock of this
  protocol is either a signature that rode on the part before it
  (``{"thoughtSignature": ...}``, put back on that text part, or on the call it
  names with ``"call"``), or a whole part the model sent that nacelle does not model
  (``{"part": {...}}``: code execution, an image the model made), replayed as it
  came. Gemini 3 refuses a conversation whose function calls lost their signatures
  ("Function call is missing a thought_signature",
  https://ai.google.dev/gemini-api/docs/thought-signatures), so they go back on the
  exact parts they came on. Reasoning and blocks of another protocol, Finish parts,
  unfinished calls and their results are not sent.
- **Call ids.** The API may leave ``functionCall.id`` out; the stream then makes one
  (``stream.py``), and it is sent back on the call and its response — ``id`` is a
  field of both in the request (``FunctionCall.id``, ``FunctionResponse.id``), so the
  pairing is explicit, as on every other wire.
- **Tools** are one ``{"functionDeclarations": [...]}`` tool; each declaration's
  ``parametersJsonSchema`` is the tool's JSON Schema as it is. The API takes JSON
  Schema there (``FunctionDeclaration.parametersJsonSchema``: "Describes the
  parameters to the function in JSON Schema format", exclusive with the OpenAPI
  ``parameters``); the OpenAPI subset would need the strict form
  (``output.schema.for_gemini``), which makes every optional argument a required
  nullable one and so changes what the model sends a tool.
- **The provider's own tools** (``nacelle.native``) are their own ``Tool`` entries
  beside the declarations: ``web_search`` is ``{"googleSearch": {}}``
  (https://ai.google.dev/gemini-api/docs/google-search), ``web_fetch``
  ``{"urlContext": {}}`` (https://ai.google.dev/gemini-api/docs/url-context),
  ``code_execution`` ``{"codeExecution": {}}``
  (https://ai.google.dev/gemini-api/docs/code-execution); none takes options.
- **Tool choice** is ``toolConfig.functionCallingConfig``: ``mode`` ``AUTO``,
  ``ANY`` (``"required"``), ``NONE``, or ``ANY`` with ``allowedFunctionNames`` of
  one tool (a forced tool), as the SDK's ``FunctionCallingConfigMode``.
- **Thinking** is ``generationConfig.thinkingConfig``: a budget is
  ``thinkingBudget``; ``Effort.NONE`` is ``thinkingBudget: 0``; another effort is
  ``thinkingLevel`` (``minimal``, ``low``, ``medium``, ``high``; xhigh and max are
  ``high``), which Gemini 3 takes, or for a Gemini 1 or 2 model, which takes no
  level, a budget (512, 1,024, 8,192 and 24,576 tokens from minimal to high); ``show`` is ``includeThoughts: true`` — without
  it the API sends no thought text, only signatures.
- **Structured output** (a Request whose ``output`` mode is "native") is
  ``responseMimeType: "application/json"`` with ``responseJsonSchema``: the JSON
  Schema as it is (``GenerationConfig.responseJsonSchema``, which takes JSON Schema's
  ``properties``, ``required``, ``additionalProperties``, ``anyOf``, ``$ref`` and
  the rest of its documented subset, https://ai.google.dev/gemini-api/docs/structured-output),
  so the answer comes back in the schema's own shape; the OpenAPI ``responseSchema``
  would need the strict form (``output.schema.for_gemini``, what the compatible
  endpoint sends) and cannot say ``additionalProperties``. The full schema is
  checked client-side either way.
- **Settings** are ``generationConfig``'s ``temperature``, ``topP``, ``topK``,
  ``stopSequences`` and ``seed``; ``maxOutputTokens`` only when the Agent chose a
  cap. ``extra_body`` is merged over the body last.

May import: the standard library, nacelle's core and ``backends._wire_cache``. Never
``requests``.
"""

from __future__ import annotations

import copy
import json
import re
from typing import AbstractSet, Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ..._loggers import get_logger
from ...backend import DEFAULT_MAX_TOKENS, CallProfile, Effort, Request
from ...errors import ConfigError, Unsupported
from ...messages import (
    Document, Finish, Image, Message, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult,
)
from ...native import is_native
from ...sse import parse_json
from .._media import ALL_DOCUMENTS, Takes, follow_parts, joined, split
from .._wire_cache import Body, WireCache, encode_items, split_frame
from .._wire_cache import dumps as _bytes

__all__ = ["PROTOCOL", "TAKES", "contents", "encode_body", "media_inside", "to_wire"]

logger = get_logger(__name__)

#: The ``Reasoning.protocol`` / ``ProviderBlock.protocol`` of this backend.
PROTOCOL = "gemini"

#: Images and both document types, inside tool results too (Gemini 3 and later).
TAKES = Takes(images=True, documents=ALL_DOCUMENTS, tool_media=True)
#: The same, a tool's media following the responses (Gemini 1 and 2).
TAKES_AFTER = Takes(images=True, documents=ALL_DOCUMENTS, tool_media=False)

_BEFORE_3 = re.compile(r"gemini-[12][.-]")


def media_inside(model: str) -> bool:
    """Whether ``model`` takes a tool's media inside its ``functionResponse``: the
    multimodal function responses came with Gemini 3, so a Gemini 1 or 2 model (named
    so, a ``models/`` or ``tunedModels/`` prefix aside) gets them after the responses;
    any other name, the newer models' way."""
    return not _gemini_1_or_2(model)


def _gemini_1_or_2(model: str) -> bool:
    """Whether ``model`` names a Gemini 1 or 2 model (a resource prefix aside)."""
    return _BEFORE_3.match(model.rsplit("/", 1)[-1]) is not None

MCP_HINT = ("the Gemini backend sends no server-side MCP servers; connect the server "
            "locally with nacelle.mcp.connect_stdio() or nacelle.mcp.connect_http() and "
            "pass its .tools() to the Agent")

#: An effort as a budget, for Gemini 2.5, which takes budgets only (up to 24,576
#: tokens on Flash, 32,768 on Pro: https://ai.google.dev/gemini-api/docs/thinking).
_BUDGETS = {Effort.MINIMAL: 512, Effort.LOW: 1024, Effort.MEDIUM: 8192, Effort.HIGH: 24576,
            Effort.XHIGH: 24576, Effort.MAX: 24576}
_LEVELS = {Effort.MINIMAL: "minimal", Effort.LOW: "low", Effort.MEDIUM: "medium",
           Effort.HIGH: "high", Effort.XHIGH: "high", Effort.MAX: "high"}


def to_wire(request: Request, messages: Sequence[Message], *, model: str = "") -> Dict[str, Any]:
    """The JSON body of one ``streamGenerateContent`` request for ``messages``.

    Raises :class:`~nacelle.errors.Unsupported` for MCP servers and native tools,
    and :class:`~nacelle.errors.ConfigError` for a conversation that cannot be
    expressed, naming the message.
    """
    if request.mcp:
        raise Unsupported("gemini", "MCP servers", MCP_HINT)
    body: Dict[str, Any] = {"contents": contents(
        messages, TAKES if media_inside(model) else TAKES_AFTER)}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    tools = sorted(request.tools, key=lambda t: t.name)
    functions = [_declaration(t) for t in tools if not is_native(t)]
    entries = [{"functionDeclarations": functions}] if functions else []
    entries += [_native(t) for t in tools if is_native(t)]
    if entries:
        body["tools"] = entries
    if functions:
        choice = _tool_config(request)
        if choice:
            body["toolConfig"] = {"functionCallingConfig": choice}
    config = _generation(request, model)
    if config:
        body["generationConfig"] = config
    extra = request.settings.extra_body
    if extra:
        body.update(copy.deepcopy(dict(extra)))
    return body


#: The provider's own tools (``nacelle.native``) as Gemini's ``Tool`` entries.
NATIVE = {"web_search": "googleSearch", "web_fetch": "urlContext",
          "code_execution": "codeExecution"}


def _native(tool: Any) -> Dict[str, Any]:
    field = NATIVE.get(getattr(tool, "kind", ""))
    if field is None:
        raise Unsupported("gemini", f"the native {getattr(tool, 'kind', tool.name)} tool")
    return {field: {}}


def _declaration(tool: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parametersJsonSchema"] = copy.deepcopy(tool.schema)
    return out


def _tool_config(request: Request) -> Dict[str, Any]:
    settings = request.settings
    if settings.forced_tool is not None:
        return {"mode": "ANY", "allowedFunctionNames": [settings.forced_tool]}
    choice = settings.tool_choice
    if choice == "required":
        return {"mode": "ANY"}
    if choice == "none":
        return {"mode": "NONE"}
    if choice == "auto":
        return {"mode": "AUTO"}
    return {}


def _generation(request: Request, model: str) -> Dict[str, Any]:
    config: Dict[str, Any] = {}
    settings = request.settings
    for name, key in (("temperature", "temperature"), ("top_p", "topP"), ("top_k", "topK"),
                      ("seed", "seed")):
        value = getattr(settings, name)
        if value is not None:
            config[key] = value
    if settings.stop:
        config["stopSequences"] = list(settings.stop)
    if request.max_tokens != DEFAULT_MAX_TOKENS:
        config["maxOutputTokens"] = request.max_tokens
    thinking = _thinking(request, model)
    if thinking:
        config["thinkingConfig"] = thinking
    output = request.output
    if output is not None and output.mode == "native":
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = copy.deepcopy(output.schema)
    return config


def _thinking(request: Request, model: str) -> Dict[str, Any]:
    thinking = request.thinking
    out: Dict[str, Any] = {}
    if thinking.budget:
        out["thinkingBudget"] = thinking.budget
    elif thinking.effort is Effort.NONE:
        out["thinkingBudget"] = 0
    elif thinking.effort is not None and _gemini_1_or_2(model):
        out["thinkingBudget"] = _BUDGETS[thinking.effort]  # Gemini 2 has no levels
    elif thinking.effort is not None:
        out["thinkingLevel"] = _LEVELS[thinking.effort]
    if thinking.show and out.get("thinkingBudget") != 0:
        out["includeThoughts"] = True
    return out


def contents(messages: Sequence[Message], takes: Takes = TAKES) -> List[Dict[str, Any]]:
    """The ``contents`` of a conversation (see the module docstring); ``takes`` says
    whether a tool's media go inside its response or after the responses."""
    unsent = _unfinished(messages)
    out: List[Dict[str, Any]] = []
    for position, message in enumerate(messages):
        out.extend(_content(message, position, unsent, takes))
    return out


def _content(message: Message, position: int, unsent: AbstractSet[str],
             takes: Takes) -> List[Dict[str, Any]]:
    """The ``contents`` entry of one message (none for a model message with nothing)."""
    if message.role is Role.ASSISTANT:
        parts = _model(message, position)
        return [{"role": "model", "parts": parts}] if parts else []
    return [{"role": "user", "parts": _user(message, position, unsent, takes)}]


def _unfinished(messages: Sequence[Message]) -> FrozenSet[str]:
    """The ids of the calls left unfinished: their results are not sent."""
    return frozenset(p.id for m in messages for p in m.parts
                     if isinstance(p, ToolCall) and not p.finished)


# -- the body as bytes, each message encoded once -----------------------------------

def encode_body(request: Request, messages: Sequence[Message], *, model: str = "",
                cache: Optional[WireCache] = None) -> Body:
    """:func:`to_wire`'s body as the bytes the transport sends, exactly
    ``json.dumps(to_wire(...), ensure_ascii=False, separators=(",", ":"))`` in UTF-8,
    with each message's ``contents`` entry encoded once per ``cache`` and a run's
    entries so far reused whole (``_wire_cache.encode_items``); without a cache, that
    very ``json.dumps``. A result whose call was left unfinished is not sent, so a
    message holding one is encoded again each turn.
    """
    extra = request.settings.extra_body
    if (cache is None or request.profile is not CallProfile.AGENT_TURN
            or (extra and "contents" in extra)):
        return Body((_bytes(to_wire(request, messages, model=model)),))
    takes = TAKES if media_inside(model) else TAKES_AFTER
    head, _, tail = split_frame(to_wire(request, (), model=model), key="contents")
    return encode_items(cache, request, messages, (PROTOCOL, takes), (head, tail),
                        lambda message, position: _plain(message, position, takes),
                        lambda message, position, unsent: _again(message, position, unsent,
                                                                 takes),
                        _unfinished)


def _plain(message: Message, position: int,
           takes: Takes) -> Tuple[Tuple[bytes, ...], Optional[FrozenSet[str]]]:
    """A message's entry encoded with every result sent, and the ids of its results
    (None for none): what the per-message table keeps."""
    results = frozenset(p.id for p in message.parts if isinstance(p, ToolResult))
    return _again(message, position, frozenset(), takes), results or None


def _again(message: Message, position: int, unsent: AbstractSet[str],
           takes: Takes) -> Tuple[bytes, ...]:
    return tuple(map(_bytes, _content(message, position, unsent, takes)))


def _user(message: Message, position: int, unsent: AbstractSet[str],
          takes: Takes) -> List[Dict[str, Any]]:
    results: List[Dict[str, Any]] = []
    content: List[Dict[str, Any]] = []
    followed: List[Tuple[ToolResult, Sequence[Any]]] = []
    for part in message.parts:
        if isinstance(part, ToolResult):
            if part.id not in unsent:
                response, after = _response(part, takes)
                results.append(response)
                followed.append((part, after))
        elif isinstance(part, (Text, Image, Document)):
            content.append(_input(part))
        elif isinstance(part, (Reasoning, ProviderBlock, Finish)):
            continue
        else:
            raise ConfigError(
                f"message {position}: a user message cannot carry a {type(part).__name__}")
    results += [_input(p) for p in follow_parts(followed)]
    return results + content or [{"text": ""}]


def _input(part: Any) -> Dict[str, Any]:
    if isinstance(part, Text):
        return {"text": part.text}
    return {"inlineData": {"mimeType": part.media_type, "data": part.data}}


def _response(result: ToolResult, takes: Takes) -> Tuple[Dict[str, Any], Sequence[Any]]:
    """A ``functionResponse`` part (the text under ``output``, ``error`` when it
    failed; the tool's media as ``inlineData`` parts inside it where the model takes
    them there) and the media to send after the responses instead."""
    text = result.result
    inline, after = split(result, takes) if result.content else ((), ())
    if after:
        text = joined(inline)  # says which media follow
    response: Dict[str, Any] = {"id": result.id, "name": result.name,
                                "response": {"error" if result.failed else "output": text}}
    media = [_input(p) for p in inline if not isinstance(p, Text)]
    if media:
        response["parts"] = media
    return {"functionResponse": response}, after


def _model(message: Message, position: int) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    calls: Dict[str, Dict[str, Any]] = {}
    for part in message.parts:
        if isinstance(part, Text):
            out.append({"text": part.text})
        elif isinstance(part, Reasoning):
            if part.protocol == PROTOCOL:
                thought: Dict[str, Any] = {"text": part.text, "thought": True}
                if part.state:
                    thought["thoughtSignature"] = part.state
                out.append(thought)
        elif isinstance(part, ToolCall):
            if part.finished:
                call = {"functionCall": {"id": part.id, "name": part.name,
                                         "args": _args(part, position)}}
                calls[part.id] = call
                out.append(call)
        elif isinstance(part, ProviderBlock):
            if part.protocol == PROTOCOL:
                _block(part.data, out, calls, position)
        elif isinstance(part, Finish):
            continue
        else:
            raise ConfigError(
                f"message {position}: an assistant message cannot carry a {type(part).__name__}")
    return out


def _args(call: ToolCall, position: int) -> Any:
    """A call's input as the ``args`` object it came as (blank is ``{}``)."""
    if not call.input.strip():
        return {}
    try:
        value = parse_json(call.input)
    except ValueError:
        raise ConfigError(f"message {position}: the input of call {call.id!r} is not "
                          f"JSON, which Gemini's functionCall.args must be") from None
    if not isinstance(value, dict):
        raise ConfigError(f"message {position}: the input of call {call.id!r} is not a "
                          f"JSON object, which Gemini's functionCall.args must be")
    return value


def _block(data: str, out: List[Dict[str, Any]], calls: Dict[str, Dict[str, Any]],
           position: int) -> None:
    """A ProviderBlock back onto the wire: a signature onto its part, or a part."""
    try:
        value: Optional[Any] = parse_json(data)
    except ValueError:
        value = None
    if isinstance(value, dict) and isinstance(value.get("part"), dict):
        out.append(value["part"])
        return
    signature = value.get("thoughtSignature") if isinstance(value, dict) else None
    if not isinstance(signature, str):
        raise ConfigError(f"message {position}: {PROTOCOL} provider block must hold a "
                          f"part or a thoughtSignature; got {data[:60]!r}")
    call = value.get("call") if isinstance(value, dict) else None
    if isinstance(call, str):
        target = calls.get(call)
        if target is not None:
            target["thoughtSignature"] = signature
        return  # the call was not sent (unfinished): its signature goes with it
    if out and "text" in out[-1] and not out[-1].get("thought"):
        out[-1]["thoughtSignature"] = signature
    else:
        out.append({"text": "", "thoughtSignature": signature})


def dumps(value: Any) -> str:
    """Compact JSON, as the stream keeps provider state."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
