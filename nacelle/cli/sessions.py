"""The CLI's saved sessions: where they live, opening one, saving after an answer,
and the ``nacelle sessions`` subcommand (list, show, delete).

Sessions are a :class:`nacelle.sessions.FileStore` in the ``sessions_dir`` setting,
by default ``$XDG_DATA_HOME/nacelle/sessions``, else ``~/.local/share/nacelle/sessions``
(the XDG Base Directory spec calls a relative ``XDG_DATA_HOME`` invalid, so it is
ignored). The interactive history file sits beside them, in the same data directory.

"The latest session" (``--continue``) is the newest file modification time among
the store's sessions, not a pointer file: a save is what makes a session the latest,
the store already writes it atomically, and a pointer could name a session since
deleted. A paused run saves its checkpoint under the session's name and leaves the
saved conversation as it was (a conversation ending in unanswered tool calls could
not be sent again).

What a session holds came from a model and its tools, so every line written of it
(the listing, ``show``, the paused calls' ids and names) goes through
:func:`nacelle.terminal_text.visible`.

Imports the standard library and the core, and ``settings`` and the sibling
``terminal`` when a command runs; writes only to the streams it is given.
"""

from __future__ import annotations

import argparse
import os
from typing import IO, TYPE_CHECKING, Any, List, Optional, Sequence

from ..errors import ConfigError, NacelleError
from ..terminal_text import visible

if TYPE_CHECKING:
    from ..events import Event
    from ..sessions import FileStore

__all__ = ["Session", "after", "data_dir", "open_session", "sessions_command", "sessions_dir"]


def data_dir() -> str:
    """``$XDG_DATA_HOME/nacelle``, else ``~/.local/share/nacelle``."""
    data = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data):
        data = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "nacelle")


def sessions_dir(setting: str) -> str:
    """The sessions directory for the ``sessions_dir`` setting (empty: the default)."""
    if setting:
        return os.path.abspath(os.path.expanduser(setting))
    return os.path.join(data_dir(), "sessions")


class Session:
    """One named conversation in a FileStore: loaded when opened, saved after answers."""

    def __init__(self, store: "FileStore", name: str) -> None:
        from ..sessions import SessionNotFound

        self.store, self.name = store, name
        try:
            self.messages: List[Any] = store.load(name)
        except SessionNotFound:
            self.messages = []


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:  # deleted since it was listed
        return -1


def _store(directory: str) -> "FileStore":
    from ..sessions import FileStore

    try:
        return FileStore(directory)
    except OSError as err:
        raise ConfigError(f"cannot use the sessions directory {directory}: "
                          f"{err.strerror}") from None


def latest(store: "FileStore") -> Optional[str]:
    """The session saved most recently, or None."""
    saved = store.names()
    return max(saved, key=lambda n: (_mtime(store.path(n)), n)) if saved else None


def open_session(directory: str, name: Optional[str], continue_latest: bool) -> Optional[Session]:
    """The session ``--session NAME`` or ``--continue`` means, loaded; None for neither."""
    if name is None and not continue_latest:
        return None
    from ..sessions import SessionNotFound, check_name

    if name is not None:
        check_name(name)  # before a directory is made for a name that cannot be used
    store = _store(directory)
    if name is None:
        name = latest(store)
        if name is None:
            raise SessionNotFound(f"no saved session to continue in {directory}")
    return Session(store, name)


def after(done: "Event", session: Optional[Session], err: IO[str]) -> bool:
    """Keep what a finished run leaves; False when it paused, since its conversation
    ends in calls nobody answered and cannot be sent again."""
    from ..events import Stop

    if done.stop is Stop.PAUSED:
        if session is None or done.checkpoint is None:
            err.write("nacelle: the run paused for approval; its checkpoint is kept only "
                      "with --session NAME\n")
            return False
        session.store.save_checkpoint(session.name, done.checkpoint)
        calls = visible(", ".join(f"{p.id} ({p.name})" for p in done.checkpoint.waiting()))
        err.write(f"nacelle: the run paused for approval of {calls}; decide and go on with: "
                  f"nacelle resume {session.name} (saved in {session.store.directory})\n")
        return False
    if session is not None:
        session.store.save(session.name, done.messages)
        session.messages = list(done.messages)
    return True


def _first_line(text: str, limit: int = 70) -> str:
    line = " ".join(text.split())
    return visible(line if len(line) <= limit else line[:limit - 3] + "...")


def sessions_command(argv: Sequence[str], directory: str, out: IO[str], err: IO[str]) -> int:
    """``nacelle sessions [list | show NAME | delete NAME...]``; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="nacelle sessions",
        description=f"List, show or delete the sessions saved with --session (in {directory}).")
    sub = parser.add_subparsers(dest="action", metavar="{list,show,delete}")
    sub.add_parser("list", help="the saved sessions, the latest first, then the paused "
                   "runs waiting for 'nacelle resume' (the default)")
    show = sub.add_parser("show", help="print a saved conversation")
    show.add_argument("name")
    delete = sub.add_parser("delete", help="delete saved sessions (and their paused runs)")
    delete.add_argument("names", nargs="+", metavar="NAME")
    args = parser.parse_args(argv)
    from ..sessions import SessionNotFound, check_name

    try:
        if not os.path.isdir(directory):  # listing never creates the directory
            if args.action in (None, "list"):
                err.write(f"no saved sessions in {directory}\n")
                return 0
            raise SessionNotFound(f"no saved sessions in {directory}")
        store = _store(directory)
        if args.action in (None, "list"):
            names = sorted(store.names(), key=lambda n: (-_mtime(store.path(n)), n))
            for name in names:
                try:
                    messages = store.load(name)
                    first = next((m.text for m in messages if m.text), "")
                    out.write(f"{name}\t{len(messages)} messages\t{_first_line(first)}\n")
                except NacelleError as exc:
                    out.write(f"{name}\t(unreadable: {_first_line(str(exc))})\n")
            paused = store.checkpoint_names()
            for name in paused:
                try:
                    waiting = f"{len(store.load_checkpoint(name).waiting())} call(s) waiting"
                except NacelleError as exc:
                    waiting = f"unreadable: {_first_line(str(exc))}"
                out.write(f"{name}\tpaused\t{waiting}: nacelle resume {name}\n")
            if not names and not paused:
                err.write(f"no saved sessions in {directory}\n")
            return 0
        if args.action == "show":
            check_name(args.name)
            for message in store.load(args.name):
                role = getattr(message.role, "value", str(message.role))
                calls = "".join(f"\n  -> {call.name}" for call in message.tool_calls)
                text = message.text or ("" if calls else "(no text)")
                out.write(visible(f"[{role}] {text}{calls}") + "\n")
            return 0
        for doomed in args.names:
            check_name(doomed)
            kept = (doomed in store.names(), doomed in store.checkpoint_names())
            if not any(kept):
                raise SessionNotFound(f"no session named {doomed!r} in {directory}")
            if kept[0]:
                store.delete(doomed)
            if kept[1]:
                store.delete_checkpoint(doomed)  # a paused run nobody will resume
            err.write(f"deleted {doomed}{' and its paused run' if kept[1] else ''}\n")
        return 0
    except NacelleError as exc:
        lines = str(exc).strip().splitlines()
        err.write(f"nacelle: error: {type(exc).__name__}: {visible(lines[0]) if lines else ''}\n")
        return 1


def command(argv: Sequence[str]) -> int:
    """``nacelle sessions``, in the directory the settings name."""
    import sys

    from ..settings import resolve
    from .terminal import fail, one_line

    try:
        directory = sessions_dir(resolve().sessions_dir)
    except NacelleError as err:
        return fail(one_line(err))
    return sessions_command(argv, directory, sys.stdout, sys.stderr)
