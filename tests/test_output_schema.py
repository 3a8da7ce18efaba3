"""The per-dialect normalisers: golden schemas for a dataclass with every kind of
field, the rules each provider's subset sets checked over many types, and answers in
the strict shape restored to the original one."""

import dataclasses
import enum
import json
import time
from typing import Dict, FrozenSet, List, Literal, Optional, Set, Tuple, TypedDict

import pytest

import nacelle
from nacelle import ConfigError, Schema
from nacelle.output import make_output
from nacelle.output.schema import (
    for_anthropic, for_gemini, for_openai, inline_refs, restore, strict_form,
)
from nacelle.testing import ScriptedBackend
from nacelle.validation import compile_schema

from test_output import Sky, Weather, Wind

GOLDEN = {'for_anthropic': {'type': 'object',
                            'properties': {'city': {'type': 'string', 'description': 'The city.'},
                                           'temp_c': {'type': 'number',
                                                      'description': 'Degrees Celsius.'},
                                           'sky': {'anyOf': [{'type': 'string',
                                                              'enum': ['clear', 'cloudy'],
                                                              'description': '{default: clear}'},
                                                             {'type': 'null'}]},
                                           'wind': {'description': '{default: null}',
                                                    'anyOf': [{'type': 'object',
                                                               'properties': {'speed_kmh': {'type': 'number'},
                                                                              'direction': {'type': 'string',
                                                                                            'enum': ['N',
                                                                                                     'E',
                                                                                                     'S',
                                                                                                     'W']}},
                                                               'required': ['speed_kmh', 'direction'],
                                                               'additionalProperties': False},
                                                              {'type': 'null'}]},
                                           'tags': {'type': ['array', 'null'],
                                                    'items': {'type': 'string'}}},
                            'required': ['city', 'temp_c', 'sky', 'wind', 'tags'],
                            'additionalProperties': False},
          'for_openai': {'type': 'object',
                         'properties': {'city': {'type': 'string', 'description': 'The city.'},
                                        'temp_c': {'type': 'number', 'description': 'Degrees Celsius.'},
                                        'sky': {'anyOf': [{'type': 'string',
                                                           'enum': ['clear', 'cloudy'],
                                                           'description': '{default: clear}'},
                                                          {'type': 'null'}]},
                                        'wind': {'description': '{default: null}',
                                                 'anyOf': [{'type': 'object',
                                                            'properties': {'speed_kmh': {'type': 'number'},
                                                                           'direction': {'type': 'string',
                                                                                         'enum': ['N',
                                                                                                  'E',
                                                                                                  'S',
                                                                                                  'W']}},
                                                            'required': ['speed_kmh', 'direction'],
                                                            'additionalProperties': False},
                                                           {'type': 'null'}]},
                                        'tags': {'type': ['array', 'null'],
                                                 'items': {'type': 'string'}}},
                         'required': ['city', 'temp_c', 'sky', 'wind', 'tags'],
                         'additionalProperties': False},
          'for_gemini': {'type': 'object',
                         'properties': {'city': {'type': 'string', 'description': 'The city.'},
                                        'temp_c': {'type': 'number', 'description': 'Degrees Celsius.'},
                                        'sky': {'nullable': True,
                                                'type': 'string',
                                                'enum': ['clear', 'cloudy'],
                                                'description': '{default: clear}'},
                                        'wind': {'description': '{default: null}',
                                                 'nullable': True,
                                                 'type': 'object',
                                                 'properties': {'speed_kmh': {'type': 'number'},
                                                                'direction': {'type': 'string',
                                                                              'enum': ['N',
                                                                                       'E',
                                                                                       'S',
                                                                                       'W']}},
                                                 'required': ['speed_kmh', 'direction'],
                                                 'propertyOrdering': ['speed_kmh', 'direction']},
                                        'tags': {'type': 'array',
                                                 'items': {'type': 'string'},
                                                 'nullable': True}},
                         'required': ['city', 'temp_c', 'sky', 'wind', 'tags'],
                         'propertyOrdering': ['city', 'temp_c', 'sky', 'wind', 'tags']}}


def test_the_golden_schemas_of_each_dialect():
    schema = make_output(Weather).schema
    for normalise in (for_anthropic, for_openai, for_gemini):
        assert normalise(schema) == GOLDEN[normalise.__name__], normalise.__name__


class Shape(enum.Enum):
    ONE = 1
    TWO = 2


class Inner(TypedDict, total=False):
    label: str


@dataclasses.dataclass
class Everything:
    name: str
    count: int = 3
    ratio: Optional[float] = None
    kind: Literal["a", "b"] = "a"
    shape: Shape = Shape.ONE
    tags: Set[str] = dataclasses.field(default_factory=set)
    pair: Tuple[int, str] = (1, "x")
    scores: Dict[str, float] = dataclasses.field(default_factory=dict)
    wind: Optional[Wind] = None
    inners: List[Inner] = dataclasses.field(default_factory=list)
    frozen: FrozenSet[int] = frozenset()


TYPES = [Weather, Everything, int, str, List[Wind], Dict[str, Wind], Sky, Shape, Inner,
         Tuple[int, ...], Optional[Weather]]


def walk(node, path="root"):
    """Every schema node with where it is."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            if key == "properties":
                for name, sub in value.items():
                    yield from walk(sub, f"{path}.{name}")
            elif key in ("items", "additionalProperties"):
                yield from walk(value, f"{path}[{key}]")
            elif key in ("anyOf", "allOf"):
                for i, sub in enumerate(value):
                    yield from walk(sub, f"{path}|{i}")


@pytest.mark.parametrize("target", TYPES, ids=repr)
def test_openai_strict_every_object_is_closed_with_every_property_required(target):
    wire = for_openai(make_output(target).schema)
    assert wire["type"] == "object"
    for path, node in walk(wire):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False, path
            assert node["required"] == list(node["properties"]), path
        assert not set(node) - {"type", "properties", "required", "additionalProperties",
                                "items", "anyOf", "description", "title", "enum", "const",
                                "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                                "exclusiveMaximum", "multipleOf", "minItems", "maxItems"}, path


@pytest.mark.parametrize("target", TYPES, ids=repr)
def test_anthropic_keeps_only_its_keywords_and_closes_every_object(target):
    wire = for_anthropic(make_output(target).schema)
    for path, node in walk(wire):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False, path
        assert not set(node) - {"type", "properties", "required", "additionalProperties",
                                "items", "anyOf", "allOf", "description", "title", "enum",
                                "const", "format", "minItems"}, path
        assert node.get("minItems", 0) in (0, 1), path


@pytest.mark.parametrize("target", TYPES, ids=repr)
def test_gemini_has_one_type_nullable_and_string_enums_only(target):
    wire = for_gemini(make_output(target).schema)
    for path, node in walk(wire):
        assert "additionalProperties" not in node, path
        assert not isinstance(node.get("type"), list), path
        assert all(isinstance(v, str) for v in node.get("enum", ())), path
        assert {"type": "null"} not in node.get("anyOf", ()), path
        if "properties" in node:
            assert node["propertyOrdering"] == list(node["properties"]), path


def test_moved_keywords_land_in_the_description_and_the_full_schema_still_checks_them():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1,
                                                     "description": "How many."}},
              "required": ["n"]}
    assert for_anthropic(schema)["properties"]["n"] == {
        "type": "integer", "description": "How many.\n\n{minimum: 1}"}
    assert for_openai(schema)["properties"]["n"] == {
        "type": "integer", "minimum": 1, "description": "How many."}
    output = make_output(Schema("count", schema))
    value, error = output.read_data({"n": 0})
    assert value is None and "minimum" in error


def test_a_strict_answer_is_restored_to_the_original_shape_and_rebuilt():
    output = make_output(Everything)
    strict_answer = {"name": "n", "count": None, "ratio": None, "kind": None, "shape": 2,
                     "tags": ["x"], "pair": [2, "y"],
                     "scores": [{"key": "a", "value": 1.5}],
                     "wind": {"speed_kmh": 3, "direction": "N"},
                     "inners": [{"label": None}, {"label": "l"}], "frozen": None}
    check = compile_schema(strict_form(output.schema))
    assert check(strict_answer) is None  # it is a valid answer in the strict shape
    value, error = output.read_data(strict_answer)
    assert error is None
    assert value == Everything("n", 3, None, "a", Shape.TWO, {"x"}, (2, "y"), {"a": 1.5},
                               Wind(3.0, "N"), [{}, {"label": "l"}], frozenset())


def test_restore_leaves_an_answer_already_in_the_original_shape_alone():
    output = make_output(Everything)
    answer = {"name": "n", "scores": {"a": 1.0}, "pair": [1, "x"], "wind": None}
    assert restore(output.schema, answer) == answer


def test_refs_are_inlined_with_their_siblings_kept():
    schema = {"$defs": {"A": {"type": "string"}},
              "type": "object", "properties": {"a": {"$ref": "#/$defs/A", "description": "d"}}}
    assert inline_refs(schema) == {"type": "object", "properties": {
        "a": {"type": "string", "description": "d"}}}


def fan_out(levels):
    """A small schema whose $refs double at every level: 2**levels leaves inlined."""
    defs = {"L0": {"type": "string"}}
    for level in range(1, levels + 1):
        ref = {"$ref": f"#/$defs/L{level - 1}"}
        defs[f"L{level}"] = {"type": "object", "properties": {"a": ref, "b": ref}}
    return {"$defs": defs, "type": "object",
            "properties": {"top": {"$ref": f"#/$defs/L{levels}"}}}


def test_a_ref_fan_out_past_the_inlining_limit_is_refused_naming_it_before_it_is_built():
    schema = fan_out(20)
    assert len(json.dumps(schema)) < 2500
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="more than 10,000 subschemas"):
        inline_refs(schema)
    with pytest.raises(ConfigError, match="more than 10,000 subschemas"):
        nacelle.Agent(ScriptedBackend([]), "s", output=nacelle.Schema("tree", schema))
    assert time.perf_counter() - start < 2


def test_a_ref_fan_out_within_the_limit_is_inlined_whole():
    inlined = inline_refs(fan_out(8))
    assert json.dumps(inlined).count('"type": "string"') == 2 ** 8
