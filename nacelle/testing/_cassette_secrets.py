"""What a cassette saves in place of secrets: which header and query names are secret,
and the request's secret values replaced in a saved body, a response's reads and its
headers (see ``cassette``'s docstring for the rules).

Private to ``nacelle.testing``; imports the standard library only.
"""

from __future__ import annotations

import re
from typing import List, Sequence, Tuple

__all__ = ["SCRUBBED", "SECRET_HEADERS", "SHORTEST_SECRET", "is_secret", "redact",
           "redact_chunks", "redact_text", "saved_header"]

SCRUBBED = "<scrubbed>"

Chunk = Tuple[bytes, float]

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "cookie", "set-cookie",
                            "proxy-authorization"})
_SECRET_NAME = re.compile(r"key|token|secret", re.IGNORECASE)
SHORTEST_SECRET = 8  # a shorter value would be replaced wherever it happens to occur


def is_secret(name: str) -> bool:
    """Whether a header or query parameter so named carries a secret."""
    return name.lower() in SECRET_HEADERS or _SECRET_NAME.search(name) is not None


def redact(data: bytes, secrets: Sequence[bytes]) -> bytes:
    """``data`` (a body read whole) with the secrets replaced."""
    for secret in secrets:
        data = data.replace(secret, SCRUBBED.encode("ascii"))
    return data


def redact_text(text: str, secrets: Sequence[bytes]) -> str:
    """``text`` (a header line, a reason) with the secrets replaced."""
    for secret in secrets:
        text = text.replace(secret.decode("utf-8", "replace"), SCRUBBED)
    return text


def redact_chunks(chunks: Sequence[Chunk], secrets: Sequence[bytes], cut: bool) -> List[Chunk]:
    """The body's reads with every secret replaced as if they were one text — a secret
    split over two reads becomes one ``<scrubbed>`` in the read where it began, the
    rest of it dropped from the next — keeping the other boundaries as read. With
    ``cut`` (the body ended early) a tail that starts a secret goes too. A read left
    empty is left out: replayed, an empty HTTP chunk would end the body."""
    whole = b"".join(data for data, _ in chunks)
    spans = _secret_spans(whole, secrets, cut)
    if not spans:
        return list(chunks)
    scrubbed, kept, start, index = SCRUBBED.encode("ascii"), [], 0, 0
    for data, delay in chunks:
        end, position, piece = start + len(data), start, bytearray()
        while position < end:
            while index < len(spans) and spans[index][1] <= position:
                index += 1
            if index < len(spans) and spans[index][0] <= position:
                if spans[index][0] == position:
                    piece += scrubbed
                position = min(spans[index][1], end)
            else:
                stop = min(spans[index][0] if index < len(spans) else end, end)
                piece += whole[position:stop]
                position = stop
        if piece:
            kept.append((bytes(piece), delay))
        start = end
    return kept


def _secret_spans(whole: bytes, secrets: Sequence[bytes], cut: bool) -> List[Tuple[int, int]]:
    """Where the secrets are in ``whole``, as sorted, merged ``(start, end)`` spans."""
    spans = []
    for secret in secrets:
        found = whole.find(secret)
        while found >= 0:
            spans.append((found, found + len(secret)))
            found = whole.find(secret, found + len(secret))
    if cut:
        for secret in secrets:  # half a key is still half a key
            for size in range(min(len(secret) - 1, len(whole)), SHORTEST_SECRET // 2 - 1, -1):
                if whole.endswith(secret[:size]):
                    spans.append((len(whole) - size, len(whole)))
                    break
    merged: List[Tuple[int, int]] = []
    for begin, end in sorted(spans):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((begin, end))
    return merged


def saved_header(line: str, secrets: Sequence[bytes]) -> str:
    """A response header line as saved: a secret-bearing name's value scrubbed whole,
    any other's with the secrets replaced."""
    name, _, value = line.partition(":")
    if name.strip().lower() in SECRET_HEADERS:
        return f"{name}: {SCRUBBED}"
    return redact_text(line, secrets)
