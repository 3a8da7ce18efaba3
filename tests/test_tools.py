"""@tool, FunctionTool, result text, input parsing, tools_by_name and ToolContext."""

import dataclasses
import enum
import json
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Set, Tuple

import pytest

import nacelle
from nacelle import Cancelled, ConfigError, ToolContext, tool, tools_by_name
from nacelle.tools import parse_input, result_text

ROOT = Path(__file__).resolve().parent.parent


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Box:
    width: int
    color: Color = Color.RED


@tool
def describe(box: Box, colors: Set[Color], pair: Tuple[int, str], note: Optional[str] = None) -> dict:
    """Describe the arguments' Python types."""
    return {"box": type(box).__name__, "box_color": type(box.color).__name__,
            "colors": sorted(type(c).__name__ for c in colors), "pair": type(pair).__name__,
            "note": note}


@tool(name="renamed", description="Overridden.", exclusive=True, read_only=True)
def original(x: int) -> int:
    """Not this."""
    return x * 2


def plain(x: int) -> int:
    """Doubles."""
    return x * 2


def test_tool_builds_name_description_and_schema_from_the_function():
    assert describe.name == "describe"
    assert describe.description == "Describe the arguments' Python types."
    assert describe.schema["required"] == ["box", "colors", "pair"]
    assert describe.schema["additionalProperties"] is False
    assert isinstance(describe, nacelle.Tool) and not describe.exclusive


def test_tool_overrides_name_and_description_and_sets_flags():
    assert (original.name, original.description) == ("renamed", "Overridden.")
    assert original.exclusive and original.read_only


def test_arguments_are_converted_to_the_annotated_types_before_the_call():
    out = json.loads(describe.run({"box": {"width": 2, "color": "blue"}, "colors": ["red"],
                                   "pair": [1, "a"]}, ToolContext()))
    assert out == {"box": "Box", "box_color": "Color", "colors": ["Color"], "pair": "tuple",
                   "note": None}


def test_a_context_parameter_receives_the_call_context_and_is_not_in_the_schema():
    @tool
    def who(ctx: ToolContext) -> str:
        """Who am I."""
        return f"{ctx.name}#{ctx.index}"

    assert who.schema["properties"] == {}
    assert who.run({}, ToolContext("id", 4, "who")) == "who#4"


@pytest.mark.parametrize("value, text", [
    ("as is", "as is"),
    ({"a": [1, 2]}, '{"a": [1, 2]}'),
    (None, "null"),
    (3, "3"),
    ("é", "é"),
    (Color.BLUE, '"blue"'),
    (Box(1), '{"width": 1, "color": "red"}'),
])
def test_results_become_text(value, text):
    assert result_text(value) == text


def test_a_value_json_cannot_hold_is_written_with_str():
    assert result_text({"when": time}) == json.dumps({"when": str(time)})


def test_a_function_tool_is_still_callable():
    assert original(4) == 8


def test_a_tool_from_a_module_level_function_pickles_by_reference():
    assert pickle.loads(pickle.dumps(describe)) is describe
    assert pickle.loads(pickle.dumps(original)) is original


def test_a_tool_made_by_calling_tool_on_a_module_function_pickles():
    made = tool(plain, name="twice")
    copy = pickle.loads(pickle.dumps(made))
    assert (copy.name, copy.fn, copy.run({"x": 3}, ToolContext())) == ("twice", plain, "6")


def test_a_tool_from_a_nested_function_refuses_to_pickle_clearly():
    @tool
    def inner() -> str:
        """Nested."""
        return ""

    with pytest.raises(pickle.PicklingError, match="module-level"):
        pickle.dumps(inner)


def test_a_name_the_providers_reject_is_refused_at_decoration():
    with pytest.raises(ConfigError, match="must match"):
        tool(plain, name="no spaces allowed")


def test_a_name_with_a_trailing_newline_is_refused_at_decoration():
    with pytest.raises(ConfigError, match="must match"):
        tool(plain, name="lookup\n")


def test_decorating_something_that_is_not_callable_is_refused():
    with pytest.raises(ConfigError, match="needs a function"):
        tool(42)


@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', {"a": 1}),
    ("", {}),
    ("   ", {}),
])
def test_parse_input_reads_a_json_object(text, expected):
    assert parse_input(text) == expected


@pytest.mark.parametrize("text, words", [
    ('{"a": ', "not valid JSON"),
    ("[1]", "must be a JSON object, got list"),
    ('{"a": NaN}', "NaN is not valid JSON"),
])
def test_parse_input_rejects_what_is_not_a_json_object(text, words):
    with pytest.raises(ValueError, match=words):
        parse_input(text)


def test_tools_by_name_maps_names_in_order():
    assert list(tools_by_name([describe, original])) == ["describe", "renamed"]


def test_tools_by_name_refuses_duplicates():
    with pytest.raises(ConfigError, match="two tools are named 'describe'"):
        tools_by_name([describe, describe])


def test_a_tool_context_check_raises_when_cancelled_or_past_its_deadline():
    ctx = ToolContext("c", 0, "t")
    ctx.check()
    ctx.cancelled.set()
    with pytest.raises(Cancelled):
        ctx.check()
    late = ToolContext("c", 0, "t", deadline=time.monotonic() - 1)
    assert late.remaining() == 0.0
    with pytest.raises(Cancelled):
        late.check()


@pytest.mark.slow
def test_decorating_and_validating_do_not_import_jsonschema_at_import_time():
    code = ("import sys, nacelle\n"
            "@nacelle.tool\n"
            "def f(x: int) -> str:\n"
            "    '''F.'''\n"
            "    return str(x)\n"
            "print('jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_input_is_validated_by_the_builtin_validator_when_jsonschema_is_missing():
    # A vendored copy without jsonschema: block the import and run a real call.
    code = (
        "import sys; sys.modules['jsonschema'] = None\n"
        "import nacelle\n"
        "from nacelle.testing import ScriptedBackend\n"
        "from nacelle import Message, Role, ToolCall, Text, user_text\n"
        "@nacelle.tool\n"
        "def f(x: int) -> str:\n"
        "    '''F.'''\n"
        "    return str(x)\n"
        "b = ScriptedBackend([Message(Role.ASSISTANT, (ToolCall('c', 'f', '{\"x\": \"no\"}'),)),"
        " Message(Role.ASSISTANT, (Text('k'),))])\n"
        "r = nacelle.Agent(b, 's', tools=[f]).run([user_text('go')])\n"
        "print(r.messages[2].parts[0].result)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip().startswith("invalid input for f: input.x: expected integer, got string")


@tool(read_only=True, open_world=False, idempotent=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def test_a_tool_that_declares_nothing_gets_mcps_cautious_metadata():
    plain_tool = tool(plain)
    facts = (plain_tool.read_only, plain_tool.destructive, plain_tool.idempotent,
             plain_tool.open_world)
    assert facts == (False, True, False, True)


def test_tool_takes_the_metadata_as_options_and_read_only_is_not_destructive():
    assert (lookup.read_only, lookup.destructive, lookup.idempotent, lookup.open_world) == (
        True, False, True, False)
    eraser = tool(plain, read_only=True, destructive=True)
    assert eraser.destructive is True


def test_metadata_reads_any_tool_and_fills_what_it_leaves_out():
    from nacelle.tools import metadata

    class Bare:
        name, description, schema = "bare", "", {"type": "object"}

        def run(self, input, ctx):
            return ""

    assert metadata(Bare()) == {"read_only": False, "destructive": True,
                                "idempotent": False, "open_world": True}
    Bare.read_only = True
    assert metadata(Bare())["destructive"] is False
    assert metadata(lookup) == {"read_only": True, "destructive": False,
                                "idempotent": True, "open_world": False}


def test_a_pickled_tool_keeps_its_metadata():
    copy = pickle.loads(pickle.dumps(lookup))
    assert copy is lookup
    from nacelle.tools import _restore_tool

    rebuilt = _restore_tool(__name__, "lookup", "lookup", lookup.description, False, True,
                            True, False, True)
    assert (rebuilt.read_only, rebuilt.destructive, rebuilt.idempotent, rebuilt.open_world) == (
        True, True, False, True)
    # A tool pickled before the metadata existed (six arguments) still loads.
    old = _restore_tool(__name__, "lookup", "lookup", lookup.description, False, True)
    assert (old.destructive, old.open_world) == (False, True)


def test_per_tool_options_are_kept_checked_and_pickled():
    import pickle

    made = nacelle.tool(limited_tool, timeout=2.5, max_concurrency=3, max_result_chars=0)
    assert (made.call_timeout, made.max_concurrency, made.max_result_chars) == (2.5, 3, 0)
    plain = nacelle.tool(limited_tool)
    assert (plain.call_timeout, plain.max_concurrency, plain.max_result_chars) == (None,) * 3
    again = pickle.loads(pickle.dumps(made))
    assert (again.call_timeout, again.max_concurrency, again.max_result_chars) == (2.5, 3, 0)
    for bad in ({"timeout": 0}, {"timeout": -1}, {"timeout": True}, {"timeout": "5"},
                {"max_concurrency": 0}, {"max_concurrency": 1.5}, {"max_concurrency": True},
                {"max_result_chars": -1}, {"max_result_chars": "10"}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            nacelle.tool(limited_tool, **bad)


def test_a_tool_class_with_a_bad_option_is_refused_when_the_tools_are_checked():
    class Tool:
        name, description = "t", ""
        schema = {"type": "object", "properties": {}}
        max_concurrency = 0

        def run(self, input, ctx):
            return ""

    with pytest.raises(ConfigError, match="max_concurrency"):
        tools_by_name([Tool()])


def limited_tool(x: int) -> str:
    """A module-level function, so tools made from it pickle."""
    return str(x)


# -- media -----------------------------------------------------------------------

from nacelle import Document, Image, Text  # noqa: E402
from nacelle.tools import tool_output  # noqa: E402

PICTURE = Image("image/png", "iVBORw0KGgo=")
PAPER = Document("application/pdf", "JVBERi0xLjQ=", "paper.pdf")


@pytest.mark.parametrize("value, parts", [
    (PICTURE, (PICTURE,)),
    (Text("t"), (Text("t"),)),
    (PAPER, (PAPER,)),
    ([Text("a shot"), PICTURE], (Text("a shot"), PICTURE)),
    (("caption", PICTURE, PAPER), (Text("caption"), PICTURE, PAPER)),
])
def test_a_tool_returning_media_answers_with_a_tuple_of_parts(value, parts):
    assert tool_output(value) == parts


@pytest.mark.parametrize("value, text", [
    ("as is", "as is"), ([], "[]"), (["a", "b"], '["a", "b"]'), ({"a": 1}, '{"a": 1}'),
])
def test_a_tool_returning_no_media_answers_with_text_as_before(value, text):
    assert tool_output(value) == text


def test_a_list_mixing_media_with_other_values_is_json_that_never_holds_base64():
    text = tool_output([PICTURE, {"k": 1}])
    assert isinstance(text, str) and "iVBOR" not in text
    assert json.loads(text) == [{"media_type": "image/png", "bytes": 8}, {"k": 1}]


def test_a_function_tool_returning_an_image_runs_to_the_parts():
    @tool
    def shot() -> Image:
        """A screenshot."""
        return PICTURE

    assert shot.run({}, ToolContext()) == (PICTURE,)
