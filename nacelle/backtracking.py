"""How much work Python's ``re`` can do matching a pattern, bounded from the pattern's
shape before it runs: :func:`search_cost`.

Python's ``re`` backtracks and cannot be interrupted: ``re.search(r"^(a+)+$",
"a" * 40 + "!")`` runs for days holding the GIL, and no timeout, deadline or
cancellation can stop it, since none of them runs until the match returns. A pattern
that came from elsewhere (an MCP server's schema) is therefore matched only when its
worst case, worked out in advance, is small.

The bound is read from the parse tree (``re._parser``; ``sre_parse`` before 3.11),
counting for each piece the ways it can match (*paths*) and the matcher steps spent
over all of them (*steps*), for a string of n characters:

- one character (a literal, a class, ``.``) or an anchor: one path, one step (a
  class one step per item, since a class of ranges may be tested item by item);
- a sequence A B: B runs once per path of A, so paths multiply and
  steps(AB) = steps(A) + paths(A) × steps(B);
- an alternation: every branch is tried, so paths and steps add up;
- a repeat runs at most k = min(max, n + 1) times (each run but one consumes a
  character; the matcher stops a run that consumes none). A body with one path gives
  k − min + 1 paths; a body with p > 1 paths gives up to 1 + p + … + p^k, which is
  exponential: this is catastrophic backtracking (``(a+)+``, ``(a|ab)*``,
  ``(\\w+\\s?)*``), so such a pattern is allowed only on very short strings;
- a lookaround, an atomic group or a possessive repeat: its steps, and one path
  (Python never backtracks into them);
- a backreference: one path, n + 1 steps (it compares up to n characters);
- anything else: no bound at all (an operator this walk does not know).

``re.search`` tries every start, so the bound is (n + 1) × steps, or steps + n for a
pattern that begins with ``^`` (outside MULTILINE) or ``\\A``, where every later start
fails at its first step. Character classes being disjoint (``\\d+\\.\\d+`` cannot
backtrack across the dot) is not noticed, so the bound overstates such patterns by a
factor of n: it is meant to be sound, not tight. Numbers saturate at :data:`CAP`, so
the walk itself is one pass over the tree.

Leaf module: imports the standard library only.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any, List, Tuple

__all__ = ["CAP", "search_cost"]

#: Where counts saturate: far above any budget a caller would set.
CAP = 10 ** 15

# The parser is private and moved in 3.11 (importing sre_parse there warns); its
# operators are compared by name, which every supported version shares.
_parser: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11)
                                       else "sre_parse")
_MULTILINE = 8  # re.MULTILINE, as the parser's flags hold it
_ONE_CHAR = frozenset({"LITERAL", "NOT_LITERAL", "ANY", "CATEGORY", "RANGE",
                       "RANGE_UNI_IGNORE", "NEGATE", "CHARSET", "BIGCHARSET", "AT",
                       "FAILURE", "SUCCESS"})
_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})
_BACKREFS = frozenset({"GROUPREF", "GROUPREF_IGNORE", "GROUPREF_LOC_IGNORE",
                       "GROUPREF_UNI_IGNORE"})


def search_cost(pattern: str, length: int) -> int:
    """An upper bound on the matcher steps of ``re.search(pattern, s)`` for any ``s`` of
    ``length`` characters (saturating at :data:`CAP`), plus the size of the pattern's
    tree, which is what this estimate itself walks.

    Raises :class:`re.error` for a pattern ``re`` would refuse (and RecursionError or
    OverflowError for one its parser cannot hold).
    """
    tree, anchored, size = _parsed(pattern)
    n = max(0, length)
    _, steps = _walk(tree, n)
    starts = _add(steps, n) if anchored else _mul(n + 1, steps)
    return _add(starts, size)


@functools.lru_cache(maxsize=256)
def _parsed(pattern: str) -> Tuple[Any, bool, int]:
    tree = _parser.parse(pattern)
    anchored = not (tree.state.flags & _MULTILINE) and _begins_anchored(tree)
    return tree, anchored, _size(tree)


def _begins_anchored(items: Any) -> bool:
    for op, av in items:
        name = op.name
        if name == "AT":
            return bool(av.name == "AT_BEGINNING_STRING" or av.name == "AT_BEGINNING")
        if name == "SUBPATTERN" and not av[1] & _MULTILINE:
            return _begins_anchored(av[3])
        return False
    return False


def _size(items: Any) -> int:
    count = 0
    for _, av in items:
        count += 1
        for child in _children(av):
            count += _size(child)
    return count


def _children(av: Any) -> List[Any]:
    # The sub-patterns inside an operator's argument, whatever its tuple shape.
    if isinstance(av, _parser.SubPattern):
        return [av]
    if isinstance(av, (tuple, list)):
        found: List[Any] = []
        for part in av:
            found.extend(_children(part))
        return found
    return []


def _add(a: int, b: int) -> int:
    return min(CAP, a + b)


def _mul(a: int, b: int) -> int:
    return min(CAP, a * b)


def _walk(items: Any, n: int) -> Tuple[int, int]:
    """(paths, steps) of a sequence: the later items run once per path before them."""
    pieces = [_piece(op.name, av, n) for op, av in items]
    paths, steps = 1, 0
    for piece_paths, piece_steps in reversed(pieces):
        steps = _add(piece_steps, _mul(piece_paths, steps))
        paths = _mul(paths, piece_paths)
    return paths, steps


def _piece(name: str, av: Any, n: int) -> Tuple[int, int]:
    if name in _ONE_CHAR:
        return 1, 1
    if name == "IN":
        return 1, max(1, len(av))
    if name == "SUBPATTERN":
        return _walk(av[3], n)
    if name == "ATOMIC_GROUP":
        return 1, _walk(av, n)[1]
    if name in ("ASSERT", "ASSERT_NOT"):
        return 1, _walk(av[1], n)[1]
    if name == "BRANCH":
        paths, steps = 0, 0
        for branch in av[1]:
            branch_paths, branch_steps = _walk(branch, n)
            paths, steps = _add(paths, branch_paths), _add(steps, branch_steps)
        return max(1, paths), max(1, steps)
    if name == "GROUPREF_EXISTS":
        yes_paths, yes_steps = _walk(av[1], n)
        no_paths, no_steps = _walk(av[2], n) if av[2] else (1, 1)
        return _add(yes_paths, no_paths), _add(yes_steps, no_steps)
    if name in _BACKREFS:
        return 1, n + 1
    if name in _REPEATS:
        return _repeat(name, av, n)
    return CAP, CAP


def _repeat(name: str, av: Any, n: int) -> Tuple[int, int]:
    low, high, body = av
    most = min(int(high), n + 1)
    body_paths, body_steps = _walk(body, n)
    if body_paths == 1:
        paths = max(1, most - min(int(low), most) + 1)
        # Every run of the body, then one step back per path when a later piece fails.
        steps = _add(_mul(most, body_steps), paths)
    else:
        # Run k starts once per path of the runs before it: 1 + p + … + p^(k-1) times.
        paths, steps, runs = 1, 0, 1
        for _ in range(most):
            steps = _add(steps, _mul(runs, body_steps))
            runs = _mul(runs, body_paths)
            paths = _add(paths, runs)
            if paths >= CAP:
                break
        steps = _add(steps, paths)
    if name == "POSSESSIVE_REPEAT":
        return 1, max(1, steps)
    return paths, max(1, steps)
