"""run_command: a shell command in the root, bounded in time and output.

The command runs as ``/bin/sh -c COMMAND`` with the root as its working directory,
no standard input, and an environment holding only ``PATH`` and ``HOME`` (the host's
values) — so API keys and other secrets in the host's environment are not handed
to whatever the model writes. It is started with ``setsid()``, so it leads its own
process group; on timeout or cancellation the whole group is sent SIGTERM, then
SIGKILL half a second later, so grandchildren (``sleep 100 &``) die with it. Background jobs still
running when the shell exits are killed the same way: a command's processes end
with the command, and none outlive the agent unnoticed. To avoid signalling a
recycled group id, the shell is reaped only after its group was killed (its zombie
keeps the id reserved), using ``waitid(WNOWAIT)`` where the platform has it.

While waiting, the tool polls every 50 ms for ``ctx.cancelled`` and the deadline —
the sooner of ``command_timeout`` and ``ctx.deadline`` — and reads stdout and stderr
as they come, so a chatty command never blocks on a full pipe. Each stream keeps
its first and last ``max_output`` bytes; the result shows the beginning and the end
(where errors usually are) and says how much was left out between. A non-zero exit
is an ordinary result carrying the exit code (``grep`` exits 1 when nothing
matched); a timeout or a cancellation is a failure.

This is not a sandbox: the command runs as the host's user, with the host's
file-system and network access. The root is only its starting directory.

Outer ring: imports the standard library, ``nacelle.errors`` and ``confine``.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from typing import Any, Dict, Optional

from ..errors import Cancelled, NacelleError
from .confine import ConfinedTool, Root

__all__ = ["CommandTimedOut", "RunCommand"]

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.05
TERM_GRACE = 0.5
DRAIN_SECONDS = 2.0


class CommandTimedOut(NacelleError):
    """A command ran past its time limit and its process group was killed."""


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


def _has_exited(proc: "subprocess.Popen[bytes]") -> bool:
    """Whether the shell has exited, without reaping it where the platform allows."""
    waitid = getattr(os, "waitid", None)
    if waitid is None or proc.returncode is not None:
        return proc.poll() is not None
    try:
        info = waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return proc.poll() is not None
    return info is not None


def _signal_group(proc: "subprocess.Popen[bytes]", sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


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

    def __init__(self, root: Root, *, timeout: float, max_output: int) -> None:
        super().__init__(root, max_output=max_output)
        self.timeout = timeout

    def run(self, input: Dict[str, Any], ctx: Any) -> str:
        command = input.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError("command must be a non-empty string")
        if "\0" in command:
            raise ValueError("command contains a NUL character")
        deadline = time.monotonic() + self.timeout
        ctx_deadline = getattr(ctx, "deadline", None)
        if ctx_deadline is not None:
            deadline = min(deadline, ctx_deadline)
        cancelled = getattr(ctx, "cancelled", None) or threading.Event()
        env = {"PATH": os.environ.get("PATH") or os.defpath,
               "HOME": os.environ.get("HOME") or os.path.expanduser("~")}
        out, err = _Capture(self.max_output), _Capture(self.max_output)
        started = time.monotonic()
        with self.root.descriptor():
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command], cwd=self.root.path, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, close_fds=True)
            try:
                why = self._wait(proc, out, err, deadline, cancelled)
            finally:
                # Whatever happened — an exception included — nothing of the command
                # may outlive the call.
                _signal_group(proc, signal.SIGKILL)
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        pipe.close()
                proc.wait()
        seconds = time.monotonic() - started
        if why == "cancelled":
            logger.debug("run_command cancelled after %.1fs; process group %d killed",
                         seconds, proc.pid)
            raise Cancelled(f"the command was cancelled after {seconds:.1f} seconds; it "
                            "and every process it started were killed")
        report = self._report(proc.returncode, out, err)
        if why == "timeout":
            logger.debug("run_command timed out after %.1fs; process group %d killed",
                         seconds, proc.pid)
            raise CommandTimedOut(
                f"the command timed out after {seconds:.1f} seconds; it and every process "
                f"it started were killed. Output before it was stopped:\n{report}")
        return report

    def _wait(self, proc: "subprocess.Popen[bytes]", out: _Capture, err: _Capture,
              deadline: float, cancelled: threading.Event) -> str:
        """Read output until the shell exits; return "exited", "timeout" or "cancelled"."""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ, out)  # type: ignore[arg-type]
            sel.register(proc.stderr, selectors.EVENT_READ, err)  # type: ignore[arg-type]
            drain_until: Optional[float] = None
            why = "exited"
            while True:
                now = time.monotonic()
                if cancelled.is_set():
                    why = "cancelled"
                    break
                if now >= deadline:
                    why = "timeout"
                    break
                if drain_until is None and _has_exited(proc):
                    # Background jobs left behind go now; then their pipes reach EOF.
                    _signal_group(proc, signal.SIGKILL)
                    drain_until = now + DRAIN_SECONDS
                if drain_until is not None and (not sel.get_map() or now >= drain_until):
                    return why
                if not sel.get_map():
                    cancelled.wait(POLL_SECONDS)  # pipes closed, process still running
                    continue
                self._read(sel, min(POLL_SECONDS, max(0.0, deadline - now)))
            self._stop(proc)
            end = time.monotonic() + 1.0
            while sel.get_map() and time.monotonic() < end:
                self._read(sel, 0.05)
            return why

    @staticmethod
    def _read(sel: selectors.BaseSelector, timeout: float) -> None:
        for key, _ in sel.select(timeout):
            chunk = os.read(key.fd, 65536)
            if chunk:
                key.data.add(chunk)
            else:
                sel.unregister(key.fileobj)

    @staticmethod
    def _stop(proc: "subprocess.Popen[bytes]") -> None:
        """SIGTERM to the group, a short grace for the shell, then SIGKILL to all."""
        _signal_group(proc, signal.SIGTERM)
        end = time.monotonic() + TERM_GRACE
        while time.monotonic() < end and not _has_exited(proc):
            time.sleep(0.02)
        _signal_group(proc, signal.SIGKILL)

    def _report(self, code: Optional[int], out: _Capture, err: _Capture) -> str:
        if code is not None and code < 0:
            try:
                status = f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                status = f"killed by signal {-code}"
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
