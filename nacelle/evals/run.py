"""``evaluate(agent, dataset)``: run every case ``repeat`` times as a batch, check each
run, and report.

The runs go through :func:`nacelle.batch.run_many`, so they run on any
``concurrent.futures`` executor (threads by default; processes, Dask, Ray: see
:mod:`nacelle.batch`), each isolated (a run that raises is a failed run, and the eval
goes on). Run ``k`` of case ``i`` is run number ``i * repeat + k``.

Checks run here, in the calling process, as each run comes back: a check may be any
Python function (a closure, a lambda) and a judge calls its own model, neither of
which needs to travel to a worker. They run one at a time, in the order the runs
finish.

``results=path`` keeps a JSONL file as a batch's results file does
(:mod:`nacelle.batch.results`): one line per checked run, written whole, flushed and
fsynced before the next; a torn last line (a kill mid-write) is cut off and its run
done again; a rerun reads the file and runs only the runs it lacks, so an
interrupted eval resumes where it was and pays for nothing twice. Each line is the
batch's record of the run (``index``, ``stop``, ``usage``, ``cost``, ``text``,
``output``, ``error``) plus ``case``, ``attempt``, ``turns``, ``seconds``,
``passed``, ``checks`` (``[{"check", "passed", "reason"}]``) and ``check_cost``: the
verdicts are kept with the run, so a resumed eval neither reruns nor re-judges what
it already has. A line whose ``case`` or ``attempt`` does not match the dataset at
its index means the file was written for another dataset or ``repeat``: that is a
ConfigError, not a silent mix. A line that is not a whole checked run (edited by
hand, say) is logged and its run done again.

Imports the standard library, ``batch`` and the other ``evals`` modules.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Executor
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from .._loggers import get_logger
from .. import bounded_json
from ..batch import BatchItem, Progress, run_many
from ..batch.results import finished_indexes, record
from ..errors import ConfigError
from .cases import Case, Dataset
from .checks import check_name, run_check
from .report import EvalReport, case_report

__all__ = ["evaluate"]

log = get_logger(__name__)

_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")


def evaluate(agent: Any, dataset: Union[Dataset, Sequence[Case]], *, repeat: int = 1,
             executor: Optional[Executor] = None,
             results: Union[str, "os.PathLike[str]", None] = None, max_workers: int = 8,
             progress: Union[bool, Callable[[Progress], None]] = False) -> EvalReport:
    """Run each case of ``dataset`` ``repeat`` times with ``agent``, check every run,
    and return the :class:`~nacelle.evals.EvalReport`. ``executor``, ``max_workers``
    and ``progress`` are :func:`~nacelle.batch.run_many`'s; ``results`` makes the eval
    resumable (see the module docstring)."""
    cases = dataset if isinstance(dataset, Dataset) else Dataset(list(dataset))
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ConfigError(f"repeat must be a whole number of at least 1, got {repeat!r}")
    total = len(cases) * repeat
    done = _read(results, cases, repeat) if results is not None else {}
    todo = [i for i in range(total) if i not in done]
    if todo:
        sink = open(results, "ab") if results is not None else None
        items = run_many(agent, [cases[i // repeat].conversation for i in todo],
                         executor=executor, max_workers=max_workers, progress=progress)
        try:
            for item in items:
                index = todo[item.index]
                line = _checked(cases[index // repeat], index, index % repeat, item)
                if sink is not None:
                    _append(sink, line)
                done[index] = line
        finally:
            items.close()
            if sink is not None:
                sink.close()
    reports = [case_report(case.name, [done[i * repeat + k] for k in range(repeat)])
               for i, case in enumerate(cases)]
    return EvalReport(tuple(reports), repeat)


def _checked(case: Case, index: int, attempt: int, item: BatchItem) -> Dict[str, Any]:
    """The results line of one run: the batch's record, the checks' verdicts."""
    line = record(index, item.result, item.error)
    line.update(case=case.name, attempt=attempt, seconds=max(item.seconds, 0.0), turns=0,
                checks=[], check_cost=0.0)
    result = item.result
    if result is None:
        line["passed"] = False
        return line
    line["turns"] = result.turns
    verdicts, spent = [], 0.0
    for check in case.effective_checks():
        outcome = run_check(check, result, case)
        spent += outcome.cost
        verdicts.append({"check": check_name(check), "passed": bool(outcome.passed),
                         "reason": outcome.reason})
    line.update(checks=verdicts, check_cost=spent, passed=all(v["passed"] for v in verdicts))
    return line


def _append(sink: "IO[bytes]", line: Mapping[str, Any]) -> None:
    # One write of the whole line, then flush and fsync: a kill can only tear the last.
    sink.write(json.dumps(line, ensure_ascii=False, default=repr).encode("utf-8") + b"\n")
    sink.flush()
    os.fsync(sink.fileno())


def _whole(line: Mapping[str, Any]) -> bool:
    """Whether a line holds what a report is made of, with the types it is made of."""
    checks = line.get("checks")
    numbers: List[Any] = [line.get(k) for k in ("cost", "check_cost", "seconds")]
    usage = line.get("usage")
    return (isinstance(line.get("passed"), bool) and isinstance(checks, list)
            and all(isinstance(c, dict) and isinstance(c.get("check"), str)
                    and isinstance(c.get("passed"), bool) and isinstance(c.get("reason"), str)
                    for c in checks)
            and all(type(n) in (int, float) and n >= 0 for n in numbers)
            and (usage is None or (isinstance(usage, dict) and all(
                type(usage.get(k, 0)) is int for k in _TOKEN_FIELDS)))
            and isinstance(line.get("text"), (str, type(None)))
            and isinstance(line.get("error"), (str, type(None))))


def _read(path: Union[str, "os.PathLike[str]"], cases: Dataset,
          repeat: int) -> Dict[int, Dict[str, Any]]:
    """The checked runs a results file holds, by index (after cutting a torn line)."""
    if not finished_indexes(path):
        return {}
    done: Dict[int, Dict[str, Any]] = {}
    total = len(cases) * repeat
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                line = bounded_json.loads(raw, what="result", max_depth=bounded_json.DOCUMENT_DEPTH)
            except ValueError:
                continue  # finished_indexes logged it; its run is done again
            index = line.get("index") if isinstance(line, dict) else None
            if type(index) is not int or index < 0 or not _whole(line):
                log.warning("results file %s line %d is not a checked run; it is run again",
                            os.fspath(path), number)
                continue
            if index >= total or line.get("case") != cases[index // repeat].name or \
                    line.get("attempt") != index % repeat:
                raise ConfigError(f"{os.fspath(path)} line {number} is run {index} of case "
                                  f"{line.get('case')!r}: the file was written for another "
                                  "dataset or repeat; give a new results file")
            done[index] = line
    return done
