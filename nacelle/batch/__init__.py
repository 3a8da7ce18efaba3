"""Batches of runs: one Agent over many conversations, on threads, processes or a cluster.

``run_many(agent, conversations)`` yields a :class:`BatchItem` per conversation as its
run finishes (not in order: ``item.index`` says which). Each run is isolated: a
failure is an item whose ``error`` is set, and the batch goes on. ``summary(items)``
totals them; ``best_of`` runs one conversation n times and keeps the best by a score;
``main_batch`` is the ``nacelle batch`` command's body (JSONL in, JSONL out).

Where the runs go is any ``concurrent.futures.Executor``:

- nothing (the default): a ``ThreadPoolExecutor(max_workers)`` of this process. Runs
  are mostly waiting on the network, so threads are the right default;
- ``ProcessPoolExecutor``: for CPU-heavy tools;
- Dask: ``distributed.Client(...).get_executor()``;
- Ray: :func:`ray_executor`, a thin Executor over Ray tasks (``ObjectRef.future()``
  and ``ray.cancel``; Ray ships no ``concurrent.futures`` executor of its own).

Off the threads, the Agent and each conversation travel to the worker by pickle, and
each item comes back the same way. The worker runs :func:`_run_one`, a module-level
function, so a worker needs nacelle importable, and so the module of every tool,
hook, approval callback and custom backend the Agent holds (a tool defined in
``__main__`` or in a notebook cell does not import on a Dask or Ray worker; put it
in a module). The API key travels inside the pickled backend: send it only to
workers you trust. An exception that does not survive pickling (its class takes
other arguments than it passes to ``Exception``, or holds a socket) comes back as
its text, ``"TypeName: message"``; ``error`` is therefore an exception *or* a str.

Cancellation: ``KeyboardInterrupt`` in the loop, or closing the iterator (``break``
out of a ``for``, ``close()``, garbage collection), stops the batch. Runs not
started are cancelled (their futures are cancelled). What happens to runs already
in progress depends on the executor:

- threads (the default, or any ``ThreadPoolExecutor``): every run gets one shared
  :class:`~nacelle.context.CancelEvent`, which is set, so in-progress runs stop at once
  (their responses are closed; tools are told to stop). The default pool is shut down
  and waited for.
- processes, Dask: a CancelEvent does not pickle across processes, so a run in
  progress finishes in its worker and its result is dropped; only futures not yet
  running are cancelled. The executor is yours, so it is left running.
- Ray: ``ray.cancel`` interrupts the task, in progress or not.

Finished items that were not yet yielded when the batch stopped are still written to
the results file, so work already paid for is kept.

``results=path`` keeps a JSONL file (``batch/results.py``): each finished item is
appended, flushed and fsynced before it is yielded, and a rerun skips the indexes the
file holds, so an interrupted batch resumes where it was. A run in progress when the
process was killed is done again: a batch is at-least-once for the runs in flight at
the kill, exactly-once for those recorded. Skipped runs are not yielded (the file
has them, not their Results).

At most ``2 * max_workers`` runs are submitted ahead of the results, with your
executor too (give ``max_workers`` its worker count), so a million-line batch is not
a million pickled futures at once, and the conversations may be a lazy iterable.

Imports the standard library and nacelle's core modules (Ray only inside
:func:`ray_executor`); never prints, but for the progress line on stderr
(``batch/progress.py``).
"""

from __future__ import annotations

import collections
import importlib
import itertools
import json
import os
import pickle
import threading
import time
import queue
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import (Any, Callable, Deque, Dict, Generator, Iterable, List, Optional, Sequence,
                    Set, Tuple, Union)

from .._loggers import get_logger
from .. import bounded_json
from ..agent import Agent, Result
from ..context import CancelEvent
from ..errors import Cancelled, ConfigError
from ..events import Usage
from ..messages import Message, loads, user_text
from .progress import Progress, ProgressLine
from .provider import ProviderBatch
from .results import ResultsFile, finished_indexes, provider_round

__all__ = ["BatchItem", "Progress", "ProgressLine", "ProviderBatch", "Summary", "best_of",
           "main_batch", "ray_executor", "run_many", "summary"]

log = get_logger(__name__)

#: what ``conversations`` may hold: a list of Messages, or a prompt for ``user_text``
Conversation = Union[str, Sequence[Message]]


@dataclass(frozen=True, repr=False)  # its own __repr__ below
class BatchItem:
    """One finished run: its ``index`` in the conversations, and either its ``result``
    or its ``error`` (the exception, or ``"TypeName: message"`` when the exception did
    not survive the trip back from another process). ``started`` and ``ended`` are
    ``time.time()`` on the worker. ``streamed_cost`` is set by a
    :class:`ProviderBatch`: what the run's turns would have cost streamed (its
    ``result.usage.cost`` is the batch rate)."""

    index: int
    result: Optional[Result] = None
    error: Union[BaseException, str, None] = None
    started: float = 0.0
    ended: float = 0.0
    streamed_cost: Optional[float] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def seconds(self) -> float:
        """How long the run took on its worker."""
        return self.ended - self.started

    def __repr__(self) -> str:
        what = f"result={self.result!r}" if self.error is None else f"error={self.error!r}"
        return f"BatchItem(index={self.index}, {what})"


@dataclass(frozen=True)
class Summary:
    """What :func:`summary` returns. ``wall`` is the first start to the last end (worker
    clocks), ``run_seconds`` the runs' times added up (``run_seconds / wall`` is how
    many ran at once on average); ``usage`` sums the successful runs'. ``streamed``
    is, for runs made in provider batches, what the same turns would have cost
    streamed (None when no run was)."""

    count: int
    failures: int
    usage: Usage
    wall: float
    run_seconds: float
    streamed: Optional[float] = None

    @property
    def cost(self) -> float:
        return self.usage.cost

    def __str__(self) -> str:
        streamed = "" if self.streamed is None else f" (${self.streamed:.4f} streamed)"
        return (f"{self.count} runs, {self.failures} failed, {self.usage.total:,} tokens, "
                f"${self.cost:.4f}{streamed}, {self.wall:.1f} s wall")


def summary(items: Iterable[BatchItem]) -> Summary:
    """Totals of ``items`` (a list, or ``run_many``'s iterator, which this consumes)."""
    count = failures = 0
    usage = Usage()
    first, last, busy = float("inf"), -float("inf"), 0.0
    streamed: Optional[float] = None
    for item in items:
        count += 1
        if item.error is not None:
            failures += 1
        elif item.result is not None:
            usage = usage + item.result.usage
            if item.streamed_cost is not None:
                streamed = (streamed or 0.0) + item.streamed_cost
        first, last = min(first, item.started), max(last, item.ended)
        busy += max(item.seconds, 0.0)
    return Summary(count, failures, usage, max(last - first, 0.0) if count else 0.0, busy,
                   streamed)


def _run_one(agent: Agent, index: int, conversation: Tuple[Message, ...],
             cancel: Optional[CancelEvent], portable: bool) -> BatchItem:
    """The worker function (module-level, so it pickles by name). Never raises for a
    failed run: the failure is the item's ``error``."""
    started = time.time()
    try:
        result = agent.run(conversation, cancel=cancel)
    except Exception as exc:  # noqa: BLE001 - one run's failure is its item, not the batch's
        return BatchItem(index, error=_portable(exc) if portable else exc,
                         started=started, ended=time.time())
    return BatchItem(index, result=result, started=started, ended=time.time())


def _portable(exc: BaseException) -> Union[BaseException, str]:
    """``exc`` if it survives a pickle round trip, else its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any failure to pickle means: send the text
        return f"{type(exc).__name__}: {exc}"


def _conversation(value: Any, index: int) -> Tuple[Message, ...]:
    if isinstance(value, str):
        return (user_text(value),)
    if isinstance(value, Message):
        raise ConfigError(f"conversations[{index}] is one Message; a conversation is a list "
                          "of them (or a prompt str)")
    try:
        return tuple(value)
    except TypeError:
        raise ConfigError(f"conversations[{index}] is a {type(value).__name__}, not a list "
                          "of Messages or a prompt str") from None


def _progress_sink(progress: Any) -> Optional[Callable[[Progress], None]]:
    if progress is True:
        return ProgressLine()
    if progress is False or progress is None:
        return None
    if callable(progress):
        return progress  # type: ignore[no-any-return]
    raise ConfigError(f"progress must be True, False or a callable taking a "
                      f"batch.Progress, got {progress!r:.60}")


def run_many(agent: Agent, conversations: Iterable[Conversation], *,
             executor: Optional[Executor] = None, max_workers: int = 8,
             progress: Union[bool, Callable[[Progress], None]] = True,
             results: Union[str, "os.PathLike[str]", None] = None) -> Generator[BatchItem, None, None]:
    """Run ``agent`` on every conversation; yield a :class:`BatchItem` per run as it
    finishes. See the module docstring for executors, cancellation and ``results``."""
    if not isinstance(agent, Agent):
        raise ConfigError(f"run_many takes a nacelle.Agent, got {type(agent).__name__}")
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise ConfigError(f"max_workers must be an integer of at least 1, got {max_workers!r}")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise ConfigError(f"executor must be a concurrent.futures.Executor, got "
                          f"{type(executor).__name__}")
    if isinstance(conversations, (str, Message)):
        raise ConfigError("run_many takes many conversations: a list of them, not one")
    report = _progress_sink(progress)
    # Read (and repair) the file now, not at the first next(): a bad path fails here.
    skip = finished_indexes(results) if results is not None else set()
    size = len(conversations) if isinstance(conversations, collections.abc.Sized) else None
    total = None if size is None else size - sum(1 for i in skip if i < size)
    return _batch(agent, conversations, executor, max_workers, report, results, skip, total)


def _batch(agent: Agent, conversations: Iterable[Conversation], executor: Optional[Executor],
           max_workers: int, report: Optional[Callable[[Progress], None]],
           results: Union[str, "os.PathLike[str]", None], skip: Set[int],
           total: Optional[int]) -> Generator[BatchItem, None, None]:
    pool = executor if executor is not None else ThreadPoolExecutor(
        max_workers, thread_name_prefix="nacelle-batch")
    threads = isinstance(pool, (ThreadPoolExecutor, ProviderBatch))
    cancel = CancelEvent() if threads else None
    sink = ResultsFile(results) if results is not None else None
    pending: Dict["Future[BatchItem]", int] = {}
    ready: Deque[Tuple[int, "Future[BatchItem]"]] = collections.deque()
    source = ((i, c) for i, c in enumerate(conversations) if i not in skip)
    window = 2 * max_workers
    started = time.monotonic()
    done = failures = 0
    cost = Usage()
    clean = False
    if isinstance(pool, ProviderBatch):
        window = max(window, pool.window)
        batched = pool

        def show() -> None:
            if report is not None:
                report(Progress(done, total, failures, time.monotonic() - started,
                                cost.cost, batch=batched.status))

        pool.attach(sink, provider_round(results) if results is not None else {}, show)
    # Each future puts itself here when it finishes. (``concurrent.futures.wait`` would
    # visit every pending future, under its lock, at each wake-up: a thousand runs at
    # once made that a million lock round trips.)
    finished: "queue.SimpleQueue[Future[BatchItem]]" = queue.SimpleQueue()
    try:
        _burst(pool, pending, agent, itertools.islice(source, window), cancel, not threads,
               finished.put)
        while pending or ready:
            if not ready:
                woken = [finished.get()]
                while not finished.empty():
                    woken.append(finished.get())
                # Index order within one wake-up, so a rerun's file reads in a stable order.
                ready.extend(sorted((pending.pop(f), f) for f in woken))
                _burst(pool, pending, agent, itertools.islice(source, len(woken)), cancel,
                       not threads, finished.put)
            index, future = ready.popleft()
            item = _item(future, index)
            if sink is not None:
                sink.write(item.index, item.result, item.error)
            done += 1
            if item.error is not None:
                failures += 1
            elif item.result is not None:
                cost = cost + item.result.usage
            if report is not None:
                report(Progress(done, total, failures, time.monotonic() - started, cost.cost,
                                batch=getattr(pool, "status", "")))
            yield item
        clean = True
        if report is not None:
            report(Progress(done, total, failures, time.monotonic() - started, cost.cost,
                            final=True, batch=getattr(pool, "status", "")))
    finally:
        if not clean:
            _stop(pool, executor is None, cancel, pending, ready, sink)
            if isinstance(pool, ProviderBatch):
                pool.shutdown(wait=True, cancel_futures=True)
        elif executor is None or isinstance(pool, ProviderBatch):
            pool.shutdown(wait=True)
        if sink is not None:
            sink.close()


def _burst(pool: Executor, pending: Dict["Future[BatchItem]", int], agent: Agent,
           runs: Iterable[Tuple[int, Any]], cancel: Optional[CancelEvent],
           portable: bool, done: Callable[["Future[BatchItem]"], None]) -> None:
    """Submit ``runs``, each future calling ``done`` when it finishes; a provider batch
    is held meanwhile, so they share a round."""
    held = pool if isinstance(pool, ProviderBatch) else None
    if held is not None:
        held.hold()
    try:
        for index, conversation in runs:
            future = _submit(pool, agent, index, conversation, cancel, portable)
            pending[future] = index
            future.add_done_callback(done)
    finally:
        if held is not None:
            held.release()


def _submit(pool: Executor, agent: Agent, index: int, conversation: Any,
            cancel: Optional[CancelEvent], portable: bool) -> "Future[BatchItem]":
    return pool.submit(_run_one, agent, index, _conversation(conversation, index), cancel,
                       portable)


def _item(future: "Future[BatchItem]", index: int) -> BatchItem:
    """The future's item; a failure of the executor itself (a worker that died, an
    Agent that does not pickle) is that run's error."""
    try:
        item = future.result()
    except Exception as exc:  # noqa: BLE001 - the executor failed this one run
        now = time.time()
        return BatchItem(index, error=exc, started=now, ended=now)
    if not isinstance(item, BatchItem):
        raise TypeError(f"the executor returned {type(item).__name__}, not a BatchItem")
    return item


def _stop(pool: Executor, own: bool, cancel: Optional[CancelEvent],
          pending: Dict["Future[BatchItem]", int], ready: Deque[Tuple[int, "Future[BatchItem]"]],
          sink: Optional[ResultsFile]) -> None:
    """Cancel what has not run, stop what is running where the executor lets us, and
    keep (in the results file) what had finished but was not yet yielded."""
    log.debug("batch stopping: %d runs outstanding, %d finished and not yet yielded",
              len(pending), len(ready))
    if cancel is not None:
        cancel.set()
    for future in pending:
        future.cancel()
    if own:
        pool.shutdown(wait=True, cancel_futures=True)
    if sink is None:
        return
    leftovers = list(ready) + sorted((i, f) for f, i in pending.items() if f.done())
    for index, future in leftovers:
        if future.cancelled():
            continue
        item = _item(future, index)
        error = item.error
        ours = isinstance(error, Cancelled) or (isinstance(error, str) and
                                                 error.startswith("Cancelled:"))
        if not ours:
            sink.write(item.index, item.result, item.error)


def best_of(agent: Any, conversation: Conversation, n: int, *,
            score: Callable[..., Any], executor: Optional[Executor] = None,
            sandbox: Optional[Callable[[str], Any]] = None,
            workspace: Union[str, "os.PathLike[str]", None] = None,
            ) -> Tuple[Result, List[Result]]:
    """Run ``conversation`` ``n`` times at once and return ``(best, results)``: ``best``
    is the Result ``score`` ranks highest (the first of equals), ``results`` all ``n``
    Results in the order the runs were started. ``score`` is called here, in the
    calling process, once per Result. A failed run raises its error (the others
    are cancelled): a best of fewer than ``n`` is not what was asked for.

    With ``sandbox=`` (a function making a box from a path, such as
    ``sandbox.Bubblewrap``) each candidate works in a box on its own copy of
    ``workspace``: ``agent`` is then a function making the candidate's Agent from its
    box, ``score`` is called as ``score(result, box)``, and the winner's tree replaces
    ``workspace`` (see :mod:`nacelle.batch.boxed`)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"best_of needs n of at least 1, got {n!r}")
    if not callable(score):
        raise ConfigError(f"score must be callable, got {type(score).__name__}")
    if sandbox is not None:
        if executor is not None:
            raise ConfigError("best_of with sandbox= runs its candidates on threads here, "
                              "beside their boxes; it takes no executor")
        from .boxed import best_of_in_boxes

        return best_of_in_boxes(agent, conversation, n, score=score, sandbox=sandbox,
                                workspace=workspace)
    runs: List[Optional[Result]] = [None] * n
    items = run_many(agent, [conversation] * n, executor=executor, max_workers=n,
                     progress=False)
    try:
        for item in items:
            if item.error is not None:
                if isinstance(item.error, BaseException):
                    raise item.error
                raise RuntimeError(f"run {item.index} of best_of failed: {item.error}")
            runs[item.index] = item.result
    finally:
        items.close()
    done = [r for r in runs if r is not None]
    scores = [score(r) for r in done]
    best = max(range(len(done)), key=lambda i: (scores[i], -i))
    return done[best], done


def _read_input(path: Union[str, "os.PathLike[str]"]) -> List[Tuple[Message, ...]]:
    """One conversation per line: ``{"prompt": "..."}`` or ``{"messages": [...]}`` in
    ``nacelle.dumps`` form. A line that is neither (a blank one too) is a ConfigError
    naming it, raised before anything runs: a results file's indexes are line numbers,
    so a line cannot be quietly left out."""
    conversations: List[Tuple[Message, ...]] = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            try:
                value = bounded_json.loads(line, what="line",
                                           max_depth=bounded_json.DOCUMENT_DEPTH)
            except ValueError as exc:
                raise ConfigError(f"{path} line {number}: not JSON ({exc})") from None
            if isinstance(value, dict) and isinstance(value.get("prompt"), str):
                conversations.append((user_text(value["prompt"]),))
            elif isinstance(value, dict) and isinstance(value.get("messages"), list):
                try:
                    conversations.append(tuple(loads(json.dumps(value["messages"]))))
                except ValueError as exc:
                    raise ConfigError(f"{path} line {number}: messages: {exc}") from None
            else:
                raise ConfigError(f'{path} line {number}: expected {{"prompt": "..."}} or '
                                  f'{{"messages": [...]}}')
    return conversations


def main_batch(agent: Agent, input_path: Union[str, "os.PathLike[str]"],
               output_path: Union[str, "os.PathLike[str]"], workers: int = 8, *,
               provider_batch: bool = False, poll: float = 30.0) -> Summary:
    """``nacelle batch INPUT.jsonl -o RESULTS.jsonl --workers N``: run every line of the
    input on ``workers`` threads into the results file (resuming it), with the progress
    line on stderr; returns the :class:`Summary` of the runs done now (the caller
    decides the exit status, e.g. 1 when ``failures``). A result's index is its input
    line's number counted from 0. ``provider_batch`` (``--provider-batch``) sends the
    model turns through a :class:`ProviderBatch` of the Agent's backend, polled every
    ``poll`` seconds.

    A results file that is the input file itself (by any path, a link included) is a
    ``ConfigError`` before anything is read or written: appending results to the
    prompts would mix the two, the resume pass would cut the input's last line when it
    has no newline (it reads as a torn result), and the next run could not read its
    input. Refusing keeps the input whole and says so; a results file beside the input
    is what the command is for."""
    if _same_file(input_path, output_path):
        raise ConfigError(f"the results file {os.fspath(output_path)} is the same file as "
                          f"the input {os.fspath(input_path)}; write the results elsewhere")
    conversations = _read_input(input_path)
    executor = ProviderBatch(agent.backend, poll=poll) if provider_batch else None
    return summary(run_many(agent, conversations, max_workers=workers, results=output_path,
                            executor=executor))


def _same_file(first: Union[str, "os.PathLike[str]"],
               second: Union[str, "os.PathLike[str]"]) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # one does not exist (yet): not the same file
        return False


def ray_executor(**options: Any) -> Executor:
    """A ``concurrent.futures.Executor`` that runs each call as a Ray task.

    ``options`` go to ``ray.remote(...).options(...)`` (``num_cpus``, ``resources``,
    ``runtime_env``...). Connect first with ``ray.init(address=...)``; without it the
    first task starts a local Ray, as any Ray call does. Cancelling a future calls
    ``ray.cancel`` on its task. ``shutdown`` cancels what is left when asked to and
    leaves Ray running: Ray is yours. Needs the ``ray`` extra.
    """
    try:
        ray = importlib.import_module("ray")
    except ImportError:
        raise ConfigError("batch.ray_executor needs Ray: pip install 'nacelle-sdk[ray]'") from None
    return _RayExecutor(ray, options)


class _RayFuture(Future[Any]):
    def __init__(self, ray: Any, ref: Any) -> None:
        super().__init__()
        self._ray, self._ref = ray, ref

    def cancel(self) -> bool:
        if self.done():
            return False
        try:
            self._ray.cancel(self._ref)
        except Exception:  # noqa: BLE001 - a finished or unknown task: nothing to cancel
            log.debug("ray.cancel failed", exc_info=True)
        return super().cancel()


class _RayExecutor(Executor):
    """Ray tasks behind ``concurrent.futures``: see :func:`ray_executor`."""

    def __init__(self, ray: Any, options: Dict[str, Any]) -> None:
        self._ray, self._options = ray, options
        self._remotes: Dict[Any, Any] = {}
        self._lock = threading.Lock()
        self._open: Set[_RayFuture] = set()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> "Future[Any]":
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit to a ray_executor after shutdown")
            remote = self._remotes.get(fn)
            if remote is None:
                remote = self._ray.remote(fn)
                if self._options:
                    remote = remote.options(**self._options)
                self._remotes[fn] = remote
        ref = remote.remote(*args, **kwargs)
        future = _RayFuture(self._ray, ref)
        with self._lock:
            self._open.add(future)
        ref.future().add_done_callback(lambda done: self._settle(future, done))
        return future

    def _settle(self, future: _RayFuture, done: "Future[Any]") -> None:
        with self._lock:
            self._open.discard(future)
        if future.cancelled():
            return
        try:
            exc = done.exception()
            if exc is None:
                future.set_result(done.result())
            else:
                future.set_exception(exc)
        except BaseException as error:  # noqa: BLE001 - Ray's own future was cancelled
            if not future.done():
                future.set_exception(error)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            left = list(self._open)
        if cancel_futures:
            for future in left:
                future.cancel()
        if wait:
            for future in left:
                if not future.cancelled():
                    try:
                        future.exception()
                    except BaseException:  # noqa: BLE001 - only waiting, not reporting
                        pass
