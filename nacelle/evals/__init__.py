"""Evals: know whether a change made the agent better.

Write cases (a prompt or a conversation, an expected answer, checks), run them with
:func:`evaluate` — every case ``repeat`` times, as a batch on any executor,
resumable through a results file — and read the :class:`EvalReport`: per case the
pass rate with its 95% Wilson interval, cost, tokens, time and the failures with
their reasons; ``compare`` it with a baseline to name what regressed beyond noise;
save it as JSON, show it as a page. ``nacelle eval`` does the same from the command
line and exits non-zero for CI; :func:`assert_passes` does it inside a test suite
(with a ``nacelle.testing.Cassette``, offline and deterministic).

- ``cases``: :class:`Case`, :class:`Dataset` (JSON Lines);
- ``checks``: ``equals``, ``contains``, ``matches``, ``called``, ``not_called``,
  ``judge``, ``max_cost``, ``max_turns``, and any callable;
- ``run``: :func:`evaluate`;
- ``report``: :class:`EvalReport`, :class:`CaseReport`, :class:`Comparison`,
  :func:`wilson`, :func:`assert_passes`; ``html``: the page.

Modelled on what pydantic-evals, inspect_ai and google-adk's evaluation offer (a
dataset of cases, per-case evaluators, a report to diff), kept to nacelle's parts.

Imports its own modules, which import the standard library, ``batch``, ``report.page``
and nacelle's core (``jsonschema`` only when a ``matches`` check is made).
"""

from .cases import Case, Dataset
from .checks import (Check, Outcome, Verdict, called, contains, equals, judge, matches,
                     max_cost, max_turns, not_called)
from .report import CaseReport, Comparison, EvalReport, assert_passes, wilson
from .run import evaluate

__all__ = ["Case", "CaseReport", "Check", "Comparison", "Dataset", "EvalReport", "Outcome",
           "Verdict", "assert_passes", "called", "contains", "equals", "evaluate", "judge",
           "matches", "max_cost", "max_turns", "not_called", "wilson"]
