"""Retry: rerun a turn that failed before it showed anything.

The HTTP transport below every backend already retries what it can see — refused
connections and retryable statuses — before a single byte reaches the caller. What
it cannot see is a provider that answers 200 and puts the failure in the body (an
``overloaded_error`` event, an in-band ``code: 429``) or a connection that dies
after the status line. ``Retry`` wraps a backend and reruns for those, under
one rule: **only while nothing has been yielded**. Once an event has been
delivered, a rerun would show it twice, so the failure is raised as it is.

``Retry`` is a Backend whose ``turn`` calls the wrapped backend's ``turn``: the unit
of a rerun is one model turn, and the Agent's loop never knows it is there. A turn
that fails before yielding anything is retried even when earlier turns of the run
yielded text and ran tools — turn 2 of a tool-using run overloaded is the common
case, and restarting the whole run there would repeat its tools. ``attempts`` and
``budget`` count per turn.

A rerun waits at least what the failure asked for: an ``APIError`` (or any error)
with a ``retry_after`` is not retried sooner, and when that wait would pass the budget
the run fails at once with ``RetryBudgetExceeded`` naming the failure, rather than
sleeping to the deadline only to fail there.

``RetryOptions()`` is the recommended policy: 3 attempts, delays doubling from
0.5 s to at most 8 s with full jitter (a uniform draw between zero and the cap, the
scheme that spreads a thundering herd best). ``attempts=1`` disables retrying.
``budget`` is seconds of wall clock for one turn, its reruns and their waits
included; it becomes the turn's context deadline, with ``RetryBudgetExceeded`` as
its error, so every sleep and read timeout below — Retry-After waits in the
transport included — is bounded by it. (A deadline for the whole run, tools
included, is the Agent's ``Budget(seconds=...)``.)

Every restart is logged at DEBUG on ``nacelle.retry`` (or the given logger) with the
attempt number, the error's type and the delay; the error finally raised carries
its attempt number (``nacelle.attempt(err)``).

Outer ring, but pure logic: imports the standard library and the core only, never
``loop.py`` (a turn wrapper does not call back into the run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Tuple, Union

from ._loggers import get_logger
from .backend import Backend, Capabilities, Request, TurnEnd
from .context import RunContext
from .errors import ConfigError, RetryBudgetExceeded, _set_attempt, attempt, retryable
from .events import Event
from .messages import Message

if not TYPE_CHECKING:
    # logging.Logger appears in annotations only; get_type_hints still resolves it.
    from ._loggers import logging_for_annotations as logging
if TYPE_CHECKING:
    import logging
    import random

__all__ = ["Retry", "RetryOptions"]

_log = get_logger(__name__)


@dataclass(frozen=True)
class RetryOptions:
    """How ``Retry`` retries. The defaults are the recommended policy."""

    attempts: int = 3
    base: float = 0.5
    max: float = 8.0
    budget: Optional[float] = None
    logger: Optional[logging.Logger] = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts}")
        if self.base < 0 or self.max < 0:
            raise ValueError("base and max delays cannot be negative")
        if self.budget is not None and self.budget <= 0:
            raise ValueError(f"budget must be positive seconds, got {self.budget}")

    def delay_cap(self, failures: int) -> float:
        """The largest delay after the ``failures``-th failure (1-based)."""
        return float(min(self.max, self.base * 2 ** (failures - 1)))


class Retry:
    """A backend that reruns ``backend``'s turns on retryable failures, while nothing
    has been yielded. Same ``name`` and ``capabilities`` as the backend it wraps."""

    def __init__(self, backend: Backend, options: RetryOptions = RetryOptions()) -> None:
        for attribute in ("name", "capabilities", "turn"):
            if not hasattr(backend, attribute):
                raise ConfigError(f"{type(backend).__name__} is not a Backend: it has no "
                                  f"{attribute!r}")
        self.backend = backend
        self.options = options
        self._random = _new_random()

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def capabilities(self) -> Capabilities:
        return self.backend.capabilities

    def __repr__(self) -> str:
        return f"Retry({self.backend!r}, {self.options!r})"

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_random", None)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._random = _new_random()

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        return self.backend.count_tokens(request, ctx)

    def turn(self, request: Request, messages: Tuple[Message, ...],
             ctx: RunContext) -> Iterator[Union[Event, TurnEnd]]:
        """The wrapped backend's turn, rerun while an attempt fails retryably before
        yielding anything, within ``options.budget`` seconds."""
        if self.options.budget is not None:
            ctx = ctx.child(ctx.clock() + self.options.budget, RetryBudgetExceeded)
        turn = self.backend.turn
        yield from self._attempts(lambda: turn(request, messages, ctx), ctx)

    def _attempts(self, start: Callable[[], Iterator[Any]], ctx: RunContext) -> Iterator[Any]:
        """Yield what ``start()`` yields, starting it again on a retryable failure for
        as long as it has yielded nothing and attempts and budget are left."""
        options = self.options
        log = options.logger or _log
        number = 0
        while True:
            number += 1
            yielded = False
            items = start()
            try:
                for item in items:
                    yielded = True
                    yield item
                return
            except RetryBudgetExceeded as err:
                if attempt(err):
                    raise  # already reported, by a Retry inside this one
                # The deadline passed below (in a read, a sleep): say so in the
                # budget's words, naming the failure it was waiting on.
                raise self._budget_spent(number, err) from err
            except Exception as err:  # noqa: BLE001 - classified just below
                _set_attempt(err, number)
                if yielded or number >= options.attempts or not retryable(err):
                    log.debug("attempt %d failed with %s; not retrying (%s)", number,
                              type(err).__name__,
                              "output was already delivered" if yielded
                              else "no attempts left" if retryable(err) else "not retryable")
                    raise
                delay = self._delay(number, err)
                left = ctx.remaining()
                if left is not None and (left == 0 or delay > left):
                    # Waiting past the budget only to fail is worse than failing now.
                    raise self._budget_spent(number, err) from err
                log.debug("attempt %d failed with %s; retrying in %.2f s",
                          number, type(err).__name__, delay)
                ctx.observe("request.retry", attempt=number, delay=delay, error=err,
                            level="turn")
                try:
                    ctx.sleep(delay)
                except RetryBudgetExceeded as spent:
                    raise self._budget_spent(number, err) from spent
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()

    def _delay(self, number: int, err: BaseException) -> float:
        """Full jitter, but never less than the wait the failure asked for."""
        delay = self._random.uniform(0, self.options.delay_cap(number))
        asked = getattr(err, "retry_after", None)
        if isinstance(asked, (int, float)) and not isinstance(asked, bool) and 0 < asked < float("inf"):
            delay = max(delay, float(asked))
        return delay

    def _budget_spent(self, number: int, cause: BaseException) -> RetryBudgetExceeded:
        budget = self.options.budget
        # A deadline reached inside the backend is no failure of its own; the transport
        # chains the one it was waiting to retry (a 429 with a long Retry-After, say).
        last = cause.__cause__ if isinstance(cause, RetryBudgetExceeded) else cause
        said = f" (last failure: {type(last).__name__}: {last})" if last is not None else ""
        return RetryBudgetExceeded(
            f"the retry budget of {budget:g} s ran out on attempt {number}{said}"
            if budget is not None else f"the run's deadline passed on attempt {number}",
            attempt=number, budget=budget)


def _new_random() -> random.Random:
    """A ``random.Random`` of its own for the jitter (``random`` is imported with the
    first ``Retry``, not with the core)."""
    import random

    return random.Random()
