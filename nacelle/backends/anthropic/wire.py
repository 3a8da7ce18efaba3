"""The Anthropic Messages request body, built without I/O: :func:`to_wire`.

``to_wire(request, messages, model=...)`` turns a :class:`~nacelle.backend.Request`
and the conversation so far into the JSON body of ``POST /v1/messages``;
:func:`count_tokens_body` is the same body for ``/v1/messages/count_tokens`` and
:func:`betas` the ``anthropic-beta`` names the body needs. Everything here is pure
and tested on plain values; ``__init__.py`` beside it does the sending, of
:func:`encode_body`'s bytes: the same body, each message encoded once a run.

Choices made where the wire leaves room:

- **Prompt caching is not a knob.** A tool-using run always sends requests that
  share a prefix, which is exactly where a cache write pays for itself, so every
  body carries breakpoints: on the last tool, on the system block, on the newest
  cacheable conversation block, and on the end of the conversation the previous
  request sent (the message before the last assistant message). The fourth one
  costs nothing when that prefix is already cached and guarantees a hit when a turn
  added more than the 20 blocks the API looks back from a breakpoint. Never more
  than the API's limit of four.
- **Breakpoints follow the request's** :class:`~nacelle.backend.CallProfile`. Those
  four are for ``AGENT_TURN``, a request whose prefix the next one sends again. A
  cache write costs 1.25 times plain input, and a read happens only at a
  breakpoint that ends a prefix already written. So a ``COMPACTION`` request marks
  the system block and the last tool only: when it shares the run's system prompt
  and tools it reads them from the cache, and it marks nothing in the
  conversation, which is the part being replaced — an entry there would be written
  and never read. ``TITLE``, ``EVALUATION`` and ``PROBE`` requests are one-shot and
  mark nothing, so they write nothing.
- **Thinking** is adaptive unless told otherwise. ``Effort.NONE`` disables it,
  ``Effort.MINIMAL`` (which Anthropic does not have) becomes ``low``, and a budget
  selects manual thinking. ``show`` asks for ``display: summarized``; without it
  the field is left out so every model gets its own default (the loop drops the
  THINKING events either way).
- **Replay.** Reasoning and provider blocks produced by this protocol go back
  exactly as they came, in order; those of another protocol are dropped (their
  signatures would not verify here). Tool-call input is sent parsed from the raw
  JSON with its key order kept, so the cached prefix stays byte-stable; input the
  model wrote as invalid JSON (already answered with a failed result) goes back as
  ``{}``. A call cut off mid-input, ``Finish`` parts and empty text (which the API
  rejects) are never sent. Tool results come first in their user message, and
  neighbouring messages of the same role are merged.
- **Structured output** (a Request whose ``output`` mode is "native") is
  ``output_config.format: {"type": "json_schema", "schema": ...}`` beside any effort
  in the same ``output_config`` — the field structured outputs moved to from the
  beta's top-level ``output_format`` (platform.claude.com/docs/en/build-with-claude/
  structured-outputs). The schema is ``output.schema.for_anthropic``'s subset; the
  loop validates the answer against the full one. No beta header is needed.
- **Media.** An Image is an ``image`` block with a ``base64`` source; a Document a
  ``document`` block, a PDF with a ``base64`` source and plain text with a ``text``
  source holding the decoded text (the API's ``Base64PDFSource`` and
  ``PlainTextSource``), its ``title`` when it has one
  (platform.claude.com/docs/en/build-with-claude/pdf-support). A ToolResult with
  media sends ``content`` as a list of ``text``, ``image`` and ``document`` blocks in
  the tool's order — the API takes all three inside a ``tool_result``
  (platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls; the
  ``ToolResultBlockParam.content`` union of anthropic-sdk-python); one without media
  sends its text as the plain string it always did, so old cached prefixes still
  match.
- **Tool input streams as the model writes it.** Every local tool is sent with
  ``"eager_input_streaming": true``, the per-tool switch of fine-grained tool
  streaming, generally available with no beta header (the older
  ``fine-grained-tool-streaming-2025-05-14`` beta header is no longer needed):
  https://platform.claude.com/docs/en/agents-and-tools/tool-use/fine-grained-tool-streaming,
  and ``eager_input_streaming`` in the SDK's ``ToolParam``. Without it the API holds
  each parameter back until it has checked it is valid JSON, so a long argument (a
  file to write) arrives in one burst at the end and the stream's TOOL_INPUT events
  show nothing while it is written. The price the docs name is that the input is no
  longer checked: it may be invalid or, at a ``max_tokens`` stop, partial — which the
  stream accumulator already treats as a call that fails (or is unfinished), never as
  a crash. MCP toolsets are the provider's to run, and take no such field.
- **Client tools Anthropic defines** (a tool with an ``anthropic_type``, such as
  ``toolsets.memory``'s ``memory_20250818``) are sent as that type and the tool's
  name, without a schema; the run executes their calls as any local tool's
  (https://platform.claude.com/docs/en/agents-and-tools/tool-use/memory-tool).
- **The provider's own tools** (``nacelle.native``) are sent as their server tool
  types (``NATIVE_TYPES``), after the local tools, with the beta header each still
  needs (``NATIVE_BETAS``); a web fetch asks for citations. Their calls and results
  come back as provider blocks, replayed as they came.
- **Settings** (``request.settings``, a :class:`~nacelle.backend.ModelSettings`) are the
  Messages API's own fields (platform.claude.com/docs/en/api/messages/create; the SDK's
  ``MessageCreateParams``): ``temperature``, ``top_p``, ``top_k``, ``stop`` as
  ``stop_sequences``; ``tool_choice`` as ``{"type": "auto"|"any"|"none"}`` ("required"
  is ``any``) or ``{"type": "tool", "name": ...}``, and ``parallel_tool_calls=False`` as
  ``disable_parallel_tool_use: true`` inside it (``auto`` when no choice was given;
  never on ``none``, whose type has no such field). Both go only on a request with
  tools. There is no ``seed``. ``extra_body`` is merged over the body last.
- **Cache lifetime.** ``Cache(ttl="1h")`` puts ``"ttl": "1h"`` in every breakpoint's
  ``cache_control`` (one lifetime for all, so the rule that longer entries come first
  holds); "5m" sends the plain marker, the API's default
  (platform.claude.com/docs/en/build-with-claude/prompt-caching, "1-hour cache
  duration").
- **Tool search** (``nacelle.tool_search``): a deferred tool carries
  ``"defer_loading": true`` beside the provider's search tool (``SEARCH_TYPES``, with
  ``SEARCH_BETA``); the list sent is the same every turn. A server-side MCP toolset of
  such a request is deferred too (``default_config.defer_loading``: nacelle cannot
  count its tools, and the run asked to search them). A tool a local search loaded
  goes after the tools sent before it (``send_order``).
- **Context editing** (``compaction.context_edits``) is ``context_management.edits``
  (``_edit``), with the ``context-management-2025-06-27`` beta header for the clearing
  edits and ``compact-2026-01-12`` for compaction; a ``compaction`` block the API
  wrote goes back as it came, like any provider block.
- ``Reasoning.state`` holds the signature of a ``thinking`` block; a
  ``redacted_thinking`` block is kept whole, as its JSON object, in ``state`` (a
  signature is base64 and never starts with ``{``, so the two cannot be confused).

Outer-ring module: imports the standard library, nacelle's core and
``backends._wire_cache`` (the bytes of the conversation so far) only.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..._loggers import get_logger
from ...backend import CallProfile, Effort, MCPServer, Request, Thinking
from ...errors import ConfigError
from ...native import is_native
from ...messages import (
    Document, Image, Message, Part, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult,
)
from ...output.schema import for_anthropic
from ...sse import parse_json
from .._media import ALL_DOCUMENTS, Takes, document_text, split, too_large
from .._wire_cache import Body, Run, WireCache, assemble, dumps, grow, split_frame

__all__ = [
    "MCP_BETA",
    "MIN_BUDGET",
    "PROTOCOL",
    "betas",
    "count_tokens_body",
    "encode_body",
    "to_wire",
]

logger = get_logger(__name__)

PROTOCOL = "anthropic"
MCP_BETA = "mcp-client-2025-11-20"
MIN_BUDGET = 1024
DEFAULT_MODEL = "claude-opus-5"

_CACHE = {"type": "ephemeral"}
_CACHE_1H = {"type": "ephemeral", "ttl": "1h"}
_CHOICES = {"auto": "auto", "required": "any", "none": "none"}
# Blocks the API accepts a cache_control marker on (thinking blocks and server-tool
# blocks are cached as part of a later prefix, but cannot carry a marker).
_CACHEABLE = frozenset({"text", "image", "document", "tool_use", "tool_result"})

#: Images and both document types, inside tool results too (see the module docstring).
#: One image may be 5 MB, counted on its base64 text: "Maximum image size: 5MB per
#: image" (platform.claude.com/docs/en/build-with-claude/vision, API limits), and the
#: API's refusal measures the field ("messages.2.content.0.image.source.base64: image
#: exceeds 5 MB maximum: 8259148 bytes > 5242880 bytes", anthropics/claude-code#19631).
TAKES = Takes(images=True, documents=ALL_DOCUMENTS, tool_media=True,
              max_image_base64=5 * 1024 * 1024)

_EFFORTS = {
    Effort.MINIMAL: "low",
    Effort.LOW: "low",
    Effort.MEDIUM: "medium",
    Effort.HIGH: "high",
    Effort.XHIGH: "xhigh",
    Effort.MAX: "max",
}


def to_wire(
    request: Request, messages: Sequence[Message], *, model: str = DEFAULT_MODEL
) -> Dict[str, Any]:
    """The ``/v1/messages`` body for one streamed turn of ``request``.

    ``messages`` is the conversation so far (the request's own ``messages`` are
    the run's starting point; the loop passes the grown conversation). Nothing
    given is mutated; the result shares no mutable value with the input except
    the tools' schemas, which it only reads.
    """
    body: Dict[str, Any] = {"model": model, "max_tokens": request.max_tokens}
    body.update(_common(request, messages))
    body["stream"] = True
    body.update(_settings(request))
    extra = request.settings.extra_body
    if extra:
        body.update(copy.deepcopy(extra))
    return body


def _settings(request: Request) -> Dict[str, Any]:
    """The body fields of ``request.settings`` (see the module docstring)."""
    settings = request.settings
    out: Dict[str, Any] = {}
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(settings, name)
        if value is not None:
            out[name] = value
    if settings.stop:
        out["stop_sequences"] = list(settings.stop)
    if not (request.tools or request.mcp):
        return out
    choice: Optional[Dict[str, Any]] = None
    if settings.tool_choice is not None:
        forced = settings.forced_tool
        choice = ({"type": "tool", "name": forced} if forced is not None else
                  {"type": _CHOICES[settings.tool_choice]})
    if settings.parallel_tool_calls is False:
        choice = choice if choice is not None else {"type": "auto"}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    if choice is not None:
        out["tool_choice"] = choice
    return out


def count_tokens_body(
    request: Request, messages: Sequence[Message], *, model: str = DEFAULT_MODEL
) -> Dict[str, Any]:
    """The ``/v1/messages/count_tokens`` body: :func:`to_wire` without
    ``max_tokens`` and ``stream``."""
    body: Dict[str, Any] = {"model": model}
    body.update(_common(request, messages))
    return body


def betas(request: Request) -> List[str]:
    """The ``anthropic-beta`` names ``request`` needs (empty for most requests)."""
    names = [MCP_BETA] if request.mcp else []
    kinds = {getattr(tool, "kind", "") for tool in request.tools if is_native(tool)}
    names.extend(NATIVE_BETAS[kind] for kind in sorted(kinds) if kind in NATIVE_BETAS)
    edits = {edit.kind for edit in request.context_edits}
    if edits - {"compact"}:
        names.append(CONTEXT_BETA)
    if "compact" in edits:
        names.append(COMPACT_BETA)
    return names


# -- the body -----------------------------------------------------------------------

def _marker(request: Request) -> Dict[str, Any]:
    """A breakpoint's ``cache_control``, with the request's lifetime."""
    cache = request.cache
    return dict(_CACHE_1H if cache is not None and cache.ttl == "1h" else _CACHE)


def _common(request: Request, messages: Sequence[Message]) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    profile = request.profile
    prefix = profile is CallProfile.AGENT_TURN or profile is CallProfile.COMPACTION
    if request.system:
        body["system"] = [{"type": "text", "text": request.system}]
        if prefix:
            body["system"][0]["cache_control"] = _marker(request)
    wire_messages = _messages(messages)
    if profile is CallProfile.AGENT_TURN:
        _mark_conversation(wire_messages, _marker(request))
    body["messages"] = wire_messages
    searching = any(getattr(t, "kind", "") == "tool_search" for t in request.tools)
    tools = _tools(request.tools) + [_toolset(server, searching) for server in request.mcp]
    if tools:
        if prefix:
            tools[-1]["cache_control"] = _marker(request)
        body["tools"] = tools
    if request.mcp:
        body["mcp_servers"] = [_mcp_server(server) for server in request.mcp]
    if request.context_edits:
        body["context_management"] = {"edits": [_edit(e) for e in request.context_edits]}
    body.update(_thinking(request.thinking))
    output = request.output
    if output is not None and output.mode == "native":
        config = body.setdefault("output_config", {})
        config["format"] = {"type": "json_schema", "schema": for_anthropic(output.schema)}
    return body


#: The beta headers of context editing and of server-side compaction (their pages,
#: cited in ``nacelle.compaction.edits``).
CONTEXT_BETA = "context-management-2025-06-27"
COMPACT_BETA = "compact-2026-01-12"


def _edit(edit: Any) -> Dict[str, Any]:
    """One ``context_management.edits`` entry (the SDK's ``BetaClearToolUses20250919Edit``,
    ``BetaClearThinking20251015Edit`` and ``BetaCompact20260112Edit``); a field left
    None is left to the API's default."""
    if edit.kind == "clear_tool_uses":
        out: Dict[str, Any] = {"type": "clear_tool_uses_20250919"}
        if edit.trigger is not None:
            out["trigger"] = {"type": "input_tokens", "value": edit.trigger}
        if edit.keep is not None:
            out["keep"] = {"type": "tool_uses", "value": edit.keep}
        if edit.clear_at_least is not None:
            out["clear_at_least"] = {"type": "input_tokens", "value": edit.clear_at_least}
        if edit.exclude_tools:
            out["exclude_tools"] = list(edit.exclude_tools)
        if edit.clear_inputs:
            out["clear_tool_inputs"] = True
        return out
    if edit.kind == "clear_thinking":
        out = {"type": "clear_thinking_20251015"}
        if edit.keep == "all":
            out["keep"] = "all"
        elif edit.keep is not None:
            out["keep"] = {"type": "thinking_turns", "value": edit.keep}
        return out
    out = {"type": "compact_20260112"}
    if edit.trigger is not None:
        out["trigger"] = {"type": "input_tokens", "value": edit.trigger}
    if edit.instructions is not None:
        out["instructions"] = edit.instructions
    return out


def _thinking(thinking: Thinking) -> Dict[str, Any]:
    if thinking.effort is Effort.NONE:
        if thinking.budget:
            raise ConfigError(
                "Effort.NONE turns thinking off; a thinking budget cannot be given with it"
            )
        return {"thinking": {"type": "disabled"}}
    if thinking.budget:
        if thinking.budget < MIN_BUDGET:
            raise ConfigError(
                f"Anthropic needs a thinking budget of at least {MIN_BUDGET} tokens,"
                f" got {thinking.budget}"
            )
        config: Dict[str, Any] = {"type": "enabled", "budget_tokens": thinking.budget}
    else:
        config = {"type": "adaptive"}
    if thinking.show:
        config["display"] = "summarized"
    out: Dict[str, Any] = {"thinking": config}
    if thinking.effort is not None:
        out["output_config"] = {"effort": _EFFORTS[thinking.effort]}
    return out


#: The server tool types ``nacelle.native`` kinds are sent as (see ``native.py``).
NATIVE_TYPES = {"web_search": "web_search_20250305", "web_fetch": "web_fetch_20250910",
                "code_execution": "code_execution_20250825"}
#: The beta headers those of them still in beta need (the web fetch and code
#: execution tool pages, cited in ``nacelle.native``).
NATIVE_BETAS = {"web_fetch": "web-fetch-2025-09-10", "code_execution": "code-execution-2025-08-25",
                "tool_search": "advanced-tool-use-2025-11-20"}  # SEARCH_BETA


#: Anthropic's tool search tools, by ``ToolSearch.variant``: type and name.
SEARCH_TYPES = {"bm25": ("tool_search_tool_bm25_20251119", "tool_search_tool_bm25"),
                "regex": ("tool_search_tool_regex_20251119", "tool_search_tool_regex")}
#: The beta header tool search is documented with (the tool search tool page).
SEARCH_BETA = NATIVE_BETAS["tool_search"]


def send_order(tool: Any) -> Tuple[int, str]:
    """Where a tool goes in the list sent: by name, but a tool a local search loaded
    after every tool sent before it (``loaded_at``), so the cached prefix holds."""
    return getattr(tool, "loaded_at", 0), tool.name


def _native(tool: Any) -> Dict[str, Any]:
    if tool.kind == "tool_search":
        kind, name = SEARCH_TYPES[tool.option("variant", "bm25")]
        return {"type": kind, "name": name}
    entry: Dict[str, Any] = {"type": NATIVE_TYPES[tool.kind], "name": tool.kind}
    for name, value in tool.options:
        if name == "max_content_tokens" or name == "max_uses":
            entry[name] = value
        elif name in ("allowed_domains", "blocked_domains"):
            entry[name] = list(value)
    if tool.kind == "web_fetch":
        entry["citations"] = {"enabled": True}  # off by default for fetch; search always cites
    return entry


def _tools(tools: Sequence[Any]) -> List[Dict[str, Any]]:
    # Sorted by name so that the same tool set always makes the same cached prefix,
    # whatever order the caller listed it in; the provider's own tools follow.
    out = []
    natives = sorted((t for t in tools if is_native(t)), key=lambda t: t.name)
    for tool in sorted((t for t in tools if not is_native(t)), key=send_order):
        kind = getattr(tool, "anthropic_type", None)
        if isinstance(kind, str) and kind:
            # A client tool Anthropic defines (the memory tool): its type and name say
            # it all; the model knows its input shape, and the run still runs it.
            out.append({"type": kind, "name": tool.name})
            continue
        entry: Dict[str, Any] = {"name": tool.name}
        if tool.description:
            entry["description"] = tool.description
        entry["input_schema"] = tool.schema
        entry["eager_input_streaming"] = True  # see the module docstring
        if getattr(tool, "defer_loading", False) is True:
            entry["defer_loading"] = True
        out.append(entry)
    return out + [_native(tool) for tool in natives]


def _mcp_server(server: MCPServer) -> Dict[str, Any]:
    entry = {"type": "url", "url": server.url, "name": server.name}
    if server.authorization_token:
        entry["authorization_token"] = server.authorization_token
    return entry


def _toolset(server: MCPServer, deferred: bool = False) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"type": "mcp_toolset", "mcp_server_name": server.name}
    if server.allowed_tools is not None:
        # An allowlist: everything off by default, the named tools switched on.
        entry["default_config"] = {"enabled": False}
        entry["configs"] = {name: {"enabled": True} for name in server.allowed_tools}
    if deferred:  # a run that searches its tools: the server's are found the same way
        entry.setdefault("default_config", {})["defer_loading"] = True
    return entry


# -- messages -----------------------------------------------------------------------

# Plain strings, looked up once: an enum member's .value is a descriptor call, and
# this runs for every message of every turn.
_USER, _ASSISTANT = Role.USER.value, Role.ASSISTANT.value
_ROLES = {Role.USER: _USER, Role.ASSISTANT: _ASSISTANT}


def _messages(messages: Sequence[Message]) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for message in messages:
        role = _ROLES[message.role]
        content = [block for block in map(_block, message.parts) if block is not None]
        if not content:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})
    for entry in out:
        content = entry["content"]
        if entry["role"] == _USER and len(content) > 1:
            # The API wants the answers to the previous turn's calls before anything
            # else the user says; sorted() is stable, so each group keeps its order.
            content.sort(key=_not_a_result)
    return out


def _not_a_result(block: Dict[str, Any]) -> bool:
    return block.get("type") != "tool_result"


def _block(part: Any) -> Optional[Dict[str, Any]]:
    if isinstance(part, Text):
        if not part.text:
            return None
        cited = _citations(part) if part.citations else None
        if cited:
            return {"type": "text", "text": part.text, "citations": cited}
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        return _image(part)
    if isinstance(part, Document):
        return _document(part)
    if isinstance(part, ToolCall):
        if not part.finished:
            return None
        return {"type": "tool_use", "id": part.id, "name": part.name,
                "input": _tool_input(part)}
    if isinstance(part, ToolResult):
        block: Dict[str, Any] = {"type": "tool_result", "tool_use_id": part.id}
        if part.content:
            inline, _ = split(part, TAKES)  # nothing follows: media go inside
            content = [_block(p) for p in inline]
            if content:
                block["content"] = content
        elif part.result:
            block["content"] = part.result
        block["is_error"] = part.failed
        return block
    if isinstance(part, Reasoning):
        return _reasoning(part) if part.protocol == PROTOCOL else None
    if isinstance(part, ProviderBlock):
        if part.protocol != PROTOCOL:
            return None
        try:
            data = parse_json(part.data)
        except ValueError:
            raise ConfigError(
                "an anthropic ProviderBlock does not hold a JSON object; it cannot be"
                " replayed (was the conversation edited by hand?)"
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise ConfigError("an anthropic ProviderBlock must hold a JSON object with a type")
        return data
    return None  # Finish: recorded for readers, never sent.


#: The fields of a web search citation the request takes back (the SDK's
#: ``CitationWebSearchResultLocationParam``: cited_text, encrypted_index, title, url).
_WEB_CITATION = ("type", "cited_text", "encrypted_index", "title", "url")


def _citations(part: Text) -> List[Dict[str, Any]]:
    """The web search citations of a Text, as Anthropic wrote them: the docs ask for
    their ``encrypted_index`` to be "passed back for multi-turn conversations"
    (platform.claude.com/docs/en/agents-and-tools/tool-use/web-search-tool). Citations
    of documents point at a document index of the request that made them, and those of
    another protocol mean nothing here: the text goes back without them."""
    out = []
    for citation in part.citations:
        try:
            raw = parse_json(citation.state) if citation.state.startswith("{") else None
        except ValueError:
            raw = None
        if isinstance(raw, dict) and raw.get("type") == "web_search_result_location":
            out.append({key: raw[key] for key in _WEB_CITATION if key in raw})
    return out


def _image(part: Image) -> Dict[str, Any]:
    if too_large(part, TAKES):  # a tool's image became a note in split(); this is a user's
        raise ConfigError(
            f"an image of {len(part.data):,} base64 characters is over the "
            f"{TAKES.max_image_base64:,} Anthropic takes per image; send a smaller one")
    return {"type": "image",
            "source": {"type": "base64", "media_type": part.media_type, "data": part.data}}


def _document(part: Document) -> Dict[str, Any]:
    if part.media_type == "text/plain":
        source = {"type": "text", "media_type": "text/plain", "data": document_text(part)}
    else:
        source = {"type": "base64", "media_type": part.media_type, "data": part.data}
    block: Dict[str, Any] = {"type": "document", "source": source}
    if part.title:
        block["title"] = part.title
    return block


def _reasoning(part: Reasoning) -> Dict[str, Any]:
    if part.state.startswith("{"):
        try:
            whole = parse_json(part.state)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and whole.get("type") == "redacted_thinking":
            return whole
    return {"type": "thinking", "thinking": part.text, "signature": part.state}


def _tool_input(call: ToolCall) -> Dict[str, Any]:
    text = call.input.strip()
    if not text:
        return {}
    try:
        # dicts keep the model's key order; input too deep to read, or holding NaN,
        # failed its call already, and goes back as {}
        value = parse_json(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        logger.debug("tool call %s had input that is not a JSON object; replayed as {}",
                     call.id)
        return {}
    return value


def _mark_conversation(messages: List[Dict[str, Any]], marker: Dict[str, Any]) -> None:
    """Put up to two cache breakpoints in the conversation (see the module docstring)."""
    if not messages:
        return
    newest = _last_cacheable(messages, len(messages) - 1)
    marks = [newest] if newest is not None else []
    last_assistant = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == _ASSISTANT), -1
    )
    if last_assistant > 0:
        previous = _last_cacheable(messages, last_assistant - 1)
        if previous is not None and all(previous is not mark for mark in marks):
            marks.append(previous)
    for block in marks:
        block["cache_control"] = dict(marker)


def _last_cacheable(messages: List[Dict[str, Any]], start: int) -> Optional[Dict[str, Any]]:
    for i in range(start, -1, -1):
        for block in reversed(messages[i]["content"]):
            if block.get("type") in _CACHEABLE:
                found: Dict[str, Any] = block
                return found
    return None


# -- the body as bytes, each message encoded once -----------------------------------

# A block as the per-message table keeps it: its JSON, whether it is a tool result
# (sorted first in a user message), whether it can carry a breakpoint, its part index.
_Block = Tuple[bytes, bool, bool, int]
_OPEN = {_USER: b'{"role":"user","content":[', _ASSISTANT: b'{"role":"assistant","content":['}
#: What rewrites a body's frame (see :func:`encode_body`).
Shape = Callable[[Dict[str, Any]], Dict[str, Any]]


def encode_body(
    request: Request, messages: Sequence[Message], *, model: str = DEFAULT_MODEL,
    cache: Optional[WireCache] = None, shape: Optional[Shape] = None,
) -> Body:
    """:func:`to_wire`'s body as the bytes the transport sends, exactly
    ``json.dumps(to_wire(...), ensure_ascii=False, separators=(",", ":"))`` in UTF-8,
    with each message's blocks encoded once per ``cache`` and a run's stable prefix
    reused whole (see ``_wire_cache``); without a cache, that very ``json.dumps``.
    ``shape``, when given, rewrites the body's frame — everything but ``messages``
    (the clouds drop ``model`` and add ``anthropic_version``) — before it is encoded:
    it is handed the body and returns it, and must leave ``messages`` as it is.

    What is not a function of one message is done again every turn: the merging of
    neighbouring messages of one role (and the results-first order inside one), and
    the two conversation breakpoints, which move every turn. So the prefix a run
    keeps ends before the first wire message either breakpoint is in and before the
    last one; its blocks are never marked again.
    """
    if cache is None or request.profile is not CallProfile.AGENT_TURN:
        # A one-shot request has no next turn to reuse its encoding.
        whole = to_wire(request, messages, model=model)
        return Body((dumps(shape(whole) if shape is not None else whole),))
    run = cache.resume(request, messages, PROTOCOL)
    done = None if run is None else _encode(cache, request, messages, model, run, shape)
    if done is None:
        done = _encode(cache, request, messages, model, None, shape)
    assert done is not None  # without a Run nothing can be in the way
    return done


def _encode(cache: WireCache, request: Request, messages: Sequence[Message], model: str,
            run: Optional[Run], shape: Optional[Shape]) -> Optional[Body]:
    """The body from ``run``'s prefix on, or None when ``run`` cannot be used."""
    # ``run.info``: the role of the prefix's last wire message, whether the prefix has a
    # block that can carry a breakpoint, the index of its last assistant message.
    start, done = (run.stable, run.count) if run is not None else (0, 0)
    last_role, cacheable, last_assistant = run.info if run is not None else ("", False, -1)
    table = cache.table(PROTOCOL)
    groups: List[Tuple[str, List[Tuple[_Block, Message]]]] = []
    firsts: List[int] = []  # the message each wire message starts with
    for position in range(start, len(messages)):
        message = messages[position]
        blocks = cache.encoded(table, message, _encoded_blocks, position)
        if not blocks:
            continue
        role = _ROLES[message.role]
        if groups and groups[-1][0] == role:
            groups[-1][1].extend((block, message) for block in blocks)
            continue
        if not groups and role == last_role:
            return None  # this conversation merges into the prefix's last message
        groups.append((role, [(block, message) for block in blocks]))
        firsts.append(position)
    for role, content in groups:
        if role == _USER and len(content) > 1:
            content.sort(key=_after_results)
    # The breakpoints, as _mark_conversation finds them, as (wire message, block).
    newest = _newest_cacheable(groups, len(groups) - 1)
    if newest is None and cacheable:
        return None
    marks = [] if newest is None else [newest]
    assistant_at = next((i for i in range(len(groups) - 1, -1, -1)
                         if groups[i][0] == _ASSISTANT), None)
    wanted = done + assistant_at if assistant_at is not None else last_assistant
    if wanted > 0:
        previous = _newest_cacheable(groups, wanted - 1 - done)
        if previous is None and cacheable:
            return None
        if previous is not None and previous not in marks:
            marks.append(previous)
    encoded: List[bytes] = []
    for index, (role, content) in enumerate(groups):
        fragments = [block[0] for block, _ in content]
        for at, spot in marks:
            if at == index:
                block, message = content[spot]
                fragments[spot] = _marked(block[0], message.parts[block[3]], request)
        encoded.append(_OPEN[role] + b",".join(fragments) + b"]}")
    frame = to_wire(request, (), model=model)
    head, _, tail = split_frame(shape(frame) if shape is not None else frame)
    # The next turn starts at the first wire message a breakpoint is in, or the last.
    keep = min([len(groups) - 1] + [at for at, _ in marks]) if groups else 0
    kept = run.region if run is not None else ()
    body = assemble(head, list(kept) + encoded, tail)
    if groups:
        stable_groups = groups[:keep]
        info = (stable_groups[-1][0] if stable_groups else last_role,
                cacheable or any(b[0][2] for _, content in stable_groups for b in content),
                next((done + i for i in range(keep - 1, -1, -1)
                      if groups[i][0] == _ASSISTANT), last_assistant))
        cache.keep(request, Run(PROTOCOL, tuple(messages), firsts[keep],
                                grow(kept, encoded[:keep]), done + keep, info), run)
    return body


def _marked(encoded: bytes, part: Part, request: Request) -> bytes:
    """The block ``encoded`` (the encoding of ``part``'s block) with a breakpoint: its
    ``cache_control`` the block's last key.

    A key added to the block's dict goes last, and JSON is encoded key by key, so
    the marked block is the encoded one without its closing brace, then the key:
    encoding the block again would cost as much as it is long, every turn (the
    newest breakpoint is usually the last tool result: 0.2 ms a turn for one of
    100 KB). Where the bytes hold a ``"cache_control":`` key anywhere (in a tool's
    input, say; one inside a string is escaped, so never matches) the block is
    encoded again, which puts the key where the dict has it."""
    marker = _marker(request)
    if len(encoded) > 2 and b'"cache_control":' not in encoded:
        return b"".join((encoded[:-1], b',"cache_control":', dumps(marker), b"}"))
    marked = _block(part)
    assert marked is not None
    marked["cache_control"] = marker
    return dumps(marked)


def _encoded_blocks(message: Message, position: int) -> Tuple[_Block, ...]:
    """A message's blocks as the per-message table keeps them (see ``_Block``)."""
    out = []
    for index, part in enumerate(message.parts):
        block = _block(part)
        if block is not None:
            kind = block.get("type")
            out.append((dumps(block), kind == "tool_result", kind in _CACHEABLE, index))
    return tuple(out)


def _after_results(entry: Tuple[_Block, Message]) -> bool:
    return not entry[0][1]


def _newest_cacheable(groups: List[Tuple[str, List[Tuple[_Block, Message]]]],
                      start: int) -> Optional[Tuple[int, int]]:
    for at in range(start, -1, -1):
        content = groups[at][1]
        for spot in range(len(content) - 1, -1, -1):
            if content[spot][0][2]:
                return at, spot
    return None
