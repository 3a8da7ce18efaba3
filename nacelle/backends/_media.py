"""Where a tool's images and documents go on a wire that cannot take them all in the
tool result: :class:`Takes`, :func:`split`, :func:`follow_parts`, :func:`note` and
:func:`document_text`. Written once, so every wire says the same thing to its model.

A wire states what it takes as a :class:`Takes` (images at all; which document media
types; whether both can sit inside a tool result), and :func:`split` sorts one
result's parts:

- **inline**: the parts that go inside the tool result, in the tool's order (Text, and
  Image/Document where the wire takes media there);
- **follow**: the media the wire takes in a user message but not in a tool result
  (Chat Completions' ``tool`` message holds text only). They follow the results in one
  user message, each call's media after a line naming the call (:func:`follow_parts`),
  and the result's own text says they follow, so the model ties the two together;
- a **note** in place of what the wire cannot take at all
  (``[image: image/png, 12,345 bytes, from call call_1]``): the model learns the
  tool returned something it cannot see, rather than nothing;
- an image whose base64 is longer than the wire's ``max_image_base64`` becomes a note
  saying so: sent, it would fail the whole request (and every later one, since the
  result stays in the conversation), where the note lets the run go on;
- a ``text/plain`` document on a wire that takes none becomes its text, as OpenAI's
  guide asks for Chat Completions ("To use text from a file in Chat Completions, read
  the file in your application and send its contents as a text content part",
  https://developers.openai.com/api/docs/guides/file-inputs).

Outer ring: imports the standard library and nacelle's core (``messages``, ``errors``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, List, Sequence, Tuple, Union

from ..errors import ConfigError
from ..messages import Document, Image, Text, ToolResult

__all__ = ["ALL_DOCUMENTS", "Takes", "document_text", "filename", "follow_parts", "joined",
           "note", "size", "split", "too_large"]

#: The document media types a Document may hold.
ALL_DOCUMENTS: FrozenSet[str] = frozenset({"application/pdf", "text/plain"})

Media = Union[Image, Document]
Inline = Union[Text, Image, Document]


@dataclass(frozen=True)
class Takes:
    """What one wire takes: ``images`` anywhere, the ``documents`` media types it takes,
    and whether both go inside a tool result (``tool_media``)."""

    images: bool = False
    documents: FrozenSet[str] = frozenset()
    tool_media: bool = False
    #: The longest base64 text one image may have on this wire (0: no limit of its own).
    max_image_base64: int = 0


def too_large(part: Image, takes: Takes) -> bool:
    """Whether ``part`` is over the wire's per-image limit."""
    return bool(takes.max_image_base64) and len(part.data) > takes.max_image_base64


def size(part: Media) -> int:
    """The bytes ``part`` holds, from its base64 length (nothing is decoded)."""
    data = part.data
    padding = len(data) - len(data.rstrip("="))
    return max(0, len(data) * 3 // 4 - min(padding, 2))


def _what(part: Media) -> str:
    if isinstance(part, Image):
        return f"image: {part.media_type}"
    title = f' "{part.title}"' if part.title else ""
    return f"document: {part.media_type}{title}"


def note(part: Media, call_id: str, where: str = "") -> str:
    """The text standing for a tool's ``part``: ``[image: image/png, 12,345 bytes, from
    call <id>]`` — or, with ``where``, where the part itself went."""
    where = where or f"from call {call_id}"
    return f"[{_what(part)}, {size(part):,} bytes, {where}]"


def document_text(document: Document) -> str:
    """A ``text/plain`` document's text; a ConfigError when its data is not base64 of
    UTF-8 (a Document built by hand with bad data, not one ``from_bytes`` made)."""
    try:
        import base64  # a text document's bytes only: not loaded with the backends

        return base64.b64decode(document.data, validate=True).decode("utf-8")
    except ValueError:  # binascii.Error is one
        raise ConfigError(
            f"a text/plain Document{' ' + repr(document.title) if document.title else ''}"
            " does not hold base64 of UTF-8 text") from None


def filename(document: Document) -> str:
    """A file name for ``document`` where a wire wants one (OpenAI's ``filename``): its
    title, given the extension of its type when it lacks it; ``document.pdf`` or
    ``document.txt`` without a title."""
    extension = ".pdf" if document.media_type == "application/pdf" else ".txt"
    title = document.title.strip() or "document"
    return title if title.lower().endswith(extension) else title + extension


def split(result: ToolResult, takes: Takes) -> Tuple[Tuple[Inline, ...], Tuple[Media, ...]]:
    """``result``'s parts as (inline, follow); see the module docstring. A result
    without media is its ``result`` text, inline."""
    content = result.content
    if not content:
        return ((Text(result.result),) if result.result else ()), ()
    inline: List[Inline] = []
    follow: List[Media] = []
    for part in content:
        if isinstance(part, Image):
            if too_large(part, takes):
                inline.append(Text(note(part, result.id, (
                    f"from call {result.id}, not sent: its base64 is over the "
                    f"{takes.max_image_base64:,} characters this provider takes per image"))))
                continue
            taken = takes.images
        elif isinstance(part, Document):
            taken = part.media_type in takes.documents
            if not taken and part.media_type == "text/plain":
                inline.append(Text(document_text(part)))
                continue
        else:
            if isinstance(part, Text) and part.text:
                inline.append(part)
            continue
        if not taken:
            inline.append(Text(note(part, result.id)))
        elif takes.tool_media:
            inline.append(part)
        else:
            inline.append(Text(note(part, result.id, "sent after the tool results")))
            follow.append(part)
    return tuple(inline), tuple(follow)


def follow_parts(followed: Sequence[Tuple[ToolResult, Sequence[Media]]]) -> List[Inline]:
    """The parts of the user message that carries the results' media: for each call,
    a line naming it, then its media."""
    out: List[Inline] = []
    for result, media in followed:
        if media:
            out.append(Text(f"[tool call {result.id} ({result.name}) returned these]"))
            out.extend(media)
    return out


def joined(parts: Sequence[Inline]) -> str:
    """The text of inline parts, for a wire whose tool result is one string."""
    return "\n".join(p.text for p in parts if isinstance(p, Text))
