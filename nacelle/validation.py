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

Core module: imports the standard library only (jsonschema lazily).
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any, Callable, Dict, List, Optional

__all__ = ["builtin_check", "compile_schema", "jsonschema_check"]

log = logging.getLogger(__name__)

Check = Callable[[Any], Optional[str]]

_ANNOTATIONS = frozenset({"description", "default", "title", "examples", "$schema", "$id",
                          "$comment", "deprecated", "readOnly", "writeOnly"})
_KNOWN = frozenset({"type", "properties", "required", "additionalProperties", "items",
                    "prefixItems", "minItems", "maxItems", "uniqueItems", "enum", "anyOf",
                    "minimum", "maximum"}) | _ANNOTATIONS

_jsonschema_usable: Optional[bool] = None


def compile_schema(schema: Dict[str, Any], engine: Optional[str] = None) -> Check:
    """A checker for ``schema``: jsonschema if importable (or ``engine="jsonschema"``),
    the built-in one otherwise (or ``engine="builtin"``)."""
    text = json.dumps(schema, sort_keys=True, default=repr)
    if engine is None:
        engine = "jsonschema" if _have_jsonschema() else "builtin"
    return _compile(text, engine)


@functools.lru_cache(maxsize=512)
def _compile(text: str, engine: str) -> Check:
    schema = json.loads(text)
    if engine == "jsonschema":
        return jsonschema_check(schema)
    if engine == "builtin":
        return builtin_check(schema)
    raise ValueError(f"unknown validation engine {engine!r}")


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


def jsonschema_check(schema: Dict[str, Any]) -> Check:
    """A checker backed by jsonschema's Draft 2020-12 validator."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)

    def check(instance: Any) -> Optional[str]:
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is None:
            return None
        return f"{_path(error.absolute_path)}: {error.message}"

    return check


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
