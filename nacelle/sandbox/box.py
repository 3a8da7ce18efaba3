"""The ``Sandbox`` protocol, the base every box shares, and ``Local``.

A box owns one writable tree, its ``workspace`` (a host directory), and runs command
lines in it: ``run(argv, *, cwd=".", env=None, stdin=None, timeout=None, ctx=None)``
returns a :class:`~nacelle.sandbox.process.Completed`. ``cwd`` is a path inside the
workspace; ``env`` is the whole environment of the command (``None``: ``PATH`` and
``HOME`` only), never the host's; ``stdin`` is bytes or text fed to the command (none:
``/dev/null``); ``timeout`` is seconds from the start (the sooner of it and
``ctx.deadline`` applies); ``ctx.cancelled`` stops it. At the timeout, on cancel and
on :meth:`close`, the command and every process it started are killed. A timeout is
``Completed(timed_out=True)``; a cancel raises :class:`~nacelle.errors.Cancelled`.

:class:`Local` is ``run_command``'s supervisor as a box: bounded, not confined (the
command runs as the host's user, sees the host's files, network and processes). It is
what ``LocalTools`` uses without a ``sandbox=``, for a trusted agent on a developer's
machine; :class:`~nacelle.sandbox.Bubblewrap` is the box for untrusted work.

Outer ring: imports the standard library, ``nacelle.errors`` and the sibling
``process``.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

from ..errors import ConfigError
from .process import Completed, Feed, Sink, argv_list, relative_cwd, supervise

__all__ = ["Box", "Local", "Sandbox"]


@runtime_checkable
class Sandbox(Protocol):
    """What ``LocalTools(sandbox=)``, code mode and ``best_of(sandbox=)`` need of a box."""

    @property
    def workspace(self) -> str: ...

    def run(self, argv: Sequence[str], *, cwd: str = ".", env: Optional[Dict[str, str]] = None,
            stdin: Union[None, bytes, str] = None, timeout: Optional[float] = None,
            ctx: Any = None) -> Completed: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> None: ...


def default_env() -> Dict[str, str]:
    """A command's environment when the caller gives none: a ``PATH`` that finds the
    usual programs and a ``HOME``, nothing of the host's secrets."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"}


def _checked_env(env: Optional[Dict[str, str]]) -> Dict[str, str]:
    if env is None:
        return default_env()
    checked = {}
    for name, value in env.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name \
                or not isinstance(value, str) or "\0" in value:
            raise ConfigError(f"env holds names and values that are strings without NUL "
                              f"(and names without '='); {name!r} is not one")
        checked[name] = value
    return checked


class Box:
    """What every box shares: the workspace, argument checks, running under the
    supervisor, and killing what is still running at :meth:`close`. A subclass says
    how a command line becomes the host's (:meth:`_host_command`)."""

    def __init__(self, root: "os.PathLike[str] | str") -> None:
        path = os.path.realpath(os.fspath(root))
        if not os.path.isdir(path):
            raise ConfigError(f"the workspace {os.fspath(root)!r} is not a directory")
        self._workspace = path
        self._closed = False
        self._running: List[threading.Event] = []
        self._lock = threading.Lock()

    @property
    def workspace(self) -> str:
        """The host path of the box's writable tree."""
        return self._workspace

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"{type(self).__name__}({self._workspace!r}{state})"

    def run(self, argv: Sequence[str], *, cwd: str = ".", env: Optional[Dict[str, str]] = None,
            stdin: Union[None, bytes, str] = None, timeout: Optional[float] = None,
            ctx: Any = None) -> Completed:
        """Run ``argv`` in the box (see the module docstring)."""
        data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        if data is not None and not isinstance(data, bytes):
            raise ConfigError(f"stdin must be bytes or text, not {type(stdin).__name__}")
        return self._start(argv, cwd=cwd, env=env, stdin=data, timeout=timeout, ctx=ctx)

    def _start(self, argv: Sequence[str], *, cwd: str = ".",
               env: Optional[Dict[str, str]] = None, stdin: Union[None, bytes, Feed] = None,
               timeout: Optional[float] = None, ctx: Any = None,
               stdout: Optional[Sink] = None) -> Completed:
        """:meth:`run` with a live ``stdin`` and a ``stdout`` sink (code mode's bridge)."""
        if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
            raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
        items = argv_list(argv)
        where = relative_cwd(cwd)
        host_argv, host_env, host_cwd = self._host_command(items, where, _checked_env(env))
        stop = _Either(getattr(ctx, "cancelled", None))
        with self._lock:
            if self._closed:
                raise ConfigError(f"{self!r} is closed")
            self._running.append(stop)
        try:
            return supervise(host_argv, cwd=host_cwd, env=host_env, stdin=stdin,
                             timeout=timeout, ctx=_Ctx(stop, getattr(ctx, "deadline", None)),
                             stdout=stdout)
        finally:
            with self._lock:
                self._running.remove(stop)

    def _host_command(self, argv: List[str], cwd: str, env: Dict[str, str],
                      ) -> Tuple[List[str], Dict[str, str], str]:
        raise NotImplementedError

    def close(self) -> None:
        """Kill whatever the box is still running (each such ``run`` raises
        ``Cancelled``); later runs are refused."""
        with self._lock:
            self._closed = True
            running = list(self._running)
        for stop in running:
            stop.set()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"], state["_running"]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._running = []

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass


class _Either(threading.Event):
    """Set by :meth:`Box.close`, or when the caller's cancel event is."""

    def __init__(self, other: Optional[threading.Event]) -> None:
        super().__init__()
        self.other = other

    def is_set(self) -> bool:
        return super().is_set() or (self.other is not None and self.other.is_set())


class _Ctx:
    def __init__(self, cancelled: threading.Event, deadline: Optional[float]) -> None:
        self.cancelled = cancelled
        self.deadline = deadline


class Local(Box):
    """The host itself as a box: ``run_command``'s supervisor, bounded, not confined.

    The command runs in the workspace as the host's user with the given environment
    only; at its end, timeout, cancel or :meth:`close` it and everything it started
    (``setsid`` and double-fork survivors included, on Linux) are killed. It can read
    and write whatever the host's user can and reach the network: use
    :class:`~nacelle.sandbox.Bubblewrap` for work you do not trust.
    """

    def _host_command(self, argv: List[str], cwd: str, env: Dict[str, str],
                      ) -> Tuple[List[str], Dict[str, str], str]:
        return argv, env, os.path.join(self._workspace, cwd)
