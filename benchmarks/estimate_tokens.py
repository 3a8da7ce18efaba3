"""How long ``nacelle.estimate_tokens`` takes on a long conversation.

Run by hand (not part of the test suite)::

    python3 benchmarks/estimate_tokens.py            # --messages 10000 --runs 9

A conversation of ``--messages`` messages shaped like an agent run — a user task, then
assistant turns with text, signed reasoning and two tool calls, and user messages with
their results (a few hundred characters each, some non-ASCII) — estimated ``--runs``
times; the median and [min–max] in milliseconds, and the characters per second. The
target is under 50 ms for 10,000 messages.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from nacelle import estimate_tokens  # noqa: E402
from nacelle.messages import Message, Reasoning, Role, Text, ToolCall, ToolResult  # noqa: E402


def conversation(count):
    messages = [Message(Role.USER, (Text("Fix the failing test in tests/test_app.py."),))]
    n = 0
    while len(messages) < count:
        calls = tuple(ToolCall(f"toolu_{n}_{k}", "read_file", f'{{"path": "src/module_{n}_{k}.py"}}')
                      for k in range(2))
        messages.append(Message(Role.ASSISTANT, (
            Reasoning("I should read both modules before editing. " * 3, state="EqQB" * 40,
                      protocol="anthropic"),
            Text(f"Reading the two modules of step {n}."), *calls)))
        messages.append(Message(Role.USER, tuple(
            ToolResult(c.id, c.name, "def f(x):\n    return x * 2  # café ✓\n" * 8) for c in calls)))
        n += 1
    return tuple(messages[:count])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    messages = conversation(args.messages)
    chars = sum(len(getattr(p, a)) for m in messages for p in m.parts
                for a in ("text", "input", "result") if hasattr(p, a))
    times = []
    for _ in range(max(args.runs, 1)):
        started = time.perf_counter()
        tokens = estimate_tokens(messages)
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    print(f"Python {sys.version.split()[0]}")
    print(f"estimate_tokens, {len(messages)} messages, {chars / 1e6:.1f} M characters -> {tokens} tokens")
    print(f"median {median * 1e3:.1f} ms [{min(times) * 1e3:.1f}-{max(times) * 1e3:.1f}], "
          f"{chars / median / 1e6:.0f} M characters/s   (target < 50 ms)")


if __name__ == "__main__":
    main()
