"""Glob patterns matched without backtracking: time bounded by pattern times path.

Translating a glob to a regular expression is the obvious way to match it, and the
wrong one here: ``*a*a*a*b`` becomes ``[^/]*a[^/]*a[^/]*a[^/]*b``, which tries every
way of placing the ``a`` before it fails — seconds for one 200-character name, hours
for a slightly longer pattern — inside one C call that holds the GIL, so no
cancellation can reach it; ``**/**/**/x`` does the same across directories. So a glob
is matched here with the two-pointer wildcard algorithm of C libraries' ``fnmatch``:
on a mismatch, go back only to the latest star and let it take one more character.
That costs at most the pattern's length times the text's, at each of two levels:
characters within a path component (``*`` is the star), and components within a
path (``**`` is the star, matching any number of whole components; a trailing
``**`` matches one or more, so ``src/**`` matches what is under ``src`` but not
``src`` itself).

Within a component: ``*`` any run of characters, ``?`` one character, ``[abc]``,
``[a-z]`` and ``[!abc]`` (or ``[^abc]``) one character of a set (a backslash is
literal; a bracket that does not open a valid set is literal), ``{a,b}``
alternatives, expanded before matching (at most :data:`MAX_ALTERNATIVES`), and
everything else literal, newlines included.

Outer ring: imports the standard library only.
"""

from __future__ import annotations

import re
from typing import Callable, List, Optional, Pattern, Sequence, Union

__all__ = ["GlobMatcher", "MAX_ALTERNATIVES"]

MAX_ALTERNATIVES = 256

class _Star:
    """The star of either level: any run of characters, or of whole components."""

    def __repr__(self) -> str:
        return "*"


_STAR = _Star()
Token = Union[str, _Star, Pattern[str]]  # a literal character, the star, a character set
_ANY = re.compile(r"[^/]", re.DOTALL)


def _set(body: str, negate: bool) -> Optional[Pattern[str]]:
    try:
        return re.compile(f"[{'^/' if negate else ''}{body.replace(chr(92), chr(92) * 2)}]",
                          re.DOTALL)
    except re.error:
        return None


def _expand(part: str) -> List[List[Token]]:
    """A component's alternatives, each a list of tokens."""
    alternatives: List[List[Token]] = [[]]
    i = 0
    while i < len(part):
        c = part[i]
        choice: Optional[List[List[Token]]] = None
        if c == "*":
            while i + 1 < len(part) and part[i + 1] == "*":
                i += 1
            choice = [[_STAR]]
        elif c == "?":
            choice = [[_ANY]]
        elif c == "[":
            end = part.find("]", i + 2 if part[i + 1:i + 2] in ("!", "^") else i + 1)
            body = part[i + 1:end] if end >= 0 else ""
            negate = body[:1] in ("!", "^")
            found = _set(body[1:] if negate else body, negate) if end >= 0 else None
            if found is not None:
                choice, i = [[found]], end
        elif c == "{":
            end = part.find("}", i)
            if end >= 0:
                choice = [alt for x in part[i + 1:end].split(",") for alt in _expand(x)]
                i = end
        if choice is None or len(choice) == 1:
            for alt in alternatives:  # in place: a long pattern costs its length, not more
                alt.extend(choice[0] if choice else [c])
        else:
            alternatives = [alt + tail for alt in alternatives for tail in choice]
        if len(alternatives) > MAX_ALTERNATIVES:
            raise ValueError(f"glob component {part!r} has more than {MAX_ALTERNATIVES} "
                             "{...} alternatives; split it into several patterns")
        i += 1
    return alternatives


def _wildcard(pattern: Sequence[object], text: Sequence[object], one: Callable[[object, object], bool]) -> bool:
    """Whether ``text`` matches ``pattern`` whose items are ``_STAR`` or matched to one
    item of ``text`` by ``one``: the two-pointer algorithm, no recursion."""
    p = t = 0
    star, mark = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] is _STAR:
            star, mark = p, t
            p += 1
        elif p < len(pattern) and one(pattern[p], text[t]):
            p += 1
            t += 1
        elif star >= 0:
            p, mark = star + 1, mark + 1
            t = mark
        else:
            return False
    while p < len(pattern) and pattern[p] is _STAR:
        p += 1
    return p == len(pattern)


def _one_char(token: object, char: object) -> bool:
    if isinstance(token, str):
        return token == char
    return token.match(char) is not None  # type: ignore[attr-defined]


class _Component:
    """One component of a glob: its alternatives."""

    def __init__(self, part: str) -> None:
        self.alternatives = _expand(part)

    def matches(self, name: str) -> bool:
        return any(_wildcard(alt, name, _one_char) for alt in self.alternatives)


_ANY_COMPONENT = _Component("*")


class GlobMatcher:
    """A glob split into components; :meth:`fullmatch` tells whether a relative path
    (components joined by ``/``) matches it."""

    def __init__(self, parts: List[str]) -> None:
        items: List[object] = []
        for part in parts:
            if part == "**":
                if items and items[-1] is _STAR:
                    continue  # "**/**" means what "**" means
                items.append(_STAR)
            else:
                items.append(_Component(part))
        if items and items[-1] is _STAR:
            items.insert(len(items) - 1, _ANY_COMPONENT)
        self.items = items

    def fullmatch(self, path: str) -> bool:
        return _wildcard(self.items, path.split("/"),
                         lambda item, name: item.matches(name))  # type: ignore[attr-defined]
