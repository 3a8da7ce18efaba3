"""Checks: what a run's Result must satisfy, each saying why when it does not.

A check is any callable. It is called with the run's
:class:`~nacelle.agent.Result` and, when it takes two arguments, the
:class:`~nacelle.evals.Case` as well. What it returns decides:

- an :class:`Outcome` — used as it is (``passed`` and its ``reason``);
- ``True`` or ``None`` — passed (``None`` so a function that only ``assert``\\ s, as a
  pytest test does, passes by returning);
- ``False`` — failed, "returned False";
- a ``(passed, reason)`` pair.

Raising ``AssertionError`` fails with its message; any other exception fails with
its type and message (a broken check fails its case; it does not stop the eval).

The built-in checks are :class:`Check` values (their ``repr`` is how they were made,
which is how a report names them) and have a JSON form for dataset files, the key
being the check's name: ``{"equals": v}``, ``{"contains": "s"}``, ``{"matches":
schema}``, ``{"called": "tool", "input": {...}}``, ``{"not_called": "tool"}``,
``{"judge": "rubric"}``, ``{"max_cost": 0.01}``, ``{"max_turns": 3}``.

What a check looks at: the structured ``output`` when the run has one (an Agent made
with ``output=``), else the final ``text``. ``equals`` compares a dataclass or
pydantic output also by its JSON form, so an expected value read from a dataset file
(a dict) equals the typed answer it describes.

``judge(rubric, backend)`` asks a model: an Agent on ``backend`` whose structured
output is a :class:`Verdict`, so the answer is a parsed decision with its reasoning,
never a sentence to search for "yes" (the LLM-as-a-judge pattern; see Zheng et al.,
"Judging LLM-as-a-Judge", https://arxiv.org/abs/2306.05685). ``reasoning`` comes
first in the schema so the model writes its reasons before its decision. Its dollars
are the Outcome's ``cost``, reported apart from the agent's.

Imports the standard library, ``jsonschema`` (a core dependency) and ``validation``
inside ``matches``, and nacelle's core.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .. import bounded_json
from ..errors import ConfigError
from ..messages import Message, Text, ToolCall, ToolResult, user_text

__all__ = ["Check", "Outcome", "Verdict", "called", "contains", "equals", "judge", "matches",
           "max_cost", "max_turns", "not_called", "run_check"]

_MISSING: Any = object()


@dataclass(frozen=True)
class Outcome:
    """What one check said of one run: ``passed``, and ``reason`` (why it failed, or
    the judge's reasoning); ``cost`` the dollars the check itself spent (a judge)."""

    passed: bool
    reason: str = ""
    cost: float = 0.0


@dataclass(frozen=True)
class Verdict:
    """A judge's structured answer: its reasoning, then whether the answer passes."""

    reasoning: str
    passed: bool


class Check:
    """A built-in check: ``name`` (how it was made, e.g. ``contains('Paris')``), the
    test itself, and its JSON form for a dataset file (None when it has none)."""

    def __init__(self, name: str, test: Callable[[Any, Any], Outcome],
                 spec: Optional[Dict[str, Any]] = None) -> None:
        self.name, self._test, self.spec = name, test, spec

    def __call__(self, result: Any, case: Any = None) -> Outcome:
        return self._test(result, case)

    def __repr__(self) -> str:
        return self.name


def _short(value: Any, size: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= size else text[:size - 3] + "..."


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _answer(result: Any) -> Any:
    output = getattr(result, "output", None)
    return output if output is not None else result.text


def equals(value: Any = _MISSING) -> Check:
    """The output (or text) equals ``value``; without one, the case's ``expected``."""
    def test(result: Any, case: Any) -> Outcome:
        want = getattr(case, "expected", None) if value is _MISSING else value
        got = _answer(result)
        if got == want or _jsonable(got) == want:
            return Outcome(True)
        return Outcome(False, f"expected {_short(want)}, got {_short(got)}")
    name = "equals()" if value is _MISSING else f"equals({_short(value, 40)})"
    return Check(name, test, None if value is _MISSING else {"equals": value})


def contains(text: str, *, case_sensitive: bool = True) -> Check:
    """The final text (or the output's JSON) contains ``text``."""
    if not isinstance(text, str):
        raise ConfigError(f"contains takes a str, got {type(text).__name__}")

    def test(result: Any, case: Any) -> Outcome:
        output = getattr(result, "output", None)
        haystack = result.text if output is None else json.dumps(_jsonable(output),
                                                                  ensure_ascii=False, default=str)
        needle = text
        if not case_sensitive:
            haystack, needle = haystack.casefold(), needle.casefold()
        if needle in haystack:
            return Outcome(True)
        return Outcome(False, f"{_short(text, 40)!r} not in {_short(haystack)!r}")
    spec: Dict[str, Any] = {"contains": text}
    if not case_sensitive:
        spec["case_sensitive"] = False
    return Check(f"contains({text!r})", test, spec)


def matches(schema: Mapping[str, Any]) -> Check:
    """The structured output, or else the final text read as JSON, is valid against
    the JSON Schema ``schema``. The schema is checked when the check is made (a
    ConfigError if it is not one); validation is nacelle's own
    (:func:`nacelle.validation.compile_schema` as for an untrusted schema: jsonschema's Draft
    2020-12, bounded work, and a ``$ref`` to a URL never fetched but failing the check
    with its reason), since a dataset's schema is data, never a reason to open a
    socket. Without jsonschema (a vendored copy) the built-in validator checks the
    keywords it knows, and the schema itself is not checked."""
    from ..validation import UnusableSchema, compile_schema

    if not isinstance(schema, Mapping):
        raise ConfigError(f"matches takes a JSON Schema (a dict), got {type(schema).__name__}")
    schema = dict(schema)
    jsonschema: Any = None
    try:
        import jsonschema
    except ImportError:  # a vendored copy without it: nacelle's built-in validator checks
        pass
    if jsonschema is not None:
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigError(f"matches: not a valid JSON Schema: {exc.message}") from None
    validate = compile_schema(schema, untrusted=True)

    def test(result: Any, case: Any) -> Outcome:
        output = getattr(result, "output", None)
        if output is not None:
            value = _jsonable(output)
        else:
            try:
                value = bounded_json.loads(result.text, what="answer",
                                           max_depth=bounded_json.DOCUMENT_DEPTH)
            except ValueError as exc:
                return Outcome(False, f"the answer is not JSON: {exc}")
        try:
            error = validate(value)
        except UnusableSchema as exc:
            return Outcome(False, f"the schema cannot be used: {_short(str(exc), 200)}")
        if error is None:
            return Outcome(True)
        if error.startswith("input"):  # the validator names a tool's input; here, the answer
            error = "answer" + error[len("input"):]
        return Outcome(False, _short(error, 200))
    return Check(f"matches({_short(json.dumps(schema), 40)})", test, {"matches": schema})


def _calls(result: Any) -> Tuple[ToolCall, ...]:
    messages: Tuple[Message, ...] = getattr(result, "messages", ())
    return tuple(p for m in messages for p in m.parts if isinstance(p, ToolCall))


def called(tool: str, **input: Any) -> Check:
    """The run called ``tool``, at least once with arguments holding every given
    ``name=value`` (other arguments may be there too)."""
    if not isinstance(tool, str) or not tool:
        raise ConfigError("called takes a tool name")

    def test(result: Any, case: Any) -> Outcome:
        calls = [c for c in _calls(result) if c.name == tool]
        if not calls:
            made = sorted({c.name for c in _calls(result)})
            return Outcome(False, f"{tool} was not called (called: {', '.join(made) or 'none'})")
        for call in calls:
            try:
                args = bounded_json.loads(call.input or "{}", what="tool input",
                                          max_depth=bounded_json.DOCUMENT_DEPTH)
            except ValueError:
                continue
            if isinstance(args, dict) and all(k in args and args[k] == v for k, v in input.items()):
                return Outcome(True)
        seen = "; ".join(_short(c.input, 60) for c in calls[:3])
        return Outcome(False, f"{tool} was called, never with {_short(input, 60)} (inputs: {seen})")
    shown = ", ".join([repr(tool)] + [f"{k}={v!r}" for k, v in input.items()])
    spec: Dict[str, Any] = {"called": tool}
    if input:
        spec["input"] = dict(input)
    return Check(f"called({_short(shown, 60)})", test, spec)


def not_called(tool: str) -> Check:
    """The run never called ``tool``."""
    if not isinstance(tool, str) or not tool:
        raise ConfigError("not_called takes a tool name")

    def test(result: Any, case: Any) -> Outcome:
        count = sum(1 for c in _calls(result) if c.name == tool)
        return Outcome(True) if not count else Outcome(False, f"{tool} was called {count} time(s)")
    return Check(f"not_called({tool!r})", test, {"not_called": tool})


def max_cost(dollars: float) -> Check:
    """The run cost at most ``dollars``. A run whose cost is unknown (no price for
    its model, and it used tokens) fails: an unknown cost is not a small one."""
    if isinstance(dollars, bool) or not isinstance(dollars, (int, float)) or not dollars >= 0:
        raise ConfigError(f"max_cost takes dollars of zero or more, got {dollars!r}")

    def test(result: Any, case: Any) -> Outcome:
        usage = result.usage
        if not usage.priced and usage.total:
            return Outcome(False, "the run's cost is unknown (no price for its model)")
        if usage.cost <= dollars:
            return Outcome(True)
        return Outcome(False, f"cost ${usage.cost:.6f} > ${dollars}")
    return Check(f"max_cost({dollars})", test, {"max_cost": dollars})


def max_turns(turns: int) -> Check:
    """The run took at most ``turns`` model requests (``Result.turns``)."""
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise ConfigError(f"max_turns takes a whole number of at least 1, got {turns!r}")

    def test(result: Any, case: Any) -> Outcome:
        if result.turns <= turns:
            return Outcome(True)
        return Outcome(False, f"{result.turns} turns > {turns}")
    return Check(f"max_turns({turns})", test, {"max_turns": turns})


JUDGE_SYSTEM = (
    "You grade an AI assistant's answer against a rubric. Read the conversation, the "
    "expected answer if one is given, and the answer. First write your reasoning, then "
    "decide whether the answer passes the rubric. Judge only by the rubric.")


def _plain(messages: Tuple[Message, ...]) -> str:
    lines = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, Text):
                lines.append(f"{message.role.value}: {part.text}")
            elif isinstance(part, ToolCall):
                lines.append(f"{message.role.value} called {part.name}({part.input})")
            elif isinstance(part, ToolResult):
                lines.append(f"tool {part.name} returned: {part.result}")
    return "\n".join(lines)


def judge(rubric: str, backend: Any, **agent_options: Any) -> Check:
    """A model decides whether the answer meets ``rubric``: an Agent on ``backend``
    (``agent_options`` go to it, e.g. ``max_iterations``) with ``output=Verdict``.
    Its reasoning is the Outcome's reason, pass or fail."""
    if not isinstance(rubric, str) or not rubric.strip():
        raise ConfigError("judge takes a rubric: what a passing answer does")
    from ..agent import Agent

    agent = Agent(backend, JUDGE_SYSTEM, output=Verdict, **agent_options)

    def test(result: Any, case: Any) -> Outcome:
        conversation = case.conversation if case is not None else ()
        expected = getattr(case, "expected", None)
        answer = _answer(result)
        prompt = (f"<rubric>\n{rubric}\n</rubric>\n<conversation>\n{_plain(conversation)}\n"
                  f"</conversation>\n")
        if expected is not None:
            prompt += f"<expected>\n{json.dumps(_jsonable(expected), default=str)}\n</expected>\n"
        shown = answer if isinstance(answer, str) else json.dumps(_jsonable(answer), default=str)
        prompt += f"<answer>\n{shown}\n</answer>"
        graded = agent.run([user_text(prompt)])
        verdict = graded.output
        if not isinstance(verdict, Verdict):
            return Outcome(False, f"the judge gave no verdict (stop: {graded.stop.value})",
                           graded.usage.cost)
        return Outcome(bool(verdict.passed), verdict.reasoning, graded.usage.cost)
    return Check(f"judge({_short(rubric, 40)!r})", test, {"judge": rubric})


def check_to_json(check: Any, case: str) -> Dict[str, Any]:
    spec = check.spec if isinstance(check, Check) else None
    if spec is None:
        raise ConfigError(f"case {case!r}: the check {_short(repr(check), 60)} has no JSON "
                          "form (a Python function, or equals() of the case's expected value)")
    return dict(spec)


#: the keys a check's JSON form may hold besides its name
_OPTIONS = {"contains": ("case_sensitive",), "called": ("input",)}


def check_from_json(raw: Any, where: str, backend: Any) -> Check:
    """A built-in check from its JSON form (see the module docstring)."""
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{where}: a check is an object such as {{\"contains\": \"...\"}}")
    kind = next(iter(raw))
    allowed = {kind, *_OPTIONS.get(kind, ())}
    extra = sorted(set(raw) - allowed)
    if extra:
        raise ConfigError(f"{where}: a {kind!r} check takes no {extra[0]!r}")
    try:
        if kind == "equals":
            return equals(raw["equals"])
        if kind == "contains":
            sensitive = raw.get("case_sensitive", True)
            if not isinstance(sensitive, bool):
                raise ConfigError("case_sensitive must be true or false")
            return contains(raw["contains"], case_sensitive=sensitive)
        if kind == "matches":
            return matches(raw["matches"])
        if kind == "called":
            extra = raw.get("input", {})
            if not isinstance(extra, dict):
                raise ConfigError("input must be an object")
            return called(raw["called"], **extra)
        if kind == "not_called":
            return not_called(raw["not_called"])
        if kind == "max_cost":
            return max_cost(raw["max_cost"])
        if kind == "max_turns":
            return max_turns(raw["max_turns"])
        if kind == "judge":
            if backend is None:
                raise ConfigError("a judge check needs its backend: Dataset.load(path, "
                                  "judge=backend) (nacelle eval --judge-model)")
            return judge(raw["judge"], backend)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    raise ConfigError(f"{where}: unknown check {kind!r} (equals, contains, matches, called, "
                      "not_called, judge, max_cost, max_turns)")


def _takes_case(check: Callable[..., Any]) -> bool:
    if isinstance(check, Check):
        return True
    try:
        params = inspect.signature(check).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def check_name(check: Any) -> str:
    if isinstance(check, Check):
        return check.name
    return str(getattr(check, "__name__", None) or _short(repr(check), 60))


def run_check(check: Callable[..., Any], result: Any, case: Any) -> Outcome:
    """Call ``check`` on a run and read what it returned (see the module docstring)."""
    try:
        said = check(result, case) if _takes_case(check) else check(result)
    except AssertionError as exc:
        return Outcome(False, str(exc) or "assertion failed")
    except Exception as exc:  # noqa: BLE001 - a broken check fails its case, not the eval
        return Outcome(False, f"raised {type(exc).__name__}: {_short(str(exc), 200)}")
    if isinstance(said, Outcome):
        return said
    if said is None or said is True:
        return Outcome(True)
    if said is False:
        return Outcome(False, "returned False")
    if isinstance(said, tuple) and len(said) == 2 and isinstance(said[0], bool):
        return Outcome(said[0], str(said[1]))
    return Outcome(bool(said), "" if said else f"returned {_short(repr(said), 60)}")
