"""Where one stream's CPU goes when its deltas arrive apart: the cost of a wake-up.

Run by hand::

    benchmarks/.env/bin/python benchmarks/wakeups.py            # --runs 15 --gaps 0,2,10

One stream of 100 text deltas from FakeServer (in this process, on loopback), sent
either all at once (gap 0: the client reads them in a read or two) or one per
``send`` with a pause between (gap 2 ms and 10 ms: a read per delta, and the reading
thread asleep in between). Three readers, each timed by its own thread's CPU time
(``time.thread_time``) over ``--runs`` runs:

- floor: requests, ``raw.read1``, split on newlines, ``json.loads`` of each data line;
- nacelle's transport: ``iter_sse`` alone (timeouts, the watchdog's cutoff, the SSE
  decoder), what a backend reads the stream through;
- nacelle: a whole ``Agent.run`` on the Anthropic backend (the accumulator, the
  loop, the Agent's generator layers above the transport).

The same bytes and the same parsing cost a few µs an event more than the floor when
they arrive together, and several times that when each wakes the reader, as fits a
thread woken after a sleep running on cold caches: the cost per event then follows
how much code and data an event touches more than how many instructions it runs. The per-event figures
printed are (reader − floor) ÷ 100. Medians of ``--repeat`` rounds, [min–max].
"""

import argparse
import json
import os
import sys
import time
from typing import Callable, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import requests  # noqa: E402

import nacelle  # noqa: E402
from nacelle.backends import anthropic  # noqa: E402
from nacelle.context import RunContext  # noqa: E402
from nacelle.testing import FakeServer, Reply  # noqa: E402
from nacelle.testing.wire import anthropic_stream  # noqa: E402

from measure import Stat  # noqa: E402

DELTAS = 100
PATH = "/v1/messages"


def floor(url: str) -> None:
    with requests.Session() as session:
        response = session.post(url + PATH, json={"stream": True}, stream=True)
        rest = b""
        read = response.raw.read1
        while True:
            chunk = read(65536)
            if not chunk:
                break
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                if line.startswith(b"data: "):
                    json.loads(line[6:])


def readers(url: str) -> Dict[str, Callable[[], None]]:
    backend = anthropic.Backend("bench-key-not-secret", base_url=url, max_retries=0)
    agent = nacelle.Agent(backend, "bench", max_tokens=1024)
    transport = backend._endpoint.transport

    def transport_only() -> None:
        ctx = RunContext()
        for _ in transport.events(transport.post_stream(PATH, {"stream": True}, ctx), ctx):
            pass

    return {"floor": lambda: floor(url), "nacelle transport": transport_only,
            "nacelle Agent.run": lambda: agent.run([nacelle.user_text("go")]) and None}


def one_round(gap: float, runs: int) -> Dict[str, float]:
    body = anthropic_stream([f" w{i}" for i in range(DELTAS)], pings=False)
    chunks = [(chunk, gap) for chunk in body] if gap else [b"".join(body)]
    spent: Dict[str, float] = {}
    with FakeServer() as server:
        for name, read in readers(server.url).items():
            server.queue(PATH, *[Reply(chunks=chunks) for _ in range(runs + 1)])
            read()  # warm: imports, the connection pool
            started = time.thread_time()
            for _ in range(runs):
                read()
            spent[name] = (time.thread_time() - started) / runs * 1e3
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gaps", default="0,2,10", help="ms between deltas")
    args = parser.parse_args()
    print(f"{'gap':>6} {'reader':<18} {'CPU ms/run':>20} {'extra µs/event':>16}")
    for gap in (float(g) / 1e3 for g in args.gaps.split(",")):
        rounds: List[Dict[str, float]] = [one_round(gap, args.runs) for _ in range(args.repeat)]
        for name in rounds[0]:
            cpu = Stat.of([r[name] for r in rounds])
            extra = Stat.of([(r[name] - r["floor"]) / DELTAS * 1e3 for r in rounds])
            shown = "" if name == "floor" else extra.show("", 1)
            print(f"{gap * 1e3:>4.0f}ms {name:<18} {cpu.show('', 2):>20} {shown:>16}", flush=True)


if __name__ == "__main__":
    main()
