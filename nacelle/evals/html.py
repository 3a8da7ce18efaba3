"""The eval report as one self-contained HTML page, in the run report's style.

It reuses :mod:`nacelle.report.page` — the stylesheet, the page shell (whose
Content-Security-Policy allows no network and no script) and its escaping — so an
eval page and a run page look alike. Everything shown is escaped: case names, the
answers and the reasons come from models and datasets, which are untrusted.

A row per case: the pass rate as a bar with its 95% interval drawn across it, the
runs, cost, tokens and time; against a baseline, the change is named ("regressed",
"improved") by the rule of :meth:`EvalReport.compare`. Failed runs are listed
under the table, each in a ``<details>`` with its reasons and the start of its
answer.

Imports the standard library and ``report.page``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from ..report.page import e, page

if TYPE_CHECKING:
    from .report import CaseReport, EvalReport

__all__ = ["report_page"]

_STYLE = """<style>
.rate{position:relative;width:160px;height:16px;background:var(--soft);border:1px solid var(--line);
border-radius:3px;display:inline-block;vertical-align:middle}
.rate .fill{position:absolute;left:0;top:0;bottom:0;background:var(--tool);border-radius:2px}
.rate .ci{position:absolute;top:6px;height:2px;background:var(--fg)}
tr.regressed td{background:#fbe9e7}tr.improved td{background:#e8f5ee}
.change{font-size:12px;font-weight:600}
</style>"""


def _bar(case: "CaseReport") -> str:
    low, high = case.interval
    return (f'<span class="rate" title="{e(f"{case.rate:.0%} (95% CI {low:.0%}-{high:.0%})")}">'
            f'<span class="fill" style="width:{case.rate * 100:.1f}%"></span>'
            f'<span class="ci" style="left:{low * 100:.1f}%;width:{(high - low) * 100:.1f}%">'
            f"</span></span>")


def report_page(report: "EvalReport", baseline: Optional["EvalReport"] = None) -> str:
    low, high = report.interval
    comparison = report.compare(baseline) if baseline is not None else None
    body: List[str] = [_STYLE, "<h1>Eval report</h1>",
                       f'<p class="meta"><b>{report.passes}/{report.runs}</b> runs passed '
                       f"({report.rate:.0%}, 95% CI {low:.0%}-{high:.0%}) over "
                       f"<b>{len(report.cases)}</b> cases, repeat {report.repeat}; "
                       f"${report.cost:.4f} ({report.tokens:,} tokens)"
                       + (f", checks ${report.check_cost:.4f}" if report.check_cost else "")
                       + "</p>"]
    if comparison is not None:
        css = "bad" if comparison.regressions else ""
        body.append(f'<p class="meta {css}">Against the baseline: {e(str(comparison))}</p>')
    body.append('<div class="scroll"><table><thead><tr><th>case</th><th class="l">pass rate</th>'
                "<th>passed</th><th>95% CI</th><th>cost</th><th>tokens</th><th>seconds</th>"
                "</tr></thead><tbody>")
    for case in report.cases:
        change = ""
        if comparison is not None:
            if case.name in comparison.regressions:
                change = "regressed"
            elif case.name in comparison.improvements:
                change = "improved"
        c_low, c_high = case.interval
        label = f' <span class="change">{change}</span>' if change else ""
        body.append(f'<tr class="{change}"><td class="l">{e(case.name)}{label}</td>'
                    f'<td class="l">{_bar(case)} {case.rate:.0%}</td>'
                    f"<td>{case.passes}/{case.runs}</td><td>{c_low:.0%}-{c_high:.0%}</td>"
                    f"<td>${case.cost:.4f}</td><td>{case.tokens:,}</td>"
                    f"<td>{case.seconds:.2f}</td></tr>")
    body.append("</tbody></table></div>")
    failed = [c for c in report.cases if c.failures]
    if failed:
        body.append("<h2>Failures</h2>")
    for case in failed:
        for failure in case.failures:
            reasons = "".join(f"<li>{e(r)}</li>" for r in failure.get("reasons") or [])
            text = failure.get("text") or ""
            answer = f'<pre>{e(text)}</pre>' if text else ""
            body.append(f'<details class="failure"><summary>{e(case.name)} '
                        f'<span class="tag">run {e(failure.get("attempt", 0))}</span>'
                        f"</summary><ul>{reasons}</ul>{answer}</details>")
    return page("Eval report", "".join(body))
