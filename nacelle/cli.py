"""The ``nacelle`` command: one prompt, an interactive session, or the offline demo.

- ``nacelle "prompt"`` runs one prompt and exits: 0 for a complete answer, 1 for a
  failure (with a one-line reason on stderr), 3 for an answer that stopped early
  (max tokens, the iteration cap, a refusal).
- ``nacelle`` alone is an interactive session; each answer's conversation (the
  DONE event's ``messages``) carries into the next prompt.
- ``nacelle demo`` runs the offline demo (:mod:`nacelle.demo`).
- ``nacelle --schema FILE.json "prompt"`` asks for structured output: FILE.json is a
  JSON Schema (its file name, cleaned, names it to the provider), the run is shown on
  stderr, and the validated JSON value is printed on stdout, alone, for a pipe. No
  value (refused, cut off, still invalid after the retries) exits 3 with the reason.

``ANTHROPIC_BASE_URL`` / ``OPENROUTER_BASE_URL`` point the backend elsewhere (a
proxy, a compatible server), as the official SDKs' variables do; keys come from
``ANTHROPIC_API_KEY`` / ``OPENROUTER_API_KEY``.

Settings come from :mod:`nacelle.settings` (flag > environment > file > default);
argparse leaves untyped flags out (``SUPPRESS``) so its defaults never outrank the
file. The agent gets the local tools under ``--root`` (``run_command`` with
``--bash``), and ``web_search`` / ``web_fetch`` when ``--search-url`` names a
SearXNG instance. Write and command tools ask y/n on the terminal unless ``--yes``;
concurrent questions are serialised — two prompts racing for one terminal are one
prompt nobody can read — and a cancelled run unblocks a waiting question (it counts
as no).

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
                    "('nacelle demo').",
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
    parser.add_argument("--yes", action="store_true", help="approve every tool call")
    parser.add_argument("--schema", metavar="FILE.json",
                        help="answer with a JSON value matching this JSON Schema (printed "
                             "on stdout; needs a prompt)")
    parser.add_argument("--version", action="version", version=f"nacelle {__version__}")
    return parser


class Approver:
    """Asks y/n before a tool that is not read-only runs; one question at a time.

    Called from tool threads. While waiting for an answer it watches the call's
    ``ctx.cancelled``, so cancelling the run releases the question (as a no).
    """

    def __init__(self, tools: Sequence[Any], *, yes: bool = False,
                 stdin: Optional[IO[str]] = None, stderr: Optional[IO[str]] = None) -> None:
        self.read_only = {t.name for t in tools if getattr(t, "read_only", False)}
        self.yes = yes
        self.stdin = stdin if stdin is not None else sys.stdin
        self.stderr = stderr if stderr is not None else sys.stderr
        self._lock = threading.Lock()

    def __call__(self, name: str, input: Dict[str, Any], ctx: Any) -> bool:
        if self.yes or name in self.read_only:
            return True
        with self._lock:
            if ctx.cancelled.is_set():
                return False
            shown = json.dumps(input, ensure_ascii=False)
            if len(shown) > 200:
                shown = shown[:197] + "..."
            self.stderr.write(f"Allow {name} {shown}? [y/N] ")
            self.stderr.flush()
            answer = self._read_line(ctx.cancelled)
            if answer is None:
                self.stderr.write("(cancelled)\n")
                return False
            return answer.strip().lower() in ("y", "yes")

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
        line = self.stdin.readline()
        return line if line else ""  # end of input: no


def _base_url(variable: str) -> Dict[str, Any]:
    # The official SDKs honour ANTHROPIC_BASE_URL / OPENAI_BASE_URL; the CLI does the
    # same for proxies and compatible servers. The library's defaults stay explicit.
    url = os.environ.get(variable, "").strip()
    return {"base_url": url} if url else {}


def build_agent(settings: Settings, *, yes: bool = False) -> Tuple["Agent", "LocalTools"]:
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
                  max_iterations=settings.max_iterations, approve=Approver(tools, yes=yes))
    return agent, local


def _fail(message: str) -> int:
    print(f"nacelle: error: {message}", file=sys.stderr)
    return EXIT_FAILED


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


def _run_structured(agent: "Agent", prompt: str, schema: Any) -> int:
    """Run ``prompt`` for a value of ``schema``: the run on stderr, the value on stdout."""
    from .console import Renderer
    from .messages import user_text
    from .output import to_jsonable

    done = Renderer(sys.stderr).render(agent.stream([user_text(prompt)], output=schema))
    if done is None or done.stop is None:
        return EXIT_FAILED
    if done.output is None:
        print(f"nacelle: no valid value ({done.stop.value})", file=sys.stderr)
        return EXIT_INCOMPLETE
    print(json.dumps(to_jsonable(done.output), ensure_ascii=False, indent=2))
    return EXIT_OK


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _interactive(agent: "Agent", renderer: "Renderer") -> int:
    from .messages import user_text

    conversation: List[Any] = []
    print(f"nacelle {__version__} - an empty line does nothing; 'exit' or Ctrl-D leaves; "
          "Ctrl-C cancels a run.", file=sys.stderr)
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
            if done is not None:
                conversation = list(done.messages)
        except KeyboardInterrupt:
            print("\n(cancelled)", file=sys.stderr)
        except NacelleError as err:
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
    args = vars(_parser().parse_args(argv))
    prompt = args.pop("prompt", None)
    yes = args.pop("yes", False)
    schema_file = args.pop("schema", None)
    if schema_file is not None and prompt is None:
        return _fail("--schema needs a prompt")
    try:
        schema = _load_schema(schema_file) if schema_file is not None else None
        settings = resolve(args)
        agent, local = build_agent(settings, yes=yes)
    except NacelleError as err:
        return _fail(_one_line(err))
    from .console import Renderer

    renderer = Renderer()
    try:
        if prompt is None:
            return _exit_now(_interactive(agent, renderer))
        from .messages import user_text

        try:
            if schema is not None:
                code = _run_structured(agent, prompt, schema)
            else:
                code, _ = _run_once(agent, [user_text(prompt)], renderer)
        except KeyboardInterrupt:
            print("\n(cancelled)", file=sys.stderr)
            return _exit_now(EXIT_INTERRUPTED)
        except NacelleError as err:
            print(file=sys.stderr)
            return _exit_now(_fail(_one_line(err)))
        return _exit_now(code)
    finally:
        local.close()
