"""Row 4: import cost, each statement in a fresh interpreter.

The statements (``import nacelle``, ``from nacelle import Agent`` (a figure only),
``from nacelle.backends import anthropic``, the
same for ``chat``, ``openrouter``, ``openai`` (Responses), ``gemini`` and
``anthropic.clouds`` (Bedrock and Vertex), ``import requests``, ``import anthropic``,
``import openai``) and a bare start
(``pass``) each run in a new ``python -E -s -c``; the rounds are interleaved, so a
burst of load from elsewhere on the machine lands on every statement alike rather
than on one. Figures are what a statement *adds* to the bare start — the
interpreter's own start is most of a small import's total, and importing
``dataclasses`` and ``logging`` alone costs 2–3× the bare start, so totals would
hide the differences that matter.

Two measures: wall time of the whole process (median of 7 rounds, 11 in a full run,
minus the bare start's median), and ``-X importtime``'s cumulative microseconds of
the modules the statement loads beyond those of a bare start (median of 3 rounds, 7
in a full run: the SDKs take seconds to import, and ``--quick`` must stay quick). The
third-party check lists every module ``import nacelle`` leaves in ``sys.modules``
that is neither the standard library's nor nacelle's own.

Benchmark-only: imports the standard library and ``measure``.
"""

import subprocess
import sys
import time
from typing import Dict, List, Optional, Set, Tuple

from measure import ROOT, Row, Stat, ratio_row

STATEMENTS = {
    "bare start": "pass",
    "import requests": "import requests",
    "import nacelle": "import nacelle",
    # A figure, not a row: what a program that names only the Agent pays (the package
    # loads its core either way; features are imported at their first use).
    "from nacelle import Agent": "from nacelle import Agent",
    "nacelle + backend": "from nacelle.backends import anthropic",
    "nacelle + chat backend": "import nacelle.backends.chat",
    "nacelle + openrouter backend": "import nacelle.backends.openrouter",
    "nacelle + responses backend": "import nacelle.backends.openai",
    "nacelle + gemini backend": "import nacelle.backends.gemini",
    "nacelle + bedrock/vertex backends": "import nacelle.backends.anthropic.clouds",
    "import anthropic": "import anthropic",
    "import openai": "import openai",
}

THIRD_PARTY = """
import sys
stdlib = set(getattr(sys, "stdlib_module_names", ()))
before = set(sys.modules)
import nacelle
loaded = sorted({m.split(".")[0] for m in set(sys.modules) - before})
print(",".join(m for m in loaded if m != "nacelle" and m not in stdlib and not m.startswith("_")))
"""


def _python(code: str, *flags: str) -> Tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-E", "-s", *flags, "-c", code], cwd=ROOT,
                          capture_output=True, text=True)
    return time.perf_counter() - started, done


def _importtime(stderr: str) -> Dict[str, int]:
    """Top-level modules and their cumulative µs from ``-X importtime`` output."""
    out = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and not name.startswith("  "):
            out[name.strip()] = int(cumulative)
    return out


def measure(rounds: int, timed_rounds: int) -> Tuple[Dict[str, Stat], Dict[str, Stat], Dict[str, str]]:
    walls: Dict[str, List[float]] = {name: [] for name in STATEMENTS}
    cumulative: Dict[str, List[Dict[str, int]]] = {name: [] for name in STATEMENTS}
    failed: Dict[str, str] = {}
    startup: Optional[Set[str]] = None
    for number in range(rounds):
        for name, code in STATEMENTS.items():
            if name in failed:
                continue
            wall, done = _python(code)
            if done.returncode != 0:
                failed[name] = (done.stderr.strip().splitlines() or ["failed"])[-1]
                continue
            walls[name].append(wall)
            if number >= timed_rounds:
                continue
            _, timed = _python(code, "-X", "importtime")
            modules = _importtime(timed.stderr)
            if name == "bare start":
                startup = set(modules) if startup is None else startup & set(modules)
            cumulative[name].append(modules)
    added_us: Dict[str, Stat] = {}
    for name, samples in cumulative.items():
        if samples:
            added_us[name] = Stat.of([sum(us for module, us in modules.items()
                                          if module not in (startup or ()))
                                      for modules in samples])
    wall_stats = {name: Stat.of(samples) for name, samples in walls.items() if samples}
    return wall_stats, added_us, failed


def import_rows(quick: bool) -> List[Row]:
    rounds, timed_rounds = (7, 3) if quick else (11, 7)
    walls, added_us, failed = measure(rounds, timed_rounds)
    bare = walls["bare start"].median
    added = {name: (stat.median - bare) * 1e3 for name, stat in walls.items()}
    figures = [f"bare interpreter start: {walls['bare start'].scaled(1e3).show(' ms')} "
               f"(median of {rounds}, fresh process each)"]
    for name in STATEMENTS:
        if name == "bare start":
            continue
        if name in failed:
            figures.append(f"{name}: {failed[name]}")
            continue
        figures.append(f"{name}: adds {added[name]:.1f} ms wall "
                       f"(total {walls[name].scaled(1e3).show(' ms')}); -X importtime "
                       f"{added_us[name].median / 1e3:.1f} ms")
    _, done = _python(THIRD_PARTY)
    third = done.stdout.strip() if done.returncode == 0 else f"check failed: {done.stderr[-200:]}"
    figures.append(f"third-party modules loaded by import nacelle: {third or 'none'}")

    def ratio(top: str, bottom: str) -> Optional[float]:
        if top in failed or bottom in failed or added.get(bottom, 0) <= 0:
            return None
        return added[top] / added[bottom]

    rows = [
        ratio_row("4a", "import nacelle ÷ import requests (added wall)",
                  ratio("import nacelle", "import requests"), "≤ 0.5×", 0.5,
                  at_least=False, figures=figures, label="import nacelle ÷ requests"),
        # A backend imports requests at its first request (backends/_turn.py), so
        # importing one costs nacelle's own modules only.
        ratio_row("4b", "nacelle + anthropic backend ÷ import requests (added wall)",
                  ratio("nacelle + backend", "import requests"), "≤ 0.6×", 0.6,
                  at_least=False, figures=[], label="nacelle+anthropic ÷ requests"),
        ratio_row("4f", "nacelle + chat backend ÷ import requests (added wall)",
                  ratio("nacelle + chat backend", "import requests"), "≤ 0.6×", 0.6,
                  at_least=False, figures=[], label="nacelle+chat ÷ requests"),
        ratio_row("4g", "nacelle + openrouter backend ÷ import requests (added wall)",
                  ratio("nacelle + openrouter backend", "import requests"), "≤ 0.6×", 0.6,
                  at_least=False, figures=[], label="nacelle+openrouter ÷ requests"),
        ratio_row("4h", "nacelle + responses backend ÷ import requests (added wall)",
                  ratio("nacelle + responses backend", "import requests"), "≤ 0.6×", 0.6,
                  at_least=False, figures=[], label="nacelle+responses ÷ requests"),
        ratio_row("4i", "nacelle + gemini backend ÷ import requests (added wall)",
                  ratio("nacelle + gemini backend", "import requests"), "≤ 0.6×", 0.6,
                  at_least=False, figures=[], label="nacelle+gemini ÷ requests"),
        ratio_row("4j", "nacelle + bedrock/vertex ÷ import requests (added wall)",
                  ratio("nacelle + bedrock/vertex backends", "import requests"), "≤ 0.6×",
                  0.6, at_least=False, figures=[], label="nacelle+clouds ÷ requests"),
        Row("4c", "third-party modules loaded by import nacelle",
            None if third.startswith("check failed") else float(len(third.split(",")) if third else 0),
            "0", None if third.startswith("check failed") else not third, []),
    ]
    for peer in ("import anthropic", "import openai"):
        rows.append(Row("4" + "de"[peer == "import openai"],
                        f"{peer} ÷ nacelle + anthropic backend (added wall)",
                        ratio(peer, "nacelle + backend"), "(none)", None, [],
                        label=f"{peer} ÷ nacelle+backend"))
    return rows
