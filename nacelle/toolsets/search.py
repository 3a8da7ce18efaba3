"""Listing and searching the tree under the root: list_directory, find_files,
search_content, and the glob and walk they share.

The walk opens every directory with ``openat(O_NOFOLLOW)`` from its parent's
descriptor and never descends into a symlinked directory — not even one that
points inside the root, since following those is how a walk loops or wanders out.
Symlinks still appear in listings and ``find_files`` results (the name is inside
the root; what it points to is another question, answered by read_file).
``search_content`` reads regular files only.

Choices made where the specification is silent:

- Globs follow shell ``globstar`` rules, as ``pathlib`` does: ``*`` and ``?`` stay
  within one path component, ``**`` spans any number of directories, ``[abc]`` and
  ``{a,b}`` work, and dotfiles match; they are matched without backtracking
  (:mod:`nacelle.toolsets.glob_match`), so no pattern can stall the walk. ``find_files('*.py')`` looks at the top level
  only; ``**/*.py`` looks everywhere. ``search_content``'s ``glob`` filter is
  matched against the file name when it has no ``/`` (``*.py`` means Python files at
  any depth, as with ``rg -g``), against the path from the root otherwise.
- Version-control metadata directories (``.git``, ``.hg``, ``.svn``) are skipped by
  wildcard walks, as ripgrep does; a pattern that starts inside one still works.
- Results come in path order. Every cap — matches, walked entries, output size — is
  announced in the result, with a hint to narrow the search.
- Regexes are Python's ``re``, matched per line; ``(?i)`` makes them case-blind.
  They are matched in a child process (:mod:`nacelle.toolsets.matcher`), one per
  search, because ``re`` cannot be interrupted: a pattern that backtracks
  catastrophically would otherwise hold the GIL for hours. Each file gets
  :data:`MATCH_SECONDS`; a file that takes longer stops the search with
  :class:`RegexTimedOut`, whose message carries the matches found before it. The
  call's cancellation and deadline are checked while matching, every 50 ms.

Outer ring: imports the standard library, ``nacelle.errors`` and the sibling
``confine``, ``glob_match``, ``interpreter`` and ``matcher`` modules.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from typing import Any, Dict, Generator, List, Optional, Tuple

from ..errors import NacelleError
from .confine import LIST_FLAGS, READ_FLAGS, ConfinedTool, PathError, PathRefused, kind_of
from .glob_match import GlobMatcher
from .interpreter import helper_command, helper_environment
from .matcher import Matcher

__all__ = ["FindFiles", "ListDirectory", "RegexTimedOut", "SearchContent", "glob_regex"]

MAX_ENTRIES = 1000
MAX_MATCHES = 500
MAX_VISITED = 100_000
MAX_DEPTH = 256
MAX_SEARCH_BYTES = 10 * 2**20
MAX_MATCH_LINE = 300
MATCH_SECONDS = 5.0
SKIP_DIRS = frozenset({".git", ".hg", ".svn"})
_WILD = re.compile(r"[*?\[{]")


class RegexTimedOut(NacelleError):
    """search_content's regular expression ran past its time bound on one file; the
    search was stopped there."""


def glob_regex(parts: List[str]) -> GlobMatcher:
    """What matches relative paths for a glob split into components: an object whose
    ``fullmatch(path)`` says whether ``path`` matches. (It was a compiled regex once;
    :mod:`nacelle.toolsets.glob_match` says why it no longer is.)"""
    return GlobMatcher(parts)


def split_glob(pattern: str, key: str, root: Any) -> List[str]:
    """A glob's components, refusing what would reach outside the root."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise ValueError(f"{key} must be a non-empty glob pattern")
    if "\0" in pattern:
        raise PathRefused(f"refused {pattern!r}: the pattern contains a NUL character")
    rel = root.relative(pattern)
    if rel is None:
        raise PathRefused(f"refused {pattern!r}: absolute pattern outside the root; patterns "
                          "are relative to the root")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathRefused(f"refused {pattern!r}: '..' is not allowed in patterns; they "
                          "match paths under the root only")
    if not parts:
        raise ValueError(f"{key} {pattern!r} names the root itself; add a file pattern "
                         "such as '**/*'")
    return parts


class _Walk:
    """A depth-first walk of one directory descriptor, in name order, that never
    follows a symlink; it counts what it could not open and stops at a budget."""

    def __init__(self, ctx: Any, *, max_depth: Optional[int] = None, skip_vcs: bool = True):
        self.ctx = ctx
        self.max_depth = MAX_DEPTH if max_depth is None else min(max_depth, MAX_DEPTH)
        self.skip_vcs = skip_vcs
        self.visited = 0
        self.unreadable = 0
        self.stopped = False

    def entries(self, fd: int, rel: str, depth: int = 0
                ) -> Generator[Tuple[str, "os.DirEntry[str]", int], None, None]:
        """Yield ``(path, entry, parent_fd)``; ``parent_fd`` is valid until the next item."""
        try:
            with os.scandir(fd) as it:
                found = sorted(it, key=lambda e: e.name)
        except OSError:
            self.unreadable += 1
            return
        for entry in found:
            if self.stopped:
                return
            self.visited += 1
            if self.visited > MAX_VISITED:
                self.stopped = True
                return
            if self.visited % 1000 == 0 and self.ctx is not None:
                self.ctx.check()
            path = f"{rel}/{entry.name}" if rel else entry.name
            yield path, entry, fd
            if depth + 1 >= self.max_depth or not _is_dir(entry):
                continue
            if self.skip_vcs and entry.name in SKIP_DIRS:
                continue
            try:
                sub = os.open(entry.name, LIST_FLAGS, dir_fd=fd)
            except OSError:  # unreadable, or swapped for a symlink since the listing
                self.unreadable += 1
                continue
            try:
                yield from self.entries(sub, path, depth + 1)
            finally:
                os.close(sub)


def _is_dir(entry: "os.DirEntry[str]") -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _cap_lines(lines: List[str], limit: int) -> Tuple[List[str], int]:
    """The lines that fit in ``limit`` characters, and how many were left out."""
    used = 0
    for index, line in enumerate(lines):
        used += len(line) + 1
        if used > limit:
            return lines[:index], len(lines) - index
    return lines, 0


class ListDirectory(ConfinedTool):
    name = "list_directory"
    description = (
        "List a directory under the root (default: the root itself), one entry per line "
        "in name order: directories end with '/', files show their size, symlinks show "
        "where they point. At most 1000 entries are shown; the result says when there "
        "are more. Paths are relative to the root."
    )
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "default": ".",
                     "description": "Directory relative to the root; '.' is the root."},
        },
        "additionalProperties": False,
    }

    def _run(self, input: Dict[str, Any], ctx: Any) -> str:
        path = input.get("path", ".")
        if not isinstance(path, str):
            raise ValueError("path must be a string")
        fd = self.root.open_directory(path or ".")
        try:
            with os.scandir(fd) as it:
                found = sorted(it, key=lambda e: e.name)
            lines = [self._describe(fd, entry) for entry in found[:MAX_ENTRIES]]
        finally:
            os.close(fd)
        if not found:
            return f"({path} is empty)"
        lines, left = _cap_lines(lines, max(100, self.max_output - 200))
        left += max(0, len(found) - MAX_ENTRIES)
        if left:
            lines.append(f"[{left} more entries not shown; {len(found)} in all; use "
                         "find_files with a pattern to narrow]")
        return "\n".join(lines)

    @staticmethod
    def _describe(fd: int, entry: "os.DirEntry[str]") -> str:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            return f"{entry.name} (vanished)"
        if stat.S_ISDIR(st.st_mode):
            return f"{entry.name}/"
        if stat.S_ISREG(st.st_mode):
            return f"{entry.name} ({st.st_size} bytes)"
        if stat.S_ISLNK(st.st_mode):
            try:
                return f"{entry.name} -> {os.readlink(entry.name, dir_fd=fd)}"
            except OSError:
                return f"{entry.name} -> ?"
        return f"{entry.name} [{kind_of(st.st_mode)}]"


class FindFiles(ConfinedTool):
    name = "find_files"
    description = (
        "Find files and directories under the root whose path matches a glob pattern. "
        "'*' and '?' match within one path component, '**' matches any number of "
        "directories, '{a,b}' and '[abc]' work: '**/*.py' finds Python files at any "
        "depth, 'src/*.py' only directly in src. Directories are shown with a trailing "
        "'/'. Symlinked directories are not followed, and .git/.hg/.svn are skipped. "
        "Results are in path order, at most 1000."
    )
    schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob relative to the root, "
                        "e.g. '**/*.md' or 'docs/*.txt'."},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def _run(self, input: Dict[str, Any], ctx: Any) -> str:
        pattern = input.get("pattern")
        parts = split_glob(pattern, "pattern", self.root)  # type: ignore[arg-type]
        regex = glob_regex(parts)
        start, depth = _walk_bounds(parts)
        try:
            fd = self.root.open_directory(start or ".")
        except PathRefused:
            raise
        except PathError:
            return f"no matches for {pattern!r} ({start!r} does not exist or is not a directory)"
        walk = _Walk(ctx, max_depth=depth)
        found: List[str] = []
        more = False
        try:
            with contextlib.closing(walk.entries(fd, start)) as items:
                for path, entry, _ in items:
                    if not regex.fullmatch(path):
                        continue
                    if len(found) == MAX_ENTRIES:
                        more = True
                        break
                    found.append(path + "/" if _is_dir(entry) else path)
        finally:
            os.close(fd)
        lines, left = _cap_lines(found, max(100, self.max_output - 300))
        notes = []
        if more or left:
            notes.append(f"[only the first {len(lines)} matches are shown; there are more: "
                         "narrow the pattern]")
        if walk.stopped:
            notes.append(f"[the search stopped after examining {MAX_VISITED} entries; "
                         "narrow the pattern to a subdirectory]")
        if walk.unreadable:
            notes.append(f"[{walk.unreadable} directories could not be read and were skipped]")
        if not lines:
            return "\n".join([f"no matches for {pattern!r}"] + notes)
        return "\n".join(lines + notes)


def _walk_bounds(parts: List[str]) -> Tuple[str, Optional[int]]:
    """Where a walk for a glob starts (its leading components without wildcards) and
    how deep it goes (None under ``**``), so a pattern never walks more than it names."""
    fixed = 0
    while fixed < len(parts) - 1 and not _WILD.search(parts[fixed]):
        fixed += 1
    return "/".join(parts[:fixed]), None if "**" in parts else len(parts) - fixed


class SearchContent(ConfinedTool):
    name = "search_content"
    description = (
        "Search the text files under the root for lines matching a regular expression "
        "(Python syntax; start with (?i) to ignore case). Each match is shown as "
        "path:line: text. `glob` limits the files: without '/' it matches file names at "
        "any depth ('*.py'), with '/' the path from the root ('src/**/*.py'). Binary "
        "files, files over 10 MB, symlinks and .git/.hg/.svn are skipped; at most 500 "
        "matching lines are shown, and the result says when there were more."
    )
    schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to look for."},
            "glob": {"type": ["string", "null"], "default": None,
                     "description": "Only search files matching this glob."},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def _run(self, input: Dict[str, Any], ctx: Any) -> str:
        pattern = input.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("pattern must be a non-empty regular expression")
        try:
            regex = re.compile(pattern)
        except re.error as err:
            raise ValueError(f"invalid regular expression {pattern!r}: {err}") from None
        glob = input.get("glob")
        start, depth, wanted = "", None, None
        by_name = True
        if glob is not None:
            parts = split_glob(glob, "glob", self.root)
            by_name = len(parts) == 1
            wanted = glob_regex(parts)
            if not by_name:
                start, depth = _walk_bounds(parts)
        try:
            fd = self.root.open_directory(start or ".")
        except PathRefused:
            raise
        except PathError:
            return f"no matches: {start!r} does not exist or is not a directory"
        walk = _Walk(ctx, max_depth=depth)
        matcher = Matcher(helper_command("matcher.py"), helper_environment(), pattern,
                          MAX_MATCH_LINE)
        state = _Search(matcher, ctx, max(100, self.max_output - 400))
        try:
            with contextlib.closing(walk.entries(fd, start)) as items:
                for path, entry, parent in items:
                    name = entry.name if by_name else path
                    if wanted is not None and not wanted.fullmatch(name):
                        continue
                    if not state.search(parent, entry, path):
                        break
        finally:
            matcher.close()
            os.close(fd)
        if state.too_slow:
            found = "\n".join(state.lines) or "(none)"
            raise RegexTimedOut(
                f"the regular expression ran for more than {state.seconds:g} seconds on "
                f"{state.too_slow!r} and the search was stopped there; it probably "
                "backtracks catastrophically (a repeated group inside a repetition, like "
                f"(a+)+): simplify it or narrow the glob. Matches before it stopped:\n{found}")
        return state.report(pattern, walk)


class _Search:
    """The matches found so far, the files skipped, and the budgets."""

    def __init__(self, matcher: Matcher, ctx: Any, budget: int) -> None:
        self.matcher = matcher
        self.ctx = ctx
        self.budget = budget
        self.seconds = MATCH_SECONDS
        self.too_slow = ""  # the file the regex ran out of time on, if it did
        self.lines: List[str] = []
        self.used = 0
        self.full = False
        self.files = 0
        self.skipped = {"binary": 0, "too large": 0, "unreadable": 0}

    def search(self, parent: int, entry: "os.DirEntry[str]", path: str) -> bool:
        """Search one entry; False once the result is full."""
        try:
            if not entry.is_file(follow_symlinks=False):
                return True
            fd = os.open(entry.name, READ_FLAGS, dir_fd=parent)
        except OSError:
            self.skipped["unreadable"] += 1
            return True
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return True
            if st.st_size > MAX_SEARCH_BYTES:
                self.skipped["too large"] += 1
                return True
            try:
                data = f.read(MAX_SEARCH_BYTES)
            except OSError:
                self.skipped["unreadable"] += 1
                return True
        if b"\x00" in data[:8192]:
            self.skipped["binary"] += 1
            return True
        self.files += 1
        found = self.matcher.lines(data, MAX_MATCHES - len(self.lines) + 1, self.seconds,
                                   self.ctx)
        if found is None:
            self.too_slow = path
            return False
        for number, line in found:
            if len(line) > MAX_MATCH_LINE:
                line = line[:MAX_MATCH_LINE] + " …"
            shown = f"{path}:{number}: {line}"
            if len(self.lines) >= MAX_MATCHES or self.used + len(shown) + 1 > self.budget:
                self.full = True
                return False
            self.lines.append(shown)
            self.used += len(shown) + 1
        return True

    def report(self, pattern: str, walk: _Walk) -> str:
        notes = []
        if self.full:
            notes.append(f"[only the first {len(self.lines)} matching lines are shown; there "
                         "are more: narrow the pattern or the glob]")
        if walk.stopped:
            notes.append(f"[the search stopped after examining {MAX_VISITED} entries; "
                         "narrow the glob to a subdirectory]")
        names = {"too large": f"larger than {MAX_SEARCH_BYTES} bytes"}
        skipped = [f"{n} {names.get(why, why)}" for why, n in self.skipped.items() if n]
        if walk.unreadable:
            skipped.append(f"{walk.unreadable} unreadable directories")
        if skipped:
            notes.append(f"[skipped: {', '.join(skipped)}]")
        if not self.lines:
            return "\n".join([f"no matches for {pattern!r} in {self.files} files"] + notes)
        return "\n".join(self.lines + notes)
