"""LocalTools, and the tools that read and change files under its root.

``LocalTools(root)`` is the host's grant: one directory, chosen by the program that
builds the agent. No tool takes a root, working directory or base path argument —
the model names paths *under* the root and cannot move it. Every path goes through
:mod:`nacelle.toolsets.confine`, which opens it by walking from a descriptor of
the root and refuses whatever would lead outside.

Choices made where the specification is silent, after what the popular coding
agents do:

- ``read_file`` shows lines numbered like ``cat -n`` (the number, a tab, the line)
  so the model can come back with ``offset``; lines longer than
  :data:`MAX_LINE_BYTES` are cut, and every cut — long lines, the line limit, the
  output limit — is announced at the end with the ``offset`` to read on from.
  Binary files (a NUL byte in the first 8 KiB) are described, not shown. The file is
  read as a stream, a line at a time and a long line's rest in 1 MiB pieces, so memory
  stays small whatever the file; the call's cancellation and deadline are checked
  every thousand lines and every piece. A line longer than :data:`MAX_LINE_SCAN` ends
  the reading there (finding its end could mean reading gigabytes), and says so.
- ``write_file`` creates missing parent directories (inside the root) and keeps the
  permission bits of the file it replaces.
- ``edit_file`` replaces text that occurs exactly once. If the file uses CRLF line
  endings and ``old_text`` was written with LF (as models usually write it), the
  match is retried with CRLF and the new text is written with CRLF too.
- Writes are atomic: a temporary file in the same directory renamed over the
  target, so a reader never sees half a file and a failed write loses nothing.

Outer ring: imports the standard library, ``nacelle.errors``, ``nacelle.tools`` and
the sibling ``confine`` and ``search`` modules (``shell`` when a tool set that allows
commands is made); never ``requests`` or ``backends``.
"""

from __future__ import annotations

import os
import stat
from typing import Any, BinaryIO, Dict, List, Mapping, Optional, Tuple

from ..errors import ConfigError
from ..tools import Tool
from .confine import (
    ConfinedTool, PathError, PathRefused, Root, kind_of, open_regular_in, replace_file,
)
from .search import FindFiles, ListDirectory, SearchContent

__all__ = ["EditFile", "LocalTools", "ReadFile", "WriteFile"]

MAX_LINE_BYTES = 2000
MAX_LINE_SCAN = 64 * 2**20
SKIP_PIECE = 2**20
CHECK_EVERY_LINES = 1000
MAX_EDIT_BYTES = 10 * 2**20
SNIFF_BYTES = 8192
DEFAULT_LIMIT = 2000

_MAGIC = (
    (b"\x89PNG", "PNG image"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF8", "GIF image"),
    (b"%PDF", "PDF document"), (b"PK\x03\x04", "zip archive"), (b"\x1f\x8b", "gzip data"),
    (b"\x7fELF", "ELF executable"), (b"SQLite format 3\x00", "SQLite database"),
)

_PATH = {"type": "string", "description": "Path relative to the root (absolute paths "
         "are accepted only when they lie under the root)."}


def describe_binary(path: str, size: int, head: bytes) -> str:
    what = next((name for magic, name in _MAGIC if head.startswith(magic)), "")
    return (f"{path!r} is a binary file ({size} bytes{', ' + what if what else ''}); "
            "its content is not shown")


def _positive(input: Dict[str, Any], key: str, default: int) -> int:
    value = input.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} must be a whole number of at least 1, not {value!r}")
    return int(value)


def _text(input: Dict[str, Any], key: str) -> str:
    value = input.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def _read_line(f: BinaryIO, cap: int, ctx: Any) -> Tuple[bytes, int, bool]:
    """One line of at most ``cap`` bytes, how many bytes of it were dropped, and
    whether it ran past :data:`MAX_LINE_SCAN` (its end then was not reached)."""
    line = f.readline(cap)
    dropped = 0
    if len(line) == cap and not line.endswith(b"\n"):
        while dropped < MAX_LINE_SCAN:
            if ctx is not None:
                ctx.check()
            rest = f.readline(SKIP_PIECE)
            if not rest:
                break
            if rest.endswith(b"\n"):
                dropped += len(rest) - 1
                break
            dropped += len(rest)
        else:
            return line, dropped, True
    return line, dropped, False


class ReadFile(ConfinedTool):
    name = "read_file"
    description = (
        "Read a text file under the root. Returns numbered lines (line number, a tab, "
        "the line); the numbers are not part of the file. Reads `limit` lines (default "
        "2000) from line `offset` (default 1); when more remain, the result ends with a "
        "note giving the offset to read on from. Lines over 2000 bytes are cut, binary "
        "files are described instead of shown, and FIFOs or devices are refused. Paths "
        "are relative to the root; symlinks are followed only while they stay inside it."
    )
    schema = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "offset": {"type": "integer", "minimum": 1, "default": 1,
                       "description": "First line to show (1-based)."},
            "limit": {"type": "integer", "minimum": 1, "default": DEFAULT_LIMIT,
                      "description": "How many lines to show at most."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    exclusive = False
    read_only = True
    destructive = False
    idempotent = True
    open_world = False

    def _run(self, input: Dict[str, Any], ctx: Any) -> str:
        path = _text(input, "path")
        offset = _positive(input, "offset", 1)
        limit = _positive(input, "limit", DEFAULT_LIMIT)
        fd, st = self.root.open_regular(path)
        with os.fdopen(fd, "rb") as f:
            head = f.read(SNIFF_BYTES)
            if b"\x00" in head:
                return describe_binary(path, st.st_size, head)
            f.seek(0)
            return self._lines(f, path, offset, limit, ctx)

    def _lines(self, f: BinaryIO, path: str, offset: int, limit: int, ctx: Any) -> str:
        shown: List[str] = []
        used = 0
        number = 0
        cut_lines = 0
        stopped = ""  # why showing stopped early, if it did
        while True:
            raw, dropped, endless = _read_line(f, MAX_LINE_BYTES, ctx)
            if not raw:
                break
            number += 1
            if number % CHECK_EVERY_LINES == 0 and ctx is not None:
                ctx.check()
            if number < offset:
                if endless:
                    raise ValueError(
                        f"offset {offset} lies beyond line {number} of {path!r}, which is "
                        f"longer than {MAX_LINE_SCAN} bytes; read_file cannot read past it "
                        "(search_content, or run_command with tail -c, can)")
                continue
            if number >= offset + limit:
                stopped = "limit"
                break
            text = raw.decode("utf-8", "replace")
            if text.endswith("\n"):
                text = text[:-1]
                if text.endswith("\r"):
                    text = text[:-1]
            if endless:
                text += f" … [more than {MAX_LINE_SCAN} more bytes on this line not shown]"
            elif dropped:
                cut_lines += 1
                text += f" … [{dropped} more bytes on this line not shown]"
            entry = f"{number:>6}\t{text}"
            if used + len(entry) + 1 > self.max_output:
                if not shown:  # a single line larger than the whole budget
                    shown.append(entry[: self.max_output])
                stopped = "output"
                break
            shown.append(entry)
            used += len(entry) + 1
            if endless:
                stopped = "endless"
                break
        if not shown:
            if number == 0 and offset == 1:
                return f"({path} is empty)"
            raise ValueError(
                f"offset {offset} is past the end of {path!r}, which has {number} lines")
        last = offset + len(shown) - 1
        notes = []
        if cut_lines:
            notes.append(f"[{cut_lines} line(s) longer than {MAX_LINE_BYTES} bytes were cut; "
                         "use search_content to find text within them]")
        if stopped == "limit":
            notes.append(f"[showing lines {offset}-{last}; the file continues: call "
                         f"read_file with offset={last + 1} to read on]")
        elif stopped == "endless":
            notes.append(f"[line {last} is longer than {MAX_LINE_SCAN} bytes, so read_file "
                         "stops there; search_content, or run_command with head -c or "
                         "tail -c, can look further]")
        elif stopped == "output":
            notes.append(f"[output limit of {self.max_output} characters reached after "
                         f"line {last}; call read_file with offset={last + 1} to read on]")
        return "\n".join(shown + notes)


def _existing(dir_fd: int, name: str, path: str) -> Optional[os.stat_result]:
    """Status of the entry about to be replaced, or None; refuses what is not a file."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise PathError(f"{path!r} is a directory; write_file writes files")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise PathRefused(f"refused {path!r}: it is a {kind_of(st.st_mode)}; only "
                          "regular files can be written")
    return st


def _encode(text: str, key: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{key} cannot be written as UTF-8: {err.reason} at "
                         f"character {err.start}") from None


class WriteFile(ConfinedTool):
    name = "write_file"
    description = (
        "Create a file under the root, or replace one entirely, with `content` (UTF-8 "
        "text). Missing parent directories are created. The write is atomic: the file "
        "holds either the old or the new content, never a mix. To change part of a "
        "file, prefer edit_file. Paths are relative to the root; writing through a "
        "symlink that leads outside the root is refused."
    )
    schema = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "The file's whole new content."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    exclusive = True
    read_only = False
    destructive = True
    idempotent = True  # the same content written twice leaves the same file
    open_world = False

    def _run(self, input: Dict[str, Any], ctx: Any) -> str:
        path = _text(input, "path")
        data = _encode(_text(input, "content"), "content")
        with self.root.entry(path, make_parents=True) as (dir_fd, name):
            if not name:
                raise PathError(f"{path!r} is a directory; write_file writes files")
            old = _existing(dir_fd, name, path)
            keep = stat.S_IMODE(old.st_mode) if old and stat.S_ISREG(old.st_mode) else None
            replace_file(dir_fd, name, data, keep)
        return f"wrote {len(data)} bytes to {path} ({'replaced' if old else 'new file'})"


class EditFile(ConfinedTool):
    name = "edit_file"
    description = (
        "Replace `old_text` with `new_text` in a UTF-8 text file under the root. "
        "`old_text` must occur exactly once in the file, copied exactly (whitespace and "
        "indentation included, without read_file's line numbers): if it is not found, "
        "read the file again; if it occurs several times, include more surrounding "
        "lines to make it unique. The write is atomic. Files over 10 MB are refused."
    )
    schema = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "old_text": {"type": "string", "description": "Exact text to replace; "
                         "must occur exactly once."},
            "new_text": {"type": "string", "description": "The replacement text."},
        },
        "required": ["path", "old_text", "new_text"],
        "additionalProperties": False,
    }
    exclusive = True
    read_only = False
    destructive = True
    idempotent = False  # a second edit finds the new text, not the old
    open_world = False

    def _run(self, input: Dict[str, Any], ctx: Any) -> str:
        path = _text(input, "path")
        old_text = _text(input, "old_text")
        new_text = _text(input, "new_text")
        if not old_text:
            raise ValueError("old_text is empty; to create or overwrite a file use write_file")
        if old_text == new_text:
            raise ValueError("old_text and new_text are the same; there is nothing to change")
        for _ in range(8):
            with self.root.entry(path) as (dir_fd, name):
                opened = open_regular_in(dir_fd, name, path)
                if opened is None:
                    continue  # changed under us; walk again
                fd, st = opened
                with os.fdopen(fd, "rb") as f:
                    if st.st_size > MAX_EDIT_BYTES:
                        raise ValueError(
                            f"{path!r} is too large to edit ({st.st_size} bytes; the limit "
                            f"is {MAX_EDIT_BYTES}); use write_file or run_command")
                    data = f.read(MAX_EDIT_BYTES + 1)
                text = self._decode(path, data)
                updated, line = self._replace(path, text, old_text, new_text)
                replace_file(dir_fd, name, _encode(updated, "new_text"),
                             stat.S_IMODE(st.st_mode))
                return f"edited {path}: replaced 1 match at line {line}"
        raise PathRefused(f"refused {path!r}: it kept changing while being opened")

    @staticmethod
    def _decode(path: str, data: bytes) -> str:
        if b"\x00" in data[:SNIFF_BYTES]:
            raise ValueError(f"{describe_binary(path, len(data), data)}; edit_file "
                             "edits text files only")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"{path!r} is not valid UTF-8 (byte {err.start}); edit_file "
                             "edits UTF-8 text only, use write_file to replace it") from None

    @staticmethod
    def _replace(path: str, text: str, old: str, new: str) -> Tuple[str, int]:
        count = text.count(old)
        if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
            old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
            count = text.count(old)
        if count == 0:
            raise ValueError(
                f"old_text not found in {path!r}; read the file again and copy the text "
                "exactly, whitespace and indentation included")
        if count > 1:
            raise ValueError(
                f"old_text has {count} matches in {path!r}; include more surrounding "
                "context so that it matches exactly once")
        at = text.index(old)
        return text[:at] + new + text[at + len(old):], text.count("\n", 0, at) + 1


class LocalTools:
    """Files under one root — and commands run in it, when ``allow_bash`` is set.

    ``LocalTools(root)`` opens the root at once (a missing root is a ``ConfigError``
    here, not at the first call) and holds its descriptor until :meth:`close`, or
    the end of a ``with`` block. ``tools()`` gives read_file, write_file, edit_file,
    list_directory, find_files and search_content, plus run_command with
    ``allow_bash=True``; ``read_only()`` gives the four readers. ``max_output``
    bounds every result, in characters. It pickles (an Agent holding its tools
    does): the copy reopens the root by path on first use.

    ``sandbox=`` (a box of :mod:`nacelle.sandbox` whose workspace is the root) runs
    ``run_command`` inside the box — so with ``sandbox.Bubblewrap(root)`` a command
    cannot see the host's environment, processes, other files or network — and
    implies ``allow_bash``; the file tools keep their own kernel-backed confinement on
    the same tree.
    """

    def __init__(
        self,
        root: "os.PathLike[str] | str",
        *,
        allow_bash: bool = False,
        command_timeout: float = 120.0,
        max_output: int = 30_000,
        sandbox: Any = None,
    ) -> None:
        if isinstance(command_timeout, bool) or not isinstance(command_timeout, (int, float)) \
                or not command_timeout > 0:
            raise ConfigError(f"command_timeout must be a positive number of seconds, "
                              f"not {command_timeout!r}")
        if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 100:
            raise ConfigError(f"max_output must be a whole number of at least 100 "
                              f"characters, not {max_output!r}")
        self.root = Root(root)
        self.sandbox = sandbox
        if sandbox is not None:
            workspace = getattr(sandbox, "workspace", None)
            if not isinstance(workspace, str) or not callable(getattr(sandbox, "run", None)):
                raise ConfigError(f"sandbox must be a box of nacelle.sandbox (with workspace "
                                  f"and run), not {sandbox!r}")
            if os.path.realpath(workspace) != os.path.realpath(self.root.path):
                raise ConfigError(f"the sandbox's workspace {workspace!r} is not the root "
                                  f"{self.root.path!r}: the file tools and the commands "
                                  "must work on the same tree")
            allow_bash = True
        self.allow_bash = bool(allow_bash)
        self.command_timeout = float(command_timeout)
        self.max_output = max_output
        self._readers = [cls(self.root, max_output=max_output)
                         for cls in (ReadFile, ListDirectory, FindFiles, SearchContent)]
        self._writers: List[Tool] = [WriteFile(self.root, max_output=max_output),
                                    EditFile(self.root, max_output=max_output)]
        if self.allow_bash:
            from .shell import RunCommand

            self._writers.append(RunCommand(self.root, timeout=self.command_timeout,
                                            max_output=max_output, sandbox=sandbox))

    def __repr__(self) -> str:
        state = ", closed" if self.root.closed else ""
        if self.sandbox is not None:
            state += f", sandbox={self.sandbox!r}"
        return (f"LocalTools({self.root.path!r}, allow_bash={self.allow_bash}, "
                f"command_timeout={self.command_timeout}, max_output={self.max_output}"
                f"{state})")

    def tools(self) -> List[Tool]:
        """Every tool of the set, in a fresh list."""
        first, rest = self._readers[0], self._readers[1:]
        return [first, *self._writers[:2], *rest, *self._writers[2:]]

    def read_only(self) -> List[Tool]:
        """The tools that only read: read_file, list_directory, find_files, search_content."""
        return list(self._readers)

    def preview(self, name: str, input: Mapping[str, Any]) -> str:
        """What approving a call of these tools would do, for a person to read first:
        the diff a write or an edit would make under the root, the command
        ``run_command`` would run, or "" (:mod:`nacelle.toolsets.preview`). Give it
        to the chat server as ``preview=`` to show it in the page's approval cards."""
        from .preview import change_preview

        return change_preview(name, input, self.root.path)

    def close(self) -> None:
        """Close the root's descriptor; calls made afterwards fail with a clear error."""
        self.root.close()

    def __enter__(self) -> "LocalTools":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
