"""Hooks around local tool calls: HookPoint, HookEvent, HookResult, MAX_INJECT,
``with_timeout``, ``detached``, and the functions the loop runs them with.

A hook is ``h(HookEvent) -> HookResult | None``, registered per point::

    hooks={HookPoint.BEFORE_TOOL_CALL: [audit], HookPoint.AFTER_TOOL_CALL: [lint]}

Before-hooks run in order before approval; the first deny is final and its text is
the failed result the model reads. A before-hook that raises (or answers with
something that is not a HookResult) denies: a policy check that crashed must not
wave a call through. After-hooks run in order once the tool has answered; their
``inject`` texts are appended to what the model reads; an after-hook deny replaces
the result with a failure carrying the deny text (the way to withhold output that
should not reach the model); an after-hook that raises is logged and ignored, since
the tool has already run.

Injected text is capped at :data:`MAX_INJECT` bytes of UTF-8 in total, cut on a
character boundary: a hook must not be able to flood the context window.

Core module: imports the standard library, ``errors``.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

from ._loggers import get_logger
from .errors import ConfigError

__all__ = [
    "MAX_INJECT",
    "Hook",
    "HookEvent",
    "HookPoint",
    "HookResult",
    "detached",
    "with_timeout",
]

log = get_logger(__name__)

MAX_INJECT = 10_000


class HookPoint(str, enum.Enum):
    """Where a hook runs."""

    BEFORE_TOOL_CALL = "before_tool_call"
    AFTER_TOOL_CALL = "after_tool_call"

    def __repr__(self) -> str:
        return f"HookPoint.{self.name}"

    __str__ = str.__str__


@dataclass(frozen=True)
class HookEvent:
    """What a hook is told: the point, the tool's name, the raw JSON input, and after
    the call its ``result`` / ``error``. ``retry`` is true when a hook already denied
    this tool name earlier in the run."""

    point: HookPoint
    tool: str
    input: str
    result: str = ""
    error: Optional[str] = None
    retry: bool = False


@dataclass(frozen=True)
class HookResult:
    """A hook's answer: ``deny`` (non-empty: the call fails with this text) and
    ``inject`` (text appended to what the model reads)."""

    deny: str = ""
    inject: str = ""


Hook = Callable[[HookEvent], Optional[HookResult]]


def normalize_hooks(hooks: Optional[Mapping[Any, Union[Hook, Sequence[Hook]]]],
                    ) -> Dict[HookPoint, Tuple[Hook, ...]]:
    """Check a hooks mapping and return a private copy keyed by HookPoint.

    Raises ConfigError (a ValueError) naming the bad key or value; the caller's mapping is not kept,
    so changing it later changes nothing.
    """
    if hooks is None:
        return {}
    if not isinstance(hooks, Mapping):
        raise ConfigError(f"hooks must be a mapping of HookPoint to hooks, got {type(hooks).__name__}")
    out: Dict[HookPoint, Tuple[Hook, ...]] = {}
    for key, value in hooks.items():
        try:
            point = HookPoint(key)
        except ValueError:
            allowed = ", ".join(p.value for p in HookPoint)
            raise ConfigError(f"unknown hook point {key!r}; use one of {allowed}") from None
        if callable(value):
            value = (value,)
        value = tuple(value)
        for hook in value:
            if not callable(hook):
                raise ConfigError(f"hooks for {point.value} must be callables, got {hook!r:.60}")
        out[point] = out.get(point, ()) + value
    return out


def cut_inject(text: str, limit: int = MAX_INJECT) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def _name(hook: Any) -> str:
    return getattr(hook, "__qualname__", None) or repr(hook)


def run_before(hooks: Sequence[Hook], event: HookEvent) -> Tuple[str, str]:
    """Run before-hooks in order; return ``(deny, inject)``. The first deny is final."""
    injects = []
    for hook in hooks:
        try:
            answer = hook(event)
            if answer is not None and not isinstance(answer, HookResult):
                raise TypeError(f"a hook must return HookResult or None, got {type(answer).__name__}")
        except BaseException as exc:  # noqa: BLE001 - a crashed policy check denies, whatever it raised
            log.warning("before-hook %s failed on %s; the call is denied", _name(hook),
                        event.tool, exc_info=True)
            return f"denied: a check before {event.tool} failed ({type(exc).__name__}: {exc})", ""
        if answer is None:
            continue
        if answer.deny:
            return answer.deny, ""
        if answer.inject:
            injects.append(answer.inject)
    return "", cut_inject("\n".join(injects))


def run_after(hooks: Sequence[Hook], event: HookEvent) -> Tuple[str, str]:
    """Run after-hooks in order; return ``(deny, inject)``. Failures are logged."""
    injects = []
    for hook in hooks:
        try:
            answer = hook(event)
        except BaseException:  # noqa: BLE001 - the tool already ran; a broken hook changes nothing,
            # even one raising SystemExit or KeyboardInterrupt from a worker thread
            log.warning("after-hook %s failed on %s", _name(hook), event.tool, exc_info=True)
            continue
        if not isinstance(answer, HookResult):
            continue
        if answer.deny:
            return answer.deny, ""
        if answer.inject:
            injects.append(answer.inject)
    return "", cut_inject("\n".join(injects))


class with_timeout:  # noqa: N801 - used as a function: with_timeout(2.0, hook)
    """A hook that gives ``hook`` at most ``seconds``.

    When time runs out a before-hook denies (it fails closed: an unanswered check
    is not a yes) and an after-hook's answer is dropped. The hook's thread is left
    to finish on its own: Python cannot stop it. Picklable when ``hook`` is.
    """

    def __init__(self, seconds: float, hook: Hook) -> None:
        if not callable(hook):
            raise ValueError(f"with_timeout needs a callable hook, got {hook!r:.60}")
        if not seconds > 0:
            raise ValueError(f"with_timeout needs a positive number of seconds, got {seconds!r}")
        self.seconds = float(seconds)
        self.hook = hook
        self.__qualname__ = f"with_timeout({_name(hook)})"

    def __repr__(self) -> str:
        return f"with_timeout({self.seconds:g}, {_name(self.hook)})"

    def __call__(self, event: HookEvent) -> Optional[HookResult]:
        box: Dict[str, Any] = {}

        def target() -> None:
            try:
                box["answer"] = self.hook(event)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                box["error"] = exc

        thread = threading.Thread(target=target, name=f"nacelle-hook-{event.tool}", daemon=True)
        thread.start()
        thread.join(self.seconds)
        if thread.is_alive():
            log.warning("hook %s timed out after %g s on %s", _name(self.hook), self.seconds,
                        event.tool)
            if event.point is HookPoint.BEFORE_TOOL_CALL:
                return HookResult(deny=f"denied: the check before {event.tool} did not answer "
                                       f"within {self.seconds:g} s")
            return None
        if "error" in box:
            raise box["error"]
        return box.get("answer")


class detached:  # noqa: N801 - used as a function: detached(hook)
    """A hook that runs ``hook`` in the background and answers None at once.

    For notifications and audit trails that must not slow the call; whatever the
    hook returns is dropped and an exception is logged. Picklable when ``hook`` is.
    """

    def __init__(self, hook: Hook) -> None:
        if not callable(hook):
            raise ValueError(f"detached needs a callable hook, got {hook!r:.60}")
        self.hook = hook
        self.__qualname__ = f"detached({_name(hook)})"

    def __repr__(self) -> str:
        return f"detached({_name(self.hook)})"

    def __call__(self, event: HookEvent) -> None:
        def target() -> None:
            try:
                self.hook(event)
            except Exception:  # noqa: BLE001
                log.warning("detached hook %s failed on %s", _name(self.hook), event.tool,
                            exc_info=True)

        threading.Thread(target=target, name=f"nacelle-hook-{event.tool}", daemon=True).start()
        return None
