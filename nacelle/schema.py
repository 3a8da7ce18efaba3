"""JSON Schema from a Python signature and docstring, and arguments back to Python.

``function_schema(fn)`` reads the parameters' annotations and the docstring and
returns the tool description, the input schema, and the converters that turn
validated JSON values back into the annotated Python types before the call.

What maps to what (every object schema says ``additionalProperties: false``):

============================  ==============================================
``str`` ``int`` ``float``     ``string`` ``integer`` ``number``
``bool`` ``None``             ``boolean`` ``null``
``Optional[T]``, ``T | None``  ``anyOf: [T, {"type": "null"}]`` (other unions: ``anyOf``)
``list[T]``, ``Sequence[T]``  ``array`` of ``T``
``tuple[T, ...]``             ``array`` of ``T``, converted back to a tuple
``tuple[A, B]``               ``array`` with ``prefixItems`` and min/maxItems
``set[T]``, ``frozenset[T]``  ``array`` with ``uniqueItems``, converted back to a set
``dict[str, T]``              ``object`` whose ``additionalProperties`` is ``T``
``Literal[...]``, ``Enum``    ``enum`` (Enum members are passed, not their values)
dataclass, ``TypedDict``      nested ``object`` (a dataclass is rebuilt)
``Any``, no annotation        ``{}`` (any JSON value)
============================  ==============================================

``Annotated[T, "text"]`` gives the description (it wins over the docstring), and a
``dict`` in ``Annotated`` metadata is merged into the property's schema — the way
to say ``{"minimum": 1, "maximum": 50}``. Parameter descriptions come from Google
(``Args:``), NumPy (``Parameters`` underlined) or Sphinx (``:param x:``) docstrings.
A type the generator cannot express is a :class:`~nacelle.errors.ConfigError` at
decoration time naming the parameter, never a schema the model cannot satisfy.

Core module: imports the standard library, ``errors``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import re
import sys
import typing
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import ConfigError

__all__ = ["Converter", "function_schema", "parse_docstring", "type_schema"]

Converter = Callable[[Any], Any]

from typing import Annotated, get_args, get_origin  # 3.9+, with get_type_hints(include_extras=)

def _is_typeddict(tp: Any) -> bool:
    # typing.is_typeddict is 3.10+; every TypedDict class, on every version, is a dict
    # subclass with __total__.
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")

_UnionType = getattr(__import__("types"), "UnionType", None)  # ``int | None`` on 3.10+

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
_JSON_SCALARS = (str, int, float, bool, type(None))


def _identity(value: Any) -> Any:
    return value


def _to_float(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _to_int(value: Any) -> Any:
    # Validators accept 3.0 as an integer (JSON has one number type); the function wants 3.
    return int(value) if isinstance(value, float) else value


class _Unsupported(Exception):
    """A type the generator cannot express; turned into a ConfigError naming the parameter."""


def type_schema(tp: Any) -> Tuple[Dict[str, Any], Converter]:
    """The JSON Schema for annotation ``tp`` and the converter from JSON back to it."""
    description = ""
    extra: Dict[str, Any] = {}
    if get_origin(tp) is Annotated:
        tp, *meta = get_args(tp)
        for item in meta:
            if isinstance(item, str):
                description = item
            elif isinstance(item, dict):
                extra.update(item)
    schema, convert = _schema(tp)
    if extra:
        schema = {**schema, **extra}
    if description:
        schema = {**schema, "description": description}
    return schema, convert


def _schema(tp: Any) -> Tuple[Dict[str, Any], Converter]:
    if tp is Any or tp is inspect.Parameter.empty:
        return {}, _identity
    if tp is None or tp is type(None):
        return {"type": "null"}, _identity
    if tp in _SCALARS:
        convert = _to_float if tp is float else _to_int if tp is int else _identity
        return {"type": _SCALARS[tp]}, convert
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _object_schema(tp, _dataclass_fields(tp), build=tp)
    if _is_typeddict(tp):
        return _object_schema(tp, _typeddict_fields(tp), build=None)
    origin, args = get_origin(tp), get_args(tp)
    if origin is typing.Union or (_UnionType is not None and isinstance(tp, _UnionType)):
        return _union_schema(args)
    if origin is typing.Literal:
        return _literal_schema(args)
    if tp in (list, tuple, set, frozenset) or origin in (
        list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Set,
        collections.abc.MutableSequence, collections.abc.Iterable, collections.abc.Collection,
    ):
        return _array_schema(origin or tp, args)
    if tp is dict or origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        return _dict_schema(args)
    raise _Unsupported(f"{_type_name(tp)} cannot be expressed as JSON Schema")


def _enum_schema(cls: Any) -> Tuple[Dict[str, Any], Converter]:
    values = [member.value for member in cls]
    if not values or not all(isinstance(v, _JSON_SCALARS) for v in values):
        raise _Unsupported(f"enum {cls.__name__} must have JSON scalar values")
    schema: Dict[str, Any] = {"enum": values}
    kind = _common_type(values)
    if kind:
        schema = {"type": kind, "enum": values}
    return schema, cls


def _literal_schema(args: Tuple[Any, ...]) -> Tuple[Dict[str, Any], Converter]:
    values = [a.value if isinstance(a, enum.Enum) else a for a in args]
    if not all(isinstance(v, _JSON_SCALARS) for v in values):
        raise _Unsupported("Literal values must be str, int, float, bool or None")
    kind = _common_type(values)
    return ({"type": kind, "enum": values} if kind else {"enum": values}), _identity


def _common_type(values: List[Any]) -> str:
    kinds = {"boolean" if isinstance(v, bool) else _SCALARS.get(type(v), "null") for v in values}
    if kinds == {"integer", "number"}:
        return "number"
    return kinds.pop() if len(kinds) == 1 and "null" not in kinds else ""


def _union_schema(args: Tuple[Any, ...]) -> Tuple[Dict[str, Any], Converter]:
    members = [a for a in args if a is not type(None)]
    nullable = len(members) < len(args)
    parts = [_schema(a) for a in members]
    schemas = [s for s, _ in parts]
    if nullable:
        schemas.append({"type": "null"})
    if len(schemas) == 1:
        return schemas[0], parts[0][1]
    converters = [c for _, c in parts]
    if len(converters) == 1:
        inner = converters[0]

        def convert_optional(value: Any) -> Any:
            return None if value is None else inner(value)

        return {"anyOf": schemas}, convert_optional
    # A value valid for several members is passed as JSON gave it: guessing which
    # Python type was meant would be worse than not converting.
    return {"anyOf": schemas}, _identity


def _array_schema(origin: Any, args: Tuple[Any, ...]) -> Tuple[Dict[str, Any], Converter]:
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if args == ((),):  # Tuple[()]
            args = ()
        items = [_schema(a) for a in args]
        converters = [c for _, c in items]
        fixed: Dict[str, Any] = {"type": "array", "prefixItems": [s for s, _ in items],
                                 "minItems": len(items), "maxItems": len(items)}
        return fixed, lambda value: tuple(c(v) for c, v in zip(converters, value))
    item_type = args[0] if args else Any
    item_schema, item_convert = _schema(item_type)
    schema: Dict[str, Any] = {"type": "array"}
    if item_schema:
        schema["items"] = item_schema
    if origin in (set, frozenset, collections.abc.Set):
        schema["uniqueItems"] = True
        build = frozenset if origin is frozenset else set
        return schema, lambda value: build(item_convert(v) for v in value)
    if origin is tuple:
        return schema, lambda value: tuple(item_convert(v) for v in value)
    if item_convert is _identity:
        return schema, _identity
    return schema, lambda value: [item_convert(v) for v in value]


def _dict_schema(args: Tuple[Any, ...]) -> Tuple[Dict[str, Any], Converter]:
    if args and args[0] is not str:
        raise _Unsupported("dict keys must be str (JSON object keys are strings)")
    value_schema, value_convert = _schema(args[1]) if args else ({}, _identity)
    schema: Dict[str, Any] = {"type": "object"}
    if value_schema:
        schema["additionalProperties"] = value_schema
    if value_convert is _identity:
        return schema, _identity
    return schema, lambda value: {k: value_convert(v) for k, v in value.items()}


def _dataclass_fields(cls: type) -> List[Tuple[str, Any, bool, Any]]:
    hints = _hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        default = f.default if f.default is not dataclasses.MISSING else dataclasses.MISSING
        out.append((f.name, hints.get(f.name, Any), not has_default, default))
    return out


def _typeddict_fields(cls: Any) -> List[Tuple[str, Any, bool, Any]]:
    hints = _hints(cls)
    required = getattr(cls, "__required_keys__", frozenset(hints) if cls.__total__ else frozenset())
    out = []
    for name, hint in hints.items():
        # NotRequired/Required wrappers (3.11+) are already reflected in __required_keys__.
        origin = get_origin(hint)
        if origin is not None and getattr(origin, "_name", "") in ("Required", "NotRequired"):
            hint = get_args(hint)[0]
        out.append((name, hint, name in required, dataclasses.MISSING))
    return out


def _hints(obj: Any) -> Dict[str, Any]:
    globalns: Optional[Dict[str, Any]] = None
    if isinstance(obj, type) and obj.__module__ not in sys.modules:
        # A class from code run outside any module (exec, a notebook cell under another
        # name): 3.10+ then reads no globals, 3.9 raises KeyError; do as 3.10 does.
        globalns = {}
    try:
        return typing.get_type_hints(obj, globalns=globalns, include_extras=True)
    except Exception as exc:  # NameError for an unresolvable forward reference, TypeError for `X | Y` on 3.9
        raise _Unsupported(f"its annotations cannot be resolved ({exc})") from None


def _object_schema(cls: type, fields: List[Tuple[str, Any, bool, Any]],
                   build: Optional[type]) -> Tuple[Dict[str, Any], Converter]:
    docs = parse_docstring(cls.__doc__ or "")[1] if _own_doc(cls) else {}
    properties: Dict[str, Any] = {}
    required: List[str] = []
    converters: Dict[str, Converter] = {}
    for name, hint, is_required, default in fields:
        try:
            prop, convert = type_schema(hint)
        except _Unsupported as exc:
            raise _Unsupported(f"field {name!r} of {cls.__name__}: {exc}") from None
        if "description" not in prop and docs.get(name):
            prop = {**prop, "description": docs[name]}
        if default is not dataclasses.MISSING and _is_json(default):
            prop = {**prop, "default": _jsonable(default)}
        properties[name] = prop
        converters[name] = convert
        if is_required:
            required.append(name)
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False

    def convert_object(value: Any) -> Any:
        converted = {k: converters[k](v) if k in converters else v for k, v in value.items()}
        return build(**converted) if build is not None else converted

    return schema, convert_object


def _own_doc(cls: type) -> bool:
    # A dataclass without a docstring gets its signature as __doc__; that is not prose.
    doc = cls.__doc__ or ""
    return bool(doc) and not doc.startswith(f"{cls.__name__}(")


def _is_json(value: Any) -> bool:
    if isinstance(value, enum.Enum):
        return isinstance(value.value, _JSON_SCALARS)
    if isinstance(value, (list, tuple)):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return isinstance(value, _JSON_SCALARS)


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _type_name(tp: Any) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)


# -- docstrings --------------------------------------------------------------------

_GOOGLE_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Attributes|Returns?|"
    r"Raises|Yields?|Examples?|Notes?|Warnings?|See Also|References|Todo)\s*:\s*$",
    re.IGNORECASE,
)
_GOOGLE_PARAM_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args",
                          "keyword arguments", "attributes"}
_NUMPY_PARAM_SECTIONS = {"parameters", "other parameters", "attributes"}
_SPHINX_FIELD = re.compile(r"^:(param|parameter|arg|argument|key|keyword|ivar|var|type|"
                           r"returns?|rtype|raises?|except|yields?|meta)\b")
_SPHINX_PARAM = re.compile(
    r"^:(?:param|parameter|arg|argument|key|keyword|ivar|var)\s+(?:[^:]*?\s)?\*{0,2}(\w+)\s*:\s*(.*)$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")


def parse_docstring(doc: str) -> Tuple[str, Dict[str, str]]:
    """Split a docstring into (description, {parameter: description}).

    The description is the prose before the first section (``Args:``, a NumPy
    underlined header, or a Sphinx ``:field:``); continuation lines are joined with
    single spaces in parameter descriptions.
    """
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    description: List[str] = []
    params: Dict[str, str] = {}
    in_prose = True  # prose after the first section belongs to that section, not the description
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        underline = i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip() or "x")
        if underline and stripped:
            in_prose = False
            i = _numpy_section(lines, i, params)
        elif _GOOGLE_SECTION.match(stripped):
            in_prose = False
            i = _google_section(lines, i, params)
        elif _SPHINX_FIELD.match(stripped):
            in_prose = False
            i = _sphinx_field(lines, i, params)
        else:
            if in_prose:
                description.append(line)
            i += 1
    return "\n".join(description).strip(), params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google_section(lines: List[str], i: int, params: Dict[str, str]) -> int:
    header = lines[i].strip().rstrip(":").strip().lower()
    base = _indent(lines[i])
    i += 1
    current = None
    entry_indent = None
    while i < len(lines):
        line = lines[i]
        if line.strip() and _indent(line) <= base:
            break
        if line.strip():
            if entry_indent is None:
                entry_indent = _indent(line)
            match = _GOOGLE_ENTRY.match(line.strip()) if _indent(line) == entry_indent else None
            if match and header in _GOOGLE_PARAM_SECTIONS:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and header in _GOOGLE_PARAM_SECTIONS:
                params[current] = (params[current] + " " + line.strip()).strip()
        i += 1
    return i


def _numpy_section(lines: List[str], i: int, params: Dict[str, str]) -> int:
    header = lines[i].strip().lower()
    base = _indent(lines[i])
    i += 2
    current = None
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if line.strip() and _indent(line) <= base and re.fullmatch(r"-{3,}", nxt or "x"):
            break
        if line.strip() and _indent(line) <= base:
            match = _NUMPY_ENTRY.match(line.strip())
            current = match.group(1) if match and header in _NUMPY_PARAM_SECTIONS else None
            if current:
                params[current] = ""
        elif line.strip() and current:
            params[current] = (params[current] + " " + line.strip()).strip()
        i += 1
    return i


def _sphinx_field(lines: List[str], i: int, params: Dict[str, str]) -> int:
    match = _SPHINX_PARAM.match(lines[i].strip())
    current = match.group(1) if match else None
    if match is not None and current:
        params[current] = match.group(2).strip()
    i += 1
    while i < len(lines) and lines[i].strip() and not _SPHINX_FIELD.match(lines[i].strip()):
        if current:
            params[current] = (params[current] + " " + lines[i].strip()).strip()
        i += 1
    return i


# -- functions ------------------------------------------------------------------------

def function_schema(
    fn: Callable[..., Any], context_type: type,
) -> Tuple[str, Dict[str, Any], Dict[str, Converter], Optional[str]]:
    """Describe ``fn`` for a model.

    Returns ``(description, schema, converters, context_parameter)``: the docstring's
    prose, the input schema, a converter per parameter that needs one, and the name of
    the parameter annotated ``context_type`` (passed by the loop, not in the schema), or
    None. Raises ConfigError naming the parameter the generator cannot express.
    """
    where = getattr(fn, "__qualname__", repr(fn))
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot read the signature of {where}: {exc}") from None
    try:
        hints = _hints(fn)
    except _Unsupported as exc:
        raise ConfigError(f"tool {where}: {exc}") from None
    description, docs = parse_docstring(inspect.getdoc(fn) or "")
    properties: Dict[str, Any] = {}
    required: List[str] = []
    converters: Dict[str, Converter] = {}
    context_parameter = None
    for name, parameter in signature.parameters.items():
        hint = hints.get(name, parameter.annotation)
        # Python < 3.11 reads ``ctx: ToolContext = None`` as Optional[ToolContext].
        if (hint is context_type or hint == Optional[context_type]
                or (name == "ctx" and hint is inspect.Parameter.empty)):
            context_parameter = name
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD,
                              parameter.POSITIONAL_ONLY):
            raise ConfigError(
                f"tool {where}: parameter {name!r} is {parameter.kind.description}; "
                "a tool's parameters must be nameable keyword arguments")
        try:
            prop, convert = type_schema(hint)
        except _Unsupported as exc:
            raise ConfigError(f"tool {where}: parameter {name!r}: {exc}") from None
        if "description" not in prop and docs.get(name):
            prop = {**prop, "description": docs[name]}
        if parameter.default is parameter.empty:
            required.append(name)
        elif _is_json(parameter.default):
            prop = {**prop, "default": _jsonable(parameter.default)}
        properties[name] = prop
        if convert is not _identity:
            converters[name] = convert
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return description, schema, converters, context_parameter

