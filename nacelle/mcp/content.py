"""How MCP results become what nacelle holds: a ``tools/call`` result parts (or the
text a model reads), a ``resources/read`` result parts, a ``prompts/get`` result
messages.

A tool result's blocks become parts (https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool-result):
text blocks :class:`~nacelle.Text`; image blocks :class:`~nacelle.Image`; embedded
resources their text, an :class:`~nacelle.Image` for an image blob, a
:class:`~nacelle.Document` for a PDF blob and the text of a ``text/*`` blob; resource
links a Text with the URI, name and description, since the model may ask for it
through ``read_resource``. What no part can carry — audio, other blobs — is one
bracketed line the model reads (``[audio: audio/wav, 1,234 bytes]``).
``structuredContent`` becomes JSON text only when there is no content block at all,
because servers send its text mirror as a block anyway. :func:`result_text` is the
text-only view (``MCPClient.call_tool``), where every medium is such a line.

The bytes are the server's data, and checked as such: the base64 must be
well-formed, its length is checked against the cap :mod:`nacelle.messages` sets
(``MAX_IMAGE_BYTES``, ``MAX_DOCUMENT_BYTES``) before anything is decoded, and the
media type must be one the sniffed bytes confirm (``Image.from_bytes`` /
``Document.from_bytes`` decide, so a server's ``image/png`` over a GIF, an SVG or a
truncated blob never reaches a provider as what it claims). A block that fails is not
the call's failure: it becomes a line saying what it was and why it is not shown, and
the rest of the result stands.

Resource contents and prompt messages go the same way: a prompt's ``assistant``
messages stay assistant messages; a role nacelle has no word for is refused.
``preview`` is how the client quotes a server's values in its errors and logs.

Outer ring (with the rest of the MCP client); imports the standard library,
nacelle's ``errors`` and ``messages`` and the package's ``errors``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, List, Mapping, Union

from ..errors import ConfigError
from ..messages import (
    MAX_DOCUMENT_BYTES, MAX_IMAGE_BYTES, Document, Image, Message, Part, Role, Text, ToolMedia,
)
from .errors import MCPError

__all__ = ["preview", "prompt_messages", "resource_parts", "result_parts", "result_text"]

# A resource's URI is the title a Document carries; a server's URI may be any length.
_TITLE_LIMIT = 200


def result_text(result: Mapping[str, Any]) -> str:
    """A ``tools/call`` result as text only, each medium described in one line."""
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    lines = [_block_text(block) for block in blocks]
    if not blocks and "structuredContent" in result:
        return json.dumps(result["structuredContent"], ensure_ascii=False)
    return "\n".join(line for line in lines if line)


def result_parts(result: Mapping[str, Any]) -> List[ToolMedia]:
    """A ``tools/call`` result as parts: images and PDFs as themselves, the rest as
    text (see the module docstring)."""
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    if not blocks and "structuredContent" in result:
        return [Text(json.dumps(result["structuredContent"], ensure_ascii=False))]
    parts = [_block_part(block) for block in blocks]
    return [part for part in parts if not (isinstance(part, Text) and not part.text)]


def _block_part(block: Any) -> ToolMedia:
    if isinstance(block, dict) and block.get("type") == "image":
        return _media("image", block.get("mimeType"), block.get("data"), "")
    if isinstance(block, dict) and block.get("type") == "resource":
        found = block.get("resource")
        res: Mapping[str, Any] = found if isinstance(found, dict) else {}
        if isinstance(res.get("blob"), str):
            # A blob that is text keeps the line saying which resource it is.
            return _blob_part(res, _block_text(block), f"{_resource_head(res)}]\n")
    return Text(_block_text(block))


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
        head = _resource_head(res)
        if isinstance(res.get("text"), str):
            return f"{head}]\n{res['text']}"
        return f"{head}, {_b64_size(res.get('blob'))}]"
    return f"[{kind} content]"


def _resource_head(res: Mapping[str, Any]) -> str:
    return f"[resource <{res.get('uri', '')}>" + (f", {res['mimeType']}" if res.get("mimeType") else "")


def _b64_size(data: Any) -> str:
    if not isinstance(data, str):
        return "no data"
    size = len(data.rstrip("=")) * 3 // 4
    return f"{size:,} bytes"


class _Refused(Exception):
    """Why a server's medium is not shown (internal: it becomes a line of text)."""


def _decoded(data: Any, cap: int) -> bytes:
    """A server's base64 as bytes: well-formed (RFC 4648 §4 alphabet and padding, no
    line breaks: https://www.rfc-editor.org/rfc/rfc4648#section-4) and at most ``cap``
    bytes, the length checked before anything is decoded."""
    if not isinstance(data, str):
        raise _Refused("no base64 data")
    if len(data) > (cap + 2) // 3 * 4:
        raise _Refused(f"larger than {cap:,} bytes, more than any provider takes")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _Refused("its data is not well-formed base64") from None


def _media(kind: str, mime: Any, data: Any, title: str) -> ToolMedia:
    """An image or PDF a server sent, checked; a line saying why not otherwise."""
    said = mime if isinstance(mime, str) and mime else None
    named = preview(said, 100) if said else "unknown type"
    try:
        if kind == "image":
            return Image.from_bytes(_decoded(data, MAX_IMAGE_BYTES), said)
        return Document.from_bytes(_decoded(data, MAX_DOCUMENT_BYTES), said, title)
    except (_Refused, ConfigError) as why:
        return Text(f"[{kind}: {named}, {_b64_size(data)}, "
                    f"not shown: {preview(str(why))}]")


def _blob_part(item: Mapping[str, Any], described: str, head: str = "") -> ToolMedia:
    """A resource blob: an image or a PDF as itself, ``text/*`` that is UTF-8 as
    ``head`` and its text, anything else ``described`` (what it is, as the server
    named it)."""
    mime = str(item.get("mimeType") or "")
    blob = item.get("blob")
    base = mime.split(";", 1)[0].strip().lower()
    if base.startswith("image/"):
        return _media("image", mime, blob, "")
    if base == "application/pdf":
        return _media("document", mime, blob, preview(str(item.get("uri") or ""), _TITLE_LIMIT))
    if base.startswith("text/"):
        try:
            text = _decoded(blob, MAX_DOCUMENT_BYTES).decode("utf-8")
        except (_Refused, UnicodeDecodeError):
            pass
        else:
            if "\x00" not in text:
                return Text(head + text)
    return Text(described)


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


def _resource_part(item: Any) -> ToolMedia:
    if not isinstance(item, dict):
        return Text(f"[unreadable content: {preview(item)}]")
    if isinstance(item.get("text"), str):
        return Text(item["text"])
    return _blob_part(item, f"[resource <{item.get('uri', '')}>: "
                            f"{item.get('mimeType') or 'unknown type'}, {_b64_size(item.get('blob'))}]")


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
        part: Union[ToolMedia, Part]
        if isinstance(block, dict) and block.get("type") == "image":
            part = _media("image", block.get("mimeType"), block.get("data"), "")
        elif isinstance(block, dict) and block.get("type") == "resource" and isinstance(
                block.get("resource"), dict):
            part = _resource_part(block["resource"])
        else:
            part = Text(_block_text(block))
        messages.append(Message(Role(item["role"]), (part,)))
    return messages
