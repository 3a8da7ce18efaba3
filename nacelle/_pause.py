"""What every run needs of checkpoints: :data:`PAUSE` (an ``approve`` answer the tool
round compares with), :class:`NestedPause` (what a paused sub-agent raises), the
call :func:`fingerprint` the loop guard counts repeats by and :class:`Repeats`, that
count, which a checkpoint carries.

They live apart from :mod:`nacelle.checkpoint`, which re-exports them under the same
names (their ``__module__`` says ``nacelle.checkpoint``: reprs, pickles and tracebacks
name them there as before), so a run that never pauses does not build the Checkpoint,
PendingCall and Resume classes when nacelle is imported.

Core module: imports the standard library and ``nacelle.bounded_json`` only.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Tuple

from . import bounded_json

if TYPE_CHECKING:
    from .checkpoint import Checkpoint

__all__ = ["PAUSE", "NestedPause", "Repeats", "canonical", "fingerprint"]


class _Pause:
    """The type of :data:`PAUSE`; one instance, which pickles as itself."""

    _instance: Optional["_Pause"] = None

    def __new__(cls) -> "_Pause":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "nacelle.PAUSE"

    def __bool__(self) -> bool:
        # A pause is not a yes: code that tests ``if approve(...)`` must not run the call.
        return False

    def __reduce__(self) -> str:
        return "PAUSE"


#: What ``approve`` returns to stop the run until a person decides on the call.
PAUSE = _Pause()


def canonical(value: Any) -> str:
    """The canonical JSON of ``value``: sorted keys, no spaces, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(name: str, input: Any) -> str:
    """sha256 of the tool name, a NUL and the canonical JSON of its input (a dict, or
    the raw JSON text the model wrote)."""
    if isinstance(input, str):
        try:
            input = bounded_json.loads(input, what="tool input") if input.strip() else {}
        except ValueError:
            pass  # fingerprint the raw text: the call's input never parsed (or nests too deep)
    import hashlib  # checkpoints only: not loaded with the core

    text = input if isinstance(input, str) else canonical(input)
    return hashlib.sha256(f"{name}\0{text}".encode("utf-8")).hexdigest()


class Repeats:
    """The loop guard's count of a run's calls per :func:`fingerprint` (the tool and
    its canonical input).

    A tool's first call is counted under the tool's name alone, and fingerprinted only
    when a second call of the same tool comes: until then nothing can repeat it. Most
    tools of a run are called once, and a fingerprint parses the input again, writes
    it in canonical form and hashes it (0.6 ms for a 200 KB file being written), so
    most calls are never fingerprinted. :meth:`items` fingerprints the calls left, for
    a checkpoint. A run resumed with a checkpoint's counts, which do not say their
    tools, fingerprints every call.
    """

    __slots__ = ("_counts", "_first")

    def __init__(self, counted: Iterable[Tuple[str, int]] = ()) -> None:
        self._counts: Dict[str, int] = dict(counted)
        # Tool -> the input of its one call so far, or _HASHED once its calls are
        # counted by fingerprint; None: every call is (a resumed run's counts).
        self._first: Optional[Dict[str, Any]] = None if self._counts else {}

    def add(self, name: str, input: Any, *, unless: int = 0) -> int:
        """Count a call of ``name`` with ``input`` (a dict, or the JSON text the model
        wrote) and return its number among the run's calls of that tool with that
        input, 1 for the first; with ``unless``, a call whose number would reach it is
        not counted (its number is returned all the same)."""
        first = self._first
        if first is not None:
            held = first.get(name, _NONE)
            if held is _NONE:
                if not unless or unless > 1:
                    first[name] = input
                return 1
            if held is not _HASHED:  # a second call: the first is fingerprinted now
                first[name] = _HASHED
                self._count(fingerprint(name, held))
        key = fingerprint(name, input)
        seen = self._counts.get(key, 0) + 1
        if not unless or seen < unless:
            self._counts[key] = seen
        return seen

    def items(self) -> Tuple[Tuple[str, int], ...]:
        """Every count by fingerprint, sorted: what a checkpoint holds."""
        first = self._first or {}
        for name, held in first.items():
            if held is not _HASHED:
                first[name] = _HASHED
                self._count(fingerprint(name, held))
        return tuple(sorted(self._counts.items()))

    def _count(self, key: str) -> None:
        self._counts[key] = self._counts.get(key, 0) + 1


_NONE, _HASHED = object(), object()  # Repeats._first: no call yet; fingerprinted


class NestedPause(Exception):
    """Raised by a tool whose own nested run paused for a person's approval (a
    sub-agent's): the call pauses as if ``approve`` had paused it, and the run's
    checkpoint carries ``checkpoint`` under the call's id. Caught by the loop; a
    tool that is not a run of its own has no reason to raise it."""

    def __init__(self, checkpoint: "Checkpoint") -> None:
        super().__init__("a nested run paused for a person's approval")
        self.checkpoint = checkpoint


_Pause.__module__ = NestedPause.__module__ = "nacelle.checkpoint"
canonical.__module__ = fingerprint.__module__ = "nacelle.checkpoint"
