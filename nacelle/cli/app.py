"""The ``nacelle`` command's front: it only dispatches. The first word is a subcommand
only when it is exactly one (each lives in a module of this package); a single
lowercase word close to one (``sesions``) is refused with "did you mean", since a
one-word prompt that is a typo of a command is more often the typo; ``nacelle --
WORD`` is always a prompt. Anything else is a prompt (:mod:`nacelle.cli.run`).

Exit codes, as ``--help`` lists them (:mod:`nacelle.cli.help`): 0 a complete answer,
1 a failure (a one-line reason on stderr), 2 a usage error, 3 an answer that stopped
early (max tokens, the iteration cap, a budget, a refusal, a pause), 130 interrupted.

Imports the standard library and this package; each command's module is imported
when that command runs.
"""

from __future__ import annotations

import difflib
import re
import sys
from typing import Callable, Dict, Optional, Sequence

from .help import EXIT_OK, EXIT_USAGE
from .terminal import fail, warnings_to_stderr

__all__ = ["COMMANDS", "main"]


def _demo(argv: Sequence[str]) -> int:
    from .demo import command
    return command(argv)


def _report(argv: Sequence[str]) -> int:
    from .report import command
    return command(argv)


def _sessions(argv: Sequence[str]) -> int:
    from .sessions import command
    return command(argv)


def _models(argv: Sequence[str]) -> int:
    from .models import command
    return command(argv)


def _serve(argv: Sequence[str]) -> int:
    from .serve import command
    return command(argv)


def _batch(argv: Sequence[str]) -> int:
    from .batch import command
    return command(argv)


def _eval(argv: Sequence[str]) -> int:
    from .eval import command
    return command(argv)


def _resume(argv: Sequence[str]) -> int:
    from .resume import command
    return command(argv)


def _logs(argv: Sequence[str]) -> int:
    from .logs import command
    return command(argv)


def _help(argv: Sequence[str]) -> int:
    if argv and argv[0] in COMMANDS and argv[0] != "help":
        return COMMANDS[argv[0]](["--help"])
    from .run import prompt_parser

    prompt_parser().print_help()
    return EXIT_OK


COMMANDS: Dict[str, Callable[[Sequence[str]], int]] = {
    "demo": _demo, "report": _report, "sessions": _sessions, "models": _models, "serve": _serve,
    "batch": _batch, "eval": _eval, "resume": _resume, "logs": _logs,
    "help": _help,
}



def _looks_like_command(word: str) -> Optional[str]:
    """The subcommand a single lowercase word probably meant, or None."""
    if not re.fullmatch(r"[a-z]{3,12}", word):
        return None
    close = difflib.get_close_matches(word, list(COMMANDS), n=1, cutoff=0.75)
    return close[0] if close else None



def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    warnings_to_stderr()
    if argv[:1] and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    if len(argv) == 1 and not argv[0].startswith("-"):
        meant = _looks_like_command(argv[0])
        if meant is not None:
            return fail(f"unknown command {argv[0]!r}; did you mean {meant!r}? "
                        f"(to send it as a prompt: nacelle -- {argv[0]})", EXIT_USAGE)
    from .run import command

    return command(argv)
