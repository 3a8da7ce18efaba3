"""Tools: the Tool protocol, ``@tool``, and the checks every tool passes.

``@tool`` turns a function into a :class:`FunctionTool`: the schema comes from the
signature and docstring (``schema.py``), input is validated before the call
(``validation.py``), arguments are converted back to the annotated Python types
(Enum members, dataclasses, tuples, sets), and the return value becomes what the model
reads — a str as is; a ``Text``, ``Image`` or ``Document``, or a list or tuple of them
(a str among them is a Text), as a tuple of parts (:func:`tool_output`); anything else
as JSON (values JSON cannot hold are written with ``str``, so a tool returning a datetime
still answers rather than failing the model's call).

A FunctionTool pickles by reference: it is rebuilt by importing the function's
module and looking the name up, so an Agent holding tools made from module-level
functions pickles; a tool made from a lambda or a nested function does not, and
says so. A FunctionTool is still callable like the function it wraps.

``tools_by_name`` is the one place tool names are checked (the providers accept
``^[a-zA-Z0-9_-]{1,64}$``) and tool schemas are checked to be JSON object schemas;
the Agent and the loop both use it.

Core module: imports the standard library, ``bounded_json``, ``context``, ``errors`` and
``messages``, and ``schema`` with the first ``@tool``; never ``validation``, which ``toolcalls``
applies before the call.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib
import json
import re
import sys
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, Generic, Iterable, List, Optional, Protocol, Sequence,
    Tuple, TypeVar, Union, overload, runtime_checkable,
)

from . import bounded_json
from .context import ToolContext
from .errors import ConfigError
from .messages import Document, Image, Text, ToolMedia, decoded_size

if TYPE_CHECKING:
    # A checker reads ParamSpec from typing_extensions whatever the target version: its
    # stubs ship inside every checker (typeshed), so this import costs a user nothing.
    # At run time typing_extensions is never imported: the core is stdlib-only.
    from typing_extensions import ParamSpec

    from .schema import Converter
elif sys.version_info >= (3, 10):
    from typing import ParamSpec  # novermin: 3.10+ only, behind the version check
else:  # 3.9 has no ParamSpec; a TypeVar stands in for it, since only checkers read it
    ParamSpec = TypeVar

__all__ = ["FunctionTool", "Tool", "ToolLike", "ToolOutput", "Toolset", "expand_tools",
           "from_hints", "is_toolset", "metadata", "tool", "tool_output", "tools_by_name"]

P = ParamSpec("P")
R = TypeVar("R")

#: What a tool's ``run`` may return: text, or media parts (one, or a list or tuple of
#: them, where a str stands for a Text).
ToolOutput = Union[str, Text, Image, Document, Sequence[Union[str, Text, Image, Document]]]

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")  # \Z: "$" lets a final "\n" through


@runtime_checkable
class Tool(Protocol):
    """Anything with a name, a description, a JSON object schema and ``run``.

    ``run`` gets the validated input and a :class:`ToolContext` and returns text, or
    media (a Text, Image or Document, or a list of them: see :data:`ToolOutput`); it
    reports failure by raising, and the message is what the model reads. A tool may
    also set ``exclusive`` (its calls in one turn run one at a time, in the model's
    order — writers and commands) and the metadata approval policies read, in MCP's
    vocabulary and with MCP's defaults for a tool that says nothing: ``read_only``
    (False), ``destructive`` (True), ``idempotent`` (False), ``open_world`` (True).
    A policy reads them with :func:`metadata`, so a missing attribute is the cautious
    default, never an error.

    Limits the loop reads, each optional (None: none): ``call_timeout`` (seconds from
    when the model asked; a call still running then fails with "timed out" and its
    thread is abandoned, as for the Agent's ``tool_timeout``, the sooner of the two
    applying), ``max_concurrency`` (at most this many of the tool's calls run at once)
    and ``max_result_chars`` (cut a longer result, overriding the Agent's cap; 0: never
    cut). ``@tool(timeout=...)`` sets ``call_timeout``: the attribute is not named
    ``timeout`` because tools already use that name for their own limit on a command
    or a request, which should end the call with the tool's own, fuller answer.
    """

    # Read-only for a checker, so a tool class may compute them as properties.
    @property
    def name(self) -> str:
        ...

    @property
    def description(self) -> str:
        ...

    @property
    def schema(self) -> Dict[str, Any]:
        ...

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> ToolOutput:
        ...


class Toolset(Protocol):
    """Anything whose ``current()`` lists its tools of the moment (``client.tools(
    live=True)`` from ``nacelle.mcp``); see :func:`is_toolset`."""

    def current(self) -> Iterable[Tool]:
        ...


#: What an Agent's ``tools=`` holds: tools and toolsets.
ToolLike = Union[Tool, Toolset]


class FunctionTool(Generic[P, R]):
    """A Tool made from a Python function by :func:`tool`.

    ``run(input, ctx)`` converts the validated input to the annotated types, passes
    ``ctx`` to the parameter annotated ``ToolContext`` (if any), calls the function
    and returns its result as text, or as a tuple of media parts (:func:`tool_output`).

    For a type checker it is ``FunctionTool[P, R]``: the wrapped function's parameters
    and return type, so calling a tool directly is checked as calling the function.
    (The generic is this class, not the :class:`Tool` protocol: every tool, an MCP
    server's included, is a ``Tool``, and most have no Python signature to keep.)
    Python 3.9 has no ParamSpec to subscript at run time, so there write
    ``FunctionTool[[int], str]`` only where annotations are not evaluated (quoted, or
    under ``from __future__ import annotations``).
    """

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        exclusive: bool = False,
        read_only: bool = False,
        destructive: Optional[bool] = None,
        idempotent: bool = False,
        open_world: bool = True,
        timeout: Optional[float] = None,
        max_concurrency: Optional[int] = None,
        max_result_chars: Optional[int] = None,
        defer: bool = False,
    ) -> None:
        if not callable(fn):
            raise ConfigError(f"@tool needs a function, got {type(fn).__name__}")
        from .schema import function_schema  # with the first @tool, not with import nacelle

        doc_description, schema, converters, context_parameter = function_schema(fn, ToolContext)
        self.fn = fn
        self.name = name if name is not None else getattr(fn, "__name__", "")
        self.description = description if description is not None else doc_description
        self.schema = schema
        self.exclusive = bool(exclusive)
        self.read_only = bool(read_only)
        # As in MCP, destructive only means something for a tool that writes: a
        # read-only tool is not destructive unless it says so.
        self.destructive = (not self.read_only) if destructive is None else bool(destructive)
        self.idempotent = bool(idempotent)
        self.open_world = bool(open_world)
        self.call_timeout, self.max_concurrency, self.max_result_chars = check_limits(
            timeout, max_concurrency, max_result_chars, "timeout")
        self.defer = bool(defer)  # left out of the list sent until a tool search finds it
        self._converters: Dict[str, Converter] = converters
        self._context_parameter = context_parameter
        if not NAME_PATTERN.match(self.name):
            raise ConfigError(
                f"tool name {self.name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$ "
                "(pass @tool(name=...) to choose another)")
        functools.update_wrapper(self, fn, updated=())

    def __repr__(self) -> str:
        return f"<FunctionTool {self.name!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> ToolOutput:
        arguments = {
            key: self._converters[key](value) if key in self._converters else value
            for key, value in input.items()
        }
        if self._context_parameter is not None:
            arguments[self._context_parameter] = ctx
        call: Callable[..., Any] = self.fn  # by name: the schema vouches for the arguments
        return tool_output(call(**arguments))

    def __reduce__(self) -> Tuple[Any, ...]:
        module = getattr(self.fn, "__module__", None)
        qualname = getattr(self.fn, "__qualname__", "")
        if not module or "<" in qualname:
            import pickle

            raise pickle.PicklingError(
                f"tool {self.name!r} wraps {qualname or self.fn!r}, which cannot be found by "
                "name; make tools from module-level functions to pickle them")
        return (_restore_tool, (module, qualname, self.name, self.description,
                                self.exclusive, self.read_only, self.destructive,
                                self.idempotent, self.open_world, self.call_timeout,
                                self.max_concurrency, self.max_result_chars, self.defer))


def _restore_tool(module: str, qualname: str, name: str, description: str,
                  exclusive: bool, read_only: bool, destructive: Optional[bool] = None,
                  idempotent: bool = False, open_world: bool = True,
                  timeout: Optional[float] = None, max_concurrency: Optional[int] = None,
                  max_result_chars: Optional[int] = None,
                  defer: bool = False) -> FunctionTool[..., Any]:
    # The arguments after read_only default so a tool pickled before they existed loads.
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    options = dict(exclusive=exclusive, read_only=read_only, idempotent=idempotent,
                   open_world=open_world,
                   destructive=(not read_only) if destructive is None else destructive)
    limits = dict(call_timeout=timeout, max_concurrency=max_concurrency,
                  max_result_chars=max_result_chars, defer=defer)
    if (isinstance(found, FunctionTool) and found.name == name
            and found.description == description
            and all(getattr(found, key) == value
                    for key, value in {**options, **limits}.items())):
        return found
    fn = found.fn if isinstance(found, FunctionTool) else found
    return FunctionTool(fn, name=name, description=description, timeout=timeout,
                        max_concurrency=max_concurrency, max_result_chars=max_result_chars,
                        defer=defer, **options)


def check_limits(timeout: Any, max_concurrency: Any, max_result_chars: Any,
                 timeout_name: str = "call_timeout") -> Tuple[Optional[float], Optional[int],
                                                               Optional[int]]:
    """A tool's limits (see :class:`Tool`), checked: ConfigError naming a bad one."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise ConfigError(f"{timeout_name} must be a positive number of seconds or None, "
                          f"got {timeout!r:.40}")
    for label, value, least in (("max_concurrency", max_concurrency, 1),
                                ("max_result_chars", max_result_chars, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < least):
            raise ConfigError(f"{label} must be a whole number of at least {least} or None, "
                              f"got {value!r:.40}")
    return timeout, max_concurrency, max_result_chars


def from_hints(annotations: Any) -> Tuple[bool, bool, bool, bool]:
    """``read_only``, ``destructive``, ``idempotent``, ``open_world`` from MCP annotations.

    ``readOnlyHint``, ``destructiveHint``, ``idempotentHint`` and ``openWorldHint``,
    each with the MCP specification's default when missing or not a boolean; as the
    specification says, ``destructiveHint`` only means something when the tool is not
    read-only. A server's hints are its claim: see :func:`nacelle.policy.secure`.
    """
    hints = annotations if isinstance(annotations, dict) else {}
    read_only = hints.get("readOnlyHint") is True
    return (read_only, not read_only and hints.get("destructiveHint") is not False,
            hints.get("idempotentHint") is True, hints.get("openWorldHint") is not False)


def metadata(tool: Any) -> Dict[str, bool]:
    """A tool's ``read_only``, ``destructive``, ``idempotent`` and ``open_world``.

    Whatever a tool does not declare takes MCP's cautious default (not read-only,
    destructive, not idempotent, open world), so a policy never trusts a tool for
    saying nothing.
    """
    read_only = bool(getattr(tool, "read_only", False))
    destructive = getattr(tool, "destructive", None)
    return {
        "read_only": read_only,
        "destructive": (not read_only) if destructive is None else bool(destructive),
        "idempotent": bool(getattr(tool, "idempotent", False)),
        "open_world": bool(getattr(tool, "open_world", True)),
    }


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]:
    ...


@overload
def tool(
    fn: None = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    exclusive: bool = False,
    read_only: bool = False,
    destructive: Optional[bool] = None,
    idempotent: bool = False,
    open_world: bool = True,
    timeout: Optional[float] = None,
    max_concurrency: Optional[int] = None,
    max_result_chars: Optional[int] = None,
    defer: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]:
    ...


def tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    exclusive: bool = False,
    read_only: bool = False,
    destructive: Optional[bool] = None,
    idempotent: bool = False,
    open_world: bool = True,
    timeout: Optional[float] = None,
    max_concurrency: Optional[int] = None,
    max_result_chars: Optional[int] = None,
    defer: bool = False,
) -> Any:
    """Make a Tool from a function: ``@tool`` or ``@tool(name=..., description=...)``.

    ``exclusive=True`` makes a turn's calls of this tool run one at a time, in the
    model's order. ``read_only``, ``destructive`` (default: not ``read_only``),
    ``idempotent`` and ``open_world`` are what approval policies such as
    :func:`nacelle.policy.secure` read; the defaults are MCP's cautious ones. A type
    the schema generator cannot express raises ConfigError here, naming the parameter.

    Limits, each None for none: ``timeout`` (seconds; a call still running then fails
    as timed out and is abandoned, the sooner of it and the Agent's ``tool_timeout``
    applying), ``max_concurrency`` (at most this many of its calls at once, across a
    turn's calls) and ``max_result_chars`` (a longer result is cut, with a note saying
    how much; overrides the Agent's ``max_result_chars``, 0 never cuts).

    ``defer=True`` keeps the tool out of the list the model is first sent: an Agent
    with a ``ToolSearch`` (``nacelle.tool_search``) offers it once a search finds it.

    Typed with overloads, so both forms keep the function's signature for a checker
    (``FunctionTool[P, R]``) and a misspelt option is an error there too.
    """
    def decorate(f: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(f, name=name, description=description, exclusive=exclusive,
                            read_only=read_only, destructive=destructive,
                            idempotent=idempotent, open_world=open_world, timeout=timeout,
                            max_concurrency=max_concurrency,
                            max_result_chars=max_result_chars, defer=defer)

    return decorate(fn) if fn is not None else decorate


def _json_default(value: Any) -> Any:
    if isinstance(value, (Image, Document)):  # base64 read as text helps no model
        return {"media_type": value.media_type, "bytes": decoded_size(value.data)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)


def result_text(value: Any) -> str:
    """A tool's return value as the text the model reads: a str as is, else JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=_json_default)


_MEDIA = (Text, Image, Document)


def tool_output(value: Any) -> Union[str, Tuple[ToolMedia, ...]]:
    """A tool's return value as the model reads it: a str as is; a Text, Image or
    Document, or a non-empty list or tuple of them and strs (each str a Text), as a
    tuple of parts; anything else as JSON text (:func:`result_text`), as before media
    existed — a list mixing parts with other values included, where an Image or
    Document is written as a note of its type and size, never its base64."""
    if isinstance(value, str):
        return value
    if isinstance(value, _MEDIA):
        return (value,)
    if (isinstance(value, (list, tuple)) and value
            and all(isinstance(item, (str,) + _MEDIA) for item in value)
            and any(isinstance(item, _MEDIA) for item in value)):
        return tuple(Text(item) if isinstance(item, str) else item for item in value)
    return result_text(value)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_input(text: str) -> Dict[str, Any]:
    """Parse a call's raw JSON input into a dict; raise ValueError saying what is wrong.

    Empty input means no arguments (some providers send "" for a call without any).
    NaN and Infinity are refused: they are not JSON, whatever Python's parser allows.
    Input nested past :data:`~nacelle.bounded_json.MAX_DEPTH` is refused unread
    (``bounded_json``): the model's text must never end the run with RecursionError.
    """
    if not text.strip():
        return {}
    try:
        value = bounded_json.loads(text, what="tool input", parse_constant=_reject_constant)
    except bounded_json.TooDeep as exc:
        raise ValueError(str(exc)) from None
    except ValueError as exc:
        raise ValueError(f"the input is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"the input must be a JSON object, got {type(value).__name__}")
    return value


def _check_schema(tool_: Any) -> None:
    schema = getattr(tool_, "schema", None)
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ConfigError(
            f"tool {tool_.name!r}: its schema must be a JSON object schema "
            f'(a dict with "type": "object"), got {schema!r:.80}')
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise ConfigError(f"tool {tool_.name!r}: schema properties must be an object")


def is_toolset(item: Any) -> bool:
    """True for a toolset: something with a callable ``current()`` listing its tools of
    the moment (``client.tools(live=True)`` from ``nacelle.mcp``), and no ``run``."""
    return callable(getattr(item, "current", None)) and not callable(getattr(item, "run", None))


def expand_tools(items: Iterable[Any]) -> Tuple[Any, ...]:
    """``items`` with each toolset replaced by the tools it lists now, in order.

    A toolset in an Agent's ``tools`` is asked again before every model request, so a
    server whose tool list changed mid-run offers the new list at the next turn."""
    found: List[Any] = []
    for item in items:
        if is_toolset(item):
            found.extend(item.current())
        else:
            found.append(item)
    return tuple(found)


def tools_by_name(tools: Iterable[Any]) -> Dict[str, Any]:
    """Map each tool's name to the tool, in the order given.

    Raises ConfigError for something that is not a Tool, a name the providers would
    reject, a duplicate name, or a schema that is not a JSON object schema.
    """
    found: Dict[str, Any] = {}
    for item in tools:
        missing = [a for a in ("name", "description", "schema") if not hasattr(item, a)]
        if missing or not callable(getattr(item, "run", None)):
            raise ConfigError(
                f"{item!r:.80} is not a Tool (it needs name, description, schema and run); "
                "decorate a function with @nacelle.tool")
        name = item.name
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise ConfigError(f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        if name in found:
            raise ConfigError(f"two tools are named {name!r}; tool names must be unique")
        if not isinstance(item.description, str):
            raise ConfigError(f"tool {name!r}: description must be a str")
        _check_schema(item)
        check_limits(getattr(item, "call_timeout", None), getattr(item, "max_concurrency", None),
                     getattr(item, "max_result_chars", None))
        found[name] = item
    return found
