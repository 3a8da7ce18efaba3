"""Encoded request fragments kept between model turns: :class:`WireCache`, :class:`Run`,
:class:`Body`, and the byte helpers :func:`dumps`, :func:`split_frame`, :func:`assemble`
and :func:`grow`.

Why: within a run the conversation only grows — turn N's messages start with the
very Message objects turn N-1 sent — yet building each request from the whole
conversation (``to_wire``'s dicts, then ``json.dumps`` of them) makes a turn's CPU
grow with everything said so far: some 28 ms of a 10,000-message turn is the same
JSON as the turn before. The wire modules' ``encode_body`` instead assembles the body
as bytes from fragments encoded once, and this module keeps the fragments:

- **Per message** (:meth:`WireCache.encoded`): what a message's wire form is as a
  pure function of the message (and the wire's dialect), keyed by the message's
  identity through a weak reference, so an entry goes when its message is collected.
  Never by hash: a Message's hash walks every part. This is what a new run over an
  old conversation reuses.
- **Per run** (:meth:`WireCache.resume`, :meth:`WireCache.keep`): the encoded
  *stable prefix* of the previous body, in a few segments — the messages no later turn can
  change (the newest ones carry the cache breakpoints that move every turn, or may
  be merged with the next message, and are encoded again). A :class:`Run` is found
  for the Request (the same object every turn of a run), held weakly, so what a run
  kept goes with its Request; it is used only when the new messages start with the
  Run's prefix, checked by one tuple comparison (identity first, at C speed), so two
  conversations that share a prefix and differ later each get only what they share.

The body itself is a :class:`Body`: the run's segments and the new fragments, in
order, never joined. The transport sends it with its ``Content-Length`` and one
``send`` per piece, so the bytes of a long conversation are copied only once, into
the socket, rather than into one new ``bytes`` value each turn first: at 10,000
messages that join was half of a turn's build.

Safe for one backend serving several runs on several threads: a Run is never changed
after it is made (a turn makes a new one), and the tables are plain dicts changed by
single operations; the weak-reference callbacks take no lock, so a collection
triggered while a lock is held cannot deadlock. Bounded: one entry per live message,
at most :data:`RUNS_PER_REQUEST` Runs per live Request. Pickled or copied, a cache
is empty: it holds weak references and nothing a copy needs.

May import: the standard library only.
"""

from __future__ import annotations

import json
import threading
import weakref
from typing import (
    Any, Callable, Dict, FrozenSet, Hashable, List, Optional, Sequence, Tuple, TypeVar,
)

__all__ = ["Body", "RUNS_PER_REQUEST", "Run", "WireCache", "assemble", "dumps", "encode_items",
           "grow", "split_frame"]

#: Runs kept per Request: one per conversation served from it at once.
RUNS_PER_REQUEST = 4

T = TypeVar("T")
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class Body:
    """A JSON request body in pieces, sent in order and never joined.

    ``len(body)`` is its length in bytes (``requests`` reads it for the
    ``Content-Length``); iterating yields the pieces (urllib3 and http.client send an
    iterable body piece by piece); ``bytes(body)`` joins them, and a Body equals the
    bytes it joins to. It can be iterated again, so a retried request sends it again.
    """

    __slots__ = ("pieces", "_length")

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self.pieces: Tuple[bytes, ...] = tuple(pieces)
        self._length = sum(map(len, self.pieces))

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Any:
        return iter(self.pieces)

    def __bytes__(self) -> bytes:
        return b"".join(self.pieces)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Body):
            return bytes(self) == bytes(other)
        if isinstance(other, (bytes, bytearray)):
            return bytes(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to bytes, so not hashable apart

    def __repr__(self) -> str:
        return f"Body({len(self.pieces)} pieces, {self._length} bytes)"


def dumps(value: Any) -> bytes:
    """``value`` as the transport encodes a body: compact JSON, UTF-8, non-ASCII kept."""
    return _ENCODE(value).encode("utf-8")


def split_frame(frame: Dict[str, Any], key: str = "messages") -> Tuple[bytes, List[bytes], bytes]:
    """A body built with no conversation, cut around its ``key`` list: the bytes
    before the list's first item, each item it already holds encoded, and the bytes
    after its last. ``head + b",".join(items + more) + tail`` is then exactly
    ``dumps`` of the frame with ``more`` items appended, since JSON is encoded
    value by value."""
    names = list(frame)
    at = names.index(key)
    before = {name: frame[name] for name in names[:at]}
    after = {name: frame[name] for name in names[at + 1:]}
    head = dumps(before)[:-1] + (b"," if before else b"") + dumps(key) + b":["
    tail = b"]," + dumps(after)[1:] if after else b"]}"
    return head, [dumps(item) for item in frame[key]], tail


class Run:
    """What one turn of a run leaves for the next: the turn's ``messages``, how many
    of them are ``stable``, the encoded wire items of that prefix (``region``, joined
    by commas; ``count`` of them) and what the wire module needs to know about it
    (``info``). ``space`` names the wire and dialect it was encoded for."""

    __slots__ = ("space", "messages", "stable", "region", "count", "info")

    def __init__(self, space: Hashable, messages: Tuple[Any, ...], stable: int,
                 region: Tuple[bytes, ...], count: int, info: Any) -> None:
        self.space = space
        self.messages = messages
        self.stable = stable
        # Segments of their own, not a view of the body: a Run that held the body would
        # keep each turn's megabytes alive into the next, whose body then needs fresh
        # pages (a page fault per 4 KiB) instead of reusing the freed ones.
        self.region = region
        self.count = count
        self.info = info

    def __repr__(self) -> str:
        return f"Run({self.space!r}, stable={self.stable}, count={self.count})"


def _forget(table: Dict[int, Any], key: int, ref: "weakref.ref[Any]") -> None:
    # Called as the referent dies: its id cannot belong to a new object yet, but the
    # entry may already be another's if this callback comes late, hence the check.
    entry = table.get(key)
    if entry is not None and entry[0] is ref:
        table.pop(key, None)


class _Entry(weakref.ref):  # type: ignore[type-arg]
    """One message's entry in a per-message table: a weak reference to the message
    that carries the message's ``key`` (its id) and its encoded ``value``.

    One object per message, where a tuple of a reference and the value, and a
    closure for the callback with its two cells, were five: every message of a long
    conversation has one, alive as long as the message, and each is a container the
    collector counts and walks (10,000 messages made 50,000 of them in one turn,
    enough to start a full collection of the whole heap within it)."""

    __slots__ = ("key", "value")
    key: int
    value: Any


class _Table(Dict[int, _Entry]):
    """A per-message table: ``id(message)`` -> its :class:`_Entry`. ``forget`` is the
    one callback all its entries' references share (made once, not per message)."""

    __slots__ = ("forget",)
    forget: Callable[[_Entry], None]

    def __init__(self) -> None:
        super().__init__()
        self.forget = self._forget

    def _forget(self, ref: _Entry) -> None:
        # Called as a message dies: its id cannot belong to a new object yet, but the
        # entry may already be another's if this callback comes late, hence the check.
        if self.get(ref.key) is ref:
            self.pop(ref.key, None)


class WireCache:
    """Encoded fragments of the conversations one backend sends; see the module docstring."""

    def __init__(self) -> None:
        self._tables: Dict[Hashable, _Table] = {}
        self._runs: Dict[int, Tuple["weakref.ref[Any]", Tuple[Run, ...]]] = {}
        self._lock = threading.Lock()

    def __reduce__(self) -> Tuple[Any, ...]:
        return (WireCache, ())

    def __repr__(self) -> str:
        return (f"WireCache({sum(map(len, self._tables.values()))} messages, "
                f"{len(self._runs)} requests)")

    # -- per message ----------------------------------------------------------------

    def table(self, space: Hashable) -> _Table:
        """The per-message table of ``space`` (a wire and its dialect)."""
        table = self._tables.get(space)
        if table is None:
            with self._lock:
                table = self._tables.setdefault(space, _Table())
        return table

    def encoded(self, table: _Table, message: Any, encode: Callable[..., T], *args: Any) -> T:
        """``encode(message, *args)``, computed once per live message. ``args`` only
        name the message in errors (its position): the value must not depend on them."""
        key = id(message)
        entry = table.get(key)
        if entry is not None and entry() is message:
            found: T = entry.value
            return found
        value = encode(message, *args)
        entry = _Entry(message, table.forget)
        entry.key = key
        entry.value = value
        table[key] = entry
        return value

    # -- per run --------------------------------------------------------------------

    def resume(self, request: Any, messages: Sequence[Any], space: Hashable) -> Optional[Run]:
        """The Run kept for ``request`` in ``space`` whose stable prefix ``messages``
        starts with (the longest), or None."""
        entry = self._runs.get(id(request))
        if entry is None or entry[0]() is not request:
            return None
        best: Optional[Run] = None
        for run in entry[1]:
            if run.space != space or run.stable > len(messages):
                continue
            if best is not None and run.stable <= best.stable:
                continue
            seen = run.messages
            # The run's own next turn holds all of the last turn's messages: one
            # slice. A tuple comparison checks identity before equality, so it stays
            # at C speed; an equal message in place of the same one passes too, and
            # its wire form is the same.
            if (len(seen) <= len(messages) and messages[:len(seen)] == seen) or (
                    messages[:run.stable] == seen[:run.stable]):
                best = run
        return best

    def keep(self, request: Any, run: Run, replaces: Optional[Run] = None) -> None:
        """Keep ``run`` for ``request``'s next turn, in place of ``replaces`` (the Run
        it grew from), the oldest dropped past :data:`RUNS_PER_REQUEST`."""
        key = id(request)
        with self._lock:
            entry = self._runs.get(key)
            if entry is None or entry[0]() is not request:
                table = self._runs
                entry = (weakref.ref(request, lambda ref: _forget(table, key, ref)), ())
            runs = (run,) + tuple(r for r in entry[1] if r is not replaces)
            self._runs[key] = (entry[0], runs[:RUNS_PER_REQUEST])


def assemble(head: bytes, items: Sequence[bytes], tail: bytes) -> Body:
    """``head + b",".join(items) + tail`` as a :class:`Body`, copying nothing."""
    pieces: List[bytes] = [head]
    for item in items:
        pieces += (item, b",")
    if items:
        pieces.pop()
    pieces.append(tail)
    return Body(pieces)


def grow(segments: Tuple[bytes, ...], items: Sequence[bytes]) -> Tuple[bytes, ...]:
    """A Run's region with ``items`` added: comma-joined segments, each at least twice
    the next, so a turn copies only what it adds (and, now and then, a merge: every
    byte is copied a logarithmic number of times over a run) — never the whole
    conversation, as one joined bytes would be."""
    if not items:
        return segments
    out = list(segments)
    new = b",".join(items)
    while out and len(out[-1]) < 2 * len(new):
        new = out.pop() + b"," + new
    out.append(new)
    return tuple(out)


#: A message's items encoded with every result sent, and its results' ids (None: none).
Plain = Tuple[Tuple[bytes, ...], Optional[FrozenSet[str]]]


def encode_items(cache: WireCache, request: Any, messages: Sequence[Any], space: Hashable,
                 frame: Tuple[bytes, bytes], plain: Callable[[Any, int], Plain],
                 again: Callable[[Any, int, FrozenSet[str]], Tuple[bytes, ...]],
                 unfinished: Callable[[Sequence[Any]], FrozenSet[str]]) -> Body:
    """The body of a wire whose list (``frame``: the bytes before its first item and
    after its last) holds each message's items, a function of that message alone but
    for its results whose call is left unfinished (``unfinished``: their ids), which
    are not sent: the Responses and Gemini wires.

    ``plain(message, position)`` is kept per message; a message with a result named
    by an unfinished call is encoded ``again(message, position, unsent)`` each turn.
    Every message of a turn is the next turn's prefix (there is no breakpoint to move),
    kept with the unfinished ids it holds; a turn adding an unfinished call starts
    from the per-message table instead, as it may take back a result the prefix sent.
    """
    run = cache.resume(request, messages, space)
    if run is not None and unfinished(messages[run.stable:]):
        run = None
    start = run.stable if run is not None else 0
    unsent: FrozenSet[str] = (run.info if run is not None else frozenset()) | unfinished(
        messages[start:])
    table = cache.table(space)
    added: List[bytes] = []
    for position in range(start, len(messages)):
        message = messages[position]
        encoded, results = cache.encoded(table, message, plain, position)
        if results is not None and not results.isdisjoint(unsent):
            encoded = again(message, position, unsent)
        added.extend(encoded)
    region = run.region if run is not None else ()
    cache.keep(request, Run(space, tuple(messages), len(messages), grow(region, added),
                            (run.count if run is not None else 0) + len(added), unsent), run)
    return assemble(frame[0], list(region) + added, frame[1])
