"""Cases and datasets: what an eval asks the agent, and the JSONL file that holds them.

A :class:`Case` is a name, an input (a prompt, or a conversation of
:class:`~nacelle.messages.Message`), what the answer should be (``expected``, any
value) and the checks its runs must pass. A case without checks but with an
``expected`` value is checked with ``equals(expected)``, as pydantic-evals'
``EqualsExpected`` does; a case with neither passes when its run does not fail.

A :class:`Dataset` is cases with unique names (a report and a comparison find a
case by its name). Its file is JSON Lines, one case per line::

    {"name": "capital", "input": "Capital of France?", "expected": "Paris",
     "checks": [{"contains": "Paris"}, {"max_turns": 2}]}

``input`` is a prompt string or a list of messages in ``nacelle.dumps`` form, so a
conversation round-trips losslessly (images, tool calls and results included).
``checks`` are the built-in checks in their JSON form (``nacelle.evals.checks``: the
key is the check's name); a ``judge`` check names only its rubric, and its backend is
given to :meth:`Dataset.load` (a key does not belong in a data file). A check that is
a Python function has no JSON form: saving a case that holds one is a ConfigError.

Imports the standard library, ``bounded_json``, ``messages`` and ``evals.checks``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .. import bounded_json
from ..errors import ConfigError
from ..messages import Message, dumps, loads, user_text
from .checks import Check, check_from_json, check_to_json, equals

__all__ = ["Case", "Dataset"]

#: the longest line a dataset file may have (a conversation with an image fits)
MAX_LINE = 32 * 1024 * 1024


@dataclass(frozen=True)
class Case:
    """One question of an eval: ``input`` is a prompt or a conversation; ``checks``
    are built-in checks or any callables (see :mod:`nacelle.evals.checks`)."""

    name: str
    input: Union[str, Sequence[Message]]
    expected: Any = None
    checks: Sequence[Any] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a Case needs a non-empty name, got {self.name!r:.60}")
        if isinstance(self.input, Message):
            raise ConfigError(f"case {self.name!r}: input is one Message; give a list of "
                              "them or a prompt str")
        if not isinstance(self.input, str):
            conversation = tuple(self.input)
            if not conversation or not all(isinstance(m, Message) for m in conversation):
                raise ConfigError(f"case {self.name!r}: input must be a prompt str or a "
                                  "non-empty list of Messages")
            object.__setattr__(self, "input", conversation)
        checks = (self.checks,) if callable(self.checks) else tuple(self.checks)
        for check in checks:
            if not callable(check):
                raise ConfigError(f"case {self.name!r}: a check must be callable, got "
                                  f"{type(check).__name__}")
        object.__setattr__(self, "checks", checks)

    @property
    def conversation(self) -> Tuple[Message, ...]:
        """The input as the conversation the agent runs on."""
        if isinstance(self.input, str):
            return (user_text(self.input),)
        return tuple(self.input)

    def effective_checks(self) -> Tuple[Any, ...]:
        """The checks its runs are held to: its own, or ``equals(expected)`` when it has
        none and an expected value."""
        if self.checks:
            return tuple(self.checks)
        return (equals(),) if self.expected is not None else ()

    def to_json(self) -> Dict[str, Any]:
        """The case as one JSON object of a dataset file."""
        line: Dict[str, Any] = {"name": self.name}
        line["input"] = (self.input if isinstance(self.input, str)
                         else json.loads(dumps(self.input)))
        if self.expected is not None:
            line["expected"] = self.expected
        if self.checks:
            line["checks"] = [check_to_json(c, self.name) for c in self.checks]
        return line


class Dataset:
    """Cases with unique names, in order. Iterate it, ``len`` it, index it by position."""

    def __init__(self, cases: Sequence[Case]) -> None:
        self.cases: Tuple[Case, ...] = tuple(cases)
        seen: Dict[str, int] = {}
        for index, case in enumerate(self.cases):
            if not isinstance(case, Case):
                raise ConfigError(f"dataset item {index} is a {type(case).__name__}, not a Case")
            if case.name in seen:
                raise ConfigError(f"two cases are named {case.name!r} (items {seen[case.name]} "
                                  f"and {index}); a report finds a case by its name")
            seen[case.name] = index

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.cases)

    def __getitem__(self, index: int) -> Case:
        return self.cases[index]

    def __repr__(self) -> str:
        return f"<Dataset of {len(self.cases)} cases>"

    def dumps(self) -> str:
        """The dataset as JSON Lines (see the module docstring)."""
        return "".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in self.cases)

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(self.dumps())

    @classmethod
    def loads(cls, text: str, *, judge: Any = None, source: str = "dataset") -> "Dataset":
        """Cases from JSON Lines text; blank lines are skipped. ``judge`` is the backend
        of the file's ``judge`` checks. A bad line is a ConfigError naming it."""
        cases: List[Case] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{source} line {number}"
            if len(line) > MAX_LINE:
                raise ConfigError(f"{where}: longer than {MAX_LINE} characters")
            try:
                value = bounded_json.loads(line, what="case", max_depth=bounded_json.DOCUMENT_DEPTH)
            except ValueError as exc:
                raise ConfigError(f"{where}: not JSON ({exc})") from None
            cases.append(_case(value, where, judge))
        return cls(cases)

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"], *, judge: Any = None) -> "Dataset":
        """Cases from a JSON Lines file (see :meth:`loads`)."""
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{os.fspath(path)} is not UTF-8 text: {exc.reason} at byte "
                              f"{exc.start}") from None
        return cls.loads(text, judge=judge, source=os.fspath(path))


def _case(value: Any, where: str, judge: Optional[Any]) -> Case:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: a case is a JSON object")
    unknown = set(value) - {"name", "input", "expected", "checks"}
    if unknown:
        raise ConfigError(f"{where}: unknown field {sorted(unknown)[0]!r} (a case has name, "
                          "input, expected, checks)")
    raw = value.get("input")
    conversation: Union[str, List[Message]]
    if isinstance(raw, str):
        conversation = raw
    elif isinstance(raw, list):
        try:
            conversation = loads(json.dumps(raw))
        except ValueError as exc:
            raise ConfigError(f"{where}: input: {exc}") from None
    else:
        raise ConfigError(f"{where}: input must be a prompt string or a list of messages")
    raw_checks = value.get("checks", [])
    if not isinstance(raw_checks, list):
        raise ConfigError(f"{where}: checks must be a list")
    checks: List[Check] = [check_from_json(c, f"{where} checks[{i}]", judge)
                           for i, c in enumerate(raw_checks)]
    try:
        return Case(value.get("name"), conversation, value.get("expected"), checks)  # type: ignore[arg-type]
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
