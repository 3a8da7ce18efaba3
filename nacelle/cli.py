"""The ``nacelle`` command: one prompt, an interactive session, the offline demo, or a
run report.

- ``nacelle "prompt"`` runs one prompt and exits: 0 for a complete answer, 1 for a
  failure (with a one-line reason on stderr), 3 for an answer that stopped early
  (max tokens, the iteration cap, a refusal, a pause).
- ``nacelle`` alone is an interactive session; each answer's conversation (the
  DONE event's ``messages``) carries into the next prompt.
- ``nacelle demo`` runs the offline demo (:mod:`nacelle.demo`).
- ``nacelle report RUN.jsonl [-o OUT.html]`` renders a run recorded with ``--record``
  as one HTML page (:func:`nacelle.report.write`; default: ``RUN.html`` beside the
  input). A prompt that is exactly ``demo`` or ``report`` is typed ``nacelle -- demo``.
- ``nacelle --schema FILE.json "prompt"`` asks for structured output: FILE.json is a
  JSON Schema (its file name, cleaned, names it to the provider), the run is shown on
  stderr, and the validated JSON value is printed on stdout, alone, for a pipe. No
  value (refused, cut off, still invalid after the retries) exits 3 with the reason.
- ``--record RUN.jsonl`` attaches a :class:`nacelle.observe.Recorder` to the run(s),
  appending to the file (several runs share it, told apart by run id).

``ANTHROPIC_BASE_URL`` / ``OPENROUTER_BASE_URL`` point the backend elsewhere (a
proxy, a compatible server), as the official SDKs' variables do; keys come from
``ANTHROPIC_API_KEY`` / ``OPENROUTER_API_KEY``.

Settings come from :mod:`nacelle.settings` (flag > environment > file > default);
argparse leaves untyped flags out (``SUPPRESS``) so its defaults never outrank the
file. The agent gets the local tools under ``--root`` (``run_command`` with
``--bash``), and ``web_search`` / ``web_fetch`` when ``--search-url`` names a
SearXNG instance.

Approvals. A tool that :func:`nacelle.policy.secure` lets run — read-only and closed
world — runs without a question; every other call (writes, commands, and the web
tools, which are read-only but reach the network) asks on the terminal through
:func:`nacelle.policy.ask`: y(es), n(o), a(lways) or (ne)v(er), always and never
holding for that tool name until the command exits. ``--yes`` approves everything.
Questions are serialised (``ask`` holds one lock) — two prompts racing for one
terminal are one prompt nobody can read; a cancelled run unblocks a waiting question
and end of input both count as no. The CLI never pauses a run, but an Agent whose
policy returned ``nacelle.PAUSE`` ends with ``Stop.PAUSED``: its checkpoint is saved
with the session (below) and stderr says how to resume it.

Sessions. ``--session NAME`` keeps the conversation in a
:class:`nacelle.sessions.FileStore` in the ``sessions_dir`` setting (default
``$XDG_DATA_HOME/nacelle/sessions``, else ``~/.local/share/nacelle/sessions``): a
saved session is loaded first, so the prompt continues it, and it is saved after
every answer (complete or not; a failed run saves nothing). ``--continue`` continues
the session saved most recently. "Most recently" is the newest file modification
time among the store's sessions, not a pointer file: a save is what makes a session
the latest, the store already writes it atomically, and a pointer could name a
session since deleted. A paused run saves its checkpoint under the session's name
and leaves the saved conversation as it was (a conversation ending in unanswered
tool calls could not be sent again). A session file that cannot be read is a
one-line error and exit 1; the file is never overwritten. The store's directory is
only created when a session is used.

Ctrl-C during a run cancels that run and returns to the prompt; Ctrl-C at the prompt
(or a second one while the first is being handled) exits at once, without waiting
for tool threads that ignore cancellation.

Outer ring: may import anything in the package; one of the two modules that print.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import threading
from typing import IO, TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from . import __version__
from .errors import NacelleError
from .settings import Settings, SettingsError, resolve

if TYPE_CHECKING:
    from .agent import Agent
    from .console import Renderer
    from .events import Event
    from .sessions import FileStore
    from .toolsets import LocalTools

__all__ = ["Approver", "build_agent", "main"]

EXIT_OK, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 3, 130

SYSTEM = (
    "You are a capable assistant working in a local project folder through tools. "
    "Paths are relative to that folder. Read before you change anything, keep changes "
    "small, and say plainly what you did and what you could not do."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nacelle",
        description="Run an agent on one prompt, interactively, or as an offline demo "
                    "('nacelle demo'); 'nacelle report RUN.jsonl' renders a recorded run.",
        epilog="Write, command and web tools ask y/n/always/never before they run; "
               "always and never hold for that tool until nacelle exits.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("prompt", nargs="?", help="run this prompt and exit")
    parser.add_argument("--backend", help="anthropic or openrouter")
    parser.add_argument("--model", help="the model name (required for openrouter)")
    parser.add_argument("--root", help="the folder the local tools work in (default: .)")
    parser.add_argument("--bash", action=argparse.BooleanOptionalAction,
                        help="allow run_command (asks before each command unless --yes)")
    parser.add_argument("--max-iterations", type=int, dest="max_iterations",
                        help="model requests allowed per prompt (0: no cap)")
    parser.add_argument("--effort", help="none, minimal, low, medium, high, xhigh or max")
    parser.add_argument("--show-thinking", action=argparse.BooleanOptionalAction,
                        dest="show_thinking", help="show the model's thinking")
    parser.add_argument("--search-url", dest="search_url",
                        help="a SearXNG instance for web_search (also enables web_fetch)")
    parser.add_argument("--yes", action="store_true",
                        help="approve every tool call without asking")
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
    parser.add_argument("--version", action="version", version=f"nacelle {__version__}")
    return parser


class Approver:
    """Asks y/n/always/never before a call :func:`nacelle.policy.secure` would not run.

    Called from tool threads. The question is :func:`nacelle.policy.ask`'s, which
    serialises questions and remembers always/never per tool name; this class gives
    it a prompt that reads the terminal while watching the call's ``ctx.cancelled``,
    so cancelling the run releases the question (as a no), as does end of input.
    """

    def __init__(self, tools: Sequence[Any], *, yes: bool = False,
                 stdin: Optional[IO[str]] = None, stderr: Optional[IO[str]] = None) -> None:
        from .policy import ask, secure

        self.yes = yes
        self.stdin = stdin if stdin is not None else sys.stdin
        self.stderr = stderr if stderr is not None else sys.stderr
        self._safe = secure(tools)
        self._ask = ask(self._prompt)
        # ask() hands its prompt only the question; the call's cancel event reaches it
        # through this thread-local, since ask calls the prompt on the asking thread.
        self._call = threading.local()

    def __call__(self, name: str, input: Dict[str, Any], ctx: Any) -> Any:
        if self.yes or self._safe(name, input, ctx) is True:
            return True
        self._call.cancelled = ctx.cancelled
        return self._ask(name, input, ctx)

    def _prompt(self, question: str) -> str:
        cancelled: threading.Event = self._call.cancelled
        if cancelled.is_set():
            raise EOFError
        self.stderr.write(question)
        self.stderr.flush()
        answer = self._read_line(cancelled)
        if answer is None:
            self.stderr.write("(cancelled)\n")
            raise EOFError
        if not answer:
            self.stderr.write("(end of input: no)\n")
            raise EOFError
        return answer

    def _read_line(self, cancelled: threading.Event) -> Optional[str]:
        try:
            fd = self.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        while fd is not None:
            if cancelled.is_set():
                return None
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                break
        return self.stdin.readline()  # "" at end of input


def _base_url(variable: str) -> Dict[str, Any]:
    # The official SDKs honour ANTHROPIC_BASE_URL / OPENAI_BASE_URL; the CLI does the
    # same for proxies and compatible servers. The library's defaults stay explicit.
    url = os.environ.get(variable, "").strip()
    return {"base_url": url} if url else {}


def build_agent(settings: Settings, *, yes: bool = False,
                observers: Sequence[Any] = ()) -> Tuple["Agent", "LocalTools"]:
    """The Agent the CLI runs, and the tool sets to close afterwards."""
    from .agent import Agent
    from .backend import Effort, Thinking
    from .retry import Retry

    if settings.backend == "openrouter":
        from .backends import openrouter
        if not settings.model:
            raise SettingsError("the openrouter backend needs a model (--model or NACELLE_MODEL)")
        extra = _base_url("OPENROUTER_BASE_URL")
        backend: Any = openrouter.Backend(model=settings.model, **extra)
    else:
        from .backends import anthropic
        extra = _base_url("ANTHROPIC_BASE_URL")
        if settings.model:
            extra["model"] = settings.model
        backend = anthropic.Backend(**extra)
    from .toolsets import LocalTools

    local = LocalTools(os.path.abspath(os.path.expanduser(settings.root)), allow_bash=settings.bash)
    tools: List[Any] = list(local.tools())
    if settings.search_url:
        from .toolsets import web_fetch, web_search
        tools += web_search(settings.search_url) + web_fetch()
    thinking = Thinking(effort=Effort(settings.effort) if settings.effort else None,
                        show=settings.show_thinking)
    agent = Agent(Retry(backend), SYSTEM, thinking=thinking, tools=tools,
                  max_iterations=settings.max_iterations, approve=Approver(tools, yes=yes),
                  observers=observers)
    return agent, local


def _fail(message: str) -> int:
    print(f"nacelle: error: {message}", file=sys.stderr)
    return EXIT_FAILED


class _Session:
    """One named conversation in a FileStore: loaded when opened, saved after answers."""

    def __init__(self, store: "FileStore", name: str) -> None:
        from .sessions import SessionNotFound

        self.store, self.name = store, name
        try:
            self.messages: List[Any] = store.load(name)
        except SessionNotFound:
            self.messages = []


def _sessions_dir(settings: Settings) -> str:
    if settings.sessions_dir:
        return os.path.abspath(os.path.expanduser(settings.sessions_dir))
    # The XDG Base Directory spec calls a relative XDG_DATA_HOME invalid, to be ignored.
    data = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data):
        data = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "nacelle", "sessions")


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:  # deleted since it was listed
        return -1


def _open_session(settings: Settings, name: Optional[str], latest: bool) -> Optional[_Session]:
    """The session ``--session NAME`` or ``--continue`` means, loaded; None for neither."""
    if name is None and not latest:
        return None
    from .sessions import FileStore, SessionNotFound, check_name

    if name is not None:
        check_name(name)  # before a directory is made for a name that cannot be used
    directory = _sessions_dir(settings)
    try:
        store = FileStore(directory)
    except OSError as err:
        raise SettingsError(f"cannot use the sessions directory {directory}: "
                            f"{err.strerror}") from None
    if name is None:
        saved = store.names()
        if not saved:
            raise SessionNotFound(f"no saved session to continue in {directory}")
        name = max(saved, key=lambda n: (_mtime(store.path(n)), n))
    return _Session(store, name)


def _after(done: "Event", session: Optional[_Session]) -> bool:
    """Keep what a finished run leaves; False when it paused, since its conversation
    ends in calls nobody answered and cannot be sent again."""
    from .events import Stop

    if done.stop is Stop.PAUSED:
        if session is None or done.checkpoint is None:
            print("nacelle: the run paused for approval; its checkpoint is kept only "
                  "with --session NAME", file=sys.stderr)
            return False
        session.store.save_checkpoint(session.name, done.checkpoint)
        print(f"nacelle: the run paused for approval; checkpoint saved as "
              f"{session.name!r} in {session.store.directory}; resume it with "
              f"agent.resume(FileStore(directory).load_checkpoint({session.name!r}), "
              "decisions)", file=sys.stderr)
        return False
    if session is not None:
        session.store.save(session.name, done.messages)
        session.messages = list(done.messages)
    return True


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


def _run_once(agent: "Agent", conversation: List[Any],
              renderer: "Renderer") -> Tuple[int, Optional["Event"]]:
    """Render one run; returns (exit code, the DONE event or None)."""
    done = renderer.render(agent.stream(conversation))
    if done is None or done.stop is None:
        return EXIT_FAILED, done
    return (EXIT_OK if done.stop.complete else EXIT_INCOMPLETE), done


def _load_schema(path: str) -> Any:
    """The ``nacelle.Schema`` in a JSON Schema file, or a SettingsError saying why not."""
    import re

    from .output import Schema

    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            schema = json.load(handle)
    except (OSError, ValueError) as err:
        raise SettingsError(f"--schema {path}: {err}") from None
    if not isinstance(schema, dict):
        raise SettingsError(f"--schema {path}: a JSON Schema is a JSON object")
    stem = os.path.splitext(os.path.basename(path))[0]
    name = re.sub(r"[^a-zA-Z0-9_-]+", "_", stem).strip("_")[:64] or "output"
    return Schema(name, schema)


def _run_structured(agent: "Agent", conversation: List[Any],
                    schema: Any) -> Tuple[int, Optional["Event"]]:
    """Run for a value of ``schema``: the run on stderr, the value on stdout."""
    from .console import Renderer
    from .output import to_jsonable

    done = Renderer(sys.stderr).render(agent.stream(conversation, output=schema))
    if done is None or done.stop is None:
        return EXIT_FAILED, done
    if done.output is None:
        print(f"nacelle: no valid value ({done.stop.value})", file=sys.stderr)
        return EXIT_INCOMPLETE, done
    print(json.dumps(to_jsonable(done.output), ensure_ascii=False, indent=2))
    return EXIT_OK, done


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _interactive(agent: "Agent", renderer: "Renderer", session: Optional[_Session]) -> int:
    from .messages import user_text

    conversation: List[Any] = list(session.messages) if session is not None else []
    print(f"nacelle {__version__} - an empty line does nothing; 'exit' or Ctrl-D leaves; "
          "Ctrl-C cancels a run.", file=sys.stderr)
    if session is not None:
        print(f"(session {session.name}: {len(conversation)} messages so far)", file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except EOFError:
            print(file=sys.stderr)
            return EXIT_OK
        except KeyboardInterrupt:
            print(file=sys.stderr)
            return EXIT_INTERRUPTED
        if not line.strip():
            continue
        if line.strip() in ("exit", "quit"):
            return EXIT_OK
        try:
            _, done = _run_once(agent, conversation + [user_text(line)], renderer)
            if done is not None and _after(done, session):
                conversation = list(done.messages)
        except KeyboardInterrupt:
            print("\n(cancelled)", file=sys.stderr)
        except (NacelleError, OSError) as err:
            print(f"\nnacelle: error: {_one_line(err)}", file=sys.stderr)
        print()


def _demo() -> int:
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


def _exit_now(code: int) -> int:
    """Exit without waiting for tool threads that ignore cancellation."""
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon
           for t in threading.enumerate()):
        os._exit(code)
    return code


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        if len(argv) > 1:
            return _fail("'nacelle demo' takes no options")
        return _demo()
    if argv[:1] == ["report"]:
        return _report(argv[1:])
    args = vars(_parser().parse_args(argv))
    prompt = args.pop("prompt", None)
    yes = args.pop("yes", False)
    schema_file = args.pop("schema", None)
    name, latest = args.pop("session", None), args.pop("continue_", False)
    if schema_file is not None and prompt is None:
        return _fail("--schema needs a prompt")
    try:
        schema = _load_schema(schema_file) if schema_file is not None else None
        recorder = _recorder(args.pop("record", None))
        settings = resolve(args)
        session = _open_session(settings, name, latest)
        agent, local = build_agent(settings, yes=yes,
                                   observers=[recorder] if recorder is not None else [])
    except NacelleError as err:
        return _fail(_one_line(err))
    from .console import Renderer

    renderer = Renderer()
    # The Recorder flushes at each run's end, so _exit_now's os._exit loses nothing
    # of a finished run even when it skips the close below.
    try:
        if prompt is None:
            return _exit_now(_interactive(agent, renderer, session))
        from .messages import user_text

        conversation = (session.messages if session is not None else []) + [user_text(prompt)]
        try:
            if schema is not None:
                code, done = _run_structured(agent, conversation, schema)
            else:
                code, done = _run_once(agent, conversation, renderer)
            if done is not None and done.stop is not None:
                _after(done, session)
        except KeyboardInterrupt:
            print("\n(cancelled)", file=sys.stderr)
            return _exit_now(EXIT_INTERRUPTED)
        except (NacelleError, OSError) as err:
            print(file=sys.stderr)
            return _exit_now(_fail(_one_line(err)))
        return _exit_now(code)
    finally:
        local.close()
        if recorder is not None:
            recorder.close()
