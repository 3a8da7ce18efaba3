"""``estimate_tokens``: how many input tokens a conversation will cost, without a request.

A compaction threshold is checked before every request, so the estimate must be free:
no tokenizer, no network, one pass over the characters. It is calibrated, not exact,
and it is for thresholds only — never for billing (the provider's usage is the bill).

How it counts:

- Text (user and assistant text, tool inputs and results, provider blocks, the system
  prompt) costs one token per :data:`CHARS_PER_TOKEN` characters, counted as UTF-8
  bytes when the text is not ASCII: a CJK character is three bytes and about one
  token, so bytes over four land closer than characters over four.
- Every message costs :data:`MESSAGE_TOKENS` for its role framing, every tool call and
  result :data:`TOOL_PART_TOKENS` more (the block, its id and name), every image a fixed
  :data:`IMAGE_TOKENS` (Anthropic's figure for an image of about 1.15 megapixels, the
  size it scales larger ones down to), and the request itself :data:`REQUEST_TOKENS`.
  A tool result's images and documents count as the same parts in a message do.
- A plain-text document counts as text of its decoded size. A PDF counts
  :data:`PDF_PAGE_TOKENS` a page, for one page per :data:`PDF_PAGE_BYTES` of it (at
  least one): Anthropic bills each page as its text plus an image of it, "1,500-3,000
  tokens per page" for the text alone
  (https://platform.claude.com/docs/en/build-with-claude/pdf-support, "Estimate your
  costs").
  The pages are guessed from the size, not counted (counting means decoding and
  parsing the file before every request), so this is the roughest figure here.
- Tools are counted through their JSON (name, description, input schema), which
  tokenizes more densely than prose (:data:`JSON_CHARS_PER_TOKEN`), plus
  :data:`TOOL_PROMPT_TOKENS` once for the system prompt a provider adds when tools are
  present (Anthropic documents 346 tokens for ``tool_choice`` auto on Claude 4 models).
- Reasoning counts only in the current tool-use cycle — the assistant messages after
  the last user message that is not tool results. Providers drop earlier reasoning
  from the prompt (Anthropic strips thinking blocks of previous turns and does not bill
  them), and a recorded exchange shows exactly that. Signatures and encrypted state
  are never counted: they are verified, not read.
- ``Finish`` parts cost nothing: they are never sent.

Measured error: against 10 recorded Anthropic counts (``/v1/messages/count_tokens``
answers and ``usage.input_tokens`` of recorded requests, Claude Sonnet 3.7 to 4.5, kept
in ``tests/data/compaction/anthropic_counts.json`` with their sources) the median
absolute error is 6 %; every request of 100 tokens or more is within 25 % except the
two with a forced tool choice on Sonnet 4.5 (31-33 % low: that model's tool prompt is
larger than the documented one), and the short ones are within 5 tokens. Plain English
prose runs at about 5 characters a token, so a conversation of it is overestimated by
up to a quarter; code and JSON run denser and are underestimated: leave headroom in a
threshold (75 % of the context window is a sensible one).

Cost: one ``len`` per part, an ``isascii`` test per text, and the JSON of each tool —
10,000 agent-run messages (4 M characters) estimate in about 15 ms on CPython 3.11 and
27 ms on 3.9 (``benchmarks/estimate_tokens.py``).

Core module: imports the standard library and ``messages``.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence, Tuple

from .messages import (
    Document, Image, Message, ProviderBlock, Reasoning, Role, Text, ToolCall, ToolResult,
    decoded_size,
)

__all__ = ["estimate_tokens"]

CHARS_PER_TOKEN = 4.0
JSON_CHARS_PER_TOKEN = 3.0
REQUEST_TOKENS = 4
MESSAGE_TOKENS = 3
TOOL_PART_TOKENS = 16
IMAGE_TOKENS = 1600
#: a PDF page: the top of Anthropic's 1,500-3,000 text tokens, the page's image not added
PDF_PAGE_TOKENS = 3000
#: the bytes taken for one PDF page: an assumption (a page of text with its fonts), not
#: a measurement; a scanned page runs larger and is overestimated in pages
PDF_PAGE_BYTES = 50_000
TOOL_PROMPT_TOKENS = 346


def estimate_tokens(messages: Sequence[Message], system: str = "",
                    tools: Iterable[Any] = ()) -> int:
    """The estimated input tokens of a request holding ``messages``, ``system`` and
    ``tools`` (objects with ``name``, ``description`` and ``schema``). See the module
    docstring for the rules and their measured error."""
    chars = _length(system)
    fixed = REQUEST_TOKENS + MESSAGE_TOKENS * len(messages)
    cycle = _current_cycle(messages)
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, Text):
                chars += _length(part.text)
            elif isinstance(part, ToolResult):
                chars += _length(part.result) + len(part.name)
                fixed += TOOL_PART_TOKENS
                for media in part.content:  # its Text is the result counted above
                    if isinstance(media, Image):
                        fixed += IMAGE_TOKENS
                    elif isinstance(media, Document):
                        chars, fixed = _document(media, chars, fixed)
            elif isinstance(part, ToolCall):
                chars += _length(part.input) + len(part.name)
                fixed += TOOL_PART_TOKENS
            elif isinstance(part, Reasoning):
                if index >= cycle:
                    chars += _length(part.text)
            elif isinstance(part, ProviderBlock):
                chars += _length(part.data)
            elif isinstance(part, Image):
                fixed += IMAGE_TOKENS
            elif isinstance(part, Document):
                chars, fixed = _document(part, chars, fixed)
    tokens = fixed + chars / CHARS_PER_TOKEN
    schemas = [_tool_json(t) for t in tools]
    if schemas:
        tokens += TOOL_PROMPT_TOKENS + sum(len(s) for s in schemas) / JSON_CHARS_PER_TOKEN
    return int(tokens + 0.5)


def _document(document: Document, chars: int, fixed: int) -> Tuple[int, int]:
    """``(chars, fixed)`` with a document counted in (see the module docstring)."""
    size = decoded_size(document.data)
    if document.media_type == "application/pdf":
        return chars, fixed + PDF_PAGE_TOKENS * max(1, -(-size // PDF_PAGE_BYTES))
    return chars + size + len(document.title), fixed


def _length(text: str) -> int:
    """Characters of ASCII text, else its UTF-8 bytes (see the module docstring)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _current_cycle(messages: Sequence[Message]) -> int:
    """The index after the last user message that is not only tool results: where the
    current tool-use cycle, whose reasoning is still sent, starts."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role is Role.USER and not all(isinstance(p, ToolResult) for p in message.parts):
            return index + 1
    return 0


def _tool_json(tool: Any) -> str:
    return json.dumps({"name": getattr(tool, "name", ""),
                       "description": getattr(tool, "description", ""),
                       "input_schema": getattr(tool, "schema", {})},
                      separators=(",", ":"), default=str)
