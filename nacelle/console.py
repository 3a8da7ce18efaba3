"""Render a run's event stream for a person: a terminal, a notebook cell, a log.

Text streams as it arrives; shown thinking is dimmed; a call's input, while the model
writes it, is a progress line redrawn in place on a terminal (or the input itself with
``arguments="stream"``); each tool call gets a line
with its name and a compact input, each result a line with ok / failed / refused /
paused / not run, its duration and the first line of what the model read, then a line
per image or document it returned (``[image image/png 1,234 bytes]``); each turn ends
with a line of tokens, cache hit rate and cost ("cost unknown" when no price is
known, never $0); the run ends with the sources the answer cites, numbered (the
``Text.citations`` of its last message: :func:`sources`), then a
summary, loudly marked when the answer is not complete (any stop but END).

A sub-agent's forwarded events (``event.agent``, ``subagent_tool(..., forward=True)``)
are drawn indented two spaces per level under the call that started it, its text
opened by its name (``researcher: ...``) and its turns as ``-- researcher turn``
lines, so the parent's turn count stays the parent's.

Colour is ANSI and only for a terminal: never when ``NO_COLOR`` is set
(https://no-color.org), never when the output is not a TTY, never in Jupyter,
where the output is plain streaming text. Only ASCII symbols are used, so any
output encoding shows them.

What the model, a tool, a provider or an MCP server wrote is shown through
:func:`nacelle.terminal_text.visible`: an escape sequence in a result or a streamed
delta appears as ``\x1b[2J``, never clears or redraws the screen. Only the content
passes through it; the renderer's own colour codes are added afterwards.

Besides the CLI, this module is the one place allowed to write to a stream — it
writes only to the stream it is given.

For notebooks: :func:`html` renders a conversation as HTML (the run report's
transcript: everything escaped, tool inputs and results in ``<details>``), and
:func:`display` shows a stream as it comes in one live output cell — IPython's
``display(..., display_id=True)`` updated at most every ``interval`` seconds (each
update re-sends the whole cell, so updating per delta would swamp the front end),
and once more at the end. IPython is imported inside :func:`display` only; without
it the stream is rendered as text, as :func:`render` does.

Outer ring: imports the standard library, the core and ``report.page`` (the run
report's transcript, which :func:`html` is).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from html import escape
from typing import IO, Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import bounded_json
from .events import Event, Kind, Stop, ToolEvent, Usage
from .messages import Document, Image, Message, Role, Text, ToolMedia, decoded_size, dumps
from .report.page import media_html, messages_html
from .terminal_text import visible

__all__ = ["Renderer", "describe_usage", "display", "html", "render"]

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
        value = bounded_json.loads(raw, what="tool input")
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except ValueError:  # not JSON, or too deep to read: shown as written
        text = raw
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _media_note(part: ToolMedia) -> str:
    """``[image image/png 1,234 bytes]`` or ``[document application/pdf 12,345 bytes:
    title]``, on one line whatever the type or the title holds (not yet made visible)."""
    if isinstance(part, Image):
        return f"[image {' '.join(part.media_type.split())} {decoded_size(part.data):,} bytes]"
    if isinstance(part, Document):
        title = " ".join(part.title.split())
        return (f"[document {' '.join(part.media_type.split())} {decoded_size(part.data):,} bytes"
                f"{': ' + title if title else ''}]")
    return ""


def _media_json(part: "Image | Document") -> Dict[str, str]:
    if isinstance(part, Image):
        return {"type": "image", "media_type": part.media_type, "data": part.data}
    return {"type": "document", "media_type": part.media_type, "data": part.data,
            "title": part.title}


def describe_usage(usage: Usage) -> str:
    """``1,234 tokens (in 100, out 50, cache 80% hit), $0.0123``.

    The dollars only when they are known (``usage.priced``); tokens whose price nobody
    knows say "cost unknown", never ``$0.0000``, which would read as free. A sum with
    an unpriced part shows its priced part as a lower bound.
    """
    parts = [f"in {usage.input_tokens:,}", f"out {usage.output_tokens:,}"]
    if usage.cache_read_tokens or usage.cache_creation_tokens:
        parts.append(f"cache {usage.cache_hit_rate:.0%} hit")
    if usage.reasoning_tokens:
        parts.append(f"reasoning {usage.reasoning_tokens:,}")
    text = f"{usage.total:,} tokens ({', '.join(parts)})"
    if usage.priced:
        text += f", ${usage.cost:.4f}"
    elif usage.cost:
        text += f", at least ${usage.cost:.4f} (part of the cost unknown)"
    elif usage.total:
        text += ", cost unknown"
    return text


#: How a :class:`Renderer` shows a call's input while the model writes it.
_ARGUMENTS = ("progress", "stream", "off")


class Renderer:
    """Writes events to ``out`` as they come. ``color=None`` decides from the stream.

    ``arguments`` says what a call's input looks like while the model writes it
    (TOOL_INPUT): ``"progress"`` (the default) redraws one line in place on a terminal
    — ``~> writing write_file: 12,345 characters`` — so a long argument (a file being
    written) shows the run is alive without filling the screen, and shows nothing on a
    pipe or in a log, where redrawing is impossible; ``"stream"`` writes the input
    itself, dimmed, as it comes (the CLI does, so a person about to be asked to
    approve a call has read it being written); ``"off"`` shows the call only once its
    input is whole.

    ``text`` formats the run's own text on its way out: an object with ``feed(delta)
    -> str`` (what to write now) and ``end() -> str`` (what it still holds, called
    before anything else is written), such as the CLI's Markdown renderer. It is
    handed the raw delta and must make it safe itself (``visible``). None writes the
    text as it came, made visible. A sub-agent's text is always written as it came.
    """

    def __init__(self, out: Optional[IO[str]] = None, *, color: Optional[bool] = None,
                 arguments: str = "progress", text: Any = None) -> None:
        if arguments not in _ARGUMENTS:
            raise ValueError(f"arguments must be one of {', '.join(_ARGUMENTS)}; got "
                             f"{arguments!r:.40}")
        self.out = out if out is not None else sys.stdout
        self.color = _wants_color(self.out) if color is None else color
        self.arguments = arguments
        self.text = text
        self._at_line_start = True
        self._in_thinking = False
        self._turns = 0
        self._indent = ""  # a forwarded event's: two spaces per sub-agent level
        self._speaker: Tuple[str, ...] = ()  # whose text the current line holds
        self._writing: Optional[str] = None  # the id of the call whose input is shown
        self._written = 0  # characters of its input so far

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
        self._write(self._indent + text + "\n")

    def _end_text(self) -> None:
        """Write what the text formatter holds (a line it has not drawn yet)."""
        if self.text is not None:
            self._write(self.text.end())

    def _text(self, event: Event) -> None:
        """A text delta; a sub-agent's opens a line of its own, indented, named."""
        if self.text is not None and not event.agent:
            if self._speaker:  # back from a sub-agent's line
                self._speaker = ()
                if not self._at_line_start:
                    self._write("\n")
            self._write(self.text.feed(event.text))
            return
        self._end_text()
        text = visible(event.text)
        if event.agent != self._speaker or (event.agent and self._at_line_start):
            self._speaker = event.agent
            if event.agent:
                if not self._at_line_start:
                    self._write("\n")
                self._write(self._indent + self._paint(f"{visible(event.agent[-1])}: ", _DIM))
            elif not self._at_line_start:
                self._write("\n")
        if event.agent:
            text = text.replace("\n", "\n" + self._indent + "  ")
        self._write(text)

    def _end_thinking(self) -> None:
        if self._in_thinking:
            self._in_thinking = False
            if not self._at_line_start:
                self._write("\n")

    def _end_writing(self) -> None:
        """Leave a call's input display: the progress line is erased (the call's own
        line follows), streamed input ends its line."""
        if self._writing is None:
            return
        self._writing = None
        if self.arguments == "progress":
            self._write("\r\x1b[2K")
            self._at_line_start = True
        elif not self._at_line_start:
            self._write("\n")

    def _tool_input(self, event: Event, tool: ToolEvent) -> None:
        """A delta of a call's input: its size so far, redrawn in place on a terminal
        (``progress``), or the delta itself, dimmed (``stream``)."""
        if self.arguments == "off" or (self.arguments == "progress" and not self.color):
            return  # a pipe or a log gets the call's line once its input is whole
        if self._writing != tool.id:
            self._end_writing()
            self._end_thinking()
            if not self._at_line_start:
                self._write("\n")
            self._writing, self._written = tool.id, 0
            if self.arguments == "stream":
                self._write(self._indent + self._paint("~> ", _CYAN)
                            + self._paint(visible(tool.name), _BOLD)
                            + " ")
        self._written += len(event.text)
        if self.arguments == "stream":
            self._write(self._paint(visible(event.text), _DIM))
        else:
            self._write(self._paint(f"\r\x1b[2K{self._indent}~> writing {visible(tool.name)}: "
                                    f"{self._written:,} characters", _DIM))

    def event(self, event: Event) -> None:
        """Show one event."""
        kind = event.kind
        self._indent = "  " * len(event.agent)
        if kind is not Kind.TEXT:
            self._end_text()
        if kind is Kind.TOOL_INPUT and event.tool is not None:
            self._tool_input(event, event.tool)
            self._flush()
            return
        if self._writing is not None:
            self._end_writing()
        if kind is Kind.TEXT:
            self._end_thinking()
            self._text(event)
        elif kind is Kind.THINKING:
            if not self._in_thinking:
                if not self._at_line_start:
                    self._write("\n")
                self._write(self._paint("thinking: ", _DIM))
                self._in_thinking = True
            self._write(self._paint(visible(event.text), _DIM))
        elif kind is Kind.TOOL_CALL and event.tool is not None:
            self._line(self._call_line(event.tool))
        elif kind is Kind.TOOL_RESULT and event.tool is not None:
            self._line(self._result_line(event.tool))
            for part in event.tool.content:
                note = _media_note(part)
                if note:
                    self._line("      " + self._paint(visible(note), _DIM))
        elif kind is Kind.TURN and event.agent:
            self._line(self._paint(f"-- {visible(event.agent[-1])} turn: "
                                   f"{describe_usage(event.usage)}", _DIM))
        elif kind is Kind.TURN:
            self._turns += 1
            self._line(self._paint(f"-- turn {self._turns}: {describe_usage(event.usage)}", _DIM))
        elif kind is Kind.COMPACTION and event.compaction is not None:
            done = event.compaction
            if done.strategy.startswith("context edits"):  # the provider's own
                self._line(self._paint(f"-- {visible(done.strategy)}: {done.tokens:,} input "
                                       "tokens saved", _DIM))
            else:
                self._line(self._paint(f"-- compacted ({done.strategy}): {done.removed} "
                                       f"messages, ~{done.tokens:,} tokens", _DIM))
        elif kind is Kind.DONE:
            for line in sources(event.messages):
                self._line(self._paint(visible(line), _DIM))
            self._line(self._summary(event))
        self._flush()

    def _flush(self) -> None:
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
        where = f" [{visible(tool.server)}]" if tool.server else ""
        return (self._paint("-> ", _CYAN) + self._paint(visible(tool.name), _BOLD) + where + " "
                + visible(_compact(tool.input)))

    def _result_line(self, tool: ToolEvent) -> str:
        if tool.discarded:
            status, style = "not run", _YELLOW
        elif tool.paused:
            status, style = "paused", _YELLOW
        elif tool.refused:
            status, style = "refused", _YELLOW
        elif tool.error is not None:
            status, style = "failed", _RED
        else:
            status, style = "ok", _GREEN
        detail = visible(_first_line(tool.error if tool.error is not None else tool.result))
        timing = f" {tool.duration:.2f}s" if tool.duration else ""
        text = f"   {self._paint(status, style)} {visible(tool.name)}{timing}"
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


# -- notebooks ---------------------------------------------------------------------------

# Scoped under .nacelle so a notebook's own styles are left alone.
_NOTEBOOK_CSS = ("<style>.nacelle .msg{border-left:3px solid #d9dee6;padding:2px 8px;margin:6px 0}"
                 ".nacelle .msg.assistant{border-color:#3b6fd8}.nacelle .role{font-size:11px;"
                 "font-weight:600;opacity:.7;text-transform:uppercase}.nacelle .text{white-space:"
                 "pre-wrap}.nacelle pre{white-space:pre-wrap;margin:2px 0}.nacelle .bad{color:"
                 "#d0453a}.nacelle .tag{font-size:11px;opacity:.7}.nacelle .media img{"
                 "max-width:min(100%,480px);max-height:360px}.nacelle figure{margin:4px 0}"
                 ".nacelle figcaption{font-size:11px;opacity:.7}</style>")


def sources(messages: Sequence[Message]) -> List[str]:
    """The sources the answer cites, numbered: ``sources:`` then ``[n] title <url>`` per
    distinct page the last assistant message's Text parts cite, in their order (nothing
    when they cite none). What the provider wrote is returned raw; the renderer passes
    it through ``visible`` as it does any text from outside."""
    last = next((m for m in reversed(messages) if m.role is Role.ASSISTANT), None)
    seen: Dict[Tuple[str, str], int] = {}
    for part in last.parts if last is not None else ():
        for citation in getattr(part, "citations", ()) if isinstance(part, Text) else ():
            key = (citation.url, citation.title)
            if (citation.url or citation.title) and key not in seen:
                seen[key] = len(seen) + 1
    if not seen:
        return []
    return ["sources:"] + [
        f"  [{n}] {title or url}" + (f" <{url}>" if url and title else "")
        for (url, title), n in seen.items()]


def html(messages: Sequence[Message]) -> str:
    """A conversation as HTML for a notebook: escaped, tool calls and results folded."""
    return f'{_NOTEBOOK_CSS}<div class="nacelle">{messages_html(json.loads(dumps(messages)))}</div>'


class _Live:
    """A stream so far, as the HTML of one notebook cell."""

    def __init__(self) -> None:
        self.parts: List[str] = []  # finished HTML
        # The deltas of the part still streaming, joined when shown: adding each to a
        # string copies it every time, the square of a long answer.
        self.deltas: List[str] = []
        self.thinking = False

    def add(self, event: Event) -> None:
        kind = event.kind
        if kind in (Kind.TEXT, Kind.THINKING):
            if (kind is Kind.THINKING) != self.thinking:
                self._flush()
                self.thinking = kind is Kind.THINKING
            self.deltas.append(event.text)
            return
        self._flush()
        if kind is Kind.TOOL_CALL and event.tool is not None:
            self.parts.append(f"<details><summary>&rarr; {escape(event.tool.name)}</summary>"
                              f"<pre>{escape(event.tool.input)}</pre></details>")
        elif kind is Kind.TOOL_RESULT and event.tool is not None:
            line = Renderer(color=False)._result_line(event.tool).strip()
            body = event.tool.error if event.tool.error is not None else event.tool.result
            self.parts.append(f"<details><summary>&larr; {escape(line)}</summary>"
                              f"<pre>{escape(body)}</pre></details>")
            self.parts += [media_html(_media_json(part)) for part in event.tool.content
                           if isinstance(part, (Image, Document))]
        elif kind is Kind.TURN:
            self.parts.append(f'<div class="tag">turn: {escape(describe_usage(event.usage))}</div>')
        elif kind is Kind.DONE:
            stop = event.stop or Stop.OTHER
            totals = escape(describe_usage(event.usage))
            self.parts.append(f"<div><b>done</b>: {totals}</div>" if stop.complete else
                              f'<div class="bad"><b>INCOMPLETE ANSWER</b>: stopped with '
                              f"'{escape(stop.value)}'; {totals}</div>")

    @property
    def text(self) -> str:
        """The text of the part still streaming."""
        if len(self.deltas) > 1:
            self.deltas[:] = ["".join(self.deltas)]  # joined once per showing, not per delta
        return self.deltas[0] if self.deltas else ""

    def _flush(self) -> None:
        text = self.text
        if text:
            style = ' style="opacity:.6"' if self.thinking else ""
            self.parts.append(f'<div class="text"{style}>{escape(text)}</div>')
        self.deltas = []

    def html(self) -> str:
        text = self.text
        pending = text and f'<div class="text">{escape(text)}</div>'
        return f'{_NOTEBOOK_CSS}<div class="nacelle">{"".join(self.parts)}{pending}</div>'


def display(events: Iterable[Event], *, interval: float = 0.25,
            out: Optional[IO[str]] = None) -> Optional[Event]:
    """Show a stream live in a notebook (text to ``out`` without IPython); return its
    DONE event (None if the stream had none)."""
    try:  # by name, so neither importing this module nor type-checking it needs IPython
        ipython: Any = importlib.import_module("IPython.display")
    except ImportError:
        return render(events, out)
    HTML = ipython.HTML
    live = _Live()
    handle = ipython.display(HTML(live.html()), display_id=True)
    if handle is None:  # IPython is installed, but this is no notebook: nothing to update
        return render(events, out)
    done, shown = None, time.monotonic()
    for event in events:
        live.add(event)
        if event.kind is Kind.DONE:
            done = event
        now = time.monotonic()
        if now - shown >= interval:
            handle.update(HTML(live.html()))
            shown = now
    handle.update(HTML(live.html()))
    return done
