"""How MCP results become what nacelle holds: a ``tools/call`` result the text a
model reads, a ``resources/read`` result parts, a ``prompts/get`` result messages.

Text blocks are joined by newlines and embedded text resources inlined; images,
audio, binary resources and resource links are described in one bracketed line
each (``[image: image/png, 67 bytes]``), since a text tool result cannot carry the
bytes; ``structuredContent`` becomes JSON only when there is no content block at
all, because servers send its text mirror as a block anyway. ``preview`` is how the
client quotes a server's values in its errors and logs.

Resource contents and prompt messages may carry what a text cannot: an image (a
blob, or a prompt's image block, whose type is ``image/*``) becomes an
:class:`~nacelle.Image`, anything else binary a :class:`~nacelle.Text` saying what
it is. A prompt's ``assistant`` messages stay assistant messages; a role nacelle has
no word for is refused.

Outer ring (with the rest of the MCP client); imports the standard library,
nacelle's ``messages`` and the package's ``errors``.
"""

from __future__ import annotations

import json
from typing import Any, List, Mapping

from ..messages import Image, Message, Part, Role, Text
from .errors import MCPError

__all__ = ["preview", "prompt_messages", "resource_parts", "result_text"]


def result_text(result: Mapping[str, Any]) -> str:
    """A ``tools/call`` result as the text a model reads."""
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    lines = [_block_text(block) for block in blocks]
    if not blocks and "structuredContent" in result:
        return json.dumps(result["structuredContent"], ensure_ascii=False)
    return "\n".join(line for line in lines if line)


def _block_text(block: Any) -> str:
    if not isinstance(block, dict):
        return f"[unreadable content: {preview(block)}]"
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType', 'unknown type')}, {_b64_size(block.get('data'))}]"
    if kind == "resource_link":
        text = f"[resource link: {block.get('name') or block.get('title') or ''} <{block.get('uri', '')}>"
        if block.get("mimeType"):
            text += f", {block['mimeType']}"
        if block.get("description"):
            text += f": {block['description']}"
        return text + "]"
    if kind == "resource":
        found = block.get("resource")
        res: Mapping[str, Any] = found if isinstance(found, dict) else {}
        head = f"[resource <{res.get('uri', '')}>" + (f", {res['mimeType']}" if res.get("mimeType") else "")
        if isinstance(res.get("text"), str):
            return f"{head}]\n{res['text']}"
        return f"{head}, {_b64_size(res.get('blob'))}]"
    return f"[{kind} content]"


def _b64_size(data: Any) -> str:
    if not isinstance(data, str):
        return "no data"
    size = len(data.rstrip("=")) * 3 // 4
    return f"{size} bytes"


def preview(value: Any, limit: int = 200) -> str:
    """A value as text for a log line or an error, cut at ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def resource_parts(result: Mapping[str, Any]) -> List[Part]:
    """A ``resources/read`` result's ``contents`` as parts."""
    contents = result.get("contents")
    if not isinstance(contents, list):
        raise MCPError(f"a resources/read result without a list of contents: {preview(result)}")
    return [_resource_part(item) for item in contents]


def _resource_part(item: Any) -> Part:
    if not isinstance(item, dict):
        return Text(f"[unreadable content: {preview(item)}]")
    if isinstance(item.get("text"), str):
        return Text(item["text"])
    mime = str(item.get("mimeType") or "")
    blob = item.get("blob")
    if isinstance(blob, str) and mime.startswith("image/"):
        return Image(mime, blob)
    return Text(f"[resource <{item.get('uri', '')}>: {mime or 'unknown type'}, "
                f"{_b64_size(blob)}]")


def prompt_messages(result: Mapping[str, Any]) -> List[Message]:
    """A ``prompts/get`` result's ``messages`` as nacelle messages."""
    found = result.get("messages")
    if not isinstance(found, list):
        raise MCPError(f"a prompts/get result without a list of messages: {preview(result)}")
    messages = []
    for item in found:
        if not isinstance(item, dict) or item.get("role") not in ("user", "assistant"):
            raise MCPError(f"a prompt message nacelle cannot hold: {preview(item)}")
        block = item.get("content")
        if isinstance(block, dict) and block.get("type") == "image" and isinstance(
                block.get("data"), str):
            part: Part = Image(str(block.get("mimeType") or "image/png"), block["data"])
        elif isinstance(block, dict) and block.get("type") == "resource" and isinstance(
                block.get("resource"), dict):
            part = _resource_part(block["resource"])
        else:
            part = Text(_block_text(block))
        messages.append(Message(Role(item["role"]), (part,)))
    return messages
