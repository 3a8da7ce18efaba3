"""The CLI's interactive session: a prompt on a terminal, each answer's conversation
carried into the next.

Line editing and history come from :mod:`readline` where the platform has it (GNU
readline or libedit; Windows has neither and gets plain ``input``). The history file
is ``history`` in the data directory beside the sessions (``$XDG_DATA_HOME/nacelle``,
else ``~/.local/share/nacelle``), written after every line with mode 0600, since
prompts can hold what the user would not leave world-readable; 1,000 lines kept.

Input. A line ending in a backslash continues on the next (``... ``), joined with a
newline, so a pasted block or a numbered list is one prompt. A line starting with
``/`` is a command: ``/help``, ``/clear``, ``/cost``, ``/model NAME``, ``/save NAME``,
``/load NAME``, ``/skills`` (the skills ``--skills`` loaded), ``/memory`` (the files
of the ``--memory`` folder), ``/attach FILE`` (attach a file to the next message, as
``-a`` does: :mod:`nacelle.cli.attach`; ``/attach`` alone lists what is waiting), ``/exit``; ``//text`` sends ``/text``. ``/save`` and ``/load`` make
NAME the current session, so later answers are saved there too, as ``--session``
would, and later prompts are logged (``nacelle logs``) under that name; ``/load`` of a name no session has says so, with the nearest saved names, and
keeps the conversation. ``exit`` and ``quit`` alone still leave.

Ctrl-C is one thing at a time and always leaves a prompt: at the prompt it drops the
line (or the lines continued so far); during a run it cancels the run; at an
approval question it cancels the run (the question is released as a no). A second
Ctrl-C while the first is being handled, or Ctrl-D at an empty prompt, leaves.

The spinner. While the session waits for the model (from the start of a run, and
again after each tool result, until the next event) a one-character spinner turns
on stderr, when stderr is a terminal; it is wiped before anything else is written,
and it waits 0.2 s before it appears, so a fast answer never flickers.

Imports the standard library, the core and the sibling ``sessions``; the renderer,
the usage wording and the model switch are handed in (they live in the outer ring),
and everything it writes goes to stdout (answers, as the console renders them) or
stderr.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import IO, Any, Callable, List, Optional

from .sessions import Session, after
from ..errors import NacelleError
from ..terminal_text import visible

__all__ = ["Spinner", "interactive"]

EXIT_OK, EXIT_INTERRUPTED = 0, 130
HISTORY_LENGTH = 1000

HELP = """\
/help          this list
/clear         forget the conversation (a session's file is rewritten at the next answer)
/cost          tokens and cost of this session's runs so far
/model NAME    use another model from now on
/save NAME     save the conversation as session NAME and keep saving there
/load NAME     continue the session saved as NAME
/skills        the skills loaded with --skills
/memory        the files in the --memory folder
/attach FILE   attach an image, a PDF or a text file to the next message (/attach: list)
/exit          leave (also: exit, quit, Ctrl-D)
A line ending in \\ continues on the next. Ctrl-C drops the line or cancels the run.
"""


def _one_line(err: BaseException) -> str:
    text = visible(str(err)).strip().splitlines()  # it may quote a provider's body
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _skills(skills: Any) -> str:
    """What ``/skills`` shows: each skill's name and description, one line each."""
    if skills is None:
        return "(no skills: start with --skills DIR)\n"
    if not len(skills):
        return "(the --skills folders hold no skills)\n"
    return "".join(f"{s.name}: {visible(' '.join(s.description.split()))}\n" for s in skills)


def _memory(memory: Any) -> str:
    """What ``/memory`` shows: the memory folder and each file in it with its size."""
    if memory is None:
        return "(no memory: start with --memory DIR)\n"
    files = memory.files()
    head = f"memory folder {visible(memory.root.path)} ({len(files)} files)\n"
    return head + "".join(f"  {visible(path)}  {size} bytes\n" for path, size in files)


def _unknown(directory: str, name: str) -> str:
    """What ``/load NAME`` says when no session NAME is saved (with the nearest saved
    names), or "" when there is one. A mistyped name loaded as an empty session would
    silently drop the conversation on the screen."""
    import difflib

    from ..sessions import FileStore, check_name

    names = FileStore(directory).names() if check_name(name) else []
    if name in names:
        return ""
    near = difflib.get_close_matches(name, names, n=3)
    hint = f"; did you mean {' or '.join(visible(n) for n in near)}?" if near else \
        ("; saved: " + ", ".join(visible(n) for n in sorted(names)[:10]) if names else "")
    return (f"no session named {visible(name)} in {visible(directory)}{hint} "
            "(the conversation is unchanged)\n")


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Spinner:
    """A spinner on ``out`` while ``start()``ed; ``stop()`` wipes it (idempotent)."""

    FRAMES = "|/-\\"

    def __init__(self, out: IO[str], *, delay: float = 0.2, interval: float = 0.1) -> None:
        self.out, self.delay, self.interval = out, delay, interval
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._shown = False

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._spin, name="nacelle-spinner", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        if self._stop.wait(self.delay):
            return
        frame = 0
        while True:
            with self._lock:
                if self._stop.is_set():
                    return
                self.out.write(f"\r{self.FRAMES[frame % len(self.FRAMES)]} waiting for the model")
                self.out.flush()
                self._shown = True
            frame += 1
            if self._stop.wait(self.interval):
                return

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        with self._lock:  # after this, the spinner thread writes nothing more
            self._stop.set()
            if self._shown:
                self.out.write("\r" + " " * 24 + "\r")
                self.out.flush()
                self._shown = False
        thread.join(1)


class _History:
    """readline's history in a file, if readline is there."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        try:
            import readline
        except ImportError:  # Windows, or a Python built without it
            self.readline: Any = None
            return
        self.readline = readline
        readline.set_history_length(HISTORY_LENGTH)
        if path is not None and os.path.exists(path):
            try:
                readline.read_history_file(path)
            except OSError:
                pass  # an unreadable history is no reason to refuse a session

    def add(self) -> None:
        if self.readline is None or self.path is None:
            return
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
            self.readline.write_history_file(self.path)
        except OSError:
            pass  # a read-only home keeps the session working, without history


def _read_prompt(err: IO[str]) -> Optional[str]:
    """One prompt, continued lines joined; None at end of input. Ctrl-C drops what
    was typed and asks again."""
    lines: List[str] = []
    while True:
        try:
            line = input("... " if lines else "> ")
        except KeyboardInterrupt:
            err.write("^C\n" if not lines else "^C (dropped)\n")
            lines = []
            continue
        except EOFError:
            if lines:  # end of input inside a continuation sends what there is
                return "\n".join(lines)
            return None
        if line.endswith("\\"):
            lines.append(line[:-1])
            continue
        lines.append(line)
        return "\n".join(lines)


def interactive(agent: Any, *, make_renderer: Callable[[], Any],
                describe_usage: Callable[[Any], str], session: Optional[Session],
                sessions_directory: str, switch_model: Callable[[str], Any],
                settle: Callable[[], Any] = lambda: None,
                version: str = "nacelle", history_path: Optional[str] = None,
                skills: Any = None, memory: Any = None, attachments: Any = (),
                logged: Any = None) -> int:
    """The session; returns the exit code. ``switch_model(name)`` returns the agent to
    use from now on (or raises a NacelleError saying why not); ``settle()`` returns
    once no approval question is reading the terminal. ``skills`` (a SkillSet) and
    ``memory`` (the memory tool) are what ``/skills`` and ``/memory`` show;
    ``attachments`` (parts from ``-a``) go with the first message. ``logged`` (the
    run log, if any) is told the session ``/save`` and ``/load`` switch to, so the
    prompts after them are logged under the session they are saved in."""
    from ..events import Kind, Usage
    from .attach import check, describe, read_attachment, user_message

    err = sys.stderr
    history = _History(history_path)
    spinner = Spinner(err) if _isatty(err) else None
    conversation: List[Any] = list(session.messages) if session is not None else []
    total = Usage()
    pending: List[Any] = list(attachments)
    err.write(f"{version} - /help for commands; /exit or Ctrl-D leaves; Ctrl-C cancels a run.\n")
    if session is not None:
        err.write(f"(session {session.name}: {len(conversation)} messages so far)\n")
    while True:
        text = _read_prompt(err)
        if text is None:
            err.write("\n")
            return EXIT_OK
        if not text.strip():
            continue
        history.add()
        stripped = text.strip()
        if stripped in ("exit", "quit"):
            return EXIT_OK
        if stripped.startswith("/") and not stripped.startswith("//"):
            word, _, rest = stripped[1:].partition(" ")
            rest = rest.strip()
            if word in ("exit", "quit"):
                return EXIT_OK
            try:
                if word == "help":
                    err.write(HELP)
                elif word == "clear":
                    conversation = []
                    err.write("(conversation cleared)\n")
                elif word == "cost":
                    err.write(f"this session: {describe_usage(total)}\n")
                elif word == "model" and rest:
                    agent = switch_model(rest)
                    err.write(f"(model: {rest})\n")
                elif word == "load" and rest and (missing := _unknown(sessions_directory, rest)):
                    err.write(missing)
                elif word in ("save", "load") and rest:
                    from ..sessions import FileStore

                    session = Session(FileStore(sessions_directory), rest)
                    if logged is not None:
                        logged.session = rest
                    if word == "save":
                        session.store.save(rest, conversation)
                        session.messages = list(conversation)
                        err.write(f"(saved as {rest} in {sessions_directory})\n")
                    else:
                        conversation = list(session.messages)
                        err.write(f"(session {rest}: {len(conversation)} messages)\n")
                elif word == "skills":
                    err.write(_skills(skills))
                elif word == "memory":
                    err.write(_memory(memory))
                elif word == "attach" and rest:
                    part = read_attachment(rest)
                    check([part], agent.backend)
                    pending.append(part)
                    err.write(f"(attached {visible(describe(part))}; {len(pending)} waiting "
                              "for the next message)\n")
                elif word == "attach":
                    err.write("".join(f"  {visible(describe(p))}\n" for p in pending)
                              or "(nothing attached: /attach FILE)\n")
                elif word in ("model", "save", "load"):
                    err.write(f"/{word} needs a NAME\n")
                else:
                    err.write(f"unknown command /{word}; /help lists them\n")
            except (NacelleError, OSError) as exc:
                err.write(f"nacelle: error: {_one_line(exc)}\n")
            continue
        if stripped.startswith("//"):
            text = text.lstrip()[1:]
        renderer = make_renderer()
        cancel = threading.Event()
        events = agent.stream(conversation + [user_message(text, pending)], cancel=cancel)
        pending = []
        done = None
        try:
            if spinner is not None:
                spinner.start()
            for event in events:
                if spinner is not None:
                    spinner.stop()
                renderer.event(event)
                if event.kind is Kind.TOOL_RESULT and spinner is not None:
                    spinner.start()  # the next request is on its way
                elif event.kind is Kind.DONE:
                    done = event
            if done is not None:
                total = total + done.usage
                if after(done, session, err):
                    conversation = list(done.messages)
        except KeyboardInterrupt:
            # Cancel first: it releases a question waiting on the terminal, which must
            # be gone before the next prompt reads, or it would take that line.
            cancel.set()
            if spinner is not None:
                spinner.stop()
            events.close()
            settle()
            err.write("\n(cancelled)\n")
        except (NacelleError, OSError) as exc:
            err.write(f"\nnacelle: error: {_one_line(exc)}\n")
        finally:
            if spinner is not None:
                spinner.stop()
            events.close()
        sys.stdout.write("\n")
        sys.stdout.flush()
