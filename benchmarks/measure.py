"""The measuring kit the benchmark rows share: summaries of repeated samples, the
server process, client processes, and the Row every benchmark returns.

Every figure is a median of repeated samples shown with its min–max, because this
machine is shared and one sample means little. A ratio is always computed from two
medians measured in the same run.

Benchmark-only: imports the standard library.
"""

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


@dataclass(frozen=True)
class Stat:
    """A median with the spread of the samples behind it."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> "Stat":
        if not samples:
            raise ValueError("no samples")
        return cls(statistics.median(samples), min(samples), max(samples), len(samples))

    def scaled(self, factor: float) -> "Stat":
        return Stat(self.median * factor, self.low * factor, self.high * factor, self.count)

    def show(self, unit: str = "", digits: int = 1) -> str:
        return (f"{self.median:,.{digits}f}{unit} [{self.low:,.{digits}f}–"
                f"{self.high:,.{digits}f}]")


@dataclass
class Row:
    """One line of the results table: a ratio, its target, whether it was met, and
    the absolute figures behind it. ``ratio`` None means it could not be measured
    (``figures`` says why)."""

    number: str
    title: str
    ratio: Optional[float]
    target: str
    met: Optional[bool]
    figures: List[str] = field(default_factory=list)
    label: str = ""  # a short name for the bar chart

    @property
    def verdict(self) -> str:
        return "n/a" if self.met is None else "met" if self.met else "MISSED"


class ServerProcess:
    """``server_proc.py`` in a process of its own, for ``with``: ``.url(wire, kind, n)``."""

    def __init__(self) -> None:
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0

    def __enter__(self) -> "ServerProcess":
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "server_proc.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.__exit__()
            raise RuntimeError(f"the benchmark server did not start (said {line!r})")
        self.port = int(line)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.proc is not None:
            self.proc.stdin.close()  # the server stops when its stdin closes
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def url(self, wire: str, kind: str, n: int) -> str:
        return f"http://127.0.0.1:{self.port}/{wire}/{kind}/{n}"


def run_client(mode: str, client: str, url: str, *, runs: int = 5, warm_url: str = "",
               short_url: str = "", timeout: float = 240.0) -> dict:
    """Run ``clients.py`` in a fresh process and return what it printed, parsed.

    ``{"missing": ...}`` when the client's package is not installed, ``{"error": ...}``
    when the process failed or ran past ``timeout``.
    """
    command = [sys.executable, os.path.join(HERE, "clients.py"), mode, client, url,
               "--runs", str(runs)]
    if warm_url:
        command += ["--warm-url", warm_url]
    if short_url:
        command += ["--short-url", short_url]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {timeout:g} s"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {done.returncode}: {tail[0]}"}
    return json.loads(done.stdout)


def ratio_row(number: str, title: str, ratio: Optional[float], target: str, limit: float,
              *, at_least: bool, figures: List[str], label: str = "") -> Row:
    """A Row whose target is ``ratio >= limit`` (``at_least``) or ``ratio <= limit``."""
    if ratio is None:
        return Row(number, title, None, target, None, figures, label)
    met = ratio >= limit if at_least else ratio <= limit
    return Row(number, title, ratio, target, met, figures, label)
