"""The one way nacelle writes a file it keeps: whole or absent, private unless asked
otherwise, and in turn with other processes.

- :func:`write_atomic` replaces a file with new bytes all at once: a temporary file in
  the same directory (``mkstemp``: mode 0600, under a name no other writer can pick),
  fsynced, renamed over the old file (``os.replace``, atomic on POSIX and Windows), and
  the directory fsynced so the rename survives a power cut. A writer killed at any
  point leaves the old file or the new one; a write that fails removes its temporary
  file. ``mode`` other than 0600 is set on the temporary file before the rename (a
  cassette is a file to commit, 0644), so no reader ever sees the file private first.
- :func:`private_directory` makes a directory 0700 whatever the umask (``makedirs``'
  mode is cut by it); a directory that exists already is used as it is.
- :func:`file_lock` holds an exclusive ``flock`` on a lock file (made 0600), so writers
  in several processes take turns; without ``fcntl`` (Windows) nothing is held and
  writes stay atomic but unserialised.

Sessions and checkpoints (``sessions.py``), OAuth tokens (``mcp/auth.py``), recorded
cassettes (``testing/cassette.py``) and the model list cache (``cli/models.py``) all
write through here.

Leaf: imports the standard library only.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Iterator, Optional

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["file_lock", "fsync_directory", "private_directory", "write_atomic"]

PRIVATE = 0o600


def write_atomic(path: str, data: bytes, *, mode: int = PRIVATE) -> None:
    """Replace ``path`` with ``data`` all at once (the module docstring says how);
    the file is ``mode`` (default 0600: readable by its owner only)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode != PRIVATE:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
    fsync_directory(directory)


def private_directory(path: str) -> str:
    """``path``, made with its parents if missing, the last one 0700; returned absolute."""
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # makedirs' mode is cut by the umask
    return path


@contextlib.contextmanager
def file_lock(path: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the file ``path`` (made 0600 if missing) while
    the block runs."""
    if fcntl is None:  # pragma: no cover - not POSIX: atomic, not serialised
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def fsync_directory(directory: str) -> None:
    """Make a rename or a removal in ``directory`` durable. Without this the change
    may live only in the page cache; some systems (Windows) cannot open a directory,
    and there it is as durable as it gets."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    fd: Optional[int] = None
    try:
        fd = os.open(directory, flags)
        os.fsync(fd)
    except OSError:
        pass
    finally:
        if fd is not None:
            os.close(fd)
