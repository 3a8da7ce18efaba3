"""Conversations: Role, Message, the closed set of parts, and their JSON form.

A conversation is a list of :class:`Message` values, each a role and a tuple of
parts. The parts are a closed set of frozen dataclasses — consumers match on the
type — and two of them carry provider state the core never interprets:
``Reasoning.state`` (signatures, encrypted reasoning) and :class:`ProviderBlock`
(server tool use, MCP blocks, search results). Both are replayed unchanged to the
protocol that produced them and dropped for another.

``ToolCall.input`` is the raw JSON text the model wrote, kept byte for byte: a
provider that signs or caches a prefix must get back exactly what it sent.

``dumps`` / ``loads`` are lossless (equal values after a round trip); ``loads``
raises :class:`~nacelle.errors.ConversationError`, a ``ValueError``, naming the
path of whatever it cannot read — and only that, whatever the text holds: it is
read with :func:`nacelle.sse.parse_json`, the reader for JSON from outside (no
``NaN``, no runaway nesting), and a value it quotes is cut short. ``trim``
returns ``(kept, dropped)`` where ``dropped`` is the number of messages left out.

No lone UTF-16 surrogate is stored. :func:`well_formed` joins a pair split in two
and replaces a lone half with U+FFFD, as a UTF-8 decoder does with a broken
sequence; the backends apply it to what they stream, the tool loop to every result,
and ``dumps`` to what it writes, so a session file, a checkpoint or a request body
never meets the ``UnicodeEncodeError`` a lone half raises in any UTF-8 encoder.

Media: :class:`Image` and :class:`Document` hold base64 data. Their ``from_bytes`` and
``from_path`` constructors name the media type from the bytes' magic numbers, never from
a file name, refuse what they cannot name and what is larger than any provider takes
(:data:`MAX_IMAGE_BYTES`, :data:`MAX_DOCUMENT_BYTES`), and encode the bytes once. A
:class:`ToolResult` holds a tool's media in ``content`` and their text in ``result``.

Core module: imports the standard library, ``errors``, ``events`` and ``sse`` (a leaf).
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Type, Union,
)

from .errors import ConfigError, ConversationError
from .events import Stop

__all__ = [
    "Citation",
    "Document",
    "Finish",
    "Image",
    "MAX_DOCUMENT_BYTES",
    "MAX_IMAGE_BYTES",
    "Message",
    "Part",
    "ProviderBlock",
    "Reasoning",
    "Role",
    "Text",
    "ToolCall",
    "ToolMedia",
    "ToolResult",
    "assistant_text",
    "decoded_size",
    "dumps",
    "loads",
    "trim",
    "user_text",
    "well_formed",
]

REPLACEMENT = "\ufffd"
#: Strings longer than this are checked for surrogates a slice at a time, so that the
#: check's UTF-8 copy stays small.
_CHECK_SLICE = 1 << 16


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a UTF-16 surrogate half (paired or not: a Python string
    holds a pair as two code points). Constant time for ASCII; otherwise the strict
    UTF-8 encoder, which refuses exactly the surrogates, is asked: it runs two to
    three times as fast as a regular expression's search for the range (70 against
    180 µs over 100 KB of accented text, a tool's result or a sub-agent's answer)."""
    if text.isascii():
        return False
    try:
        if len(text) <= _CHECK_SLICE:
            text.encode("utf-8")
        else:
            for at in range(0, len(text), _CHECK_SLICE):
                text[at:at + _CHECK_SLICE].encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def well_formed(text: str) -> str:
    """``text`` with each surrogate pair joined into its character and each lone half
    replaced by U+FFFD; ``text`` itself when it holds no surrogate (the usual case,
    checked in constant time for ASCII)."""
    if not has_surrogate(text):
        return text
    # UTF-16 pairs what is a pair and "replace" marks what is not; surrogatepass lets
    # the halves through the encoder so the decoder can judge them.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class Role(str, enum.Enum):
    """Who wrote a message."""

    USER = "user"
    ASSISTANT = "assistant"

    def __repr__(self) -> str:
        return f"Role.{self.name}"

    __str__ = str.__str__


@dataclass(frozen=True)
class Citation:
    """A source a provider says a piece of its answer rests on: the page's ``url`` and
    ``title`` and the ``cited_text`` quoted from it (each "" when the provider gave
    none).

    ``state`` is the provider's own citation object as JSON, kept so that the answer
    goes back to the protocol that wrote it unchanged: Anthropic asks for the
    ``encrypted_index`` of a web search citation to be "passed back for multi-turn
    conversations" (https://platform.claude.com/docs/en/agents-and-tools/tool-use/
    web-search-tool, "Citations"). Its ``type`` names the shape (Anthropic's
    ``web_search_result_location``, ``char_location`` ...; OpenAI's ``url_citation``),
    so a backend replays only its own.
    """

    url: str = ""
    title: str = ""
    cited_text: str = ""
    state: str = ""


@dataclass(frozen=True)
class Text:
    """Plain text, with the sources the provider cited for it (``citations``, in the
    order it gave them; empty for most text)."""

    text: str
    citations: Tuple[Citation, ...] = ()

    if TYPE_CHECKING:  # the generated __init__, as a checker should see it
        def __init__(self, text: str, citations: Iterable[Citation] = ()) -> None:
            ...

    def __post_init__(self) -> None:
        if self.citations and not isinstance(self.citations, tuple):
            object.__setattr__(self, "citations", tuple(self.citations))


#: The largest request any provider nacelle speaks to documents, in bytes: Anthropic's
#: 32 MB ("Maximum request size: 32MB ... Both limits are on the entire request
#: payload", https://platform.claude.com/docs/en/build-with-claude/pdf-support; the
#: vision page gives the same 32 MB request limit,
#: https://platform.claude.com/docs/en/build-with-claude/vision). A part larger than a
#: whole request can reach no provider, so ``from_bytes`` / ``from_path`` refuse it
#: before it is read whole or encoded (MB taken as MiB, as Anthropic's own error
#: counts it: "image exceeds 5 MB maximum: ... > 5242880 bytes").
_LARGEST_REQUEST = 32 * 1024 * 1024

#: The largest image ``Image.from_bytes`` / ``from_path`` take, in bytes before base64.
#: The cap is the largest documented request, not the smallest per-image limit:
#: Anthropic refuses an image over 5 MB ("Maximum image size: 5MB per image" on the
#: vision page above), but that limit is one provider's, and a cap here would refuse
#: an image another backend takes; an image over it sent to Anthropic fails there with
#: the API's own error, which names the size ("image exceeds 5 MB maximum").
MAX_IMAGE_BYTES = _LARGEST_REQUEST

#: The largest document ``Document.from_bytes`` / ``from_path`` take, in bytes before
#: base64: the same largest documented request (PDFs: 32 MB and 100 pages per request
#: on Anthropic, which counts base64 and the rest of the request against it, so a PDF
#: near the cap still fails there with the provider's own error).
MAX_DOCUMENT_BYTES = _LARGEST_REQUEST

_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_DOCUMENT_TYPES = ("application/pdf", "text/plain")
# Names some callers write for a type we know; the part always holds the canonical one.
_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg"}


def _sniff(data: bytes) -> str:
    """The media type the bytes' magic numbers name, or '' when none does.

    The signatures: PNG (RFC 2083 §3.1, https://www.rfc-editor.org/rfc/rfc2083#section-3.1),
    JPEG's SOI marker then a marker (ITU T.81 B.1.1.3), GIF87a/GIF89a
    (https://www.w3.org/Graphics/GIF/spec-gif89a.txt §17), WebP's RIFF container
    (https://developers.google.com/speed/webp/docs/riff_container), PDF's header
    (ISO 32000-1 §7.5.2); text/plain is what decodes as UTF-8 and holds no NUL (the
    test file(1) and the WHATWG sniffing algorithm use to tell text from binary,
    https://mimesniff.spec.whatwg.org/#identifying-a-resource-with-an-unknown-mime-type)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    if data and b"\x00" not in data and _is_utf8(data):
        return "text/plain"
    return ""


def _is_utf8(data: bytes) -> bool:
    """True when ``data`` is UTF-8, checked a megabyte at a time so a 32 MB text is not
    held again as a str (up to four times its size) only to be checked."""
    if data.isascii():
        return True
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    step = 1 << 20
    try:
        for start in range(0, len(view), step):
            decoder.decode(view[start:start + step], final=start + step >= len(view))
    except UnicodeDecodeError:
        return False
    return True


def _named(data: bytes, media_type: Optional[str], allowed: Tuple[str, ...], what: str,
           cap: int) -> str:
    """The media type of ``data`` for a part of kind ``what``: at most ``cap`` bytes,
    sniffed, checked against what the caller said, and one of ``allowed``; a
    ConfigError otherwise."""
    if not isinstance(data, (bytes, bytearray)):
        raise ConfigError(f"{what}.from_bytes takes bytes, got {type(data).__name__}")
    if len(data) > cap:  # before sniffing: a huge text is not decoded to be refused
        raise ConfigError(f"{what}: {len(data):,} bytes is larger than {cap:,} bytes,"
                          " more than any provider takes")
    sniffed = _sniff(bytes(data))
    if media_type is not None:
        if not isinstance(media_type, str):
            raise ConfigError(f"media_type must be a string, got {type(media_type).__name__}")
        given = media_type.split(";", 1)[0].strip().lower()
        given = _ALIASES.get(given, given)
        if given not in allowed:
            raise ConfigError(f"{what} media type must be one of {', '.join(allowed)};"
                              f" got {_quoted(media_type)}")
        if sniffed != given:
            found = f"the bytes are {sniffed}" if sniffed else "the bytes are no type nacelle knows"
            raise ConfigError(f"{what}: media_type {_quoted(media_type)} but {found}")
    if not sniffed:
        raise ConfigError(f"{what}: cannot tell the media type from the bytes (expected"
                          f" {', '.join(allowed)}); empty or unknown data")
    if sniffed not in allowed:
        other = "Image" if sniffed in _IMAGE_TYPES else "Document"
        raise ConfigError(f"{what}: the bytes are {sniffed}; use {other}.from_bytes")
    return sniffed


def _read_capped(path: Union[str, "os.PathLike[str]"], cap: int, what: str) -> bytes:
    """A file's bytes, refused as a ConfigError past ``cap`` before more than ``cap + 1``
    bytes are read (a stat size can lie: a FIFO or /dev/zero says 0)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(cap + 1)
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {_quoted(os.fspath(path))}:"
                          f" {exc.strerror or type(exc).__name__}") from None
    if len(data) > cap:
        raise ConfigError(f"{what}: {_quoted(os.fspath(path))} is larger than {cap:,} bytes,"
                          " more than any provider takes")
    return data


def decoded_size(data: str) -> int:
    """How many bytes the base64 text ``data`` stands for, without decoding it (a
    note about an image says its size; decoding 20 MB to count them would hold it twice)."""
    size = len(data)
    padding = 2 if data.endswith("==") else 1 if data.endswith("=") else 0
    return max(0, size * 3 // 4 - padding)


def _encode(data: Union[bytes, bytearray]) -> str:
    """``data`` as base64 text, encoded once: the encoder's ASCII bytes live only until
    the text is made from them, and the part keeps the text alone, so a large file's
    base64 is held once (what the wires send is made from this text as they write)."""
    import base64  # only a part made from bytes needs it: not loaded with the core

    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True, repr=False)  # its own __repr__ below
class Image:
    """An image: its media type (``image/png``) and base64 data without a ``data:`` prefix."""

    media_type: str
    data: str

    def __repr__(self) -> str:
        return f"Image(media_type={self.media_type!r}, data=<{len(self.data)} base64 chars>)"

    @classmethod
    def from_bytes(cls, data: bytes, media_type: Optional[str] = None) -> "Image":
        """An Image of raw bytes (PNG, JPEG, GIF or WebP, told by their magic numbers).

        ``media_type``, when given, must agree with the bytes. Unknown bytes, a type
        that contradicts them and more than :data:`MAX_IMAGE_BYTES` are a ConfigError."""
        kind = _named(data, media_type, _IMAGE_TYPES, "Image", MAX_IMAGE_BYTES)
        return cls(kind, _encode(data))

    @classmethod
    def from_path(cls, path: Union[str, "os.PathLike[str]"]) -> "Image":
        """An Image of a file, its type told by its bytes (never its name)."""
        return cls.from_bytes(_read_capped(path, MAX_IMAGE_BYTES, "Image"))


@dataclass(frozen=True, repr=False)  # its own __repr__ below
class Document:
    """A document: ``application/pdf`` or ``text/plain``, base64 data without a ``data:``
    prefix, and a ``title`` the providers that take one show the model."""

    media_type: str
    data: str
    title: str = ""

    def __repr__(self) -> str:
        title = f", title={self.title!r}" if self.title else ""
        return (f"Document(media_type={self.media_type!r},"
                f" data=<{len(self.data)} base64 chars>{title})")

    @classmethod
    def from_bytes(cls, data: bytes, media_type: Optional[str] = None,
                   title: str = "") -> "Document":
        """A Document of raw bytes: a PDF (``%PDF-``) or UTF-8 text without NUL.

        ``media_type``, when given, must agree with the bytes. Unknown bytes, an image,
        a type that contradicts the bytes and more than :data:`MAX_DOCUMENT_BYTES` are a
        ConfigError."""
        if not isinstance(title, str):
            raise ConfigError(f"title must be a string, got {type(title).__name__}")
        kind = _named(data, media_type, _DOCUMENT_TYPES, "Document", MAX_DOCUMENT_BYTES)
        return cls(kind, _encode(data), title)

    @classmethod
    def from_path(cls, path: Union[str, "os.PathLike[str]"],
                  title: Optional[str] = None) -> "Document":
        """A Document of a file, its type told by its bytes; ``title`` defaults to the
        file's name."""
        data = _read_capped(path, MAX_DOCUMENT_BYTES, "Document")
        if title is None:
            title = os.path.basename(os.fspath(path))
        return cls.from_bytes(data, title=title)


#: The parts a tool's result may hold in ``ToolResult.content``.
ToolMedia = Union[Text, Image, Document]
_MEDIA_TYPES = (Text, Image, Document)


@dataclass(frozen=True)
class Reasoning:
    """The model's reasoning. ``state`` is opaque provider state (a signature, the
    encrypted form) replayed only to ``protocol``, the provider that produced it."""

    text: str
    state: str = ""
    protocol: str = ""


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for. ``input`` is the raw JSON text, byte for byte.

    ``finished`` is false for a call whose input was cut off (the turn hit
    max_tokens mid-call): it is kept so a reader can see it, and never sent back.
    """

    id: str
    name: str
    input: str
    finished: bool = True


@dataclass(frozen=True)
class ToolResult:
    """The answer to the call with the same ``id``; ``failed`` when it is an error.

    ``content`` holds the parts (Text, Image, Document) of a tool that returned media,
    and is empty for one that returned text; ``result`` is always the text the model
    reads (the Text parts joined with newlines when there is ``content``). A list given
    as ``content`` becomes a tuple."""

    id: str
    name: str
    result: str
    failed: bool = False
    content: Tuple[ToolMedia, ...] = ()

    if TYPE_CHECKING:  # the generated __init__, as a checker should see it
        def __init__(self, id: str, name: str, result: str, failed: bool = False,
                     content: Iterable[ToolMedia] = ()) -> None:
            ...

    def __post_init__(self) -> None:
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))
        for part in self.content:
            if not isinstance(part, _MEDIA_TYPES):
                raise ConversationError(
                    "a tool result's content holds Text, Image and Document parts;"
                    f" got {type(part).__name__}")


@dataclass(frozen=True)
class Finish:
    """Why the assistant message before it ended; recorded by the loop, never sent."""

    stop: Stop


@dataclass(frozen=True)
class ProviderBlock:
    """A provider content block the core does not model, kept as its JSON text and
    replayed unchanged to ``protocol``."""

    protocol: str
    data: str


Part = Union[Text, Image, Document, Reasoning, ToolCall, ToolResult, Finish, ProviderBlock]
_PART_TYPES = (Text, Image, Document, Reasoning, ToolCall, ToolResult, Finish, ProviderBlock)


@dataclass(frozen=True)
class Message:
    """One message: a role and a tuple of parts (a list given here becomes a tuple)."""

    role: Role
    parts: Tuple[Part, ...]

    if TYPE_CHECKING:  # the generated __init__, as a checker should see it
        def __init__(self, role: Role, parts: Iterable[Part]) -> None:
            ...

    def __post_init__(self) -> None:
        if not isinstance(self.role, Role):
            try:
                object.__setattr__(self, "role", Role(self.role))
            except ValueError:
                raise ConversationError(f"unknown role {self.role!r}") from None
        if not isinstance(self.parts, tuple):
            object.__setattr__(self, "parts", tuple(self.parts))
        for part in self.parts:
            if not isinstance(part, _PART_TYPES):
                raise ConversationError(
                    f"a message part must be one of {', '.join(t.__name__ for t in _PART_TYPES)};"
                    f" got {type(part).__name__}"
                )

    @property
    def text(self) -> str:
        """The message's Text parts joined."""
        return "".join(p.text for p in self.parts if isinstance(p, Text))

    @property
    def tool_calls(self) -> Tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    @property
    def tool_results(self) -> Tuple[ToolResult, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolResult))


def user_text(text: str) -> Message:
    """A user message holding one Text part."""
    return Message(Role.USER, (Text(text),))


def assistant_text(text: str) -> Message:
    """An assistant message holding one Text part."""
    return Message(Role.ASSISTANT, (Text(text),))


def trim(conversation: Sequence[Message], keep: int) -> Tuple[List[Message], int]:
    """Keep the newest messages, at most ``keep`` of them, without splitting a tool call
    from its result.

    Returns ``(kept, dropped)``: the new list and how many messages were left out.
    The kept list is the longest suffix of at most ``keep`` messages in which every
    result has its call: a ToolResult's ToolCall, and a provider's server-tool result
    block (its ``tool_use_id``) the block that opened it (its ``id``) — however many
    messages stand between them, a paused server-tool turn included. So it never starts
    with a ToolResult the provider would reject as orphaned. The input is not mutated.
    """
    if keep < 0:
        raise ValueError(f"keep must be zero or more, got {keep}")
    messages = list(conversation)
    earliest = max(0, len(messages) - keep)
    # Walk back from the end, keeping the results whose call is not yet seen: a suffix
    # is whole where nothing is owed. One pass, so trimming stays linear.
    owed: Set[str] = set()
    start = len(messages)
    for index in range(len(messages) - 1, earliest - 1, -1):
        calls, results = _tool_ids(messages[index])
        owed |= results
        owed -= calls
        if not owed:
            start = index
    return messages[start:], start


def _tool_ids(message: Message) -> Tuple[Set[str], Set[str]]:
    """The call ids a message opens and the result ids it answers."""
    calls: Set[str] = set()
    results: Set[str] = set()
    for part in message.parts:
        if isinstance(part, ToolCall):
            calls.add(part.id)
        elif isinstance(part, ToolResult):
            results.add(part.id)
        elif isinstance(part, ProviderBlock):
            block = _provider_block_ids(part.data)
            if block is not None:
                opened, answered = block
                if opened:
                    calls.add(opened)
                if answered:
                    results.add(answered)
    return calls, results


def _provider_block_ids(data: str) -> Optional[Tuple[str, str]]:
    """``(id, tool_use_id)`` of a provider block's JSON (either may be ''), or None.

    Provider blocks are opaque, but the providers that have server tools agree on
    these two keys (Anthropic's ``server_tool_use`` / ``mcp_tool_use`` carry ``id``,
    their results ``tool_use_id``), and pairing is all trim needs to know."""
    if "tool_use" not in data and '"id"' not in data:
        return None
    from .sse import parse_json  # a backend has loaded it; import nacelle need not

    try:
        block = parse_json(data)
    except ValueError:
        return None
    if not isinstance(block, dict):
        return None
    opened, answered = block.get("id"), block.get("tool_use_id")
    return (opened if isinstance(opened, str) and "tool_use" in str(block.get("type", "")) else "",
            answered if isinstance(answered, str) else "")


# -- JSON ------------------------------------------------------------------------

def _part_to_json(part: Part) -> Dict[str, Any]:
    if isinstance(part, Text):
        if part.citations:  # absent when empty: plain text is written as before
            return {"type": "text", "text": part.text,
                    "citations": [_citation_to_json(c) for c in part.citations]}
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        return {"type": "image", "media_type": part.media_type, "data": part.data}
    if isinstance(part, Document):
        return {"type": "document", "media_type": part.media_type, "data": part.data,
                "title": part.title}
    if isinstance(part, Reasoning):
        return {"type": "reasoning", "text": part.text, "state": part.state,
                "protocol": part.protocol}
    if isinstance(part, ToolCall):
        return {"type": "tool_call", "id": part.id, "name": part.name,
                "input": part.input, "finished": part.finished}
    if isinstance(part, ToolResult):
        out = {"type": "tool_result", "id": part.id, "name": part.name,
               "result": part.result, "failed": part.failed}
        if part.content:  # absent when empty: a text-only result is written as before
            out["content"] = [_part_to_json(p) for p in part.content]
        return out
    if isinstance(part, Finish):
        return {"type": "finish", "stop": part.stop.value}
    if isinstance(part, ProviderBlock):
        return {"type": "provider_block", "protocol": part.protocol, "data": part.data}
    raise TypeError(f"not a message part: {part!r}")


def _citation_to_json(citation: Citation) -> Dict[str, str]:
    return {"url": citation.url, "title": citation.title, "cited_text": citation.cited_text,
            "state": citation.state}


_CITATION_FIELDS = ("url", "title", "cited_text", "state")


def _citation_from_json(raw: Any, path: str) -> Citation:
    if not isinstance(raw, dict):
        raise ConversationError(f"{path}: expected an object, got {type(raw).__name__}")
    for key, value in raw.items():
        if key not in _CITATION_FIELDS:
            raise ConversationError(f"{path}.{str(key)[:80]}: unknown field for a citation")
        if type(value) is not str:
            raise ConversationError(f"{path}.{key}: expected str, got {type(value).__name__}")
    return Citation(**raw)


def dumps(conversation: Iterable[Message]) -> str:
    """The conversation as JSON text; :func:`loads` gives back equal values."""
    return well_formed(json.dumps(
        [
            {"role": m.role.value, "parts": [_part_to_json(p) for p in m.parts]}
            for m in conversation
        ],
        ensure_ascii=False,
    ))


# type name -> (class, {field: (python type, required)})
_SCHEMA: Dict[str, Tuple[Type[Any], Dict[str, Tuple[type, bool]]]] = {
    "text": (Text, {"text": (str, True), "citations": (list, False)}),
    "image": (Image, {"media_type": (str, True), "data": (str, True)}),
    "document": (Document, {"media_type": (str, True), "data": (str, True),
                            "title": (str, False)}),
    "reasoning": (Reasoning, {"text": (str, True), "state": (str, False),
                              "protocol": (str, False)}),
    "tool_call": (ToolCall, {"id": (str, True), "name": (str, True), "input": (str, True),
                             "finished": (bool, False)}),
    "tool_result": (ToolResult, {"id": (str, True), "name": (str, True),
                                 "result": (str, True), "failed": (bool, False),
                                 "content": (list, False)}),
    "finish": (Finish, {"stop": (str, True)}),
    "provider_block": (ProviderBlock, {"protocol": (str, True), "data": (str, True)}),
}


def _part_from_json(raw: Any, path: str) -> Part:
    if not isinstance(raw, dict):
        raise ConversationError(f"{path}: expected an object, got {type(raw).__name__}")
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in _SCHEMA:  # a list is unhashable
        raise ConversationError(f"{path}.type: unknown part type {_quoted(kind)}")
    cls, fields = _SCHEMA[kind]
    values: Dict[str, Any] = {}
    for key, value in raw.items():
        if key == "type":
            continue
        if key not in fields:
            raise ConversationError(f"{path}.{key}: unknown field for a {kind} part")
        expected, _ = fields[key]
        if type(value) is not expected:
            raise ConversationError(
                f"{path}.{key}: expected {expected.__name__}, got {type(value).__name__}"
            )
        values[key] = value
    for key, (_, required) in fields.items():
        if required and key not in values:
            raise ConversationError(f"{path}.{key}: missing")
    if "citations" in values:
        values["citations"] = tuple(_citation_from_json(item, f"{path}.citations[{j}]")
                                    for j, item in enumerate(values["citations"]))
    if "content" in values:
        content = []
        for j, item in enumerate(values["content"]):
            inner = _part_from_json(item, f"{path}.content[{j}]")
            if not isinstance(inner, _MEDIA_TYPES):
                raise ConversationError(
                    f"{path}.content[{j}].type: a tool result's content holds text, image"
                    f" and document parts, not {_quoted(item.get('type'))}")
            content.append(inner)
        values["content"] = tuple(content)
    if cls is Finish:
        try:
            values["stop"] = Stop(values["stop"])
        except ValueError:
            raise ConversationError(
                f"{path}.stop: unknown stop {_quoted(values['stop'])}") from None
    part: Part = cls(**values)
    return part


def loads(text: Union[str, bytes]) -> List[Message]:
    """Read a conversation written by :func:`dumps`.

    Raises :class:`~nacelle.errors.ConversationError` (a ``ValueError``) naming the
    path of the first value it cannot read.
    """
    from .sse import parse_json  # a backend has loaded it; import nacelle need not

    try:
        raw = parse_json(text)
    except ValueError as exc:
        raise ConversationError(f"not JSON: {str(exc)[:120]}") from None
    if not isinstance(raw, list):
        raise ConversationError(f"$: expected a list of messages, got {type(raw).__name__}")
    messages = []
    for i, item in enumerate(raw):
        path = f"[{i}]"
        if not isinstance(item, dict):
            raise ConversationError(f"{path}: expected an object, got {type(item).__name__}")
        extra = set(item) - {"role", "parts"}
        if extra:
            raise ConversationError(f"{path}.{sorted(extra)[0][:80]}: unknown message field")
        role = item.get("role")
        if role not in ("user", "assistant"):
            raise ConversationError(f"{path}.role: unknown role {_quoted(role)}")
        parts = item.get("parts")
        if not isinstance(parts, list):
            raise ConversationError(f"{path}.parts: expected a list")
        messages.append(
            Message(Role(role), tuple(
                _part_from_json(p, f"{path}.parts[{j}]") for j, p in enumerate(parts)
            ))
        )
    return messages


def _quoted(value: Any) -> str:
    """``repr(value)`` cut to a length an error message can carry."""
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
