"""A sans-IO decoder for Server-Sent Events: bytes in, :class:`SSEEvent` values out.

:class:`SSEDecoder` touches no socket and no clock: ``feed(chunk)`` returns the
events the chunk completed, ``close()`` ends the stream. It follows the WHATWG
"event stream interpretation" rules:

- UTF-8, one leading byte order mark stripped, invalid bytes replaced with U+FFFD;
- lines end at CR, LF or CRLF and nowhere else — never ``str.splitlines``, which
  also breaks at U+2028 and friends, all legal unescaped inside JSON strings. A CRLF
  split across two feeds is one line break;
- ``:`` lines are comments (OpenRouter's ``: OPENROUTER PROCESSING`` keepalive);
- a field with no colon has an empty value; one space after the colon is dropped;
- data lines join with ``\\n``; a blank line dispatches the event only if a ``data``
  field was seen since the last one (a bare ``data:`` dispatches ``""``), and resets
  the event type either way;
- ``id`` persists across events and is ignored if it contains NUL; ``retry`` counts
  only when it is all ASCII digits; unknown fields are ignored.

:func:`parse_json` reads the JSON an event's data carries. It is the one JSON reader
for everything a peer sends us — event data, HTTP error bodies, saved conversations —
because the standard parser is too trusting for that: it accepts ``NaN`` and
``Infinity`` (which no JSON peer can read back, so a value replayed to a provider
would poison the next request), turns ``1e400`` into infinity, and meets a
hundred thousand ``[`` with ``RecursionError``. Each of these is a ``ValueError``
here, so callers keep the one ``except ValueError`` they already need for text
that is not JSON. The depth is counted before parsing, by ``bounded_json`` (the
one depth cap every reader of untrusted JSON shares).

Choices where the spec is silent:

- ``close()`` returns a list for symmetry with ``feed`` and, per the spec, drops an
  unterminated last event; ``truncated`` then says whether the body stopped inside
  an event (a line without its line break, or data lines without the blank line that
  dispatches them). Whether that matters is the caller's business.
- A ``retry`` above :data:`MAX_RETRY` milliseconds (about 25 days, the longest
  delay a browser's timer takes) is clamped to it, and its digits are never turned
  into an int of their own: five thousand of them would fail to parse on Python
  3.11, or overflow the float of seconds a consumer makes of them.
- ``max_line`` bounds one line *and* the data of one pending event: a peer that never
  sends a line break, or never a blank line, gets a :class:`~nacelle.errors.StreamError`
  instead of our memory. The decoder is unusable after that error.

Why it is shaped this way: this is the hot path of every model stream. Work stays in
C as long as possible — CR normalised by ``bytes.replace`` only when a CR is present,
the chunk split on ``b"\\n"`` once — and the Python loop works on bytes: ``data:``
lines first, ``event:`` lines looked up in a small cache of lines already seen, and
only field values are decoded. Decoding line by line is correct because lines split
at ASCII bytes, which never occur inside a multi-byte UTF-8 sequence; an incomplete
line is carried over as bytes, so a character split across feeds is decoded whole.
(Decoding a whole chunk at once measured slower: one emoji widens the chunk's text
to four bytes a character, and every line cut from it must be narrowed again.)
Events are built by filling the instance dict, which costs half the frozen dataclass
``__init__``; they are ordinary, equal and hashable ``SSEEvent`` values all the same.

Leaf module: imports the standard library, ``nacelle.errors`` and ``nacelle.bounded_json``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .bounded_json import COUNT_BELOW, MAX_DEPTH, TooDeep, brackets_exceed, depth_exceeds
from .errors import StreamError

__all__ = ["MAX_JSON_DEPTH", "MAX_RETRY", "SSEDecoder", "SSEEvent", "parse_json"]

#: The largest reconnection time kept, in milliseconds; larger ones are clamped to it.
MAX_RETRY = 2**31 - 1

#: How deep :func:`parse_json` lets containers nest: ``bounded_json.MAX_DEPTH``. Real
#: payloads nest a handful of levels. The bound sits well below Python's recursion
#: limit because a value read here is often written again (a provider block replayed
#: in the next request), and the serialiser recurses once a level too, from deeper in
#: the stack.
MAX_JSON_DEPTH = MAX_DEPTH


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event.

    ``id`` is the last event ID in force when the event was dispatched (it persists
    across events); ``retry`` the last valid reconnection time in milliseconds, or
    None if the stream never set one.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: Optional[int] = None


_new_event = object.__new__


class SSEDecoder:
    """Turn the bytes of an ``text/event-stream`` body into :class:`SSEEvent` values.

    ``feed(data)`` accepts any bytes-like chunk, however the body was split, and
    returns the events it completed. ``close()`` ends the stream; afterwards
    ``truncated`` tells whether an unterminated event was dropped.
    """

    __slots__ = (
        "max_line", "truncated", "_parts", "_pending", "_cr", "_start", "_closed", "_broken",
        "_names", "_event", "_data", "_more", "_data_seen", "_data_size", "_id", "_retry",
    )

    def __init__(self, max_line: int = 16 * 2**20) -> None:
        if not isinstance(max_line, int) or isinstance(max_line, bool) or max_line < 1:
            raise ValueError(f"max_line must be a positive int, got {max_line!r}")
        self.max_line = max_line
        self.truncated = False
        self._parts: List[bytes] = []  # the pieces of an incomplete line, still bytes
        self._pending = 0  # their total length
        self._cr = False  # the last byte fed was CR: a LF starting the next feed is its pair
        self._start = True  # no line decoded yet: a BOM may still come
        self._closed = False
        self._broken = False
        self._names: Dict[bytes, str] = {}  # "event: x" lines seen, decoded once
        self._event = ""
        self._data: Optional[str] = None  # None: no data field since the last dispatch
        self._more: Optional[List[str]] = None
        self._data_seen = 0  # how many pending data lines _data_size has counted
        self._data_size = 0
        self._id = ""
        self._retry: Optional[int] = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<SSEDecoder {state}, {self._pending} bytes buffered>"

    def feed(self, data: bytes) -> List[SSEEvent]:
        """Decode ``data`` and return the events it completed, in order."""
        if type(data) is not bytes:
            data = _as_bytes(data)
        if self._closed:
            raise RuntimeError("SSEDecoder.feed() called after close()")
        if self._broken:
            raise StreamError("the event stream already failed; start a new decoder")
        if not data:
            return []
        if self._cr:
            self._cr = False
            if data[:1] == b"\n":
                data = data[1:]
                if not data:
                    return []
        if b"\r" in data:
            # A CR ending the chunk completes its line now; remember it so that a LF
            # opening the next chunk is taken as the second half of a CRLF.
            self._cr = data[-1:] == b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = data.rfind(b"\n")
        if end < 0:
            # Still inside one line: keep the pieces and join them once, when the line
            # ends, so a long line arriving in small chunks costs linear time.
            self._parts.append(data)
            self._pending += len(data)
            if self._pending > self.max_line:
                self._fail_line(self._pending)
            return []
        if self._parts:
            self._parts.append(data)
            head = self._pending
            data = b"".join(self._parts)
            end += head
        lines = data.split(b"\n")
        rest = lines.pop()
        self._parts = [rest] if rest else []
        self._pending = len(rest)
        if len(rest) > self.max_line:
            self._fail_line(len(rest))
        if end > self.max_line:
            longest = max(map(len, lines))
            if longest > self.max_line:
                self._fail_line(longest)
        if self._start:
            self._start = False
            if lines[0][:3] == b"\xef\xbb\xbf":
                lines[0] = lines[0][3:]
        return self._lines(lines)

    def close(self) -> List[SSEEvent]:
        """End the stream. An event without its closing blank line is dropped (as the
        spec says), and ``truncated`` tells whether there was one."""
        if not self._closed:
            self._closed = True
            self.truncated = bool(self._parts) or self._data is not None
            self._parts = []
            self._pending = 0
            self._data = self._more = None
        return []

    # -- internals --------------------------------------------------------------

    def _lines(self, lines: List[bytes]) -> List[SSEEvent]:
        out: List[SSEEvent] = []
        append = out.append
        new = _new_event
        cls = SSEEvent
        names = self._names
        event = self._event
        data = self._data  # the first data line: most events have only one
        more = self._more  # all data lines, once there is a second
        last_id = self._id
        retry = self._retry
        for line in lines:
            if not line:
                if data is not None:
                    ev = new(cls)
                    fields = ev.__dict__
                    fields["event"] = event or "message"
                    if more is None:
                        fields["data"] = data
                    else:
                        fields["data"] = data = "\n".join(more)
                        more = None
                        if len(data) > self.max_line:
                            self._fail_data()
                    fields["id"] = last_id
                    fields["retry"] = retry
                    append(ev)
                    data = None
                event = ""
            elif line[:6] == b"data: ":
                if data is None:
                    data = line[6:].decode("utf-8", "replace")
                elif more is None:
                    more = [data, line[6:].decode("utf-8", "replace")]
                else:
                    more.append(line[6:].decode("utf-8", "replace"))
            elif (known := names.get(line)) is not None:  # an "event:" line seen before
                event = known
            elif line[0] == 58:  # b":", a comment
                continue
            else:
                name, _, raw = line.partition(b":")
                if raw[:1] == b" ":
                    raw = raw[1:]
                if name == b"data":
                    value = raw.decode("utf-8", "replace")
                    if data is None:
                        data = value
                    elif more is None:
                        more = [data, value]
                    else:
                        more.append(value)
                elif name == b"event":
                    event = raw.decode("utf-8", "replace")
                    if len(names) < 64:
                        names[line] = event
                elif name == b"id":
                    if b"\0" not in raw:
                        last_id = raw.decode("utf-8", "replace")
                elif name == b"retry":
                    if raw.isdigit():  # bytes.isdigit() is true for ASCII digits only
                        retry = _retry(raw)
        self._event = event
        self._id = last_id
        self._retry = retry
        if more is not None:
            self._count_data(more)
        self._data = data
        self._more = more
        return out

    def _count_data(self, more: List[str]) -> None:
        # Only a chunk ending inside a many-line event gets here. Counting just the
        # lines added since the last chunk (same list) keeps a long event linear.
        if more is not self._more:
            self._data_seen = self._data_size = 0
        self._data_size += sum(map(len, more[self._data_seen:])) + len(more) - self._data_seen
        self._data_seen = len(more)
        if self._data_size - 1 > self.max_line:  # joined with one "\n" fewer than lines
            self._fail_data()

    def _fail_data(self) -> None:
        self._broken = True
        self._data = self._more = None
        raise StreamError(
            f"an event's data grew past max_line ({self.max_line} characters); the peer "
            "is not sending a sensible event stream"
        )

    def _fail_line(self, length: int) -> None:
        self._broken = True
        self._parts = []
        self._pending = 0
        raise StreamError(
            f"an event-stream line is longer than max_line ({length} > {self.max_line} "
            "bytes); the peer is not sending a sensible event stream"
        )


def _retry(digits: bytes) -> int:
    significant = digits.lstrip(b"0")
    if len(significant) > len(str(MAX_RETRY)):
        return MAX_RETRY
    return min(int(digits), MAX_RETRY)


def parse_json(text: Union[str, bytes, bytearray]) -> Any:
    """The JSON value of ``text`` (an event's data, or any JSON a peer sent).

    Raises ``ValueError`` for text that is not JSON, for ``NaN``, ``Infinity`` and
    numbers too large for a float, and for containers nested deeper than
    :data:`MAX_JSON_DEPTH` — never ``RecursionError``.
    """
    if type(text) is not str:
        if not isinstance(text, (bytes, bytearray)):
            raise TypeError(f"parse_json() takes str or bytes, not {type(text).__name__}")
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    # No text with fewer brackets than the cap can nest past it (most event data is
    # shorter than the cap, or holds a handful): depth_exceeds scans only the rest.
    # (Short data is counted inline, as brackets_exceed would: the call costs more.)
    size = len(text)
    if size > MAX_JSON_DEPTH and (
            text.count("[") + text.count("{") > MAX_JSON_DEPTH if size < COUNT_BELOW
            else brackets_exceed(text, MAX_JSON_DEPTH)) and depth_exceeds(text, MAX_JSON_DEPTH):
        raise TooDeep("JSON", MAX_JSON_DEPTH)
    # An event's data is one value with nothing around it: the scanner reads it at
    # once, without decode()'s two whitespace matches. Anything else (whitespace
    # around the value, text after it, text that is not JSON) takes decode(), which
    # accepts and refuses exactly what it always did, with its own message.
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        return _DECODER.decode(text)
    if end != len(text):
        return _DECODER.decode(text)
    return value


def _not_finite(name: str) -> float:
    raise ValueError(f"{name} is not a finite number; JSON has none")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite number: too large for a float")
    return value


_DECODER = json.JSONDecoder(parse_constant=_not_finite, parse_float=_finite)
_SCAN: Callable[[str, int], Tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def _as_bytes(data: object) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"SSEDecoder.feed() takes bytes, not {type(data).__name__}")
