"""ScriptedBackend, Turn and FakeClock: the doubles the project's own tests use."""

import pickle

import pytest

from nacelle import (
    Agent, Capabilities, ConfigError, Kind, Message, Reasoning, Request, Role, RunContext, Stop, Text,
    ToolCall, Usage, user_text,
)
from nacelle.backend import TurnEnd
from nacelle.testing import FakeClock, ScriptedBackend, Turn


def assistant(*parts):
    return Message(Role.ASSISTANT, parts)


def test_turn_stop_defaults_to_tools_when_the_message_has_calls_else_end():
    assert Turn(assistant(ToolCall("c", "t", "{}"))).stop is Stop.TOOLS
    assert Turn(assistant(Text("x"))).stop is Stop.END
    assert Turn(assistant(ToolCall("c", "t", "{", finished=False))).stop is Stop.END
    assert Turn(assistant(Text("x")), stop=Stop.REFUSAL).stop is Stop.REFUSAL


def test_a_turn_needs_an_assistant_message():
    with pytest.raises(ConfigError):
        Turn(user_text("hi"))


GO = (user_text("go"),)


def test_each_text_and_reasoning_part_is_one_delta():
    backend = ScriptedBackend([assistant(Reasoning("r"), Text("a"), Text("b"))])
    *deltas, end = backend.turn(Request("s"), GO, RunContext())
    assert [(e.kind, e.text) for e in deltas] == [
        (Kind.THINKING, "r"), (Kind.TEXT, "a"), (Kind.TEXT, "b")]
    assert isinstance(end, TurnEnd) and end.parts == (Reasoning("r"), Text("a"), Text("b"))


def test_inside_an_agent_the_loop_runs_around_the_scripted_turn():
    backend = ScriptedBackend([assistant(Reasoning("r"), Text("a"), Text("b"))])
    events = list(Agent(backend, "s").stream(GO))
    assert [(e.kind, e.text) for e in events[:2]] == [(Kind.TEXT, "a"), (Kind.TEXT, "b")]
    assert events[-1].kind is Kind.DONE and events[-1].messages[-1].parts[0] == Reasoning("r")


def test_requests_hold_the_conversation_as_the_model_saw_each_turn():
    backend = ScriptedBackend([assistant(ToolCall("c", "missing", "{}")), "done"])
    Agent(backend, "s").run(GO)
    assert [len(r.messages) for r in backend.requests] == [1, 3]
    assert backend.requests[1].messages[2].parts[0].failed


def test_a_turn_past_the_script_raises():
    backend = ScriptedBackend([])
    with pytest.raises(AssertionError, match="only 0"):
        list(backend.turn(Request("s"), GO, RunContext()))


def test_assert_consumed_fails_while_turns_are_left():
    backend = ScriptedBackend(["a", "b"])
    Agent(backend, "s").run(GO)
    assert backend.remaining == 1
    with pytest.raises(AssertionError, match="1 of 2"):
        backend.assert_consumed()


def test_usage_and_stop_come_from_the_turn():
    backend = ScriptedBackend([Turn(assistant(Text("cut")), usage=Usage(1, 2), stop=Stop.MAX_TOKENS)])
    end = list(backend.turn(Request("s"), GO, RunContext()))[-1]
    assert (end.usage, end.stop) == (Usage(1, 2), Stop.MAX_TOKENS)
    events = list(Agent(ScriptedBackend([Turn(assistant(Text("cut")), usage=Usage(1, 2),
                                                   stop=Stop.MAX_TOKENS)]), "s").stream(GO))
    assert (events[-2].usage, events[-2].stop) == (Usage(1, 2), Stop.MAX_TOKENS)
    assert events[-1].stop is Stop.MAX_TOKENS


def test_a_turn_error_is_raised_after_its_deltas():
    backend = ScriptedBackend([Turn(assistant(Text("half")), error=OSError("dropped"))])
    stream = backend.turn(Request("s"), GO, RunContext())
    assert next(stream).text == "half"
    with pytest.raises(OSError, match="dropped"):
        next(stream)


def test_a_turn_delay_sleeps_on_the_run_context():
    clock = FakeClock()
    backend = ScriptedBackend([Turn(assistant(Text("x")), delay=30)])
    list(backend.turn(Request("s"), GO, RunContext(clock=clock)))
    assert clock.sleeps == [30] and clock() == 30


def test_all_capabilities_are_on_by_default():
    caps = ScriptedBackend([]).capabilities
    assert caps.mcp and caps.thinking and caps.effort and caps.images and caps.token_counting
    assert caps.min_budget == 0
    assert ScriptedBackend([], capabilities=Capabilities()).capabilities == Capabilities()


def test_a_scripted_backend_pickles():
    copy = pickle.loads(pickle.dumps(ScriptedBackend(["hi"])))
    assert Agent(copy, "s").run(GO).stop is Stop.END


def test_fake_clock_tells_time_records_sleeps_and_advances():
    clock = FakeClock(start=5.0)
    assert clock() == 5.0
    clock.sleep(1.5)
    clock.advance(2)
    assert clock() == 8.5 and clock.sleeps == [1.5]


def test_a_run_context_with_a_fake_clock_sleeps_through_it():
    clock = FakeClock()
    ctx = RunContext(deadline=10, clock=clock)
    ctx.sleep(4)
    assert clock() == 4 and ctx.remaining() == 6
