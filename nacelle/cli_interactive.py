"""The CLI's interactive session: a prompt on a terminal, each answer's conversation
carried into the next.

Imports the standard library and the core; the renderer is handed in (the console's
lives in the outer ring), and everything it writes goes to the streams it is given.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, List, Optional

from .cli_sessions import Session, after
from .errors import NacelleError

__all__ = ["interactive"]

EXIT_OK, EXIT_INTERRUPTED = 0, 130


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def interactive(agent: Any, make_renderer: Callable[[], Any], session: Optional[Session], *,
                version: str = "nacelle") -> int:
    from .messages import user_text

    err = sys.stderr
    conversation: List[Any] = list(session.messages) if session is not None else []
    err.write(f"{version} - 'exit' or Ctrl-D leaves; Ctrl-C cancels a run.\n")
    if session is not None:
        err.write(f"(session {session.name}: {len(conversation)} messages so far)\n")
    while True:
        try:
            line = input("> ")
        except EOFError:
            err.write("\n")
            return EXIT_OK
        except KeyboardInterrupt:
            err.write("\n")
            return EXIT_INTERRUPTED
        if not line.strip():
            continue
        if line.strip() in ("exit", "quit"):
            return EXIT_OK
        try:
            done = make_renderer().render(agent.stream(conversation + [user_text(line)]))
            if done is not None and after(done, session, err):
                conversation = list(done.messages)
        except KeyboardInterrupt:
            err.write("\n(cancelled)\n")
        except (NacelleError, OSError) as exc:
            err.write(f"\nnacelle: error: {_one_line(exc)}\n")
        sys.stdout.write("\n")
