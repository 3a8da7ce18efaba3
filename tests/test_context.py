"""RunContext, ToolContext, CancelEvent and Budget: one object for cancellation and time."""

import threading
import time

import pytest

from nacelle.context import Budget, CancelEvent, RunContext, ToolContext
from nacelle.errors import Cancelled, RetryBudgetExceeded
from nacelle.testing import FakeClock


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


def test_a_linked_event_is_set_when_its_parent_is_and_not_the_other_way():
    parent = CancelEvent()
    child = CancelEvent(parent)
    sibling = CancelEvent(parent)
    child.set()
    assert not parent.is_set() and not sibling.is_set()
    parent.set()
    assert sibling.is_set()


def test_an_unlinked_event_no_longer_follows_its_parent_or_stays_registered_on_it():
    parent = CancelEvent()
    children = [CancelEvent(parent) for _ in range(100)]
    for child in children:
        child.unlink()
    assert parent._callbacks == {}
    parent.set()
    assert not any(child.is_set() for child in children)


def test_an_event_linked_to_a_parent_already_set_starts_set():
    parent = threading.Event()
    parent.set()
    assert CancelEvent(parent).is_set() and CancelEvent(CancelEvent(parent)).is_set()


def test_a_tool_context_is_cancelled_with_the_run_and_alone_without_cancelling_the_run():
    run = RunContext()
    first, second = run.tool("a", 0, "t"), run.tool("b", 1, "t")
    first.cancel()
    assert first.cancelled.is_set() and not second.cancelled.is_set() and not run.cancelled.is_set()
    run.cancel()
    assert second.cancelled.is_set()


def test_a_tool_context_is_due_at_the_earlier_of_its_timeout_and_the_run_deadline():
    clock = FakeClock(100.0)
    run = RunContext(110.0, clock=clock, deadline_error=RetryBudgetExceeded)
    quick = run.tool("a", 0, "t", timeout=2.0)
    slow = run.tool("b", 1, "t", timeout=60.0)
    unbounded = run.tool("c", 2, "t")
    assert (quick.deadline, slow.deadline, unbounded.deadline) == (102.0, 110.0, 110.0)
    clock.advance(5)
    with pytest.raises(Cancelled, match="tool call a ran out of time"):
        quick.check()
    slow.check()
    clock.advance(5)
    with pytest.raises(RetryBudgetExceeded, match="tool call b ran out of time"):
        slow.check()


def test_a_tool_timeout_counts_from_when_the_call_was_asked_for():
    clock = FakeClock(50.0)
    run = RunContext(clock=clock)
    clock.advance(3)
    assert run.tool("a", 0, "t", timeout=1.0, asked=50.0).deadline == 51.0


def test_a_tool_context_reads_the_run_clock_and_sleeps_through_it():
    clock = FakeClock()
    ctx = RunContext(clock=clock).tool("a", 0, "t", timeout=10.0)
    ctx.sleep(4)
    assert clock.sleeps == [4] and ctx.remaining() == 6.0


def test_a_released_tool_context_no_longer_hears_the_run():
    run = RunContext()
    ctx = run.tool("a", 0, "t")
    ctx.release()
    run.cancel()
    assert not ctx.cancelled.is_set()


def test_a_hand_made_tool_context_works_alone():
    ctx = ToolContext("id", 3, "name")
    assert repr(ctx) == "ToolContext(call_id='id', index=3, name='name', cancelled=False)"
    ctx.check()
    ctx.cancelled.set()
    with pytest.raises(Cancelled, match="tool call id was cancelled"):
        ctx.check()


def test_a_tool_context_calls_back_on_cancel_like_a_run_context():
    ctx = RunContext().tool("a", 0, "t")
    called = []
    ctx.on_cancel(lambda: called.append(1))
    ctx.cancel()
    assert called == [1]


@pytest.mark.parametrize("field, value", [
    ("tokens", -1), ("tokens", 1.5), ("tokens", True), ("tool_calls", -2),
    ("cost", 0), ("cost", float("nan")), ("seconds", float("inf")), ("seconds", -1.0),
    ("seconds", "10"),
])
def test_a_budget_refuses_a_limit_that_means_nothing(field, value):
    with pytest.raises(ValueError, match=f"Budget.{field}"):
        Budget(**{field: value})


def test_a_budget_without_limits_is_allowed_and_limits_nothing():
    assert Budget() == Budget(None, None, None, None)
    assert Budget(tokens=0, tool_calls=0, cost=0.5, seconds=1).seconds == 1


def test_a_cancel_event_is_true_only_once_set_so_if_ctx_cancelled_reads_as_it_says():
    run = RunContext()
    call = run.tool("c1", 0, "slow")
    for ctx in (run, call, ToolContext()):
        assert not ctx.cancelled and bool(ctx.cancelled) is False
    run.cancel()
    assert run.cancelled and call.cancelled and bool(call.cancelled) is True
    linked = CancelEvent(threading.Event())
    assert not linked
    linked.set()
    assert linked


def test_a_child_context_keeps_the_run_s_delta_tags_and_a_tool_s_context_has_none():
    ctx = RunContext()
    assert ctx._tags is None and ctx.child()._tags is None
    tags = {"agent": ("helper",), "via": "c1"}
    ctx._tags = tags
    assert ctx.child(5.0)._tags is tags  # the same run's turns: a retry's, a budget's
    assert ctx.tool("c2", 0, "fetch")._tags is None  # a call's own run tags its own
