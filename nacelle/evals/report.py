"""What an eval found: per case its pass rate with a confidence interval, cost, tokens,
time and failures with their reasons; comparing two reports; JSON in and out.

**The interval.** A pass rate from n runs is an estimate; each case's comes with its
95% Wilson score interval (E. B. Wilson, "Probable inference, the law of succession,
and statistical inference", JASA 22 (1927); formula as in
https://en.wikipedia.org/wiki/Binomial_proportion_confidence_interval#Wilson_score_interval).
Wilson rather than the textbook normal ("Wald") interval because evals run few
times and often pass always or never: Wald gives a zero-width interval at 0/n and
n/n and strays below 0 or above 1, while Wilson stays inside [0, 1] and keeps its
coverage near 95% for small n (Brown, Cai & DasGupta, "Interval Estimation for a
Binomial Proportion", Statistical Science 16(2), 2001, which recommends it).

**Beyond noise.** :meth:`EvalReport.compare` calls a case a *regression* when its
new interval lies wholly below the baseline's (the new upper bound under the old
lower bound), an *improvement* when wholly above. Non-overlapping 95% intervals is a
conservative rule — it flags fewer changes than a two-proportion test at the 5%
level would (Schenker & Gentleman, "On Judging the Significance of Differences by
Examining the Overlap Between Confidence Intervals", The American Statistician
55(3), 2001) — which is what a CI gate wants: a flagged regression is a real one.
The price is that one run per case can never show a change beyond noise (0/1 and
1/1 overlap); a gate on single runs gates on failures instead (``nacelle eval``
exits 1 on any failed run). Cases only in one report are listed as added or removed.

Imports the standard library, ``bounded_json`` and the errors.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .. import bounded_json
from ..errors import ConfigError

__all__ = ["CaseReport", "Comparison", "EvalReport", "assert_passes", "wilson"]

#: the normal quantile of a two-sided 95% interval
Z95 = 1.959963984540054

VERSION = 1


def wilson(passes: int, runs: int, z: float = Z95) -> Tuple[float, float]:
    """The Wilson score interval of ``passes`` out of ``runs`` (``(0.0, 1.0)`` for no
    runs: nothing is known)."""
    if runs <= 0:
        return 0.0, 1.0
    p = passes / runs
    z2 = z * z
    denominator = 1 + z2 / runs
    center = (p + z2 / (2 * runs)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / runs + z2 / (4 * runs * runs))
    return max(0.0, center - half), min(1.0, center + half)


@dataclass(frozen=True)
class CaseReport:
    """One case over its runs. ``failures`` holds one entry per failed run:
    ``{"attempt": n, "reasons": [...], "text": the answer's start}``. ``cost`` is the
    agent's dollars, ``check_cost`` what the checks spent (a judge)."""

    name: str
    runs: int
    passes: int
    cost: float = 0.0
    check_cost: float = 0.0
    tokens: int = 0
    seconds: float = 0.0
    failures: Tuple[Mapping[str, Any], ...] = ()

    @property
    def rate(self) -> float:
        return self.passes / self.runs if self.runs else 0.0

    @property
    def interval(self) -> Tuple[float, float]:
        """The 95% Wilson score interval of the pass rate."""
        return wilson(self.passes, self.runs)

    def to_json(self) -> Dict[str, Any]:
        low, high = self.interval
        return {"name": self.name, "runs": self.runs, "passes": self.passes,
                "rate": self.rate, "low": low, "high": high, "cost": self.cost,
                "check_cost": self.check_cost, "tokens": self.tokens,
                "seconds": self.seconds, "failures": [dict(f) for f in self.failures]}


@dataclass(frozen=True)
class Comparison:
    """What :meth:`EvalReport.compare` found: case names, each list in the new
    report's order. ``ok`` when nothing regressed."""

    regressions: Tuple[str, ...] = ()
    improvements: Tuple[str, ...] = ()
    added: Tuple[str, ...] = ()
    removed: Tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.regressions

    def __str__(self) -> str:
        parts = [f"{len(self.regressions)} regressed", f"{len(self.improvements)} improved"]
        if self.regressions:
            parts[0] += f" ({', '.join(self.regressions)})"
        if self.improvements:
            parts[1] += f" ({', '.join(self.improvements)})"
        if self.added:
            parts.append(f"{len(self.added)} new")
        if self.removed:
            parts.append(f"{len(self.removed)} gone")
        return ", ".join(parts)


@dataclass(frozen=True)
class EvalReport:
    """Every case's :class:`CaseReport`, in the dataset's order."""

    cases: Tuple[CaseReport, ...]
    repeat: int = 1
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> CaseReport:
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)

    @property
    def runs(self) -> int:
        return sum(c.runs for c in self.cases)

    @property
    def passes(self) -> int:
        return sum(c.passes for c in self.cases)

    @property
    def rate(self) -> float:
        return self.passes / self.runs if self.runs else 0.0

    @property
    def interval(self) -> Tuple[float, float]:
        return wilson(self.passes, self.runs)

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.cases)

    @property
    def check_cost(self) -> float:
        return sum(c.check_cost for c in self.cases)

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.cases)

    @property
    def failed(self) -> Tuple[CaseReport, ...]:
        """The cases with at least one failed run."""
        return tuple(c for c in self.cases if c.passes < c.runs)

    def __str__(self) -> str:
        low, high = self.interval
        return (f"{self.passes}/{self.runs} runs passed ({self.rate:.0%}, 95% CI "
                f"{low:.0%}-{high:.0%}) over {len(self.cases)} case{'' if len(self.cases) == 1 else 's'}, "
                f"${self.cost:.4f}, "
                f"{self.tokens:,} tokens")

    def compare(self, baseline: "EvalReport") -> Comparison:
        """Regressions and improvements beyond noise against ``baseline`` (the rule is
        in the module docstring)."""
        if not isinstance(baseline, EvalReport):
            raise ConfigError(f"compare takes an EvalReport, got {type(baseline).__name__}")
        old = {c.name: c for c in baseline.cases}
        new = {c.name for c in self.cases}
        regressions, improvements, added = [], [], []
        for case in self.cases:
            before = old.get(case.name)
            if before is None:
                added.append(case.name)
                continue
            (low, high), (old_low, old_high) = case.interval, before.interval
            if high < old_low:
                regressions.append(case.name)
            elif low > old_high:
                improvements.append(case.name)
        removed = tuple(c.name for c in baseline.cases if c.name not in new)
        return Comparison(tuple(regressions), tuple(improvements), tuple(added), removed)

    def to_json(self) -> Dict[str, Any]:
        """The report as JSON-able data (``json.dumps`` it); :meth:`from_json` reads it."""
        low, high = self.interval
        return {"version": VERSION, "repeat": self.repeat, "meta": dict(self.meta),
                "runs": self.runs, "passes": self.passes, "rate": self.rate, "low": low,
                "high": high, "cost": self.cost, "check_cost": self.check_cost,
                "tokens": self.tokens, "cases": [c.to_json() for c in self.cases]}

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.to_json(), handle, ensure_ascii=False, indent=1)
            handle.write("\n")

    @classmethod
    def from_json(cls, data: Any) -> "EvalReport":
        """A report from :meth:`to_json`'s data; anything else is a ConfigError."""
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ConfigError(f"not an eval report of version {VERSION}")
        raw_cases = data.get("cases")
        if not isinstance(raw_cases, list):
            raise ConfigError("an eval report needs a list of cases")
        cases = [_case_from_json(c, i) for i, c in enumerate(raw_cases)]
        repeat = data.get("repeat", 1)
        meta = data.get("meta", {})
        return cls(tuple(cases), repeat if isinstance(repeat, int) else 1,
                   meta if isinstance(meta, dict) else {})

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "EvalReport":
        """A report saved with :meth:`save` (or written from :meth:`to_json`), e.g. the
        baseline of a comparison."""
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            data = bounded_json.loads(text, what="eval report", max_depth=bounded_json.DOCUMENT_DEPTH)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the eval report {os.fspath(path)}: {exc}") from None
        try:
            return cls.from_json(data)
        except ConfigError as exc:
            raise ConfigError(f"{os.fspath(path)}: {exc}") from None

    def html(self, baseline: Optional["EvalReport"] = None) -> str:
        """A self-contained page of the report (see :mod:`nacelle.evals.html`),
        marking regressions and improvements against ``baseline`` when given."""
        from .html import report_page

        return report_page(self, baseline)


def _count(raw: Mapping[str, Any], key: str, where: str) -> int:
    value: Any = raw.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: {key} must be a whole number of zero or more")
    return int(value)


def _amount(raw: Mapping[str, Any], key: str, where: str) -> float:
    value = raw.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ConfigError(f"{where}: {key} must be a number of zero or more")
    return float(value)


def _case_from_json(raw: Any, index: int) -> CaseReport:
    where = f"cases[{index}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfigError(f"{where}: a case report is an object with a name")
    runs, passes = _count(raw, "runs", where), _count(raw, "passes", where)
    if passes > runs:
        raise ConfigError(f"{where}: more passes than runs")
    failures = raw.get("failures", [])
    if not isinstance(failures, list) or not all(isinstance(f, dict) for f in failures):
        raise ConfigError(f"{where}: failures must be a list of objects")
    return CaseReport(raw["name"], runs, passes, _amount(raw, "cost", where),
                      _amount(raw, "check_cost", where), _count(raw, "tokens", where),
                      _amount(raw, "seconds", where), tuple(failures))


def assert_passes(report: EvalReport, min_rate: float = 1.0) -> None:
    """Fail a test (``AssertionError``) unless every case of ``report`` passed at
    least ``min_rate`` of its runs; the message lists each case short of it, with
    its failures' reasons, so a red test says what went wrong."""
    if not isinstance(report, EvalReport):
        raise ConfigError(f"assert_passes takes an EvalReport, got {type(report).__name__}")
    short = [c for c in report.cases if c.rate < min_rate or not c.runs]
    if not short:
        return
    lines = [f"{len(short)} of {len(report.cases)} cases passed less than {min_rate:.0%} "
             f"of their runs:"]
    for case in short:
        lines.append(f"- {case.name}: {case.passes}/{case.runs}")
        for failure in case.failures[:3]:
            reasons = failure.get("reasons") or ["(no reason)"]
            lines.append(f"    run {failure.get('attempt')}: {'; '.join(map(str, reasons))}")
    raise AssertionError("\n".join(lines))


def case_report(name: str, records: Sequence[Mapping[str, Any]]) -> CaseReport:
    """One case's report from its runs' records (the results file's lines)."""
    failures: List[Dict[str, Any]] = []
    cost = check_cost = seconds = 0.0
    tokens = passes = 0
    for line in records:
        cost += float(line.get("cost") or 0.0)
        check_cost += float(line.get("check_cost") or 0.0)
        seconds += float(line.get("seconds") or 0.0)
        usage = line.get("usage") or {}
        tokens += sum(int(usage.get(k) or 0) for k in (
            "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"))
        if line.get("passed"):
            passes += 1
            continue
        if line.get("error"):
            reasons = [f"the run failed: {line['error']}"]
        else:
            reasons = [f"{c['check']}: {c['reason']}" if c.get("reason") else str(c["check"])
                       for c in line.get("checks", []) if not c.get("passed")]
        text = line.get("text") or ""
        failures.append({"attempt": line.get("attempt", 0), "reasons": reasons,
                         "text": text if len(text) <= 500 else text[:497] + "..."})
    return CaseReport(name, len(records), passes, cost, check_cost, tokens, seconds,
                      tuple(failures))
