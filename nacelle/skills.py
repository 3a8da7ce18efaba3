"""Agent Skills: folders holding a ``SKILL.md``, offered to the model by name and
description, their instructions loaded only when the model asks for them.

The format is the Agent Skills specification (https://agentskills.io/specification):
a skill is a directory whose ``SKILL.md`` starts with YAML front matter — ``name``
(at most 64 characters: lowercase letters, digits and single hyphens, neither first
nor last, and the same as the directory's name) and ``description`` (non-empty, at
most 1024 characters), optionally ``license``, ``compatibility`` (at most 500
characters), ``metadata`` (a map of strings) and ``allowed-tools`` (space-separated)
— then a Markdown body, the instructions. Scripts, references and assets may sit
beside it; the body names them by relative path.

- :func:`load` takes skill folders, or folders of skill folders, and reads only the
  front matter of each ``SKILL.md`` (at most :data:`MAX_FRONT_MATTER` bytes); the
  bodies stay on disk. It refuses more than :data:`MAX_SKILLS` skills, two skills of
  one name, and any front matter it cannot read, naming the file and the line.
- :attr:`SkillSet.index` is the text for the system prompt: each skill's name and
  description, and how to load one — the specification's progressive disclosure
  (metadata always, instructions on activation, resources on demand).
- :attr:`SkillSet.tool` is the ``skill`` tool: given a name it returns that skill's
  body (read at that moment, at most :data:`MAX_BODY_BYTES`); given a name and a
  ``path`` it reads a file beside it through the confined file tools
  (:mod:`nacelle.toolsets.confine`, :class:`~nacelle.toolsets.files.ReadFile`), so
  ``..``, absolute paths and symlinks that lead out of the skill's folder are refused.
- ``Agent(..., skills=load("skills/"))`` appends the index to the system prompt and
  adds the tool.

The front matter is read by hand, not by a YAML library (the core takes no YAML
dependency), and the subset read is what skills are written in: ``key: value`` lines
whose value is a plain scalar (a ``#`` after a space starts a comment; indented lines
that follow continue it, joined by spaces), a ``'single'`` or ``"double"`` quoted
string (the double-quoted one with JSON's escapes), or a ``|`` literal or ``>`` folded
block (with an optional ``-`` or ``+``); ``metadata:`` followed by indented
``key: value`` lines of those scalars; blank and ``#`` comment lines. Anything else —
flow collections (``[a, b]``, ``{a: b}``), lists (``- item``), anchors, aliases,
tags, a repeated key — is a :class:`~nacelle.errors.ConfigError` naming the file and
line. Keys the specification does not list (Claude Code adds some) are kept in
:attr:`Skill.extra`, not refused.

Outer ring: imports the standard library, ``errors``, ``tools`` and the confined file
tools of ``toolsets``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Tuple

from .errors import ConfigError
from .toolsets.confine import PathError, Root
from .toolsets.files import ReadFile

__all__ = ["Skill", "SkillSet", "SkillTool", "load"]

#: The file that makes a folder a skill.
SKILL_FILE = "SKILL.md"
#: Skills one SkillSet holds at most: past this the index alone crowds the context.
MAX_SKILLS = 1000
#: Bytes of front matter read from a SKILL.md (the spec's fields fit in a few KiB).
MAX_FRONT_MATTER = 64 * 1024
#: Bytes of a SKILL.md body the tool returns (the spec advises under 500 lines).
MAX_BODY_BYTES = 256 * 1024
#: Characters of a file beside a skill the tool returns in one call.
MAX_FILE_OUTPUT = 100_000
#: Sub-folders of one folder looked at for skills.
MAX_ENTRIES = 10_000

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z")
_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?\Z")
_BLOCK = re.compile(r"([|>])([+-]?)\Z")
_REFUSED_START = ("[", "{", "&", "*", "!", "%", "@", "`", "- ")
_KNOWN = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")


@dataclass(frozen=True)
class Skill:
    """One skill's front matter and folder; its body stays on disk until asked for."""

    name: str
    description: str
    path: str
    license: str = ""
    compatibility: str = ""
    metadata: Tuple[Tuple[str, str], ...] = ()
    allowed_tools: Tuple[str, ...] = ()
    extra: Tuple[Tuple[str, str], ...] = field(default=(), repr=False)

    def body(self) -> str:
        """The Markdown after the front matter, read now (at most :data:`MAX_BODY_BYTES`)."""
        root = Root(self.path)
        try:
            fd, st = root.open_regular(SKILL_FILE)
        finally:
            root.close()
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_BODY_BYTES + MAX_FRONT_MATTER + 1)
        lines = _decode(data, os.path.join(self.path, SKILL_FILE)).splitlines(keepends=True)
        body = "".join(lines[_front_matter_end(lines):]).lstrip("\r\n")
        if st.st_size > MAX_BODY_BYTES + MAX_FRONT_MATTER or \
                len(body.encode("utf-8")) > MAX_BODY_BYTES:
            raise PathError(f"skill {self.name!r}: its SKILL.md body is over "
                            f"{MAX_BODY_BYTES} bytes; split it into files beside it")
        return body


class FrontMatterError(ConfigError):
    """A SKILL.md whose front matter is outside the subset read; names file and line."""


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{where}: not UTF-8 (byte {err.start})") from None


def _front_matter_end(lines: List[str]) -> int:
    """The index of the line after the closing ``---`` (0 when there is none)."""
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        return 0
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() == "---":
            return i + 1
    return 0


def _unquote(value: str, where: str) -> str:
    if value.startswith('"'):
        end = _closing_double(value)
        if end < 0:
            raise FrontMatterError(f"{where}: a double-quoted string must end on its line")
        rest = value[end + 1:].strip()
        if rest and not rest.startswith("#"):
            raise FrontMatterError(f"{where}: text after a quoted string")
        try:
            return str(json.loads(value[:end + 1]))
        except ValueError:
            raise FrontMatterError(f"{where}: an escape in the double-quoted string is "
                                   "not one JSON has") from None
    if value.startswith("'"):
        i = 1
        while True:
            i = value.find("'", i)
            if i < 0:
                raise FrontMatterError(f"{where}: a single-quoted string must end on its line")
            if value[i + 1:i + 2] == "'":
                i += 2
                continue
            break
        rest = value[i + 1:].strip()
        if rest and not rest.startswith("#"):
            raise FrontMatterError(f"{where}: text after a quoted string")
        return value[1:i].replace("''", "'")
    return _plain(value, where)


def _closing_double(value: str) -> int:
    i = 1
    while i < len(value):
        if value[i] == "\\":
            i += 2
            continue
        if value[i] == '"':
            return i
        i += 1
    return -1


def _plain(value: str, where: str) -> str:
    if value.startswith(_REFUSED_START) or value in ("-", "?") or value.startswith("? "):
        raise FrontMatterError(
            f"{where}: {value[:1]!r} starts YAML this reader does not take (flow "
            "collections, lists, anchors, aliases, tags); quote the value")
    cut = re.search(r"[ \t]#", value)
    if cut:
        value = value[:cut.start()]
    if value.endswith(":") or ": " in value:
        raise FrontMatterError(f"{where}: a plain value may not hold ': '; quote the value")
    return value.strip()


def _block(lines: List[Tuple[int, str]], style: str, chomp: str) -> str:
    """A ``|`` or ``>`` block's text from its lines (number, raw text)."""
    texts = [text.rstrip("\r\n") for _, text in lines]
    indents = [len(t) - len(t.lstrip(" ")) for t in texts if t.strip()]
    cut = min(indents) if indents else 0
    body = [t[cut:] if t.strip() else "" for t in texts]
    if style == "|":
        text = "\n".join(body)
    else:
        out: List[str] = []
        for line in body:
            if not line:
                out.append("\n")
            elif out and not out[-1].endswith("\n") and not line.startswith(" "):
                out.append(" " + line)
            else:
                out.append(line)
        text = "".join(out)
    stripped = text.rstrip("\n")
    if chomp == "-":
        return stripped
    if chomp == "+":
        return text + "\n"
    return stripped + "\n" if stripped else ""


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def parse_front_matter(text: str, where: str) -> Dict[str, Any]:
    """The front matter of a SKILL.md's ``text`` as a dict of strings (``metadata``
    a dict of strings), read by the subset the module docstring names."""
    lines = text.splitlines(keepends=True)
    end = _front_matter_end(lines)
    if end == 0:
        raise FrontMatterError(f"{where}:1: a SKILL.md starts with '---', its front "
                               "matter, and a closing '---' line")
    numbered = list(enumerate(lines[1:end - 1], start=2))
    out: Dict[str, Any] = {}
    i = 0
    while i < len(numbered):
        number, raw = numbered[i]
        line = raw.rstrip("\r\n")
        at = f"{where}:{number}"
        if "\t" in line[:_indent(line) + 1] and line.strip():
            raise FrontMatterError(f"{at}: a tab in the indentation (YAML allows spaces only)")
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        if _indent(line):
            raise FrontMatterError(f"{at}: an indented line where a 'key: value' line belongs")
        match = _KEY.match(line.rstrip())
        if not match:
            raise FrontMatterError(f"{at}: not a 'key: value' line")
        key, value = match.group(1), (match.group(2) or "").strip()
        if key in out:
            raise FrontMatterError(f"{at}: {key!r} is given twice")
        i += 1
        nested = []
        while i < len(numbered) and (not numbered[i][1].strip() or _indent(numbered[i][1])):
            nested.append(numbered[i])
            i += 1
        while nested and not nested[-1][1].strip():
            nested.pop()
        block = _BLOCK.match(value)
        if block:
            out[key] = _block(nested, block.group(1), block.group(2))
        elif not value and nested and key == "metadata":
            out[key] = _mapping(nested, where)
        elif not value and nested:
            raise FrontMatterError(f"{where}:{nested[0][0]}: only 'metadata' may hold "
                                   "nested keys")
        else:
            parts = [_unquote(value, at)] if value else []
            for n, more in nested:
                if more.strip() and not more.lstrip().startswith("#"):
                    if value.startswith(("'", '"')):
                        raise FrontMatterError(f"{where}:{n}: a quoted string must end on "
                                               "its line")
                    parts.append(_plain(more.strip(), f"{where}:{n}"))
            out[key] = " ".join(p for p in parts if p)
    return out


def _mapping(lines: List[Tuple[int, str]], where: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    depth = None
    for number, raw in lines:
        line = raw.rstrip("\r\n")
        at = f"{where}:{number}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if depth is None:
            depth = _indent(line)
        if _indent(line) != depth:
            raise FrontMatterError(f"{at}: metadata holds one level of 'key: value' lines")
        match = _KEY.match(line.strip())
        if not match:
            raise FrontMatterError(f"{at}: not a 'key: value' line")
        key = match.group(1)
        if key in out:
            raise FrontMatterError(f"{at}: metadata {key!r} is given twice")
        value = (match.group(2) or "").strip()
        if _BLOCK.match(value):
            raise FrontMatterError(f"{at}: a block value inside metadata is not read; "
                                   "quote the value")
        out[key] = _unquote(value, at) if value else ""
    return out


def _read_front_matter(folder: str) -> str:
    where = os.path.join(folder, SKILL_FILE)
    root = Root(folder)
    try:
        fd, _ = root.open_regular(SKILL_FILE)
    except PathError as err:
        raise ConfigError(f"{where}: {err}") from None
    finally:
        root.close()
    with os.fdopen(fd, "rb") as handle:
        lines: List[bytes] = []
        size = 0
        while True:
            line = handle.readline(MAX_FRONT_MATTER + 1 - size)
            lines.append(line)
            size += len(line)
            if size > MAX_FRONT_MATTER:
                raise ConfigError(f"{where}: the front matter is over {MAX_FRONT_MATTER} "
                                  "bytes or has no closing '---' line")
            if len(lines) > 1 and line.rstrip(b"\r\n").rstrip() == b"---":
                break
            if not line or not line.endswith(b"\n") or (len(lines) == 1 and
                                                         line.rstrip() != b"---"):
                break
    return _decode(b"".join(lines), where)


def _text_field(fields: Dict[str, Any], key: str, where: str, limit: int) -> str:
    value = fields.get(key, "")
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {key} must be a string")
    if len(value) > limit:
        raise ConfigError(f"{where}: {key} is {len(value)} characters; the specification "
                          f"allows {limit}")
    return value


def read_skill(folder: str) -> Skill:
    """The :class:`Skill` of ``folder`` (which holds a SKILL.md), front matter only."""
    folder = os.path.abspath(folder)
    where = os.path.join(folder, SKILL_FILE)
    fields = parse_front_matter(_read_front_matter(folder), where)
    name = _text_field(fields, "name", where, 64)
    if not name or not _NAME.match(name):
        raise ConfigError(f"{where}: name {name!r:.80} must be 1-64 lowercase letters, digits "
                          "and single hyphens, not starting or ending with one")
    if name != os.path.basename(folder):
        raise ConfigError(f"{where}: name {name!r} differs from its folder's name "
                          f"{os.path.basename(folder)!r}; the specification has them match")
    description = _text_field(fields, "description", where, 1024).strip()
    if not description:
        raise ConfigError(f"{where}: description is required (what the skill does and "
                          "when to use it)")
    metadata = fields.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ConfigError(f"{where}: metadata must be indented 'key: value' lines")
    tools = _text_field(fields, "allowed-tools", where, 10_000)
    return Skill(
        name=name, description=description, path=folder,
        license=_text_field(fields, "license", where, 10_000),
        compatibility=_text_field(fields, "compatibility", where, 500),
        metadata=tuple(metadata.items()), allowed_tools=tuple(tools.split()),
        extra=tuple((k, str(v)) for k, v in fields.items() if k not in _KNOWN))


def _folders(path: str) -> Iterator[str]:
    """``path`` itself when it is a skill, else each sub-folder of it that is one."""
    if os.path.isfile(os.path.join(path, SKILL_FILE)):
        yield path
        return
    if not os.path.isdir(path):
        raise ConfigError(f"skills: {path!r} is not a folder")
    try:
        names = sorted(os.listdir(path))
    except OSError as err:
        raise ConfigError(f"skills: cannot list {path!r}: {err.strerror}") from None
    if len(names) > MAX_ENTRIES:
        raise ConfigError(f"skills: {path!r} holds {len(names)} entries; at most "
                          f"{MAX_ENTRIES} are looked at")
    for name in names:
        if not name.startswith(".") and os.path.isfile(os.path.join(path, name, SKILL_FILE)):
            yield os.path.join(path, name)


def load(*paths: "os.PathLike[str] | str") -> "SkillSet":
    """The skills in ``paths``: each a skill folder (holding a SKILL.md) or a folder
    of skill folders. Reads front matter only; see the module docstring."""
    skills: Dict[str, Skill] = {}
    for given in paths:
        path = os.path.abspath(os.path.expanduser(os.fspath(given)))
        for folder in _folders(path):
            skill = read_skill(folder)
            if skill.name in skills:
                raise ConfigError(f"skills: two skills are named {skill.name!r} "
                                  f"({skills[skill.name].path} and {skill.path})")
            skills[skill.name] = skill
            if len(skills) > MAX_SKILLS:
                raise ConfigError(f"skills: more than {MAX_SKILLS} skills; load fewer")
    return SkillSet(tuple(skills.values()))


class SkillSet:
    """Loaded skills: :attr:`index` for the system prompt, :attr:`tool` to load them."""

    def __init__(self, skills: Tuple[Skill, ...] = ()) -> None:
        self.skills = tuple(skills)
        self._by_name = {skill.name: skill for skill in self.skills}
        if len(self._by_name) != len(self.skills):
            raise ConfigError("skills: two skills share a name")
        self.tool = SkillTool(self)

    def __repr__(self) -> str:
        return f"SkillSet({[s.name for s in self.skills]!r})"

    def __len__(self) -> int:
        return len(self.skills)

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills)

    def __getitem__(self, name: str) -> Skill:
        skill = self._by_name.get(name)
        if skill is None:
            raise KeyError(name)
        return skill

    @property
    def index(self) -> str:
        """Each skill's name and description, and how to load one ("" for none)."""
        if not self.skills:
            return ""
        lines = ["# Skills",
                 "These skills hold instructions for particular tasks. Before doing a task "
                 "a skill describes, call the `skill` tool with its name to read its "
                 "instructions; call it with a `path` as well to read a file the "
                 "instructions name."]
        lines += [f"- {s.name}: {' '.join(s.description.split())}" for s in self.skills]
        return "\n".join(lines)


class SkillTool:
    """The ``skill`` tool of a :class:`SkillSet` (see the module docstring)."""

    name = "skill"
    description = (
        "Load a skill listed in the system prompt: with `name` alone, returns the skill's "
        "instructions; with `name` and `path` (relative to the skill's folder), returns "
        "that file's numbered lines, from line `offset` when given.")
    schema: Dict[str, Any] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The skill's name."},
            "path": {"type": "string",
                     "description": "A file in the skill's folder, relative to it."},
            "offset": {"type": "integer", "minimum": 1,
                       "description": "First line of the file to show (1-based)."},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    read_only = True
    destructive = False
    idempotent = True
    open_world = False

    def __init__(self, skills: SkillSet) -> None:
        self._skills = skills

    def __repr__(self) -> str:
        return f"<skill tool: {len(self._skills)} skills>"

    def run(self, input: Dict[str, Any], ctx: Any) -> str:
        name = input.get("name")
        if not isinstance(name, str):
            raise ValueError("name must be a string")
        try:
            skill = self._skills[name]
        except KeyError:
            raise ValueError(f"no skill is named {name[:80]!r}; the skills are listed in "
                             "the system prompt") from None
        path = input.get("path")
        if path is None or path == "":
            return skill.body()
        if not isinstance(path, str):
            raise ValueError("path must be a string")
        if path.startswith("/"):
            raise PathError(f"refused {path[:120]!r}: give a path relative to the skill's folder")
        root = Root(skill.path)
        try:
            read: Dict[str, Any] = {"path": path}
            if input.get("offset") is not None:
                read["offset"] = input["offset"]
            return ReadFile(root, max_output=MAX_FILE_OUTPUT).run(read, ctx)
        finally:
            root.close()
