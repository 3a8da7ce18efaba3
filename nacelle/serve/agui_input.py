"""AG-UI's ``RunAgentInput`` read into nacelle's terms: :func:`parse_input`, pure.

The shape is AG-UI 1.0's (``RunAgentInputSchema`` of ``@ag-ui/core`` 1.0, from
https://ag-ui.com/spec/1.0/schema.json): ``threadId``, ``runId`` and ``messages``
required; ``tools``, ``context`` and ``resume`` optional lists; ``state``,
``forwardedProps``, ``parentRunId`` and ``protocolVersion`` accepted and not used
(the agent keeps no shared state; nothing forwarded means anything to it). Members
the schema does not name are ignored, as its open objects allow. Anything of the
wrong shape is an :class:`InputError` naming the field (``messages[2].content``), which
the route answers with a 400.

Messages become nacelle's conversation:

- ``user``: its text, or its parts — ``text``, and ``image`` / ``document`` parts whose
  bytes come inline (``source.type == "data"``, base64). A part by URL or by a
  provider's file handle is refused: the server fetches nothing a client names (an
  address is a request the server would make on the client's behalf), and a handle
  means nothing off its provider. Audio and video reach no nacelle backend: refused.
- ``assistant``: its text and its ``toolCalls`` (the call's id, name and argument text).
- ``tool``: the result of the call it names (``content``, failed when ``error`` is set),
  filed in the user turn that follows the calls, where every provider wants it.
- ``system`` and ``developer``: the server's system prompt is the Agent's, so a
  client's is not one; their text joins ``context`` (each ``description: value``) in
  a closing part of the last user message, headed as context from the application —
  the model reads it, and it changes no instruction the server gave.
- ``reasoning`` and ``activity`` messages are the client's display state: dropped.

A tool call no later ``tool`` message answers gets a failed result saying so (a
client that moved on from a call it never answered), because every provider refuses
a conversation with an unanswered call. ``tools`` are the front end's tools
(:class:`ClientToolSpec`), ``resume`` the answers to a paused run's interrupts
(:class:`ResumeEntry`), and ``answers`` every tool message's result by call id, which
is how a paused call of a front end's tool gets its answer.

Outer ring: imports the standard library and nacelle's core; no I/O.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ..errors import NacelleError
from ..messages import (
    Document, Image, Message, Part, Role, Text, ToolCall, ToolMedia, ToolResult,
)

__all__ = ["ClientToolSpec", "InputError", "ResumeEntry", "RunInput", "parse_input"]

#: The longest id (threadId, runId, a message's or a call's) taken.
MAX_ID = 512
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_DOCUMENT_TYPES = ("application/pdf", "text/plain")


class InputError(NacelleError, ValueError):
    """A ``RunAgentInput`` that does not have AG-UI's shape; the text names the field."""


@dataclass(frozen=True)
class ClientToolSpec:
    """A tool the front end declared: its name, description and JSON Schema."""

    name: str
    description: str
    parameters: Dict[str, Any]


@dataclass(frozen=True)
class ResumeEntry:
    """One answer to an interrupt: ``status`` is ``resolved`` or ``cancelled``."""

    interrupt_id: str
    status: str
    payload: Any = None


@dataclass(frozen=True)
class RunInput:
    """A parsed ``RunAgentInput``."""

    thread_id: str
    run_id: str
    messages: Tuple[Message, ...]
    tools: Tuple[ClientToolSpec, ...] = ()
    resume: Tuple[ResumeEntry, ...] = ()
    answers: Mapping[str, ToolResult] = field(default_factory=dict)


def parse_input(data: Mapping[str, Any]) -> RunInput:
    """``data`` (the parsed JSON body) as a :class:`RunInput`; InputError when it does
    not have the shape of the module docstring."""
    if not isinstance(data, Mapping):
        raise InputError("the body must be a RunAgentInput object")
    thread_id = _id(data.get("threadId"), "threadId")
    run_id = _id(data.get("runId"), "runId")
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise InputError("messages must be a list of AG-UI messages")
    tools = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(_list(data, "tools")))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise InputError(f"tools names {sorted({n for n in names if names.count(n) > 1})[0]!r} "
                         "twice")
    notes = [_context(c, f"context[{i}]") for i, c in enumerate(_list(data, "context"))]
    resume = tuple(_resume(r, f"resume[{i}]") for i, r in enumerate(_list(data, "resume")))
    conversation, answers, instructions = _conversation(messages)
    notes = instructions + notes
    if notes and any(m.role is Role.USER for m in conversation):
        conversation = _with_context(conversation, notes)
    return RunInput(thread_id, run_id, tuple(conversation), tools, resume, answers)


# -- fields -------------------------------------------------------------------------------


def _id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"{where} must be a non-empty string")
    if len(value) > MAX_ID:
        raise InputError(f"{where} is longer than {MAX_ID} characters")
    return value


def _str(value: Any, where: str, *, empty: bool = True) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise InputError(f"{where} must be a {'' if empty else 'non-empty '}string")
    return value


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where} must be an object")
    return value


def _list(data: Mapping[str, Any], key: str) -> List[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{key} must be a list")
    return value


def _tool(raw: Any, where: str) -> ClientToolSpec:
    raw = _obj(raw, where)
    name = _str(raw.get("name"), f"{where}.name", empty=False)
    description = _str(raw.get("description", ""), f"{where}.description")
    parameters = raw.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    elif not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
        raise InputError(f"{where}.parameters must be a JSON Schema of an object")
    return ClientToolSpec(name, description, dict(parameters))


def _context(raw: Any, where: str) -> str:
    raw = _obj(raw, where)
    description = _str(raw.get("description"), f"{where}.description")
    value = _str(raw.get("value"), f"{where}.value")
    return f"{description}: {value}" if description else value


def _resume(raw: Any, where: str) -> ResumeEntry:
    raw = _obj(raw, where)
    interrupt = _id(raw.get("interruptId"), f"{where}.interruptId")
    status = raw.get("status")
    if status not in ("resolved", "cancelled"):
        raise InputError(f"{where}.status must be \"resolved\" or \"cancelled\"")
    return ResumeEntry(interrupt, status, raw.get("payload"))


# -- messages ---------------------------------------------------------------------------


def _conversation(messages: Sequence[Any],
                  ) -> Tuple[List[Message], Dict[str, ToolResult], List[str]]:
    """The conversation, the tool messages' results by call id, and the text of the
    system and developer messages."""
    conversation: List[Tuple[Role, List[Part]]] = []
    answers: Dict[str, ToolResult] = {}
    instructions: List[str] = []
    names: Dict[str, str] = {}  # call id -> tool name, for the results
    unanswered: Dict[str, ToolCall] = {}  # in call order; by id, so answering is O(1)
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        raw = _obj(raw, where)
        role = raw.get("role")
        if role == "user":
            parts = _user_content(raw.get("content"), f"{where}.content")
            _append(conversation, Role.USER, _closing(unanswered) + parts)
        elif role == "assistant":
            parts = []
            content = raw.get("content")
            if content is not None and _str(content, f"{where}.content"):
                parts.append(Text(content))
            for j, call in enumerate(_calls(raw.get("toolCalls"), f"{where}.toolCalls")):
                if call.id in names:
                    raise InputError(f"{where}.toolCalls[{j}].id {call.id[:60]!r} is the id "
                                     "of an earlier call")
                names[call.id] = call.name
                unanswered[call.id] = call
                parts.append(call)
            if parts:
                _append(conversation, Role.ASSISTANT, parts)
        elif role == "tool":
            call_id = _id(raw.get("toolCallId"), f"{where}.toolCallId")
            if call_id not in names:
                raise InputError(f"{where}.toolCallId {call_id[:60]!r} names no earlier "
                                 "assistant tool call")
            result = _tool_result(raw, call_id, names[call_id], where)
            answers[call_id] = result
            if unanswered.pop(call_id, None) is None:
                raise InputError(f"{where} answers the call {call_id[:60]!r} a second time")
            _append(conversation, Role.USER, [result])
        elif role in ("system", "developer"):
            text = _str(raw.get("content"), f"{where}.content")
            if text.strip():
                instructions.append(text)
        elif role in ("reasoning", "activity"):
            continue
        else:
            raise InputError(f"{where}.role must be user, assistant, tool, system, developer, "
                             "reasoning or activity")
    closing = _closing(unanswered)
    if closing:
        _append(conversation, Role.USER, closing)
    return [Message(role, tuple(parts)) for role, parts in conversation], answers, instructions


def _closing(unanswered: Dict[str, ToolCall]) -> List[Part]:
    """Failed results for the calls no tool message answered before the conversation
    moved on (see the module docstring)."""
    parts: List[Part] = [ToolResult(c.id, c.name, "the application sent no result for this "
                                    "call", failed=True) for c in unanswered.values()]
    unanswered.clear()
    return parts


def _append(turns: List[Tuple[Role, List[Part]]], role: Role, parts: Sequence[Part]) -> None:
    """Add ``parts`` as a turn of ``role``, joined to the last one when it has the same
    role: providers want turns that alternate, results then text in one. (Lists until
    the end, so ten thousand tool messages in a row are not copied ten thousand times.)"""
    if not parts:
        return
    if turns and turns[-1][0] is role:
        turns[-1][1].extend(parts)
    else:
        turns.append((role, list(parts)))


def _calls(raw: Any, where: str) -> List[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError(f"{where} must be a list")
    calls = []
    for j, call in enumerate(raw):
        call = _obj(call, f"{where}[{j}]")
        function = _obj(call.get("function"), f"{where}[{j}].function")
        calls.append(ToolCall(_id(call.get("id"), f"{where}[{j}].id"),
                              _str(function.get("name"), f"{where}[{j}].function.name",
                                   empty=False),
                              _str(function.get("arguments", ""),
                                   f"{where}[{j}].function.arguments")))
    return calls


def _tool_result(raw: Mapping[str, Any], call_id: str, name: str, where: str) -> ToolResult:
    error = raw.get("error")
    if error is not None:
        error = _str(error, f"{where}.error")
    content = raw.get("content")
    media: List[ToolMedia] = []
    if isinstance(content, str):
        text = content
    else:
        for part in _user_content(content, f"{where}.content"):
            assert isinstance(part, (Text, Image, Document))
            media.append(part)
        text = "\n".join(p.text for p in media if isinstance(p, Text))
        if all(isinstance(p, Text) for p in media):
            media = []
    if error is not None:
        return ToolResult(call_id, name, error or text or "the tool failed", failed=True)
    return ToolResult(call_id, name, text, content=media)


def _user_content(content: Any, where: str) -> List[Part]:
    if isinstance(content, str):
        return [Text(content)] if content else []
    if not isinstance(content, list):
        raise InputError(f"{where} must be a string or a list of parts")
    parts: List[Part] = []
    for k, raw in enumerate(content):
        part = _obj(raw, f"{where}[{k}]")
        kind = part.get("type")
        at = f"{where}[{k}]"
        if kind == "text":
            parts.append(Text(_str(part.get("text"), f"{at}.text")))
        elif kind in ("image", "document"):
            parts.append(_media(kind, _obj(part.get("source"), f"{at}.source"), at, part))
        elif kind in ("audio", "video"):
            raise InputError(f"{at} is {kind}, which no nacelle backend takes")
        else:
            raise InputError(f"{at}.type must be text, image or document")
    return parts


def _media(kind: str, source: Mapping[str, Any], at: str, part: Mapping[str, Any]) -> Part:
    if source.get("type") != "data":
        raise InputError(f"{at}.source must carry its bytes inline (type \"data\"); the "
                         "server fetches no URL or file a client names")
    mime = _str(source.get("mimeType"), f"{at}.source.mimeType").lower()
    value = _str(source.get("value"), f"{at}.source.value", empty=False)
    if value.startswith("data:"):  # a data URL: what follows its comma is the base64
        value = value.partition(",")[2]
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{at}.source.value is not base64") from None
    if kind == "image":
        if mime not in _IMAGE_TYPES:
            raise InputError(f"{at}.source.mimeType must be one of {', '.join(_IMAGE_TYPES)}")
        return Image(mime, value)
    if mime not in _DOCUMENT_TYPES:
        raise InputError(f"{at}.source.mimeType must be one of {', '.join(_DOCUMENT_TYPES)}")
    metadata = part.get("metadata")
    title = metadata.get("title") if isinstance(metadata, Mapping) else None
    return Document(mime, value, title if isinstance(title, str) else "")


def _with_context(conversation: List[Message], notes: List[str]) -> List[Message]:
    """The conversation with ``notes`` in a closing part of its last user message."""
    text = "Context from the application:\n" + "\n".join(f"- {n}" for n in notes)
    last = max(i for i, m in enumerate(conversation) if m.role is Role.USER)
    message = conversation[last]
    out = list(conversation)
    out[last] = Message(Role.USER, message.parts + (Text(text),))
    return out
