"""The backend contract's values and the RunContext's clock, deadline and cancellation."""

import threading
import time

import pytest

from nacelle.backend import (
    DEFAULT_MAX_TOKENS, CancelEvent, Capabilities, Effort, MCPServer, Request, RunContext,
    Thinking, TurnEnd,
)
from nacelle.errors import Cancelled, RetryBudgetExceeded
from nacelle.events import Stop, Usage
from nacelle.messages import user_text
from nacelle.testing import FakeClock


def test_default_max_tokens_is_32000():
    assert DEFAULT_MAX_TOKENS == 32000 and Request("s").max_tokens == 32000


def test_request_turns_sequences_into_tuples():
    r = Request("s", messages=[user_text("a")], tools=[], mcp=[])
    assert r.messages == (user_text("a"),) and r.tools == () and r.mcp == ()


def test_request_defaults_match_the_agent_defaults():
    r = Request("s")
    assert (r.thinking, r.max_iterations, r.approve, r.hooks, r.max_parallel_tools,
            r.tool_timeout) == (Thinking(), 0, None, None, 8, None)


def test_effort_values_are_the_documented_strings():
    assert [e.value for e in Effort] == ["none", "minimal", "low", "medium", "high", "xhigh", "max"]


def test_thinking_accepts_an_effort_string_and_refuses_a_negative_budget():
    assert Thinking(effort="high").effort is Effort.HIGH
    with pytest.raises(ValueError):
        Thinking(budget=-1)


def test_capabilities_default_to_nothing():
    c = Capabilities()
    assert not any([c.mcp, c.thinking, c.effort, c.cost, c.token_counting, c.images])
    assert c.min_budget == 0


def test_mcp_server_repr_hides_the_token():
    server = MCPServer("docs", "https://example.com/mcp", authorization_token="sk-secret-123",
                       allowed_tools=["a"])
    assert "sk-secret-123" not in repr(server) and "<hidden>" in repr(server)
    assert server.allowed_tools == ("a",)


def test_turn_end_defaults():
    assert TurnEnd(()) == TurnEnd((), Usage(), Stop.END, False)


# -- RunContext ------------------------------------------------------------------

def test_sleep_with_a_fake_clock_is_recorded_not_slept():
    clock = FakeClock(100.0)
    ctx = RunContext(clock=clock)
    started = time.monotonic()
    ctx.sleep(30)
    assert clock.sleeps == [30] and time.monotonic() - started < 1


def test_sleep_never_sleeps_past_the_deadline_and_then_raises():
    clock = FakeClock(0.0)
    ctx = RunContext(5.0, clock=clock)
    with pytest.raises(Cancelled):
        ctx.sleep(60)
    assert clock.sleeps == [5.0]


def test_sleep_raises_the_chosen_deadline_error():
    clock = FakeClock(0.0)
    ctx = RunContext(1.0, clock=clock, deadline_error=RetryBudgetExceeded)
    with pytest.raises(RetryBudgetExceeded):
        ctx.sleep(2)


def test_sleep_shorter_than_the_deadline_returns():
    clock = FakeClock(0.0)
    ctx = RunContext(10.0, clock=clock)
    ctx.sleep(3)
    assert clock() == 3.0 and ctx.remaining() == 7.0


def test_sleep_returns_early_and_raises_when_cancelled_from_another_thread():
    ctx = RunContext()
    threading.Timer(0.05, ctx.cancel).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        ctx.sleep(10)
    assert time.monotonic() - started < 2


def test_sleep_raises_at_once_when_already_cancelled():
    clock = FakeClock(100.0)
    ctx = RunContext(clock=clock)
    ctx.cancel()
    with pytest.raises(Cancelled):
        ctx.sleep(1)
    assert clock.sleeps == []


def test_a_plain_threading_event_can_cancel():
    event = threading.Event()
    ctx = RunContext(cancelled=event)
    event.set()
    with pytest.raises(Cancelled):
        ctx.check()


def test_remaining_is_none_without_a_deadline_and_never_negative():
    clock = FakeClock(10.0)
    assert RunContext(clock=clock).remaining() is None
    assert RunContext(5.0, clock=clock).remaining() == 0.0


def test_check_raises_at_the_deadline():
    clock = FakeClock(0.0)
    ctx = RunContext(1.0, clock=clock)
    ctx.check()
    clock.advance(1.0)
    with pytest.raises(Cancelled):
        ctx.check()


def test_child_never_extends_the_parent_deadline():
    clock = FakeClock(0.0)
    parent = RunContext(10.0, clock=clock, deadline_error=RetryBudgetExceeded)
    later = parent.child(50.0, deadline_error=Cancelled)
    assert later.deadline == 10.0 and later.deadline_error is RetryBudgetExceeded
    sooner = parent.child(3.0, deadline_error=Cancelled)
    assert sooner.deadline == 3.0 and sooner.deadline_error is Cancelled
    assert parent.child().deadline == 10.0


def test_child_of_an_unbounded_context_takes_its_own_deadline():
    ctx = RunContext(clock=FakeClock(0.0)).child(4.0)
    assert ctx.deadline == 4.0 and ctx.deadline_error is Cancelled


def test_child_shares_cancellation_both_ways():
    parent = RunContext()
    child = parent.child(1e9)
    parent.cancel()
    assert child.cancelled.is_set()
    other = RunContext()
    other.child().cancel()
    assert other.cancelled.is_set()


def test_on_cancel_callbacks_fire_once_from_the_cancelling_thread():
    ctx = RunContext()
    calls = []
    ctx.on_cancel(lambda: calls.append(threading.current_thread().name))
    t = threading.Thread(target=ctx.cancel, name="canceller")
    t.start()
    t.join()
    ctx.cancel()
    assert calls == ["canceller"]


def test_an_unregistered_callback_does_not_fire():
    ctx = RunContext()
    calls = []
    remove = ctx.on_cancel(lambda: calls.append(1))
    remove()
    ctx.cancel()
    assert calls == []


def test_a_callback_registered_after_cancellation_fires_at_once():
    ctx = RunContext()
    ctx.cancel()
    calls = []
    ctx.on_cancel(lambda: calls.append(1))
    assert calls == [1]


def test_a_failing_callback_does_not_stop_the_others():
    event = CancelEvent()
    calls = []
    event.add_callback(lambda: 1 / 0)
    event.add_callback(lambda: calls.append("ran"))
    event.set()
    assert calls == ["ran"] and event.is_set()
