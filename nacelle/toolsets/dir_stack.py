"""The directories a confined walk is in: every name, descriptors for the deepest few.

:class:`DirStack` is :meth:`Root.locate <nacelle.toolsets.confine.Root.locate>`'s
memory of where it is. It records the name of every directory walked through but
holds descriptors only for the deepest :data:`MAX_OPEN_DIRS`, so a path thousands of
components long cannot exhaust the process's descriptors. A ``..`` that climbs above
them reopens the directory it lands in by walking the recorded names down from the
root again, each with the caller's ``O_NOFOLLOW`` flags: the names are plain
directories met on the way, so what is reopened is under the root whatever happened
meanwhile (if the tree was renamed in between, it is the directory now at that
place, and a name replaced by a symlink fails the open). A reopen costs as many
``openat`` calls as the depth, and happens at most once per :data:`MAX_OPEN_DIRS`
levels climbed.

Outer ring: imports the standard library only; ``confine`` turns its ``OSError``
into a refusal naming the path.
"""

from __future__ import annotations

import os
from typing import Iterable, List, Optional

__all__ = ["DirStack", "MAX_OPEN_DIRS", "deepest"]

MAX_OPEN_DIRS = 16


def deepest(names: Iterable[str]) -> int:
    """How many directories below its start a walk through ``names`` reaches."""
    depth = lowest = 0
    for name in names:
        depth = max(0, depth - 1) if name == ".." else depth + 1
        lowest = max(lowest, depth)
    return lowest


class DirStack:
    """The root (a duplicate of ``root_fd``) and the directories entered below it."""

    def __init__(self, root_fd: int, flags: int) -> None:
        self.root_fd = root_fd
        self.flags = flags
        self.names: List[str] = []
        self.fds: List[Optional[int]] = [os.dup(root_fd)]

    def top(self) -> int:
        """The deepest directory's descriptor (owned by the stack); may reopen it."""
        fd = self.fds[-1]
        return self._reopen() if fd is None else fd

    def push(self, name: str, fd: int) -> None:
        """Enter ``name``, already opened as ``fd``; the stack now owns ``fd``."""
        self.names.append(name)
        self.fds.append(fd)
        old = len(self.fds) - 1 - MAX_OPEN_DIRS
        if old >= 0:
            self._close(old)

    def pop(self) -> None:
        self._close(len(self.fds) - 1)
        self.fds.pop()
        self.names.pop()

    def to_root(self) -> None:
        while self.names:
            self.pop()

    def take_top(self) -> int:
        """The deepest directory's descriptor, now the caller's; closes the rest."""
        fd = self.top()
        self.fds[-1] = None
        self.close()
        return fd

    def close(self) -> None:
        for level in range(len(self.fds)):
            self._close(level)

    def _close(self, level: int) -> None:
        fd = self.fds[level]
        if fd is not None:
            self.fds[level] = None
            os.close(fd)

    def _reopen(self) -> int:
        """Reopen the deepest directories by their names, walking from the root."""
        depth = len(self.names)
        keep_from = max(0, depth + 1 - MAX_OPEN_DIRS)
        fd = os.dup(self.root_fd)
        for level, name in enumerate(self.names):  # ``fd`` is the directory at ``level``
            try:
                sub = os.open(name, self.flags, dir_fd=fd)
            except OSError:
                os.close(fd)
                raise
            self._keep(level, fd, keep_from)
            fd = sub
        self._keep(depth, fd, keep_from)
        return self.fds[depth]  # type: ignore[return-value]

    def _keep(self, level: int, fd: int, keep_from: int) -> None:
        if level >= keep_from and self.fds[level] is None:
            self.fds[level] = fd
        else:
            os.close(fd)
