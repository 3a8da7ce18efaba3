"""toolround.py: a Round driven directly, as the loop drives it — its calls started,
their results yielded once each, calls added while a turn streams, calls closed by
cancellation, by the round's own close and by a timeout on the run's clock — with
real tools on real threads. The loop's view of the same rules (slots, the exclusive
chain, a tool's concurrency, hooks) is in test_toolcalls.py and test_loop.py."""

import threading
import time

import pytest

import nacelle
from nacelle import Cancelled, Kind, ToolCall, ToolContext
from nacelle.context import RunContext
from nacelle.testing import FakeClock
from nacelle.toolcalls import ToolSink
from nacelle.toolround import Call, Round

#: Set at the end of each test, so no tool thread a test left blocked outlives it.
released = threading.Event()


@pytest.fixture(autouse=True)
def release_blocked_tools():
    released.clear()
    yield
    released.set()


@nacelle.tool
def echo(word: str) -> str:
    """Answers at once."""
    return word


started = threading.Event()


@nacelle.tool
def waits(ctx: ToolContext) -> str:
    """Says it started, then answers when told to stop or when the test ends."""
    started.set()
    if ctx.cancelled.wait(10):
        return "stopped"
    released.wait(10)
    return "released"


@nacelle.tool
def stubborn(ctx: ToolContext) -> str:
    """Says it started, then ignores cancellation until the test ends."""
    started.set()
    released.wait(10)
    return "too late"


def call(index, tool, input='{"word": "hi"}'):
    name = tool.name if tool is not None else "missing"
    return Call(ToolCall(f"c{index}", name, input), index, tool)


def a_round(calls, *, ctx=None, timeout=None, max_parallel=8):
    return Round(calls, ToolSink(), ctx or RunContext(), timeout, max_parallel)


def landed_within(round_, seconds=5.0):
    """What the round's calls closed, looked at without waiting until one lands."""
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        got = round_.landed()
        if got:
            return got
        time.sleep(0.005)
    raise AssertionError("no result landed")


def test_every_call_is_closed_by_one_result_and_the_round_keeps_those_it_yielded():
    round_ = a_round([call(n, echo, f'{{"word": "w{n}"}}') for n in range(5)], max_parallel=2)
    yielded = list(round_.results())
    assert sorted(e.tool.id for e in yielded) == ["c0", "c1", "c2", "c3", "c4"]
    assert all(e.kind is Kind.TOOL_RESULT and not e.tool.failed for e in yielded)
    assert {e.tool.id: e.tool.result for e in yielded}["c3"] == "w3"
    assert round_.handed == yielded


def test_a_call_added_after_the_round_began_runs_at_once_and_landed_takes_its_result():
    round_ = a_round([])
    round_.start()
    round_.add(call(0, echo))
    [result] = landed_within(round_)
    assert (result.tool.id, result.tool.result) == ("c0", "hi")
    assert list(round_.results()) == []  # nothing left open: the round is over at once
    assert round_.handed == []  # landed() results are the loop's to record


def test_a_call_of_a_tool_that_does_not_exist_is_closed_as_failed_when_the_round_starts():
    round_ = a_round([call(0, None)])
    round_.start()
    [result] = round_.landed()
    assert result.tool.failed and "no tool named 'missing'" in result.tool.error


def test_cancelling_the_run_closes_a_call_that_ignores_it_and_raises_cancelled():
    started.clear()
    ctx = RunContext()
    round_ = a_round([call(0, stubborn, "{}")], ctx=ctx)
    threading.Thread(target=lambda: started.wait(5) and ctx.cancelled.set()).start()
    results = round_.results()
    with pytest.raises(Cancelled):
        closed = [next(results)]
        closed.extend(results)
    assert [(e.tool.id, e.tool.failed) for e in closed] == [("c0", True)]
    assert closed[0].tool.error.startswith("cancelled: the run was cancelled")
    assert round_.calls[0].ctx.cancelled.is_set()


def test_close_open_stops_a_running_call_and_discards_one_still_waiting_for_a_slot():
    started.clear()
    round_ = a_round([call(0, waits, "{}"), call(1, echo)], max_parallel=1)
    round_.start()
    assert started.wait(5)
    closed = {e.tool.id: e.tool for e in round_.close_open("the run was stopped")}
    assert set(closed) == {"c0", "c1"}
    assert closed["c0"].error.startswith("stopped: the run was stopped")
    assert not closed["c0"].discarded
    assert closed["c1"].discarded and closed["c1"].error.startswith("not run:")
    assert list(round_.results()) == []  # the late "stopped" answer closes nothing


def test_a_call_past_its_timeout_on_the_run_clock_is_closed_and_the_other_call_answers():
    started.clear()
    clock = FakeClock()
    round_ = a_round([call(0, waits, "{}"), call(1, echo)], ctx=RunContext(clock=clock),
                     timeout=5.0)
    results = round_.results()
    first = next(results)
    assert (first.tool.id, first.tool.result) == ("c1", "hi")
    assert started.wait(5)
    clock.advance(6.0)  # nobody is signalled: the round's capped wait notices it
    [late] = list(results)
    assert late.tool.id == "c0" and late.tool.error == "timed out after 5 s"
    assert late.tool.duration >= 5.0
    assert round_.calls[0].ctx.cancelled.is_set()  # told to stop; its answer is dropped
