"""The CLI for scripts: the prompt from stdin, the answer alone on stdout, and the
``--json`` / ``--jsonl`` encodings of a run.

The prompt. With no prompt argument and stdin not a terminal, the whole of stdin is
one prompt (not a line per prompt: a piped file is one document). ``-`` as the
argument reads stdin even from a terminal, to end of input. A prompt argument with
piped stdin is the argument, a blank line, then the piped text, so
``git diff | nacelle "write a commit message"`` reads as an instruction followed by
its material. Stdin is read only when it is not a terminal, and read to its end: a
parent that keeps stdin open and writes nothing makes the CLI wait, as ``cat``
would (``< /dev/null`` says there is nothing).

Streams. stdout gets the model's text and nothing else; tool lines, thinking, usage
and cost go to stderr (``--quiet`` drops them; errors still show). The text is
written and flushed delta by delta, on a terminal and on a pipe alike, as ``llm``
does (https://llm.datasette.io/en/stable/usage.html): a reader of the pipe sees the
first words when the model writes them, and a Ctrl-C keeps what was written. So in a
run that calls tools, the text a turn writes before its calls ("Let me read the file
first.") is on stdout too, each turn's text starting a line of its own, since what
streamed cannot be taken back once a later turn shows it was not the answer; the
final turn's text alone is ``--json``'s ``text``. The text ends with one newline.
With ``--schema`` the answer is the validated JSON value, and text is narration.

``--json`` prints one object when the run ends, described by
``result.schema.json`` beside this module (package data): text, output, stop,
complete, turns, usage, cost (null when unknown — never 0 for unknown) and the tool
calls with their results; a call that returned images or documents lists them in
``media`` by type, media type, size in bytes and title (as a recording's
``tool.end`` does), never their data (a program
that wants the bytes runs the agent in Python, where ``ToolEvent.content`` holds them). ``--jsonl`` prints one object per event as it happens
(``{"kind": "text", "text": ...}``, ``tool_call``, ``tool_result``, ``turn``,
``thinking``, ``compaction``) and ends with the result object with
``"kind": "done"``; consumers switch on ``kind`` and ignore kinds they do not know.

Nothing the model or a tool wrote reaches a terminal as it came
(:mod:`nacelle.terminal_text`): in text mode the answer shows control characters,
escape sequences and bidi overrides as their escapes (``\\x1b[2J``), since a person
or a file is what reads it; the JSON modes write them as ``\\u`` escapes, which decode
to the exact text, for a program that needs it.

Imports the standard library and the core; writes only to the streams it is given.
"""

from __future__ import annotations

from typing import IO, Any, Dict, List, Optional

from .. import bounded_json
from ..events import Event, Kind, Stop, ToolEvent, Usage
from ..messages import Document, Image
from ..observe import media_summary
from ..terminal_text import json_text, visible

__all__ = ["ScriptOutput", "event_json", "read_prompt", "result_json", "usage_json"]


def read_prompt(argument: Optional[str], stdin: Optional[IO[str]]) -> Optional[str]:
    """The prompt to run, from the argument and stdin; None for an interactive session.

    ``stdin`` is None when it is a terminal (and not asked for with ``-``).
    """
    if argument == "-":
        return stdin.read() if stdin is not None else ""
    piped = stdin.read() if stdin is not None else ""
    if argument is None:
        return piped if stdin is not None else None
    if piped.strip():
        return f"{argument}\n\n{piped}"
    return argument


def usage_json(usage: Usage) -> Dict[str, Any]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_creation_tokens": usage.cache_creation_tokens,
            "reasoning_tokens": usage.reasoning_tokens, "total": usage.total}


def _cost(usage: Usage) -> Optional[float]:
    return usage.cost if usage.priced else None


def _input(raw: str) -> Any:
    try:
        return bounded_json.loads(raw, what="tool input")
    except ValueError:  # not JSON, or too deep to read: given as written
        return raw


def _status(tool: ToolEvent) -> str:
    if tool.paused:
        return "paused"
    if tool.discarded:
        return "not run"
    if tool.refused:
        return "refused"
    return "failed" if tool.error is not None else "ok"


def tool_json(tool: ToolEvent, *, result: bool = True) -> Dict[str, Any]:
    data: Dict[str, Any] = {"id": tool.id, "name": tool.name, "input": _input(tool.input)}
    if tool.server:
        data["server"] = tool.server
    if result:
        data.update(status=_status(tool), result=tool.result, error=tool.error,
                    duration=round(tool.duration, 6))
        media = [media_summary(p) for p in tool.content if isinstance(p, (Image, Document))]
        if media:
            data["media"] = media
    return data



def _jsonable(value: Any) -> Any:
    from ..output import to_jsonable

    return to_jsonable(value)


def result_json(done: Event, tools: List[ToolEvent], turns: int,
                session: Optional[str] = None) -> Dict[str, Any]:
    """The ``--json`` object for a run that ended with ``done``."""
    from ..messages import Role

    stop = done.stop or Stop.OTHER
    text = next((m.text for m in reversed(done.messages) if m.role is Role.ASSISTANT), "")
    data: Dict[str, Any] = {
        "text": text, "output": _jsonable(done.output), "stop": stop.value,
        "complete": stop.complete, "turns": turns, "usage": usage_json(done.usage),
        "cost": _cost(done.usage), "tool_calls": [tool_json(t) for t in tools]}
    if session is not None:
        data["session"] = session
    return data


def event_json(event: Event) -> Optional[Dict[str, Any]]:
    """One ``--jsonl`` line for an event (None for DONE, which is the result line)."""
    kind = event.kind
    if kind in (Kind.TEXT, Kind.THINKING):
        return {"kind": kind.value, "text": event.text}
    if kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT) and event.tool is not None:
        return {"kind": kind.value,
                "tool": tool_json(event.tool, result=kind is Kind.TOOL_RESULT)}
    if kind is Kind.TURN:
        return {"kind": "turn", "stop": (event.stop or Stop.OTHER).value,
                "usage": usage_json(event.usage), "cost": _cost(event.usage)}
    if kind is Kind.COMPACTION and event.compaction is not None:
        done = event.compaction
        return {"kind": "compaction", "strategy": str(done.strategy), "removed": done.removed,
                "tokens": done.tokens}
    if kind is Kind.DONE:
        return None
    return {"kind": getattr(kind, "value", str(kind))}


class _Plain:
    """The answer's text as it came, made visible: what a pipe or a file gets."""

    def feed(self, text: str) -> str:
        return visible(text)

    def end(self) -> str:
        return ""


class ScriptOutput:
    """Sends one run's events where they belong for ``mode`` ("text", "json", "jsonl").

    ``narrate`` shows an event to a person on stderr (the console Renderer's
    ``event``), or None for ``--quiet``. ``live`` says stdout is the terminal stderr
    also writes to, so narration starts on a line of its own. ``text`` formats the
    answer on its way out (``feed(delta) -> str``, ``end() -> str``: the Markdown
    renderer on a terminal); by default it is written as it came, made visible.
    """

    def __init__(self, out: IO[str], err: IO[str], *, mode: str = "text",
                 narrate: Any = None, live: bool = False, structured: bool = False,
                 session: Optional[str] = None, text: Any = None) -> None:
        self.out, self.err, self.mode = out, err, mode
        self.narrate, self.live, self.structured = narrate, live, structured
        self.session = session
        self.text = text if text is not None else _Plain()
        self.tools: List[ToolEvent] = []
        self.turns = 0
        self._out_mid_line = False
        self._new_turn = False  # a tool call or a turn's end since the last text

    def _emit(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()  # a pipe gets each delta as it comes, not a buffer's worth
            self._out_mid_line = not text.endswith("\n")

    def _end_text(self) -> None:
        """Write what the text formatter still holds (a line not yet ended)."""
        self._emit(self.text.end())

    def _show(self, event: Event) -> None:
        if self.narrate is None:
            return
        self._end_text()
        if self._out_mid_line and self.live:
            self._emit("\n")  # one terminal shows both streams: start narration on its own line
        self.narrate(event)

    def event(self, event: Event) -> None:
        kind = event.kind
        if self.mode == "jsonl":
            line = event_json(event)
            if line is not None:
                self.out.write(json_text(line) + "\n")
                self.out.flush()
        if kind is Kind.TOOL_RESULT and event.tool is not None:
            self.tools.append(event.tool)
        if kind is Kind.TEXT:
            if self.mode != "text" or self.structured:
                self._show(event)  # the answer is the object or the value; text is narration
                return
            if self._new_turn and self._out_mid_line:
                self._emit("\n")  # each turn's text starts a line of its own
            self._new_turn = False
            self._emit(self.text.feed(event.text))
            return
        if self.mode == "text" and not self.structured:
            self._end_text()  # a line held for drawing ends with the text it belonged to
        if kind in (Kind.TOOL_CALL, Kind.TURN):
            self._new_turn = True
        if kind is Kind.TURN:
            self.turns += 1
        if kind is Kind.DONE:
            self._finish(event)
        self._show(event)

    def interrupted(self) -> None:
        """The run was cancelled (Ctrl-C): write what the text formatter still holds,
        so everything the model wrote before it stays on the screen."""
        self._end_text()

    def _finish(self, done: Event) -> None:
        if self.mode == "json":
            self._emit(json_text(result_json(done, self.tools, self.turns, self.session),
                                 indent=2) + "\n")
        elif self.mode == "jsonl":
            line = dict(result_json(done, self.tools, self.turns, self.session), kind="done")
            self._emit(json_text(line) + "\n")
        elif self.structured:
            if done.output is not None:
                self._emit(json_text(_jsonable(done.output), indent=2) + "\n")
        else:
            self._end_text()
            if self._out_mid_line:
                self._emit("\n")
