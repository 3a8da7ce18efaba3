"""The ``useChat`` request body read into a nacelle conversation: :func:`read_chat`.

``DefaultChatTransport`` (the ``ai`` package, ``http-chat-transport.ts``) POSTs
``{"id", "messages", "trigger", "messageId", ...}``: the chat's id, every message of
the chat as a ``UIMessage`` (``{"id", "role", "parts": [...]}``), ``"submit-message"``
or ``"regenerate-message"``, and the id of the message being answered or
regenerated; whatever the app adds with the transport's ``body`` option rides along
and is left alone here. The parts are read as ``convertToModelMessages`` reads them
(https://ai-sdk.dev/docs/reference/ai-sdk-ui/convert-to-model-messages):

- a user's ``text`` is a Text part; a ``file`` is an Image or Document, from a
  ``data:`` URL only (this server fetches nothing a client names);
- an assistant message is split at its ``step-start`` parts, one model turn each: its
  ``text`` parts and the calls of its tool parts (``tool-<name>`` or
  ``dynamic-tool``) make an assistant message, their outcomes (``output-available``,
  ``output-error``, ``output-denied``) a user message of ToolResults after it. A call
  that never ran (its approval unanswered, or answered in an earlier message) is
  answered "did not run", so the conversation stays one a provider takes; a call whose
  input never finished streaming is left out;
- ``reasoning`` parts are left out (the provider's signatures cannot travel through
  the client), as are ``step-start``, ``source-*`` and ``data-*`` parts, and a
  sub-agent's tool parts (``toolMetadata`` with ``agent``: the parent's model never
  made those calls; their outcome reached it in the sub-agent's answer);
- a ``system`` message is refused: the system prompt is the server's.

When the last message is the assistant's and holds tool parts in the state
``approval-responded`` — the person answered a ``tool-approval-request`` with
``addToolApprovalResponse`` — the request answers a paused run: :attr:`Chat.approvals`
maps each such call id to True, or to the refusal (its ``reason``, or False).

The client holds the conversation, so what it says earlier calls returned is taken as
it says, as the AI SDK's own ``streamText`` server takes it; what a person approves is
never read from it: a paused run resumes from the checkpoint the server kept.

Anything else malformed is a :class:`~nacelle.errors.ConversationError` naming the
path of the value (``messages[2].parts[0].type``). Outer ring: imports the standard
library and nacelle's core.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ..errors import ConfigError, ConversationError
from ..messages import Document, Image, Message, Part, Role, Text, ToolCall, ToolResult

__all__ = ["Chat", "read_chat"]

#: The longest chat id taken; the AI SDK's are 16 characters.
MAX_ID = 256
_TRIGGERS = ("submit-message", "regenerate-message")
_DONE_STATES = ("output-available", "output-error", "output-denied")
_DATA_URL = re.compile(r"data:([a-zA-Z0-9.+/-]+)(?:;[^,]*)?;base64,", re.ASCII)


@dataclass(frozen=True)
class Chat:
    """A ``useChat`` request: the chat's ``id``, the conversation its messages make,
    the ``trigger``, the id of the last assistant message (``answering``; "" when the
    last message is the user's) and, for an answer to a paused run, the ``approvals``."""

    id: str
    conversation: Tuple[Message, ...]
    trigger: str = "submit-message"
    answering: str = ""
    approvals: Mapping[str, Union[bool, str]] = field(default_factory=dict)


def read_chat(body: Mapping[str, Any]) -> Chat:
    """The request ``body`` (parsed JSON) as a :class:`Chat`; ConversationError when it
    is not the shape above."""
    chat_id = body.get("id")
    if not isinstance(chat_id, str) or not chat_id or len(chat_id) > MAX_ID:
        raise ConversationError(f"id must be the chat's id, a string of 1-{MAX_ID} characters")
    trigger = body.get("trigger", "submit-message")
    if trigger not in _TRIGGERS:
        raise ConversationError(f"trigger must be one of {', '.join(_TRIGGERS)}, got "
                                f"{_shown(trigger)}")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ConversationError("messages must be a non-empty list of UI messages")
    conversation: List[Message] = []
    for i, message in enumerate(raw):
        conversation += _message(message, f"messages[{i}]")
    approvals: Dict[str, Union[bool, str]] = {}
    answering = ""
    last = raw[-1]
    if last.get("role") == "assistant":
        answering = last.get("id") if isinstance(last.get("id"), str) else ""
        approvals = _approvals(last["parts"], f"messages[{len(raw) - 1}]")
    return Chat(chat_id, tuple(_merged(conversation)), str(trigger), answering, approvals)


def _message(raw: Any, path: str) -> List[Message]:
    if not isinstance(raw, dict):
        raise ConversationError(f"{path} must be an object")
    role, parts = raw.get("role"), raw.get("parts")
    if not isinstance(parts, list):
        raise ConversationError(f"{path}.parts must be a list")
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ConversationError(f"{path}.parts[{j}] must be an object with a type")
    if role == "user":
        content = [p for j, p in enumerate(parts) for p in _user_part(p, f"{path}.parts[{j}]")]
        return [Message(Role.USER, content)] if content else []
    if role == "assistant":
        return _assistant(parts, path)
    if role == "system":
        raise ConversationError(f"{path}.role: a system message is the server's to write")
    raise ConversationError(f"{path}.role must be user or assistant, got {_shown(role)}")


def _user_part(part: Dict[str, Any], path: str) -> List[Part]:
    kind = part["type"]
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise ConversationError(f"{path}.text must be a string")
        return [Text(text)] if text else []
    if kind == "file":
        return [_file(part, path)]
    return []


def _file(part: Dict[str, Any], path: str) -> Part:
    url = part.get("url")
    found = _DATA_URL.match(url) if isinstance(url, str) else None
    if found is None or not isinstance(url, str):
        raise ConversationError(f"{path}.url must be a base64 data: URL; this server "
                                "fetches no URL a client names")
    media_type = str(part.get("mediaType") or found.group(1)).lower()
    try:
        data = base64.b64decode(url[found.end():], validate=True)
    except (binascii.Error, ValueError):
        raise ConversationError(f"{path}.url is not valid base64") from None
    try:
        if media_type.startswith("image/"):
            return Image.from_bytes(data, media_type)
        title = part.get("filename")
        return Document.from_bytes(data, media_type, title if isinstance(title, str) else "")
    except ConfigError as exc:
        raise ConversationError(f"{path}: {str(exc)[:200]}") from None


def _assistant(parts: List[Dict[str, Any]], path: str) -> List[Message]:
    out: List[Message] = []
    step: List[Part] = []
    results: List[Part] = []

    def flush() -> None:
        if step:
            out.append(Message(Role.ASSISTANT, list(step)))
        if results:
            out.append(Message(Role.USER, list(results)))
        step.clear()
        results.clear()

    for j, part in enumerate(parts):
        kind = part["type"]
        where = f"{path}.parts[{j}]"
        if kind == "step-start":
            flush()
        elif kind == "text":
            if not isinstance(part.get("text"), str):
                raise ConversationError(f"{where}.text must be a string")
            if part["text"]:
                step.append(Text(part["text"]))
        elif kind == "dynamic-tool" or kind.startswith("tool-"):
            metadata = part.get("toolMetadata")
            if isinstance(metadata, dict) and "agent" in metadata:
                continue  # a sub-agent's call: the parent's model never made it
            call = _tool(part, where)
            if call is not None:
                step.append(call[0])
                results.append(call[1])
    flush()
    return out


def _tool(part: Dict[str, Any], path: str) -> Optional[Tuple[ToolCall, ToolResult]]:
    """A tool part's call and its result, or None for one whose input never finished."""
    kind = part["type"]
    name = part.get("toolName") if kind == "dynamic-tool" else kind[len("tool-"):]
    call_id, state = part.get("toolCallId"), part.get("state")
    if not isinstance(name, str) or not name:
        raise ConversationError(f"{path} names no tool")
    if not isinstance(call_id, str) or not call_id:
        raise ConversationError(f"{path}.toolCallId must be a non-empty string")
    if not isinstance(state, str):
        raise ConversationError(f"{path}.state must be a string")
    if state == "input-streaming":
        return None
    if state == "output-error" and "input" not in part:  # the input never parsed
        text = part.get("rawInput")
        raw_input = text if isinstance(text, str) else "{}"
    else:
        raw_input = json.dumps(part.get("input", {}), ensure_ascii=False)
    call = ToolCall(call_id, name, raw_input)
    if state == "output-available":
        output = part.get("output")
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return call, ToolResult(call_id, name, text)
    if state == "output-error":
        error = part.get("errorText")
        return call, ToolResult(call_id, name, error if isinstance(error, str) else "failed",
                                failed=True)
    if state == "output-denied":
        reason = (part.get("approval") or {}).get("reason") if isinstance(
            part.get("approval"), dict) else None
        return call, ToolResult(call_id, name, reason if isinstance(reason, str) and reason
                                else f"the user did not approve this call of {name}",
                                failed=True)
    return call, ToolResult(call_id, name, f"this call of {name} did not run: the user "
                                           "went on without it", failed=True)


def _approvals(parts: List[Dict[str, Any]], path: str) -> Dict[str, Union[bool, str]]:
    """The approval answers in the message, by call id: a part stays
    ``approval-responded`` only until the resumed run sends its outcome, so every one
    left is an answer the run waits for."""
    approvals: Dict[str, Union[bool, str]] = {}
    for j, part in enumerate(parts):
        if part.get("state") != "approval-responded":
            continue
        approval = part.get("approval")
        if not isinstance(approval, dict) or not isinstance(approval.get("approved"), bool):
            raise ConversationError(f"{path}.parts[{j}].approval must say approved: true "
                                    "or false")
        reason = approval.get("reason")
        if approval["approved"]:
            approvals[str(part.get("toolCallId"))] = True
        else:
            approvals[str(part.get("toolCallId"))] = (
                reason if isinstance(reason, str) and reason.strip() else False)
    return approvals


def _merged(messages: List[Message]) -> List[Message]:
    """Adjacent messages of one role joined, as a provider wants them."""
    out: List[Message] = []
    for message in messages:
        if out and out[-1].role is message.role:
            out[-1] = Message(message.role, out[-1].parts + message.parts)
        else:
            out.append(message)
    return out


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
