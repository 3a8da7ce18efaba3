"""The CLI's approval prompt: y/n/always/never on the terminal, with what the call
would change shown first.

:class:`Approver` is the Agent's ``approve`` policy in the ``nacelle`` command. A call
:func:`nacelle.policy.secure` lets run (read-only, closed world) runs unasked; every
other call asks through :func:`nacelle.policy.ask`, which serialises questions and
remembers always/never per tool name. Before the question, the person sees what they
are approving (:mod:`nacelle.toolsets.preview`, which the chat page's approval
cards show too): for ``write_file`` and ``edit_file`` a unified diff of the file under
the tools' root as it is now against what the call would leave; for ``run_command``
the command itself, whole, since the one-line question cuts long inputs, each
further line of it marked ``  > ``. Everything shown goes
through :func:`nacelle.terminal_text.visible`: a command or a file's new content
holding ``ESC[1A ESC[2K \\r`` would otherwise move up a line, erase it and draw a
harmless command over the one the question is about. The preview is read when the
question is asked, under ``ask``'s lock, so two calls racing never interleave their
previews, and it is a preview only: the tool reads the file again when it runs.

Where the answer comes from. The terminal, not a pipe: when the CLI's stdin is a
pipe (it carried the prompt) the CLI passes ``/dev/tty``, and with no terminal at
all every question is a no, said on stderr, which ``--yes`` avoids; the calls so
refused are kept in :attr:`Approver.unasked`, so the command can exit non-zero and
say which call to allow, rather than report success for work it did not do. Reading
watches the call's ``ctx.cancelled``, so a cancelled run releases a waiting
question (as a no), as does end of input. A question released by a cancel writes
nothing more: whoever cancelled (Ctrl-C in the CLI) says so, once.

Imports the standard library, :mod:`nacelle.policy`, :mod:`nacelle.terminal_text` and
:mod:`nacelle.toolsets.preview`;
writes only to the stream it is given (the CLI's stderr).
"""

from __future__ import annotations

import select
import sys
import threading
from typing import IO, Any, Dict, List, Optional, Sequence

from ..terminal_text import visible
from ..toolsets.preview import change_preview

__all__ = ["Approver", "preview"]


def preview(name: str, input: Dict[str, Any], root: Optional[str]) -> str:
    """What approving this call would do, for a person: a diff, a command, or ""."""
    return visible(change_preview(name, input, root))


class Approver:
    """Asks y/n/always/never before a call :func:`nacelle.policy.secure` would not run.

    Called from tool threads. ``stdin`` is where answers are read (None: there is no
    terminal, and every question is a no); ``root`` is the local tools' folder, for
    the diff previews. With ``pause`` a call that would ask is paused instead
    (``nacelle --pause``: the run ends with a checkpoint for ``nacelle resume``).
    """

    def __init__(self, tools: Sequence[Any], *, yes: bool = False,
                 stdin: Optional[IO[str]] = None, stderr: Optional[IO[str]] = None,
                 root: Optional[str] = None, no_terminal: bool = False,
                 pause: bool = False) -> None:
        from ..policy import ask, secure

        self.yes, self.pause = yes, pause
        self.stdin = None if no_terminal else (stdin if stdin is not None else sys.stdin)
        self.stderr = stderr if stderr is not None else sys.stderr
        self.root = root
        #: "name (id)" of each call refused because no terminal could ask, in order.
        self.unasked: List[str] = []
        self._safe = secure(tools)
        self._ask = ask(self._prompt)
        # ask() hands its prompt only the question; the call (its cancel event, name
        # and input) reaches it through this thread-local, since ask calls the prompt
        # on the asking thread.
        self._call = threading.local()
        self._idle = threading.Event()  # no question open (ask's lock allows one at a time)
        self._idle.set()

    def wait_idle(self, timeout: float = 2.0) -> bool:
        """Wait until no question is reading the terminal (after a cancel, so the next
        prompt's input is not read as an answer); False if one still is."""
        return self._idle.wait(timeout)

    def __call__(self, name: str, input: Dict[str, Any], ctx: Any) -> Any:
        if self.yes or self._safe(name, input, ctx) is True:
            return True
        if self.pause:
            from ..checkpoint import PAUSE

            return PAUSE
        self._call.cancelled = ctx.cancelled
        self._call.name, self._call.input = name, input
        self._call.id = getattr(ctx, "call_id", "")
        return self._ask(name, input, ctx)

    def _prompt(self, question: str) -> str:
        question = visible(question)  # it quotes the call's input
        cancelled: threading.Event = self._call.cancelled
        if cancelled.is_set():
            raise EOFError
        if self.stdin is None:
            self.stderr.write(f"{question}no (no terminal to ask; --yes approves)\n")
            call = self._call.id
            self.unasked.append(visible(f"{self._call.name} ({call})" if call else
                                        self._call.name))
            raise EOFError
        self._idle.clear()
        try:
            return self._question(question, cancelled)
        finally:
            self._idle.set()

    def _question(self, question: str, cancelled: threading.Event) -> str:
        shown = preview(self._call.name, self._call.input, self.root)
        if shown:
            self.stderr.write(shown)
        self.stderr.write(question)
        self.stderr.flush()
        try:
            answer = self._read_line(cancelled)
        except KeyboardInterrupt:
            # Ctrl-C at the question is a no; the run goes on (its own Ctrl-C handling
            # is for the main thread, and this may be a tool thread's question).
            self.stderr.write("(interrupted: no)\n")
            raise EOFError from None
        if answer is None:
            # Cancelled: the Ctrl-C handler that cancelled the run writes "(cancelled)";
            # a second one here showed it twice.
            raise EOFError
        if not answer:
            self.stderr.write("(end of input: no)\n")
            raise EOFError
        return answer

    def _read_line(self, cancelled: threading.Event) -> Optional[str]:
        assert self.stdin is not None
        try:
            fd = self.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        while fd is not None:
            if cancelled.is_set():
                return None
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                if cancelled.is_set():
                    return None
                break
        return self.stdin.readline()  # "" at end of input
