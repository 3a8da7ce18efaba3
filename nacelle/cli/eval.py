"""``nacelle eval DATA.jsonl --agent MODULE:FACTORY``: run a dataset of cases against
your agent (:func:`nacelle.evals.evaluate`), print a line per case, optionally compare
with a baseline report, and exit so CI can gate on it.

Exit codes: 0 every run of every case passed (at least ``--min-rate`` of each case's
runs) and, with ``--baseline``, nothing regressed beyond noise; 1 a case fell short or
regressed (the report is still written); 2 a usage error (arguments, a dataset, agent
factory or baseline that cannot be read); 130 interrupted (the checked runs are kept
in ``--results``, and a rerun resumes). A failed run counts as a failed case: a run
that raises is the agent's failure, not the eval's.

``--agent`` names a function returning a ``nacelle.Agent`` (or an Agent), imported as
``python -m`` would (the current directory first on the path), as ``nacelle serve``
does; ``--judge`` likewise names the backend (or a function making one) of the
dataset's ``judge`` checks.

Imports the standard library and the CLI helpers; the evals and the factory loader
inside :func:`command`; prints.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from typing import Any, Sequence

from ..errors import ConfigError, NacelleError
from .help import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from .terminal import exit_now, fail, one_line

__all__ = ["command"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nacelle eval",
        description="Run every case of DATA.jsonl against an agent and check the answers "
                    "(nacelle.evals). Exits 0 when every case passed (and nothing regressed "
                    "against --baseline), 1 when a case failed or regressed, 2 on a usage "
                    "error, 130 when interrupted.")
    parser.add_argument("data", metavar="DATA.jsonl", help="the cases, one JSON object a line")
    parser.add_argument("--agent", metavar="MODULE:FACTORY", required=True,
                        help="a function returning the nacelle.Agent to evaluate (or an Agent)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="runs per case (default: 1)")
    parser.add_argument("--baseline", metavar="OLD.json",
                        help="a report saved with -o: exit 1 when a case regressed beyond noise")
    parser.add_argument("-o", "--output", metavar="REPORT.json", help="save the report as JSON")
    parser.add_argument("--html", metavar="PAGE.html", help="save the report as an HTML page")
    parser.add_argument("--results", metavar="RUNS.jsonl",
                        help="keep each checked run here; a rerun resumes from it")
    parser.add_argument("--judge", metavar="MODULE:BACKEND",
                        help="the backend (or a function making one) of the dataset's judge checks")
    parser.add_argument("--min-rate", type=float, default=1.0, metavar="R",
                        help="the pass rate each case needs, 0 to 1 (default: 1)")
    parser.add_argument("--workers", type=int, default=8, metavar="N",
                        help="runs at once (default: 8)")
    return parser


def _load(target: str, what: str) -> Any:
    from ..agent import Agent
    from ..serve.server import load_factory

    value = load_factory(target)
    if what == "agent" and not isinstance(value, Agent):
        value = value()
        if not isinstance(value, Agent):
            raise ConfigError(f"{target} returned a {type(value).__name__}, not a nacelle.Agent")
    elif what == "judge" and (inspect.isfunction(value) or inspect.isclass(value)):
        value = value()  # a factory (a function or a Backend class) of the judge's backend
    return value


def command(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    if args.repeat < 1 or args.workers < 1:
        return fail("--repeat and --workers must be at least 1", EXIT_USAGE)
    if not 0.0 <= args.min_rate <= 1.0:
        return fail("--min-rate must be between 0 and 1", EXIT_USAGE)
    from ..evals import Dataset, EvalReport, evaluate

    try:
        judge = _load(args.judge, "judge") if args.judge else None
        dataset = Dataset.load(args.data, judge=judge)
        baseline = EvalReport.load(args.baseline) if args.baseline else None
        agent = _load(args.agent, "agent")
    except (NacelleError, OSError) as err:
        return fail(one_line(err), EXIT_USAGE)
    if not len(dataset):
        return fail(f"{args.data} has no cases: nothing to evaluate", EXIT_USAGE)
    try:
        report = evaluate(agent, dataset, repeat=args.repeat, results=args.results,
                          max_workers=args.workers, progress=sys.stderr.isatty())
    except KeyboardInterrupt:
        print("\n(cancelled; checked runs are kept in --results)", file=sys.stderr)
        return exit_now(EXIT_INTERRUPTED)
    except ConfigError as err:
        return fail(one_line(err), EXIT_USAGE)
    except (NacelleError, OSError) as err:
        return fail(one_line(err))
    short = _print(report, args.min_rate)
    comparison = report.compare(baseline) if baseline is not None else None
    if comparison is not None:
        print(f"against {args.baseline}: {comparison}")
    try:
        if args.output:
            report.save(args.output)
        if args.html:
            with open(args.html, "w", encoding="utf-8") as handle:
                handle.write(report.html(baseline))
    except OSError as err:
        return fail(one_line(err))
    regressed = comparison is not None and not comparison.ok
    return exit_now(EXIT_FAILED if short or regressed else EXIT_OK)


def _print(report: Any, min_rate: float) -> int:
    """A line per case on stdout (and the failures' reasons); returns how many fell short."""
    from ..terminal_text import visible

    short = 0
    for case in report.cases:
        low, high = case.interval
        ok = case.runs > 0 and case.rate >= min_rate
        short += not ok
        print(f"{'PASS' if ok else 'FAIL'} {visible(case.name)}  {case.passes}/{case.runs} "
              f"({low:.0%}-{high:.0%})  ${case.cost:.4f}  {case.tokens:,} tokens")
        for failure in case.failures[:3] if not ok else ():
            for reason in failure.get("reasons") or ["(no reason)"]:
                print(f"    run {failure.get('attempt')}: {visible(str(reason))}")
    print(str(report))
    return short
