"""Structured output: from ``output=`` to one JSON Schema, and from the model's answer
back to a typed, validated value.

``Agent(..., output=Weather)`` makes an :class:`Output` once, at construction (or per
run, for ``run(..., output=...)``); the Agent puts it in the Request and the loop
(``loop.py``) checks every final answer with it. What ``output`` may be:

- a dataclass, a TypedDict, an Enum, a primitive (``str``, ``int``, ``float``,
  ``bool``) or any annotation ``@tool`` understands (``list[...]``, ``Optional``,
  ``Literal``, ``dict[str, T]``, nested dataclasses): the schema comes from the same
  generator as tool parameters (``nacelle/schema.py``), and the answer is rebuilt with its
  converters (dataclasses recursively, Enums by value, tuples and sets);
- ``nacelle.Schema(name, schema, strict=True)``: a JSON Schema as a dict; the answer
  is the validated JSON value;
- any class with ``model_json_schema()`` and ``model_validate()`` (pydantic v2,
  duck-typed: pydantic is never imported); the answer is ``model_validate(data)``.

A schema whose root is not an object with properties (a primitive, a list, an Enum,
``dict[str, T]``) is wrapped as
``{"value": ...}``, since every provider wants an object at the root; the value is
unwrapped before it is returned. ``$ref`` is inlined (``output/schema.py``: ``inline_refs``),
so both validators and every provider see a plain tree.

Modes (``output_mode``):

- ``"native"``: the provider constrains its decoding to the schema
  (``capabilities.structured_output``); each wire module sends its dialect's subset
  (``output/schema.py``) and the answer is the final turn's text.
- ``"tool"``: a tool named :data:`FINAL_ANSWER` whose input schema is the output
  schema. Calling it ends the run; its call is closed by one TOOL_RESULT, other calls
  of that turn are closed as discarded (they were asked for alongside an answer that
  ends the run, so running them would act after the fact). ``tool_choice`` is never
  forced — Anthropic refuses a forced tool with extended thinking, and other servers
  do not all take it — so a model that answers in text instead is read as in
  prompted mode, and asked to call the tool when that fails.
- ``"prompted"``: the schema goes into the system prompt; the answer is the final
  text, read leniently (a Markdown fence or prose around one JSON value is allowed).
- ``"auto"``: native where the backend has it, otherwise tool — every backend runs
  local tools, so prompted is only ever chosen by name.

Whatever the mode, the answer is validated client-side against the full schema
(``validation.py``: jsonschema, or the built-in validator), so what a provider's subset
could not enforce is still enforced. An invalid answer goes back as a user turn (or,
in tool mode, as the failed result of the call) naming what was wrong.

Core module: imports the standard library and nacelle's core modules only.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

from .. import bounded_json
from ..context import ToolContext
from ..errors import ConfigError, Unsupported

# ``output/schema.py``, ``nacelle.schema`` and ``validation`` are imported when an output is first
# made, not with ``import nacelle`` (as ``tools.py`` does with ``schema``).

__all__ = ["FINAL_ANSWER", "MODES", "FinalAnswerTool", "Output", "Schema", "check_options",
           "make_output", "to_jsonable"]

FINAL_ANSWER = "final_answer"
MODES = ("auto", "native", "tool", "prompted")
_NAME = r"[^a-zA-Z0-9_-]+"  # compiled (and cached by re) at first use


@dataclass(frozen=True)
class Schema:
    """A JSON Schema to use as ``output=``: ``name`` names it to the provider (letters,
    digits, ``_`` and ``-``; OpenAI requires one), ``strict`` asks strict-mode providers
    to enforce it (their subset; the full schema is checked client-side either way)."""

    name: str
    schema: Dict[str, Any] = field(repr=False)
    strict: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", self.name):
            raise ConfigError(f"a Schema's name must match ^[a-zA-Z0-9_-]{{1,64}}$, "
                              f"got {self.name!r}")
        if not isinstance(self.schema, dict):
            raise ConfigError(f"a Schema's schema must be a dict, got {type(self.schema).__name__}")


class Output:
    """One compiled ``output=``: the schema, the mode, and the reading of answers.

    ``schema`` is the full JSON Schema (object root, refs inlined) the answer is
    validated against; ``name`` names it on the wire; ``mode`` is resolved (never
    "auto"); ``retries`` is how many invalid answers are sent back before the run ends
    with ``Stop.INVALID_OUTPUT``.
    """

    def __init__(self, target: Any, name: str, schema: Dict[str, Any],
                 convert: Callable[[Any], Any], *, wrapped: bool, strict: bool,
                 mode: str, retries: int) -> None:
        self.target = target
        self.name = name
        self.schema = schema
        self.wrapped = wrapped
        self.strict = strict
        self.mode = mode
        self.retries = retries
        from ..validation import compile_schema

        self._convert = convert
        self._check = compile_schema(schema)
        self.tool = FinalAnswerTool(self) if mode == "tool" else None

    def __repr__(self) -> str:
        return f"Output({self.name!r}, mode={self.mode!r}, retries={self.retries})"

    def __reduce__(self) -> Tuple[Any, ...]:
        return (make_output, (self.target, self.mode, self.retries))

    # -- reading answers ------------------------------------------------------------

    def read_text(self, text: str) -> Tuple[Any, Optional[str]]:
        """The typed value of a final text answer, or (None, what is wrong)."""
        data, error = _json_in(text)
        if error is not None:
            return None, error
        return self.read_data(data)

    def read_input(self, text: str) -> Tuple[Any, Optional[str]]:
        """The typed value of a final-answer call's raw input, or (None, what is wrong)."""
        try:
            data = bounded_json.loads(text, what="answer") if text.strip() else {}
        except bounded_json.TooDeep as exc:
            return None, str(exc)
        except ValueError as exc:
            return None, f"the input is not valid JSON ({exc})"
        return self.read_data(data)

    def read_data(self, data: Any) -> Tuple[Any, Optional[str]]:
        """The typed value of an answer already parsed from JSON, or (None, what is
        wrong): restored from a strict dialect's shape, validated, converted."""
        from .schema import restore

        data = restore(self.schema, data)
        problem = self._check(data)
        if problem is not None:
            return None, problem.replace("input", "answer", 1) if problem.startswith("input") \
                else problem
        try:
            value = self._convert(data["value"] if self.wrapped else data)
        except Exception as exc:  # noqa: BLE001 - a model_validate or constructor refusal
            return None, f"answer: {exc}"
        return value, None

    # -- what the model is told -------------------------------------------------------

    def instructions(self) -> str:
        """What prompted mode appends to the system prompt."""
        return ("Reply with only one JSON value matching this JSON Schema: no prose "
                "before or after it, no Markdown code fence.\n"
                + json.dumps(self.schema, ensure_ascii=False, indent=1))

    def retry_text(self, error: str) -> str:
        """The user turn that sends an invalid text answer back."""
        if self.mode == "tool":
            return (f"That was not a valid final answer ({error}). Call the {FINAL_ANSWER} "
                    "tool with your answer as its input.")
        return (f"Your answer does not match the required JSON Schema: {error}. Reply "
                "again with only the corrected JSON value.")


class FinalAnswerTool:
    """Tool mode's final-answer tool: its input schema is the output schema. The loop
    reads its calls itself (see ``loop.py``); ``run`` is what an outside runner gets."""

    exclusive = False
    read_only = True
    destructive = False
    idempotent = True
    open_world = False

    def __init__(self, output: Output) -> None:
        self.output = output
        self.name = FINAL_ANSWER
        self.description = ("Give your final answer. Call this once, when you are done, "
                            "with the answer as the input; the conversation ends with it.")
        self.schema = output.schema

    def __repr__(self) -> str:
        return f"<FinalAnswerTool {self.output.name!r}>"

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> str:
        _, error = self.output.read_data(input)
        if error is not None:
            raise ValueError(error)
        return "Final answer received."


def check_options(mode: Any, retries: Any) -> None:
    """ConfigError unless ``mode`` is one of :data:`MODES` and ``retries`` a count."""
    if mode not in MODES:
        raise ConfigError(f"output_mode must be one of {', '.join(MODES)}; got {mode!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"output_retries must be an integer of at least 0, got {retries!r}")


def make_output(target: Any, mode: str = "auto", retries: int = 2, *,
                capabilities: Any = None, backend: str = "") -> Output:
    """Compile ``output=`` (see the module docstring) for a backend with
    ``capabilities``: ``mode`` "auto" becomes "native" or "tool"; "native" on a backend
    without it is :class:`~nacelle.errors.Unsupported` naming ``backend``."""
    check_options(mode, retries)
    native = bool(getattr(capabilities, "structured_output", False))
    if mode == "auto":
        mode = "native" if native else "tool"
    elif mode == "native" and capabilities is not None and not native:
        raise Unsupported(backend, "native structured output (output_mode='native')",
                          hint="use output_mode='tool' or 'prompted', which work everywhere")
    name, schema, convert, strict = _describe(target)
    # An object without properties (``dict[str, T]``) is wrapped too: its strict form
    # is an array of pairs, and the root must stay an object.
    wrapped = schema.get("type") != "object" or not schema.get("properties")
    if wrapped:
        schema = {"type": "object", "properties": {"value": schema}, "required": ["value"],
                  "additionalProperties": False}
    return Output(target, name, schema, convert, wrapped=wrapped, strict=strict, mode=mode,
                  retries=retries)


def _describe(target: Any) -> Tuple[str, Dict[str, Any], Callable[[Any], Any], bool]:
    """(name, schema, converter, strict) for an ``output=`` value."""
    from .schema import inline_refs
    from ..schema import _Unsupported, type_schema

    if isinstance(target, Schema):
        return target.name, inline_refs(target.schema), _same, target.strict
    make_schema = getattr(target, "model_json_schema", None)
    validate = getattr(target, "model_validate", None)
    if isinstance(target, type) and callable(make_schema) and callable(validate):
        schema = make_schema()
        if not isinstance(schema, dict):
            raise ConfigError(f"{target.__name__}.model_json_schema() did not return a dict")
        return _name_of(target), inline_refs(schema), validate, True
    if target is None or isinstance(target, (str, bytes, int, float, dict, list)):
        raise ConfigError(
            f"output must be a type (a dataclass, TypedDict, Enum, primitive or list[...]), "
            f"a nacelle.Schema or a pydantic-style model class; got {target!r:.60}")
    try:
        schema, convert = type_schema(target)
    except _Unsupported as exc:
        raise ConfigError(f"output {_name_of(target)}: {exc}") from None
    return _name_of(target), schema, convert, True


def _same(value: Any) -> Any:
    return value


def _name_of(target: Any) -> str:
    name = getattr(target, "__name__", "") if isinstance(target, type) else ""
    name = re.sub(_NAME, "_", name).strip("_")[:64]
    return name or "output"


def _json_in(text: str) -> Tuple[Any, Optional[str]]:
    """The one JSON value in a text answer: the whole text, else inside a Markdown
    fence, else from the first ``{`` or ``[`` on (prose around it ignored)."""
    stripped = text.strip()
    if not stripped:
        return None, "the answer was empty; a JSON value was expected"
    candidates = [stripped]
    fenced = re.search(r"```[A-Za-z0-9_-]*\s*\n(.*?)```", stripped, re.DOTALL)
    if fenced:
        candidates.append(fenced.group(1).strip())
    decoder = json.JSONDecoder()
    errors = []
    for candidate in candidates:
        try:
            return bounded_json.loads(candidate, what="answer"), None
        except ValueError as exc:
            errors.append(exc)
    for opener in "{[":
        at = stripped.find(opener)
        # raw_decode recurses as json.loads does, so the text from here on is scanned
        # first (at most twice: the reading stays linear).
        if at >= 0 and not bounded_json.depth_exceeds(stripped[at:], bounded_json.MAX_DEPTH):
            try:
                return decoder.raw_decode(stripped, at)[0], None
            except ValueError:
                continue
    deep = [e for e in errors if isinstance(e, bounded_json.TooDeep)]
    if deep:
        return None, str(deep[0])
    return None, f"the answer is not valid JSON ({errors[0]})"


def to_jsonable(value: Any) -> Any:
    """A typed output value as plain JSON data: dataclasses as dicts, Enums by value,
    sets and tuples as lists, a pydantic-style model by ``model_dump(mode="json")``."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return dump(mode="json")
        except TypeError:
            return dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_jsonable(v) for v in value), key=repr)
    return value
