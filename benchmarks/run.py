"""Run every benchmark and print one table of ratios, with the figures behind them.

    python3 -m venv benchmarks/.env
    benchmarks/.env/bin/pip install -r benchmarks/requirements.txt
    benchmarks/.env/bin/pip install -e . --config-settings editable_mode=compat
    benchmarks/.env/bin/python benchmarks/run.py [--quick] [--plot FILE.png] [--only 1,2,4]

A claim of speed counts only as a ratio against peers measured in the same run on
the same machine, so every row is a ratio of two medians taken here, now; the
absolute figures (median [min–max]) follow the table. See benchmarks/README.md for
what each row measures and how to read the noise.

The table is printed as a reStructuredText simple table, so it can be pasted into
the README as it is. Progress goes to stderr, the results to stdout.

Benchmark-only: imports the standard library and the row modules beside it
(matplotlib for ``--plot``). The editable install uses ``editable_mode=compat``
(a plain path in a ``.pth`` file) because setuptools' default import hook is itself
imported at every interpreter start, which would distort the import-cost row.
"""

import argparse
import datetime
import os
import platform
import sys
import time
from typing import Callable, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from measure import Row, ServerProcess  # noqa: E402


def machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{os.cpu_count()} CPUs ({model}), {platform.system()} {platform.release()}, "
            f"{platform.python_implementation()} {platform.python_version()}")


def peers() -> str:
    """Installed peer versions, read from package metadata: importing litellm would
    reach for the network."""
    from importlib import metadata
    found = []
    for name in ("anthropic", "openai", "litellm", "requests"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def table(rows: List[Row]) -> str:
    head = ("Row", "Measure", "Ratio", "Target", "Result")
    cells = [(r.number, r.title, "—" if r.ratio is None else f"{r.ratio:.2f}×" if r.label
              else f"{r.ratio:g}", r.target, r.verdict) for r in rows]
    widths = [max(len(str(c[i])) for c in cells + [head]) for i in range(len(head))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(), rule]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(cell, widths)).rstrip() for cell in cells]
    lines.append(rule)
    return "\n".join(lines)


def figures(rows: List[Row]) -> str:
    out = []
    for row in rows:
        for line in row.figures:
            out.append(f"- [{row.number}] {line}")
    return "\n".join(out)


def plot(rows: List[Row], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.ratio is not None and r.label]
    colours = {"met": "#2a9d3f", "MISSED": "#d1432f", "n/a": "#7a8795"}
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(shown) + 1.4))
    ax.barh([f"{r.number}  {r.label}" for r in shown], [r.ratio for r in shown],
            color=[colours[r.verdict] for r in shown])
    for index, row in enumerate(shown):
        ax.text(row.ratio, index, f" {row.ratio:.2f}×", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("ratio (log scale); green: target met, red: missed, grey: no target")
    ax.set_title("nacelle vs peers, same run, same machine", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer runs and a 10 MB memory row (finishes in a few minutes)")
    parser.add_argument("--plot", metavar="FILE.png", help="also draw the ratios as a bar chart")
    parser.add_argument("--only", default="", help="comma-separated row numbers, e.g. 1,2,4")
    args = parser.parse_args()
    only = {part.strip() for part in args.only.split(",") if part.strip()}
    runs = 5 if args.quick else 9

    import concurrency
    import footprint
    import imports
    import request_build
    import scaling
    import streaming
    import tool_input
    import tool_search

    started = time.perf_counter()
    rows: List[Row] = []

    def step(numbers: str, title: str, measure: Callable[[], List[Row]]) -> None:
        if only and not only & set(numbers.split(",")):
            return
        began = time.perf_counter()
        print(f"[{time.perf_counter() - started:6.1f} s] rows {numbers}: {title} ...",
              file=sys.stderr, flush=True)
        rows.extend(measure())
        print(f"          done in {time.perf_counter() - began:.1f} s", file=sys.stderr,
              flush=True)

    with ServerProcess() as server:
        step("1,2", "streaming end to end", lambda: streaming.throughput_rows(server, runs))
        step("3", "time to first event", lambda: streaming.ttfe_rows(server, runs))
        step("6", "tool concurrency", lambda: concurrency.concurrency_rows(server, runs))
        step("8", "memory", lambda: streaming.memory_rows(server, args.quick, 5))
        step("10", "chat wire streaming", lambda: streaming.chat_rows(server, runs))
        step("15,16,17", "Responses, Gemini and Bedrock wire streaming",
             lambda: streaming.wire_rows(server, runs))
        step("12", "TOOL_INPUT's cost", lambda: tool_input.overhead_rows(server, runs))
    step("18,19", "1,000 simultaneous streams (one tick; a timer per stream)",
         lambda: concurrency.streams_rows(2 if args.quick else 3))
    step("11", "eager tool start", lambda: tool_input.eager_rows(runs))
    step("13", "PartialJSON stays linear", lambda: tool_input.partial_rows(runs))
    step("14", "tool search", tool_search.tool_search_rows)
    step("7", "per-turn scaling", lambda: scaling.scaling_rows(args.quick, runs))
    step("9", "per-turn request build", lambda: request_build.request_build_rows(runs))
    step("4", "import cost", lambda: imports.import_rows(args.quick))
    step("5", "installed footprint", footprint.footprint_rows)
    rows.sort(key=lambda r: (int(r.number.rstrip("abcdefghijklmnopqrstuvwxyz")), r.number))

    command = "python benchmarks/run.py" + (" --quick" if args.quick else "")
    print(f"nacelle benchmarks, {datetime.date.today().isoformat()}")
    print(f"machine: {machine()}")
    print(f"peers: {peers()}")
    print(f"command: {command}  ({time.perf_counter() - started:.0f} s)")
    print()
    print(table(rows))
    print()
    print("Figures behind the ratios (median [min–max]):")
    print()
    print(figures(rows))
    missed = [r for r in rows if r.met is False]
    print()
    print("Targets missed: " + (", ".join(f"{r.number} ({r.title})" for r in missed)
                                if missed else "none"))
    if args.plot:
        plot(rows, args.plot)
        print(f"bar chart written to {args.plot}", file=sys.stderr)


if __name__ == "__main__":
    main()
