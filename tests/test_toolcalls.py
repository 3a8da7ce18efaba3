"""A turn's calls under hostile timing: tools that ignore cancellation, queued calls
and their timeouts, the run's deadline over its tools, hooks that raise anything —
through ScriptedBackend, with real tools on real threads."""

import threading
import time

import pytest

import nacelle
from nacelle import (
    Agent, Budget, HookPoint, HookResult, Kind, Message, Retry, RetryOptions, Role, Stop, Text, ToolCall, ToolContext, ToolResult, user_text,
)
from nacelle.context import RunContext
from nacelle.loop import RunSettings, run
from nacelle.testing import FakeClock, ScriptedBackend


def assistant(*parts):
    return Message(Role.ASSISTANT, parts)


def results_of(events):
    opened = [e.tool.id for e in events if e.kind is Kind.TOOL_CALL]
    closed = [e.tool.id for e in events if e.kind is Kind.TOOL_RESULT]
    assert sorted(opened) == sorted(closed) and len(set(closed)) == len(closed)
    return {e.tool.id: e.tool for e in events if e.kind is Kind.TOOL_RESULT}


released = threading.Event()  # set at the end of each test, so no stubborn thread outlives it


@pytest.fixture(autouse=True)
def release_stubborn_tools():
    released.clear()
    yield
    released.set()


@nacelle.tool
def stubborn(ctx: ToolContext) -> str:
    """Ignores cancellation: answers only when the test lets it go (at most 10 s)."""
    released.wait(10)
    return "too late"


@nacelle.tool
def quick(word: str) -> str:
    """Answers at once."""
    return word


@nacelle.tool
def slow(seconds: float) -> str:
    """Sleeps without looking at its context."""
    time.sleep(seconds)
    return "slept"


@pytest.mark.slow
def test_a_tool_that_ignores_cancellation_does_not_hold_a_slot_for_the_next_turn():
    backend = ScriptedBackend([
        assistant(ToolCall("a", "stubborn", "{}")),
        assistant(ToolCall("b", "quick", '{"word": "one"}'), ToolCall("c", "quick", '{"word": "two"}')),
        assistant(Text("done")),
    ])
    agent = Agent(backend, "Test.", tools=[stubborn, quick], tool_timeout=0.3,
                  max_parallel_tools=1)
    started = time.monotonic()
    events = list(agent.stream([user_text("go")]))
    elapsed = time.monotonic() - started
    by_id = results_of(events)
    assert by_id["a"].error == "timed out after 0.3 s"
    assert (by_id["b"].result, by_id["c"].result) == ("one", "two")
    assert by_id["b"].error is None and by_id["c"].error is None
    assert elapsed < 3.0  # 0.3 s of timeout; the stubborn thread holds on for 10 s
    assert events[-1].stop is Stop.END


@pytest.mark.slow
def test_a_queued_call_times_out_from_when_it_was_asked_not_when_a_slot_freed():
    backend = ScriptedBackend([
        assistant(ToolCall("a", "stubborn", "{}"), ToolCall("b", "quick", '{"word": "w"}')),
        assistant(Text("done")),
    ])
    agent = Agent(backend, "Test.", tools=[stubborn, quick], tool_timeout=0.3,
                  max_parallel_tools=1)
    started = time.monotonic()
    events = list(agent.stream([user_text("go")]))
    assert time.monotonic() - started < 3.0
    by_id = results_of(events)
    assert by_id["a"].error == by_id["b"].error == "timed out after 0.3 s"
    assert backend.requests[1].messages[-1].parts == (
        ToolResult("a", "stubborn", "timed out after 0.3 s", True),
        ToolResult("b", "quick", "timed out after 0.3 s", True))


def test_calls_beyond_the_parallel_limit_wait_for_a_slot_and_all_run():
    active, most = [0], [0]
    lock = threading.Lock()

    @nacelle.tool
    def counted(n: int) -> str:
        """Counts how many run at once."""
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return str(n)

    parts = tuple(ToolCall(f"c{i}", "counted", f'{{"n": {i}}}') for i in range(9))
    backend = ScriptedBackend([assistant(*parts), assistant(Text("done"))])
    events = list(Agent(backend, "Test.", tools=[counted], max_parallel_tools=3)
                  .stream([user_text("go")]))
    by_id = results_of(events)
    assert [by_id[f"c{i}"].result for i in range(9)] == [str(i) for i in range(9)]
    assert most[0] == 3


def test_tool_timeouts_read_the_run_clock():
    clock = FakeClock(1000.0)

    @nacelle.tool
    def waits(ctx: ToolContext) -> str:
        """Moves the test's clock past the timeout, then waits to be cancelled."""
        clock.advance(60)
        ctx.cancelled.wait(10)
        return "cancelled" if ctx.cancelled.is_set() else "never cancelled"

    backend = ScriptedBackend([assistant(ToolCall("a", "waits", "{}")), assistant(Text("k"))])
    agent = Agent(backend, "Test.", tools=[waits], tool_timeout=30.0)
    started = time.monotonic()
    events = list(run(agent.request([user_text("go")]), RunContext(clock=clock), backend.turn,
                      settings=RunSettings(tool_timeout=30.0)))
    assert time.monotonic() - started < 3.0  # 60 simulated seconds, not 30 real ones
    assert results_of(events)["a"].error == "timed out after 30 s"


@pytest.mark.slow
def test_a_budget_in_seconds_bounds_a_slow_tool_and_ends_the_run_with_budget():
    backend = ScriptedBackend([assistant(ToolCall("a", "slow", '{"seconds": 2.5}')),
                               assistant(Text("never asked"))])
    agent = Agent(backend, "Test.", tools=[slow], budget=Budget(seconds=0.5))
    started = time.monotonic()
    events = list(agent.stream([user_text("go")]))
    assert time.monotonic() - started < 2.0
    done = events[-1]
    assert done.kind is Kind.DONE and done.stop is Stop.BUDGET
    assert results_of(events)["a"].error == ("stopped: the run's deadline passed before this "
                                             "call finished")
    assert done.messages[-1].parts[0].failed and len(backend.requests) == 1


def test_a_retry_budget_bounds_each_turn_and_not_the_tools_between_them():
    # Retry wraps a turn: its budget is each turn's, and the run's deadline is Budget's.
    backend = ScriptedBackend([assistant(ToolCall("a", "slow", '{"seconds": 0.4}')),
                               assistant(Text("done"))])
    agent = Agent(Retry(backend, RetryOptions(budget=0.2)), "Test.", tools=[slow])
    events = list(agent.stream([user_text("go")]))
    assert results_of(events)["a"].result == "slept" and events[-1].stop is Stop.END


@pytest.mark.slow
def test_a_call_waiting_for_a_slot_at_the_deadline_is_closed_as_not_run():
    backend = ScriptedBackend([
        assistant(ToolCall("a", "stubborn", "{}"), ToolCall("b", "quick", '{"word": "w"}')),
        assistant(Text("never asked")),
    ])
    agent = Agent(backend, "Test.", tools=[stubborn, quick], max_parallel_tools=1,
                  budget=Budget(seconds=0.3))
    events = list(agent.stream([user_text("go")]))
    by_id = results_of(events)
    assert by_id["b"].discarded and by_id["b"].error == ("not run: the run's deadline passed "
                                                         "before this call started")
    assert not by_id["a"].discarded and events[-1].stop is Stop.BUDGET


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
def test_an_after_hook_raising_any_base_exception_leaves_the_result_of_a_tool_that_ran(raised):
    def hook(event):
        raise raised

    backend = ScriptedBackend([assistant(ToolCall("a", "quick", '{"word": "kept"}')),
                               assistant(Text("done"))])
    agent = Agent(backend, "Test.", tools=[quick],
                  hooks={HookPoint.AFTER_TOOL_CALL: [hook]})
    result = results_of(list(agent.stream([user_text("go")])))["a"]
    assert (result.result, result.error) == ("kept", None)


def test_a_before_hook_raising_a_base_exception_denies_the_call():
    def hook(event):
        raise SystemExit(2)

    backend = ScriptedBackend([assistant(ToolCall("a", "quick", '{"word": "w"}')),
                               assistant(Text("done"))])
    agent = Agent(backend, "Test.", tools=[quick],
                  hooks={HookPoint.BEFORE_TOOL_CALL: [hook]})
    result = results_of(list(agent.stream([user_text("go")])))["a"]
    assert result.error.startswith("denied: a check before quick failed (SystemExit")
    assert result.result == ""


def test_an_after_hook_inject_still_applies_when_another_after_hook_raises():
    def broken(event):
        raise SystemExit(1)

    def adds(event):
        return HookResult(inject="note")

    backend = ScriptedBackend([assistant(ToolCall("a", "quick", '{"word": "w"}')),
                               assistant(Text("done"))])
    agent = Agent(backend, "Test.", tools=[quick],
                  hooks={HookPoint.AFTER_TOOL_CALL: [broken, adds]})
    assert results_of(list(agent.stream([user_text("go")])))["a"].result == "w\n\nnote"


def test_a_finished_call_no_longer_listens_to_the_run():
    ctx = RunContext()
    backend = ScriptedBackend([
        assistant(*(ToolCall(f"c{i}", "quick", '{"word": "w"}') for i in range(50))),
        assistant(Text("done")),
    ])
    agent = Agent(backend, "Test.", tools=[quick])
    events = list(run(agent.request([user_text("go")]), ctx, backend.turn))  # no loop guard
    assert events[-1].stop is Stop.END
    assert ctx.cancelled._callbacks == {}


@pytest.mark.slow
def test_calls_closed_before_they_ran_no_longer_listen_to_the_run():
    ctx = RunContext()
    backend = ScriptedBackend([
        assistant(ToolCall("a", "stubborn", "{}"), ToolCall("b", "quick", '{"word": "w"}'),
                  ToolCall("c", "quick", '{"word": "w"}')),
        assistant(Text("done")),
    ])
    agent = Agent(backend, "Test.", tools=[stubborn, quick])
    events = list(run(agent.request([user_text("go")]), ctx, backend.turn,
                      settings=RunSettings(tool_timeout=0.2, max_parallel_tools=1, loop_guard=3)))
    assert events[-1].stop is Stop.END
    # Only the abandoned call still listens, until its thread lets go.
    assert len(ctx.cancelled._callbacks) <= 1
    released.set()
    deadline = time.monotonic() + 5
    while ctx.cancelled._callbacks and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ctx.cancelled._callbacks == {}


@pytest.mark.slow
def test_a_tools_own_timeout_fails_only_its_calls_and_leaves_their_threads_behind():
    limited = nacelle.tool(stubborn.fn, name="limited", timeout=0.3)
    backend = ScriptedBackend([
        assistant(ToolCall("a", "limited", "{}"), ToolCall("b", "slow", '{"seconds": 0.8}')),
        assistant(ToolCall("c", "limited", "{}"), ToolCall("d", "quick", '{"word": "w"}')),
        assistant(Text("done")),
    ])
    agent = Agent(backend, "Test.", tools=[limited, slow, quick], max_parallel_tools=1)
    started = time.monotonic()
    events = list(agent.stream([user_text("go")]))
    assert time.monotonic() - started < 4.0  # the stubborn threads hold on for 10 s
    by_id = results_of(events)
    assert by_id["a"].error == by_id["c"].error == "timed out after 0.3 s"
    assert by_id["b"].result == "slept" and by_id["d"].result == "w"
    assert events[-1].stop is Stop.END


@pytest.mark.slow
def test_the_sooner_of_a_tools_timeout_and_tool_timeout_applies():
    limited = nacelle.tool(stubborn.fn, name="limited", timeout=30)
    backend = ScriptedBackend([assistant(ToolCall("a", "limited", "{}"),
                                         ToolCall("b", "stubborn", "{}")),
                               assistant(Text("done"))])
    events = list(Agent(backend, "Test.", tools=[limited, stubborn], tool_timeout=0.3)
                  .stream([user_text("go")]))
    by_id = results_of(events)
    assert by_id["a"].error == by_id["b"].error == "timed out after 0.3 s"


def concurrency_counter():
    active, most = {}, {}
    lock = threading.Lock()

    def counted(name):
        with lock:
            active[name] = active.get(name, 0) + 1
            most[name] = max(most.get(name, 0), active[name])
        time.sleep(0.05)
        with lock:
            active[name] -= 1

    return counted, most


def test_max_concurrency_bounds_a_tools_calls_while_other_tools_use_the_free_slots():
    counted, most = concurrency_counter()

    @nacelle.tool(max_concurrency=2)
    def narrow(n: int) -> str:
        """At most two at once."""
        counted("narrow")
        return str(n)

    @nacelle.tool
    def wide(n: int) -> str:
        """As many as there are slots."""
        counted("wide")
        return str(n)

    parts = tuple(ToolCall(f"n{i}", "narrow", f'{{"n": {i}}}') for i in range(6)) + tuple(
        ToolCall(f"w{i}", "wide", f'{{"n": {i}}}') for i in range(6))
    backend = ScriptedBackend([assistant(*parts), assistant(Text("done"))])
    events = list(Agent(backend, "Test.", tools=[narrow, wide], max_parallel_tools=8)
                  .stream([user_text("go")]))
    by_id = results_of(events)
    assert [by_id[f"n{i}"].result for i in range(6)] == [str(i) for i in range(6)]
    assert [by_id[f"w{i}"].result for i in range(6)] == [str(i) for i in range(6)]
    assert most["narrow"] == 2 and most["wide"] == 6


@pytest.mark.slow
def test_a_timed_out_call_frees_its_tools_concurrency_for_the_next_one():
    limited = nacelle.tool(stubborn.fn, name="limited", timeout=0.3, max_concurrency=1)
    one = nacelle.tool(quick.fn, name="one", max_concurrency=1)
    backend = ScriptedBackend([
        assistant(ToolCall("a", "limited", "{}"), ToolCall("b", "limited", "{}"),
                  ToolCall("c", "one", '{"word": "x"}'), ToolCall("d", "one", '{"word": "y"}')),
        assistant(Text("done")),
    ])
    started = time.monotonic()
    events = list(Agent(backend, "Test.", tools=[limited, one]).stream([user_text("go")]))
    assert time.monotonic() - started < 4.0
    by_id = results_of(events)
    # Both limited calls were asked at once, so both are due 0.3 s after the model asked.
    assert by_id["a"].error == by_id["b"].error == "timed out after 0.3 s"
    assert (by_id["c"].result, by_id["d"].result) == ("x", "y")


def test_a_long_result_is_cut_with_a_note_and_a_tools_own_cap_overrides_the_agents():
    @nacelle.tool
    def big(n: int) -> str:
        """Returns n characters."""
        return "x" * n

    @nacelle.tool(max_result_chars=10)
    def small(n: int) -> str:
        """Returns n characters, cut at 10."""
        return "y" * n

    @nacelle.tool
    def fails(n: int) -> str:
        """Raises with n characters."""
        raise ValueError("e" * n)

    backend = ScriptedBackend([assistant(ToolCall("a", "big", '{"n": 5000000}'),
                                         ToolCall("b", "small", '{"n": 50}'),
                                         ToolCall("c", "big", '{"n": 100}'),
                                         ToolCall("d", "fails", '{"n": 300}')),
                               assistant(Text("done"))])
    events = list(Agent(backend, "Test.", tools=[big, small, fails], max_result_chars=200)
                  .stream([user_text("go")]))
    by_id = results_of(events)
    assert by_id["a"].result.startswith("x" * 200 + "\n\n[")
    assert len(by_id["a"].result) < 400 and "4,999,800" in by_id["a"].result
    assert "5,000,000" in by_id["a"].result
    assert by_id["b"].result.startswith("y" * 10 + "\n\n[") and "40" in by_id["b"].result
    assert by_id["c"].result == "x" * 100
    assert by_id["d"].error.startswith("e" * 200 + "\n\n[") and "100" in by_id["d"].error
    sent = backend.requests[1].messages[-1].parts
    assert sent[0].result == by_id["a"].result and sent[3].result == by_id["d"].error


def test_half_a_surrogate_pair_in_a_result_reaches_the_model_as_a_replacement_character():
    from nacelle.backends import anthropic
    from nacelle.testing import FakeServer, Reply
    from nacelle.testing.wire import anthropic_stream

    @nacelle.tool
    def emoji() -> str:
        """An emoji an MCP server cut in half."""
        return "half \ud83d here"

    with FakeServer() as server:
        server.queue("/v1/messages",
                     Reply(chunks=anthropic_stream([], tool_calls=[("toolu_1", "emoji", "{}")])),
                     Reply(chunks=anthropic_stream(["Read it."])))
        agent = nacelle.Agent(anthropic.Backend(api_key="sk-test", base_url=server.url),
                              "Be brief.", tools=[emoji])
        result = agent.run([nacelle.user_text("Show it.")])
        sent = server.requests[1].json()["messages"][-1]["content"][0]["content"]
    assert result.text == "Read it."
    assert sent == "half \ufffd here" and result.messages[2].parts[0].result == "half \ufffd here"


# -- media -----------------------------------------------------------------------

from nacelle import Document, Image  # noqa: E402

PICTURE = Image("image/png", "iVBORw0KGgo=")
PAPER = Document("application/pdf", "JVBERi0xLjQ=", "paper.pdf")


@nacelle.tool
def screenshot(caption: str = "") -> list:
    """A screenshot, captioned when asked."""
    return [caption, PICTURE] if caption else [PICTURE]


@nacelle.tool
def paper() -> Document:
    """A PDF."""
    return PAPER


def test_a_tool_returning_media_closes_its_call_with_the_parts_and_their_text():
    backend = ScriptedBackend([assistant(ToolCall("a", "screenshot", '{"caption": "the page"}'),
                                         ToolCall("b", "paper", "{}"),
                                         ToolCall("c", "quick", '{"word": "w"}')),
                               assistant(Text("done"))])
    events = list(Agent(backend, "Test.", tools=[screenshot, paper, quick])
                  .stream([user_text("go")]))
    by_id = results_of(events)
    assert (by_id["a"].result, by_id["a"].content) == ("the page", (Text("the page"), PICTURE))
    assert (by_id["b"].result, by_id["b"].content) == ("", (PAPER,))
    assert (by_id["c"].result, by_id["c"].content) == ("w", ())
    recorded = backend.requests[1].messages[-1].parts
    assert recorded == (ToolResult("a", "screenshot", "the page", content=(Text("the page"), PICTURE)),
                        ToolResult("b", "paper", "", content=(PAPER,)),
                        ToolResult("c", "quick", "w"))
    assert events[-1].messages[-2].parts == recorded


def test_the_result_cap_cuts_the_text_of_a_tools_media_and_keeps_its_images():
    @nacelle.tool
    def album() -> list:
        """Pictures with long captions."""
        return [Text("a" * 30), PICTURE, Text("b" * 30), Text("c" * 30), PICTURE]

    backend = ScriptedBackend([assistant(ToolCall("a", "album", "{}")), assistant(Text("done"))])
    events = list(Agent(backend, "Test.", tools=[album], max_result_chars=40)
                  .stream([user_text("go")]))
    result = results_of(events)["a"]
    assert result.result.startswith("a" * 30 + "\n" + "b" * 9 + "\n\n[cut: ")
    texts = [p.text for p in result.content if isinstance(p, Text)]
    assert "\n".join(texts) == result.result
    assert [type(p).__name__ for p in result.content] == ["Text", "Image", "Text", "Image"]


def test_a_cut_that_ends_between_two_text_parts_keeps_the_parts_text_equal_to_the_result():
    @nacelle.tool
    def pair() -> list:
        """Two captions."""
        return [Text("a" * 10), Text("b" * 10), PICTURE]

    for limit in (9, 10, 11, 12):
        backend = ScriptedBackend([assistant(ToolCall("a", "pair", "{}")), assistant(Text("done"))])
        events = list(Agent(backend, "Test.", tools=[pair], max_result_chars=limit)
                      .stream([user_text("go")]))
        result = results_of(events)["a"]
        texts = [p.text for p in result.content if isinstance(p, Text)]
        assert "\n".join(texts) == result.result, limit
        assert result.content[-1] == PICTURE


def test_after_hooks_see_the_text_of_a_tools_media_and_an_inject_joins_the_parts():
    seen = []

    def after(event):
        seen.append(event.result)
        return HookResult(inject="look closely")

    backend = ScriptedBackend([assistant(ToolCall("a", "screenshot", '{"caption": "cap"}')),
                               assistant(Text("done"))])
    events = list(Agent(backend, "Test.", tools=[screenshot],
                        hooks={HookPoint.AFTER_TOOL_CALL: [after]}).stream([user_text("go")]))
    result = results_of(events)["a"]
    assert seen == ["cap"]
    assert result.content[:2] == (Text("cap"), PICTURE) and "look closely" in result.result
    assert "\n".join(p.text for p in result.content if isinstance(p, Text)) == result.result


def test_an_after_hook_that_denies_a_tools_media_leaves_only_the_failure():
    backend = ScriptedBackend([assistant(ToolCall("a", "screenshot", "{}")), assistant(Text("done"))])
    events = list(Agent(backend, "Test.", tools=[screenshot], hooks={
        HookPoint.AFTER_TOOL_CALL: [lambda event: HookResult(deny="not this one")]})
        .stream([user_text("go")]))
    result = results_of(events)["a"]
    assert (result.error, result.content) == ("not this one", ())
    assert backend.requests[1].messages[-1].parts == (
        ToolResult("a", "screenshot", "not this one", True),)
