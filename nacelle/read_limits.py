"""The limits nacelle holds a peer to while it reads an HTTP response it does not
control: time (:class:`Cutoff`, a limit on the whole of a blocking read, served by
one watchdog thread) and framing (:func:`content_length`). The model transport and
``web_fetch`` both use them.

Time. A socket timeout bounds one ``recv``, not a response: a peer that sends its status
line, its headers or a chunk-size line one byte at a time, each byte just inside the
timeout, keeps ``http.client``'s ``readline`` going for as long as it likes — past
the read timeout, the run's deadline and a cancellation. A :class:`Cutoff` bounds
the whole of a blocking read instead: ``arm(at, cause)`` before it, ``disarm()``
after, and if ``at`` comes first the socket is shut down (``SHUT_RDWR``), which wakes
a thread blocked in ``recv`` at once (closing the socket would not). ``disarm()``
returns the cause, so the code that owns the socket raises the error the cause
deserves. ``cut(cause)`` does the same at once, for a cancel callback. The socket is
looked up when the cutoff acts, and :meth:`Cutoff.enforce` acts again later, so a
connection whose socket did not exist yet when its time ran out (it was still
connecting) is shut down as soon as it does.

One daemon thread serves every cutoff of the process. It is started by the first
``arm``, sleeps until the earliest armed deadline, and is woken early only when an
earlier one is armed. Arming and disarming are one dict operation each and take no
lock shared between cutoffs: they run around every read of every stream, and a
process holding a thousand streams would otherwise queue its threads on one lock
(a thread that loses the interpreter while holding it stalls every other reader).
Only an arm earlier than the watchdog's next look takes the watchdog's lock, to wake
it. The watchdog claims an expired cutoff by removing it from the armed dict, under
that cutoff's own lock, and acts there; ``disarm`` removes it too, and when the
watchdog got there first it waits on that lock for the cause — so once ``disarm()``
has returned, the cutoff can no longer act. After a fork the child starts its own
thread on its first ``arm``.

Framing. :func:`content_length` reads a ``Content-Length`` field value as RFC 9112
tells a recipient to: ASCII digits (optional whitespace around them is not part of
the value), or a list of the same digits, which counts as one; anything else makes
the framing invalid and the response unusable. ``int()`` is not that rule — it reads
``+12``, ``1_000`` and other scripts' digits — and ``http.client`` and urllib3 read
a list differently (one as no length at all, the other as the number), so a lenient
reading leaves the end of the body a guess: a read waits for bytes that never come,
or stops early and leaves the rest to be read as the next response.

Core module: imports the standard library only.
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import threading
import time
from typing import Callable, Dict, Optional

__all__ = ["Cutoff", "MAX_LENGTH_DIGITS", "content_length"]

log = logging.getLogger(__name__)

#: A Content-Length of more digits than this is refused: no body is an exabyte long,
#: and a larger number no longer fits the C size types the readers pass it to.
MAX_LENGTH_DIGITS = 18

_DIGITS = re.compile(r"[0-9]{1,%d}" % MAX_LENGTH_DIGITS)


def content_length(value: Optional[str]) -> Optional[int]:
    """The body length a ``Content-Length`` field value states, or None for no field.

    Raises ValueError, saying what is wrong, when the value is not ASCII digits or a
    list of the same digits.
    """
    if value is None:
        return None
    lengths = set()
    for item in value.split(","):
        item = item.strip(" \t")
        if not _DIGITS.fullmatch(item):
            shown = value if len(value) <= 40 else value[:39] + "…"
            too_long = item.isascii() and item.isdigit()
            raise ValueError(f"Content-Length {shown!r} is not a number of bytes"
                             + (f" (more than {MAX_LENGTH_DIGITS} digits)" if too_long else ""))
        lengths.add(int(item))
    if len(lengths) > 1:
        raise ValueError(f"Content-Length {value!r} states more than one length")
    return lengths.pop()


class Cutoff:
    """A time limit on the blocking reads of one socket, and a way to stop them now.

    ``find`` returns the socket when the cutoff acts (None if there is none yet).
    Causes are short words chosen by the caller ("timeout", "deadline",
    "cancelled"...); the first one to act is the one kept.
    """

    __slots__ = ("_find", "_cause", "_armed_cause", "_lock")

    def __init__(self, find: Callable[[], Optional[socket.socket]]) -> None:
        self._find = find
        self._cause: Optional[str] = None
        self._armed_cause = ""
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Cutoff {'cut: ' + self._cause if self._cause else 'not cut'}>"

    @property
    def cause(self) -> Optional[str]:
        """What cut the socket, or None while it has not been cut."""
        return self._cause

    def arm(self, at: float, cause: str) -> None:
        """Shut the socket down at ``at`` (``time.monotonic()`` seconds) for ``cause``,
        unless :meth:`disarm` comes first. Arming again moves the limit."""
        self._armed_cause = cause
        _WATCHDOG.arm(self, at)

    def disarm(self) -> Optional[str]:
        """Cancel the limit; returns the cause if the socket was cut meanwhile."""
        if _ARMED.pop(self, None) is None:
            # Not armed, or the watchdog claimed it first: it acts (or puts back a
            # limit that had moved) under this lock; wait for that and look again.
            with self._lock:
                _ARMED.pop(self, None)
        return self._cause

    def cut(self, cause: str) -> None:
        """Shut the socket down now (a cancel callback); the first cause is kept."""
        with self._lock:
            if self._cause is None:
                self._cause = cause
        self._shutdown()

    def enforce(self) -> None:
        """If the socket was cut, shut down the socket there is now: one made after
        the limit passed (the connection was still being opened) is cut too."""
        if self._cause is not None:
            self._shutdown()

    def _expire(self, now: float) -> None:
        """The watchdog found this cutoff's limit passed: act, unless it was disarmed
        or moved meanwhile (then its new limit is put back)."""
        with self._lock:
            at = _ARMED.pop(self, None)
            if at is None:
                return  # disarmed: the reader has its data
            if at > now:  # moved later since the watchdog looked: put it back, unless
                _ARMED.setdefault(self, at)  # the owner armed again meanwhile
                return
            log.debug("cutting a socket off: %s", self._armed_cause)
            if self._cause is None:
                self._cause = self._armed_cause
            self._shutdown()

    def _shutdown(self) -> None:
        sock = self._find()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: nothing is blocked on it


#: Every armed cutoff and its limit. Written without a lock (a dict's single
#: operations are atomic), read by the watchdog.
_ARMED: Dict[Cutoff, float] = {}


class _Watchdog:
    """The thread that acts for every armed :class:`Cutoff` when its time comes."""

    def __init__(self) -> None:
        self._reset()
        self._fork_hook = False

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        _ARMED.clear()
        # When the thread looks next; +inf while it is looking, so an arm meanwhile
        # takes the lock and wakes it again.
        self._wake = math.inf
        self._thread: Optional[threading.Thread] = None

    def arm(self, cutoff: Cutoff, at: float) -> None:
        _ARMED[cutoff] = at
        # Written before _wake is read: the thread sets _wake to +inf before it looks
        # at the dict, so either it sees this limit or this sees +inf and wakes it.
        if at < self._wake or self._thread is None:
            with self._cond:
                if self._thread is None or not self._thread.is_alive():
                    self._start()
                self._cond.notify()

    def _start(self) -> None:
        if not self._fork_hook and hasattr(os, "register_at_fork"):
            # The child of a fork has no watchdog thread, and this lock may have been
            # held by it at the fork: the child starts afresh.
            os.register_at_fork(after_in_child=self._reset)
            self._fork_hook = True
        self._thread = threading.Thread(target=self._run, name="nacelle-watchdog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._watch()
        finally:  # never expected; the next arm starts another thread
            self._thread = None

    def _watch(self) -> None:
        with self._cond:
            while True:
                self._wake = math.inf
                now = time.monotonic()
                limits = list(_ARMED.values())
                if limits and min(limits) <= now:
                    for cutoff, at in list(_ARMED.items()):
                        if at <= now:
                            try:
                                cutoff._expire(now)
                            except Exception:  # noqa: BLE001 - the watchdog must outlive a bad socket
                                log.debug("a cutoff failed to act", exc_info=True)
                    limits = list(_ARMED.values())
                wake = min(limits, default=math.inf)
                # An hour at most: a wait longer than threading.TIMEOUT_MAX would raise.
                wait = None if wake == math.inf else min(max(wake - now, 0.0), 3600.0)
                self._wake = wake
                self._cond.wait(wait)


_WATCHDOG = _Watchdog()
