"""The ``nacelle`` command: for scripts (a prompt in, the answer out), for people (an
interactive session), and its subcommands.

``nacelle "prompt"`` runs one prompt and exits; with stdin piped and no prompt, stdin
is the prompt; with both, the piped text follows the prompt as its material
(:mod:`nacelle.cli_script`). The answer alone goes to stdout, everything else to
stderr; ``--json`` / ``--jsonl`` encode the run instead (``cli_result.schema.json``).
``nacelle`` alone, on a terminal, is an interactive session
(:mod:`nacelle.cli_interactive`). Subcommands: ``demo`` (offline), ``report``
(a recorded run as HTML), ``sessions`` (:mod:`nacelle.cli_sessions`), ``models``
(:mod:`nacelle.cli_models`), ``serve``
(:func:`nacelle.serve.run_server`: calls that would ask pause for the page instead),
``batch`` (:func:`nacelle.batch.main_batch`: no one to ask, so they are refused
unless ``--yes``), ``resume`` (:mod:`nacelle.cli_resume`: decide the calls a
``--pause`` run left waiting) and ``help``. The first word is a subcommand only when it
is exactly one; a single lowercase word close to one (``sesions``) is refused with
"did you mean", since a one-word prompt that is a typo of a command is more often the
typo; ``nacelle -- WORD`` is always a prompt.

Exit codes, as ``--help`` lists them: 0 a complete answer, 1 a failure (a one-line
reason on stderr), 2 a usage error, 3 an answer that stopped early (max tokens, the
iteration cap, a budget, a refusal, a pause), 130 interrupted.

Settings come from :mod:`nacelle.settings` (flag > environment > file > default);
argparse leaves untyped flags out (``SUPPRESS``) so its defaults never outrank the
file. The agent gets the local tools under ``--root`` (``run_command`` with
``--bash``), and ``web_search`` / ``web_fetch`` when ``--search-url`` names a
SearXNG instance. The backends read their keys and base URL variables themselves.

Approvals (:mod:`nacelle.cli_approval`): a write, command or web call asks
y/n/always/never on the terminal, showing a diff or the command first; ``--yes``
approves everything. With stdin piped the question goes to ``/dev/tty``, and with no
terminal it is a no. Sessions (``--session NAME``, ``--continue``) keep the
conversation in a FileStore (:mod:`nacelle.cli_sessions`); ``--record RUN.jsonl``
attaches a :class:`nacelle.observe.Recorder`.

Whatever a model, a tool, a provider or an MCP server wrote is shown through
:func:`nacelle.terminal_text.visible` (the console, the approvals, the answer, the
errors, the library's warnings), so no escape sequence of theirs acts on the terminal.

Ctrl-C during a one-prompt run cancels it and exits 130, without waiting for tool
threads that ignore cancellation.

Outer ring: may import anything in the package; one of the two modules that print.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import threading
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from . import __version__, bounded_json
from .cli_approval import Approver as Approver
from .cli_help import (EPILOG, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK,
                       EXIT_USAGE)
from .errors import ConfigError, NacelleError
from .settings import Settings, SettingsError, resolve
from .terminal_text import VisibleFormatter, visible

if TYPE_CHECKING:
    from .agent import Agent
    from .toolsets import LocalTools

__all__ = ["Approver", "build_agent", "main"]

DISTRIBUTION = "nacelle-sdk"  # the name on PyPI; `nacelle` there is an unrelated project

SYSTEM = (
    "You are a capable assistant working in a local project folder through tools. "
    "Paths are relative to that folder. Read before you change anything, keep changes "
    "small, and say plainly what you did and what you could not do."
)


def _version() -> str:
    return f"{DISTRIBUTION} {__version__} (import nacelle)"


def _agent_options(parser: argparse.ArgumentParser) -> None:
    """The options that make the agent, shared by prompts, ``serve`` and ``batch``."""
    parser.add_argument("--backend", help="anthropic or openrouter (default: anthropic)")
    parser.add_argument("--model", help="the model name (required for openrouter)")
    parser.add_argument("--system", metavar="TEXT", help="the system prompt (replaces the default)")
    parser.add_argument("--root", help="the folder the local tools work in (default: .)")
    parser.add_argument("--bash", action=argparse.BooleanOptionalAction,
                        help="allow run_command (asks before each command unless --yes)")
    parser.add_argument("--max-iterations", type=int, dest="max_iterations",
                        help="model requests allowed per prompt (0: no cap; default 50)")
    parser.add_argument("--max-cost", type=float, dest="max_cost", metavar="DOLLARS",
                        help="stop a run (exit 3) once it has cost this much (needs prices)")
    parser.add_argument("--effort", help="none, minimal, low, medium, high, xhigh or max")
    parser.add_argument("--show-thinking", action=argparse.BooleanOptionalAction,
                        dest="show_thinking", help="show the model's thinking")
    parser.add_argument("--search-url", dest="search_url",
                        help="a SearXNG instance for web_search (also enables web_fetch)")
    parser.add_argument("--yes", action="store_true",
                        help="approve every tool call without asking")


def _output_options(parser: argparse.ArgumentParser) -> None:
    """How a run is printed, shared by prompts and ``resume``."""
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_const", const="json", dest="mode",
                        help="print the result as one JSON object (cli_result.schema.json)")
    output.add_argument("--jsonl", action="store_const", const="jsonl", dest="mode",
                        help="print each event as one JSON object per line, then the result")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no tool lines, usage or cost on stderr (errors still show)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nacelle", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s [options] [PROMPT | -]\n       %(prog)s COMMAND ...",
        description="Run an agent on one prompt (for scripts: the answer alone on stdout), "
                    "or interactively.",
        epilog=EPILOG, argument_default=argparse.SUPPRESS)
    parser.add_argument("prompt", nargs="?",
                        help="run this prompt and exit ('-': read it from stdin)")
    _agent_options(parser)
    _output_options(parser)
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
    parser.add_argument("--version", action="version", version=_version())
    return parser


def build_agent(settings: Settings, *, yes: bool = False, observers: Sequence[Any] = (),
                system: Optional[str] = None, max_cost: Optional[float] = None,
                approver: Optional[Callable[[Sequence[Any], str], Any]] = None,
                ) -> Tuple["Agent", "LocalTools"]:
    """The Agent the CLI runs, and the tool sets to close afterwards. ``approver``
    makes the approval policy from the tools and the root (default: an
    :class:`Approver` on this terminal)."""
    from .agent import Agent
    from .backend import Effort, Thinking
    from .context import Budget
    from .retry import Retry

    if settings.backend == "openrouter":
        from .backends import openrouter
        if not settings.model:
            raise SettingsError("the openrouter backend needs a model (--model or NACELLE_MODEL)")
        backend: Any = openrouter.Backend(model=settings.model)
    else:
        from .backends import anthropic
        backend = anthropic.Backend(model=settings.model) if settings.model else anthropic.Backend()
    from .toolsets import LocalTools

    root = os.path.abspath(os.path.expanduser(settings.root))
    local = LocalTools(root, allow_bash=settings.bash)
    tools: List[Any] = list(local.tools())
    if settings.search_url:
        from .toolsets import web_fetch, web_search
        tools += web_search(settings.search_url) + web_fetch()
    thinking = Thinking(effort=Effort(settings.effort) if settings.effort else None,
                        show=settings.show_thinking)
    if max_cost is not None and not backend.capabilities.cost:
        local.close()
        raise SettingsError(f"--max-cost needs prices, and the price table has none for "
                            f"{backend.name} model {getattr(backend, 'model', '?')!r}")
    approve = approver(tools, root) if approver is not None else Approver(tools, yes=yes, root=root)
    try:
        agent = Agent(Retry(backend), SYSTEM if system is None else system, thinking=thinking,
                      tools=tools, max_iterations=settings.max_iterations, approve=approve,
                      observers=observers,
                      budget=Budget(cost=max_cost) if max_cost is not None else None)
    except (NacelleError, ValueError):
        local.close()
        raise
    return agent, local


def _fail(message: str, code: int = EXIT_FAILED) -> int:
    # Errors quote what a provider, an MCP server or a file said.
    print(f"nacelle: error: {visible(message)}", file=sys.stderr)
    return code


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _recorder(path: Optional[str]) -> Any:
    if path is None:
        return None
    from .observe import Recorder

    try:
        with open(path, "a", encoding="utf-8"):
            pass  # fail now: a Recorder that cannot write fails in an observer, logged only
    except OSError as err:
        raise SettingsError(f"--record {path}: {err.strerror}") from None
    return Recorder(path)


def _load_schema(path: str) -> Any:
    """The ``nacelle.Schema`` in a JSON Schema file, or a SettingsError saying why not."""
    from .output import Schema

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


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _terminal() -> Optional[IO[str]]:
    """Where approvals read answers when stdin carried the prompt: the controlling
    terminal, or None when there is none (a job, a CI step)."""
    try:
        return open("/dev/tty", encoding="utf-8", errors="replace")
    except OSError:
        return None


# -- subcommands -----------------------------------------------------------------------

def _demo(argv: Sequence[str]) -> int:
    if argv:
        return _fail("'nacelle demo' takes no options", EXIT_USAGE)
    from .console import Renderer
    from .demo import demo_run

    renderer = Renderer()
    with demo_run() as (question, events):
        print(f"> {question}")
        done = renderer.render(events)
    return EXIT_OK if done is not None and done.stop is not None and done.stop.complete else EXIT_FAILED


def _report(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="nacelle report",
        description="Render a run recorded with 'nacelle --record RUN.jsonl' as one "
                    "self-contained HTML page.")
    parser.add_argument("run", metavar="RUN.jsonl", help="the recording to render")
    parser.add_argument("-o", "--output", metavar="OUT.html",
                        help="where to write the page (default: RUN.html beside RUN.jsonl)")
    args = parser.parse_args(argv)
    out = args.output or os.path.splitext(args.run)[0] + ".html"
    if os.path.abspath(out) == os.path.abspath(args.run):
        return _fail(f"the report would overwrite {args.run}; name another with -o")
    from . import report

    try:
        report.write(args.run, out)
    except (OSError, NacelleError) as err:
        return _fail(f"{args.run}: {_one_line(err)}")
    print(out)
    return EXIT_OK


def _sessions(argv: Sequence[str]) -> int:
    from .cli_sessions import sessions_command, sessions_dir

    try:
        directory = sessions_dir(resolve().sessions_dir)
    except NacelleError as err:
        return _fail(_one_line(err))
    return sessions_command(argv, directory, sys.stdout, sys.stderr)


def _subcommand_agent(args: Dict[str, Any], policy: Callable[[Sequence[Any], str, bool], Any],
                      ) -> Tuple["Agent", "LocalTools"]:
    """The agent a ``serve`` or ``batch`` command line describes (``args`` from a
    parser given :func:`_agent_options`); ``policy(tools, root, yes)`` approves."""
    yes, system, max_cost = args.pop("yes", False), args.pop("system", None), args.pop("max_cost", None)
    return build_agent(resolve(args), system=system, max_cost=max_cost,
                       approver=lambda tools, root: policy(tools, root, yes))


def _serve(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="nacelle serve", argument_default=argparse.SUPPRESS,
        description="Serve the agent over HTTP (nacelle.serve): GET / is a chat page, POST "
                    "/runs streams a run as Server-Sent Events. Calls that would ask at the "
                    "terminal pause instead, for the page to approve (--yes approves all).")
    parser.add_argument("factory", nargs="?", metavar="MODULE:FACTORY", help="serve the Agent "
                        "this function of yours makes (myapp:make_agent) instead of nacelle's "
                        "own; the agent options below are then not used")
    _agent_options(parser)
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind (default: "
                        "127.0.0.1; anyone who reaches the port can run the agent's tools)")
    parser.add_argument("--port", type=int, default=8000, help="the port (default: 8000)")
    parser.add_argument("--store", metavar="DIR", default=None,
                        help="where paused runs and sessions are kept (default: "
                             "$XDG_DATA_HOME/nacelle/serve)")
    parser.add_argument("--allowed-host", action="append", default=[], dest="allowed_hosts",
                        metavar="NAME", help="a host name to answer to besides IP addresses "
                        "and localhost (repeatable; .example.com for a domain, * for any)")
    args = vars(parser.parse_args(argv))
    host, port, store = args.pop("host"), args.pop("port"), args.pop("store")
    allowed_hosts, factory = args.pop("allowed_hosts"), args.pop("factory", None)
    from .policy import secure
    from .serve import run_server
    from .serve.server import load_factory

    try:
        if factory is not None and args:
            raise ConfigError(f"{factory} makes the agent: --{sorted(args)[0].replace('_', '-')} "
                              "is for nacelle's own")
        # secure() pauses what it will not run, which is what the page's approvals resume.
        agent, local = (load_factory(factory), None) if factory is not None else (
            _subcommand_agent(args, lambda tools, root, yes: (
                (lambda *a: True) if yes else secure(tools))))
    except NacelleError as err:
        return _fail(_one_line(err))

    try:
        run_server(agent, host, port, store, allowed_hosts=allowed_hosts,
                   on_ready=lambda url: print(f"nacelle: serving on {url} (Ctrl-C stops)",
                                              file=sys.stderr, flush=True))
    except OSError as err:
        return _fail(f"cannot serve on {host}:{port}: {err.strerror or err}")
    finally:
        if local is not None:
            local.close()
    return EXIT_OK


def _batch(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="nacelle batch", argument_default=argparse.SUPPRESS,
        description="Run every line of INPUT.jsonl ({\"prompt\": ...} or {\"messages\": "
                    "[...]}) into RESULTS.jsonl, resuming a results file a previous batch "
                    "left (nacelle.batch). No one is asked: calls that would ask are "
                    "refused unless --yes. Exits 1 when a run failed.")
    _agent_options(parser)
    parser.add_argument("input", metavar="INPUT.jsonl")
    parser.add_argument("-o", "--output", metavar="RESULTS.jsonl", required=True)
    parser.add_argument("--workers", type=int, default=8, help="runs at once (default: 8)")
    args = vars(parser.parse_args(argv))
    input_path, output_path, workers = args.pop("input"), args.pop("output"), args.pop("workers")
    if workers < 1:
        return _fail("--workers must be at least 1", EXIT_USAGE)
    try:
        agent, local = _subcommand_agent(args, lambda tools, root, yes: Approver(
            tools, yes=yes, root=root, stderr=sys.stderr, no_terminal=True))
    except NacelleError as err:
        return _fail(_one_line(err))
    from .batch import main_batch
    from .console import describe_usage

    try:
        done = main_batch(agent, input_path, output_path, workers)
    except KeyboardInterrupt:
        print("\n(cancelled; finished runs are kept in the results file)", file=sys.stderr)
        return _exit_now(EXIT_INTERRUPTED)
    except (NacelleError, OSError) as err:
        return _fail(_one_line(err))
    finally:
        local.close()
    print(f"nacelle: {done.count} runs, {done.failures} failed, {describe_usage(done.usage)}, "
          f"{done.wall:.1f} s wall; results in {output_path}", file=sys.stderr)
    return _exit_now(EXIT_FAILED if done.failures else EXIT_OK)


def _models(argv: Sequence[str]) -> int:
    from .cli_models import models_command

    try:
        backend = resolve().backend
    except NacelleError as err:
        return _fail(_one_line(err))
    return models_command(list(argv), lambda: backend, sys.stdout, sys.stderr)


def _resume(argv: Sequence[str]) -> int:
    from .cli_resume import resume_command

    terminal = sys.stdin if _isatty(sys.stdin) else _terminal()
    return _exit_now(resume_command(
        argv, agent_options=_agent_options, output_options=_output_options,
        build_agent=build_agent, run=_run_events, terminal=terminal, err=sys.stderr))


def _help(argv: Sequence[str]) -> int:
    if argv and argv[0] in COMMANDS and argv[0] != "help":
        return COMMANDS[argv[0]](["--help"])
    _parser().print_help()
    return EXIT_OK


COMMANDS: Dict[str, Callable[[Sequence[str]], int]] = {
    "demo": _demo, "report": _report, "sessions": _sessions, "models": _models, "serve": _serve,
    "batch": _batch, "resume": _resume, "help": _help,
}


def _looks_like_command(word: str) -> Optional[str]:
    """The subcommand a single lowercase word probably meant, or None."""
    if not re.fullmatch(r"[a-z]{3,12}", word):
        return None
    close = difflib.get_close_matches(word, list(COMMANDS), n=1, cutoff=0.75)
    return close[0] if close else None


# -- one prompt ------------------------------------------------------------------------

def _run_events(events: Iterator[Any], *, mode: str, quiet: bool, schema: Any,
                session: Any) -> Tuple[int, Any]:
    """Show one run for a script; returns (exit code, the DONE event or None)."""
    from .cli_script import ScriptOutput
    from .console import Renderer
    from .events import Kind

    narrate = None if quiet else Renderer(sys.stderr).event
    output = ScriptOutput(sys.stdout, sys.stderr, mode=mode, narrate=narrate,
                          live=mode == "text" and _isatty(sys.stdout),
                          structured=schema is not None,
                          session=session.name if session is not None else None)
    done = None
    for event in events:
        output.event(event)
        if event.kind is Kind.DONE:
            done = event
    if done is None or done.stop is None:
        return EXIT_FAILED, done
    if schema is not None and done.output is None:
        print(f"nacelle: no valid value ({done.stop.value})", file=sys.stderr)
        return EXIT_INCOMPLETE, done
    return (EXIT_OK if done.stop.complete else EXIT_INCOMPLETE), done


def _exit_now(code: int) -> int:
    """Exit without waiting for tool threads that ignore cancellation."""
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon
           for t in threading.enumerate()):
        os._exit(code)
    return code


def _warnings_to_stderr() -> None:
    """Show the library's warnings on stderr through the sanitiser, as Python's last
    resort handler would show them raw, unless logging is configured already."""
    import logging

    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(VisibleFormatter("%(message)s"))
        handler.setLevel(logging.WARNING)
        root.addHandler(handler)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _warnings_to_stderr()
    if argv[:1] and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    if len(argv) == 1 and not argv[0].startswith("-"):
        meant = _looks_like_command(argv[0])
        if meant is not None:
            return _fail(f"unknown command {argv[0]!r}; did you mean {meant!r}? "
                         f"(to send it as a prompt: nacelle -- {argv[0]})", EXIT_USAGE)
    args = vars(_parser().parse_args(argv))
    argument = args.pop("prompt", None)
    yes, quiet, mode = args.pop("yes", False), args.pop("quiet", False), args.pop("mode", "text")
    schema_file, system = args.pop("schema", None), args.pop("system", None)
    max_cost = args.pop("max_cost", None)
    name, latest = args.pop("session", None), args.pop("continue_", False)
    pause = args.pop("pause", False)
    if pause and not (name or latest):
        return _fail("--pause needs --session NAME (the paused run is saved there)", EXIT_USAGE)
    if max_cost is not None and not max_cost >= 0:
        return _fail("--max-cost must be a number of dollars of at least 0", EXIT_USAGE)
    stdin_is_terminal = _isatty(sys.stdin)
    piped = sys.stdin if not stdin_is_terminal or argument == "-" else None
    from .cli_script import read_prompt

    try:
        prompt = read_prompt(argument, piped)
    except (OSError, UnicodeDecodeError) as err:
        return _fail(f"cannot read the prompt from stdin: {err}")
    if prompt is not None and not prompt.strip():
        return _fail("the prompt is empty" + ("" if argument else " (stdin had nothing)"),
                     EXIT_USAGE)
    if prompt is None and (schema_file is not None or mode != "text" or pause):
        flag = "--schema" if schema_file else "--pause" if pause else "--" + mode
        return _fail(f"{flag} needs a prompt", EXIT_USAGE)
    terminal = sys.stdin if stdin_is_terminal else (None if yes else _terminal())
    try:
        schema = _load_schema(schema_file) if schema_file is not None else None
        recorder = _recorder(args.pop("record", None))
        settings = resolve(args)
        from .cli_sessions import open_session, sessions_dir

        session = open_session(sessions_dir(settings.sessions_dir), name, latest)
        approvers: List[Approver] = []

        def approver(tools: Sequence[Any], root: str) -> Approver:
            approvers.append(Approver(tools, yes=yes, root=root, stdin=terminal,
                                      no_terminal=terminal is None, pause=pause))
            return approvers[-1]

        options: Dict[str, Any] = dict(
            observers=[recorder] if recorder is not None else [], system=system,
            max_cost=max_cost, approver=approver)
        agent, local = build_agent(settings, **options)
    except NacelleError as err:
        return _fail(_one_line(err))
    opened = [local]

    def switch_model(name: str) -> "Agent":
        import dataclasses

        new, tools = build_agent(dataclasses.replace(settings, model=name), **options)
        opened.append(tools)
        return new

    # The Recorder flushes at each run's end, so _exit_now's os._exit loses nothing
    # of a finished run even when it skips the close below.
    try:
        if prompt is None:
            from .cli_interactive import interactive
            from .cli_sessions import data_dir
            from .console import Renderer, describe_usage

            return _exit_now(interactive(
                agent, make_renderer=Renderer, describe_usage=describe_usage, session=session,
                sessions_directory=sessions_dir(settings.sessions_dir),
                switch_model=switch_model, version=_version(),
                settle=lambda: [a.wait_idle() for a in approvers],
                history_path=os.path.join(data_dir(), "history")))
        from .cli_sessions import after
        from .messages import user_text

        conversation = (session.messages if session is not None else []) + [user_text(prompt)]
        try:
            events = agent.stream(conversation, output=schema) if schema is not None \
                else agent.stream(conversation)
            code, done = _run_events(events, mode=mode, quiet=quiet, schema=schema,
                                     session=session)
            if done is not None and done.stop is not None:
                after(done, session, sys.stderr)
        except KeyboardInterrupt:
            print("\n(cancelled)", file=sys.stderr)
            return _exit_now(EXIT_INTERRUPTED)
        except (NacelleError, OSError) as err:
            print(file=sys.stderr)
            return _exit_now(_fail(_one_line(err)))
        return _exit_now(code)
    finally:
        for tools in opened:
            tools.close()
        if recorder is not None:
            recorder.close()
        if terminal is not None and terminal is not sys.stdin:
            terminal.close()
