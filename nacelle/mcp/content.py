"""How an MCP ``tools/call`` result becomes the text a model reads.

Text blocks are joined by newlines and embedded text resources inlined; images,
audio, binary resources and resource links are described in one bracketed line
each (``[image: image/png, 67 bytes]``), since a text tool result cannot carry the
bytes; ``structuredContent`` becomes JSON only when there is no content block at
all, because servers send its text mirror as a block anyway. ``preview`` is how the
client quotes a server's values in its errors and logs.

Outer ring (with the rest of the MCP client); imports the standard library only.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

__all__ = ["preview", "result_text"]


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
