"""Provider batches: the model turns of many runs sent as one half-price batch a round.

``run_many(agent, conversations, executor=ProviderBatch(backend, poll=30.0))`` runs
every conversation through the ordinary loop (``loop.run``, untouched), each on a
thread of its own; only the model turn differs. The Agent's backend is replaced, for
these runs, by one whose ``turn`` builds the request body with the backend's own
wire builder, hands it to the coordinator and blocks until that request's result is
back, then gives the loop the same events and TurnEnd a streamed turn gives (the
result is fed to the backend's own accumulator: ``anthropic_wire.py``,
``openai_wire.py``). Tools then run locally, on the loop's usual thread pool with the
usual approvals (a pausing approval ends that run's item as ``Stop.PAUSED``, as it
does anywhere).

The coordinator, one thread, works in rounds: when every live run has asked for its
next turn (or finished), the asked turns go out as one provider batch (more than
one when there are more than ``max_requests``), which is polled every ``poll``
seconds — longer when the provider's ``Retry-After`` asks — until it has ended; each
waiting turn is then released with its own result, found by its ``custom_id``.
The runs' tools run, their next turns are asked, and the next round goes out. A
batch of 50 tool-using conversations of three turns is three provider batches.

Choices where the contract is silent (peers: the Anthropic and OpenAI cookbooks,
inspect_ai's batch mode, which also batch per round):

- Failures. An ``expired`` or ``canceled`` request goes again in the next round, at
  most ``retries`` times; an ``errored`` one fails its own run with the provider's
  error (an ``APIError``) and nothing else; a batch the provider fails as a whole
  (OpenAI's ``failed``, or a create call still refused after its HTTP retries) has
  its requests sent again in the next round, after a backoff of ``poll`` doubled per
  failure, at most ``retries`` times, and then fails their runs with its error.
- Resuming. With ``run_many(..., results=path)`` each round, once its batches exist,
  is written to the results file as one line ``{"provider_batch": {...}}``: its
  batch ids and, per run in it, the request's ``custom_id``, the conversation the
  request was made from and the usage so far. A rerun with the same file starts each
  of those runs from that conversation, and its first turn is not sent again: it
  waits for the recorded request's result in the recorded batch. So a process killed
  while polling runs nothing twice — no request is paid twice and no tool of an
  earlier round runs again. A kill while tools run (between a round's results and
  the next round's line) repeats those tools, as any batch is at-least-once for the
  work in flight. A resumed run's ``turns`` and ``max_iterations`` count from the
  resume; its usage includes the turns before it.
- Cost. Each turn's usage is priced as the backend prices a streamed turn, then at
  the provider's batch rate (:func:`nacelle.pricing.batch_priced`); each item's
  ``streamed_cost`` keeps what the same turns would have cost streamed, and
  :func:`~nacelle.batch.summary` shows both.
- Waiting. A waiting turn honours its run's cancellation and deadline (a
  ``Budget(seconds=...)``); the coordinator's waits are ``RunContext.sleep`` on
  ``clock`` (a :class:`~nacelle.testing.FakeClock` in tests) and stop when the batch
  is cancelled. A run that never asks again (a tool that never returns) holds its
  round back, as a run holds a thread pool.
- Threads. One thread per run in flight (they are all waiting on the network or on
  one another), up to ``max_requests`` runs; ``run_many`` submits that many at once.

Outer ring: imports the standard library, nacelle's core, ``retry``, ``batch.wires`` and, when a
ProviderBatch is made, ``batch.anthropic_wire`` or ``batch.openai_wire`` (and through
them the backend's wire modules).
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from concurrent.futures import Executor, Future
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from .._loggers import get_logger
from ..backend import Request, TurnEnd
from ..context import CancelEvent, RunContext
from ..errors import Cancelled, ConfigError, NacelleError, StreamError
from ..events import Event, Usage
from ..messages import Message, dumps, loads
from ..pricing import batch_priced
from ..retry import Retry
from .wires import Outcome, Wire

__all__ = ["ProviderBatch"]

log = get_logger(__name__)


class _Ask:
    """One run's request for its next turn, until its result releases it."""

    __slots__ = ("index", "custom_id", "params", "messages", "request", "done", "outcome",
                 "batch", "tries", "left")

    def __init__(self, index: int, custom_id: str, params: Dict[str, Any],
                 request: Request, messages: Tuple[Message, ...]) -> None:
        self.index, self.custom_id, self.params = index, custom_id, params
        self.request, self.messages = request, messages
        self.done = threading.Event()
        self.outcome: Optional[Outcome] = None
        self.batch = ""
        self.tries = 0
        self.left = False  # its run stopped waiting (cancelled, out of time)


class ProviderBatch(Executor):
    """Runs ``run_many``'s runs with their model turns in provider batches. See the
    module docstring. ``backend`` is an Anthropic, OpenAI (Responses) or Chat
    Completions backend (inside a ``Retry``, which is then left out: each batch call
    retries on its own, honouring ``Retry-After``); it replaces the Agent's for these
    runs. ``clock`` (with a
    ``sleep``, as FakeClock has) drives the polling waits."""

    def __init__(self, backend: Any, *, poll: float = 30.0, max_requests: int = 10_000,
                 retries: int = 3, clock: Optional[Callable[[], float]] = None) -> None:
        if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not poll >= 0:
            raise ConfigError(f"poll must be a number of seconds of 0 or more, got {poll!r}")
        for name, value in (("max_requests", max_requests), ("retries", retries)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a whole number of at least 1, got {value!r}")
        while isinstance(backend, Retry):  # the batch calls retry on their own
            backend = backend.backend
        self.wire: Wire = wire_for(backend)
        self.backend = backend
        self.poll = float(poll)
        self.max_requests = max_requests
        self.retries = retries
        self._clock = clock
        self._cond = threading.Condition()
        self._live = 0
        self._waiting: List[_Ask] = []
        self._carried: List[_Ask] = []
        self._open: List[_Ask] = []  # every ask not yet answered, wherever it is
        self._broken: Optional[BaseException] = None  # why the coordinator stopped
        self._seq: Dict[int, int] = {}
        self._spent: Dict[int, Tuple[Usage, float]] = {}
        self._resumed: Dict[int, Dict[str, Any]] = {}
        self._sink: Any = None
        self._notify: Optional[Callable[[], None]] = None
        self._ctx: Optional[RunContext] = None
        self._thread: Optional[threading.Thread] = None
        self._closing = False
        self._held = 0
        self._failures = 0
        self.rounds = 0
        self.batches = 0
        self.status = ""

    def __repr__(self) -> str:
        return f"ProviderBatch({self.backend!r}, poll={self.poll})"

    @property
    def window(self) -> int:
        """How many runs ``run_many`` submits at once: all of a round's."""
        return self.max_requests

    # -- run_many's side ----------------------------------------------------------------

    def attach(self, sink: Any, resumed: Dict[int, Dict[str, Any]],
               notify: Optional[Callable[[], None]]) -> None:
        """Called by ``run_many``: the results file (or None), the runs the file's last
        round holds unfinished, and what shows progress."""
        self._sink, self._resumed, self._notify = sink, dict(resumed), notify

    def hold(self) -> None:
        """No round starts until :meth:`release`: ``run_many`` holds the batch while it
        submits a burst of runs, so the first round has them all."""
        with self._cond:
            self._held += 1

    def release(self) -> None:
        with self._cond:
            self._held -= 1
            self._cond.notify_all()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> "Future[Any]":
        """``fn(agent, index, conversation, cancel, portable)`` — ``run_many``'s worker —
        on a thread of its own, with the Agent's turns going through the batches."""
        if len(args) != 5 or kwargs:
            raise ConfigError("ProviderBatch runs run_many's runs only: pass it as "
                              "run_many(..., executor=ProviderBatch(backend))")
        agent, index, conversation, cancel, portable = args
        future: "Future[Any]" = Future()
        with self._cond:
            if self._closing:
                raise RuntimeError("cannot submit to a ProviderBatch after shutdown")
            if self._thread is None:
                self._ctx = RunContext(cancelled=CancelEvent(cancel) if cancel is not None
                                       else CancelEvent(), **self._clock_option())
                self._thread = threading.Thread(target=self._coordinate, daemon=True,
                                                name="nacelle-provider-batch")
                self._thread.start()
            self._live += 1
        threading.Thread(target=self._run, args=(future, fn, agent, index, conversation,
                                                 cancel, portable),
                         name=f"nacelle-batch-run-{index}", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._closing = True
            if cancel_futures and self._ctx is not None:
                self._ctx.cancel()
            self._cond.notify_all()
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    def _clock_option(self) -> Dict[str, Any]:
        return {} if self._clock is None else {"clock": self._clock}

    # -- one run ------------------------------------------------------------------------

    def _run(self, future: "Future[Any]", fn: Callable[..., Any], agent: Any, index: int,
             conversation: Tuple[Message, ...], cancel: Any, portable: bool) -> None:
        try:
            if not future.set_running_or_notify_cancel():
                return
            state = self._resumed.get(index)
            prior = (Usage(), 0.0)
            if state is not None:
                conversation = tuple(loads(state["messages"]))
                prior = (_usage(state.get("usage")), float(state.get("streamed") or 0.0))
            with self._cond:
                self._spent[index] = prior
            batched = copy.copy(agent)
            batched.backend = _Turns(self, index)
            item = fn(batched, index, conversation, cancel, portable)
            usage, streamed = self._spent.get(index, prior)
            result = item.result
            if result is not None and state is not None:
                result = dataclasses.replace(result, usage=prior[0] + result.usage)
            future.set_result(dataclasses.replace(item, result=result,
                                                  streamed_cost=streamed))
        except BaseException as exc:  # noqa: BLE001 - the future carries it
            future.set_exception(exc)
        finally:
            with self._cond:
                self._live -= 1
                self._cond.notify_all()

    def ask(self, index: int, request: Request, messages: Tuple[Message, ...],
            ctx: RunContext) -> Tuple[List[Event], TurnEnd]:
        """Run ``index``'s next turn in the coming round; block until its result."""
        params = self.wire.params(request, messages)
        with self._cond:
            if self._broken is not None:
                raise self._broken
            seq = self._seq[index] = self._seq.get(index, 0) + 1
            ask = _Ask(index, f"n{index}-{seq}", params, request, messages)
            self._open.append(ask)
            pending = self._resumed.pop(index, None)
            if pending is not None:
                ask.custom_id, ask.batch = pending["custom_id"], pending["batch"]
                # Later custom ids go on from the recorded one's number, so no two
                # requests of a run share one, across the resume too.
                number = ask.custom_id.rpartition("-")[2]
                self._seq[index] = max(seq, int(number) if number.isdigit() else 0)
                self._carried.append(ask)
            else:
                self._waiting.append(ask)
            self._cond.notify_all()
        unregister = ctx.on_cancel(ask.done.set)
        try:
            while not ask.done.is_set():
                left = ctx.remaining()
                ask.done.wait(1.0 if left is None else min(max(left, 0.0), 1.0))
                if not ask.done.is_set() or ctx.cancelled.is_set():
                    ctx.check()
            ctx.check()
        except BaseException:
            ask.left = True
            with self._cond:  # not yet sent: it leaves the round
                for queue in (self._waiting, self._carried):
                    if ask in queue:
                        queue.remove(ask)
                self._cond.notify_all()
            raise
        finally:
            unregister()
            with self._cond:
                self._open.remove(ask)
        outcome = ask.outcome
        assert outcome is not None
        if outcome.kind != "succeeded":
            raise outcome.error or StreamError(f"the batch request {ask.custom_id} failed")
        events, end = self.wire.turn(outcome.body, request, messages)
        cheap = batch_priced(end.usage, self.wire.provider)
        with self._cond:
            usage, streamed = self._spent.get(index, (Usage(), 0.0))
            self._spent[index] = (usage + cheap, streamed + end.usage.cost)
        return events, dataclasses.replace(end, usage=cheap)

    # -- the coordinator ------------------------------------------------------------------

    def _coordinate(self) -> None:
        ctx = self._ctx
        assert ctx is not None
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(self._ready)
                    if not self._live and self._closing:
                        return
                    if ctx.cancelled.is_set():
                        self._release_all(Cancelled("the batch was cancelled"))
                        if self._closing:
                            return
                        continue
                    fresh, carried = self._waiting[:], self._carried[:]
                    del self._waiting[:], self._carried[:]
                self._round(ctx, fresh, carried)
        except Exception as exc:  # noqa: BLE001 - every waiting run learns of it
            log.debug("provider batch coordinator stopped", exc_info=True)
            self._release_all(exc if isinstance(exc, NacelleError) else
                              StreamError(f"the provider batch failed: {exc!r}"), broken=True)

    def _ready(self) -> bool:
        asked = len(self._waiting) + len(self._carried)
        return (self._closing and not self._live) or self._ctx is not None and (
            self._ctx.cancelled.is_set() and asked > 0) or (
            self._live > 0 and asked >= self._live and not self._held)

    def _release_all(self, error: BaseException, broken: bool = False) -> None:
        """Every waiting turn fails with ``error`` (and, ``broken``, every later one)."""
        with self._cond:
            if broken:
                self._broken = error
            asks = [ask for ask in self._open if not ask.done.is_set()]
            self._waiting, self._carried = [], []
        for ask in asks:
            ask.outcome = Outcome("errored", error=error)  # type: ignore[arg-type]
            ask.done.set()

    def _round(self, ctx: RunContext, fresh: List[_Ask], carried: List[_Ask]) -> None:
        if self._failures:
            ctx.sleep(min(self.poll * 2 ** (self._failures - 1), 3600.0))
        self.rounds += 1
        fresh = sorted(fresh, key=lambda ask: ask.index)  # the order the runs were given in
        batches: Dict[str, Dict[str, _Ask]] = {}
        for ask in carried:
            batches.setdefault(ask.batch, {})[ask.custom_id] = ask
        for start in range(0, len(fresh), self.max_requests):
            chunk = fresh[start:start + self.max_requests]
            try:
                batch_id = self.wire.create([(a.custom_id, a.params) for a in chunk], ctx)
            except (Cancelled, KeyboardInterrupt):
                raise
            except NacelleError as refused:
                self._failed(chunk, refused)
                continue
            self.batches += 1
            for ask in chunk:
                ask.batch = batch_id
            batches[batch_id] = {a.custom_id: a for a in chunk}
        if batches:
            self._save(batches)
            self._poll(ctx, batches)

    def _failed(self, asks: List[_Ask], error: NacelleError) -> None:
        """A batch failed as a whole: its requests go again next round, or fail."""
        self._failures += 1
        log.debug("a provider batch failed (%s); %d requests", error, len(asks))
        for ask in asks:
            ask.tries += 1
            if ask.tries > self.retries:
                ask.outcome = Outcome("errored", error=error)  # type: ignore[arg-type]
                ask.done.set()
            else:
                self._again(ask)

    def _again(self, ask: _Ask) -> None:
        with self._cond:
            seq = self._seq[ask.index] = self._seq.get(ask.index, 0) + 1
            ask.custom_id, ask.batch = f"n{ask.index}-{seq}", ""
            self._waiting.append(ask)
            self._cond.notify_all()

    def _poll(self, ctx: RunContext, batches: Dict[str, Dict[str, _Ask]]) -> None:
        going = dict(batches)
        clean = True
        while going:
            wait = self.poll
            words = []
            for batch_id in list(going):
                status, after = self.wire.status(batch_id, ctx)
                if after is not None and after > 0:
                    wait = max(wait, min(after, 600.0))
                words.append(status.word + _counts(status.counts))
                if status.failed:
                    clean = False
                    self._failed(list(going.pop(batch_id).values()),
                                 StreamError(f"{self.wire.provider} failed batch {batch_id}: "
                                             f"{status.error}"))
                elif status.ended:
                    self._deliver(going.pop(batch_id), self.wire.results(batch_id, ctx))
            self.status = (f"round {self.rounds}: {len(batches)} batch"
                           f"{'' if len(batches) == 1 else 'es'} {', '.join(words)}")
            if self._notify is not None:
                self._notify()
            for batch_id in [b for b, asks in going.items()
                             if all(a.left for a in asks.values())]:
                del going[batch_id]  # nobody waits for it any more
            if going:
                ctx.sleep(wait)
        if clean:
            self._failures = 0

    def _deliver(self, asks: Dict[str, _Ask], outcomes: Dict[str, Outcome]) -> None:
        for custom_id, ask in asks.items():
            outcome = outcomes.get(custom_id)
            if outcome is not None and outcome.kind in ("succeeded", "errored"):
                ask.outcome = outcome
                ask.done.set()
                continue
            ask.tries += 1
            if ask.tries > self.retries:
                why = outcome.kind if outcome is not None else "missing from the results"
                ask.outcome = Outcome("errored", error=StreamError(  # type: ignore[arg-type]
                    f"the batch request for run {ask.index} was {why} {ask.tries} times"))
                ask.done.set()
            else:
                self._again(ask)

    def _save(self, batches: Dict[str, Dict[str, _Ask]]) -> None:
        sink = self._sink
        if sink is None:
            return
        items = []
        with self._cond:
            for batch_id, asks in batches.items():
                for ask in asks.values():
                    usage, streamed = self._spent.get(ask.index, (Usage(), 0.0))
                    items.append({"index": ask.index, "custom_id": ask.custom_id,
                                  "batch": batch_id, "messages": dumps(ask.messages),
                                  "usage": _usage_json(usage), "streamed": streamed})
        sink.write_line({"provider_batch": {"provider": self.wire.provider,
                                            "round": self.rounds,
                                            "batches": sorted(batches), "items": items}})


def wire_for(backend: Any) -> Wire:
    """The batch API of ``backend``: Anthropic's for ``anthropic.Backend``, OpenAI's
    for ``openai.Backend`` (Responses) and ``chat.Backend`` (Chat Completions: OpenAI's,
    or any server offering the same Batch API); a ``ConfigError`` for anything else
    (Claude on Vertex or Bedrock has those clouds' own batch jobs, not this API)."""
    # By name, as the Agent knows backends: Claude on Vertex or Bedrock is named
    # "vertex" / "bedrock", and a wrapper (Retry, Fallback) has no batch API.
    name = getattr(backend, "name", "")
    endpoint = getattr(backend, "_endpoint", None)
    if endpoint is not None and name == "anthropic":
        from .anthropic_wire import AnthropicWire
        return AnthropicWire(backend)
    if endpoint is not None and name == "openai" and not hasattr(backend, "dialect"):
        from .openai_wire import ResponsesWire
        return ResponsesWire(backend)
    if endpoint is not None and hasattr(backend, "dialect") and hasattr(backend, "_accumulator"):
        from .openai_wire import ChatWire
        return ChatWire(backend)
    raise ConfigError(f"ProviderBatch needs a backend with a batch API (anthropic.Backend, "
                      f"openai.Backend or chat.Backend), got {type(backend).__name__}")


class _Turns:
    """The backend the batched runs see: the real one's name and capabilities, and a
    ``turn`` that goes through the coordinator."""

    def __init__(self, owner: ProviderBatch, index: int) -> None:
        backend = owner.backend
        self.name = backend.name
        self.capabilities = backend.capabilities
        self.model = getattr(backend, "model", "")
        self._owner, self._index = owner, index

    def turn(self, request: Request, messages: Tuple[Message, ...],
             ctx: RunContext) -> Iterator[Union[Event, TurnEnd]]:
        events, end = self._owner.ask(self._index, request, messages, ctx)
        yield from events
        yield end


def _counts(counts: Mapping[str, int]) -> str:
    shown = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    return f" ({shown})" if shown else ""


def _usage_json(usage: Usage) -> Dict[str, Any]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_creation_tokens": usage.cache_creation_tokens,
            "reasoning_tokens": usage.reasoning_tokens, "cost": usage.cost,
            "priced": usage.priced}


def _usage(value: Any) -> Usage:
    if not isinstance(value, dict):
        return Usage()
    try:
        return Usage(**{k: value[k] for k in ("input_tokens", "output_tokens",
                                              "cache_read_tokens", "cache_creation_tokens",
                                              "reasoning_tokens", "cost", "priced")
                        if k in value})
    except (TypeError, ValueError, NacelleError):
        return Usage()
