"""Row 6: tool concurrency — one model turn asks for eight tools that each sleep 0.2 s.

Both contenders talk to the same scripted server process (``server_proc.py``, kind
``tools``): the first request gets eight ``sleep_02`` calls, the request carrying
their results gets a short final answer. nacelle runs ``Agent.run`` on its
Anthropic backend; the peer is the anthropic SDK's tool runner
(``client.beta.messages.tool_runner``, ``thread=False`` so every request carries the
whole conversation, as nacelle's do).

The tool phase is timed the same way for both, from inside the tool: the first
call's start to the last call's end. The whole run's wall time (two HTTP turns
included) is shown beside it.

Rows 18 and 19 (``streams_rows``) and the module run as a script measure N
simultaneous streaming runs instead (see the section below), each client in a
process of its own.

Benchmark-only: imports the standard library, ``measure``, nacelle and the
anthropic SDK (when installed), in this process — only sleeping is timed here.
"""

import os
import sys
import threading
import time
from typing import Callable, List, Optional, Tuple

from measure import Row, ServerProcess, Stat, ratio_row

CALLS = 8
SLEEP = 0.2
KEY = "bench-key-not-secret"


class Span:
    """The first start and last end of the tool calls of one run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.starts: List[float] = []
        self.ends: List[float] = []

    def sleep(self) -> str:
        start = time.perf_counter()
        time.sleep(SLEEP)
        end = time.perf_counter()
        with self.lock:
            self.starts.append(start)
            self.ends.append(end)
        return "slept"

    def seconds(self) -> float:
        if len(self.ends) != CALLS:
            raise RuntimeError(f"{len(self.ends)} tool calls ran, expected {CALLS}")
        return max(self.ends) - min(self.starts)


def nacelle_run(url: str) -> Callable[[], Tuple[float, float]]:
    import nacelle
    from nacelle.backends import anthropic

    def run() -> Tuple[float, float]:
        span = Span()

        @nacelle.tool
        def sleep_02() -> str:
            """Sleep 0.2 s."""
            return span.sleep()

        # loop_guard=0: the turn calls sleep_02 eight times with the same (empty) input
        # on purpose, which the default guard refuses from the third call on.
        agent = nacelle.Agent(anthropic.Backend(KEY, base_url=url, max_retries=0), "bench",
                              max_tokens=1024, tools=[sleep_02], loop_guard=0)
        started = time.perf_counter()
        result = agent.run([nacelle.user_text("go")])
        wall = time.perf_counter() - started
        if result.turns != 2:
            raise RuntimeError(f"nacelle took {result.turns} turns, expected 2")
        return span.seconds(), wall

    return run


def sdk_run(url: str) -> Callable[[], Tuple[float, float]]:
    import anthropic
    from anthropic import beta_tool

    client = anthropic.Anthropic(api_key=KEY, base_url=url, max_retries=0)

    def run() -> Tuple[float, float]:
        span = Span()

        @beta_tool
        def sleep_02() -> str:
            """Sleep 0.2 s."""
            return span.sleep()

        started = time.perf_counter()
        runner = client.beta.messages.tool_runner(
            model="claude-opus-5", max_tokens=1024, tools=[sleep_02], thread=False,
            messages=[{"role": "user", "content": "go"}])
        runner.until_done()
        return span.seconds(), time.perf_counter() - started

    return run


def concurrency_rows(server: ServerProcess, runs: int) -> List[Row]:
    url = server.url("anthropic", "tools", CALLS)
    measured = {}
    figures = []
    for name, build in (("nacelle", nacelle_run), ("anthropic SDK tool runner", sdk_run)):
        try:
            run = build(url)
            run()  # warm-up
            samples = [run() for _ in range(runs)]
        except ImportError as exc:
            figures.append(f"{name}: not installed ({exc})")
            continue
        except Exception as exc:  # noqa: BLE001 - a contender that fails is reported
            figures.append(f"{name}: failed: {type(exc).__name__}: {exc}")
            continue
        tools = Stat.of([s[0] for s in samples])
        wall = Stat.of([s[1] for s in samples])
        measured[name] = tools
        figures.append(f"{name}: tool phase {tools.show(' s', 3)}, whole run {wall.show(' s', 3)}")
    ours: Optional[Stat] = measured.get("nacelle")
    theirs: Optional[Stat] = measured.get("anthropic SDK tool runner")
    return [
        ratio_row("6a", f"{CALLS} tools × {SLEEP:g} s: nacelle's tool phase ÷ {SLEEP:g} s",
                  ours.median / SLEEP if ours else None, "≤ 1.3×", 1.3, at_least=False,
                  figures=figures, label="tools: nacelle ÷ 0.2 s"),
        Row("6b", f"{CALLS} tools × {SLEEP:g} s: SDK tool runner ÷ nacelle, tool phase",
            theirs.median / ours.median if ours and theirs else None, "(none)", None, [],
            label="tools: SDK ÷ nacelle"),
    ]


# -- Simultaneous streaming runs (rows 18 and 19) -------------------------------------
#
#     benchmarks/.env/bin/python benchmarks/concurrency.py --n 100,500,1000 [--server timer]
#
# N runs start at once against a loopback server in its own process (``--serve``,
# asyncio) that streams each of them 100 text deltas 10 ms apart, in one of two ways:
# ``tick`` (one ticker writes the next delta to every open stream, so the server's
# cost stays flat in N and the deltas of all streams arrive together) or ``timer``
# (each stream has its own timer and gets a delta per wake-up: what many clients
# talking to many provider connections look like). Each contender runs in a fresh
# process, its imports done before its clock starts: the floor (threads +
# requests, ``raw.read1``, split on newlines, ``json.loads`` of every data line),
# nacelle (``batch.run_many`` on N threads), and, where installed, the anthropic
# SDK's AsyncAnthropic under asyncio and its sync client on N threads. Wall, client
# CPU, peak RSS, runs completed, and "open": the most streams the server had open at
# once (a client that starts its runs more slowly holds fewer at a time, and so less
# memory; RSS is comparable between rows whose "open" is). The median of
# ``--repeat`` (default 3) with its [min–max]. The ideal wall is 1 s (100 × 10 ms);
# on two cores no client holds 100,000 events a second, so every wall is longer, and
# the CPU an event costs depends on how many arrive per read.

DELTAS = int(os.environ.get("BENCH_DELTAS", "100"))
GAP = 0.01


def _serve(mode: str = "tick") -> None:
    import asyncio
    import json as _json

    from nacelle.testing.wire import anthropic_stream

    body = anthropic_stream([f" w{i}" for i in range(DELTAS)], pings=False)
    head_events = b"".join(body[:2])
    deltas = body[2:2 + DELTAS]
    tail = b"".join(body[2 + DELTAS:])
    streams: list = []
    peak = [0]  # the most streams open at once since the last GET /peak

    async def handle(reader: "asyncio.StreamReader", writer: "asyncio.StreamWriter") -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()  # a connection that left without a request
            return
        if head.startswith(b"GET /peak "):
            answer = str(peak[0]).encode()
            peak[0] = 0
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                         % (len(answer), answer))
            writer.close()
            return
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Connection: close\r\n\r\n" + head_events)
        stream = [writer, 0]
        streams.append(stream)
        peak[0] = max(peak[0], len(streams))
        if mode == "timer":
            await own_timer(stream)

    async def own_timer(stream: list) -> None:
        # This stream's own clock: a delta per wake-up, GAP after the last one.
        writer = stream[0]
        for delta in deltas:
            await asyncio.sleep(GAP)
            writer.write(delta)
        await asyncio.sleep(GAP)
        writer.write(tail)
        writer.close()
        streams.remove(stream)

    async def tick() -> None:
        while True:
            await asyncio.sleep(GAP)
            for stream in list(streams):
                writer, sent = stream
                if sent < DELTAS:
                    writer.write(deltas[sent])
                    stream[1] = sent + 1
                else:
                    writer.write(tail)
                    writer.close()
                    streams.remove(stream)

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
        print(server.sockets[0].getsockname()[1], flush=True)
        if mode == "tick":
            asyncio.ensure_future(tick())
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)  # until stdin closes
        server.close()

    del _json
    asyncio.run(main())


def _floor(url: str, n: int) -> int:
    import json as _json
    from concurrent.futures import ThreadPoolExecutor

    import requests

    def one() -> int:
        with requests.Session() as session:
            response = session.post(url + "/v1/messages", json={"stream": True}, stream=True)
            texts, rest = 0, b""
            read = getattr(response.raw, "read1", None) or response.raw.read
            while True:
                chunk = read(65536)
                if not chunk:
                    break
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    if line.startswith(b"data: "):
                        if _json.loads(line[6:]).get("type") == "content_block_delta":
                            texts += 1
            return 1 if texts == DELTAS else 0

    with ThreadPoolExecutor(n) as pool:
        return sum(pool.map(lambda _: one(), range(n)))


def _nacelle(url: str, n: int) -> int:
    import nacelle as _nacelle
    from nacelle import batch
    from nacelle.backends import anthropic

    agent = _nacelle.Agent(anthropic.Backend(KEY, base_url=url, max_retries=0), "bench",
                           max_tokens=1024)
    items = batch.run_many(agent, ["go"] * n, max_workers=n, progress=False)
    return sum(1 for i in items if i.ok and i.result.text.count(" w") == DELTAS)


def _sdk_async(url: str, n: int) -> int:
    import asyncio

    import anthropic
    import httpx

    async def main() -> int:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, max_retries=0,
                                          http_client=anthropic.DefaultAsyncHttpxClient(
                                              limits=limits))

        async def one() -> int:
            count = 0
            async with client.messages.stream(model="claude-opus-5", max_tokens=1024,
                                              messages=[{"role": "user", "content": "go"}]) as s:
                async for _ in s.text_stream:
                    count += 1
            return 1 if count == DELTAS else 0

        return sum(await asyncio.gather(*(one() for _ in range(n))))

    return asyncio.run(main())


def _sdk_threads(url: str, n: int) -> int:
    from concurrent.futures import ThreadPoolExecutor

    import anthropic
    import httpx

    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    client = anthropic.Anthropic(api_key=KEY, base_url=url, max_retries=0,
                                 http_client=anthropic.DefaultHttpxClient(limits=limits))

    def one(_: int) -> int:
        with client.messages.stream(model="claude-opus-5", max_tokens=1024,
                                    messages=[{"role": "user", "content": "go"}]) as s:
            return 1 if sum(1 for _ in s.text_stream) == DELTAS else 0

    with ThreadPoolExecutor(n) as pool:
        return sum(pool.map(one, range(n)))


CLIENTS = {"floor": _floor, "nacelle": _nacelle, "sdk-async": _sdk_async,
           "sdk-threads": _sdk_threads}


#: What each client imports, done before its clock starts.
IMPORTS = {"floor": ("requests",),
           "nacelle": ("requests", "nacelle", "nacelle.batch", "nacelle.backends.anthropic",
                       "nacelle.backends._http"),
           "sdk-async": ("anthropic", "httpx"), "sdk-threads": ("anthropic", "httpx")}


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass  # not Linux: ru_maxrss below is the fallback


def _peak_mb() -> float:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _client(kind: str, url: str, n: int) -> None:
    import importlib
    import json as _json

    # The peak is the kernel's high-water mark, reset first: getrusage's ru_maxrss
    # keeps the high-water mark of the process image before exec, so a client started
    # by a large parent (run.py after the request-build rows) reported the parent's peak.
    _reset_peak()
    try:
        run = CLIENTS[kind]
        for module in IMPORTS[kind]:  # imports are row 4's business, not this one's
            importlib.import_module(module)
        before = os.times()
        started = time.perf_counter()
        completed = run(url, n)
        wall = time.perf_counter() - started
        after = os.times()
    except ImportError as exc:
        print(_json.dumps({"missing": str(exc)}))
        return
    rss = _peak_mb()
    print(_json.dumps({"wall": wall, "cpu": (after.user - before.user) +
                       (after.system - before.system), "rss": rss, "completed": completed}))


def _peak_open(url: str) -> float:
    """The most streams the server held open at once since the last ask (and reset it)."""
    from urllib.request import urlopen

    with urlopen(url + "/peak", timeout=10) as answer:
        return float(answer.read())


STREAMS = 1000


def _one_client(kind: str, url: str, n: int, env: dict) -> dict:
    """One client process's figures (or ``{"missing"|"error": ...}``)."""
    import json as _json
    import subprocess

    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--client", kind, url,
                               str(n)], capture_output=True, text=True, env=env, timeout=300)
        lines = done.stdout.strip().splitlines()
        if not lines:
            said = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"exit {done.returncode}: {said}"[:160]}
        out: dict = _json.loads(lines[-1])
    except Exception as exc:  # noqa: BLE001 - a failed contender is reported
        return {"error": f"{type(exc).__name__}: {exc}"[:160]}
    if "wall" in out:
        out["open"] = _peak_open(url)
    return out


class _Server:
    """This module's ``--serve`` in a process of its own, for ``with``."""

    def __init__(self, mode: str) -> None:
        import subprocess

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.env = dict(os.environ, PYTHONPATH=root)
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve",
                                      "--server", mode], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=self.env)
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def __enter__(self) -> "_Server":
        return self

    def __exit__(self, *exc_info: object) -> None:
        import subprocess

        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def streams_rows(repeat: int) -> List[Row]:
    """Rows 18 (one tick) and 19 (a timer per stream): 1,000 simultaneous streaming
    runs, nacelle against the threaded floor (CPU, wall) and AsyncAnthropic (RSS,
    from at most two of its runs: it takes four times the floor's wall, and its
    memory holds still)."""
    rows: List[Row] = []
    for number, mode, name in (("18", "tick", "one tick"), ("19", "timer", "timer per stream")):
        samples: dict = {kind: [] for kind in ("floor", "nacelle", "sdk-async")}
        notes = []
        with _Server(mode) as server:
            for round_ in range(repeat):  # interleaved, so load from elsewhere falls on all
                for kind, got in samples.items():
                    if kind == "sdk-async" and round_ >= 2:
                        continue  # only its memory is compared, and that holds still
                    out = _one_client(kind, server.url, STREAMS, server.env)
                    if "wall" in out:
                        got.append(out)
                    else:
                        notes.append(f"{kind}: {out.get('missing') or out.get('error')}")
        stats = {kind: {key: Stat.of([s[key] for s in got])
                        for key in ("wall", "cpu", "rss", "open")}
                 for kind, got in samples.items() if got}
        figures = [f"server: {mode} ({'one ticker writes every stream its next delta' if mode == 'tick' else 'each stream its own timer, a delta per wake-up'}), {DELTAS} deltas {GAP * 1e3:g} ms apart per stream"]
        for kind, stat in stats.items():
            events = STREAMS * DELTAS
            figures.append(
                f"{kind}: CPU {stat['cpu'].show(' s', 2)} ({stat['cpu'].median / events * 1e6:.0f} µs "
                f"an event), wall {stat['wall'].show(' s', 2)}, peak RSS {stat['rss'].show(' MB', 0)}, "
                f"runs completed {min(s['completed'] for s in samples[kind])} of {STREAMS}, "
                f"most open at once {stat['open'].show('', 0)}")
        figures += sorted(set(notes))
        ours, floor, sdk = stats.get("nacelle"), stats.get("floor"), stats.get("sdk-async")
        both = ours is not None and floor is not None
        rows.append(ratio_row(
            f"{number}a", f"{STREAMS:,} streams, {name}: CPU, nacelle ÷ threaded floor",
            ours["cpu"].median / floor["cpu"].median if both else None,
            "≤ 1.2×", 1.2, at_least=False, figures=figures, label=f"{STREAMS:,} streams ({mode}): CPU ÷ floor"))
        rows.append(ratio_row(
            f"{number}b", f"{STREAMS:,} streams, {name}: wall, nacelle ÷ threaded floor",
            ours["wall"].median / floor["wall"].median if both else None,
            "≤ 1.1×", 1.1, at_least=False, figures=[], label=f"{STREAMS:,} streams ({mode}): wall ÷ floor"))
        rows.append(ratio_row(
            f"{number}c", f"{STREAMS:,} streams, {name}: peak RSS, nacelle ÷ AsyncAnthropic",
            ours["rss"].median / sdk["rss"].median if ours and sdk else None,
            "≤ 0.5×", 0.5, at_least=False, figures=[], label=f"{STREAMS:,} streams ({mode}): RSS ÷ AsyncAnthropic"))
        completed = min((s["completed"] for s in samples["nacelle"]), default=None)
        rows.append(Row(f"{number}d", f"{STREAMS:,} streams, {name}: runs nacelle completed "
                        "(fewest of the repeats)", completed, f"{STREAMS:,}",
                        None if completed is None else completed == STREAMS, []))
    return rows


def _main(argv: List[str]) -> None:
    import argparse
    import json as _json
    import subprocess

    parser = argparse.ArgumentParser(description="N simultaneous streaming runs")
    parser.add_argument("--n", default="100,500")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--server", choices=("tick", "timer"), default="tick",
                        help="tick: one ticker writes every stream's next delta; timer: "
                             "each stream has its own timer")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--client", nargs=3, metavar=("KIND", "URL", "N"))
    args = parser.parse_args(argv)
    if args.serve:
        return _serve(args.server)
    if args.client:
        return _client(args.client[0], args.client[1], int(args.client[2]))
    here = os.path.abspath(__file__)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(here)))
    server = subprocess.Popen([sys.executable, here, "--serve", "--server", args.server], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline())}"
        print(f"{'N':>5} {'client':<12} {'wall s':>18} {'CPU s':>18} {'peak RSS MB':>18} "
              f"{'done':>5} {'open':>18} {'CPU ÷ floor':>11}")
        for n in (int(x) for x in args.n.split(",")):
            floor_cpu = None
            for kind in args.clients.split(","):
                samples = []
                for _ in range(args.repeat):
                    try:
                        done = subprocess.run([sys.executable, here, "--client", kind, url,
                                               str(n)], capture_output=True, text=True,
                                              env=env, timeout=300)
                        out = _json.loads(done.stdout.strip().splitlines()[-1])
                    except Exception as exc:  # noqa: BLE001 - a failed contender is reported
                        out = {"error": f"{type(exc).__name__}: {exc}"[:120]}
                    if "wall" not in out:
                        break
                    out["open"] = _peak_open(url)
                    samples.append(out)
                if not samples:
                    print(f"{n:>5} {kind:<12} {out.get('missing') or out.get('error')}")
                    continue
                wall, cpu, rss, open_ = (Stat.of([s[k] for s in samples])
                                         for k in ("wall", "cpu", "rss", "open"))
                if kind == "floor":
                    floor_cpu = cpu.median
                ratio = f"{cpu.median / floor_cpu:.2f}×" if floor_cpu else "-"
                print(f"{n:>5} {kind:<12} {wall.show('', 2):>18} {cpu.show('', 2):>18} "
                      f"{rss.show('', 0):>18} {min(s['completed'] for s in samples):>5} "
                      f"{open_.show('', 0):>18} {ratio:>11}", flush=True)
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    _main(sys.argv[1:])
