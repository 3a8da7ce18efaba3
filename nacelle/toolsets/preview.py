"""What approving a call of the local tools would do, as text for a person to read
before saying yes: the diff a ``write_file`` or ``edit_file`` would make, the command
a ``run_command`` would run.

Shared by the CLI's approval question (``nacelle.cli.approval``, which makes the text
safe for a terminal) and the chat page's approval card (``nacelle serve`` hands
:meth:`LocalTools.preview <nacelle.toolsets.LocalTools.preview>` to the server, which
sends the text with the paused call).

- ``write_file`` and ``edit_file``: a unified diff (:mod:`difflib`) of the file under
  the root as it is now against what the call would leave, cut past
  :data:`PREVIEW_LINES` lines; a path outside the root is never read for a preview
  (the tool refuses it anyway), and an ``edit_file`` whose ``old_text`` is not in the
  file says so instead (the tool will fail the same way).
- ``run_command``: the command itself, whole, as ``  $ first line`` and each further
  line marked ``  > `` as a shell marks a continuation, so no line of a command can
  pass for the start of another.

It is a preview only: the tool reads the file again when it runs.

Outer ring: imports the standard library only.
"""

from __future__ import annotations

import difflib
import os
from typing import Any, List, Mapping, Optional

__all__ = ["PREVIEW_LINES", "change_preview"]

#: A diff longer than a screen is cut; the question still asks.
PREVIEW_LINES = 60


def _read_text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            return handle.read(4 * 2**20)
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"(cannot read: {err.strerror})"


def _diff(path: str, before: Optional[str], after: str) -> List[str]:
    lines = list(difflib.unified_diff(
        (before or "").splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"a/{path}", tofile=f"b/{path}"))
    return [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            for line in lines]


def change_preview(name: str, input: Mapping[str, Any], root: Optional[str]) -> str:
    """What approving this call would do, as plain text: a diff, a command, or ""
    (for any other tool, or an input the tool would refuse). ``root`` is the local
    tools' folder (None: only commands are shown). Not made safe for a terminal."""
    if name == "run_command" and isinstance(input.get("command"), str):
        first, *more = input["command"].split("\n")
        return "".join([f"  $ {first}\n"] + [f"  > {line}\n" for line in more])
    path = input.get("path")
    if name not in ("write_file", "edit_file") or root is None or not isinstance(path, str):
        return ""
    full = os.path.join(root, path)
    if not os.path.realpath(full).startswith(os.path.realpath(root) + os.sep):
        return ""  # the tool refuses it; no file outside the root is read for a preview
    before = _read_text(full)
    if name == "write_file":
        content = input.get("content")
        if not isinstance(content, str):
            return ""
        lines = _diff(path, before, content)
    else:
        old, new = input.get("old_text"), input.get("new_text")
        if not isinstance(old, str) or not isinstance(new, str):
            return ""
        if before is None or not old or old not in before:
            return f"  (old_text is not in {path}; the edit will fail)\n"
        lines = _diff(path, before, before.replace(old, new, 1))
    if not lines:
        return f"  ({path} would not change)\n"
    if len(lines) > PREVIEW_LINES:
        lines = lines[:PREVIEW_LINES] + [f"... ({len(lines) - PREVIEW_LINES} more lines)\n"]
    return "".join(lines)
