"""Batch throughput: 1,000 short runs through ``nacelle.batch.run_many`` on 1, 2 and 4
workers of threads, processes and Dask.

Each run is one scripted model turn that waits ``--latency`` seconds (default 10 ms,
on the run's context, as a short model call would) and answers "ok": what is
measured is what a batch costs around the runs — submitting, pickling the Agent and
the conversation, bringing the item back, the results bookkeeping — and how it
scales with workers. Runs/s is the median of ``--repeat`` batches; the ratios are
against 1 worker of the same executor and against threads at the same count, all
measured in this run. A Dask ``LocalCluster(processes=True, threads_per_worker=1)``
is started once per worker count, outside the timing.

    python benchmarks/batch_throughput.py                 # about a minute on 2 cores
    python benchmarks/batch_throughput.py --runs 200 --repeat 1

Benchmark-only: imports the standard library, nacelle and (when installed) Dask's
``distributed``. No network.
"""

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import nacelle  # noqa: E402
from nacelle import batch  # noqa: E402
from nacelle.testing import ScriptedBackend, Turn  # noqa: E402

WORKERS = (1, 2, 4)


def agent(turns, latency):
    return nacelle.Agent(ScriptedBackend([Turn(nacelle.assistant_text("ok"), delay=latency)]
                                         * turns), "You answer.")


def one_batch(runs, latency, workers, executor):
    # Threads share one Agent, so its script holds every run's turn; a worker process
    # gets its own unpickled copy per run, so one turn is enough there (and the pickle
    # stays the size of a real Agent's).
    shared = executor is None
    bot = agent(runs if shared else 1, latency)
    started = time.perf_counter()
    items = list(batch.run_many(bot, ["go"] * runs, executor=executor, max_workers=workers,
                                progress=False))
    seconds = time.perf_counter() - started
    failed = [i for i in items if not i.ok]
    if len(items) != runs or failed:
        raise RuntimeError(f"{len(items)} items, {len(failed)} failed: {failed[:1]}")
    return runs / seconds


def measure(kind, workers, args):
    if kind == "threads":
        return [one_batch(args.runs, args.latency, workers, None) for _ in range(args.repeat)]
    if kind == "processes":
        with ProcessPoolExecutor(workers) as pool:
            one_batch(min(args.runs, 50), args.latency, workers, pool)  # start the workers
            return [one_batch(args.runs, args.latency, workers, pool)
                    for _ in range(args.repeat)]
    import distributed

    with distributed.LocalCluster(processes=True, n_workers=workers, threads_per_worker=1,
                                  dashboard_address=None, silence_logs=40) as cluster, \
            distributed.Client(cluster) as client:
        pool = client.get_executor()
        one_batch(min(args.runs, 50), args.latency, workers, pool)
        return [one_batch(args.runs, args.latency, workers, pool) for _ in range(args.repeat)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.01)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    kinds = ["threads", "processes"]
    try:
        import distributed  # noqa: F401
        kinds.append("dask")
    except ImportError:
        print("dask: distributed is not installed; skipped")
    rates = {}
    for kind in kinds:
        for workers in WORKERS:
            samples = measure(kind, workers, args)
            rates[kind, workers] = (statistics.median(samples), min(samples), max(samples))
    print(f"\n{args.runs} runs of one {args.latency * 1000:g} ms scripted turn each; "
          f"median of {args.repeat} [min–max] on {os.cpu_count()} CPUs")
    print(f"{'executor':<10} {'workers':>7} {'runs/s':>22} {'× 1 worker':>11} "
          f"{'× threads':>10} {'ideal':>7}")
    for kind, workers in rates:
        median, low, high = rates[kind, workers]
        base = rates[kind, 1][0]
        threads = rates["threads", workers][0]
        ideal = workers / args.latency
        print(f"{kind:<10} {workers:>7} {median:>9,.0f} [{low:,.0f}–{high:,.0f}]"
              f"{median / base:>10.2f}× {median / threads:>9.2f}× {ideal:>7,.0f}")


if __name__ == "__main__":
    main()
