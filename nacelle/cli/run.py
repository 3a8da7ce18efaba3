"""The command without a subcommand: ``nacelle "prompt"`` runs one prompt and exits;
with stdin piped and no prompt, stdin is the prompt; with both, the piped text follows
the prompt as its material (:mod:`nacelle.cli.script`). The answer alone goes to
stdout (Markdown drawn on a terminal, :mod:`nacelle.cli.markdown`; as written on a
pipe), everything else to stderr; ``--json`` / ``--jsonl`` encode the run instead
(``result.schema.json`` in this package). ``nacelle`` alone, on a terminal, is an
interactive session (:mod:`nacelle.cli.interactive`).

Approvals (:mod:`nacelle.cli.approval`): a write, command or web call asks
y/n/always/never on the terminal, showing a diff or the command first; ``--yes``
approves everything. With stdin piped the question goes to ``/dev/tty``, and with no
terminal it is a no, and the run exits 3 naming the refused calls. Sessions (``--session NAME``, ``--continue``) keep the
conversation in a FileStore (:mod:`nacelle.cli.sessions`); ``--record RUN.jsonl``
attaches a :class:`nacelle.observe.Recorder`. ``--skills DIR`` (repeatable) loads Agent
Skills (:mod:`nacelle.skills`), ``--memory DIR`` adds the memory tool
(:mod:`nacelle.toolsets.memory`), and the AGENTS.md / CLAUDE.md layers
(:mod:`nacelle.instructions`) follow the system prompt unless ``--no-instructions``.
``-a/--attach FILE`` puts an image, a PDF or a text file before the prompt
(:mod:`nacelle.cli.attach`); ``--mcp`` and ``--functions`` add an MCP server's tools
and a Python file's functions (:mod:`nacelle.cli.extra_tools`).

Ctrl-C during a one-prompt run cancels it and exits 130, without waiting for tool
threads that ignore cancellation.

Imports the standard library, the core and this package's modules (the heavier ones
inside the functions that need them); prints.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .. import bounded_json
from ..errors import NacelleError
from ..settings import SettingsError, resolve
from .agent import (
    agent_options, build_agent, context_flags, context_options, open_context, output_options,
    version,
)
from .approval import Approver
from .attach import check, read_attachment, user_message
from .extra_tools import ExtraTools, open_tools, tool_flags, tool_options
from .logs import log_options, run_log
from .help import EPILOG, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from .terminal import exit_now, fail, isatty, one_line, open_terminal
from .tool_choice import UnknownTool

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["command", "prompt_parser", "run_events"]


def prompt_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nacelle", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s [options] [PROMPT | -]\n       %(prog)s COMMAND ...",
        description="Run an agent on one prompt (for scripts: the answer alone on stdout), "
                    "or interactively.",
        epilog=EPILOG, argument_default=argparse.SUPPRESS)
    parser.add_argument("prompt", nargs="?",
                        help="run this prompt and exit ('-': read it from stdin)")
    agent_options(parser)
    output_options(parser)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--session", metavar="NAME",
                       help="continue the conversation saved as NAME, if any, and save it "
                            "after each answer")
    group.add_argument("--continue", action="store_true", dest="continue_",
                       help="continue the session saved most recently")
    parser.add_argument("--sessions-dir", dest="sessions_dir", metavar="DIR",
                        help="where sessions are saved (default: "
                             "$XDG_DATA_HOME/nacelle/sessions or ~/.local/share/nacelle/sessions)")
    parser.add_argument("--record", metavar="RUN.jsonl",
                        help="append the run's events and timings to RUN.jsonl "
                             "(see 'nacelle report')")
    parser.add_argument("--schema", metavar="FILE.json",
                        help="answer with a JSON value matching this JSON Schema (printed "
                             "on stdout; needs a prompt)")
    parser.add_argument("--pause", action="store_true", help="calls that would ask pause "
                        "instead (needs --session; see 'nacelle resume')")
    parser.add_argument("-a", "--attach", metavar="FILE", action="append",
                        help="attach an image (PNG, JPEG, GIF, WebP), a PDF or a text file "
                             "to the prompt ('-': stdin); repeatable")
    context_options(parser)
    tool_options(parser)
    log_options(parser)
    parser.add_argument("--version", action="version", version=version())
    return parser


def _recorder(path: Optional[str]) -> Any:
    if path is None:
        return None
    from ..observe import Recorder

    try:
        with open(path, "a", encoding="utf-8"):
            pass  # fail now: a Recorder that cannot write fails in an observer, logged only
    except OSError as err:
        raise SettingsError(f"--record {path}: {err.strerror}") from None
    return Recorder(path)


def _load_schema(path: str) -> Any:
    """The ``nacelle.Schema`` in a JSON Schema file, or a SettingsError saying why not."""
    from ..output import Schema

    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            schema = bounded_json.loads(handle.read(), what="the schema")
    except (OSError, ValueError) as err:
        raise SettingsError(f"--schema {path}: {err}") from None
    if not isinstance(schema, dict):
        raise SettingsError(f"--schema {path}: a JSON Schema is a JSON object")
    stem = os.path.splitext(os.path.basename(path))[0]
    name = re.sub(r"[^a-zA-Z0-9_-]+", "_", stem).strip("_")[:64] or "output"
    return Schema(name, schema)


def run_events(events: Iterator[Any], *, mode: str, quiet: bool, schema: Any,
                session: Any) -> Tuple[int, Any]:
    """Show one run for a script; returns (exit code, the DONE event or None)."""
    from .markdown import for_stream
    from .script import ScriptOutput
    from ..console import Renderer
    from ..events import Kind

    # On a terminal a call's input is shown as the model writes it, so a person asked
    # to approve a long write has read it come in; a log gets each call once, whole.
    narrate = None if quiet else Renderer(
        sys.stderr, arguments="stream" if isatty(sys.stderr) else "progress").event
    live = mode == "text" and isatty(sys.stdout)
    output = ScriptOutput(sys.stdout, sys.stderr, mode=mode, narrate=narrate, live=live,
                          text=for_stream(sys.stdout) if live else None,
                          structured=schema is not None,
                          session=session.name if session is not None else None)
    done = None
    try:
        for event in events:
            output.event(event)
            if event.kind is Kind.DONE:
                done = event
    except KeyboardInterrupt:
        output.interrupted()  # what was streamed stays, a line held for drawing too
        raise
    if done is None or done.stop is None:
        return EXIT_FAILED, done
    if schema is not None and done.output is None:
        print(f"nacelle: no valid value ({done.stop.value})", file=sys.stderr)
        return EXIT_INCOMPLETE, done
    return (EXIT_OK if done.stop.complete else EXIT_INCOMPLETE), done



def _unasked(code: int, calls: List[str]) -> int:
    """A run that answered while calls it wanted were refused for want of a terminal
    did not do what was asked: exit 3, not 0, and say how to allow them."""
    if not calls or code != EXIT_OK:
        return code
    print(f"nacelle: refused with no terminal to ask: {', '.join(calls)}; --yes approves "
          "such calls, or run on a terminal to answer", file=sys.stderr)
    return EXIT_INCOMPLETE


def command(argv: Sequence[str]) -> int:
    """Run the prompt (or the interactive session) ``argv`` describes; the exit code."""
    args = vars(prompt_parser().parse_args(argv))
    argument = args.pop("prompt", None)
    yes, quiet, mode = args.pop("yes", False), args.pop("quiet", False), args.pop("mode", "text")
    schema_file, system = args.pop("schema", None), args.pop("system", None)
    max_cost = args.pop("max_cost", None)
    name, latest = args.pop("session", None), args.pop("continue_", False)
    pause, log = args.pop("pause", False), args.pop("log", None)
    context, extra_flags = context_flags(args), tool_flags(args)
    attached = list(args.pop("attach", None) or [])
    if "-" in attached and argument in (None, "-"):
        return fail("--attach - reads stdin, so the prompt is an argument: "
                    "nacelle -a - \"PROMPT\"", EXIT_USAGE)
    if pause and not (name or latest):
        return fail("--pause needs --session NAME (the paused run is saved there)", EXIT_USAGE)
    if max_cost is not None and not max_cost >= 0:
        return fail("--max-cost must be a number of dollars of at least 0", EXIT_USAGE)
    stdin_is_terminal = isatty(sys.stdin)
    piped = sys.stdin if (not stdin_is_terminal or argument == "-") and "-" not in attached \
        else None
    from .script import read_prompt

    try:
        prompt = read_prompt(argument, piped)
    except (OSError, UnicodeDecodeError) as err:
        return fail(f"cannot read the prompt from stdin: {err}")
    if prompt is not None and not prompt.strip():
        return fail("the prompt is empty" + ("" if argument else " (stdin had nothing)"),
                     EXIT_USAGE)
    if prompt is None and (schema_file is not None or mode != "text" or pause):
        flag = "--schema" if schema_file else "--pause" if pause else "--" + mode
        return fail(f"{flag} needs a prompt", EXIT_USAGE)
    try:
        parts = [read_attachment(spec, stdin=getattr(sys.stdin, "buffer", None))
                 for spec in attached]
    except NacelleError as err:
        return fail(one_line(err))
    terminal = sys.stdin if stdin_is_terminal else (None if yes else open_terminal())
    extras: Dict[str, Any] = {}
    extra = ExtraTools()
    try:
        extras = open_context(context)
        extra = open_tools(extra_flags)
        schema = _load_schema(schema_file) if schema_file is not None else None
        recorder = _recorder(args.pop("record", None))
        settings = resolve(args)
        from .sessions import open_session, sessions_dir

        session = open_session(sessions_dir(settings.sessions_dir), name, latest)
        approvers: List[Approver] = []

        def approver(tools: Sequence[Any], root: str) -> Approver:
            approvers.append(Approver(tools, yes=yes, root=root, stdin=terminal,
                                      no_terminal=terminal is None, pause=pause))
            return approvers[-1]

        logged = run_log(log, session=session.name if session is not None else None,
                         interactive=prompt is None)
        options: Dict[str, Any] = dict(
            observers=[o for o in (recorder, logged) if o is not None], system=system,
            max_cost=max_cost, approver=approver, extra_tools=extra.tools, **extras)
        agent, local = build_agent(settings, **options)
        try:
            check(parts, agent.backend, settings.backend)
        except NacelleError:
            local.close()
            raise
    except NacelleError as err:
        if extras.get("memory") is not None:
            extras["memory"].close()
        extra.close()
        return fail(one_line(err), EXIT_USAGE if isinstance(err, UnknownTool) else EXIT_FAILED)
    opened = [local]

    def switch_model(name: str) -> "Agent":
        import dataclasses

        new, tools = build_agent(dataclasses.replace(settings, model=name), **options)
        opened.append(tools)
        return new

    # The Recorder flushes at each run's end, so exit_now's os._exit loses nothing
    # of a finished run even when it skips the close below.
    try:
        if prompt is None:
            from .interactive import interactive
            from .markdown import for_stream
            from .sessions import data_dir
            from ..console import Renderer, describe_usage

            return exit_now(interactive(
                agent, make_renderer=lambda: Renderer(arguments="stream",
                                                      text=for_stream(sys.stdout)),
                describe_usage=describe_usage, session=session,
                sessions_directory=sessions_dir(settings.sessions_dir),
                switch_model=switch_model, version=version(),
                settle=lambda: [a.wait_idle() for a in approvers],
                history_path=os.path.join(data_dir(), "history"),
                skills=extras["skills"], memory=extras["memory"], attachments=parts,
                logged=logged))
        from .sessions import after
        conversation = (session.messages if session is not None else []) + [
            user_message(prompt, parts)]
        try:
            events = agent.stream(conversation, output=schema) if schema is not None \
                else agent.stream(conversation)
            code, done = run_events(events, mode=mode, quiet=quiet, schema=schema,
                                     session=session)
            if done is not None and done.stop is not None:
                after(done, session, sys.stderr)
            code = _unasked(code, [c for a in approvers for c in a.unasked])
        except KeyboardInterrupt:
            print("\n(cancelled)", file=sys.stderr)
            return exit_now(EXIT_INTERRUPTED)
        except (NacelleError, OSError) as err:
            print(file=sys.stderr)
            return exit_now(fail(one_line(err)))
        return exit_now(code)
    finally:
        for tools in opened:
            tools.close()
        if extras["memory"] is not None:
            extras["memory"].close()
        extra.close()
        if recorder is not None:
            recorder.close()
        if terminal is not None and terminal is not sys.stdin:
            terminal.close()

