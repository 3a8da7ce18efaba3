"""Running one command line under ``run_command``'s supervisor, for every box.

Each box turns the caller's ``argv`` into the host command that starts it (itself for
:class:`~nacelle.sandbox.Local`, ``bwrap … -- argv`` for
:class:`~nacelle.sandbox.Bubblewrap`, ``podman run … argv`` for
:class:`~nacelle.sandbox.Container`), and this module runs that host command the way
``run_command`` runs a shell (:mod:`nacelle.toolsets.supervisor`): detached from the
host, under a child subreaper that kills and reaps every process it left when it ends,
times out, is cancelled or its host dies. A box therefore reaps even what escapes its
own mechanism, and a box's own mechanism (a PID namespace whose init is killed) reaps
what the subreaper cannot see.

:func:`supervise` also serves code mode's bridge: ``stdin`` may be a
:class:`Feed` the caller writes to while the command runs, and ``stdout`` a sink of
its own (anything with ``add(chunk)``), read in the same loop that watches the
deadline and the cancel event.

Outer ring: imports the standard library, ``nacelle.errors`` and the supervisor's host
side in ``nacelle.toolsets.shell``.
"""

from __future__ import annotations

import os
import selectors
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Protocol, Sequence, Union

from ..errors import Cancelled
from ..toolsets.interpreter import helper_command, helper_environment
from ..toolsets.shell import SupervisorLost, _Capture, _Supervised

__all__ = ["OUTPUT_LIMIT", "Completed", "Feed", "Sink", "argv_list", "relative_cwd", "supervise"]

#: How much of each stream :class:`Completed` keeps: its first and last this many
#: bytes. A tool that shows the output to a model cuts it further.
OUTPUT_LIMIT = 1_000_000


@dataclass(frozen=True)
class Completed:
    """How a command in a box ended. ``exit_code`` is negative when a signal killed
    it (``-9`` for SIGKILL, as :mod:`subprocess` says it; inside a Bubblewrap box,
    whose ``bwrap`` reports it as a shell does, ``128 + N``); ``timed_out`` is True when
    its time ran out and it was killed, never when it exited on its own just then.
    ``stdout`` and ``stderr`` are decoded as UTF-8 (errors replaced); past
    :data:`OUTPUT_LIMIT` bytes they hold the beginning and the end with a line saying
    how much was left out."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False


class Sink(Protocol):
    def add(self, chunk: bytes) -> None: ...


class Feed:
    """A command's standard input that the host writes while the command runs (code
    mode's answers). Writes from the reading loop are short and the pipe is never
    full of unread answers, but a write that would block is done by a thread so the
    loop never stalls on it."""

    def __init__(self, first: bytes = b"") -> None:
        self.fd: Optional[int] = None
        self.first = first  # written as soon as the command starts
        self._lock = threading.Lock()

    def open(self, fd: int) -> None:
        """Start feeding ``fd``: ``first`` is written by a thread (it may be larger
        than the pipe holds), and every later write waits for it."""
        self.fd = fd
        if self.first:
            threading.Thread(target=self.write, args=(self.first,), daemon=True).start()

    def write(self, data: bytes) -> None:
        with self._lock:
            fd = self.fd
            if fd is None:
                return
            try:
                os.write(fd, data) if len(data) <= 4096 else _write_all(fd, data)
            except OSError:
                pass  # the command is gone; its end is reported by the supervisor

    def close(self) -> None:
        with self._lock:
            if self.fd is not None:
                try:
                    os.close(self.fd)
                finally:
                    self.fd = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def supervise(argv: Sequence[str], *, cwd: str, env: Dict[str, str],
              stdin: Union[None, bytes, Feed] = None, timeout: Optional[float] = None,
              ctx: Any = None, stdout: Optional[Sink] = None,
              limit: int = OUTPUT_LIMIT) -> Completed:
    """Run ``argv`` (a host command) in ``cwd`` with exactly ``env``; see the module
    docstring. Raises :class:`~nacelle.errors.Cancelled` when ``ctx.cancelled`` is set
    (after everything was killed) and :class:`~nacelle.toolsets.shell.SupervisorLost`
    when the supervisor died before the command was accounted for."""
    cancelled = getattr(ctx, "cancelled", None) or threading.Event()
    out, err = _Capture(limit), _Capture(limit)
    status_r, status_w = os.pipe()
    control_r, control_w = os.pipe()
    stdin_r = stdin_w = -1
    if stdin is not None:
        stdin_r, stdin_w = os.pipe()
    try:
        command = "exec " + shlex.join(list(argv))
        host = helper_command("supervisor.py", str(status_w), str(control_r), command,
                              *(f"{name}={value}" for name, value in env.items()))
        proc = subprocess.Popen(
            host, cwd=cwd, env=helper_environment(),
            stdin=stdin_r if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(status_w, control_r), start_new_session=True)
    except BaseException:
        for fd in (status_r, control_w, stdin_w):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in (status_w, control_r, stdin_r):
            if fd >= 0:
                os.close(fd)
    proc.wait()  # the first process forks the supervisor and exits at once
    session = _Supervised(proc, status_r, control_w, out, err)
    if stdout is not None:
        assert proc.stdout is not None
        session.sel.modify(proc.stdout, selectors.EVENT_READ, stdout)
    writer: Optional[threading.Thread] = None
    if isinstance(stdin, Feed):
        stdin.open(stdin_w)
    elif stdin is not None:
        writer = threading.Thread(target=_feed_once, args=(stdin_w, stdin), daemon=True)
        writer.start()
    try:
        why = session.wait(float("inf") if timeout is None else timeout,
                           getattr(ctx, "deadline", None), cancelled)
        if session.final is not None:
            session.drain()
    finally:
        if isinstance(stdin, Feed):
            stdin.close()
        session.close()
        if writer is not None:
            writer.join(timeout=1.0)
    if why == "cancelled":
        raise Cancelled("the command was cancelled; it and every process it started "
                        "were killed")
    if session.final is None:
        raise SupervisorLost("the process supervising the command ended or stopped "
                             "answering before the command finished, so processes it "
                             "started may still be running")
    how, code, _left = session.final
    note = "output over the limit"
    return Completed(int(code), out.text(limit, note), err.text(limit, note),
                     timed_out=why == "timeout" and how == "killed")


def _feed_once(fd: int, data: bytes) -> None:
    try:
        _write_all(fd, data)
    except OSError:
        pass  # the command stopped reading: what it read is what it got
    finally:
        os.close(fd)


def relative_cwd(cwd: "os.PathLike[str] | str") -> str:
    """``cwd`` as a normalized path under the workspace ("." for its top); a path that
    is absolute or climbs out is refused."""
    import posixpath

    from ..errors import ConfigError

    text = os.fspath(cwd)
    if "\0" in text:
        raise ConfigError("cwd contains a NUL character")
    norm = posixpath.normpath(text or ".")
    if posixpath.isabs(norm) or norm == ".." or norm.startswith("../"):
        raise ConfigError(f"cwd must be a path inside the workspace, not {text!r}")
    return norm


def argv_list(argv: Sequence[str]) -> List[str]:
    """``argv`` checked: a non-empty sequence of strings without NUL characters (a
    lone string is refused, since ``run("ls -l")`` would look for a program of that
    name)."""
    from ..errors import ConfigError

    if isinstance(argv, (str, bytes)) or not argv:
        raise ConfigError("argv must be a non-empty list of strings, such as "
                          "['sh', '-c', 'ls -l']")
    items = list(argv)
    for item in items:
        if not isinstance(item, str) or "\0" in item:
            raise ConfigError(f"argv items must be strings without NUL, not {item!r}")
    return items
