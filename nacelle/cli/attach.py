"""Files attached to a prompt: ``nacelle -a FILE "prompt"`` (repeatable) and ``/attach
FILE`` in the interactive session, as ``llm -a`` attaches them.

What a file becomes is told by its bytes first (the magic numbers
:class:`nacelle.messages.Image` and :class:`~nacelle.messages.Document` sniff): a PNG,
JPEG, GIF or WebP is an :class:`~nacelle.messages.Image` part, a PDF a ``Document``
part, and UTF-8 text without NUL goes in as text — a ``Text`` part holding the file
inside the ``<document>`` / ``<source>`` / ``<document_content>`` tags Anthropic's
long-context guide recommends
(https://docs.anthropic.com/en/docs/build-with-claude/prompt-engineering/long-context-tips),
so every backend takes it, whether or not it reads documents. The extension is a
second witness: a name that says image or PDF over bytes that are not is refused,
since a file named ``scan.pdf`` that is really text is a mistake worth hearing about.
Anything else (a zip, an executable, UTF-16) is refused with a line saying what is
taken. Text is capped at :data:`MAX_TEXT_BYTES` (about 130,000 tokens, the most that
fits beside a conversation in a 200k context); images and PDFs at the caps of the
parts themselves.

Where files come from: local paths, and ``-`` for stdin (``cat shot.png | nacelle -a -
"what is this?"``). URLs are not taken: the parts carry bytes, not links, and fetching
a URL the user typed would need the SSRF guard for no gain over ``curl URL | nacelle
-a -``. Parts are attached before the prompt's text, as the providers advise for
images and long documents (the question after its material).

A backend that cannot take an image or a PDF (``Capabilities.images`` /
``Capabilities.documents``) is a one-line error before any request: :func:`check`.

Imports the standard library and the core's ``messages``, ``errors`` and ``settings``.
"""

from __future__ import annotations

import os
from typing import IO, Any, List, Optional, Sequence

from ..errors import ConfigError
from ..messages import MAX_DOCUMENT_BYTES, Document, Image, Message, Part, Role, Text
from ..settings import SettingsError

__all__ = ["MAX_TEXT_BYTES", "check", "describe", "read_attachment", "user_message"]

#: The largest text file attached whole (512 KiB).
MAX_TEXT_BYTES = 512 * 1024

# The signatures messages._sniff documents (PNG, JPEG, GIF, WebP, PDF); here only to
# pick which part to build, which then checks the bytes again.
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


def _kind(data: bytes) -> str:
    if data.startswith(_IMAGE_MAGIC) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
        return "image"
    if data.startswith(b"%PDF-"):
        return "pdf"
    return "other"


def _read(spec: str, stdin: Optional[IO[bytes]]) -> bytes:
    """The bytes of ``spec`` (a path, or ``-`` for ``stdin``), at most one past the
    largest part taken, so a huge file or an endless pipe is refused, not held."""
    cap = MAX_DOCUMENT_BYTES + 1
    try:
        if spec == "-":
            if stdin is None:
                raise SettingsError("--attach -: stdin is not available")
            return stdin.read(cap)
        with open(os.path.expanduser(spec), "rb") as handle:
            return handle.read(cap)
    except OSError as err:
        raise SettingsError(f"--attach {spec}: {err.strerror or type(err).__name__}") from None


def read_attachment(spec: str, *, stdin: Optional[IO[bytes]] = None) -> Part:
    """The part a file (or ``-``: ``stdin``, read as bytes) becomes; a SettingsError
    naming it when it cannot be read or is none of an image, a PDF or UTF-8 text."""
    data = _read(spec, stdin)
    name = "stdin" if spec == "-" else os.path.basename(spec.rstrip("/\\")) or spec
    kind = _kind(data)
    import mimetypes  # here: it reads the system's type tables when first asked

    guessed = (mimetypes.guess_type(name)[0] or "") if spec != "-" else ""
    said = "image" if guessed.startswith("image/") else "pdf" if guessed == "application/pdf" \
        else ""
    if said and kind != said:
        raise SettingsError(f"--attach {spec}: the name says {guessed}, but the bytes are not")
    try:
        if kind == "image":
            return Image.from_bytes(data)
        if kind == "pdf":
            return Document.from_bytes(data, title=name)
    except ConfigError as err:  # too large, or a damaged header
        raise SettingsError(f"--attach {spec}: {err}") from None
    if len(data) > MAX_TEXT_BYTES:
        raise SettingsError(f"--attach {spec}: a text file is attached whole, up to "
                            f"{MAX_TEXT_BYTES:,} bytes; this one is larger")
    if not data or b"\x00" in data:
        raise SettingsError(f"--attach {spec}: {'empty' if not data else 'a binary file'}; "
                            "attach an image (PNG, JPEG, GIF, WebP), a PDF or UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SettingsError(f"--attach {spec}: not UTF-8 text; attach an image (PNG, JPEG, "
                            "GIF, WebP), a PDF or UTF-8 text") from None
    return Text(f"<document>\n<source>{name}</source>\n<document_content>\n{text}"
                f"\n</document_content>\n</document>")


def check(parts: Sequence[Part], backend: Any, name: Optional[str] = None) -> None:
    """A SettingsError, before any request, when ``backend`` cannot take the images or
    PDFs in ``parts`` (what its ``capabilities`` say); ``name`` is the backend as the
    person chose it (``--backend deepseek``), where ``backend.name`` is its wire's."""
    caps, name = backend.capabilities, name or backend.name
    if any(isinstance(p, Image) for p in parts) and not caps.images:
        raise SettingsError(f"the {name} backend cannot take images (--attach)")
    if any(isinstance(p, Document) for p in parts) and not caps.documents:
        raise SettingsError(f"the {name} backend cannot take PDFs (--attach)")


def describe(part: Part) -> str:
    """One line naming an attached part, for the interactive session."""
    if isinstance(part, Image):
        return f"image ({part.media_type}, {len(part.data) * 3 // 4:,} bytes)"
    if isinstance(part, Document):
        return f"PDF {part.title}".rstrip()
    text = part.text if isinstance(part, Text) else ""
    source = text.split("<source>", 1)[-1].split("</source>", 1)[0] if "<source>" in text else ""
    return f"text {source} ({len(text):,} characters)"


def user_message(text: str, parts: Sequence[Part]) -> Message:
    """The user message for ``text`` with ``parts`` attached before it."""
    ordered: List[Part] = list(parts)
    ordered.append(Text(text))
    return Message(Role.USER, ordered)
