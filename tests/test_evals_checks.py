"""Every built-in check, passing and failing with its reason, on Results of real runs
(ScriptedBackend through the real loop); any callable as a check; a scripted judge."""

import dataclasses
import json

import pytest

from nacelle import Agent, tool
from nacelle.errors import ConfigError
from nacelle.events import Usage
from nacelle.evals import (Case, Outcome, Verdict, called, contains, equals, judge, matches,
                           max_cost, max_turns, not_called)
from nacelle.evals.checks import run_check
from nacelle.messages import Message, Role, Text, ToolCall, user_text
from nacelle.testing import ScriptedBackend, Turn


@tool
def weather(city: str, unit: str = "C") -> str:
    """The weather in a city."""
    return f"sunny in {city}, 21 {unit}"


@dataclasses.dataclass
class City:
    name: str
    population: int


def run(*turns, output=None, tools=(weather,)):
    agent = Agent(ScriptedBackend(list(turns)), "You answer.", tools=list(tools), output=output)
    return agent.run([user_text("question")])


def call(name, **args):
    return Message(Role.ASSISTANT, (ToolCall("c1", name, json.dumps(args)),))


CASE = Case("c", "Weather in Paris?", expected="Paris")


def test_equals_compares_the_text_with_a_value_or_the_cases_expected_value():
    result = run("Paris")
    assert run_check(equals("Paris"), result, CASE) == Outcome(True)
    assert run_check(equals(), result, CASE) == Outcome(True)
    failed = run_check(equals("Lyon"), result, CASE)
    assert not failed.passed and failed.reason == "expected Lyon, got Paris"


def test_equals_compares_a_structured_output_also_by_its_json_form():
    result = run('{"name": "Paris", "population": 2100000}', output=City)
    assert result.output == City("Paris", 2100000)
    assert run_check(equals({"name": "Paris", "population": 2100000}), result, CASE).passed
    assert run_check(equals(City("Paris", 2100000)), result, CASE).passed
    failed = run_check(equals({"name": "Lyon", "population": 1}), result, CASE)
    assert not failed.passed and failed.reason.startswith("expected {'name': 'Lyon'")


def test_contains_finds_a_substring_and_says_where_it_looked_when_it_does_not():
    result = run("The capital is Paris.")
    assert run_check(contains("Paris"), result, CASE).passed
    assert not run_check(contains("paris"), result, CASE).passed
    assert run_check(contains("paris", case_sensitive=False), result, CASE).passed
    failed = run_check(contains("Lyon"), result, CASE)
    assert failed.reason == "'Lyon' not in 'The capital is Paris.'"


SCHEMA = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string"}, "population": {"type": "integer", "minimum": 0}}}


def test_matches_validates_json_text_and_names_the_failing_place():
    assert run_check(matches(SCHEMA), run('{"name": "Paris"}'), CASE).passed
    failed = run_check(matches(SCHEMA), run('{"name": "Paris", "population": -1}'), CASE)
    assert not failed.passed and failed.reason.startswith("answer.population: -1 is less than")
    not_json = run_check(matches(SCHEMA), run("Paris"), CASE)
    assert not not_json.passed and not_json.reason.startswith("the answer is not JSON")


def test_matches_validates_a_structured_output_and_refuses_a_bad_schema():
    result = run('{"name": "Paris", "population": 3}', output=City)
    assert run_check(matches(SCHEMA), result, CASE).passed
    assert not run_check(matches({"type": "array"}), result, CASE).passed
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        matches({"type": 12})


def test_matches_never_fetches_a_ref_it_fails_with_the_reason():
    from nacelle.testing import FakeServer

    with FakeServer() as server:
        check = matches({"$ref": f"{server.url}/schema.json"})
        failed = run_check(check, run('{"a": 1}'), CASE)
        assert server.requests == []
    assert not failed.passed and failed.reason.startswith("the schema cannot be used: ")


def test_called_passes_on_a_call_holding_the_given_arguments():
    result = run(call("weather", city="Paris", unit="F"), "It is sunny.")
    assert run_check(called("weather"), result, CASE).passed
    assert run_check(called("weather", city="Paris"), result, CASE).passed
    assert run_check(called("weather", city="Paris", unit="F"), result, CASE).passed
    wrong = run_check(called("weather", city="Lyon"), result, CASE)
    assert not wrong.passed
    assert wrong.reason.startswith("weather was called, never with {'city': 'Lyon'} (inputs: ")
    missing = run_check(called("search"), result, CASE)
    assert missing.reason == "search was not called (called: weather)"


def test_not_called_fails_with_the_number_of_calls():
    result = run(call("weather", city="Paris"), call("weather", city="Lyon"), "done")
    assert run_check(not_called("search"), result, CASE).passed
    failed = run_check(not_called("weather"), result, CASE)
    assert failed == Outcome(False, "weather was called 2 time(s)")


def test_max_turns_counts_the_model_requests():
    result = run(call("weather", city="Paris"), "done")
    assert result.turns == 2
    assert run_check(max_turns(2), result, CASE).passed
    assert run_check(max_turns(1), result, CASE) == Outcome(False, "2 turns > 1")
    with pytest.raises(ConfigError):
        max_turns(0)


def test_max_cost_compares_dollars_and_fails_an_unknown_cost():
    priced = run(Turn(Message(Role.ASSISTANT, (Text("hi"),)),
                      usage=Usage(10, 5, cost=0.002, priced=True)))
    assert run_check(max_cost(0.01), priced, CASE).passed
    assert run_check(max_cost(0.001), priced, CASE) == Outcome(False, "cost $0.002000 > $0.001")
    unpriced = run(Turn(Message(Role.ASSISTANT, (Text("hi"),)), usage=Usage(10, 5)))
    assert run_check(max_cost(1.0), unpriced, CASE).reason.startswith("the run's cost is unknown")
    with pytest.raises(ConfigError):
        max_cost(-1)


def test_any_callable_is_a_check_by_what_it_returns_or_raises():
    result = run("Paris")

    def asserts(r):
        assert r.text == "Lyon", f"said {r.text}"

    def with_case(r, case):
        return r.text == case.expected

    assert run_check(lambda r: r.text == "Paris", result, CASE) == Outcome(True)
    assert run_check(lambda r: False, result, CASE) == Outcome(False, "returned False")
    assert run_check(lambda r: None, result, CASE).passed
    assert run_check(lambda r: (False, "too short"), result, CASE) == Outcome(False, "too short")
    said = run_check(asserts, result, CASE)  # pytest's rewritten assert adds its diff
    assert not said.passed and said.reason.startswith("said Paris")
    assert run_check(with_case, result, CASE).passed
    assert run_check(lambda r: 1 / 0, result, CASE) == Outcome(
        False, "raised ZeroDivisionError: division by zero")


def test_a_scripted_judge_gives_its_verdict_and_reasoning_and_sees_the_rubric():
    graded = ScriptedBackend([
        json.dumps({"reasoning": "Names Paris, as the rubric asks.", "passed": True}),
        json.dumps({"reasoning": "Lyon is not the capital.", "passed": False})])
    check = judge("The answer names the capital of France.", graded)
    good = run_check(check, run("Paris"), CASE)
    assert good == Outcome(True, "Names Paris, as the rubric asks.")
    bad = run_check(check, run("Lyon"), CASE)
    assert bad == Outcome(False, "Lyon is not the capital.")
    prompt = graded.requests[1].messages[-1].parts[0].text
    assert "<rubric>\nThe answer names the capital of France.\n</rubric>" in prompt
    assert "user: Weather in Paris?" in prompt and "<answer>\nLyon\n</answer>" in prompt
    assert '<expected>\n"Paris"\n</expected>' in prompt
    assert graded.requests[0].output is not None  # asked for a Verdict as structured output


def test_a_judge_without_a_verdict_fails_saying_how_it_stopped():
    check = judge("Anything.", ScriptedBackend(["not json"] * 5))
    failed = run_check(check, run("Paris"), CASE)
    assert not failed.passed and failed.reason.startswith("the judge gave no verdict (stop: ")


def test_built_in_checks_are_named_as_they_were_made():
    assert [repr(c) for c in (contains("a"), called("t", x=1), not_called("t"), max_turns(3),
                              max_cost(0.5), equals(2))] == [
        "contains('a')", "called('t', x=1)", "not_called('t')", "max_turns(3)",
        "max_cost(0.5)", "equals(2)"]
    assert Verdict(reasoning="r", passed=True).passed
