"""Retry: a turn wrapper that reruns a turn only while nothing was yielded, only for
retryable errors, with jittered doubling delays and the failure's Retry-After through
the run context — no real waiting here. Its ``turn`` is tested directly and inside
an Agent's run."""

import logging
import pickle

import pytest

from nacelle.backend import Capabilities, Request, RunContext, TurnEnd
from nacelle.errors import (
    APIError, Cancelled, ConfigError, RetryBudgetExceeded, StreamError, StreamTruncated,
    TransportError, attempt, retryable, transient,
)
from nacelle.events import Event, Kind, Stop
from nacelle.loop import run as run_loop
from nacelle.messages import Text
from nacelle.retry import Retry, RetryOptions
from nacelle.testing import FakeClock


class FlakyBackend:
    """Plays one script per turn asked: a list of events ending with a TurnEnd, with an
    exception to raise at the end (or in the middle, as the script says). It has only
    ``name``, ``capabilities``, ``turn`` and ``count_tokens``: the whole protocol."""

    name = "flaky"
    capabilities = Capabilities(thinking=True, cost=True)

    def __init__(self, *turns):
        self.turns = list(turns)
        self.started = 0
        self.closed = 0
        self.contexts = []

    def turn(self, request, messages, ctx):
        self.started += 1
        self.contexts.append(ctx)
        script = self.turns.pop(0)
        try:
            for item in script:
                if isinstance(item, BaseException):
                    raise item
                if callable(item):
                    item(ctx)
                    continue
                yield item
        finally:
            self.closed += 1

    def count_tokens(self, request, ctx):
        return 42


TEXT = Event(Kind.TEXT, text="hi")
DONE = TurnEnd((Text("hi"),))


def run(backend, options=RetryOptions(), clock=None):
    """One turn of ``Retry(backend)``, asked directly: its items and the clock."""
    clock = clock or FakeClock()
    retry = Retry(backend, options)
    retry._random.seed(7)
    return list(retry.turn(Request("s"), (), RunContext(clock=clock))), clock


def test_retry_keeps_the_wrapped_backends_name_and_capabilities():
    backend = FlakyBackend()
    retry = Retry(backend)
    assert retry.name == "flaky" and retry.capabilities == backend.capabilities
    assert retry.count_tokens(Request("s"), RunContext()) == 42


def test_a_clean_run_passes_through_untouched():
    events, clock = run(FlakyBackend([TEXT, DONE]))
    assert events == [TEXT, DONE] and clock.sleeps == []


@pytest.mark.parametrize("error", [
    transient(StreamError("overloaded_error")),
    StreamTruncated("ended early"),
    TransportError("reset"),
    APIError(529, "overloaded_error"),
])
def test_a_retryable_failure_before_any_event_reruns_the_turn(error):
    backend = FlakyBackend([error], [TEXT, DONE])
    events, clock = run(backend)
    assert events == [TEXT, DONE]
    assert backend.started == 2 and len(clock.sleeps) == 1


@pytest.mark.parametrize("error", [
    StreamError("garbage"), APIError(400, "invalid_request_error"), ValueError("bug"),
])
def test_a_failure_that_is_not_retryable_is_raised_at_once(error):
    backend = FlakyBackend([error], [DONE])
    with pytest.raises(type(error)) as info:
        run(backend)
    assert backend.started == 1 and attempt(info.value) == 1


def test_a_failure_after_an_event_is_raised_and_nothing_is_repeated():
    backend = FlakyBackend([TEXT, transient(StreamError("overloaded"))], [TEXT, DONE])
    delivered = []
    retry = Retry(backend)
    with pytest.raises(StreamError) as info:
        for event in retry.turn(Request("s"), (), RunContext(clock=FakeClock())):
            delivered.append(event)
    assert delivered == [TEXT] and backend.started == 1
    assert retryable(info.value) and attempt(info.value) == 1


def test_the_last_attempts_failure_is_raised_with_its_attempt_number():
    backend = FlakyBackend(*[[TransportError("reset")] for _ in range(3)])
    with pytest.raises(TransportError) as info:
        run(backend)
    assert backend.started == 3 and attempt(info.value) == 3


def test_one_attempt_disables_retrying():
    backend = FlakyBackend([TransportError("reset")], [DONE])
    with pytest.raises(TransportError):
        run(backend, RetryOptions(attempts=1))
    assert backend.started == 1


def test_delays_double_from_base_to_max_with_full_jitter():
    options = RetryOptions(attempts=7, base=0.5, max=4.0)
    backend = FlakyBackend(*[[TransportError("x")] for _ in range(6)], [DONE])
    _, clock = run(backend, options)
    caps = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert len(clock.sleeps) == 6
    for delay, cap in zip(clock.sleeps, caps):
        assert 0 <= delay <= cap
    assert len(set(clock.sleeps)) > 1  # jittered, not fixed


def test_jitter_spreads_over_the_whole_range():
    options = RetryOptions(attempts=2, base=1.0, max=1.0)
    delays = []
    for seed in range(200):
        backend = FlakyBackend([TransportError("x")], [DONE])
        retry = Retry(backend, options)
        retry._random.seed(seed)
        clock = FakeClock()
        list(retry.turn(Request("s"), (), RunContext(clock=clock)))
        delays += clock.sleeps
    assert min(delays) < 0.1 and max(delays) > 0.9


def test_every_restart_is_logged_with_attempt_error_type_and_delay(caplog):
    backend = FlakyBackend([TransportError("x")], [DONE])
    with caplog.at_level(logging.DEBUG, logger="nacelle.retry"):
        run(backend)
    restart = [r for r in caplog.records if r.name == "nacelle.retry"][0]
    assert "attempt 1" in restart.getMessage() and "TransportError" in restart.getMessage()
    assert "retrying in" in restart.getMessage()


def test_a_given_logger_is_used():
    logger = logging.getLogger("custom.retry.log")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        run(FlakyBackend([TransportError("x")], [DONE]), RetryOptions(logger=logger))
    finally:
        logger.removeHandler(handler)
    assert records and "TransportError" in records[0].getMessage()


def test_the_budget_becomes_the_turns_context_deadline_once():
    backend = FlakyBackend([TransportError("x")], [DONE])
    clock = FakeClock(1000.0)
    run(backend, RetryOptions(budget=30), clock)
    deadlines = {ctx.deadline for ctx in backend.contexts}
    assert deadlines == {1030.0}
    assert all(ctx.deadline_error is RetryBudgetExceeded for ctx in backend.contexts)


def test_each_turn_of_a_run_has_the_whole_budget():
    backend = FlakyBackend([TransportError("x")], [DONE], [DONE])
    clock = FakeClock(1000.0)
    retry = Retry(backend, RetryOptions(budget=30))
    ctx = RunContext(clock=clock)
    list(retry.turn(Request("s"), (), ctx))
    clock.advance(100)  # the tools of the first turn ran for a while
    list(retry.turn(Request("s"), (), ctx))
    assert backend.contexts[-1].deadline == clock() + 30
    assert ctx.deadline is None  # the run's own context is left as it was


def test_a_budget_shorter_than_the_delay_raises_budget_exceeded_naming_the_attempt():
    options = RetryOptions(attempts=5, base=100, max=100, budget=1.0)
    backend = FlakyBackend([TransportError("x")], [DONE])
    clock = FakeClock()
    retry = Retry(backend, options)
    retry._random.seed(1)
    retry._random.uniform = lambda a, b: b  # the full delay, longer than the budget
    with pytest.raises(RetryBudgetExceeded, match="attempt 1") as info:
        list(retry.turn(Request("s"), (), RunContext(clock=clock)))
    assert clock() <= 1.0 and attempt(info.value) == 1
    assert not isinstance(info.value, Cancelled)


def test_a_deadline_hit_inside_the_backend_is_reported_as_budget_exceeded():
    def slow(ctx):
        ctx.sleep(60)  # a Retry-After wait in the transport, say

    backend = FlakyBackend([slow, DONE])
    with pytest.raises(RetryBudgetExceeded, match="attempt 1"):
        run(backend, RetryOptions(budget=5))


def test_a_deadline_inside_the_backend_names_the_failure_it_was_waiting_to_retry():
    def waiting_on_a_429(ctx):
        try:
            ctx.sleep(60)
        except RetryBudgetExceeded as spent:
            raise spent from APIError(429, "rate_limit_error", "slow down")

    with pytest.raises(RetryBudgetExceeded) as info:
        run(FlakyBackend([waiting_on_a_429, DONE]), RetryOptions(budget=5))
    assert str(info.value) == ("the retry budget of 5 s ran out on attempt 1 (last failure: "
                               "APIError: HTTP 429 rate_limit_error: slow down)")


def test_a_bare_deadline_inside_the_backend_is_not_called_its_own_last_failure():
    def slow(ctx):
        ctx.sleep(60)

    with pytest.raises(RetryBudgetExceeded) as info:
        run(FlakyBackend([slow, DONE]), RetryOptions(budget=5))
    assert str(info.value) == "the retry budget of 5 s ran out on attempt 1"


def test_cancellation_is_never_retried():
    backend = FlakyBackend([Cancelled("stop")], [DONE])
    with pytest.raises(Cancelled):
        run(backend)
    assert backend.started == 1


def test_closing_the_turn_closes_the_wrapped_turn():
    backend = FlakyBackend([TEXT, TEXT, DONE])
    stream = Retry(backend).turn(Request("s"), (), RunContext())
    assert next(stream) == TEXT
    stream.close()
    assert backend.closed == 1


def test_a_retry_of_something_without_a_turn_is_refused_when_made():
    class WholeRun:
        name = "old"
        capabilities = Capabilities()

        def stream(self, request, ctx):
            return iter(())

    with pytest.raises(ConfigError, match="turn"):
        Retry(WholeRun())


def test_options_refuse_nonsense():
    with pytest.raises(ValueError):
        RetryOptions(attempts=0)
    with pytest.raises(ValueError):
        RetryOptions(budget=0)
    with pytest.raises(ValueError):
        RetryOptions(base=-1)


def test_retry_pickles():
    retry = pickle.loads(pickle.dumps(Retry(FlakyBackend([DONE]), RetryOptions(attempts=2))))
    assert retry.options.attempts == 2 and retry.name == "flaky"


# -- retrying at the turn -------------------------------------------------------------

def scripted_run(turns, options, clock=None, tools=()):
    """A run of the loop around ``Retry(ScriptedBackend(turns)).turn``, on a fake clock."""
    import nacelle
    from nacelle.testing import ScriptedBackend

    backend = ScriptedBackend(turns)
    request = nacelle.Agent(backend, "Test.", tools=tools).request([nacelle.user_text("go")])
    ctx = RunContext(clock=clock or FakeClock())
    return backend, list(run_loop(request, ctx, Retry(backend, options).turn)), ctx


def _echo_tool():
    import nacelle

    @nacelle.tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    return echo


def test_a_turn_after_a_tool_turn_that_fails_before_yielding_is_retried_alone():
    from nacelle import Message, Role, Text, ToolCall, assistant_text
    from nacelle.testing import Turn

    ran = []
    echo = _echo_tool()
    counted = type(echo)(lambda text: ran.append(text) or text, name="echo")
    overloaded = transient(StreamError("overloaded_error: Overloaded"))
    backend, events, ctx = scripted_run(
        [Message(Role.ASSISTANT, (Text("Looking."), ToolCall("a", "echo", '{"text": "x"}'))),
         Turn(Message(Role.ASSISTANT, ()), error=overloaded),
         assistant_text("Done.")],
        RetryOptions(attempts=3), tools=[counted])
    assert events[-1].kind is Kind.DONE and events[-1].stop is Stop.END
    assert ran == ["x"]  # the tool ran once: only the failed turn was asked again
    assert [e.text for e in events if e.kind is Kind.TEXT] == ["Looking.", "Done."]
    assert backend.requests[1].messages == backend.requests[2].messages
    assert len(ctx.clock.sleeps) == 1


def test_a_turn_that_failed_after_yielding_is_not_retried_even_at_the_turn():
    from nacelle import Message, Role, Text, assistant_text
    from nacelle.testing import Turn

    with pytest.raises(StreamError, match="overloaded"):
        scripted_run([Turn(Message(Role.ASSISTANT, (Text("half"),)),
                           error=transient(StreamError("overloaded"))),
                      assistant_text("never")], RetryOptions(attempts=3))


def test_attempts_count_per_turn_at_the_turn_seam():
    from nacelle import Message, Role, ToolCall, assistant_text
    from nacelle.testing import Turn

    def failing():
        return Turn(Message(Role.ASSISTANT, ()), error=transient(StreamError("overloaded")))

    backend, events, _ = scripted_run(
        [failing(), failing(), Message(Role.ASSISTANT, (ToolCall("a", "echo", '{"text": "x"}'),)),
         failing(), failing(), assistant_text("Done.")],
        RetryOptions(attempts=3), tools=[_echo_tool()])
    assert events[-1].stop is Stop.END and len(backend.requests) == 6
    with pytest.raises(StreamError) as caught:
        scripted_run([failing(), failing(), failing(), assistant_text("never")],
                     RetryOptions(attempts=3))
    assert attempt(caught.value) == 3


def test_a_rerun_waits_at_least_the_failures_retry_after():
    from nacelle import Message, Role, assistant_text
    from nacelle.testing import Turn

    limited = APIError(429, "rate_limit_error", "slow down", retry_after=7.5)
    _, events, ctx = scripted_run([Turn(Message(Role.ASSISTANT, ()), error=limited),
                                   assistant_text("ok")],
                                  RetryOptions(base=0.01, max=0.02))
    assert events[-1].stop is Stop.END
    assert ctx.clock.sleeps == [7.5]


def test_a_retry_after_beyond_the_budget_fails_at_once_naming_the_failure():
    from nacelle import Message, Role, assistant_text
    from nacelle.testing import Turn

    limited = APIError(429, "rate_limit_error", "slow down", retry_after=60)
    clock = FakeClock()
    with pytest.raises(RetryBudgetExceeded, match="APIError") as caught:
        scripted_run([Turn(Message(Role.ASSISTANT, ()), error=limited), assistant_text("ok")],
                     RetryOptions(budget=10.0), clock=clock)
    assert clock.sleeps == [] and caught.value.__cause__ is limited


def test_an_agent_runs_a_retried_user_backend_that_has_only_a_turn():
    import nacelle

    backend = FlakyBackend([transient(StreamError("overloaded"))], [TEXT, DONE])
    agent = nacelle.Agent(Retry(backend, RetryOptions(base=0, max=0)), "Test.")
    result = agent.run([nacelle.user_text("go")])
    assert result.text == "hi" and result.stop is Stop.END and backend.started == 2
