"""One output schema in, each provider's strict subset out — and answers back.

The output schema (``output/__init__.py`` makes it) is ordinary JSON Schema: optional
properties, ``dict[str, T]`` as ``additionalProperties: T``, tuples as
``prefixItems``, ``uniqueItems`` for sets, defaults. A provider that constrains its
decoding to a schema accepts only a subset of that, and each a different one. Here
the same schema becomes:

- :func:`strict_form` — the shape every strict dialect shares: ``$ref`` inlined,
  ``additionalProperties: false`` on every object, every property required with an
  optional one made nullable (``["T", "null"]``), ``dict[str, T]`` as an array of
  ``{"key", "value"}`` pairs, a tuple as an array of the union of its members, and
  ``default`` moved into the description. OpenAI's rule ("all fields must be
  required … emulate an optional parameter by using a union type with null", and
  ``additionalProperties: false`` always — platform.openai.com/docs/guides/
  structured-outputs, "Supported schemas") is the strictest of them, so it is the
  shared one; the other providers accept it too.
- a dialect normaliser on top of it, keeping only the keywords the provider
  documents and moving every other one into the description as ``{keyword:
  value}`` — the Anthropic SDK's own transform does exactly that
  (anthropic-sdk-python ``lib/_parse/_transform.py``): :func:`for_anthropic`
  (types, enum, const, anyOf, allOf, the listed string formats, ``minItems`` of 0
  or 1 — platform.claude.com/docs/en/build-with-claude/structured-outputs,
  "JSON Schema limitations"), :func:`for_openai` (pattern, format, the numeric
  bounds, minItems/maxItems besides the structural keywords — the OpenAI guide's
  supported-properties list) and :func:`for_gemini` (Gemini's OpenAPI-style
  ``Schema``: one ``type`` plus ``nullable``, string enums, no
  ``additionalProperties`` — ai.google.dev/api/caching#Schema).

Nothing the provider cannot enforce is lost: the answer is always validated
client-side against the *original* schema, so a bound moved into a description is
still checked, and a violation goes back to the model as a retry.

:func:`restore` turns an answer in the strict shape back into the original one (pairs
into a dict, a null for an optional property that does not take null dropped, so
the field's default applies). It is directed by the original schema alone, so it
is the same for every dialect and a no-op on an answer that already has the
original shape.

Recursive schemas are refused (Anthropic does not take them, and inlining cannot end),
and so is a ``$ref`` fan-out that inlines past :data:`MAX_INLINED` subschemas: keeping
``$defs`` instead would leave every normaliser and :func:`restore` resolving references,
and Gemini's ``Schema`` has none to resolve.

Core module: imports the standard library and ``errors``.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, FrozenSet, Optional, Tuple

from ..errors import ConfigError

__all__ = ["MAX_INLINED", "for_anthropic", "for_gemini", "for_openai", "inline_refs", "restore",
           "strict_form"]

Schema = Dict[str, Any]

# Keywords that shape a value, handled structurally by every normaliser.
_STRUCTURE = frozenset({"type", "properties", "required", "additionalProperties", "items",
                        "anyOf", "description", "title"})

_ANTHROPIC_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname",
                                "uri", "ipv4", "ipv6", "uuid"})
_ANTHROPIC = frozenset({"enum", "const", "allOf", "format", "minItems"})
_OPENAI = frozenset({"enum", "const", "pattern", "format", "minimum", "maximum",
                     "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems",
                     "maxItems"})
_GEMINI = frozenset({"enum", "format", "minimum", "maximum", "minItems", "maxItems",
                     "minLength", "maxLength", "pattern", "nullable"})


#: The most subschemas (JSON objects) an output schema may have once its ``$ref`` are
#: inlined. Each use of a definition is a copy, so a definition used twice by one used
#: twice, and so on, doubles at every level: twenty levels of a 2 KB schema inline to
#: millions of characters. Ten thousand is twice what any provider takes natively
#: (OpenAI allows 5,000 object properties in all: platform.openai.com/docs/guides/
#: structured-outputs, "Objects have limitations on nesting depth and size").
MAX_INLINED = 10_000


def inline_refs(schema: Schema) -> Schema:
    """``schema`` with every local ``$ref`` replaced by what it names and ``$defs`` /
    ``definitions`` dropped; ConfigError for a recursive or unresolvable one, or one
    that inlines to more than :data:`MAX_INLINED` subschemas (counted as they are
    made, so a fan-out is refused before it is built)."""
    defs: Dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        for name, value in (schema.get(key) or {}).items():
            defs[f"#/{key}/{name}"] = value
    made = [0]

    def walk(node: Any, seen: Tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        made[0] += 1
        if made[0] > MAX_INLINED:
            raise ConfigError(
                f"the output schema inlines to more than {MAX_INLINED:,} subschemas (its "
                "$refs are copied at each use, and they fan out); no provider takes a "
                "schema that large: share fewer definitions, or make the schema smaller")
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                raise ConfigError(f"the output schema is recursive ({ref} refers to itself); "
                                  "recursive output types are not supported")
            if ref not in defs:
                raise ConfigError(f"the output schema's $ref {ref!r} names no definition")
            target = walk(defs[ref], seen + (ref,))
            rest = {k: walk(v, seen) for k, v in node.items() if k != "$ref"}
            return {**target, **rest} if rest else target
        return {k: walk(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    out: Schema = walk(schema, ())
    return out


# -- the shared strict shape ---------------------------------------------------------

def strict_form(schema: Schema) -> Schema:
    """The strict shape of ``schema`` (see the module docstring); ``schema`` untouched."""
    out: Schema = _strict(copy.deepcopy(schema))
    return out


def _strict(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if "default" in node:
        _describe(node, {"default": node.pop("default")})
    if "anyOf" in node or "oneOf" in node:
        node["anyOf"] = [_strict(s) for s in node.pop("anyOf", None) or node.pop("oneOf")]
    if "allOf" in node:
        node["allOf"] = [_strict(s) for s in node["allOf"]]
    if "prefixItems" in node:
        members = [_strict(s) for s in node.pop("prefixItems")]
        unique = [m for i, m in enumerate(members) if m not in members[:i]]
        node["items"] = unique[0] if len(unique) == 1 else {"anyOf": unique}
        _describe(node, {"order": "one item of each listed type, in that order"})
    if _is_map(node):
        value = _strict(node.pop("additionalProperties"))
        node["type"] = "array"
        node["items"] = {"type": "object",
                         "properties": {"key": {"type": "string"}, "value": value},
                         "required": ["key", "value"], "additionalProperties": False}
        _describe(node, {"note": "a mapping, as a list of key/value pairs"})
        return node
    if "items" in node:
        node["items"] = _strict(node["items"])
    if node.get("type") == "object" or "properties" in node:
        properties = {k: _strict(v) for k, v in (node.get("properties") or {}).items()}
        required = set(node.get("required") or ())
        for name, prop in properties.items():
            if name not in required:
                properties[name] = _nullable(prop)
        node["type"] = "object"
        node["properties"] = properties
        node["required"] = list(properties)
        node["additionalProperties"] = False
    return node


def _is_map(node: Schema) -> bool:
    extra = node.get("additionalProperties")
    return (node.get("type") == "object" and not node.get("properties")
            and isinstance(extra, dict))


def _nullable(prop: Schema) -> Schema:
    if _takes_null(prop):
        return prop
    kind = prop.get("type")
    if isinstance(kind, str) and "enum" not in prop and "const" not in prop:
        return {**prop, "type": [kind, "null"]}
    if isinstance(kind, list):
        return {**prop, "type": kind + ["null"]}
    return {"anyOf": [prop, {"type": "null"}]}


def _takes_null(prop: Any) -> bool:
    if not isinstance(prop, dict):
        return prop is True
    if not prop:
        return True
    kind = prop.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in prop:
        return None in prop["enum"]
    return any(_takes_null(s) for s in prop.get("anyOf") or ())


def _describe(node: Schema, extra: Dict[str, Any]) -> None:
    """Append ``{key: value}`` notes to the node's description."""
    note = "{" + ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" if not isinstance(v, str)
                           else f"{k}: {v}" for k, v in extra.items()) + "}"
    description = node.get("description")
    node["description"] = f"{description}\n\n{note}" if description else note


# -- dialects -------------------------------------------------------------------------

def for_anthropic(schema: Schema) -> Schema:
    """Anthropic's ``output_config.format`` schema (see the module docstring)."""
    out: Schema = _prune(strict_form(schema), _ANTHROPIC, _anthropic_keep)
    return out


def for_openai(schema: Schema) -> Schema:
    """OpenAI strict mode's schema: Chat Completions ``response_format`` and the
    Responses ``text.format`` (see the module docstring)."""
    out: Schema = _prune(strict_form(schema), _OPENAI, None)
    return out


def for_gemini(schema: Schema) -> Schema:
    """Gemini's response schema subset, for the ``chat.gemini`` preset."""
    out: Schema = _gemini(_prune(strict_form(schema), _GEMINI | {"propertyOrdering"}, None))
    return out


def _anthropic_keep(key: str, value: Any) -> bool:
    if key == "format":
        return value in _ANTHROPIC_FORMATS
    if key == "minItems":
        return value in (0, 1)
    return True


def _prune(node: Any, allowed: FrozenSet[str], keep: Optional[Any]) -> Any:
    if isinstance(node, list):
        return [_prune(item, allowed, keep) for item in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    moved: Dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {k: _prune(v, allowed, keep) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "allOf"):
            out[key] = _prune(value, allowed, keep)
        elif key in _STRUCTURE or (key in allowed and (keep is None or keep(key, value))):
            out[key] = value
        else:
            moved[key] = value
    if moved:
        _describe(out, moved)
    return out


def _gemini(node: Any) -> Any:
    """Gemini's Schema: one ``type`` with ``nullable``, no ``additionalProperties``,
    string-only enums, ``propertyOrdering`` so objects come back in schema order."""
    if isinstance(node, list):
        return [_gemini(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {k: _gemini(v) if k in ("items", "anyOf") else v for k, v in node.items()}
    node.pop("additionalProperties", None)
    if "properties" in node:
        node["properties"] = {k: _gemini(v) for k, v in node["properties"].items()}
        node["propertyOrdering"] = list(node["properties"])
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) == 1:
            node["type"] = others[0]
            if "null" in kind:
                node["nullable"] = True
        else:
            del node["type"]
            node["anyOf"] = [{"type": k} for k in others]
            if "null" in kind:
                node["nullable"] = True
    any_of = node.get("anyOf")
    if isinstance(any_of, list) and any(s == {"type": "null"} for s in any_of):
        rest = [s for s in any_of if s != {"type": "null"}]
        node["nullable"] = True
        if len(rest) == 1:
            del node["anyOf"]
            node.update({k: v for k, v in rest[0].items() if k not in node})
        else:
            node["anyOf"] = rest
    enum = node.get("enum")
    if isinstance(enum, list) and not all(isinstance(v, str) for v in enum if v is not None):
        values = node.pop("enum")
        if None in values:
            node["nullable"] = True
        _describe(node, {"one of": [v for v in values if v is not None]})
    elif isinstance(enum, list) and None in enum:
        node["enum"] = [v for v in enum if v is not None]
        node["nullable"] = True
        node.setdefault("type", "string")
    return node


# -- answers back ----------------------------------------------------------------------

def restore(schema: Any, value: Any) -> Any:
    """An answer in :func:`strict_form`'s shape in the shape of ``schema``: pair lists
    become dicts, and a null for a property that is optional and does not take null
    is dropped. A value already in ``schema``'s shape comes back equal."""
    if not isinstance(schema, dict):
        return value
    branches = schema.get("anyOf")
    if isinstance(branches, list) and isinstance(value, (list, dict)):
        kind = "object" if isinstance(value, dict) else "array"
        for branch in branches:
            if not isinstance(branch, dict):
                continue
            if kind == "array" and (branch.get("type") == "array" or _is_map(branch)) or (
                    kind == "object" and (branch.get("type") == "object" or "properties" in branch)):
                return restore(branch, value)
        return value
    if isinstance(value, list) and _is_map(schema):
        pairs = [p for p in value if isinstance(p, dict) and set(p) == {"key", "value"}]
        if len(pairs) == len(value) and all(isinstance(p["key"], str) for p in pairs):
            inner = schema["additionalProperties"]
            return {p["key"]: restore(inner, p["value"]) for p in pairs}
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        extra = schema.get("additionalProperties")
        out: Dict[str, Any] = {}
        for key, item in value.items():
            prop = properties.get(key)
            if prop is None:
                out[key] = restore(extra, item) if isinstance(extra, dict) else item
            elif item is None and key not in required and not _takes_null(prop):
                continue
            else:
                out[key] = restore(prop, item)
        return out
    if isinstance(value, list):
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list):
            return [restore(prefix[i], v) if i < len(prefix) else v for i, v in enumerate(value)]
        return [restore(schema.get("items"), v) for v in value]
    return value
