"""ScriptedBackend, Turn and FakeClock: a backend that plays back scripted model
turns, and a clock tests can drive.

``ScriptedBackend(turns)`` is a Backend like any other: its ``turn`` supplies one
model turn per request from its script, and the Agent runs the real loop around it,
so real tools, approvals, hooks, timeouts and cancellation run. Each turn streams
one delta per Text part (TEXT) and per Reasoning part (THINKING), and each ToolCall's
input in pieces of 32 characters (TOOL_INPUT) followed, for a finished call, by the
call itself the moment its input is whole (the TOOL_CALL a backend yields so that an
eager run can start it; the loop announces it). ``.requests`` holds one Request per model turn
(the turn's request) whose ``messages`` are the conversation exactly as the model saw
it that turn.

Scripts are consumed in order under a lock, so a script may be shared by a parent
agent and a sub-agent running in a tool thread: turns are handed out in the order
the model requests arrive. Asking for a turn past the end of the script raises
AssertionError (this is a test double: running out of script is a failed test).

``Turn`` can also pause before answering (``delay``, a wait the run's cancellation
ends at once — a stand-in for a slow response), fail after its deltas (``error``,
for testing retries and mid-stream failures), or be a provider pause
(``resume=True``).

``count_tokens`` is a deterministic stand-in: the request's JSON length over four.

Structured output runs as on any backend, in every mode: the loop reads the scripted
answers. A native-mode run (the default: ``structured_output`` is among the
capabilities) reads the final turn's text; tool mode reads a scripted ``ToolCall`` to
``final_answer``; the Request in ``.requests`` carries ``output`` (and, in tool mode,
the final-answer tool; in prompted mode, the instructions in its system prompt) for a
test to check.

Outer ring: imports nacelle's core (never ``loop.py``: a turn does not call back into
the run); never imported by it.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union, cast

from ..backend import SETTINGS, Capabilities, Request, TurnEnd
from ..context import RunContext
from ..errors import ConfigError
from ..events import Event, Kind, Stop, ToolEvent, Usage, _input_class, _input_so_far
from ..messages import Message, Reasoning, Role, Text, ToolCall, assistant_text, dumps

__all__ = ["FakeClock", "ScriptedBackend", "Turn"]

ALL_CAPABILITIES = Capabilities(mcp=True, thinking=True, effort=True, min_budget=0, cost=True,
                                token_counting=True, images=True, structured_output=True,
                                documents=True, tool_media=True, settings=SETTINGS)


@dataclass(frozen=True)
class Turn:
    """One scripted model turn.

    ``stop`` defaults to TOOLS when the message has finished tool calls, else END.
    ``delay`` waits that many seconds (on the run's context, so cancelling ends the
    wait) before the turn's output; ``error`` is raised after the deltas, before the
    turn ends; ``resume`` marks a provider pause; ``gap`` waits that many seconds
    between the message's parts, as a model writing them does, so a call can start
    (``Agent(eager_tools=True)``) while the turn still streams.
    """

    message: Message
    usage: Usage = field(default_factory=Usage)
    stop: Optional[Stop] = None
    delay: float = 0.0
    error: Optional[BaseException] = None
    resume: bool = False
    gap: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.message, str):
            object.__setattr__(self, "message", assistant_text(self.message))
        if not isinstance(self.message, Message) or self.message.role is not Role.ASSISTANT:
            raise ConfigError(f"a scripted turn needs an assistant Message, got {self.message!r:.80}")
        if self.stop is None:
            calls = any(isinstance(p, ToolCall) and p.finished for p in self.message.parts)
            object.__setattr__(self, "stop", Stop.TOOLS if calls else Stop.END)


class ScriptedBackend:
    """A Backend that answers each model request with the next scripted turn.

    ``turns`` are assistant Messages (or strings, for a plain text answer) or
    :class:`Turn` values. All capabilities are on unless ``capabilities`` says
    otherwise.
    """

    def __init__(self, turns: Iterable[Union[Message, Turn, str]], *, name: str = "scripted",
                 capabilities: Capabilities = ALL_CAPABILITIES) -> None:
        self.name = name
        self.capabilities = capabilities
        self.requests: List[Request] = []
        # A str becomes the Message of its Turn in Turn.__post_init__.
        self._script: Tuple[Turn, ...] = tuple(
            t if isinstance(t, Turn) else Turn(cast(Message, t)) for t in turns)
        self._next = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ScriptedBackend {self.name!r}: {self._next} of {len(self._script)} turns played>"

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        """How many scripted turns have not been played."""
        return len(self._script) - self._next

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        ctx.check()
        text = json.dumps({"system": request.system,
                           "tools": [[t.name, t.description, t.schema] for t in request.tools],
                           "mcp": [s.name for s in request.mcp]}) + dumps(request.messages)
        return max(1, len(text) // 4)

    def assert_consumed(self) -> None:
        """Fail (AssertionError) if scripted turns were never played."""
        if self._next < len(self._script):
            raise AssertionError(
                f"ScriptedBackend {self.name!r}: {len(self._script) - self._next} of "
                f"{len(self._script)} scripted turns were never requested")

    def turn(self, request: Request, messages: Tuple[Message, ...],
             ctx: RunContext) -> Iterator[Union[Event, TurnEnd]]:
        """Play the next scripted turn (``Retry`` retries at this seam, so a scripted
        ``error`` followed by another turn tests a retried turn)."""
        with self._lock:
            number = self._next
            if number >= len(self._script):
                raise AssertionError(
                    f"ScriptedBackend {self.name!r}: model request {number + 1} asked for a "
                    f"turn, but the script has only {len(self._script)}")
            self._next += 1
            self.requests.append(dataclasses.replace(request, messages=messages))
        turn = self._script[number]
        if turn.delay:
            ctx.sleep(turn.delay)
        calls = 0
        for part in turn.message.parts:
            if turn.gap and part is not turn.message.parts[0]:
                ctx.sleep(turn.gap)
            if isinstance(part, Text):
                yield Event(Kind.TEXT, text=part.text)
            elif isinstance(part, Reasoning):
                yield Event(Kind.THINKING, text=part.text)
            elif isinstance(part, ToolCall):
                yield from _written(part, calls)
                calls += part.finished
        if turn.error is not None:
            raise turn.error
        assert turn.stop is not None  # Turn.__post_init__ settles it
        yield TurnEnd(turn.message.parts, turn.usage, turn.stop, turn.resume)


def _written(call: ToolCall, index: int) -> Iterator[Event]:
    """A call as a provider streams it: its input in pieces of up to
    :data:`INPUT_PIECE` characters (TOOL_INPUT), then, when it is finished, the call
    whose input is whole (the early TOOL_CALL an eager run starts)."""
    pieces: List[str] = []
    made = _input_class(call.id, index, call.name)
    for at in range(0, len(call.input), INPUT_PIECE):
        pieces.append(call.input[at:at + INPUT_PIECE])
        yield Event(Kind.TOOL_INPUT, text=pieces[-1], tool=_input_so_far(made, pieces, len(pieces)))
    if call.finished:
        yield Event(Kind.TOOL_CALL, tool=ToolEvent(call.id, index, call.name, call.input))


#: How many characters of a scripted call's input each TOOL_INPUT carries.
INPUT_PIECE = 32


class FakeClock:
    """A clock for tests: call it for the time; ``sleep`` advances it and records.

    A RunContext given this clock sleeps through it, so retry delays are recorded in
    ``.sleeps`` instead of slept.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self.sleeps: List[float] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now!r}, sleeps={len(self.sleeps)})"

    def __call__(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self._now += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
