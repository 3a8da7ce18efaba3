"""``nacelle logs``, and the observer that keeps every CLI run in it.

Every prompt the command runs — one prompt and exit, each prompt of an
interactive session, and a paused run ``nacelle resume`` goes on with — is written to ``logs.db`` in the data directory
(:mod:`nacelle.cli.logdb` says what a row holds) by :class:`RunLog`, an observer the
CLI gives its agent; the library itself never writes a log. A run that cannot be
logged (a damaged file, a full disk) still succeeds: one warning line on stderr says
why. As ``llm`` does (https://llm.datasette.io/en/stable/logging.html):
``nacelle logs off`` stops logging (a ``logs-off`` file in the data directory) and
``nacelle logs on`` starts it again; ``--no-log`` on a prompt run skips that run, and
``--log`` logs it even when logging is off. There is no environment variable for it:
the file is the lasting switch and the flags are per run, as in ``llm``.

``nacelle logs`` shows the latest three runs, oldest first (``-n N``, 0 for all),
``-q TEXT`` only those whose prompt or answer has every word of TEXT (full-text search
where SQLite has FTS5, else a slower case-insensitive match per word), ``-m MODEL``
only that model's, ``--json`` a JSON array of them (the field names of
:func:`nacelle.cli.logdb.entries` are stable). ``nacelle logs path`` prints where the
file is, ``nacelle logs status`` whether logging is on and what the file holds.

What a log holds came from a model and its tools, so every line shown goes through
:func:`nacelle.terminal_text.visible` (``--json`` through ``json_text``): a logged
escape sequence is shown, never acted on.

Imports the standard library, the core's ``terminal_text`` and ``events``, and the
sibling modules ``logdb``, ``sessions`` (the data directory) and ``terminal``; prints.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Dict, List, Optional, Sequence

from ..terminal_text import json_text, visible
from .help import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .sessions import data_dir

__all__ = ["RunLog", "command", "log_options", "logs_path", "run_log"]

OFF_MARKER = "logs-off"


def logs_path() -> str:
    """``logs.db`` in the data directory."""
    return os.path.join(data_dir(), "logs.db")


def logging_on() -> bool:
    """False after ``nacelle logs off``."""
    return not os.path.exists(os.path.join(data_dir(), OFF_MARKER))


def log_options(parser: argparse.ArgumentParser) -> None:
    """A prompt run's ``--no-log`` and ``--log``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--no-log", dest="log", action="store_false",
                       help="do not keep this run in the log ('nacelle logs')")
    group.add_argument("--log", dest="log", action="store_true",
                       help="keep this run in the log even after 'nacelle logs off'")


def run_log(flag: Optional[bool], *, session: Optional[str] = None, interactive: bool = False,
            err: IO[str] = sys.stderr) -> Optional["RunLog"]:
    """The observer that logs the runs of this command, or None when they are not
    logged (``flag`` is ``--log`` True, ``--no-log`` False, neither None). The prompts
    of an interactive session share a conversation id, made here."""
    if flag is False or (flag is None and not logging_on()):
        return None
    import uuid

    return RunLog(logs_path(), session=session, err=err,
                  conversation=uuid.uuid4().hex if interactive else None)


@dataclass
class _Run:
    started: float
    at: float
    prompt: str
    backend: str
    model: str
    resumed: bool = False
    turns: List[str] = field(default_factory=list)
    text: List[str] = field(default_factory=list)
    calls: Dict[str, Any] = field(default_factory=dict)


def _prompt(messages: Sequence[Any]) -> str:
    """What the user typed: the last text of the last user message (files attached
    with ``--attach`` come before it, and are not the prompt)."""
    from ..messages import Role, Text

    for message in reversed(messages):
        if message.role is Role.USER:
            texts = [part.text for part in message.parts if isinstance(part, Text)]
            return texts[-1] if texts else ""
    return ""


class RunLog:
    """An observer writing each run it sees to the log at ``path``, when the run ends.

    Only the runs the command started are written: a sub-agent's run (its
    ``run.start`` names a ``parent_run``) and the events a sub-agent forwards are
    part of their parent's. The answer is the text the model wrote, a paragraph per
    turn. Writing never raises: a failure is one line on ``err``.
    """

    events = True  # the observer hook sends every Event of the stream as an "event"

    def __init__(self, path: str, *, session: Optional[str] = None,
                 conversation: Optional[str] = None, err: IO[str] = sys.stderr) -> None:
        self.path, self.session, self.conversation, self.err = path, session, conversation, err
        self._runs: Dict[str, _Run] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RunLog({self.path!r})"

    def __call__(self, observation: Any) -> None:
        kind, data = observation.kind, observation.data
        with self._lock:
            run = self._runs.get(observation.run_id)
            if kind == "event" and run is not None:
                self._event(run, data["event"])
            elif kind == "run.start" and "parent_run" not in data:
                resumed = bool(data.get("resumed"))
                self._runs[observation.run_id] = _Run(
                    started=time.monotonic(), at=observation.time,
                    prompt="" if resumed else _prompt(data.get("messages", ())),
                    backend=str(data.get("backend", "")), model=str(data.get("model", "")),
                    resumed=resumed)
            elif kind == "request.start" and run is not None and not run.model:
                run.model = str(data.get("model") or "")  # a wrapper (Retry) names none
            elif kind == "run.end" and run is not None:
                del self._runs[observation.run_id]
            else:
                return
        if kind == "run.end" and run is not None:
            self._write(run, data)

    @staticmethod
    def _event(run: _Run, event: Any) -> None:
        from ..events import Kind

        if event.agent:  # forwarded from a sub-agent: its parent's call holds it
            return
        if event.kind is Kind.TEXT:
            run.text.append(event.text)
        elif event.kind is Kind.TURN and run.text:
            run.turns.append("".join(run.text))
            run.text.clear()
        elif event.kind is Kind.TOOL_CALL and event.tool is not None:
            run.calls[event.tool.id] = [event.tool.name, event.tool.input, "", False]
        elif event.kind is Kind.TOOL_RESULT and event.tool is not None:
            call = run.calls.setdefault(event.tool.id, [event.tool.name, event.tool.input,
                                                        "", False])
            failed = event.tool.error is not None
            call[2], call[3] = (event.tool.error if failed else event.tool.result), failed

    def _write(self, run: _Run, data: Any) -> None:
        from .logdb import Call, Entry, record

        try:
            usage, stop, error = data.get("usage"), data.get("stop"), data.get("error")
            turns = run.turns + (["".join(run.text)] if run.text else [])
            at = datetime.datetime.fromtimestamp(run.at, tz=datetime.timezone.utc)
            entry = Entry(
                datetime_utc=at.isoformat(timespec="milliseconds"), prompt=run.prompt,
                response="\n\n".join(t for t in turns if t), backend=run.backend,
                model=run.model,
                input_tokens=getattr(usage, "input_tokens", 0),
                output_tokens=getattr(usage, "output_tokens", 0),
                cache_read_tokens=getattr(usage, "cache_read_tokens", 0),
                cache_creation_tokens=getattr(usage, "cache_creation_tokens", 0),
                reasoning_tokens=getattr(usage, "reasoning_tokens", 0),
                cost=usage.cost if getattr(usage, "priced", False) else None,
                duration_ms=int((time.monotonic() - run.started) * 1000),
                stop=getattr(stop, "value", None),
                error=_one_line(error) if error is not None else None,
                session=self.session, conversation_id=self.conversation, resumed=run.resumed,
                tool_calls=tuple(Call(call_id, name, text, result, failed)
                                 for call_id, (name, text, result, failed) in run.calls.items()))
            record(self.path, entry)
        except Exception as err:  # noqa: BLE001 - a log that cannot be written never fails a run
            self.err.write(f"nacelle: warning: this run was not logged: {visible(_one_line(err))}\n")
            self.err.flush()


def _one_line(err: BaseException) -> str:
    from .logdb import LogsError

    lines = str(err).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(err, LogsError):
        return text
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f} s" if ms >= 100 else f"{ms} ms"


def _usage_line(entry: Dict[str, Any]) -> str:
    usage = entry["usage"]
    parts = [f"in {usage['input_tokens']:,}", f"out {usage['output_tokens']:,}"]
    if usage["cache_read_tokens"] or usage["cache_creation_tokens"]:
        parts.append(f"cache read {usage['cache_read_tokens']:,}, "
                     f"write {usage['cache_creation_tokens']:,}")
    if usage["reasoning_tokens"]:
        parts.append(f"reasoning {usage['reasoning_tokens']:,}")
    cost = "cost unknown" if entry["cost"] is None else f"${entry['cost']:.4f}"
    ended = f"error: {entry['error']}" if entry["error"] else f"stop: {entry['stop'] or 'unknown'}"
    return f"{', '.join(parts)} tokens; {cost}; {_seconds(entry['duration_ms'])}; {ended}"


def _brief(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def render(entry: Dict[str, Any]) -> str:
    """One logged run as text a person reads (Markdown headings, as ``llm logs``)."""
    where = "".join(f", {label} {entry[key]}" for label, key in (
        ("session", "session"), ("conversation", "conversation_id")) if entry[key])
    lines = [f"# {entry['datetime_utc']}  id {entry['id']}{where}", "",
             f"Model: {entry['backend']} {entry['model']}".rstrip(), "",
             "## Prompt", "", entry["prompt"] if not entry.get("resumed") else
             "(a paused run, resumed with 'nacelle resume')", ""]
    if entry["tool_calls"]:
        lines += ["## Tool calls", ""]
        for call in entry["tool_calls"]:
            outcome = "failed" if call["failed"] else "ok"
            lines.append(f"- {call['name']} {_brief(call['input'])} -> {outcome}: "
                         f"{_brief(call['result'])}")
        lines.append("")
    lines += ["## Response", "", entry["response"], "", f"Usage: {_usage_line(entry)}", ""]
    return visible("\n".join(lines))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nacelle logs", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The runs kept in the log (every prompt run unless 'nacelle logs off' "
                    "or --no-log), the latest last.",
        epilog="-q matches whole words with SQLite's full-text search (FTS5) where this "
               "Python's SQLite has it,\nelse each word as a case-insensitive substring "
               "(LIKE; slower on a large log).\nstatus says which one this Python uses.")
    parser.add_argument("action", nargs="?", default="list",
                        choices=("list", "path", "status", "on", "off"),
                        help="list the runs (the default); print the database's path; say "
                             "whether logging is on; turn logging on or off")
    parser.add_argument("-n", "--count", type=int, default=3, metavar="N",
                        help="how many of the latest runs (default 3; 0: all)")
    parser.add_argument("-q", "--query", default="", metavar="TEXT",
                        help="only runs whose prompt or answer holds every word of TEXT")
    parser.add_argument("-m", "--model", metavar="MODEL", help="only runs of this model")
    parser.add_argument("--json", action="store_true",
                        help="a JSON array of the runs (id, datetime_utc, prompt, response, "
                             "backend, model, usage, cost, duration_ms, stop, error, session, "
                             "conversation_id, resumed, tool_calls)")
    return parser


def _status(path: str, out: IO[str]) -> None:
    from .logdb import count, has_fts5

    state = "on" if logging_on() else "off ('nacelle logs on' starts it again)"
    out.write(f"logging: {state}\ndatabase: {visible(path)}\n")
    if os.path.exists(path):
        out.write(f"runs: {count(path):,}\nsize: {os.path.getsize(path):,} bytes\n")
    else:
        out.write("runs: 0 (no database yet)\n")
    out.write("search: " + ("full-text (FTS5)\n" if has_fts5()
                            else "substring (LIKE: this SQLite has no FTS5)\n"))


def logs_command(argv: Sequence[str], out: IO[str], err: IO[str]) -> int:
    """``nacelle logs ...`` writing to ``out`` and ``err``; returns the exit code."""
    from .logdb import LogsError, entries

    args = _parser().parse_args(argv)
    path = logs_path()
    if args.count < 0:
        err.write("nacelle: error: -n must be 0 (all) or more\n")
        return EXIT_USAGE
    try:
        if args.action == "path":
            out.write(visible(path) + "\n")
        elif args.action == "status":
            _status(path, out)
        elif args.action == "off":
            from .._files import private_directory

            marker = os.path.join(private_directory(data_dir()), OFF_MARKER)
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT, 0o600))
            err.write("logging is off: runs are not kept ('nacelle logs on' starts again)\n")
        elif args.action == "on":
            if not logging_on():
                os.remove(os.path.join(data_dir(), OFF_MARKER))
            err.write(f"logging is on: runs are kept in {visible(path)}\n")
        elif not os.path.exists(path):
            if args.json:
                out.write("[]\n")
            else:
                err.write(f"no runs logged yet ({visible(path)})\n")
        else:
            found = entries(path, limit=args.count, query=args.query, model=args.model)
            if args.json:
                out.write(json_text(found, indent=2) + "\n")
            else:
                out.write("\n".join(render(entry) for entry in found))
        return EXIT_OK
    except (LogsError, OSError, ImportError) as exc:  # ImportError: a Python without sqlite3
        err.write(f"nacelle: error: {visible(_one_line(exc))}\n")
        return EXIT_FAILED


def command(argv: Sequence[str]) -> int:
    """``nacelle logs``."""
    return logs_command(argv, sys.stdout, sys.stderr)
