"""Structured output through the real loop, on ScriptedBackend: every mode, the
validation retry loop, refusals and truncation, tools and output in one run, typed
sub-agents, and what ``output=`` may be."""

import dataclasses
import enum
import json
import pickle
from typing import Dict, List, Literal, Optional, TypedDict

import pytest

import nacelle
from nacelle import Agent, Kind, Schema, Stop, Unsupported, user_text
from nacelle.backend import Capabilities
from nacelle.messages import Message, Role, Text, ToolCall
from nacelle.output import FINAL_ANSWER, make_output, to_jsonable
from nacelle.testing import ScriptedBackend, Turn

HI = [user_text("What is the weather in Paris?")]


class Sky(enum.Enum):
    CLEAR = "clear"
    CLOUDY = "cloudy"


@dataclasses.dataclass
class Wind:
    speed_kmh: float
    direction: Literal["N", "E", "S", "W"]


@dataclasses.dataclass
class Weather:
    """The weather in a city.

    Attributes:
        city: The city.
        temp_c: Degrees Celsius.
    """

    city: str
    temp_c: float
    sky: Sky = Sky.CLEAR
    wind: Optional[Wind] = None
    tags: List[str] = dataclasses.field(default_factory=list)


PARIS = '{"city": "Paris", "temp_c": 21, "sky": "cloudy", "wind": {"speed_kmh": 5, "direction": "W"}}'
WEATHER = Weather("Paris", 21.0, Sky.CLOUDY, Wind(5.0, "W"))


class Point(TypedDict):
    x: int
    y: int


class FakeModel:
    """Duck-typed like a pydantic v2 model: never a pydantic import."""

    def __init__(self, name: str, count: int) -> None:
        self.name, self.count = name, count

    def __eq__(self, other):
        return isinstance(other, FakeModel) and (self.name, self.count) == (other.name, other.count)

    @classmethod
    def model_json_schema(cls):
        return {"$defs": {"Count": {"type": "integer", "minimum": 0}}, "type": "object",
                "title": "FakeModel",
                "properties": {"name": {"type": "string"}, "count": {"$ref": "#/$defs/Count"}},
                "required": ["name", "count"]}

    @classmethod
    def model_validate(cls, data):
        if data["name"] == "forbidden":
            raise ValueError("name may not be 'forbidden'")
        return cls(data["name"], data["count"])

    def model_dump(self, mode="python"):
        return {"name": self.name, "count": self.count}


def agent(turns, **options):
    backend = ScriptedBackend(turns)
    return Agent(backend, "You report weather.", **options), backend


def call(call_id, input_text, name=FINAL_ANSWER):
    return Message(Role.ASSISTANT, (ToolCall(call_id, name, input_text),))


# -- native (the scripted backend has it) ---------------------------------------------

def test_run_returns_the_typed_value_rebuilt_recursively():
    a, backend = agent([PARIS], output=Weather)
    result = a.run(HI)
    assert result.output == WEATHER
    assert result.stop is Stop.END and result.turns == 1
    assert backend.requests[0].output.mode == "native"
    assert isinstance(result.output.sky, Sky) and isinstance(result.output.wind, Wind)


def test_done_carries_the_output_and_its_repr_shows_it():
    a, _ = agent([PARIS], output=Weather)
    done = list(a.stream(HI))[-1]
    assert done.kind is Kind.DONE and done.output == WEATHER
    assert "output=Weather(" in repr(done)


def test_an_invalid_answer_is_sent_back_naming_the_error_then_corrected():
    a, backend = agent(['{"city": "Paris"}', PARIS], output=Weather)
    result = a.run(HI)
    assert result.output == WEATHER and result.turns == 2
    retry = backend.requests[1].messages[-1]
    assert retry.role is Role.USER
    assert "temp_c" in retry.text and "required" in retry.text


def test_after_output_retries_the_run_ends_invalid_with_the_last_text_kept():
    a, backend = agent(["not json", '{"city": 3}', '{"city": "x"}'], output=Weather,
                       output_retries=2)
    result = a.run(HI)
    assert result.stop is Stop.INVALID_OUTPUT and result.output is None
    assert result.text == '{"city": "x"}' and result.turns == 3
    backend.assert_consumed()


def test_zero_retries_ends_at_the_first_invalid_answer():
    a, _ = agent(["{}"], output=Weather, output_retries=0)
    assert a.run(HI).stop is Stop.INVALID_OUTPUT


def test_a_refusal_ends_the_run_with_refusal_and_no_retry():
    a, backend = agent([Turn(nacelle.assistant_text("I can't help."), stop=Stop.REFUSAL)],
                       output=Weather)
    result = a.run(HI)
    assert result.stop is Stop.REFUSAL and result.output is None
    backend.assert_consumed()


def test_an_answer_cut_at_max_tokens_is_never_half_parsed():
    cut = '{"city": "Paris", "temp_c": 2'
    a, _ = agent([Turn(nacelle.assistant_text(cut), stop=Stop.MAX_TOKENS)], output=Weather)
    result = a.run(HI)
    assert result.stop is Stop.MAX_TOKENS and result.output is None
    assert nacelle.partial_json(cut) == {"city": "Paris"}


def test_tools_run_as_usual_and_the_schema_binds_only_the_final_answer():
    @nacelle.tool
    def forecast(city: str) -> str:
        """Look up the forecast."""
        return "21C, cloudy, wind 5 km/h from the west"

    a, backend = agent([call("c1", '{"city": "Paris"}', name="forecast"), PARIS],
                       output=Weather, tools=[forecast])
    events = list(a.stream(HI))
    kinds = [e.kind for e in events]
    assert kinds.count(Kind.TOOL_CALL) == kinds.count(Kind.TOOL_RESULT) == 1
    assert events[-1].output == WEATHER
    assert backend.requests[1].messages[-1].parts[0].result.startswith("21C")


def test_a_per_run_output_overrides_the_agents_and_none_turns_it_off():
    a, _ = agent(['{"x": 1, "y": 2}', "plain text"], output=Weather)
    assert a.run(HI, output=Point).output == {"x": 1, "y": 2}
    result = a.run(HI, output=None)
    assert result.output is None and result.text == "plain text" and result.stop is Stop.END


@pytest.mark.parametrize("target, answer, value", [
    (int, '{"value": 7}', 7),
    (float, '{"value": 7}', 7.0),
    (str, '{"value": "hi"}', "hi"),
    (bool, '{"value": true}', True),
    (Sky, '{"value": "clear"}', Sky.CLEAR),
    (List[Wind], '{"value": [{"speed_kmh": 1, "direction": "N"}]}', [Wind(1.0, "N")]),
    (Dict[str, int], '{"value": {"a": 1}}', {"a": 1}),
    (Point, '{"x": 1, "y": 2}', {"x": 1, "y": 2}),
    (Schema("pair", {"type": "array", "items": {"type": "integer"}}), '{"value": [1, 2]}',
     [1, 2]),
    (Schema("obj", {"type": "object", "properties": {"a": {"type": "string"}}}), '{"a": "b"}',
     {"a": "b"}),
    (FakeModel, '{"name": "n", "count": 3}', FakeModel("n", 3)),
])
def test_every_supported_output_type_comes_back_typed(target, answer, value):
    a, _ = agent([answer], output=target)
    assert a.run(HI).output == value


def test_primitives_are_wrapped_in_an_object_root():
    output = make_output(List[int])
    assert output.wrapped and output.schema == {
        "type": "object", "properties": {"value": {"type": "array", "items": {"type": "integer"}}},
        "required": ["value"], "additionalProperties": False}


def test_a_pydantic_like_models_refs_are_inlined_and_its_validator_errors_retried():
    output = make_output(FakeModel)
    assert "$defs" not in output.schema
    assert output.schema["properties"]["count"] == {"type": "integer", "minimum": 0}
    a, backend = agent(['{"name": "n", "count": -1}', '{"name": "forbidden", "count": 1}',
                        '{"name": "ok", "count": 1}'], output=FakeModel)
    assert a.run(HI).output == FakeModel("ok", 1)
    assert "minimum" in backend.requests[1].messages[-1].text
    assert "forbidden" in backend.requests[2].messages[-1].text


def test_a_text_answer_with_a_fence_or_prose_around_the_json_is_read():
    a, _ = agent(["Here it is:\n```json\n" + PARIS + "\n```"], output=Weather)
    assert a.run(HI).output == WEATHER
    a, _ = agent(["Sure! " + PARIS + " Hope that helps."], output=Weather)
    assert a.run(HI).output == WEATHER


# -- tool mode ---------------------------------------------------------------------------

def test_tool_mode_offers_a_final_answer_tool_whose_schema_is_the_output_schema():
    a, backend = agent([call("c1", PARIS)], output=Weather, output_mode="tool")
    result = a.run(HI)
    assert result.output == WEATHER and result.stop is Stop.END
    [final] = [t for t in backend.requests[0].tools if t.name == FINAL_ANSWER]
    assert final.schema == make_output(Weather).schema


def test_the_final_answer_call_is_closed_by_exactly_one_result_and_others_discarded():
    @nacelle.tool
    def forecast(city: str) -> str:
        """Look up the forecast."""
        raise AssertionError("never run: the answer ended the run")

    turn = Message(Role.ASSISTANT, (ToolCall("c1", "forecast", '{"city": "Paris"}'),
                                    ToolCall("c2", FINAL_ANSWER, PARIS)))
    a, _ = agent([turn], output=Weather, output_mode="tool", tools=[forecast])
    events = list(a.stream(HI))
    results = {e.tool.id: e.tool for e in events if e.kind is Kind.TOOL_RESULT}
    assert sorted(results) == ["c1", "c2"]
    assert results["c1"].discarded and results["c2"].error is None
    done = events[-1]
    assert done.output == WEATHER and done.stop is Stop.END
    answered = done.messages[-1]
    assert [p.id for p in answered.parts] == ["c1", "c2"]


def test_an_invalid_final_answer_is_its_calls_failed_result_and_is_retried():
    a, backend = agent([call("c1", '{"city": "Paris", "temp_c": "warm"}'), call("c2", PARIS)],
                       output=Weather, output_mode="tool")
    events = list(a.stream(HI))
    failed = [e.tool for e in events if e.kind is Kind.TOOL_RESULT and e.tool.failed]
    assert len(failed) == 1 and "temp_c" in failed[0].error
    assert events[-1].output == WEATHER
    assert backend.requests[1].messages[-1].parts[0].failed


def test_tool_mode_retries_run_out_into_invalid_output():
    a, _ = agent([call("c1", "{}"), call("c2", "not json")], output=Weather,
                 output_mode="tool", output_retries=1)
    result = a.run(HI)
    assert result.stop is Stop.INVALID_OUTPUT and result.output is None
    # the conversation stays valid: the last call has its failed result
    assert result.messages[-1].parts[0].failed


def test_tool_mode_reads_a_text_answer_and_asks_for_the_tool_when_it_is_not_valid():
    a, backend = agent(["I think it is sunny", call("c1", PARIS)], output=Weather,
                       output_mode="tool")
    assert a.run(HI).output == WEATHER
    assert FINAL_ANSWER in backend.requests[1].messages[-1].text


def test_tool_mode_never_asks_approval_or_hooks_for_the_final_answer():
    asked = []
    a, _ = agent([call("c1", PARIS)], output=Weather, output_mode="tool",
                 approve=lambda *args: asked.append(args) or False)
    assert a.run(HI).output == WEATHER and asked == []


def test_a_tool_named_final_answer_is_refused_in_tool_mode():
    @nacelle.tool(name=FINAL_ANSWER)
    def mine() -> str:
        """Mine."""
        return ""

    with pytest.raises(nacelle.ConfigError, match=FINAL_ANSWER):
        agent([], output=Weather, output_mode="tool", tools=[mine])


# -- prompted and auto ---------------------------------------------------------------------

def test_prompted_mode_puts_the_schema_in_the_system_prompt():
    a, backend = agent([PARIS], output=Weather, output_mode="prompted")
    assert a.run(HI).output == WEATHER
    system = backend.requests[0].system
    assert system.startswith("You report weather.") and '"temp_c"' in system
    assert not backend.requests[0].tools


def test_auto_is_native_with_the_capability_and_tool_without():
    backend = ScriptedBackend([call("c1", PARIS)], capabilities=Capabilities())
    a = Agent(backend, "sys", output=Weather)
    assert a.run(HI).output == WEATHER
    assert backend.requests[0].output.mode == "tool"


def test_native_on_a_backend_without_it_is_unsupported_at_construction():
    backend = ScriptedBackend([], name="plain", capabilities=Capabilities())
    with pytest.raises(Unsupported, match="plain"):
        Agent(backend, "sys", output=Weather, output_mode="native")


@pytest.mark.parametrize("options", [{"output_mode": "json"}, {"output_retries": -1},
                                     {"output_retries": True}, {"output": "Weather"},
                                     {"output": object}])
def test_bad_output_options_are_config_errors(options):
    with pytest.raises(nacelle.ConfigError):
        Agent(ScriptedBackend([]), "sys", **options)


def test_a_type_the_generator_cannot_express_is_refused_at_construction():
    with pytest.raises(nacelle.ConfigError, match="output"):
        Agent(ScriptedBackend([]), "sys", output=Dict[int, str])


def test_a_recursive_schema_is_refused_at_construction():
    schema = {"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
              "$ref": "#/$defs/N"}
    with pytest.raises(nacelle.ConfigError, match="recursive"):
        Agent(ScriptedBackend([]), "sys", output=Schema("node", schema))


def test_an_agent_with_output_pickles():
    a, _ = agent([PARIS], output=Weather, output_mode="tool")
    copy = pickle.loads(pickle.dumps(a))
    assert copy._output.mode == "tool" and copy._output.schema == a._output.schema


# -- results and sub-agents -----------------------------------------------------------------

def test_the_result_repr_and_notebook_repr_show_the_value():
    a, _ = agent([PARIS], output=Weather)
    result = a.run(HI)
    assert "output=Weather(city='Paris'" in repr(result)
    assert "Weather(city='Paris'" in result._repr_markdown_()


def test_a_typed_sub_agent_returns_its_value_as_json_text_to_the_parent():
    child_backend = ScriptedBackend([PARIS])
    child = Agent(child_backend, "You report weather.", output=Weather)
    parent_backend = ScriptedBackend([
        call("s1", '{"task": "Weather in Paris?"}', name="subagent"), "It is 21C."])
    parent = Agent(parent_backend, "You delegate.", tools=[nacelle.subagent_tool(child)])
    assert parent.run(HI).text == "It is 21C."
    result = parent_backend.requests[1].messages[-1].parts[0]
    assert not result.failed and json.loads(result.result) == to_jsonable(WEATHER)
    assert json.loads(result.result)["sky"] == "cloudy"


def test_a_sub_agent_without_a_valid_answer_is_a_failed_call():
    child = Agent(ScriptedBackend(["{}"]), "c", output=Weather, output_retries=0)
    parent_backend = ScriptedBackend([call("s1", '{"task": "t"}', name="subagent"), "ok"])
    Agent(parent_backend, "p", tools=[nacelle.subagent_tool(child)]).run(HI)
    result = parent_backend.requests[1].messages[-1].parts[0]
    assert result.failed and "invalid_output" in result.result


def test_to_jsonable_writes_plain_json_data():
    assert to_jsonable(WEATHER) == {"city": "Paris", "temp_c": 21.0, "sky": "cloudy",
                                    "wind": {"speed_kmh": 5.0, "direction": "W"}, "tags": []}
    assert to_jsonable(FakeModel("a", 1)) == {"name": "a", "count": 1}
    assert to_jsonable({1, 2}) == [1, 2]


# -- answers nested past the reader's depth cap ----------------------------------------

DEEP = '{"city": ' + "[" * 1000 + "]" * 1000 + "}"


@pytest.mark.parametrize("mode", ["native", "prompted"])
def test_a_text_answer_nested_a_thousand_deep_is_an_invalid_answer_not_a_crash(mode):
    a, backend = agent([DEEP, "Sure: " + DEEP, PARIS], output=Weather, output_mode=mode)
    result = a.run(HI)
    assert result.output == WEATHER and result.turns == 3
    assert "nested deeper than 128 levels" in backend.requests[1].messages[-1].text


def test_a_final_answer_call_nested_a_thousand_deep_is_its_failed_result_not_a_crash():
    a, _ = agent([call("c1", DEEP)], output=Weather, output_mode="tool", output_retries=0)
    events = list(a.stream(HI))
    [result] = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert result.error.startswith("answer nested deeper than 128 levels")
    assert events[-1].stop is Stop.INVALID_OUTPUT
