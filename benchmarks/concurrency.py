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

Benchmark-only: imports the standard library, ``measure``, nacelle and the
anthropic SDK (when installed), in this process — only sleeping is timed here.
"""

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

        agent = nacelle.Agent(anthropic.Backend(KEY, base_url=url, max_retries=0), "bench",
                              max_tokens=1024, tools=[sleep_02])
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
