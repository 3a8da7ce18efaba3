"""``nacelle resume NAME``: decide a paused run's calls, then go on with the run.

A prompt run with ``--pause`` and ``--session NAME`` asks nobody: a call that would
ask at the terminal pauses instead, the run ends (exit code 3), and its checkpoint
is saved under the session's name. That is for runs nobody watches — cron, CI, a
script on a server — whose calls a person decides later, somewhere else, as
openai-agents' and LangGraph's interrupt-and-resume let a program do; here it is a
command.

``nacelle resume NAME`` takes the checkpoint (:meth:`FileStore.take_checkpoint`: a
checkpoint is resumed at most once, even by two commands started together), lists
the pending calls on stderr with what each would do (the diff of a write, the
command of ``run_command``, as the approval prompt shows them), and decides each:
``--approve ID`` / ``--deny ID`` on the command line (``all`` for every pending
call), else y/n on the terminal. The run then goes on from where it paused; its
answer is printed as a prompt's is (stdout, or ``--json`` / ``--jsonl``), and the
session is saved with the whole conversation. The resumed run's later calls ask as
a prompt's do, or pause again with ``--pause``. The agent is rebuilt from the flags
given, ``--skills``, ``--memory`` and the AGENTS.md layers (``--no-instructions``)
included, so give the ones the paused run had.

Nothing is lost on the way, and nothing runs twice: a checkpoint whose calls
cannot all be decided (no terminal and no flag for one; an id no call has) is put
back as it was and the command exits 2; one the agent refuses (it lacks a tool the
paused run had) is put back and the command exits 1. A resumed run that fails or is
interrupted after its calls were closed saves the conversation with their results
as the session (a call that never started reads "not run"), since the checkpoint
would run the approved ones again; go on with ``--session NAME``.

What the model wrote (a call's id, name and input) and what a failure says are shown
through :func:`nacelle.terminal_text.visible`.

Imports the standard library, the core and the sibling ``approval`` and ``help``;
the agent, its options and the run's output (:mod:`nacelle.cli.agent`,
:mod:`nacelle.cli.run`) are handed to :func:`resume_command` by :func:`command`, which
imports them (and ``settings``, ``sessions`` and ``terminal``) when it runs.
"""

from __future__ import annotations

import argparse
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

from .approval import Approver, preview
from .help import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from ..errors import NacelleError
from ..terminal_text import visible
from ..tools import parse_input

if TYPE_CHECKING:
    from ..checkpoint import Checkpoint, PendingCall
    from ..events import Event
    from ..sessions import FileStore

__all__ = ["decide", "resume_command"]



class Undecided(NacelleError):
    """The decisions given do not settle every pending call (a usage error)."""


def decide(pending: Sequence["PendingCall"], approve: Sequence[str], deny: Sequence[str],
           ask: Optional[Callable[["PendingCall"], bool]]) -> Dict[str, bool]:
    """True or False for every pending call id: from ``approve`` and ``deny`` (ids, or
    ``all``), then from ``ask`` for the rest; :class:`Undecided` when that fails."""
    ids = [p.id for p in pending]
    chosen: Dict[str, bool] = {}
    for given, verdict in ((approve, True), (deny, False)):
        for call_id in given:
            for one in (ids if call_id == "all" else [call_id]):
                if one not in ids:
                    raise Undecided(f"no paused call has the id {one!r} (pending: "
                                    f"{', '.join(ids)})")
                if chosen.get(one, verdict) is not verdict:
                    raise Undecided(f"call {one!r} is both approved and denied")
                chosen[one] = verdict
    for call in pending:
        if call.id not in chosen:
            if ask is None:
                left = [p.id for p in pending if p.id not in chosen]
                raise Undecided(f"no terminal to ask about {', '.join(left)}: decide with "
                                "--approve ID or --deny ID (or all)")
            chosen[call.id] = ask(call)
    return chosen


def _describe(call: "PendingCall", root: str) -> str:
    try:
        shown = preview(call.name, parse_input(call.input), root)
    except ValueError:  # an input that never parsed has no preview; the tool refuses it
        shown = ""
    text = call.input if len(call.input) <= 200 else call.input[:197] + "..."
    return visible(f"  {call.id}  {call.name} {text}") + f"\n{shown}"


def _asker(terminal: IO[str], err: IO[str]) -> Callable[["PendingCall"], bool]:
    def ask(call: "PendingCall") -> bool:
        err.write(visible(f"run {call.name} ({call.id})? [y]es/[n]o "))
        err.flush()
        answer = terminal.readline()
        if not answer:
            err.write("(end of input: no)\n")
        return answer.strip().lower() in ("y", "yes")
    return ask


def resume_command(
    argv: Sequence[str], *,
    agent_options: Callable[[argparse.ArgumentParser], None],
    output_options: Callable[[argparse.ArgumentParser], None],
    build_agent: Callable[..., Tuple[Any, Any]],
    run: Callable[..., Tuple[int, Any]],
    terminal: Optional[IO[str]],
    err: IO[str],
) -> int:
    """The ``nacelle resume`` command; returns the exit code.

    ``agent_options`` and ``output_options`` add the agent's and the output's flags
    (``--json``, ``--jsonl``, ``--quiet``) to the parser, ``build_agent(settings,
    **options)`` makes the agent, ``run(events, mode=, quiet=, schema=, session=)``
    prints a run, and ``terminal`` is where y/n answers are read (None: nowhere).
    """
    from .sessions import Session, after, sessions_dir
    from ..sessions import FileStore, SessionNotFound
    from ..settings import resolve

    parser = argparse.ArgumentParser(
        prog="nacelle resume", argument_default=argparse.SUPPRESS,
        description="Decide the calls a run started with --pause left waiting, then go on "
                    "with it; the session is saved after the answer.")
    parser.add_argument("name", metavar="NAME", help="the session the paused run was saved as")
    parser.add_argument("--approve", action="append", default=[], metavar="ID",
                        help="run this paused call (repeatable; 'all': every one)")
    parser.add_argument("--deny", action="append", default=[], metavar="ID",
                        help="refuse this paused call (repeatable; 'all': every one)")
    parser.add_argument("--pause", action="store_true",
                        help="later calls that would ask pause again instead")
    output_options(parser)
    parser.add_argument("--sessions-dir", dest="sessions_dir", metavar="DIR",
                        help="where the session was saved (default: as for --session)")
    agent_options(parser)
    from .agent import context_flags, context_options, open_context
    from .extra_tools import open_tools, tool_flags, tool_options
    from .logs import log_options, run_log

    context_options(parser)
    tool_options(parser)
    log_options(parser)
    args = vars(parser.parse_args(argv))
    context, extra_flags = context_flags(args), tool_flags(args)
    name, approve, deny = args.pop("name"), args.pop("approve"), args.pop("deny")
    pause, mode, quiet = args.pop("pause", False), args.pop("mode", "text"), args.pop("quiet", False)
    yes, system, max_cost = args.pop("yes", False), args.pop("system", None), args.pop("max_cost", None)
    log = args.pop("log", None)
    try:
        settings = resolve(args)
        store = FileStore(sessions_dir(settings.sessions_dir))
        session = Session(store, name)
        checkpoint = store.take_checkpoint(name)
    except SessionNotFound:
        err.write(f"nacelle: no paused run is saved as {name!r}\n")
        return EXIT_FAILED
    except (NacelleError, OSError) as exc:
        err.write(visible(f"nacelle: {type(exc).__name__}: {exc}") + "\n")
        return EXIT_FAILED
    root = settings.root
    # A sub-agent's calls that paused are asked like the run's own: the ones it waits on.
    waiting = checkpoint.waiting()
    err.write(f"paused run {name!r}: {len(waiting)} call(s) waiting\n")
    for call in waiting:
        err.write(_describe(call, root))

    def approver(tools: Sequence[Any], root: str) -> Approver:
        return Approver(tools, yes=yes, root=root, stdin=terminal, no_terminal=terminal is None,
                        pause=pause)

    def put_back(why: str, code: int) -> int:
        store.save_checkpoint(name, checkpoint)
        err.write(visible(f"nacelle: {why}; the paused run is kept") + "\n")
        return code

    try:
        decisions = decide(waiting, approve, deny,
                           _asker(terminal, err) if terminal is not None else None)
        # The same skills, memory, instructions, MCP servers and function files as
        # the paused run was given, so the agent rebuilt has its tools and its prompt.
        extras = open_context(context)
        try:
            extra = open_tools(extra_flags)
        except BaseException:
            if extras["memory"] is not None:
                extras["memory"].close()
            raise
        try:
            logged = run_log(log, session=name, err=err)
            agent, local = build_agent(settings, system=system, max_cost=max_cost,
                                       approver=approver, extra_tools=extra.tools,
                                       observers=[logged] if logged is not None else [],
                                       **extras)
        except BaseException:
            if extras["memory"] is not None:
                extras["memory"].close()
            extra.close()
            raise
    except Undecided as exc:
        return put_back(str(exc), EXIT_USAGE)
    except NacelleError as exc:
        return put_back(f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    try:
        try:
            events = agent.resume(checkpoint, decisions)
        except NacelleError as exc:
            return put_back(f"{type(exc).__name__}: {exc}", EXIT_FAILED)
        closed: Dict[str, Any] = {}
        try:
            code, done = run(_watched(events, closed), mode=mode, quiet=quiet, schema=None,
                             session=session)
        except (NacelleError, OSError, KeyboardInterrupt) as exc:
            interrupted = isinstance(exc, KeyboardInterrupt)
            why = "interrupted" if interrupted else f"{type(exc).__name__}: {exc}"
            _keep(store, name, checkpoint, closed, why, err)
            return EXIT_INTERRUPTED if interrupted else EXIT_FAILED
        if done is not None and done.stop is not None:
            after(done, session, err)
        return int(code)
    finally:
        local.close()
        extra.close()
        if extras["memory"] is not None:
            extras["memory"].close()


def _watched(events: Iterator["Event"], closed: Dict[str, Any]) -> Iterator["Event"]:
    """The run's events, noting each call's result as it closes."""
    from ..events import Kind

    for event in events:
        # A sub-agent's forwarded result (via set) closes none of the run's own calls.
        if event.kind is Kind.TOOL_RESULT and event.tool is not None and not event.via:
            closed[event.tool.id] = event.tool
        yield event


def _keep(store: "FileStore", name: str, checkpoint: "Checkpoint", closed: Dict[str, Any],
          why: str, err: IO[str]) -> None:
    """What a resumed run that failed leaves: the checkpoint again if none of its calls
    was closed, else the conversation with the round's results, so that nothing that
    ran is lost and nothing is run twice."""
    from ..messages import Message, Role, ToolResult
    from ..toolcalls import as_result

    pending = {p.id: p for p in checkpoint.pending}
    if not any(call_id in closed for call_id in pending):
        store.save_checkpoint(name, checkpoint)
        err.write(visible(f"nacelle: {why}; none of the paused calls ran, and the paused run "
                          "is kept") + "\n")
        return
    results = {r.id: r for r in checkpoint.results}
    for call_id, call in pending.items():
        results[call_id] = as_result(closed[call_id]) if call_id in closed else ToolResult(
            call_id, call.name, "not run: the resumed run stopped before this call ran", True)
    answered = Message(Role.USER, tuple(results[c.id] for c in checkpoint.calls()))
    store.save(name, list(checkpoint.messages) + [answered])
    err.write(f"nacelle: {visible(why)}; the decided calls were closed and the conversation is saved "
              f"as session {name!r} (go on with --session {name})\n")


def command(argv: Sequence[str]) -> int:
    """``nacelle resume``, asking on this terminal (or the controlling one)."""
    import sys

    from .agent import agent_options, build_agent, output_options
    from .run import run_events
    from .terminal import exit_now, isatty, open_terminal

    terminal = sys.stdin if isatty(sys.stdin) else open_terminal()
    return exit_now(resume_command(
        argv, agent_options=agent_options, output_options=output_options,
        build_agent=build_agent, run=run_events, terminal=terminal, err=sys.stderr))
