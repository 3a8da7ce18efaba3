"""run_command's supervisor: the small process that runs a command's shell, holds none
of the host's secrets, and ends every process the command started.

The host starts this file as ``python -I -S supervisor.py STATUS_FD CONTROL_FD
COMMAND NAME=VALUE...`` (see :mod:`nacelle.toolsets.interpreter`), with an
environment of ``PATH`` and little else, the command's output pipes as its stdout
and stderr, and ``/dev/null`` as stdin. It then:

1. **Leaves the host's family.** It forks and the first process exits at once, so
   the survivor is re-parented to init (or the nearest subreaper) and the host is no
   ancestor of the command: a command walking ``/proc/$PPID`` upwards reads this
   process's environment, which holds no secret, and never the host's. (A command
   can still read the environment of any process of the same user that it can find
   in ``/proc``; this is not a sandbox.)
2. **Becomes a child subreaper** (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux 3.4+, no
   privilege needed, so it works for root and for ordinary users alike). Every
   process the command starts that is orphaned — a daemon that double-forks, a
   child that calls ``setsid()`` and outlives its parent — is re-parented to this
   process instead of to init, so none can slip away by leaving the process group or
   the session. A PID namespace or a cgroup would do it too, but needs privileges or
   delegation that an ordinary user usually lacks.
3. **Runs** ``/bin/sh -c COMMAND`` in a session of its own with exactly the given
   environment, and tells the host ``started SHELL_PID SUPERVISOR_PID``.
4. **Waits** for the shell to exit, or for the host to ask it to stop (a byte on
   the control pipe) or to go away (the control pipe closed: a host that dies takes
   its commands with it).
5. **Ends everything.** Asked to stop while the shell runs, it sends SIGTERM to the
   shell's process group and to its own children, gives the shell half a second,
   then SIGKILL. In every case it then kills the shell's group, reaps the shell, and
   kills and reaps its remaining children round after round — each round's orphans
   are its children by the next — until it has none left. Only direct, unreaped
   children are signalled by pid, so a recycled pid is never hit. It answers
   ``exit CODE LEFT`` if the shell had exited before any stop was asked for (a
   command that finished just as its time ran out is not a timeout), ``killed CODE
   LEFT`` otherwise; ``LEFT`` counts processes that would not die within five
   seconds (stuck in the kernel, say).

Elsewhere than Linux there is no subreaper and no ``/proc``: the supervisor still
detaches, and kills the shell's process group before reaping the shell, but a
process that left the group escapes. A command that kills its supervisor (``kill -9
$PPID``) takes the tracking with it; the host then reports that.

Imports the standard library only: it runs outside the package.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from typing import Dict, List, Optional

__all__ = ["main"]

TERM_GRACE = 0.5
KILL_SECONDS = 5.0
PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (ImportError, OSError, AttributeError):
        return False


def _spawn(command: str, env: Dict[str, str]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the shell, between fork and exec: nothing here may return
        os.setsid()
        # Python ignores these at start-up, and an ignored signal stays ignored across
        # exec: `yes | head` would print errors instead of ending quietly.
        for name in ("SIGPIPE", "SIGXFSZ"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        os.execve("/bin/sh", ["/bin/sh", "-c", command], env)
    except BaseException as err:  # noqa: B036 - must never return to the caller's loop
        try:
            os.write(2, f"run_command: cannot start /bin/sh: {err}\n".encode())
        finally:
            os._exit(127)
    raise AssertionError("unreachable")  # pragma: no cover


class _Shell:
    """The shell's exit, seen without reaping it where the platform allows, so its
    process group id stays reserved until the group has been killed."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.code: Optional[int] = None

    def exited(self) -> bool:
        if self.code is not None:
            return True
        if hasattr(os, "waitid"):
            try:
                return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) \
                    is not None
            except ChildProcessError:
                return True
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid:
            self.code = os.waitstatus_to_exitcode(status)
        return pid != 0

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass  # the group is gone already

    def reap(self) -> int:
        if self.code is None:
            _, status = os.waitpid(self.pid, 0)
            self.code = os.waitstatus_to_exitcode(status)
        return self.code


def _children() -> List[int]:
    """This process's children, from /proc (empty where there is no /proc)."""
    me = os.getpid()
    found: List[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            found.append(int(name))
    return found


def _signal_children(sig: int) -> List[int]:
    kids = _children()
    for pid in kids:
        try:
            os.kill(pid, sig)  # an unreaped child of ours: its pid is not reused
        except ProcessLookupError:
            pass
    return kids


def _reap_everything(wake: int) -> int:
    """Kill and reap every remaining child, round after round; how many would not die."""
    give_up = time.monotonic() + KILL_SECONDS
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0  # no children: with a subreaper, no descendants either
        if pid:
            continue
        kids = _signal_children(signal.SIGKILL)
        if time.monotonic() > give_up:
            return len(kids)
        _wait(wake, 0.05)


def _wait(wake: int, seconds: float, *others: int) -> List[int]:
    """Sleep until a signal arrives (SIGCHLD writes to ``wake``), ``others`` turn
    readable, or ``seconds`` pass; return the readable ``others``."""
    try:
        ready, _, _ = select.select([wake, *others], [], [], seconds)
    except InterruptedError:  # pragma: no cover - retried by Python since 3.5
        return []
    if wake in ready:
        try:
            os.read(wake, 4096)
        except BlockingIOError:
            pass
    return [fd for fd in ready if fd != wake]


def _say(fd: int, line: str) -> None:
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass  # the host is gone; the work is done all the same


def main(argv: List[str]) -> int:
    status, control, command = int(argv[0]), int(argv[1]), argv[2]
    env = dict(item.split("=", 1) for item in argv[3:])
    os.set_inheritable(status, False)
    os.set_inheritable(control, False)
    if os.fork():
        os._exit(0)  # see 1. in the module docstring
    _become_subreaper()
    wake, wake_w = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    shell = _Shell(_spawn(command, env))
    # The output pipes belong to the command now: the host sees them end when its
    # processes have ended, whatever this process does.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    _say(status, f"started {shell.pid} {os.getpid()}")
    stop = False
    while not shell.exited() and not stop:
        if _wait(wake, 1.0, control):
            try:
                asked = os.read(control, 64)
            except OSError:
                asked = b""
            stop = not asked or b"k" in asked
    how = "exit" if shell.exited() else "killed"
    if how == "killed":
        shell.signal_group(signal.SIGTERM)
        _signal_children(signal.SIGTERM)
        grace_ends = time.monotonic() + TERM_GRACE
        while not shell.exited() and time.monotonic() < grace_ends:
            _wait(wake, max(0.0, grace_ends - time.monotonic()))
    shell.signal_group(signal.SIGKILL)
    code = shell.reap()
    left = _reap_everything(wake)
    _say(status, f"{how} {code} {left}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
