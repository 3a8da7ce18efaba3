"""Schema generation: golden schemas for every supported annotation and docstring
style, and clear errors for what cannot be expressed."""

import dataclasses
import enum
import sys
from typing import (
    Annotated, Any, Dict, FrozenSet, List, Literal, Optional, Sequence, Set, Tuple, TypedDict, Union,
)

import pytest

from nacelle import ConfigError, ToolContext
from nacelle.schema import function_schema, parse_docstring, type_schema


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    """A point on the page.

    Attributes:
        x: Across.
        y: Down.
    """

    x: int
    y: int = 0


@dataclasses.dataclass
class Undocumented:
    tags: List[str]


class Movie(TypedDict):
    title: str
    year: int


class Partial(TypedDict, total=False):
    note: str


def schema_of(tp):
    return type_schema(tp)[0]


@pytest.mark.parametrize("tp, expected", [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (type(None), {"type": "null"}),
    (None, {"type": "null"}),
    (Any, {}),
    (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    (List[int], {"type": "array", "items": {"type": "integer"}}),
    (list, {"type": "array"}),
    (Sequence[str], {"type": "array", "items": {"type": "string"}}),
    (Tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (Tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                       "minItems": 2, "maxItems": 2}),
    (Set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    (FrozenSet[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
    (Dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (dict, {"type": "object"}),
    (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
    (Literal[1, "a"], {"enum": [1, "a"]}),
    (Color, {"type": "string", "enum": ["red", "blue"]}),
    (Level, {"type": "integer", "enum": [1, 2]}),
    (Annotated[str, "The query."], {"type": "string", "description": "The query."}),
    (Annotated[int, "How many.", {"minimum": 1, "maximum": 50}],
     {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many."}),
    (Point, {"type": "object", "properties": {
        "x": {"type": "integer", "description": "Across."},
        "y": {"type": "integer", "description": "Down.", "default": 0}},
        "required": ["x"], "additionalProperties": False}),
    (Undocumented, {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["tags"], "additionalProperties": False}),
    (Movie, {"type": "object", "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
             "required": ["title", "year"], "additionalProperties": False}),
    (Partial, {"type": "object", "properties": {"note": {"type": "string"}},
               "additionalProperties": False}),
])
def test_each_supported_annotation_has_its_golden_schema(tp, expected):
    assert schema_of(tp) == expected


def test_builtin_generics_and_pipe_unions_work_where_python_has_them():
    assert schema_of(list[int]) == {"type": "array", "items": {"type": "integer"}}
    assert schema_of(dict[str, bool]) == {"type": "object", "additionalProperties": {"type": "boolean"}}
    if sys.version_info >= (3, 10):
        assert schema_of(eval("int | None")) == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


def test_converters_rebuild_the_annotated_python_types():
    assert type_schema(Color)[1]("blue") is Color.BLUE
    assert type_schema(Point)[1]({"x": 1}) == Point(1, 0)
    assert type_schema(Tuple[int, str])[1]([1, "a"]) == (1, "a")
    assert type_schema(Set[Color])[1](["red"]) == {Color.RED}
    assert type_schema(Optional[Point])[1](None) is None
    assert type_schema(List[Point])[1]([{"x": 2, "y": 3}]) == [Point(2, 3)]
    assert type_schema(Dict[str, Color])[1]({"a": "red"}) == {"a": Color.RED}
    converted = type_schema(float)[1](3)
    assert converted == 3.0 and isinstance(converted, float)
    assert isinstance(type_schema(int)[1](3.0), int)


GOOGLE = '''Find events matching a question.

    Searches the log.

    Args:
        query: What to look for,
            across several lines.
        limit (int): How many events at most.

    Returns:
        The events.
    '''

NUMPY = '''Find events matching a question.

    Parameters
    ----------
    query : str
        What to look for.
    limit : int, optional
        How many events
        at most.

    Returns
    -------
    str
        The events.
    '''

SPHINX = '''Find events matching a question.

    :param query: What to look for.
    :param int limit: How many events
        at most.
    :returns: The events.
    '''


@pytest.mark.parametrize("doc, limit_doc", [
    (GOOGLE, "How many events at most."),
    (NUMPY, "How many events at most."),
    (SPHINX, "How many events at most."),
])
def test_each_docstring_style_gives_the_description_and_parameter_docs(doc, limit_doc):
    description, params = parse_docstring(doc)
    assert description.startswith("Find events matching a question.")
    assert "Returns" not in description and ":param" not in description
    assert params["limit"] == limit_doc
    assert params["query"].startswith("What to look for")


def test_a_google_continuation_line_is_joined():
    assert parse_docstring(GOOGLE)[1]["query"] == "What to look for, across several lines."


def test_a_function_schema_has_required_parameters_defaults_and_no_context():
    def search(query: str, limit: int = 10, color: Color = Color.RED, ctx: ToolContext = None) -> str:
        """Find events.

        Args:
            query: What to look for.
            limit: How many.
        """

    description, schema, converters, context = function_schema(search, ToolContext)
    assert description == "Find events."
    assert context == "ctx"
    assert schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "description": "How many.", "default": 10},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert set(converters) == {"limit", "color"}


def test_annotated_description_wins_over_the_docstring():
    def f(q: Annotated[str, "From Annotated."]):
        """F.

        Args:
            q: From the docstring.
        """

    assert function_schema(f, ToolContext)[1]["properties"]["q"]["description"] == "From Annotated."


def test_a_function_without_parameters_has_an_empty_object_schema():
    def ping():
        """Ping."""

    assert function_schema(ping, ToolContext)[1] == {
        "type": "object", "properties": {}, "additionalProperties": False}


class Opaque:
    pass


@pytest.mark.parametrize("annotation, words", [
    (Opaque, "Opaque"),
    (Dict[int, str], "keys must be str"),
    (List[Opaque], "Opaque"),
    (Literal[b"x"], "Literal values"),
])
def test_a_type_that_cannot_be_expressed_is_an_error_naming_the_parameter(annotation, words):
    def f(thing):
        """F."""

    f.__annotations__ = {"thing": annotation}
    with pytest.raises(ConfigError) as raised:
        function_schema(f, ToolContext)
    assert "'thing'" in str(raised.value) and words in str(raised.value)


def test_a_dataclass_field_that_cannot_be_expressed_names_the_field():
    @dataclasses.dataclass
    class Holder:
        inner: Opaque

    def f(holder: Holder):
        """F."""

    with pytest.raises(ConfigError, match="'holder'.*field 'inner'"):
        function_schema(f, ToolContext)


@pytest.mark.parametrize("signature", ["*args", "**kwargs", "a, /"])
def test_parameters_that_cannot_be_named_are_refused(signature):
    namespace = {}
    exec(f"def f({signature}):\n    '''F.'''", namespace)
    with pytest.raises(ConfigError, match="nameable keyword arguments"):
        function_schema(namespace["f"], ToolContext)


def test_an_unresolvable_annotation_is_a_clear_error():
    def f(x: "Missing"):  # noqa: F821
        """F."""

    with pytest.raises(ConfigError, match="cannot be resolved"):
        function_schema(f, ToolContext)
