"""Render a run's event stream for a person: a terminal, a notebook cell, a log.

Text streams as it arrives; shown thinking is dimmed; each tool call gets a line
with its name and a compact input, each result a line with ok / failed / refused /
not run, its duration and the first line of what the model read; each turn ends
with a line of tokens, cache hit rate and cost when known; the run ends with a
summary, loudly marked when the answer is not complete (any stop but END).

Colour is ANSI and only for a terminal: never when ``NO_COLOR`` is set
(https://no-color.org), never when the output is not a TTY, never in Jupyter,
where the output is plain streaming text. Only ASCII symbols are used, so any
output encoding shows them.

Besides the CLI, this module is the one place allowed to write to a stream — it
writes only to the stream it is given.

Outer ring: imports the standard library and the core.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Iterable, Optional

from .events import Event, Kind, Stop, ToolEvent, Usage

__all__ = ["Renderer", "render", "describe_usage"]

_DIM, _BOLD, _RED, _GREEN, _YELLOW, _CYAN, _RESET = (
    "\x1b[2m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m", "\x1b[0m")


def _wants_color(out: IO[str]) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if "ipykernel" in sys.modules:
        return False
    isatty = getattr(out, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def _compact(raw: str, limit: int = 100) -> str:
    try:
        text = json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        text = raw
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe_usage(usage: Usage) -> str:
    """``1,234 tokens (in 100, out 50, cache 80% hit), $0.0123`` — the parts that are known."""
    parts = [f"in {usage.input_tokens:,}", f"out {usage.output_tokens:,}"]
    if usage.cache_read_tokens or usage.cache_creation_tokens:
        parts.append(f"cache {usage.cache_hit_rate:.0%} hit")
    if usage.reasoning_tokens:
        parts.append(f"reasoning {usage.reasoning_tokens:,}")
    text = f"{usage.total:,} tokens ({', '.join(parts)})"
    if usage.cost:
        text += f", ${usage.cost:.4f}"
    return text


class Renderer:
    """Writes events to ``out`` as they come. ``color=None`` decides from the stream."""

    def __init__(self, out: Optional[IO[str]] = None, *, color: Optional[bool] = None) -> None:
        self.out = out if out is not None else sys.stdout
        self.color = _wants_color(self.out) if color is None else color
        self._at_line_start = True
        self._in_thinking = False
        self._turns = 0

    def _paint(self, text: str, *styles: str) -> str:
        return "".join(styles) + text + _RESET if self.color and styles else text

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self._at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        """Write a whole line, first ending any text left mid-line."""
        self._end_thinking()
        if not self._at_line_start:
            self._write("\n")
        self._write(text + "\n")

    def _end_thinking(self) -> None:
        if self._in_thinking:
            self._in_thinking = False
            if not self._at_line_start:
                self._write("\n")

    def event(self, event: Event) -> None:
        """Show one event."""
        kind = event.kind
        if kind is Kind.TEXT:
            self._end_thinking()
            self._write(event.text)
        elif kind is Kind.THINKING:
            if not self._in_thinking:
                if not self._at_line_start:
                    self._write("\n")
                self._write(self._paint("thinking: ", _DIM))
                self._in_thinking = True
            self._write(self._paint(event.text, _DIM))
        elif kind is Kind.TOOL_CALL and event.tool is not None:
            self._line(self._call_line(event.tool))
        elif kind is Kind.TOOL_RESULT and event.tool is not None:
            self._line(self._result_line(event.tool))
        elif kind is Kind.TURN:
            self._turns += 1
            self._line(self._paint(f"-- turn {self._turns}: {describe_usage(event.usage)}", _DIM))
        elif kind is Kind.DONE:
            self._line(self._summary(event))
        flush = getattr(self.out, "flush", None)
        if flush is not None:
            flush()  # text must appear as it arrives, even on a buffered pipe

    def render(self, events: Iterable[Event]) -> Optional[Event]:
        """Show every event; return the DONE event (None if the stream had none)."""
        done = None
        for event in events:
            self.event(event)
            if event.kind is Kind.DONE:
                done = event
        return done

    def _call_line(self, tool: ToolEvent) -> str:
        where = f" [{tool.server}]" if tool.server else ""
        return self._paint("-> ", _CYAN) + self._paint(tool.name, _BOLD) + where + " " + _compact(tool.input)

    def _result_line(self, tool: ToolEvent) -> str:
        if tool.discarded:
            status, style = "not run", _YELLOW
        elif tool.refused:
            status, style = "refused", _YELLOW
        elif tool.error is not None:
            status, style = "failed", _RED
        else:
            status, style = "ok", _GREEN
        detail = _first_line(tool.error if tool.error is not None else tool.result)
        timing = f" {tool.duration:.2f}s" if tool.duration else ""
        text = f"   {self._paint(status, style)} {tool.name}{timing}"
        return text + (f": {detail}" if detail else "")

    def _summary(self, event: Event) -> str:
        stop = event.stop or Stop.OTHER
        totals = describe_usage(event.usage)
        if stop.complete:
            return self._paint(f"== done: {totals}", _DIM)
        return self._paint(f"!! INCOMPLETE ANSWER: stopped with {stop.value!r}; {totals}",
                           _BOLD, _RED)


def render(events: Iterable[Event], out: Optional[IO[str]] = None, *,
           color: Optional[bool] = None) -> Optional[Event]:
    """Render a whole stream to ``out`` (stdout by default); return its DONE event."""
    return Renderer(out, color=color).render(events)
