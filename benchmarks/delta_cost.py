"""Where a text delta's CPU goes, layer by layer, for the floor and for nacelle.

Run by hand::

    benchmarks/.env/bin/python benchmarks/delta_cost.py      # --wire anthropic,openrouter --runs 9

The same server and body as rows 1 and 2 (``server_proc.py`` in its own process,
20,000 text deltas in 64 KiB writes). Each reader below is a stage of a pipeline and
adds one layer to the stage before it, so the difference between two stages is
what that layer costs. Stages are run interleaved, ``--runs`` times each, timed by
this thread's CPU time; the figures are medians in µs per text delta [min–max].

The floor:

- ``http``: ``requests``, ``raw.read1`` until the end of the body, nothing else;
- ``+ lines``: split on ``b"\\n"``, keep the ``data:`` lines;
- ``+ json.loads``: parse each (the floor client of rows 1 and 2).

nacelle, from the bottom up:

- ``sse``: ``SSEDecoder.feed`` on the body already in memory, in the chunks the HTTP
  reads returned (no socket: the decoder alone);
- ``iter_sse``: the transport's ``events()`` (the HTTP read loop, its time limits and
  cancellation checks, the decoder);
- ``+ parse_json``: the bounded JSON reader on each event's data;
- ``+ accumulator``: the backend's accumulator fed each event (``feed``);
- ``backend.turn``: the whole turn (``_turn.stream_turn``: the above plus
  ``clean`` and the turn's generator);
- ``loop.run``: the Agent's loop around the turn;
- ``Agent.stream``: what rows 1 and 2 measure.

Benchmark-only: imports the standard library, ``requests``, nacelle and ``measure``.
"""

import argparse
import json
import os
import statistics
import sys
import time
from typing import Callable, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import requests  # noqa: E402

import nacelle  # noqa: E402
from nacelle.backend import Request  # noqa: E402
from nacelle.backends import anthropic, openrouter  # noqa: E402
from nacelle.context import RunContext  # noqa: E402
from nacelle.loop import run as loop_run  # noqa: E402
from nacelle.sse import SSEDecoder, parse_json  # noqa: E402

from measure import ServerProcess  # noqa: E402

DELTAS = 20_000
KEY = "bench-key-not-secret"
MODEL = "claude-opus-5"


def readers(wire: str, url: str) -> Dict[str, Callable[[], None]]:
    """The stages, in order, each a function reading one whole stream."""
    if wire == "anthropic":
        backend: object = anthropic.Backend(KEY, base_url=url, max_retries=0)
        path = "/v1/messages"

        def accumulator() -> object:
            return anthropic.Accumulator()
    else:
        backend = openrouter.Backend(KEY, model="anthropic/" + MODEL, base_url=url,
                                     max_retries=0)
        path = "/chat/completions"

        def accumulator() -> object:
            return openrouter.Accumulator()
    transport = backend._endpoint.transport  # type: ignore[attr-defined]
    agent = nacelle.Agent(backend, "bench", max_tokens=1024)  # type: ignore[arg-type]
    conversation = [nacelle.user_text("go")]
    request = agent.request(conversation)
    body = {"model": MODEL, "max_tokens": 1024, "messages": [{"role": "user", "content": "go"}],
            "stream": True}
    session = requests.Session()
    chunks: List[bytes] = []

    def post() -> requests.Response:
        return session.post(url + path, json=body, stream=True)

    def http() -> None:
        response = post()
        read1 = response.raw.read1
        del chunks[:]
        while True:
            data = read1(65536)
            if not data:
                break
            chunks.append(data)
        response.close()

    def lines() -> None:
        response = post()
        read1, rest = response.raw.read1, b""
        while True:
            data = read1(65536)
            if not data:
                break
            got = (rest + data).split(b"\n")
            rest = got.pop()
            for line in got:
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    pass
        response.close()

    def floor() -> None:
        response = post()
        read1, loads, rest = response.raw.read1, json.loads, b""
        while True:
            data = read1(65536)
            if not data:
                break
            got = (rest + data).split(b"\n")
            rest = got.pop()
            for line in got:
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    loads(line[6:])
        response.close()

    def sse() -> None:
        decoder = SSEDecoder()
        for chunk in chunks:
            decoder.feed(chunk)
        decoder.close()

    def events() -> None:
        ctx = RunContext()
        for _ in transport.events(transport.post_stream(path, body, ctx), ctx):
            pass

    def parsed() -> None:
        ctx = RunContext()
        for event in transport.events(transport.post_stream(path, body, ctx), ctx):
            if event.data != "[DONE]":
                parse_json(event.data)

    def accumulated() -> None:
        ctx = RunContext()
        state = accumulator()
        for event in transport.events(transport.post_stream(path, body, ctx), ctx):
            state.feed(event)  # type: ignore[attr-defined]
        state.finish()  # type: ignore[attr-defined]

    def turn() -> None:
        for _ in backend.turn(request, request.messages, RunContext()):  # type: ignore[attr-defined]
            pass

    def loop() -> None:
        for _ in loop_run(request, RunContext(), backend.turn):  # type: ignore[attr-defined]
            pass

    def stream() -> None:
        for _ in agent.stream(conversation):
            pass

    return {"floor: http": http, "floor: + lines": lines, "floor: + json.loads": floor,
            "nacelle: sse (in memory)": sse, "nacelle: iter_sse": events,
            "nacelle: + parse_json": parsed, "nacelle: + accumulator": accumulated,
            "nacelle: backend.turn": turn, "nacelle: loop.run": loop,
            "nacelle: Agent.stream": stream}


def measure(readers_of: Callable[[str, str], Dict[str, Callable[[], None]]], wire: str,
            server: ServerProcess, runs: int) -> Dict[str, List[float]]:
    """µs of CPU per delta for each stage ``readers_of(wire, url)`` returns, interleaved."""
    stages = readers_of(wire, server.url(wire, "text", DELTAS))
    for read in stages.values():  # warm: imports, the pool, caches (http fills the chunks)
        read()
    spent: Dict[str, List[float]] = {name: [] for name in stages}
    for _ in range(runs):
        for name, read in stages.items():
            started = time.thread_time()
            read()
            spent[name].append((time.thread_time() - started) / DELTAS * 1e6)
    return spent


def print_layers(wire: str, runs: int, spent: Dict[str, List[float]], aside: str,
                 width: int = 28) -> None:
    """Each stage's median and what it adds to the one before. The stage named ``aside``
    (a decoder fed from memory) stands apart; the first stage of each client adds
    nothing to anything before it."""
    print(f"\n{wire} wire, µs of CPU per text delta, median [min–max] of {runs}")
    print(f"{'stage':<{width}} {'µs':>6} {'range':>14} {'layer':>7}")
    previous = 0.0
    for name, samples in spent.items():
        median = statistics.median(samples)
        first = name in (aside, "floor: http", "nacelle: iter_sse")
        layer = "" if first else f"{median - previous:+.2f}"
        print(f"{name:<{width}} {median:>6.2f} [{min(samples):5.2f}–{max(samples):5.2f}] "
              f"{layer:>7}", flush=True)
        if name != aside:
            previous = median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wire", default="anthropic,openrouter")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with ServerProcess() as server:
        for wire in args.wire.split(","):
            spent = measure(readers, wire, server, args.runs)
            print_layers(wire, args.runs, spent, aside="nacelle: sse (in memory)")


if __name__ == "__main__":
    main()
