"""run_command: a shell command in the root, bounded in time and output.

The command runs as ``/bin/sh -c COMMAND`` with the root as its working directory,
no standard input, and an environment holding only ``PATH`` and ``HOME`` (the host's
values) — so API keys and other secrets in the host's environment are not handed
to whatever the model writes.

The shell is not the host's child. It is started by a small supervisor process
(:mod:`nacelle.toolsets.supervisor`, this Python run with ``-I -S``), itself started
with that scrubbed environment, which detaches from the host before it starts the
shell. So nothing the command can reach by walking its ancestors — ``/proc/$PPID/
environ`` and upwards — holds the host's secrets: the parent is the supervisor, and
the host is not an ancestor at all. Scrubbing the host's own memory instead would
mean rewriting the environment block of a running interpreter from a library, and
would still leave the key visible in every ancestor that exported it (the shell
that started the agent, typically). On Linux the supervisor is a child subreaper, so
every process the command starts stays its descendant even after ``setsid()`` or a
double fork; when the command ends, times out or is cancelled, the supervisor kills
the shell's process group and then every process left, until none is. Elsewhere it
kills the process group, and a process that left the group escapes. Commands end
with the call, and none outlives the agent unnoticed: if the host dies, the
supervisor's control pipe closes and it kills the command too.

While waiting, the tool polls every 50 ms for ``ctx.cancelled`` and the deadline —
the sooner of ``command_timeout`` (counted from the moment the shell starts) and
``ctx.deadline`` — and reads stdout and stderr as they come, so a chatty command
never blocks on a full pipe. At the deadline it asks the supervisor to stop the
command, and the supervisor says whether the shell was still running: a command
that had already exited is reported with its exit code, never as timed out. Each
stream keeps its first and last ``max_output`` bytes; the result shows the beginning
and the end (where errors usually are) and says how much was left out between. A
non-zero exit is an ordinary result carrying the exit code (``grep`` exits 1 when
nothing matched); a timeout or a cancellation is a failure.

This is not a sandbox: the command runs as the host's user, with the host's
file-system and network access, and can read the environment of any process of that
user it finds in ``/proc``. The root is only its starting directory. Given a box
(``LocalTools(root, sandbox=...)``, :mod:`nacelle.sandbox`), the command runs in it
instead: the box bounds, confines and reaps it, and this tool only shapes the result.

Outer ring: imports the standard library, ``nacelle.errors`` and the sibling
``confine`` and ``interpreter`` modules.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional

from .._loggers import get_logger
from ..errors import Cancelled, NacelleError
from .confine import ConfinedTool, Root
from .interpreter import helper_command, helper_environment

__all__ = ["CommandTimedOut", "RunCommand", "SupervisorLost"]

logger = get_logger(__name__)

POLL_SECONDS = 0.05
DRAIN_SECONDS = 2.0
START_SECONDS = 30.0  # for the supervisor to start the shell, on a machine under load
STOP_SECONDS = 10.0  # for it to answer a stop: half a second's grace, then up to 5 s of kills
KILL_SECONDS = 5.0  # the supervisor's own bound on killing what is left


class CommandTimedOut(NacelleError):
    """A command ran past its time limit, and it and every process it started were
    killed."""


class SupervisorLost(NacelleError):
    """The process supervising a command died or stopped answering, so what the
    command started could not be accounted for."""


class _Capture:
    """The first and the last ``limit`` bytes of a stream, and its total size."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.limit:
                del self.tail[: len(self.tail) - self.limit]

    def text(self, budget: int, limit_note: str) -> str:
        kept = bytes(self.head + self.tail)
        if self.total <= budget:
            text = kept.decode("utf-8", "replace")
            return text[:-1] if text.endswith("\n") else text
        first = kept[: budget - budget // 2]
        last = kept[len(kept) - budget // 2:] if budget // 2 else b""
        omitted = self.total - len(first) - len(last)
        return (f"{first.decode('utf-8', 'replace')}\n[... {omitted} bytes omitted: "
                f"{limit_note} ...]\n{last.decode('utf-8', 'replace')}")


class _Supervised:
    """The host's side of one supervised command: its output pipes, the supervisor's
    status pipe (read) and control pipe (written)."""

    def __init__(self, proc: "subprocess.Popen[bytes]", status: int, control: int,
                 out: _Capture, err: _Capture) -> None:
        self.proc = proc
        self.status = status
        self.control: Optional[int] = control
        self.sel = selectors.DefaultSelector()
        self.sel.register(proc.stdout, selectors.EVENT_READ, out)  # type: ignore[arg-type]
        self.sel.register(proc.stderr, selectors.EVENT_READ, err)  # type: ignore[arg-type]
        self.sel.register(status, selectors.EVENT_READ, None)
        self.said = bytearray()
        self.opened = time.monotonic()
        self.started: Optional[float] = None
        self.supervisor = 0
        self.final: Optional[List[str]] = None  # ["exit" | "killed", code, left]
        self.lost = False

    def wait(self, timeout: float, ctx_deadline: Optional[float],
             cancelled: threading.Event) -> str:
        """Read until the supervisor's last word; return why the command ended:
        "exited", "timeout" or "cancelled"."""
        why = "exited"
        asked_at: Optional[float] = None
        while self.final is None and not self.lost:
            now = time.monotonic()
            deadline = ctx_deadline if ctx_deadline is not None else float("inf")
            if self.started is not None:
                deadline = min(deadline, self.started + timeout)
            elif now > self.opened + START_SECONDS:
                deadline = now  # the supervisor never said it started
            if asked_at is None:
                if cancelled.is_set():
                    why = "cancelled"
                elif now >= deadline:
                    why = "timeout"
                if why != "exited":
                    asked_at = now
                    self.ask_to_stop()
            elif now > asked_at + STOP_SECONDS:
                self.lost = True  # it does not answer: give up on it
                break
            wait = POLL_SECONDS if asked_at is not None else max(0.0, deadline - now)
            self._read(min(POLL_SECONDS, wait))
        return why

    def ask_to_stop(self) -> None:
        if self.control is not None:
            try:
                os.write(self.control, b"k")
            except OSError:
                pass  # the supervisor is gone; its status pipe will say so

    def drain(self) -> None:
        """Read what the command's processes wrote until their pipes close."""
        end = time.monotonic() + DRAIN_SECONDS
        while any(key.data is not None for key in self.sel.get_map().values()) \
                and time.monotonic() < end:
            self._read(POLL_SECONDS)

    def close(self) -> None:
        if self.control is not None:
            os.close(self.control)  # an unfinished command is killed when this closes
            self.control = None
        end = time.monotonic() + STOP_SECONDS
        while self.final is None and not self.lost and time.monotonic() < end:
            self._read(POLL_SECONDS)
        self.sel.close()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        os.close(self.status)
        if self.supervisor and self.final is not None:
            # A host that is pid 1 or a subreaper adopts the detached supervisor.
            try:
                os.waitpid(self.supervisor, 0)
            except ChildProcessError:
                pass

    def _read(self, timeout: float) -> None:
        for key, _ in self.sel.select(timeout):
            chunk = os.read(key.fd, 65536)
            if key.data is not None:
                if chunk:
                    key.data.add(chunk)
                else:
                    self.sel.unregister(key.fileobj)
                continue
            if not chunk:
                self.sel.unregister(key.fileobj)
                self.lost = self.final is None
                continue
            self.said += chunk
            while b"\n" in self.said:
                line, _, rest = bytes(self.said).partition(b"\n")
                self.said = bytearray(rest)
                self._hear(line.decode("ascii", "replace").split())

    def _hear(self, words: List[str]) -> None:
        if words[:1] == ["started"] and len(words) == 3 and self.started is None:
            self.started = time.monotonic()
            self.supervisor = int(words[2])
        elif words[:1] in (["exit"], ["killed"]) and len(words) == 3:
            self.final = words


class RunCommand(ConfinedTool):
    name = "run_command"
    description = (
        "Run a shell command with /bin/sh -c in the root directory and return its exit "
        "code, stdout and stderr. There is no standard input and the environment holds "
        "only PATH and HOME. The command and everything it starts are killed when the "
        "time limit passes or the run is cancelled; background jobs (&) are stopped "
        "when the command finishes. Long output is shortened to its beginning and end. "
        "Use the file tools to read and edit files."
    )
    schema = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command to run."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    exclusive = True
    read_only = False
    destructive = True
    idempotent = False
    open_world = True  # a command can reach the network and anything else the user can

    def __init__(self, root: Root, *, timeout: float, max_output: int,
                 sandbox: Any = None) -> None:
        super().__init__(root, max_output=max_output)
        self.timeout = timeout
        self.sandbox = sandbox
        if sandbox is not None:
            self.description = (
                "Run a shell command with /bin/sh -c in an isolated box whose working "
                "directory is the root (the only place it can write, besides a private "
                "/tmp) and return its exit code, stdout and stderr. The box has its own "
                "processes and no access to the host's files, environment or, unless "
                "allowed, the network. There is no standard input. The command and "
                "everything it starts are killed when the time limit passes or the run "
                "is cancelled. Long output is shortened to its beginning and end. Use "
                "the file tools to read and edit files.")
            self.open_world = bool(getattr(sandbox, "network", False))

    def run(self, input: Dict[str, Any], ctx: Any) -> str:
        command = input.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError("command must be a non-empty string")
        if "\0" in command:
            raise ValueError("command contains a NUL character")
        if self.sandbox is not None:
            return self._run_in_box(command, ctx)
        cancelled = getattr(ctx, "cancelled", None) or threading.Event()
        env = {"PATH": os.environ.get("PATH") or os.defpath,
               "HOME": os.environ.get("HOME") or os.path.expanduser("~")}
        out, err = _Capture(self.max_output), _Capture(self.max_output)
        started = time.monotonic()
        with self.root.descriptor():
            session = self._start(command, env, out, err)
            try:
                why = session.wait(self.timeout, getattr(ctx, "deadline", None), cancelled)
                if session.final is not None:
                    session.drain()
            finally:
                # Whatever happened — an exception included — nothing of the command
                # may outlive the call.
                session.close()
        seconds = time.monotonic() - started
        if why == "cancelled":
            logger.debug("run_command cancelled after %.1fs; its processes were killed",
                         seconds)
            raise Cancelled(f"the command was cancelled after {seconds:.1f} seconds; it "
                            "and every process it started were killed")
        if session.final is None:
            raise SupervisorLost(
                "the process supervising the command ended or stopped answering before "
                "the command finished (was it killed?), so processes the command started "
                "may still be running. Output so far:\n" + self._report(None, out, err))
        how, code, left = session.final
        report = self._report(int(code), out, err)
        if int(left):
            report += (f"\n[{left} process(es) it started could not be killed within "
                       f"{KILL_SECONDS:g} seconds]")
        if why == "timeout" and how == "killed":
            logger.debug("run_command timed out after %.1fs; its processes were killed",
                         seconds)
            raise CommandTimedOut(
                f"the command timed out after {seconds:.1f} seconds; it and every process "
                f"it started were killed. Output before it was stopped:\n{report}")
        return report

    def _run_in_box(self, command: str, ctx: Any) -> str:
        """The command in ``self.sandbox``: the box bounds and reaps it; this shapes
        what it said as for a command run here."""
        started = time.monotonic()
        done = self.sandbox.run(["/bin/sh", "-c", command], timeout=self.timeout, ctx=ctx)
        out, err = _Capture(self.max_output), _Capture(self.max_output)
        out.add(done.stdout.encode("utf-8"))
        err.add(done.stderr.encode("utf-8"))
        report = self._report(done.exit_code, out, err)
        if done.timed_out:
            raise CommandTimedOut(
                f"the command timed out after {time.monotonic() - started:.1f} seconds; it "
                f"and every process it started were killed. Output before it was "
                f"stopped:\n{report}")
        return report

    def _start(self, command: str, env: Dict[str, str], out: _Capture,
               err: _Capture) -> _Supervised:
        status_r, status_w = os.pipe()
        control_r, control_w = os.pipe()
        try:
            argv = helper_command("supervisor.py", str(status_w), str(control_r), command,
                                  *(f"{name}={value}" for name, value in env.items()))
            proc = subprocess.Popen(
                argv, cwd=self.root.path, env=helper_environment(),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(status_w, control_r), start_new_session=True)
        except BaseException:
            for fd in (status_r, control_w):
                os.close(fd)
            raise
        finally:
            os.close(status_w)
            os.close(control_r)
        proc.wait()  # the first process forks the supervisor and exits at once
        return _Supervised(proc, status_r, control_w, out, err)

    def _report(self, code: Optional[int], out: _Capture, err: _Capture) -> str:
        if code is not None and code < 0:
            try:
                status = f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                status = f"killed by signal {-code}"
        elif code is None:
            status = "exit code unknown"
        else:
            status = f"exit code: {code}"
        if not out.total and not err.total:
            return f"{status} (no output)"
        budget = max(200, self.max_output - 200)
        note = f"output over the {self.max_output}-character limit"
        err_budget = min(err.total, max(budget - out.total, budget // 3))
        parts = [status]
        if out.total:
            parts.append("stdout:\n" + out.text(budget - err_budget, note))
        if err.total:
            parts.append("stderr:\n" + err.text(err_budget, note))
        return "\n".join(parts)
