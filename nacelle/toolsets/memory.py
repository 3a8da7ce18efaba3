"""Claude's memory tool over a directory: :func:`memory` (``toolsets.memory(root)``).

Anthropic's memory tool (https://platform.claude.com/docs/en/agents-and-tools/tool-use/memory-tool)
is a client tool: the model sends commands, the application runs them on storage it
owns. The model sees a directory ``/memories``; this tool maps it onto ``root`` and
runs the six commands of ``memory_20250818`` with the input shapes the docs give (and
the Anthropic SDK's ``BetaMemoryTool20250818*Command`` types carry):

- ``view`` ``{path, view_range?}``: a directory lists what is in it, two levels deep,
  hidden entries and ``node_modules`` left out, each with its size; a file shows its
  lines numbered (six columns, a tab), ``view_range`` ``[first, last]`` (1-based,
  ``last`` -1 for the end) choosing some;
- ``create`` ``{path, file_text}``: a new file (its folders made); an existing one is
  an error;
- ``str_replace`` ``{path, old_str, new_str}``: ``old_str`` must occur exactly once;
- ``insert`` ``{path, insert_line, insert_text}``: after line ``insert_line`` (0 for
  the top);
- ``delete`` ``{path}``: a file, or a directory with all it holds (never ``/memories``);
- ``rename`` ``{old_path, new_path}``: the destination must not exist.

Results and errors use the docs' wording, so the model reads what it was trained on.

Sent how: on Anthropic the tool goes as the native entry ``{"type":
"memory_20250818", "name": "memory"}`` (its ``anthropic_type``; the Messages wire
reads it), which the model knows without a schema and no beta header any longer
needs; every other backend gets it as a plain tool with the JSON schema below.

Confined: every path is opened through :mod:`nacelle.toolsets.confine` from a
descriptor of ``root`` — ``..`` out of it, paths outside ``/memories``, and symlinks
that lead outside are refused. Safe with concurrent writers: each command that
changes files holds an exclusive ``flock`` on ``root/.memory.lock``
(:func:`nacelle._files.file_lock`), so writers in other threads or processes take
turns and a read-modify-write (``str_replace``, ``insert``) never loses another's
change; files are replaced atomically (written aside, renamed over) and kept
private (0600; ``root`` is made 0700). Files are bounded (:data:`MAX_FILE_BYTES`).

Outer ring: imports the standard library, ``errors``, ``_files`` and the sibling
``confine``.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any, Dict, List, Optional, Tuple

from .._files import file_lock, private_directory
from ..errors import NacelleError
from .confine import LIST_FLAGS, MAX_DEPTH, PathError, PathRefused, Root, replace_file

__all__ = ["MemoryTool", "memory"]

#: The directory the model sees.
PREFIX = "/memories"
#: The lock file writers take turns on (hidden: never listed, never addressable).
LOCK_NAME = ".memory.lock"
#: Bytes a memory file may hold.
MAX_FILE_BYTES = 1024 * 1024
#: Entries one ``view`` of a directory lists.
MAX_LISTED = 1000
#: Characters of a file one ``view`` shows.
MAX_VIEW_CHARS = 100_000

_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")


class MemoryCommandError(NacelleError):
    """A memory command that cannot be done; the message is what the model reads."""


def _size(n: int) -> str:
    if n < 1024:
        return f"{n}"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f}K"
    return f"{n / (1024 * 1024):.1f}M"


def _string(input: Dict[str, Any], key: str) -> str:
    value = input.get(key)
    if not isinstance(value, str):
        raise MemoryCommandError(f"Error: `{key}` must be a string")
    return value


def _relative(path: str) -> str:
    """``path`` (under ``/memories``) relative to the root."""
    if path.rstrip("/") == PREFIX:
        return "."
    if not path.startswith(PREFIX + "/"):
        raise PathRefused(f"refused {path[:120]!r}: memory paths are under {PREFIX}")
    rel = path[len(PREFIX) + 1:]
    if rel.startswith("/"):
        raise PathRefused(f"refused {path[:120]!r}: memory paths are under {PREFIX}")
    if LOCK_NAME in rel.split("/"):
        raise PathRefused(f"refused {path[:120]!r}: {LOCK_NAME} is the tool's own")
    return rel


class MemoryTool:
    """The ``memory`` tool over one directory (see the module docstring)."""

    name = "memory"
    anthropic_type = "memory_20250818"
    description = (
        "Your memory directory, /memories, kept between conversations. Check it before "
        "starting a task; record what you learn as you go. Commands: view {path, "
        "view_range?}, create {path, file_text}, str_replace {path, old_str, new_str}, "
        "insert {path, insert_line, insert_text}, delete {path}, rename {old_path, "
        "new_path}. Paths start with /memories.")
    schema: Dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": list(_COMMANDS)},
            "path": {"type": "string", "description": "A path under /memories."},
            "view_range": {"type": "array", "items": {"type": "integer"},
                           "minItems": 2, "maxItems": 2,
                           "description": "view: first and last line (1-based; -1 for the end)."},
            "file_text": {"type": "string", "description": "create: the file's text."},
            "old_str": {"type": "string", "description": "str_replace: text found once."},
            "new_str": {"type": "string", "description": "str_replace: its replacement."},
            "insert_line": {"type": "integer", "minimum": 0,
                            "description": "insert: the line to insert after (0: the top)."},
            "insert_text": {"type": "string", "description": "insert: the text."},
            "old_path": {"type": "string", "description": "rename: the path now."},
            "new_path": {"type": "string", "description": "rename: the path after."},
        },
        "required": ["command"],
    }
    read_only = False
    destructive = True
    idempotent = False
    open_world = False

    def __init__(self, root: "os.PathLike[str] | str") -> None:
        path = private_directory(os.path.expanduser(os.fspath(root)))
        self.root = Root(path)
        self._lock = os.path.join(self.root.path, LOCK_NAME)

    def __repr__(self) -> str:
        return f"<memory tool in {self.root.path}>"

    def close(self) -> None:
        self.root.close()

    def run(self, input: Dict[str, Any], ctx: Any) -> str:
        command = input.get("command")
        if command not in _COMMANDS:
            raise MemoryCommandError(f"Error: unknown command {command!r:.40}; the commands "
                                     f"are {', '.join(_COMMANDS)}")
        try:
            if command == "view":
                return self._view(_string(input, "path"), input.get("view_range"))
            with file_lock(self._lock):
                return str(getattr(self, "_" + command)(input))
        except OSError as err:
            raise MemoryCommandError(f"Error: {err.strerror or err}") from None

    # -- reading -----------------------------------------------------------------

    def _read(self, path: str) -> Optional[Tuple[str, int]]:
        """The text of the file at ``path`` and its mode bits, or None when missing."""
        rel = _relative(path)
        try:
            fd, st = self.root.open_regular(rel)
        except PathRefused:
            raise
        except PathError:
            return None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise MemoryCommandError(f"Error: {path} is over {MAX_FILE_BYTES} bytes")
        try:
            return data.decode("utf-8"), stat.S_IMODE(st.st_mode)
        except UnicodeDecodeError:
            raise MemoryCommandError(f"Error: {path} is not UTF-8 text") from None

    def _missing(self, path: str) -> MemoryCommandError:
        return MemoryCommandError(
            f"Error: The path {path} does not exist. Please provide a valid path.")

    def _view(self, path: str, view_range: Any) -> str:
        rel = _relative(path)
        with self.root.entry(rel) as (dir_fd, name):
            kind = self._kind(dir_fd, name)
        if kind == "":
            raise self._missing(path)
        if kind == "dir":
            return self._listing(path, rel)
        read = self._read(path)
        if read is None:
            raise self._missing(path)
        lines = read[0].split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        first, last = 1, len(lines)
        if view_range is not None:
            if (not isinstance(view_range, list) or len(view_range) != 2
                    or not all(type(n) is int for n in view_range)):
                raise MemoryCommandError("Error: `view_range` is two line numbers, [first, last]")
            first, last = view_range[0], view_range[1] if view_range[1] != -1 else len(lines)
            if not 1 <= first <= max(len(lines), 1) or last < first:
                raise MemoryCommandError(
                    f"Error: Invalid `view_range`: {view_range}. The file has {len(lines)} lines")
        shown = "\n".join(f"{n:6d}\t{lines[n - 1]}" for n in range(first, min(last, len(lines)) + 1))
        if len(shown) > MAX_VIEW_CHARS:
            shown = shown[:MAX_VIEW_CHARS] + "\n[cut: give view_range to see the rest]"
        return f"Here's the content of {path} with line numbers:\n{shown}"

    @staticmethod
    def _kind(dir_fd: int, name: str) -> str:
        if not name:
            return "dir"
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return ""
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        return "file"

    def _listing(self, path: str, rel: str) -> str:
        fd = self.root.open_directory(rel)
        shown = path.rstrip("/") or PREFIX
        lines: List[str] = []
        try:
            lines.append(f"{_size(os.fstat(fd).st_size)}\t{shown}")
            self._list(fd, shown, 1, lines)
        finally:
            os.close(fd)
        if len(lines) > MAX_LISTED:
            lines = lines[:MAX_LISTED] + [f"[{len(lines) - MAX_LISTED} more entries not shown]"]
        return (f"Here're the files and directories up to 2 levels deep in {shown}, "
                "excluding hidden items and node_modules:\n" + "\n".join(lines))

    def _list(self, fd: int, shown: str, depth: int, lines: List[str]) -> None:
        with os.scandir(fd) as it:
            entries = sorted((e for e in it if not e.name.startswith(".")
                              and e.name != "node_modules"), key=lambda e: e.name)
        for entry in entries:
            if len(lines) > MAX_LISTED:
                return
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            lines.append(f"{_size(st.st_size)}\t{shown}/{entry.name}")
            if depth < 2 and stat.S_ISDIR(st.st_mode):
                try:
                    sub = os.open(entry.name, LIST_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                try:
                    self._list(sub, f"{shown}/{entry.name}", depth + 1, lines)
                finally:
                    os.close(sub)

    # -- changing ----------------------------------------------------------------

    def _write(self, path: str, text: str, mode: int = 0o600) -> None:
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > MAX_FILE_BYTES:
            raise MemoryCommandError(f"Error: a memory file holds at most {MAX_FILE_BYTES} bytes")
        with self.root.entry(_relative(path), make_parents=True) as (dir_fd, name):
            if not name:
                raise MemoryCommandError(f"Error: {path} is a directory")
            replace_file(dir_fd, name, data, mode)

    def _create(self, input: Dict[str, Any]) -> str:
        path, text = _string(input, "path"), _string(input, "file_text")
        with self.root.entry(_relative(path), make_parents=True) as (dir_fd, name):
            if not name or self._kind(dir_fd, name):
                raise MemoryCommandError(f"Error: File {path} already exists")
        self._write(path, text)
        return f"File created successfully at: {path}"

    def _str_replace(self, input: Dict[str, Any]) -> str:
        path, old, new = (_string(input, "path"), _string(input, "old_str"),
                          _string(input, "new_str"))
        read = self._read(path)
        if read is None:
            raise self._missing(path)
        text, mode = read
        count = text.count(old) if old else 0
        if count == 0:
            raise MemoryCommandError(f"No replacement was performed, old_str `{old}` did not "
                                     f"appear verbatim in {path}.")
        if count > 1:
            starts: List[int] = []
            at = text.find(old)
            while at >= 0 and len(starts) < 50:
                starts.append(text.count("\n", 0, at) + 1)
                at = text.find(old, at + 1)
            raise MemoryCommandError(
                f"No replacement was performed. Multiple occurrences of old_str `{old}` in "
                f"lines: {sorted(set(starts))}. Please ensure it is unique")
        self._write(path, text.replace(old, new, 1), mode)
        return "The memory file has been edited."

    def _insert(self, input: Dict[str, Any]) -> str:
        path, text_in = _string(input, "path"), _string(input, "insert_text")
        line = input.get("insert_line")
        read = self._read(path)
        if read is None:
            raise self._missing(path)
        text, mode = read
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if type(line) is not int or not 0 <= line <= len(lines):
            raise MemoryCommandError(
                f"Error: Invalid `insert_line` parameter: {line!r:.20}. It should be within "
                f"the range of lines of the file: [0, {len(lines)}]")
        lines[line:line] = text_in.rstrip("\n").split("\n")
        self._write(path, "\n".join(lines) + "\n", mode)
        return f"The file {path} has been edited."

    def _delete(self, input: Dict[str, Any]) -> str:
        path = _string(input, "path")
        rel = _relative(path)
        if rel == ".":
            raise MemoryCommandError(f"Error: {PREFIX} itself cannot be deleted")
        with self.root.entry(rel) as (dir_fd, name):
            kind = self._kind(dir_fd, name)
            if not kind:
                raise self._missing(path)
            if not name:
                raise MemoryCommandError(f"Error: {path} names {PREFIX} itself")
            if kind == "dir":
                _remove_tree(dir_fd, name, 0)
            else:
                os.unlink(name, dir_fd=dir_fd)
        return f"Successfully deleted {path}"

    def _rename(self, input: Dict[str, Any]) -> str:
        old, new = _string(input, "old_path"), _string(input, "new_path")
        old_rel, new_rel = _relative(old), _relative(new)
        if "." in (old_rel, new_rel):
            raise MemoryCommandError(f"Error: {PREFIX} itself cannot be renamed")
        with self.root.entry(old_rel) as (old_fd, old_name):
            if not old_name or not self._kind(old_fd, old_name):
                raise self._missing(old)
            with self.root.entry(new_rel, make_parents=True) as (new_fd, new_name):
                if not new_name or self._kind(new_fd, new_name):
                    raise MemoryCommandError(f"Error: The destination {new} already exists")
                try:
                    os.rename(old_name, new_name, src_dir_fd=old_fd, dst_dir_fd=new_fd)
                except OSError as err:
                    if err.errno == errno.EINVAL:
                        raise MemoryCommandError(
                            f"Error: {old} cannot be moved inside itself") from None
                    raise
        return f"Successfully renamed {old} to {new}"

    # -- for people ----------------------------------------------------------------

    def files(self) -> List[Tuple[str, int]]:
        """Every file under the root as (its ``/memories`` path, its size), sorted;
        what the CLI's ``/memory`` shows."""
        out: List[Tuple[str, int]] = []
        with self.root.descriptor() as root_fd:
            fd = os.open(".", LIST_FLAGS, dir_fd=root_fd)
            try:
                _walk(fd, PREFIX, out, 0)
            finally:
                os.close(fd)
        return sorted(out)


def _walk(fd: int, shown: str, out: List[Tuple[str, int]], depth: int) -> None:
    with os.scandir(fd) as it:
        entries = [e for e in it if e.name != LOCK_NAME]
    for entry in entries:
        if len(out) >= MAX_LISTED or depth > MAX_DEPTH:
            return
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(entry.name, LIST_FLAGS, dir_fd=fd)
            try:
                _walk(sub, f"{shown}/{entry.name}", out, depth + 1)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            out.append((f"{shown}/{entry.name}", st.st_size))


def _remove_tree(parent_fd: int, name: str, depth: int) -> None:
    """Remove the directory ``name`` in ``parent_fd`` and all it holds, never
    following a symlink (each is removed as the link it is)."""
    if depth > MAX_DEPTH:
        raise PathRefused(f"refused: more than {MAX_DEPTH} directories deep")
    fd = os.open(name, LIST_FLAGS, dir_fd=parent_fd)
    try:
        for entry in os.listdir(fd):
            st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                _remove_tree(fd, entry, depth + 1)
            else:
                os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def memory(root: "os.PathLike[str] | str") -> MemoryTool:
    """The ``memory`` tool over ``root`` (made, 0700, if missing); see the module
    docstring. ``close()`` it when done (it holds a descriptor of ``root``)."""
    return MemoryTool(root)
