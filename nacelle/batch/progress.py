"""A batch's progress: the numbers (:class:`Progress`) and the line that shows them.

``run_many(progress=True)`` shows one line on stderr — done/total, failures, rate,
ETA, cost so far — through a :class:`ProgressLine`, the only place nacelle writes
to a stream on its own. Any other callable given as ``progress=`` receives the same
:class:`Progress` values instead, after every finished run and once more at the end
(``final=True``).

Choices where the issue is silent:

- On a terminal the line is redrawn in place (``\\r``, then the line, padded over a
  longer previous one) at most ten times a second, and ends with a newline at the
  end; nobody reads a redraw faster than that, and a terminal kept busy by a fast
  batch slows the batch.
- Anywhere else (a pipe, a log file, CI) carriage returns make a mess, so plain
  lines are written, sparsely: one each time another tenth of the batch is done,
  one at least every 30 s while runs finish or a provider batch is polled, one when
  a provider batch's round begins, and the last one.
- Rate and ETA count from the first submitted run; the ETA is unknown (shown as
  ``?``) until a run has finished, or when the batch's size is unknown (a generator
  of conversations).

Imports the standard library only.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional, TextIO

__all__ = ["Progress", "ProgressLine"]

_REDRAW = 0.1
_PLAIN_EVERY = 30.0


@dataclass(frozen=True)
class Progress:
    """Where a batch stands. ``total`` is None when the conversations' count is unknown;
    ``rate`` is runs per second, ``eta`` seconds (None when unknown), ``cost`` US
    dollars so far (0.0 where the backend knows no prices); runs skipped because the
    results file held them are counted in neither ``done`` nor ``total``."""

    done: int
    total: Optional[int]
    failures: int
    elapsed: float
    cost: float
    final: bool = False
    #: a provider batch's round and status ("round 2: 1 batch in_progress (...)")
    batch: str = ""

    @property
    def rate(self) -> float:
        return self.done / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> Optional[float]:
        if self.total is None or not self.done or not self.elapsed:
            return None
        return max(self.total - self.done, 0) / self.rate

    def __str__(self) -> str:
        total = "?" if self.total is None else str(self.total)
        eta = "?" if self.eta is None else _duration(self.eta)
        batch = f", {self.batch}" if self.batch else ""
        return (f"{self.done}/{total} runs, {self.failures} failed, {self.rate:.1f} runs/s, "
                f"ETA {eta}, ${self.cost:.4f}{batch}")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class ProgressLine:
    """Shows :class:`Progress` values on ``stream`` (stderr when None): redrawn in place
    on a terminal, sparse plain lines otherwise. ``clock`` is for tests."""

    def __init__(self, stream: Optional[TextIO] = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self._clock = clock
        self._last = -float("inf")
        self._width = 0
        self._tenth = 0
        self._tty: Optional[bool] = None
        self._shown = -1
        self._stage = self._batch = ""

    def __call__(self, progress: Progress) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        if self._tty is None:
            isatty = getattr(stream, "isatty", None)
            self._tty = bool(isatty()) if callable(isatty) else False
        now = self._clock()
        text = f"nacelle batch: {progress}"
        if self._tty:
            if not progress.final and now - self._last < _REDRAW:
                return
            pad = " " * max(self._width - len(text), 0)
            self._width = len(text)
            stream.write(f"\r{text}{pad}" + ("\n" if progress.final else ""))
        else:
            tenth = progress.done * 10 // progress.total if progress.total else 0
            stage = progress.batch.split(":", 1)[0]  # a provider batch's round
            due = tenth > self._tenth or now - self._last >= _PLAIN_EVERY or (
                stage != self._stage)
            if not (due or progress.final) or (progress.done == self._shown
                                               and progress.batch == self._batch):
                return
            self._tenth = max(self._tenth, tenth)
            self._shown = progress.done
            self._stage, self._batch = stage, progress.batch
            stream.write(text + "\n")
        self._last = now
        stream.flush()
