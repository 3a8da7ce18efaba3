"""Fallback: a turn that fails before yielding moves to the next backend, the run goes
on, and the next turn starts from the first backend again — through ScriptedBackends
and through two real backends on loopback."""

import logging
import pickle

import pytest

import nacelle
from nacelle import (
    Agent, Cancelled, Capabilities, ConfigError, Fallback, Kind, Message, Retry,
    RetryOptions, Role, Stop, StreamError, Text, ToolCall, assistant_text, transient,
    user_text,
)
from nacelle.backend import TurnEnd
from nacelle.backends import anthropic, openrouter
from nacelle.testing import FakeServer, Reply, ScriptedBackend, Turn, wire


def failing(error=None):
    return Turn(Message(Role.ASSISTANT, ()),
                error=error or transient(StreamError("overloaded_error: Overloaded")))


@nacelle.tool
def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: Which city.
    """
    return f"sunny in {city}"


def texts(events):
    return [e.text for e in events if e.kind is Kind.TEXT]


def test_a_turn_that_fails_before_yielding_is_answered_by_the_next_backend(caplog):
    primary = ScriptedBackend([failing()], name="primary")
    spare = ScriptedBackend([assistant_text("From the spare.")], name="spare")
    caplog.set_level(logging.WARNING, logger="nacelle.fallback")
    result = Agent(Fallback([primary, spare]), "Test.").run([user_text("hi")])
    assert result.text == "From the spare." and result.stop is Stop.END
    assert len(primary.requests) == len(spare.requests) == 1
    assert "backend 'primary' failed before answering (StreamError" in caplog.text
    assert "asking 'spare'" in caplog.text


def test_the_run_goes_on_and_the_next_turn_starts_from_the_first_backend():
    primary = ScriptedBackend([
        Message(Role.ASSISTANT, (ToolCall("a", "lookup", '{"city": "Oslo"}'),)),
        failing(),
        Message(Role.ASSISTANT, (ToolCall("b", "lookup", '{"city": "Rome"}'),)),
        assistant_text("Both sunny."),
    ], name="primary")
    spare = ScriptedBackend([
        Message(Role.ASSISTANT, (ToolCall("c", "lookup", '{"city": "Lima"}'),)),
    ], name="spare")
    events = list(Agent(Fallback([primary, spare]), "Test.", tools=[lookup])
                  .stream([user_text("weather")]))
    results = [e.tool.result for e in events if e.kind is Kind.TOOL_RESULT]
    assert results == ["sunny in Oslo", "sunny in Lima", "sunny in Rome"]
    assert events[-1].stop is Stop.END and texts(events) == ["Both sunny."]
    # The spare saw the conversation as it was when the primary failed.
    assert spare.requests[0].messages == primary.requests[1].messages


def test_a_failure_after_the_turn_yielded_is_raised_and_the_spare_is_never_asked():
    primary = ScriptedBackend([Turn(assistant_text("half"), error=transient(StreamError("drop")))])
    spare = ScriptedBackend([assistant_text("never")])
    with pytest.raises(StreamError, match="drop"):
        Agent(Fallback([primary, spare]), "Test.").run([user_text("hi")])
    assert spare.requests == []


def test_a_failure_on_does_not_accept_is_raised_at_once():
    primary = ScriptedBackend([failing(nacelle.APIError(400, "invalid_request_error", "bad"))])
    spare = ScriptedBackend([assistant_text("never")])
    with pytest.raises(nacelle.APIError):
        Agent(Fallback([primary, spare]), "Test.").run([user_text("hi")])
    assert spare.requests == []


def test_on_decides_what_falls_back():
    refused = nacelle.APIError(400, "invalid_request_error", "too long for this model")
    primary = ScriptedBackend([failing(refused)])
    spare = ScriptedBackend([assistant_text("I can.")])
    agent = Agent(Fallback([primary, spare], on=lambda err: True), "Test.")
    assert agent.run([user_text("hi")]).text == "I can."


def test_the_last_backends_failure_is_raised():
    backends = [ScriptedBackend([failing(transient(StreamError(f"down {i}")))]) for i in range(3)]
    with pytest.raises(StreamError, match="down 2"):
        Agent(Fallback(backends), "Test.").run([user_text("hi")])


def test_cancellation_never_falls_back():
    primary = ScriptedBackend([failing(Cancelled("stop"))])
    spare = ScriptedBackend([assistant_text("never")])
    with pytest.raises(Cancelled):
        Agent(Fallback([primary, spare]), "Test.").run([user_text("hi")])
    assert spare.requests == []


def test_retry_outside_a_fallback_retries_a_turn_every_backend_failed():
    primary = ScriptedBackend([failing(), assistant_text("Back.")], name="primary")
    spare = ScriptedBackend([failing()], name="spare")
    backend = Retry(Fallback([primary, spare]), RetryOptions(base=0.0, max=0.0))
    assert Agent(backend, "Test.").run([user_text("hi")]).text == "Back."


class TurnOnly:
    """A user's backend: ``name``, ``capabilities`` and ``turn``, nothing else."""

    capabilities = Capabilities()

    def __init__(self, name, items):
        self.name = name
        self.items = items

    def turn(self, request, messages, ctx):
        for item in self.items:
            if isinstance(item, BaseException):
                raise item
            yield item


def test_the_turn_asked_directly_moves_to_the_next_backend():
    end = TurnEnd((Text("b"),))
    fallback = Fallback([TurnOnly("a", [transient(StreamError("down"))]),
                         TurnOnly("b", [nacelle.Event(Kind.TEXT, text="b"), end])])
    items = list(fallback.turn(nacelle.Request("s"), (user_text("hi"),), nacelle.RunContext()))
    assert texts(items[:-1]) == ["b"] and items[-1] is end


def test_user_backends_with_only_a_turn_fall_back_inside_an_agent():
    fallback = Fallback([TurnOnly("a", [transient(StreamError("down"))]),
                         TurnOnly("b", [nacelle.Event(Kind.TEXT, text="b"),
                                        TurnEnd((Text("b"),))])])
    events = list(Agent(fallback, "Test.").stream([user_text("hi")]))
    assert texts(events) == ["b"] and events[-1].stop is Stop.END


def test_a_backend_with_only_a_whole_run_is_no_backend():
    class WholeRun:
        name = "old"
        capabilities = Capabilities()

        def stream(self, request, ctx):
            return iter(())

    with pytest.raises(ConfigError, match="'turn'"):
        Fallback([ScriptedBackend([]), WholeRun()])


def test_capabilities_are_what_every_backend_can_do():
    a = ScriptedBackend([], capabilities=Capabilities(mcp=True, thinking=True, min_budget=1024))
    b = ScriptedBackend([], capabilities=Capabilities(thinking=True, images=True, min_budget=2048))
    caps = Fallback([a, b]).capabilities
    assert caps == Capabilities(thinking=True, min_budget=2048)
    with pytest.raises(nacelle.Unsupported):
        Agent(Fallback([a, b]), "Test.", mcp=[nacelle.MCPServer("m", "https://example.com")])


def test_a_fallback_needs_backends():
    with pytest.raises(ConfigError, match="at least one backend"):
        Fallback([])
    with pytest.raises(ConfigError, match="is not a Backend"):
        Fallback([object()])


def test_a_fallback_of_picklable_backends_pickles():
    fallback = Fallback([ScriptedBackend([assistant_text("a")], name="a"),
                         ScriptedBackend([assistant_text("b")], name="b")])
    copy = pickle.loads(pickle.dumps(fallback))
    assert copy.name == "fallback(a, b)" and copy.capabilities == fallback.capabilities


def test_a_real_anthropic_overload_moves_the_turn_to_openrouter_and_drops_anthropic_state():
    with FakeServer() as server:
        server.queue("/v1/messages",
                     Reply(chunks=wire.anthropic_stream(
                         text_deltas=(), tool_calls=[("toolu_1", "lookup", '{"city": "Paris"}')])),
                     Reply(chunks=wire.anthropic_stream(
                         text_deltas=(), error=("overloaded_error", "Overloaded"))))
        server.queue("/api/v1/chat/completions",
                     Reply(chunks=wire.openrouter_stream(content_deltas=("Sunny in Paris.",))))
        primary = anthropic.Backend("sk-ant-test", base_url=server.url, max_retries=0)
        spare = openrouter.Backend("sk-or-test", model="openai/gpt-5", base_url=server.url + "/api/v1",
                                   max_retries=0)
        result = Agent(Fallback([primary, spare]), "Be brief.", tools=[lookup]).run(
            [user_text("Weather in Paris?")])
        assert result.text == "Sunny in Paris." and result.stop is Stop.END
        sent = server.requests[-1].json()
        assert server.requests[-1].path == "/api/v1/chat/completions"
        roles = [m["role"] for m in sent["messages"]]
        assert roles == ["system", "user", "assistant", "tool"]
        assert sent["messages"][3]["content"] == "sunny in Paris"
