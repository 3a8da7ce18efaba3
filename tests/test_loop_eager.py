"""The loop's eager start (``Agent(eager_tools=True)``): a call runs the moment its
input is whole, while its turn streams on — order, exclusivity, approvals, a turn that
fails after a call started, cancellation, budgets, the loop guard and a checkpoint
taken while an eager call pauses. Real tools on real threads; the model is a turn
written by hand, so a test can hold the stream open until a tool has started."""

import json
import threading

import pytest

import nacelle
from nacelle import (
    PAUSE, Agent, Budget, Cancelled, Event, Kind, Message, Role, Stop, StreamError, Text,
    ToolCall, ToolContext, Usage, user_text,
)
from nacelle.backend import Capabilities, TurnEnd
from nacelle.events import ToolEvent
from nacelle.retry import Retry, RetryOptions
from nacelle.testing import ScriptedBackend, Turn

WAIT = 5.0  # generous: the longest any test waits for a thread it expects


class Handmade:
    """A backend whose turns are generator functions ``turn(number)``, so a test can
    hold a turn open while it watches the tools."""

    name = "handmade"
    capabilities = Capabilities()

    def __init__(self, *turns):
        self.turns = list(turns)
        self.asked = 0

    def turn(self, request, messages, ctx):
        self.asked += 1
        return self.turns.pop(0)()


def written(call_id, index, name, arguments):
    """What a provider streams for one call: its input in two pieces, then the call."""
    text = json.dumps(arguments)
    half = len(text) // 2
    yield Event(Kind.TOOL_INPUT, text=text[:half], tool=ToolEvent(call_id, index, name, text[:half]))
    yield Event(Kind.TOOL_INPUT, text=text[half:], tool=ToolEvent(call_id, index, name, text))
    yield Event(Kind.TOOL_CALL, tool=ToolEvent(call_id, index, name, text))


def ending(*calls, text=""):
    parts = ((Text(text),) if text else ()) + tuple(
        ToolCall(i, n, json.dumps(a)) for i, n, a in calls)
    return TurnEnd(parts, Usage(10, 5), Stop.TOOLS if calls else Stop.END)


def answer(text="done."):
    def turn():
        yield Event(Kind.TEXT, text=text)
        yield TurnEnd((Text(text),), Usage(10, 5), Stop.END)
    return turn


class Signals:
    """Tools that say when they start, and wait when told to."""

    def __init__(self):
        self.started = {}
        self.release = threading.Event()
        self.order = []
        self.lock = threading.Lock()

    def event(self, name):
        return self.started.setdefault(name, threading.Event())

    def tools(self):
        signals = self

        @nacelle.tool
        def mark(label: str) -> str:
            """Note that it started."""
            with signals.lock:
                signals.order.append(label)
            signals.event(label).set()
            return f"marked {label}"

        @nacelle.tool(exclusive=True)
        def write(label: str) -> str:
            """An exclusive call that waits to be released."""
            with signals.lock:
                signals.order.append(f"start {label}")
            signals.event(label).set()
            signals.release.wait(WAIT)
            with signals.lock:
                signals.order.append(f"end {label}")
            return f"wrote {label}"

        @nacelle.tool
        def hold(label: str, ctx: ToolContext) -> str:
            """Start, then wait until released or cancelled."""
            signals.event(label).set()
            if ctx.cancelled.wait(WAIT):
                return "woke"
            return "held"

        return [mark, write, hold]


def kinds(events):
    return [e.kind for e in events]


def test_an_eager_call_starts_while_its_turn_still_streams():
    signals = Signals()
    seen_during_turn = []

    def first():
        yield Event(Kind.TEXT, text="Looking.")
        yield from written("a", 0, "mark", {"label": "a"})
        seen_during_turn.append(signals.event("a").wait(WAIT))
        yield Event(Kind.TEXT, text=" Still writing.")
        yield ending(("a", "mark", {"label": "a"}), text="Looking. Still writing.")

    agent = Agent(Handmade(first, answer()), "You test.", tools=signals.tools(), eager_tools=True)
    events = list(agent.stream([user_text("go")]))
    assert seen_during_turn == [True]
    shown = [(e.kind, e.text) for e in events if e.kind in (Kind.TEXT, Kind.TOOL_CALL, Kind.TURN)]
    assert shown[:4] == [(Kind.TEXT, "Looking."), (Kind.TOOL_CALL, ""),
                         (Kind.TEXT, " Still writing."), (Kind.TURN, "")]
    assert [e.tool.result for e in events if e.kind is Kind.TOOL_RESULT] == ["marked a"]
    assert events[-1].stop is Stop.END
    # The conversation is what it would have been without eager start.
    messages = events[-1].messages
    assert messages[2].parts[0] == nacelle.ToolResult("a", "mark", "marked a")


def test_without_eager_tools_no_call_starts_before_its_turn_ends():
    signals = Signals()
    seen_during_turn = []

    def first():
        yield from written("a", 0, "mark", {"label": "a"})
        seen_during_turn.append(signals.event("a").wait(0.3))
        yield ending(("a", "mark", {"label": "a"}))

    agent = Agent(Handmade(first, answer()), "You test.", tools=signals.tools())
    events = list(agent.stream([user_text("go")]))
    assert seen_during_turn == [False]
    assert kinds(events)[:5] == [Kind.TOOL_INPUT, Kind.TOOL_INPUT, Kind.TOOL_CALL, Kind.TURN,
                                 Kind.TOOL_RESULT]


def test_every_tool_input_comes_before_its_call_and_the_call_is_announced_once():
    signals = Signals()

    def first():
        yield from written("a", 0, "mark", {"label": "a"})
        yield from written("b", 1, "mark", {"label": "b"})
        yield ending(("a", "mark", {"label": "a"}), ("b", "mark", {"label": "b"}))

    agent = Agent(Handmade(first, answer()), "You test.", tools=signals.tools(), eager_tools=True)
    events = list(agent.stream([user_text("go")]))
    for call_id in ("a", "b"):
        positions = [i for i, e in enumerate(events) if e.tool is not None and e.tool.id == call_id]
        own = [events[i].kind for i in positions]
        assert own[:3] == [Kind.TOOL_INPUT, Kind.TOOL_INPUT, Kind.TOOL_CALL]
        assert own.count(Kind.TOOL_CALL) == 1 and own.count(Kind.TOOL_RESULT) == 1
    assert [e.tool.index for e in events if e.kind is Kind.TOOL_CALL] == [0, 1]


def test_eager_exclusive_calls_keep_the_models_order():
    signals = Signals()

    def first():
        yield from written("a", 0, "write", {"label": "one"})
        assert signals.event("one").wait(WAIT)
        yield from written("b", 1, "write", {"label": "two"})
        yield from written("c", 2, "mark", {"label": "free"})
        # The read runs beside the exclusive chain; the second write waits for the first.
        assert signals.event("free").wait(WAIT)
        assert not signals.event("two").is_set()
        signals.release.set()
        yield ending(("a", "write", {"label": "one"}), ("b", "write", {"label": "two"}),
                     ("c", "mark", {"label": "free"}))

    agent = Agent(Handmade(first, answer()), "You test.", tools=signals.tools(), eager_tools=True)
    events = list(agent.stream([user_text("go")]))
    writes = [step for step in signals.order if "free" not in step]
    assert writes == ["start one", "end one", "start two", "end two"]
    assert events[-1].stop is Stop.END


def test_approval_is_asked_the_moment_an_eager_call_starts():
    asked = threading.Event()
    answers = []

    def approve(name, arguments, ctx):
        asked.set()
        return True

    def first():
        yield from written("a", 0, "mark", {"label": "a"})
        answers.append(asked.wait(WAIT))
        yield ending(("a", "mark", {"label": "a"}))

    signals = Signals()
    agent = Agent(Handmade(first, answer()), "You test.", tools=signals.tools(), approve=approve,
                  eager_tools=True)
    list(agent.stream([user_text("go")]))
    assert answers == [True]


def test_a_turn_that_fails_after_an_eager_call_started_closes_it_and_is_not_retried():
    signals = Signals()

    def first():
        yield from written("a", 0, "hold", {"label": "a"})
        assert signals.event("a").wait(WAIT)
        raise StreamError("the connection dropped", retryable=True)

    backend = Handmade(first, answer())
    agent = Agent(Retry(backend, RetryOptions(attempts=3)), "You test.", tools=signals.tools(), eager_tools=True)
    seen = []
    with pytest.raises(StreamError, match="connection dropped"):
        for event in agent.stream([user_text("go")]):
            seen.append(event)
    assert backend.asked == 1
    closes = [e.tool for e in seen if e.kind is Kind.TOOL_RESULT]
    assert [c.id for c in closes] == ["a"]
    assert closes[0].error.startswith(("stopped: the model's turn failed", "not run"))


def test_cancelling_while_an_eager_call_runs_closes_it_as_cancelled():
    signals = Signals()
    cancel = threading.Event()

    def first():
        yield from written("a", 0, "hold", {"label": "a"})
        assert signals.event("a").wait(WAIT)
        cancel.set()
        yield Event(Kind.TEXT, text="more")
        yield ending(("a", "hold", {"label": "a"}))

    agent = Agent(Handmade(first, answer()), "You test.", tools=signals.tools(), eager_tools=True)
    seen = []
    with pytest.raises(Cancelled):
        for event in agent.stream([user_text("go")], cancel=cancel):
            seen.append(event)
    closes = [e.tool for e in seen if e.kind is Kind.TOOL_RESULT]
    assert [c.id for c in closes] == ["a"] and closes[0].failed


def test_a_tool_call_budget_starts_only_the_calls_it_allows_and_stops_the_run():
    signals = Signals()

    def first():
        yield from written("a", 0, "mark", {"label": "a"})
        yield from written("b", 1, "mark", {"label": "b"})
        yield ending(("a", "mark", {"label": "a"}), ("b", "mark", {"label": "b"}))

    agent = Agent(Handmade(first), "You test.", tools=signals.tools(), eager_tools=True,
                  budget=Budget(tool_calls=1))
    events = list(agent.stream([user_text("go")]))
    results = {e.tool.id: e.tool for e in events if e.kind is Kind.TOOL_RESULT}
    assert results["a"].result == "marked a"
    assert results["b"].discarded and "budget" in results["b"].error
    assert signals.order == ["a"]
    assert events[-1].stop is Stop.BUDGET
    # Every call of the recorded turn has its result, as without eager start.
    assert [r.id for r in events[-1].messages[-1].parts] == ["a", "b"]


def test_the_loop_guard_counts_eager_calls_once():
    signals = Signals()

    def same():
        yield from written("x", 0, "mark", {"label": "same"})
        yield ending(("x", "mark", {"label": "same"}))

    agent = Agent(Handmade(same, same, same, answer()), "You test.", tools=signals.tools(),
                  eager_tools=True, loop_guard=3)
    events = list(agent.stream([user_text("go")]))
    results = [e.tool for e in events if e.kind is Kind.TOOL_RESULT]
    assert [r.refused for r in results] == [False, False, True]
    assert signals.order == ["same", "same"]


def test_a_checkpoint_taken_while_an_eager_call_pauses_resumes_it_once():
    runs = []

    @nacelle.tool
    def deploy(target: str) -> str:
        """Deploy."""
        runs.append(target)
        return f"deployed {target}"

    def approve(name, arguments, ctx):
        return PAUSE if name == "deploy" else True

    def first():
        yield from written("a", 0, "deploy", {"target": "prod"})
        yield Event(Kind.TEXT, text="after")
        yield ending(("a", "deploy", {"target": "prod"}), text="after")

    backend = Handmade(first, answer("shipped."))
    agent = Agent(backend, "You test.", tools=[deploy], approve=approve, eager_tools=True)
    events = list(agent.stream([user_text("go")]))
    done = events[-1]
    assert done.stop is Stop.PAUSED and [p.id for p in done.checkpoint.pending] == ["a"]
    assert runs == []
    restored = nacelle.Checkpoint.loads(done.checkpoint.dumps())
    resumed = list(agent.resume(restored, {"a": True}))
    assert runs == ["prod"] and resumed[-1].stop is Stop.END


def test_a_scripted_turn_with_gaps_starts_its_calls_before_it_ends():
    started = threading.Event()
    during = []

    @nacelle.tool
    def mark(label: str) -> str:
        """Note it."""
        started.set()
        return label

    class Watching(ScriptedBackend):
        def turn(self, request, messages, ctx):
            for item in super().turn(request, messages, ctx):
                if isinstance(item, TurnEnd):
                    during.append(started.wait(WAIT) if item.stop is Stop.TOOLS else None)
                yield item

    call = ToolCall("a", "mark", '{"label": "x"}')
    backend = Watching([Turn(Message(Role.ASSISTANT, (call, Text("then more"))), gap=0.05),
                        "done."])
    events = list(Agent(backend, "You test.", tools=[mark], eager_tools=True).stream(
        [user_text("go")]))
    assert during[0] is True
    order = [e.kind for e in events if e.kind in (Kind.TOOL_CALL, Kind.TEXT)]
    assert order[:2] == [Kind.TOOL_CALL, Kind.TEXT]


def test_eager_tools_must_be_a_bool():
    with pytest.raises(nacelle.ConfigError, match="eager_tools"):
        Agent(ScriptedBackend(["hi"]), "You test.", eager_tools="yes")


def test_observers_see_an_eager_call_as_any_other_one_paired_tool_span():
    signals = Signals()
    seen = []

    def first():
        yield from written("a", 0, "mark", {"label": "a"})
        assert signals.event("a").wait(WAIT)
        yield ending(("a", "mark", {"label": "a"}))

    agent = Agent(Handmade(first, answer()), "You test.", tools=signals.tools(), eager_tools=True,
                  observers=[seen.append])
    list(agent.stream([user_text("go")]))
    starts = [o for o in seen if o.kind == "tool.start"]
    ends = [o for o in seen if o.kind == "tool.end"]
    assert [o.data["id"] for o in starts] == ["a"] and [o.data["id"] for o in ends] == ["a"]
    assert starts[0].data["span"] == ends[0].data["span"]
    assert ends[0].data["result"] == "marked a" and ends[0].data["error"] is None
