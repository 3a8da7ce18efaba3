"""``Bubblewrap``: a command confined by Linux namespaces, through ``bwrap``.

`bubblewrap <https://github.com/containers/bubblewrap>`_ (Debian's ``bubblewrap``
package, the sandbox Flatpak uses) builds the box from unprivileged user namespaces, so
it needs no daemon and no root. Each command gets (see ``bwrap(1)``,
https://manpages.debian.org/bookworm/bubblewrap/bwrap.1.en.html):

- its own PID, mount, IPC, UTS, cgroup and network namespaces (``--unshare-all``; the
  network is shared only with ``network=True``): the host's processes are not there
  to see or signal, ``/proc`` is the box's own, and without the network there is only
  an unconfigured loopback, so nothing on the host or beyond is reachable;
- a file system of its own: the workspace bound read-write at ``/workspace`` — the
  only writable place besides a private, empty ``/tmp`` — and, read-only, ``/usr``
  (with the merged-``/usr`` links or binds of ``/bin``, ``/lib``…), the few files
  of ``/etc`` a program needs to start (the loader's cache, ``passwd``/``group``,
  ``nsswitch.conf``; with the network also ``hosts``, ``resolv.conf`` and the
  certificates) and the paths given in ``readable=``; the box's own root is
  read-only too, so nothing is made beside them. Nothing else of the host exists
  in the box: not its home directories, not ``/proc`` of its processes. A symlink in the
  workspace is resolved inside the box, so one pointing out of the workspace names a
  path the box does not have or cannot write;
- no capabilities (``--cap-drop ALL``: ``bwrap`` started by root keeps them
  otherwise, and a command holding ``CAP_SYS_ADMIN`` in the box's namespaces could
  remount the read-only binds writable and write the host's ``/usr`` as root), an
  empty environment but what the caller passes (``--clearenv``), no new privileges
  (``bwrap`` always sets ``PR_SET_NO_NEW_PRIVS``), a session of its own
  (``--new-session``: no ``TIOCSTI`` into the host's terminal), and death with its
  parent (``--die-with-parent``);
- resource limits, set inside the box by ``prlimit`` (util-linux) just before the
  command: ``memory_mb`` as ``RLIMIT_AS``, ``cpu_seconds`` as ``RLIMIT_CPU`` (SIGXCPU,
  then SIGKILL), ``max_pids`` as ``RLIMIT_NPROC`` — processes of the box's user, so a
  fork bomb stops there. The kernel never applies ``RLIMIT_NPROC`` to root (uid 0
  outside any user namespace), so a host running as root cannot have ``max_pids``:
  that is refused at construction rather than not enforced.

The environment given to ``run`` travels on ``bwrap``'s command line (``--setenv``),
which the host's other users can read in ``/proc`` while the command runs, and which
the command itself can read as ``/proc/1/cmdline`` (the box's PID 1 is ``bwrap``): it
is the command's environment either way, but pass no secret you would not show the
host's users.

A command killed by signal N inside the box exits ``128 + N`` (``bwrap`` reports it
as a shell does); the box itself killed at a timeout is a negative code.

The command runs under ``run_command``'s supervisor (:mod:`nacelle.sandbox.process`),
so at the timeout, on cancel and on :meth:`close` the ``bwrap`` process is killed; the
box's PID 1 dies with it, and the kernel kills every process of the PID namespace —
``setsid`` and double-fork survivors included.

Where the box cannot be had — not Linux, no ``bwrap`` on ``PATH``, user namespaces
disabled — construction raises :class:`~nacelle.errors.ConfigError` saying which and
how to get it. There is never a fallback to an unconfined run.

Outer ring: imports the standard library, ``nacelle.errors`` and the siblings.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Dict, Iterable, List, Optional, Tuple

from ..errors import ConfigError
from .box import Box

__all__ = ["Bubblewrap", "INSIDE"]

#: Where the workspace is inside the box.
INSIDE = "/workspace"
_MERGED = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd",
        "/etc/group", "/etc/nsswitch.conf", "/etc/alternatives", "/etc/localtime")
_ETC_NET = ("/etc/hosts", "/etc/resolv.conf", "/etc/ssl", "/etc/ca-certificates",
            "/etc/host.conf", "/etc/gai.conf")
_PROBE_SECONDS = 30.0
INSTALL = "install bubblewrap: apt-get install bubblewrap (or dnf/pacman install bubblewrap)"


def _positive_int(name: str, value: Optional[int]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive whole number, not {value!r}")
    return value


class Bubblewrap(Box):
    """A box of Linux namespaces through ``bwrap``; see the module docstring.

    ``Bubblewrap(root)`` checks at once that the box can be had (a small probe
    command in one, cached per ``bwrap`` binary) and raises ``ConfigError`` naming
    what is missing otherwise. ``readable`` paths are bound read-only at the same
    place inside.
    """

    def __init__(self, root: "os.PathLike[str] | str", *, network: bool = False,
                 readable: Iterable["os.PathLike[str] | str"] = (),
                 memory_mb: Optional[int] = None, cpu_seconds: Optional[int] = None,
                 max_pids: Optional[int] = None) -> None:
        super().__init__(root)
        self.network = bool(network)
        self.readable: Tuple[str, ...] = tuple(os.path.abspath(os.fspath(p)) for p in readable)
        self.memory_mb = _positive_int("memory_mb", memory_mb)
        self.cpu_seconds = _positive_int("cpu_seconds", cpu_seconds)
        self.max_pids = _positive_int("max_pids", max_pids)
        for path in self.readable:
            if not os.path.exists(path):
                raise ConfigError(f"readable path {path!r} does not exist")
        self._bwrap = find_bwrap()
        if self.max_pids is not None and os.geteuid() == 0:
            raise ConfigError(
                "max_pids cannot be enforced for a host running as root: the kernel does "
                "not apply RLIMIT_NPROC to uid 0; run the agent as an ordinary user")
        self._prlimit = ""
        if any(v is not None for v in (self.memory_mb, self.cpu_seconds, self.max_pids)):
            found = shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")
            if found is None or not found.startswith("/usr/"):
                raise ConfigError("resource limits in a Bubblewrap box are set with prlimit, "
                                  "which is missing: install util-linux")
            self._prlimit = found
        probe(self._bwrap)

    def __repr__(self) -> str:
        opts = [repr(self._workspace)]
        if self.network:
            opts.append("network=True")
        for name in ("memory_mb", "cpu_seconds", "max_pids"):
            if getattr(self, name) is not None:
                opts.append(f"{name}={getattr(self, name)}")
        if self._closed:
            opts.append("closed")
        return f"Bubblewrap({', '.join(opts)})"

    def _host_command(self, argv: List[str], cwd: str, env: Dict[str, str],
                      ) -> Tuple[List[str], Dict[str, str], str]:
        inside = INSIDE if cwd == "." else f"{INSIDE}/{cwd}"
        args = [self._bwrap, *self._mounts(), "--chdir", inside, "--clearenv"]
        for name, value in env.items():
            args += ["--setenv", name, value]
        args.append("--")
        args += self._limits()
        args += argv
        return args, {"PATH": "/usr/bin:/bin"}, self._workspace

    def _mounts(self) -> List[str]:
        args = ["--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
                "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
        if self.network:
            args.append("--share-net")
        for path in _MERGED:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for path in _ETC + (_ETC_NET if self.network else ()):
            args += ["--ro-bind-try", path, path]
        for path in self.readable:
            args += ["--ro-bind", path, path]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                 "--bind", self._workspace, INSIDE, "--remount-ro", "/"]
        return args

    def _limits(self) -> List[str]:
        if not self._prlimit:
            return []
        args = [self._prlimit]
        if self.memory_mb is not None:
            args.append(f"--as={self.memory_mb * 1024 * 1024}")
        if self.cpu_seconds is not None:
            args.append(f"--cpu={self.cpu_seconds}")
        if self.max_pids is not None:
            args.append(f"--nproc={self.max_pids}")
        return [*args, "--"]

    def python(self) -> str:
        """A Python interpreter the box can run (code mode's): this host's own, its
        installation bound read-only when it lives outside ``/usr``."""
        exe = os.path.realpath(sys.executable)
        if not exe.startswith("/usr/"):
            prefix = os.path.realpath(sys.base_prefix)
            if prefix not in self.readable:
                self.readable += (prefix,)
        return exe


def find_bwrap() -> str:
    """The ``bwrap`` binary, or a ConfigError saying why there is none."""
    if not sys.platform.startswith("linux"):
        raise ConfigError(f"a Bubblewrap box needs Linux namespaces; this is {sys.platform}. "
                          "Use sandbox.Container with podman or docker instead")
    found = shutil.which("bwrap")
    if found is None:
        raise ConfigError(f"no bwrap on PATH: {INSTALL}")
    return found


_PROBED: Dict[str, str] = {}


def probe(bwrap: str) -> None:
    """Start a box once and run ``true`` in it; a failure is a ConfigError with what
    ``bwrap`` said (typically: user namespaces are disabled)."""
    if _PROBED.get(bwrap) == "ok":
        return
    args = [bwrap, "--unshare-all", "--cap-drop", "ALL", "--die-with-parent",
            "--ro-bind", "/usr", "/usr"]
    for path in _MERGED:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/env", "true"]
    try:
        done = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=_PROBE_SECONDS,
                              env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ConfigError(f"bwrap could not start a box ({err}); {INSTALL}") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip()[-500:]
        hint = ""
        if "namespace" in said.lower() or "permission" in said.lower():
            hint = (" — unprivileged user namespaces look disabled (sysctl "
                    "kernel.unprivileged_userns_clone=1, or user.max_user_namespaces > 0; "
                    "on Ubuntu 24.04+ an AppArmor profile for bwrap)")
        raise ConfigError(f"bwrap could not start a box: {said or done.returncode}{hint}")
    _PROBED[bwrap] = "ok"


def available() -> Optional[str]:
    """None when a Bubblewrap box can be had here, else why not (for skips and docs)."""
    try:
        probe(find_bwrap())
    except ConfigError as err:
        return str(err)
    return None
