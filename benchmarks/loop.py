"""Loop overhead, measured: events per second through Agent.stream, the wall time of
eight 0.2 s tools run in parallel, and how a turn's cost grows with the conversation.

Run from the repository root:  python3 benchmarks/loop.py
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nacelle  # noqa: E402
import nacelle.validation  # noqa: E402
from nacelle import Agent, Message, Role, Text, ToolCall, user_text  # noqa: E402
from nacelle.testing import ScriptedBackend  # noqa: E402


@nacelle.tool
def noop() -> str:
    """Do nothing."""
    return ""


@nacelle.tool
def sleep_02() -> str:
    """Sleep 0.2 s."""
    time.sleep(0.2)
    return "ok"


def assistant(*parts):
    return Message(Role.ASSISTANT, parts)


def events_per_second(deltas=20_000):
    turn = assistant(*(Text("x") for _ in range(deltas)))
    agent = Agent(ScriptedBackend([turn]), "bench")
    started = time.perf_counter()
    count = sum(1 for _ in agent.stream([user_text("go")]))
    return count / (time.perf_counter() - started)


def tool_rounds_per_second(rounds=300, calls=4):
    script = [assistant(*(ToolCall(f"c{r}_{i}", "noop", "{}") for i in range(calls))) for r in range(rounds)]
    agent = Agent(ScriptedBackend(script + [assistant(Text("done"))]), "bench", tools=[noop])
    started = time.perf_counter()
    count = sum(1 for _ in agent.stream([user_text("go")]))
    return count / (time.perf_counter() - started), rounds / (time.perf_counter() - started)


def parallel_tools(repeats=3):
    best = None
    for _ in range(repeats):
        turn = assistant(*(ToolCall(f"c{i}", "sleep_02", "{}") for i in range(8)))
        agent = Agent(ScriptedBackend([turn, assistant(Text("done"))]), "bench", tools=[sleep_02])
        started = time.perf_counter()
        for _ in agent.stream([user_text("go")]):
            pass
        took = time.perf_counter() - started
        best = took if best is None else min(best, took)
    return best


def turn_cost(size, turns=20):
    history = []
    for i in range(size // 2):
        history += [user_text(f"q{i}"), assistant(Text(f"a{i}"))]
    history.append(user_text("now"))
    script = [assistant(ToolCall(f"c{t}", "noop", "{}")) for t in range(turns - 1)] + [assistant(Text("done"))]
    agent = Agent(ScriptedBackend(script), "bench", tools=[noop])
    started = time.perf_counter()
    for _ in agent.stream(history):
        pass
    return (time.perf_counter() - started) / turns


def main():
    nacelle.validation.compile_schema(noop.schema)({})  # import jsonschema outside the timings
    print(f"python {sys.version.split()[0]}")
    print(f"text deltas through Agent.stream: {events_per_second():,.0f} events/s")
    events, rounds = tool_rounds_per_second()
    print(f"tool rounds (4 no-op calls each): {rounds:,.0f} rounds/s, {events:,.0f} events/s")
    print(f"8 x 0.2 s tools in parallel: {parallel_tools():.3f} s wall (target <= 0.26 s)")
    print("per-turn cost by conversation length:")
    for size in (10, 100, 1_000, 10_000):
        print(f"  {size:>6} messages: {turn_cost(size) * 1e3:8.3f} ms/turn")


if __name__ == "__main__":
    main()
