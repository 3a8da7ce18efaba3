"""Realistic Anthropic, OpenRouter, OpenAI Responses and Gemini SSE bodies, for
FakeServer replies and decoder tests.

Each builder returns a list of ``bytes`` chunks, one per SSE event (or comment),
ready for ``Reply(chunks=...)``; :func:`rechunk` re-cuts a body at fixed sizes to
exercise chunk boundaries, and :func:`sse_event` frames one event by hand::

    server.queue("/v1/messages", Reply(chunks=anthropic_stream(
        text_deltas=["Hel", "lo"], tool_calls=[("toolu_1", "get_weather", '{"city":"Paris"}')])))

The shapes follow what the providers send today: Anthropic's ``message_start`` with usage, content blocks for thinking (with
its ``signature_delta``), text and tool use (input as ``input_json_delta`` fragments
cut mid-token, the first one empty), ``ping`` events, ``message_delta`` with the stop
reason and cumulative usage, ``message_stop``, and the in-band ``event: error``.
OpenRouter's ``: OPENROUTER PROCESSING`` comments before and between chunks,
``chat.completion.chunk`` deltas repeating ``role``, reasoning with
``reasoning_details`` and a late signature, tool-call fragments keyed by ``index``, a
finish chunk repeated with the usage (or an empty-choices usage chunk), ``data:
[DONE]``, and in-band errors with a numeric code. The Responses API's
``response.created`` and ``response.in_progress``, then per output item its
``output_item.added``, deltas (``output_text.delta`` inside a content part;
``function_call_arguments.delta`` cut mid-token, then ``.done``) and
``output_item.done``, every event with its ``sequence_number``, and
``response.completed`` (or ``response.incomplete``) with the usage. Gemini's
``streamGenerateContent?alt=sse``: one whole ``GenerateContentResponse`` a chunk, thought
parts with their signature, each call one whole ``functionCall`` part (Gemini sends
arguments as an object, not in deltas), the last chunk with ``finishReason``. Every other
builder streams a tool call's arguments in several deltas, as those providers do, so a
consumer sees its TOOL_INPUT events end to end.

Public (``nacelle.testing``); imports the standard library only.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["anthropic_error", "anthropic_stream", "fragments", "gemini_stream",
           "openrouter_stream", "rechunk", "responses_stream", "sse_event"]

ToolCallSpec = Tuple[str, str, str]  # (id, name, input JSON text)

KEEPALIVE = b": OPENROUTER PROCESSING\n\n"

_SURROGATE = re.compile("[\ud800-\udfff]")


def sse_event(data: Any, event: Optional[str] = None) -> bytes:
    """One SSE event: an ``event:`` line if given, ``data:`` lines (a non-str value as
    compact JSON; a newline in text makes another data line), a blank line."""
    if not isinstance(data, str):
        data = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        # Half a surrogate pair has no UTF-8 form: written as the \u escape a provider
        # that cut a pair in two deltas sends.
        data = _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", data)
    head = f"event: {event}\n" if event else ""
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return (head + lines + "\n").encode("utf-8")


def rechunk(chunks: Iterable[bytes], size: int) -> List[bytes]:
    """The same bytes cut every ``size`` bytes, regardless of event boundaries."""
    if size < 1:
        raise ValueError(f"rechunk size must be >= 1, got {size}")
    body = b"".join(chunks)
    return [body[i:i + size] for i in range(0, len(body), size)]


def fragments(text: str, size: int = 7) -> List[str]:
    """Cut ``text`` every ``size`` characters — mid-token, as providers stream tool input."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


# -- Anthropic ------------------------------------------------------------------------


def anthropic_stream(
    text_deltas: Sequence[str] = ("Hello", "!"),
    *,
    thinking_deltas: Sequence[str] = (),
    signature: str = "EqQBCkYIBRgCKkBsig",
    tool_calls: Sequence[ToolCallSpec] = (),
    server_blocks: Sequence[Dict[str, Any]] = (),
    stop_reason: Optional[str] = None,
    usage: Optional[Dict[str, int]] = None,
    model: str = "claude-opus-5",
    message_id: str = "msg_01XFDUDYJgAACzvnptvVoYEL",
    pings: bool = True,
    error: Optional[Tuple[str, str]] = None,
    message_stop: bool = True,
    citations: Sequence[Dict[str, Any]] = (),
    context_management: Optional[Dict[str, Any]] = None,
) -> List[bytes]:
    """An Anthropic Messages stream, one chunk per event.

    Blocks come in this order: thinking (when ``thinking_deltas``, closed by one
    ``signature_delta``), ``server_blocks`` (content blocks sent whole: start and stop;
    a block with an ``input`` streams it as one ``input_json_delta``), text (when
    ``text_deltas``), then one ``tool_use`` block per ``(id, name, input_json)``.
    ``stop_reason`` defaults to ``tool_use`` with tool calls, else ``end_turn``.
    ``usage`` holds ``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
    ``cache_creation_input_tokens``; ``message_start`` carries the input side and the
    final ``message_delta`` all of it, cumulative. ``error=(type, message)`` ends the
    stream after the content with an in-band ``error`` event (no ``message_delta`` or
    ``message_stop``); ``message_stop=False`` drops the final event, as a cut stream.
    ``citations`` are sent as ``citations_delta`` events at the start of the text block
    (the web search tool's ``web_search_result_location`` objects, say);
    ``context_management`` rides on the final ``message_delta``, as the API reports the
    context edits it applied (``{"applied_edits": [...]}``).
    """
    totals = {"input_tokens": 25, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 0, "output_tokens": 12}
    totals.update(usage or {})
    start_usage = dict(totals, output_tokens=1)
    out = [_event("message_start", {"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "content": [],
        "model": model, "stop_reason": None, "stop_sequence": None, "usage": start_usage}})]
    if pings:
        out.append(_ping())
    index = 0
    if thinking_deltas:
        out.append(_block_start(index, {"type": "thinking", "thinking": "", "signature": ""}))
        out += [_delta(index, {"type": "thinking_delta", "thinking": t}) for t in thinking_deltas]
        out.append(_delta(index, {"type": "signature_delta", "signature": signature}))
        out.append(_block_stop(index))
        index += 1
    for block in server_blocks:
        block = dict(block)
        streamed = block.get("input")
        if streamed is not None:
            block["input"] = {}
        out.append(_block_start(index, block))
        if streamed is not None:
            out.append(_delta(index, {"type": "input_json_delta",
                                      "partial_json": json.dumps(streamed)}))
        out.append(_block_stop(index))
        index += 1
    if text_deltas:
        out.append(_block_start(index, {"type": "text", "text": ""}))
        out += [_delta(index, {"type": "citations_delta", "citation": c}) for c in citations]
        for number, text in enumerate(text_deltas):
            out.append(_delta(index, {"type": "text_delta", "text": text}))
            if pings and number == len(text_deltas) // 2:
                out.append(_ping())
        out.append(_block_stop(index))
        index += 1
    for call_id, name, arguments in tool_calls:
        out.append(_block_start(index, {"type": "tool_use", "id": call_id, "name": name,
                                        "input": {}}))
        pieces = [""] + (fragments(arguments) if arguments else [])
        out += [_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in pieces]
        out.append(_block_stop(index))
        index += 1
    if error is not None:
        out.append(anthropic_error(*error))
        return out
    reason = stop_reason or ("tool_use" if tool_calls else "end_turn")
    ending: Dict[str, Any] = {"type": "message_delta", "delta": {
        "stop_reason": reason, "stop_sequence": None}, "usage": totals}
    if context_management is not None:
        ending["context_management"] = context_management
    out.append(_event("message_delta", ending))
    if message_stop:
        out.append(_event("message_stop", {"type": "message_stop"}))
    return out


def anthropic_error(type: str = "overloaded_error", message: str = "Overloaded") -> bytes:  # noqa: A002
    """Anthropic's in-band error event (what a 529 becomes after the 200 is sent)."""
    return _event("error", {"type": "error", "error": {"type": type, "message": message}})


def _event(name: str, data: Dict[str, Any]) -> bytes:
    return sse_event(data, event=name)


def _ping() -> bytes:
    return b'event: ping\ndata: {"type": "ping"}\n\n'


def _block_start(index: int, block: Dict[str, Any]) -> bytes:
    return _event("content_block_start",
                  {"type": "content_block_start", "index": index, "content_block": block})


def _delta(index: int, delta: Dict[str, Any]) -> bytes:
    return _event("content_block_delta",
                  {"type": "content_block_delta", "index": index, "delta": delta})


def _block_stop(index: int) -> bytes:
    return _event("content_block_stop", {"type": "content_block_stop", "index": index})


# -- OpenRouter ------------------------------------------------------------------------


def openrouter_stream(
    content_deltas: Sequence[str] = ("Hello", "!"),
    *,
    reasoning_deltas: Sequence[str] = (),
    reasoning_signature: Optional[str] = "EvsCCkYIBRgCsig",
    tool_calls: Sequence[ToolCallSpec] = (),
    finish_reason: Optional[str] = None,
    usage: Optional[Dict[str, Any]] = None,
    usage_chunk: str = "repeat",  # "repeat" | "empty" | "none"
    model: str = "anthropic/claude-haiku-4.5",
    generation_id: str = "gen-1754800000-abcdefghijklmnop",
    provider: str = "Amazon Bedrock",
    keepalives: int = 2,
    error: Optional[Tuple[Any, str]] = None,
    done: bool = True,
) -> List[bytes]:
    """An OpenRouter chat-completions stream, one chunk per event or comment.

    ``keepalives`` comments open the stream and one more sits mid-stream. Reasoning
    deltas carry both ``reasoning`` and a ``reasoning.text`` detail; the signature
    follows in a detail of its own. Each tool call's first fragment carries ``id``,
    ``type``, ``name`` and empty ``arguments``; the arguments follow cut mid-token.
    ``finish_reason`` defaults to ``tool_calls`` with tool calls, else ``stop``.
    ``usage_chunk="repeat"`` repeats the finish choice with the usage (what the wire
    shows today); ``"empty"`` sends the usage with ``choices: []`` (what the docs say).
    ``error=(code, message)`` ends the stream after the content with an in-band error
    chunk and no ``[DONE]``; ``done=False`` drops the ``[DONE]``, as a cut stream.
    """
    if usage_chunk not in ("repeat", "empty", "none"):
        raise ValueError(f"usage_chunk must be 'repeat', 'empty' or 'none', got {usage_chunk!r}")
    out = [KEEPALIVE] * keepalives

    def chunk(delta: Dict[str, Any], finish: Optional[str] = None, **extra: Any) -> bytes:
        native = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
        choice = {"index": 0, "delta": dict({"role": "assistant"}, **delta),
                  "finish_reason": finish,
                  "native_finish_reason": native.get(finish or "", finish)}
        body = {"id": generation_id, "provider": provider, "model": model,
                "object": "chat.completion.chunk", "created": 1754800000,
                "choices": [choice], **extra}
        return sse_event(body)

    for text in reasoning_deltas:
        out.append(chunk({"content": "", "reasoning": text, "reasoning_details": [
            {"type": "reasoning.text", "text": text, "format": "anthropic-claude-v1", "index": 0}]}))
    if reasoning_deltas and reasoning_signature:
        out.append(chunk({"content": "", "reasoning_details": [
            {"type": "reasoning.text", "signature": reasoning_signature,
             "format": "anthropic-claude-v1", "index": 0}]}))
    for number, text in enumerate(content_deltas):
        out.append(chunk({"content": text}))
        if number == 0 and keepalives:
            out.append(KEEPALIVE)
    for index, (call_id, name, arguments) in enumerate(tool_calls):
        out.append(chunk({"content": None, "tool_calls": [{
            "index": index, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}))
        for piece in fragments(arguments) if arguments else []:
            out.append(chunk({"content": None, "tool_calls": [
                {"index": index, "function": {"arguments": piece}}]}))
    if error is not None:
        code, message = error
        out.append(chunk({"content": ""}, "error", error={
            "code": code, "message": message,
            "metadata": {"error_type": "provider_error", "provider_code": str(code)}}))
        return out
    finish = finish_reason or ("tool_calls" if tool_calls else "stop")
    totals = {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42,
              "cost": 0.000126, "is_byok": False,
              "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0,
                                        "audio_tokens": 0, "video_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0, "image_tokens": 0,
                                            "audio_tokens": 0}}
    if usage is not None:
        totals = usage
    out.append(chunk({"content": ""}, finish))
    if usage_chunk == "repeat":
        out.append(chunk({"content": ""}, finish, usage=totals))
    elif usage_chunk == "empty":
        out.append(sse_event({"id": generation_id, "provider": provider, "model": model,
                              "object": "chat.completion.chunk", "created": 1754800000,
                              "choices": [], "usage": totals}))
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


# -- OpenAI Responses ------------------------------------------------------------------


def responses_stream(
    text_deltas: Sequence[str] = ("Hello", "!"),
    *,
    tool_calls: Sequence[ToolCallSpec] = (),
    usage: Optional[Dict[str, int]] = None,
    model: str = "gpt-5-mini-2025-08-07",
    response_id: str = "resp_0c51a8d3e2f9b7aa006a6a1f00aa1081a1b0c0ffee42",
    incomplete: Optional[str] = None,
    hosted: Sequence[Dict[str, Any]] = (),
    annotations: Sequence[Dict[str, Any]] = (),
) -> List[bytes]:
    """An OpenAI Responses API stream (``POST /v1/responses`` with ``stream: true``),
    one chunk per event, in the shape of ``ResponseStreamEvent`` in OpenAI's OpenAPI
    document and of recorded streams: each event named by an ``event:`` line equal to
    its ``type``, with a ``sequence_number``.

    A ``message`` item with ``text_deltas`` (when any), then one ``function_call``
    item per ``(call_id, name, arguments)``, its arguments streamed in fragments cut
    mid-token, then ``function_call_arguments.done`` and ``output_item.done`` with
    the whole text. ``usage`` holds ``input_tokens``, ``output_tokens`` and
    ``cached_tokens`` (inside ``input_tokens``, as the API counts it).
    ``incomplete="max_output_tokens"`` ends with ``response.incomplete`` and that
    reason, the last call's arguments cut in the middle and its item never done.
    ``hosted`` items (a hosted tool's ``web_search_call``, say) come first, each added
    and done whole; ``annotations`` (``url_citation`` objects) are the message text's,
    as ``response.output_text.annotation.added`` events and in the finished part.
    """
    counts = {"input_tokens": 25, "output_tokens": 12, "cached_tokens": 0}
    counts.update(usage or {})
    out: List[bytes] = []

    def event(data: Dict[str, Any]) -> None:
        data["sequence_number"] = len(out)
        out.append(sse_event(data, event=data["type"]))

    def response(status: str, output: List[Any]) -> Dict[str, Any]:
        return {"id": response_id, "object": "response", "created_at": 1785300000,
                "status": status, "model": model, "output": output, "usage": None,
                "incomplete_details": None, "error": None}

    event({"type": "response.created", "response": response("in_progress", [])})
    event({"type": "response.in_progress", "response": response("in_progress", [])})
    items: List[Dict[str, Any]] = []
    for item in hosted:
        event({"type": "response.output_item.added", "item": item, "output_index": len(items)})
        event({"type": "response.output_item.done", "item": item, "output_index": len(items)})
        items.append(item)
    if text_deltas:
        index, item_id = len(items), "msg_0c51a8d3e2f9b7aa006a6a1f02e53081a3f405162738"
        item = {"id": item_id, "type": "message", "status": "in_progress", "content": [],
                "role": "assistant"}
        event({"type": "response.output_item.added", "item": item, "output_index": index})
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        event({"type": "response.content_part.added", "item_id": item_id,
               "output_index": index, "content_index": 0, "part": part})
        for text in text_deltas:
            event({"type": "response.output_text.delta", "item_id": item_id,
                   "output_index": index, "content_index": 0, "delta": text, "logprobs": []})
        for number, note in enumerate(annotations):
            event({"type": "response.output_text.annotation.added", "item_id": item_id,
                   "output_index": index, "content_index": 0, "annotation_index": number,
                   "annotation": note})
        whole = dict(part, text="".join(text_deltas), annotations=list(annotations))
        event({"type": "response.output_text.done", "item_id": item_id, "output_index": index,
               "content_index": 0, "text": whole["text"], "logprobs": []})
        event({"type": "response.content_part.done", "item_id": item_id,
               "output_index": index, "content_index": 0, "part": whole})
        items.append(dict(item, status="completed", content=[whole]))
        event({"type": "response.output_item.done", "item": items[-1], "output_index": index})
    for number, (call_id, name, arguments) in enumerate(tool_calls):
        index, item_id = len(items), f"fc_0c51a8d3e2f9b7aa006a6a1f03f6{number:04d}"
        item = {"id": item_id, "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": call_id, "name": name}
        event({"type": "response.output_item.added", "item": item, "output_index": index})
        cut = incomplete is not None and number == len(tool_calls) - 1
        pieces = fragments(arguments[:len(arguments) // 2] if cut else arguments)
        for piece in pieces if arguments else []:
            event({"type": "response.function_call_arguments.delta", "item_id": item_id,
                   "output_index": index, "delta": piece})
        if cut:
            break
        event({"type": "response.function_call_arguments.done", "item_id": item_id,
               "output_index": index, "arguments": arguments})
        items.append(dict(item, status="completed", arguments=arguments))
        event({"type": "response.output_item.done", "item": items[-1], "output_index": index})
    final = response("incomplete" if incomplete else "completed", items)
    if incomplete:
        final["incomplete_details"] = {"reason": incomplete}
    final["usage"] = {
        "input_tokens": counts["input_tokens"] + counts["cached_tokens"],
        "input_tokens_details": {"cached_tokens": counts["cached_tokens"]},
        "output_tokens": counts["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": counts["input_tokens"] + counts["cached_tokens"]
        + counts["output_tokens"]}
    event({"type": "response.incomplete" if incomplete else "response.completed",
           "response": final})
    return out


# -- Gemini ----------------------------------------------------------------------------


def gemini_stream(
    text_deltas: Sequence[str] = ("Hello", "!"),
    *,
    thinking_deltas: Sequence[str] = (),
    signature: str = "",
    tool_calls: Sequence[ToolCallSpec] = (),
    usage: Optional[Dict[str, int]] = None,
    finish: str = "STOP",
    model: str = "gemini-2.5-flash",
    response_id: str = "9PZCafrTOoGqz7IPjdiB4Ak",
) -> List[bytes]:
    """A Gemini ``streamGenerateContent?alt=sse`` body, one chunk per event, in the
    shape of ``GenerateContentResponse`` (https://ai.google.dev/api/generate-content;
    the google-genai SDK's ``types.GenerateContentResponse``): each ``data:`` line a
    whole response holding this chunk's new parts, with ``usageMetadata``,
    ``modelVersion`` and ``responseId``; no ``event:`` lines.

    Thought parts (``"thought": true``) first, the last carrying ``signature`` as its
    ``thoughtSignature`` when given; then one text part per delta; then each call as
    one whole ``functionCall`` part (``id`` left out when the id given is empty, as the
    API may; the first call carries ``signature`` when given), in the chunk that ends
    with ``finishReason`` and the final counts. ``usage`` holds
    ``input_tokens`` (full-rate), ``output_tokens`` (visible), ``cached_tokens`` and
    ``thoughts_tokens``; ``promptTokenCount`` counts the cached ones, as the API does.
    """
    counts = {"input_tokens": 25, "output_tokens": 12, "cached_tokens": 0,
              "thoughts_tokens": 0}
    counts.update(usage or {})
    prompt = counts["input_tokens"] + counts["cached_tokens"]
    meta: Dict[str, Any] = {"promptTokenCount": prompt,
                            "totalTokenCount": prompt + counts["thoughts_tokens"]}
    meta["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
    out: List[bytes] = []

    def chunk(parts: List[Dict[str, Any]], reason: Optional[str] = None,
              final: bool = False) -> None:
        candidate: Dict[str, Any] = {"content": {"parts": parts, "role": "model"},
                                     "index": 0}
        if reason is not None:
            candidate["finishReason"] = reason
        counted = dict(meta)
        if final:
            counted.update(candidatesTokenCount=counts["output_tokens"],
                           totalTokenCount=prompt + counts["output_tokens"]
                           + counts["thoughts_tokens"])
            if counts["cached_tokens"]:
                counted["cachedContentTokenCount"] = counts["cached_tokens"]
        if counts["thoughts_tokens"]:
            counted["thoughtsTokenCount"] = counts["thoughts_tokens"]
        out.append(sse_event({"candidates": [candidate], "usageMetadata": counted,
                              "modelVersion": model, "responseId": response_id}))

    for number, text in enumerate(thinking_deltas):
        part: Dict[str, Any] = {"text": text, "thought": True}
        if signature and number == len(thinking_deltas) - 1:
            part["thoughtSignature"] = signature
        chunk([part])
    texts = list(text_deltas)
    last_text = texts.pop() if texts and not tool_calls else None
    for text in texts:
        chunk([{"text": text}])
    calls: List[Dict[str, Any]] = []
    for number, (call_id, name, arguments) in enumerate(tool_calls):
        call: Dict[str, Any] = {"name": name, "args": json.loads(arguments or "{}")}
        if call_id:
            call = {"id": call_id, **call}
        part = {"functionCall": call}
        if signature and not thinking_deltas and number == 0:
            part["thoughtSignature"] = signature
        calls.append(part)
    final_parts = calls if tool_calls else [{"text": last_text or ""}]
    chunk(final_parts, finish, final=True)
    return out
