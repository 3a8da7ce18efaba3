"""What every command does with the terminal and the process: a one-line error on
stderr (through the sanitiser, since errors quote what a provider, an MCP server or a
file said), whether a stream is a terminal, the controlling terminal for approvals
when stdin carried the prompt, the library's warnings on stderr, and an exit that
does not wait for tool threads which ignore cancellation.

Imports the standard library, ``help`` (the exit codes) and the leaf
:mod:`nacelle.terminal_text`; prints.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import IO, Any, Optional

from ..terminal_text import VisibleFormatter, visible
from .help import EXIT_FAILED

__all__ = ["exit_now", "fail", "isatty", "one_line", "open_terminal", "warnings_to_stderr"]


def fail(message: str, code: int = EXIT_FAILED) -> int:
    # Errors quote what a provider, an MCP server or a file said.
    print(f"nacelle: error: {visible(message)}", file=sys.stderr)
    return code


def one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    if text and getattr(err, "for_the_command_line", False):
        return text[0]  # worded for a person at a prompt: the class name would be noise
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def open_terminal() -> Optional[IO[str]]:
    """Where approvals read answers when stdin carried the prompt: the controlling
    terminal, or None when there is none (a job, a CI step)."""
    try:
        return open("/dev/tty", encoding="utf-8", errors="replace")
    except OSError:
        return None


def exit_now(code: int) -> int:
    """Exit without waiting for tool threads that ignore cancellation."""
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon
           for t in threading.enumerate()):
        os._exit(code)
    return code


def warnings_to_stderr() -> None:
    """Show the library's warnings on stderr through the sanitiser, as Python's last
    resort handler would show them raw, unless logging is configured already."""
    import logging

    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(VisibleFormatter("%(message)s"))
        handler.setLevel(logging.WARNING)
        root.addHandler(handler)

