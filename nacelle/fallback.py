"""Fallback: a Backend that moves a failed turn to the next backend.

``Fallback([primary, spare, ...], on=retryable)`` is one Backend. Each turn is asked
of the first backend; when that turn fails *before it yielded anything* with an error
``on`` accepts (by default :func:`nacelle.retryable`: an overload, a dropped
connection, a stall, a 5xx), the same turn is asked of the next backend, and so on.
The run goes on: tools, the conversation and the usage are the loop's, whoever
answered. The next turn starts again from the first backend, so a primary that
recovers is used again at once. A failure after a turn yielded is raised as it is
(a second answer would show the first one's text twice), as is the last backend's
failure.

Moving between providers drops the provider state of the one left behind
(``Reasoning.state`` and ``ProviderBlock`` parts of another protocol), as every
backend already does with state that is not its own, so the conversation stays
valid for whoever answers next.

``Fallback`` is a Backend whose ``turn`` calls the wrapped backends' ``turn``s: it
never sees the run and never calls back into the loop. ``capabilities`` are the
intersection of the backends' (a feature one of them lacks cannot be asked of the
run), and ``count_tokens`` asks the first backend. Every switch is logged at WARNING on
``nacelle.fallback`` with the backend left, its error and the one taken.

Put ``Retry`` outside: ``Retry(Fallback([a, b]))`` retries a turn that every backend
failed, its budget bounding the turn and every backend's try at it; ``Fallback([Retry(a),
b])`` retries ``a`` before moving on.

Core module: imports the standard library and nacelle's core modules, never ``loop.py``.
"""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any, Callable, Dict, Iterable, Iterator, List, Tuple, Union

from ._loggers import get_logger
from .backend import Backend, Capabilities, Request, TurnEnd
from .context import RunContext
from .errors import Cancelled, ConfigError, RetryBudgetExceeded, retryable
from .events import Event
from .messages import Message

__all__ = ["Fallback"]

log = get_logger(__name__)


class Fallback:
    """A Backend asking ``backends`` in order for each turn; see the module docstring."""

    def __init__(self, backends: Iterable[Backend], *,
                 on: Callable[[BaseException], bool] = retryable) -> None:
        chosen = tuple(backends)
        if not chosen:
            raise ConfigError("Fallback needs at least one backend")
        for backend in chosen:
            for attribute in ("name", "capabilities", "turn"):
                if not hasattr(backend, attribute):
                    raise ConfigError(f"{type(backend).__name__} is not a Backend: it has "
                                      f"no {attribute!r}")
        if not callable(on):
            raise ConfigError(f"on must be callable, got {type(on).__name__}")
        self.backends = chosen
        self.on = on
        self.name = chosen[0].name if len(chosen) == 1 else (
            f"fallback({', '.join(b.name for b in chosen)})")
        self.capabilities = _intersection([b.capabilities for b in chosen])

    def __repr__(self) -> str:
        return f"Fallback({list(self.backends)!r})"

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        count: int = self.backends[0].count_tokens(request, ctx)
        return count

    def turn(self, request: Request, messages: Tuple[Message, ...],
             ctx: RunContext) -> Iterator[Union[Event, TurnEnd]]:
        """The turn of the first backend that does not fail before yielding (and
        whose failure ``on`` accepts); see the module docstring."""
        return self._first_that_answers(
            [functools.partial(b.turn, request, messages, ctx) for b in self.backends], ctx)

    def _first_that_answers(self, starts: List[Callable[[], Iterator[Union[Event, TurnEnd]]]],
                            ctx: RunContext) -> Iterator[Union[Event, TurnEnd]]:
        """Yield from the first of ``starts`` that does not fail before yielding."""
        for number, start in enumerate(starts):
            yielded = False
            items = start()
            try:
                for item in items:
                    yielded = True
                    yield item
                return
            except Exception as err:  # noqa: BLE001 - classified just below
                last = number == len(starts) - 1
                # A cancellation or a deadline is the caller's, never a backend's failure.
                if (yielded or last or isinstance(err, (Cancelled, RetryBudgetExceeded))
                        or not self.on(err)):
                    raise
                log.warning("backend %r failed before answering (%s: %s); asking %r",
                            self.backends[number].name, type(err).__name__, err,
                            self.backends[number + 1].name)
                ctx.observe("fallback", **{"from": self.backends[number].name,
                                           "to": self.backends[number + 1].name, "error": err})
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()


def _intersection(all_caps: List[Capabilities]) -> Capabilities:
    """What every backend can do: each flag only if all have it, the largest minimum;
    the settings all of them take (while thinking too, where one thinks by default),
    and the lowest highest temperature."""
    values: Dict[str, Any] = {}
    for spec in fields(Capabilities):
        mine = [getattr(c, spec.name) for c in all_caps]
        if spec.name == "thinking_settings":
            held = [c.settings if t is None else t for c, t in zip(all_caps, mine)]
            values[spec.name] = (None if all(t is None for t in mine)
                                 else frozenset.intersection(*held))
        elif spec.name == "thinks_by_default":
            values[spec.name] = any(mine)
        elif spec.name == "max_temperature":
            values[spec.name] = min(mine)
        elif spec.name == "exclusive_settings":  # every one's rule holds
            values[spec.name] = tuple(dict.fromkeys(g for groups in mine for g in groups))
        else:
            values[spec.name] = max(mine) if isinstance(mine[0], int) and not isinstance(
                mine[0], bool) else all(mine)
    for name in ("native_tools", "context_edits", "settings"):  # what every one of them has
        values[name] = frozenset.intersection(*(getattr(c, name) for c in all_caps))
    return Capabilities(**values)
