"""Instruction files: the ``AGENTS.md`` and ``CLAUDE.md`` a user and a project keep for
the agents that work with them, found and layered into one text.

:func:`instructions` returns what to append to a system prompt; :func:`instruction_files`
the files it read, in order. The layers, most general first so the most specific is
read last (as Codex and Claude Code layer theirs):

1. the user's: ``AGENTS.md`` then ``CLAUDE.md`` in the user's nacelle config folder,
   ``$XDG_CONFIG_HOME/nacelle`` (default ``~/.config/nacelle``, the XDG base directory
   rule the data folder follows too);
2. the project's: from the repository root (the nearest folder at or above ``cwd``
   holding a ``.git`` folder or file — a worktree's is a file) down to ``cwd``, in each
   folder ``AGENTS.md`` then ``CLAUDE.md``. Outside a repository only ``cwd`` itself is
   read, so a stray ``~/AGENTS.md`` is not picked up from every folder under home.

AGENTS.md is the shared format (https://agents.md: plain Markdown, no required
fields, nearer files take precedence); CLAUDE.md is Claude Code's name for the same
(https://docs.anthropic.com/en/docs/claude-code/memory). A folder whose CLAUDE.md is a
link to its AGENTS.md (a common way to serve both) gives the text once. Each file comes
under a ``# Instructions from PATH`` heading so the model knows where a rule is from.

Bounded: a file over :data:`MAX_FILE_BYTES` is cut there, and once the text reaches
:data:`MAX_TOTAL_BYTES` later files are left out; each cut says so in the text (Codex
cuts its project docs at 32 KiB likewise). Only regular files are read (a FIFO named
AGENTS.md never blocks); text that is not UTF-8 is read with replacement characters.

Outer ring: imports the standard library only; the CLI appends the text to its system
prompt unless given ``--no-instructions``.
"""

from __future__ import annotations

import os
import stat
from typing import List, Mapping, Optional, Tuple

__all__ = ["NAMES", "config_dir", "instruction_files", "instructions", "project_dirs"]

#: The file names read in each folder, in this order.
NAMES = ("AGENTS.md", "CLAUDE.md")
#: Bytes of one file read at most.
MAX_FILE_BYTES = 64 * 1024
#: Bytes of all the files together read at most.
MAX_TOTAL_BYTES = 256 * 1024
#: Folders between the repository root and ``cwd`` looked at, at most.
MAX_DEPTH = 64

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def config_dir(env: Optional[Mapping[str, str]] = None) -> str:
    """The user's nacelle config folder: ``$XDG_CONFIG_HOME/nacelle`` or
    ``~/.config/nacelle`` (it need not exist)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "nacelle")


def project_dirs(cwd: str) -> List[str]:
    """The folders from the repository root down to ``cwd`` (``[cwd]`` outside one)."""
    cwd = os.path.abspath(cwd)
    chain = [cwd]
    here = cwd
    while len(chain) <= MAX_DEPTH:
        if os.path.exists(os.path.join(here, ".git")):
            return list(reversed(chain))
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
        chain.append(here)
    return [cwd]


def instruction_files(cwd: Optional[str] = None, *,
                      env: Optional[Mapping[str, str]] = None) -> List[str]:
    """The instruction files that exist, in the order :func:`instructions` reads them."""
    folders = [config_dir(env)] + project_dirs(cwd if cwd is not None else os.getcwd())
    found: List[str] = []
    seen = set()
    for folder in folders:
        for name in NAMES:
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            found.append(path)
    return found


def _read(path: str, limit: int) -> Tuple[str, bool]:
    """Up to ``limit`` bytes of ``path`` as text, and whether there was more."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return "", False
        data = handle.read(limit + 1)
    cut = len(data) > limit
    return data[:limit].decode("utf-8", "replace"), cut


def instructions(cwd: Optional[str] = None, *,
                 env: Optional[Mapping[str, str]] = None) -> str:
    """The user's and the project's instruction files as one text ("" when there are
    none), layered and bounded as the module docstring says. ``cwd`` defaults to the
    current directory, ``env`` to ``os.environ``."""
    parts: List[str] = []
    used = 0
    files = instruction_files(cwd, env=env)
    for i, path in enumerate(files):
        room = min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - used)
        if room <= 0:
            left = ", ".join(files[i:])
            parts.append(f"[instructions cut: over {MAX_TOTAL_BYTES} bytes; not read: {left}]")
            break
        try:
            text, cut = _read(path, room)
        except OSError:
            continue  # unreadable: as if absent, like a missing file
        if not text.strip():
            continue
        used += len(text.encode("utf-8"))
        note = f"\n[cut: {path} is longer than {room} bytes]" if cut else ""
        parts.append(f"# Instructions from {path}\n\n{text.strip()}{note}")
    return "\n\n".join(parts)
