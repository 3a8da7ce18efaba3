"""Root confinement: opening paths under one directory, kernel-backed.

:class:`Root` holds a directory descriptor of the workspace root. Every path a tool
is given is opened by walking its components from that descriptor, one ``openat``
at a time with ``O_NOFOLLOW`` — never by comparing path strings and then handing
the string to ``open()``, because a string check is only as good as the file
system was at the moment of the check. The walk keeps a stack of open directory
descriptors, so ``..`` means the real parent of the directory actually reached,
and leaving the bottom of the stack (the root) is refused. A symlink met on the
way is read (``readlinkat``) and its target spliced into the walk: relative targets
continue from the link's directory, absolute targets are accepted only when they
name a place under the root (they restart the walk from the root descriptor), and
everything else is refused naming the link and its target. Symlinks that stay
inside the root therefore work, however they are chained (up to 40 of them, the
kernel's own limit).

The walk goes at most :data:`MAX_DEPTH` directories below the root; a deeper path is
refused before anything is opened or made, so ``write_file`` never creates a chain of
directories it will then refuse (a symlink leading deeper is refused when the walk gets
there). The stack holds descriptors for its deepest few directories only
(:mod:`nacelle.toolsets.dir_stack`), so a long path costs a handful of descriptors,
never one per component.

Because each step is a separate ``openat`` with ``O_NOFOLLOW``, a symlink swapped
in between a check and a use makes the open fail (``ELOOP``) rather than follow
it; the opener then starts over from the root (a few times, then refuses). This is
the user-space form of ``openat2(RESOLVE_BENEATH)``; Python has no binding for
that system call and the walk works on every POSIX kernel. A platform without
``dir_fd`` support (Windows) is refused when a :class:`Root` is made.

What this does not stop: a hard link or a bind mount placed inside the root by
someone else refers to the outside file itself, and nothing in a path says so.
Writes are safe from hard links (they replace the directory entry, see
:func:`replace_file`); reads are not. The host decides what the root holds.

Outer ring: imports the standard library, ``nacelle.errors`` and the sibling
``dir_stack``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Dict, Iterator, List, Optional, Tuple

from ..errors import ConfigError, NacelleError
from .dir_stack import DirStack, deepest

if TYPE_CHECKING:
    from ..context import ToolContext

__all__ = [
    "ConfinedTool", "PathError", "PathRefused", "Root", "describe_os_error", "kind_of",
    "open_regular_in", "replace_file",
]

MAX_SYMLINKS = 40
# Well under what PATH_MAX (4096 bytes) allows ("a/" repeated 2048 times), and as
# deep as search_content and find_files walk.
MAX_DEPTH = 256
# A file swapped under us again and again is either an attack or a busy tree;
# either way a handful of fresh walks is enough to tell.
MAX_RACE_RETRIES = 8

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
# O_PATH (Linux) opens a directory for traversal without needing read permission;
# elsewhere a read-only descriptor serves as well.
_WALK_FLAGS = (getattr(os, "O_PATH", 0) or os.O_RDONLY) | _DIRECTORY | _NOFOLLOW | _CLOEXEC
LIST_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _NOCTTY | _CLOEXEC


class PathError(NacelleError):
    """A path cannot be used: it does not exist, is not a directory, is the wrong
    kind of file. The message names the path and says why, for the model to read."""


class PathRefused(PathError):
    """A path would leave the root, or cannot be opened safely; the message names
    the path and says why."""


def kind_of(mode: int) -> str:
    """A short human name for a file type, as the model reads it."""
    if stat.S_ISREG(mode):
        return "regular file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "special file"


def describe_os_error(path: str, err: OSError) -> str:
    """What went wrong with ``path``, in words the model can act on."""
    reasons = {
        errno.ENOENT: "no such file or directory",
        errno.ENOTDIR: "a component of the path is not a directory",
        errno.EISDIR: "is a directory",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENAMETOOLONG: "name too long",
        errno.ENOSPC: "no space left on device",
        errno.EROFS: "read-only file system",
        errno.EEXIST: "already exists",
    }
    reason = reasons.get(err.errno or 0) or err.strerror or str(err)
    return f"{path!r}: {reason}"


def _parts(text: str, origin: str) -> List[Tuple[str, str]]:
    return [(p, origin) for p in text.split("/") if p not in ("", ".")]


def _too_deep(path: str) -> PathRefused:
    shown = path if len(path) <= 120 else path[:120] + "…"
    return PathRefused(f"refused {shown!r}: it is more than {MAX_DEPTH} directories deep")


class Root:
    """A directory descriptor of the root, and the walk that stays beneath it.

    The descriptor is shared by every tool of one ``LocalTools`` and may be used
    from several threads at once; :meth:`close` waits for no one but closes the
    descriptor only when the last user has let go, so a descriptor number is
    never reused under a running call. Pickling keeps the path only: the copy
    opens its own descriptor on first use.
    """

    def __init__(self, path: "os.PathLike[str] | str") -> None:
        if os.open not in os.supports_dir_fd or not _NOFOLLOW or not _DIRECTORY:
            raise ConfigError(
                "local tools need directory descriptors (openat with O_NOFOLLOW), "
                "which this platform lacks")
        given = os.path.abspath(os.fspath(path))
        self.path = os.path.realpath(given)
        self._aliases = tuple(dict.fromkeys((self.path, given)))
        self._lock = threading.Lock()
        self._users = 0
        self._closed = False
        self._fd: Optional[int] = self._open()

    def __repr__(self) -> str:
        return f"Root({self.path!r}{', closed' if self._closed else ''})"

    def __getstate__(self) -> Dict[str, Any]:
        return {"path": self.path, "aliases": self._aliases, "closed": self._closed}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.path = state["path"]
        self._aliases = state["aliases"]
        self._closed = state["closed"]
        self._lock = threading.Lock()
        self._users = 0
        self._fd = None

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except FileNotFoundError:
            raise ConfigError(f"root {self.path!r} does not exist") from None
        except NotADirectoryError:
            raise ConfigError(f"root {self.path!r} is not a directory") from None
        except OSError as err:
            raise ConfigError(f"cannot open root {self.path!r}: {err.strerror}") from None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._users == 0:
                self._release_fd()

    def _release_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @contextlib.contextmanager
    def descriptor(self) -> Iterator[int]:
        """The root's descriptor, held open for the duration of the block."""
        with self._lock:
            if self._closed:
                raise ValueError(f"the local tools for {self.path} were closed")
            if self._fd is None:
                self._fd = self._open()
            self._users += 1
            fd = self._fd
        try:
            yield fd
        finally:
            with self._lock:
                self._users -= 1
                if self._closed and self._users == 0:
                    self._release_fd()

    def relative(self, path: str) -> Optional[str]:
        """``path`` as a path relative to the root, or None when it is absolute and
        outside. Only used to translate absolute names; the walk does the guarding."""
        if not path.startswith("/"):
            return path
        for base in self._aliases:
            if path == base:
                return "."
            prefix = base.rstrip("/") + "/"
            if path.startswith(prefix):
                return path[len(prefix):]
        return None

    # -- the walk ------------------------------------------------------------------

    def locate(self, root_fd: int, path: str, *, make_parents: bool = False) -> Tuple[int, str]:
        """Walk ``path`` from ``root_fd`` and return ``(dir_fd, name)``.

        ``dir_fd`` is a new descriptor (the caller closes it) of the real directory
        holding the final entry; ``name`` is that entry's name, which at the time of
        the check was not a symlink (it may not exist). ``name`` is ``""`` when the
        path names a directory itself (``.``, ``a/..``, a link to a directory's
        parent). Raises :class:`PathRefused` for anything that would leave the root,
        :class:`PathError` for a missing or non-directory component, and
        ``OSError`` for anything else the system refuses.
        """
        if "\0" in path:
            raise PathRefused(f"refused {path!r}: the path contains a NUL character")
        rel = self.relative(path)
        if rel is None:
            raise PathRefused(
                f"refused {path!r}: absolute path outside the root ({self.path}); "
                "paths are relative to the root")
        parts: Deque[Tuple[str, str]] = deque(_parts(rel, ""))
        if deepest([name for name, _ in parts][:-1]) > MAX_DEPTH:  # the last is not entered
            raise _too_deep(path)
        stack = DirStack(root_fd, _WALK_FLAGS)
        links = 0
        try:
            while parts:
                name, origin = parts.popleft()
                if name == "..":
                    if not stack.names:
                        why = (f"{origin} leads out of the root" if origin
                               else "'..' would leave the root")
                        raise PathRefused(f"refused {path!r}: {why}")
                    stack.pop()
                    continue
                where = "/".join(stack.names + [name])
                try:
                    here = stack.top()
                except OSError as err:
                    raise PathRefused(
                        f"refused {path!r}: a directory on the way to {where!r} was moved "
                        f"or replaced while the path was walked ({err.strerror})") from None
                if not parts:
                    try:
                        st = os.stat(name, dir_fd=here, follow_symlinks=False)
                    except FileNotFoundError:
                        return stack.take_top(), name
                    if not stat.S_ISLNK(st.st_mode):
                        return stack.take_top(), name
                else:
                    try:
                        fd = os.open(name, _WALK_FLAGS, dir_fd=here)
                    except FileNotFoundError:
                        if not make_parents:
                            raise PathError(
                                f"{path!r}: directory {where!r} does not exist") from None
                        if len(stack.names) >= MAX_DEPTH:
                            raise _too_deep(path) from None
                        try:
                            os.mkdir(name, 0o777, dir_fd=here)
                        except FileExistsError:
                            pass  # made by someone else meanwhile; the open decides
                        parts.appendleft((name, origin))
                        continue
                    except OSError as err:
                        if err.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                            raise
                        st = os.stat(name, dir_fd=here, follow_symlinks=False)
                        if not stat.S_ISLNK(st.st_mode):
                            raise PathError(
                                f"{path!r}: {where!r} is a {kind_of(st.st_mode)}, "
                                "not a directory") from None
                    else:
                        if len(stack.names) >= MAX_DEPTH:
                            os.close(fd)
                            raise _too_deep(path)
                        stack.push(name, fd)
                        continue
                # ``name`` is a symlink: read it and walk its target instead.
                links += 1
                if links > MAX_SYMLINKS:
                    raise PathRefused(f"refused {path!r}: too many levels of symlinks")
                try:
                    target = os.readlink(name, dir_fd=here)
                except OSError as err:
                    if err.errno not in (errno.ENOENT, errno.EINVAL):
                        raise
                    parts.appendleft((name, origin))  # swapped meanwhile: look again
                    continue
                origin = f"symlink {where!r} (-> {target})"
                if target.startswith("/"):
                    inside = self.relative(target)
                    if inside is None:
                        raise PathRefused(f"refused {path!r}: {origin} points outside the root")
                    stack.to_root()
                    parts.extendleft(reversed(_parts(inside, origin)))
                else:
                    parts.extendleft(reversed(_parts(target, origin)))
            return stack.take_top(), ""
        except BaseException:
            stack.close()
            raise

    # -- opening ---------------------------------------------------------------

    @contextlib.contextmanager
    def entry(self, path: str, *, make_parents: bool = False) -> Iterator[Tuple[int, str]]:
        """``(dir_fd, name)`` for ``path`` (see :meth:`locate`), closed afterwards."""
        with self.descriptor() as root_fd:
            dir_fd, name = self.locate(root_fd, path, make_parents=make_parents)
            try:
                yield dir_fd, name
            finally:
                os.close(dir_fd)

    def open_regular(self, path: str) -> Tuple[int, os.stat_result]:
        """Open a regular file for reading; return its descriptor and status.

        Anything else — a directory, FIFO, socket or device — is refused before it
        is opened, and opened non-blocking besides, so a FIFO swapped in at the last
        moment cannot make the call wait for a writer.
        """
        for _ in range(MAX_RACE_RETRIES):
            with self.entry(path) as (dir_fd, name):
                opened = open_regular_in(dir_fd, name, path)
                if opened is not None:
                    return opened
        raise PathRefused(f"refused {path!r}: it kept changing while being opened")

    def open_directory(self, path: str) -> int:
        """Open a directory for listing; return its descriptor."""
        for _ in range(MAX_RACE_RETRIES):
            with self.entry(path) as (dir_fd, name):
                if not name:
                    return os.open(".", LIST_FLAGS, dir_fd=dir_fd)
                try:
                    return os.open(name, LIST_FLAGS, dir_fd=dir_fd)
                except OSError as err:
                    if err.errno == errno.ELOOP:
                        continue  # became a symlink after the check: walk again
                    if err.errno == errno.ENOTDIR:
                        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                        if stat.S_ISLNK(st.st_mode):
                            continue
                        raise PathError(
                            f"{path!r} is a {kind_of(st.st_mode)}, not a directory") from None
                    if err.errno == errno.ENOENT:
                        raise PathError(f"{path!r}: no such directory") from None
                    raise PathError(describe_os_error(path, err)) from None
        raise PathRefused(f"refused {path!r}: it kept changing while being opened")


def open_regular_in(dir_fd: int, name: str, path: str) -> Optional[Tuple[int, os.stat_result]]:
    """Open ``name`` (an entry found by :meth:`Root.locate`) as a regular file.

    Returns None when the entry changed under us (it became a symlink, or another
    file): the caller walks again.
    """
    if not name:
        raise PathError(f"{path!r} is a directory, not a file")
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise PathError(f"{path!r}: no such file") from None
    if stat.S_ISLNK(before.st_mode):
        return None
    if stat.S_ISDIR(before.st_mode):
        raise PathError(f"{path!r} is a directory, not a file")
    if not stat.S_ISREG(before.st_mode):
        raise PathRefused(
            f"refused {path!r}: it is a {kind_of(before.st_mode)}; only regular files "
            "can be read or edited")
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOENT):
            return None
        raise PathError(describe_os_error(path, err)) from None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def replace_file(dir_fd: int, name: str, data: bytes, mode: Optional[int] = None) -> None:
    """Atomically make ``name`` in ``dir_fd`` hold ``data``.

    The bytes go to a fresh temporary file in the same directory (created with
    ``O_EXCL | O_NOFOLLOW``), are flushed to disk, and the file is renamed over the
    name. A failure at any point before the rename leaves the old file as it was
    and removes the temporary; a process killed mid-write leaves the old file as it
    was and a stray hidden temporary. The rename replaces the directory entry, so
    a symlink or hard link swapped in at ``name`` is replaced, never written
    through. ``mode`` is the permission bits to give the file (the old file's, to
    keep an executable script executable); new files get ``0o666`` less the umask.
    """
    temp = f".{name[:64]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
                 0o666, dir_fd=dir_fd)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


class ConfinedTool:
    """What every tool working under a :class:`Root` shares: the root, the output
    limit, and turning a stray ``OSError`` into a sentence about the path.

    Subclasses set ``name``, ``description``, ``schema``, ``exclusive`` and
    ``read_only`` and implement ``_run``; ``run`` is the :class:`~nacelle.Tool`
    entry point.
    """

    name = ""
    description = ""
    schema: Dict[str, Any] = {}
    exclusive = False
    read_only = True
    destructive = False
    idempotent = True
    open_world = False

    def __init__(self, root: Root, *, max_output: int) -> None:
        self.root = root
        self.max_output = max_output

    def __repr__(self) -> str:
        return f"<{self.name} tool in {self.root.path}>"

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> str:
        path = input.get("path", input.get("pattern", ""))
        try:
            return self._run(input, ctx)
        except OSError as err:
            raise PathError(describe_os_error(str(path), err)) from None

    def _run(self, input: Dict[str, Any], ctx: ToolContext) -> str:  # pragma: no cover - abstract
        raise NotImplementedError
