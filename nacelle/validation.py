"""Tool-input validation: jsonschema when it can be imported, else a small built-in.

``compile_schema(schema)`` returns a function ``check(instance) -> str | None`` (the
first violation as a sentence a model can act on, or None). It is cached per schema
text, so a tool's schema is compiled once however many calls it gets.

jsonschema (Draft 2020-12) is imported on first use, never at ``import nacelle``.
jsonschema ≥ 4.18 needs the compiled ``rpds-py``, so a vendored copy of nacelle in an
environment without compiled wheels falls back to the built-in validator, which
covers exactly the keywords ``@tool`` emits: type, properties, required,
additionalProperties, items, prefixItems, minItems, maxItems, uniqueItems, enum,
anyOf, minimum, maximum. Annotation keywords (description, default, title…) mean
nothing to validation; any other keyword is ignored and said so in a DEBUG log. A
differential test holds the two to the same verdicts on generated schemas.

A schema is data, never a reason to open a socket. jsonschema resolves a ``$ref`` to
a URL by fetching it (a GET to any address the schema names, and a thread blocked for
as long as that address keeps silent), so every schema here is checked against what
it holds — its own ``$defs`` and anchors, and the drafts' metaschemas — with a
registry (or, before jsonschema 4.18, a resolver) whose retrieval refuses: a ``$ref``
it cannot resolve is :class:`UnusableSchema`, which the tool call reports as its
failed result. Fetching was deprecated by jsonschema itself in 4.18 and ``@tool``
never writes a ``$ref``, so this holds for a local tool's schema too, at no cost.

An MCP server's schema (``untrusted=True``) is also bounded in work, because
Python's ``re`` cannot be interrupted, so ``tool_timeout`` and cancellation would
never get their turn while a backtracking ``pattern`` runs:

- Before a ``pattern`` or a ``patternProperties`` pattern meets a string,
  :func:`nacelle.backtracking.search_cost` bounds the matcher's work from the
  pattern's shape and the string's length, and the check spends it from a budget
  of 20 million steps per call (about a tenth of a second of matching at worst).
  What the budget cannot pay for is not matched: a ``pattern`` is then left to the
  server (which checks its own input; a DEBUG log says so), and a property name is
  taken as matching no pattern and as no unexpected property. A catastrophic shape
  (``(a+)+``, ``(a|aa)*``) is thus matched on a few characters only, a simple one
  (``^[a-z0-9-]+$``) on millions; failing open rather than refusing keeps a server's
  tool usable when its pattern is merely written in a shape the bound cannot tell
  apart from a catastrophic one.
- Each subschema applied counts as a step, up to 10,000 plus 50 per value in the
  input: a schema whose ``$ref`` chains fan out (40 levels of two refs each are 2**40
  checks of one integer) is :class:`UnusableSchema` rather than a thread lost.
- A subschema naming another draft in ``$schema`` is read as 2020-12 (MCP's default,
  https://modelcontextprotocol.io/specification/2025-11-25/basic#json-schema-usage),
  since jsonschema would otherwise switch to that draft's own, unbounded keywords.
- Any other failure of the validator (``"properties": 5``, an invalid regular
  expression, a ``$ref`` loop) is :class:`UnusableSchema` too, not a crash.

A local tool's patterns are its author's and run unbounded: bounding them would let a
string its pattern forbids reach the function.

Core module: imports the standard library, ``errors`` and ``backtracking``
(jsonschema lazily).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ._loggers import get_logger
from .backtracking import search_cost
from .errors import NacelleError

__all__ = ["UnusableSchema", "builtin_check", "compile_schema", "input_check", "jsonschema_check"]

log = get_logger(__name__)

Check = Callable[[Any], Optional[str]]

_ANNOTATIONS = frozenset({"description", "default", "title", "examples", "$schema", "$id",
                          "$comment", "deprecated", "readOnly", "writeOnly"})
_KNOWN = frozenset({"type", "properties", "required", "additionalProperties", "items",
                    "prefixItems", "minItems", "maxItems", "uniqueItems", "enum", "anyOf",
                    "minimum", "maximum"}) | _ANNOTATIONS

# Matcher steps (as backtracking.search_cost counts them) one check of input against an
# untrusted schema may spend on regular expressions: measured at 0.2 to 4 ns a step,
# about a tenth of a second at worst.
_REGEX_BUDGET = 20_000_000
_BASE_STEPS, _STEPS_PER_VALUE = 10_000, 50

_jsonschema_usable: Optional[bool] = None


class UnusableSchema(NacelleError):
    """A schema that cannot check input: a ``$ref`` to a document that is not fetched
    (or that is not there), a keyword the validator cannot use, or more work than a
    server's schema is allowed. A tool call reports it as its failed result."""


def compile_schema(schema: Dict[str, Any], engine: Optional[str] = None, *,
                   untrusted: bool = False) -> Check:
    """A checker for ``schema``: jsonschema if importable (or ``engine="jsonschema"``),
    the built-in one otherwise (or ``engine="builtin"``). ``untrusted=True`` (an MCP
    server's schema) bounds its regex and step work and turns every failure of the
    validator into :class:`UnusableSchema`."""
    text = json.dumps(schema, sort_keys=True, default=repr)
    if engine is None:
        engine = "jsonschema" if _have_jsonschema() else "builtin"
    return _compile(text, engine, untrusted)


def input_check(tool: Any) -> Check:
    """The checker of ``tool``'s input. An ``advisory`` tool's schema (an MCP server's,
    like its annotations) is untrusted data; any other tool's is its author's."""
    return compile_schema(tool.schema, untrusted=bool(getattr(tool, "advisory", False)))


@functools.lru_cache(maxsize=512)
def _compile(text: str, engine: str, untrusted: bool) -> Check:
    schema = json.loads(text)
    if engine not in ("jsonschema", "builtin"):
        raise ValueError(f"unknown validation engine {engine!r}")
    try:
        if engine == "jsonschema":
            return jsonschema_check(schema, untrusted=untrusted)
        return _failures_unusable(builtin_check(schema)) if untrusted else builtin_check(schema)
    except Exception as exc:  # noqa: BLE001 - see _failures_unusable
        if not untrusted:
            raise
        problem = _unusable(exc)

    def unusable(instance: Any) -> Optional[str]:
        raise problem

    return unusable


def _failures_unusable(check: Check) -> Check:
    def guarded(instance: Any) -> Optional[str]:
        try:
            return check(instance)
        except Exception as exc:  # noqa: BLE001 - a server's schema is data: any failure is its
            raise _unusable(exc) from None

    return guarded


def _unusable(exc: Exception) -> UnusableSchema:
    if isinstance(exc, UnusableSchema):
        return exc
    return UnusableSchema(f"the input cannot be checked against this schema "
                          f"({type(exc).__name__}: {_clip(str(exc))})")


def _have_jsonschema() -> bool:
    global _jsonschema_usable
    if _jsonschema_usable is None:
        try:
            import jsonschema  # noqa: F401
        except ImportError:
            log.debug("jsonschema is not importable; tool input is checked by the built-in validator")
            _jsonschema_usable = False
        else:
            _jsonschema_usable = True
    return _jsonschema_usable


def jsonschema_check(schema: Dict[str, Any], *, untrusted: bool = False) -> Check:
    """A checker backed by jsonschema's Draft 2020-12 validator that fetches nothing;
    ``untrusted=True`` bounds its work (see the module's docstring)."""
    import jsonschema

    cls = _bounded_class() if untrusted else jsonschema.Draft202012Validator
    make, unresolved = _offline(cls, schema)
    names = _pattern_names(schema) if untrusted else ()

    def check(instance: Any) -> Optional[str]:
        validator = make()
        if untrusted:
            _work.regex = _REGEX_BUDGET
            _work.steps = _BASE_STEPS + _STEPS_PER_VALUE * _values(instance)
            _work.names = names
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        except unresolved as exc:
            raise UnusableSchema(_unresolved(exc)) from None
        finally:
            _work.__dict__.clear()
        if error is None:
            return None
        return f"{_path(error.absolute_path)}: {error.message}"

    return _failures_unusable(check) if untrusted else check


def _offline(cls: Any, schema: Dict[str, Any]) -> Tuple[Callable[[], Any], Any]:
    """A factory of validators for ``schema`` that resolve references without
    retrieving anything, and the exception class(es) a failed resolution raises."""
    try:
        from referencing import Registry
        from referencing.exceptions import NoSuchResource, Unresolvable
    except ImportError:
        referencing = False
    else:  # referencing may be installed beside a jsonschema too old to take it
        referencing = _takes_registry(cls)
    if referencing:
        def refuse(uri: str) -> Any:
            raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

        validator = cls(schema, registry=Registry(retrieve=refuse))  # type: ignore[call-arg]
        return (lambda: validator), Unresolvable
    # jsonschema < 4.18: a RefResolver whose remote resolution refuses. A resolver keeps
    # a scope stack while it works, so each check gets its own.
    import jsonschema

    class _NoRetrieval(jsonschema.RefResolver):
        def resolve_remote(self, uri: str) -> Any:
            raise LookupError(uri)  # the resolver wraps it in a RefResolutionError

    def make() -> Any:
        return cls(schema, resolver=_NoRetrieval.from_schema(schema))

    return make, jsonschema.RefResolutionError


def _takes_registry(cls: Any) -> bool:
    import inspect

    try:
        return "registry" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


def _unresolved(exc: BaseException) -> str:
    ref = getattr(exc, "ref", None)
    where = repr(_clip(str(ref))) if ref is not None else f"({_clip(str(exc))})"
    return (f"the schema's $ref {where} cannot be resolved from what the schema holds "
            "(no document a schema names is fetched)")


def _clip(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."


def _values(instance: Any) -> int:
    count, stack = 0, [instance]
    while stack:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count


def _pattern_names(schema: Any) -> Tuple[str, ...]:
    """Every ``patternProperties`` pattern anywhere in ``schema``: what
    unevaluatedProperties may match a property name against, through any reference."""
    found: List[str] = []
    stack = [schema]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            patterns = value.get("patternProperties")
            if isinstance(patterns, dict):
                found.extend(p for p in patterns if isinstance(p, str))
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return tuple(dict.fromkeys(found))


# -- bounded work for an untrusted schema ----------------------------------------------

# One check's allowances, per thread: the validator is shared by every call of a tool,
# and a check runs start to end on the thread that called it.
_work = threading.local()


def _affordable(pattern: Any, text: str) -> bool:
    """Whether the regex budget pays for matching ``pattern`` on ``text`` (and, if so,
    pays). A pattern ``re`` would refuse raises, which makes the schema unusable."""
    if not isinstance(pattern, str):
        raise UnusableSchema(f"the schema's pattern {_clip(repr(pattern))} is not a string")
    try:
        cost = search_cost(pattern, len(text))
    except (re.error, RecursionError, OverflowError) as exc:
        raise UnusableSchema(f"the schema's pattern {_clip(repr(pattern))} is not a regular "
                             f"expression Python can use ({exc})") from None
    left = getattr(_work, "regex", _REGEX_BUDGET)
    if cost > left:
        if not getattr(_work, "told", False):  # once a check: the rest are alike
            _work.told = True
            log.debug("pattern %.80r not matched on a string of %d characters: its worst "
                      "case (%d steps) is more than this check has left (%d); the server "
                      "checks it", pattern, len(text), cost, left)
        return False
    _work.regex = left - cost
    return True


def _step() -> None:
    left = getattr(_work, "steps", None)
    if left is None:
        return
    if left <= 0:
        raise UnusableSchema(
            "checking this input against the schema takes more than "
            f"{_BASE_STEPS:,} steps plus {_STEPS_PER_VALUE} a value: the schema's "
            "references fan out")
    _work.steps = left - 1


@functools.lru_cache(maxsize=None)
def _bounded_class() -> Any:
    """Draft 2020-12 with the pattern keywords bounded and every subschema counted."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    keywords: Dict[str, Any] = {"pattern": _pattern}
    for name, pick in (("patternProperties", _own_patterns), ("additionalProperties", _joined),
                       ("unevaluatedProperties", _all_patterns)):
        if name in base.VALIDATORS:
            keywords[name] = _names_bounded(base.VALIDATORS[name], pick,
                                            whole=name == "unevaluatedProperties")
    cls = jsonschema.validators.extend(base, keywords)  # type: ignore[no-untyped-call]
    evolve = cls.evolve

    def bounded_evolve(self: Any, **changes: Any) -> Any:
        # Every subschema is entered through evolve; $schema in one would make
        # jsonschema pick that draft's class, whose keywords are not bounded.
        _step()
        schema = changes.get("schema")
        if isinstance(schema, dict) and "$schema" in schema:
            changes["schema"] = {k: v for k, v in schema.items() if k != "$schema"}
        return evolve(self, **changes)

    cls.evolve = bounded_evolve
    return cls


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string") or not _affordable(pattern, instance):
        return
    if not re.search(pattern, instance):
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _own_patterns(schema: Any) -> List[str]:
    patterns = schema.get("patternProperties") if isinstance(schema, dict) else None
    return list(patterns) if isinstance(patterns, dict) else []


def _joined(schema: Any) -> List[str]:
    # jsonschema matches additionalProperties' names against the patterns joined by "|".
    patterns = _own_patterns(schema)
    return ["|".join(patterns)] if patterns else []


def _all_patterns(schema: Any) -> List[str]:
    return list(getattr(_work, "names", ())) + _own_patterns(schema)


def _names_bounded(keyword: Any, patterns: Callable[[Any], List[str]], *, whole: bool) -> Any:
    """``keyword`` (one that matches property names against patterns) given only the
    names the regex budget can pay for: the others are as if no pattern matched them
    and they were no unexpected property. ``whole``: a keyword whose verdict depends on
    the whole object (unevaluatedProperties re-checks subschemas against it) is left
    out altogether rather than given part of the object."""

    def bounded(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return keyword(validator, value, instance, schema)
        wanted = patterns(schema)
        kept = {name: item for name, item in instance.items()
                if all(_affordable(p, name) for p in wanted)}
        if len(kept) == len(instance):
            return keyword(validator, value, instance, schema)
        return () if whole else keyword(validator, value, kept, schema)

    return bounded


def _path(parts: Any) -> str:
    out = "input"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


# -- the built-in validator ------------------------------------------------------------

def builtin_check(schema: Dict[str, Any]) -> Check:
    """A checker for the schema subset ``@tool`` emits, with no dependency."""
    _note_unknown(schema, "input")

    def check(instance: Any) -> Optional[str]:
        return _first_error(schema, instance, "input")

    return check


def _note_unknown(schema: Any, where: str) -> None:
    if not isinstance(schema, dict):
        return
    unknown = sorted(set(schema) - _KNOWN)
    if unknown:
        log.debug("the built-in validator ignores %s at %s", ", ".join(unknown), where)
    for name, sub in (schema.get("properties") or {}).items():
        _note_unknown(sub, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        _note_unknown(schema.get(key), f"{where}[{key}]")
    for i, sub in enumerate(schema.get("prefixItems") or ()):
        _note_unknown(sub, f"{where}[{i}]")
    for sub in schema.get("anyOf") or ():
        _note_unknown(sub, where)


def _is_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return False


def _json_name(value: Any) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, kind):
            return kind
    return type(value).__name__


def _json_equal(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1, but 1 is 1.0.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def _first_error(schema: Any, value: Any, where: str) -> Optional[str]:
    if schema is True or schema == {}:
        return None
    if schema is False:
        return f"{where}: no value is allowed here"
    kind = schema.get("type")
    if kind is not None:
        kinds: List[str] = kind if isinstance(kind, list) else [kind]
        if not any(_is_type(value, k) for k in kinds):
            return f"{where}: expected {' or '.join(kinds)}, got {_json_name(value)}"
    if "enum" in schema and not any(_json_equal(value, v) for v in schema["enum"]):
        allowed = ", ".join(_short(v) for v in schema["enum"])
        return f"{where}: {_short(value)} is not one of {allowed}"
    if "anyOf" in schema:
        errors = [_first_error(sub, value, where) for sub in schema["anyOf"]]
        if all(errors):
            return errors[0] if len(errors) == 1 else (
                f"{where}: {_short(value)} matches none of the allowed forms ({errors[0]})")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}: {_short(value)} is less than the minimum of {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}: {_short(value)} is more than the maximum of {schema['maximum']}"
    if isinstance(value, dict):
        return _object_error(schema, value, where)
    if isinstance(value, list):
        return _array_error(schema, value, where)
    return None


def _object_error(schema: Dict[str, Any], value: Dict[str, Any], where: str) -> Optional[str]:
    for name in schema.get("required", ()):
        if name not in value:
            return f"{where}: the required property {name!r} is missing"
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            error = _first_error(properties[name], item, f"{where}.{name}")
        elif extra is False:
            allowed = ", ".join(properties) or "none"
            return f"{where}: unexpected property {name!r} (allowed: {allowed})"
        else:
            error = _first_error(extra, item, f"{where}.{name}")
        if error:
            return error
    return None


def _array_error(schema: Dict[str, Any], value: List[Any], where: str) -> Optional[str]:
    if "minItems" in schema and len(value) < schema["minItems"]:
        return f"{where}: expected at least {schema['minItems']} items, got {len(value)}"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return f"{where}: expected at most {schema['maxItems']} items, got {len(value)}"
    if schema.get("uniqueItems"):
        for i, item in enumerate(value):
            if any(_json_equal(item, other) for other in value[:i]):
                return f"{where}: items must be unique; {_short(item)} repeats"
    prefix = schema.get("prefixItems", ())
    for i, item in enumerate(value):
        sub = prefix[i] if i < len(prefix) else schema.get("items", True)
        error = _first_error(sub, item, f"{where}[{i}]")
        if error:
            return error
    return None
