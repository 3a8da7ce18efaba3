"""Conversations saved by name: on disk (:class:`FileStore`) or in memory (:class:`MemoryStore`).

``FileStore(directory)`` keeps one file per conversation, ``<name>.json``, holding
:func:`nacelle.dumps` of its messages, and one per paused run,
``<name>.checkpoint.json``, holding :meth:`Checkpoint.dumps` (signed when given a
key: give one, since a file on disk can be edited). A conversation and a checkpoint
may share a name, so a run that paused keeps both. :meth:`FileStore.take_checkpoint`
loads and removes a checkpoint in one locked step, so a paused run is resumed at most
once however many processes try. What the store promises, and how:

- **A write is all or nothing.** The text goes to a temporary file in the same
  directory, is fsynced, renamed over the old file (``os.replace``, atomic on POSIX
  and Windows), and the directory is fsynced so the rename survives a power cut. A
  writer killed at any point leaves the old file or the new one, never half of one;
  at worst a ``.tmp-*`` file is left behind, which :meth:`FileStore.names`
  ignores. (The writer and the lock are :mod:`nacelle._files`, shared with every
  private file nacelle keeps.)
- **Private.** The directory is created 0700 and every file is 0600, whatever the
  umask: a conversation holds whatever the user and the tools said. An existing
  directory is used as it is (the store does not change the permissions of a
  directory it did not make).
- **Names cannot escape.** A name is 1–128 of ``A-Z a-z 0-9 _ -``, starting with a
  letter or digit: no separators, no ``..``, no dotfiles, no dots at all (so a name
  never collides with the store's own files). Anything else is a ``ConfigError``.
- **A file that cannot be read is an error, not an empty conversation.**
  :class:`CorruptSession` names the file and why; the store never deletes or
  replaces it on its own, so nothing is lost before someone looks.
- **Writers in several processes take turns.** Every write and delete holds an
  exclusive ``fcntl.flock`` on the directory's ``.lock`` file. On a system without
  ``fcntl`` (Windows) writes are not serialised, but each is still atomic: two
  concurrent writers of one name leave one whole file, the last rename's.

:class:`MemoryStore` keeps the same interface in a dict, for one process's life (a
server's default store, tests): it keeps the same text a file would hold, so what it
gives back is a copy, a checkpoint's signature is checked the same way, a name follows
the same rule, and :meth:`MemoryStore.take_checkpoint` is at most once under its lock.

Held to the core's rules: imports the standard library, ``_files``, ``checkpoint``,
``errors`` and ``messages``.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from typing import Dict, Iterable, List, Protocol

from ._files import file_lock as file_lock
from ._files import fsync_directory, private_directory, write_atomic
from .checkpoint import Checkpoint
from .errors import CheckpointError, ConfigError, ConversationError, NacelleError
from .messages import Message, dumps, loads

__all__ = ["CorruptSession", "FileStore", "MemoryStore", "SessionError", "SessionNotFound",
           "Store", "file_lock", "write_private"]

# \Z, not $: "$" also matches before a final newline, and "name\n" is no name.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}\Z")
_SUFFIX = ".json"
_CHECKPOINT = ".checkpoint.json"
_LOCK = ".lock"


class SessionError(NacelleError):
    """A session store could not do what was asked."""


class SessionNotFound(SessionError, LookupError):
    """No session is saved under that name."""


class CorruptSession(SessionError):
    """A saved file exists but cannot be read; it is left as it is."""


def check_name(name: str) -> str:
    """``name`` if it is a safe session name; ConfigError otherwise."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ConfigError(
            f"session name {name!r} must be 1-128 letters, digits, '_' or '-', "
            "starting with a letter or digit")
    return name


class FileStore:
    """Named conversations in one private directory, written atomically."""

    def __init__(self, directory: "os.PathLike[str] | str") -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        if not os.path.isdir(self.directory):
            private_directory(self.directory)

    def __repr__(self) -> str:
        return f"FileStore({self.directory!r})"

    def path(self, name: str) -> str:
        """The file a conversation is saved in."""
        return os.path.join(self.directory, check_name(name) + _SUFFIX)

    def save(self, name: str, messages: Iterable[Message]) -> None:
        """Save ``messages`` under ``name``, replacing what was there, all at once."""
        self._write(self.path(name), dumps(list(messages)))

    def load(self, name: str) -> List[Message]:
        """The messages saved under ``name``.

        Raises SessionNotFound when there are none, CorruptSession when the file
        cannot be read.
        """
        path = self.path(name)
        text = self._read(name, path)
        try:
            return loads(text)
        except ConversationError as exc:
            raise CorruptSession(f"session {name!r} ({path}) cannot be read: {exc}") from None

    def save_checkpoint(self, name: str, checkpoint: Checkpoint, *,
                        key: "str | bytes | None" = None) -> None:
        """Save a paused run's checkpoint under ``name`` (signed with ``key`` if given)."""
        self._write(self._checkpoint_path(name), checkpoint.dumps(key))

    def load_checkpoint(self, name: str, *, key: "str | bytes | None" = None) -> Checkpoint:
        """The checkpoint saved under ``name``; with ``key``, its signature must match.

        A file that cannot be read, or whose signature does not match, raises
        CheckpointError naming the file (kept a CheckpointError: a tampered checkpoint
        is a security event, not a damaged file).
        """
        path = self._checkpoint_path(name)
        text = self._read(name, path)
        try:
            return Checkpoint.loads(text, key)
        except CheckpointError as exc:
            raise CheckpointError(f"checkpoint {name!r} ({path}): {exc}") from None

    def take_checkpoint(self, name: str, *, key: "str | bytes | None" = None) -> Checkpoint:
        """Load the checkpoint saved under ``name`` and remove it, as one step.

        This is how a paused run is resumed at most once: two processes that take the
        same checkpoint at the same time hold the store's lock in turn, so one gets it
        and the other SessionNotFound — never both, which would run the approved calls
        twice. A checkpoint that cannot be read or whose signature does not match
        raises as :meth:`load_checkpoint` does and is left in place.
        """
        path = self._checkpoint_path(name)
        with self._locked():
            text = self._read(name, path)
            try:
                checkpoint = Checkpoint.loads(text, key)
            except CheckpointError as exc:
                raise CheckpointError(f"checkpoint {name!r} ({path}): {exc}") from None
            os.remove(path)
            fsync_directory(self.directory)
        return checkpoint

    def delete_checkpoint(self, name: str) -> None:
        """Remove the checkpoint saved under ``name`` (once resumed); SessionNotFound if none."""
        self._remove(name, self._checkpoint_path(name))

    def _checkpoint_path(self, name: str) -> str:
        return os.path.join(self.directory, check_name(name) + _CHECKPOINT)

    def names(self) -> List[str]:
        """The saved conversations' names, sorted."""
        return self._names(_SUFFIX)

    def checkpoint_names(self) -> List[str]:
        """The names paused runs' checkpoints are saved under, sorted."""
        return self._names(_CHECKPOINT)

    def _names(self, suffix: str) -> List[str]:
        # A checkpoint's file also ends in .json, but "name.checkpoint" is no name.
        found = [entry[:-len(suffix)] for entry in os.listdir(self.directory)
                 if entry.endswith(suffix) and NAME_PATTERN.match(entry[:-len(suffix)])]
        return sorted(found)

    def delete(self, name: str) -> None:
        """Remove the conversation saved under ``name``; SessionNotFound if none."""
        self._remove(name, self.path(name))

    def _remove(self, name: str, path: str) -> None:
        with self._locked():
            try:
                os.remove(path)
            except FileNotFoundError:
                raise SessionNotFound(f"no session named {name!r} in {self.directory}") from None
            fsync_directory(self.directory)

    def _read(self, name: str, path: str) -> str:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            raise SessionNotFound(f"no session named {name!r} in {self.directory}") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptSession(
                f"session {name!r} ({path}) cannot be read: not UTF-8 at byte {exc.start}") from None

    def _write(self, path: str, text: str) -> None:
        with self._locked():
            write_atomic(path, text.encode("utf-8"))

    def _locked(self) -> "contextlib.AbstractContextManager[None]":
        return file_lock(os.path.join(self.directory, _LOCK))


class Store(Protocol):
    """What serving asks of a store (``wsgi_app(..., store=)``): conversations by name,
    and paused runs saved and taken at most once. :class:`FileStore` and
    :class:`MemoryStore` are two; a database-backed one needs only these four."""

    def load(self, name: str) -> List[Message]:
        """The messages saved under ``name``; SessionNotFound (a LookupError) when none."""
        ...

    def save(self, name: str, messages: Iterable[Message]) -> None:
        """Save ``messages`` under ``name``, replacing what was there."""
        ...

    def save_checkpoint(self, name: str, checkpoint: Checkpoint, *,
                        key: "str | bytes | None" = None) -> None:
        """Keep a paused run's checkpoint under ``name``."""
        ...

    def take_checkpoint(self, name: str, *, key: "str | bytes | None" = None) -> Checkpoint:
        """Load and remove the checkpoint under ``name`` in one step (at most once)."""
        ...


class MemoryStore:
    """:class:`FileStore`'s interface, held in this process's memory."""

    def __init__(self) -> None:
        self._sessions: Dict[str, bytes] = {}
        self._checkpoints: Dict[str, bytes] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._sessions)} sessions, {len(self._checkpoints)} checkpoints)"

    def save(self, name: str, messages: Iterable[Message]) -> None:
        """Save ``messages`` under ``name``, replacing what was there."""
        data = dumps(list(messages)).encode("utf-8")  # as a file would
        with self._lock:
            self._sessions[check_name(name)] = data

    def load(self, name: str) -> List[Message]:
        """The messages saved under ``name``; SessionNotFound when there are none."""
        return loads(self._get(self._sessions, name).decode("utf-8"))

    def names(self) -> List[str]:
        with self._lock:
            return sorted(self._sessions)

    def delete(self, name: str) -> None:
        self._pop(self._sessions, name)

    def save_checkpoint(self, name: str, checkpoint: Checkpoint, *,
                        key: "str | bytes | None" = None) -> None:
        data = checkpoint.dumps(key).encode("utf-8")
        with self._lock:
            self._checkpoints[check_name(name)] = data

    def load_checkpoint(self, name: str, *, key: "str | bytes | None" = None) -> Checkpoint:
        return self._checkpoint(name, self._get(self._checkpoints, name), key)

    def take_checkpoint(self, name: str, *, key: "str | bytes | None" = None) -> Checkpoint:
        """Load and remove, as one step: of two takers one gets it, the other
        SessionNotFound. One that cannot be read is left in place, as on disk."""
        with self._lock:
            checkpoint = self._checkpoint(name, self._get(self._checkpoints, name, locked=True), key)
            del self._checkpoints[name]
        return checkpoint

    def delete_checkpoint(self, name: str) -> None:
        self._pop(self._checkpoints, name)

    def checkpoint_names(self) -> List[str]:
        with self._lock:
            return sorted(self._checkpoints)

    def _get(self, table: Dict[str, bytes], name: str, *, locked: bool = False) -> bytes:
        check_name(name)
        with contextlib.nullcontext() if locked else self._lock:
            data = table.get(name)
        if data is None:
            raise SessionNotFound(f"no session named {name!r} in memory")
        return data

    def _pop(self, table: Dict[str, bytes], name: str) -> None:
        check_name(name)
        with self._lock:
            if table.pop(name, None) is None:
                raise SessionNotFound(f"no session named {name!r} in memory")

    @staticmethod
    def _checkpoint(name: str, data: bytes, key: "str | bytes | None") -> Checkpoint:
        try:
            return Checkpoint.loads(data.decode("utf-8"), key)
        except CheckpointError as exc:
            raise CheckpointError(f"checkpoint {name!r}: {exc}") from None


def write_private(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` all at once, readable by its owner only
    (:func:`nacelle._files.write_atomic`, kept here under its old name)."""
    write_atomic(path, data)
