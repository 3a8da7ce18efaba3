"""Row 9: the per-turn request build, to the body the transport sends, at 100, 1,000
and 10,000 messages, on the Anthropic (9a-b), Chat Completions (9c-d), Responses
(9e-f), Gemini (9g-h), Bedrock (9i-j) and Vertex AI (9k-l) wires: each backend's
``encode_body`` (Bedrock and Vertex send the Anthropic wire's in their own frame).

What ``Backend.turn`` does before the request leaves: ``encode_body`` with the
backend's ``WireCache``, in the steady state of a run — the run's earlier turns were
encoded already, and each measured turn adds what a tool-using turn adds (an
assistant message with text and two tool calls, a user message with their two
results). The conversation before it is a realistic mix: user text, assistant text
with tool calls, tool results (with the system prompt and three tools).

The peers, measured in the same run on the same conversation:

- a bare ``json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()`` of
  the same body dict, built beforehand — the least a client that keeps the request
  as a dict pays each turn just to serialise it;
- the full rebuild nacelle made before the cache (``to_wire`` then that
  ``json.dumps``), as a figure;
- one copy of a body that size into a new ``bytes`` (``b"".join``), as a figure:
  what joining the pieces would add. The transport sends the body's pieces as they
  are (``_wire_cache.Body``, with its Content-Length), so no turn pays it.

Targets: the 10,000-message turn within 3× the 1,000-message one (flat: the work is
what is new), and nacelle's build at 10,000 messages within 1.5× the bare
``json.dumps``. Every body is checked byte for byte against the full rebuild first.

    benchmarks/.env/bin/python benchmarks/request_build.py [--runs N]

Benchmark-only: imports the standard library, ``measure`` and nacelle.
"""

import argparse
import gc
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from measure import Row, Stat, ratio_row  # noqa: E402

SIZES = (100, 1_000, 10_000)
TURNS = 40  # measured turns per run, each adding two messages
SENTENCE = "Here is a sentence of about the length a person types into a chat box."


class BenchTool:
    def __init__(self, name: str) -> None:
        self.name = name
        self.description = f"Look up {name} for the user."
        self.schema = {"type": "object", "properties": {
            "query": {"type": "string", "description": "what to look up"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
            "required": ["query"], "additionalProperties": False}


def _dumps(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _turn(n: int) -> Tuple[Any, Any]:
    """The two messages one tool-using turn adds."""
    from nacelle import Finish, Message, Role, Stop, Text, ToolCall, ToolResult
    calls = [ToolCall(f"toolu_{n:06d}_{i}", "search", json.dumps({"query": f"item {n}.{i}"}))
             for i in range(2)]
    return (Message(Role.ASSISTANT, (Text(f"Let me look that up ({n})."), *calls,
                                     Finish(Stop.TOOLS))),
            Message(Role.USER, tuple(ToolResult(c.id, c.name, f"{SENTENCE} Result {n}.")
                                     for c in calls)))


def conversation(size: int) -> Tuple[Any, ...]:
    """``size`` messages: a question, then turns of tool calls and results, with a
    user follow-up after every fifth turn."""
    import nacelle
    out: List[Any] = [nacelle.user_text(SENTENCE)]
    n = 0
    while len(out) < size:
        if n % 5 == 4:
            out += [nacelle.assistant_text(f"{SENTENCE} ({n})"), nacelle.user_text(SENTENCE)]
        else:
            out += list(_turn(n))
        n += 1
    return tuple(out[:size])


def wires() -> Dict[str, Tuple[Callable[..., Any], Callable[..., bytes]]]:
    """name -> (to_wire(request, messages), what the backend's turn sends for them:
    ``encode_body(request, messages, cache)`` where the wire has one, else the
    transport's ``json.dumps`` of ``to_wire``)."""
    import functools

    from nacelle.backends import anthropic, chat
    from nacelle.backends.anthropic import wire as anthropic_wire
    from nacelle.backends.chat import wire as chat_wire
    from nacelle.backends.gemini import wire as gemini_wire
    from nacelle.backends.openai import wire as responses_wire
    clouds = {
        "bedrock": anthropic.bedrock(model="us.anthropic.claude-opus-4-1-20250805-v1:0",
                                     region="us-west-2", api_key="bench-key"),
        "vertex": anthropic.vertex(model="claude-opus-4-1@20250805", project="bench",
                                   region="us-east5", token="bench-token"),
    }

    def cloud(name: str) -> Tuple[Callable[..., Any], Callable[..., Any]]:
        backend: Any = clouds[name]
        return (backend._body,
                lambda r, m, c: anthropic_wire.encode_body(
                    r, m, model=backend.model, cache=c,
                    shape=functools.partial(backend._shape, r)))

    return {
        "responses": (lambda r, m: responses_wire.to_wire(r, m, model="gpt-5-mini"),
                      lambda r, m, c: responses_wire.encode_body(r, m, model="gpt-5-mini",
                                                                 cache=c)),
        "gemini": (lambda r, m: gemini_wire.to_wire(r, m, model="gemini-2.5-flash"),
                   lambda r, m, c: gemini_wire.encode_body(r, m, model="gemini-2.5-flash",
                                                           cache=c)),
        "bedrock": cloud("bedrock"),
        "vertex": cloud("vertex"),
        "anthropic": (lambda r, m: anthropic_wire.to_wire(r, m, model="claude-opus-5"),
                      lambda r, m, c: anthropic_wire.encode_body(r, m, model="claude-opus-5",
                                                                 cache=c)),
        "chat": (lambda r, m: chat_wire.to_wire(r, m, model="gpt-5-mini", dialect=chat.OPENAI),
                 lambda r, m, c: chat_wire.encode_body(r, m, model="gpt-5-mini",
                                                       dialect=chat.OPENAI, cache=c)),
    }


def one_run(wire: str, size: int) -> Dict[str, float]:
    """Per-turn seconds of nacelle's build, the bare json.dumps and the full rebuild."""
    from nacelle import Request
    from nacelle.backends._wire_cache import WireCache
    to_wire, encode = wires()[wire]
    request = Request("You are a careful research assistant.",
                      tools=tuple(BenchTool(name) for name in ("search", "fetch", "summarise")))
    messages = conversation(size)
    cache = WireCache()
    # The run so far: its earlier turns encoded (the cache warm), checked exactly.
    assert encode(request, messages[:-2], cache) == _dumps(to_wire(request, messages[:-2]))
    grown = [messages]
    for n in range(TURNS):
        grown.append(grown[-1] + _turn(10_000_000 + n))
    gc.collect()
    started = time.perf_counter()
    for step in grown:
        encode(request, step, cache)
    build = (time.perf_counter() - started) / len(grown)
    last = encode(request, grown[-1], cache)
    body = to_wire(request, grown[-1])
    if last != _dumps(body):
        raise RuntimeError(f"{wire}: encode_body differs from json.dumps(to_wire(...))")
    gc.collect()
    started = time.perf_counter()
    for _ in range(5):
        _dumps(body)
    bare = (time.perf_counter() - started) / 5
    started = time.perf_counter()
    for _ in range(3):
        _dumps(to_wire(request, grown[-1]))
    full = (time.perf_counter() - started) / 3
    # One copy of the body into a new bytes object: what a join of the pieces would
    # add to a turn (the transport sends them unjoined).
    middle = memoryview(bytes(last))[1:-1]
    started = time.perf_counter()
    for _ in range(TURNS):
        b"".join((b"{", middle, b"}"))
    copy = (time.perf_counter() - started) / TURNS
    return {"build": build, "bare": bare, "full": full, "copy": copy,
            "bytes": float(len(last))}


def request_build_rows(runs: int) -> List[Row]:
    rows = []
    for (flat_row, versus_row), wire in (
            (("9a", "9b"), "anthropic"), (("9c", "9d"), "chat"), (("9e", "9f"), "responses"),
            (("9g", "9h"), "gemini"), (("9i", "9j"), "bedrock"), (("9k", "9l"), "vertex")):
        stats: Dict[int, Dict[str, Stat]] = {}
        sizes: Dict[int, float] = {}
        for size in SIZES:
            one_run(wire, size)  # warm-up
            samples = [one_run(wire, size) for _ in range(runs)]
            stats[size] = {key: Stat.of([s[key] * 1e6 for s in samples])
                           for key in ("build", "bare", "full", "copy")}
            sizes[size] = samples[0]["bytes"]
        figures = [f"{wire} {size:>6,} messages ({sizes[size] / 1e3:,.0f} kB): build "
                   f"{stats[size]['build'].show(' µs', 1)} per turn (a join of the body "
                   f"would add {stats[size]['copy'].show(' µs', 1)}); bare json.dumps "
                   f"{stats[size]['bare'].show(' µs', 0)}; full rebuild (to_wire + dumps) "
                   f"{stats[size]['full'].show(' µs', 0)}" for size in SIZES]
        flat = stats[10_000]["build"].median / stats[1_000]["build"].median
        versus = stats[10_000]["build"].median / stats[10_000]["bare"].median
        rows.append(ratio_row(flat_row,
                              f"request build, {wire}: 10,000 ÷ 1,000 messages", flat,
                              "≤ 3×", 3.0, at_least=False, figures=figures,
                              label=f"build {wire} 10k ÷ 1k"))
        rows.append(ratio_row(versus_row,
                              f"request build, {wire}: nacelle ÷ bare json.dumps at 10,000",
                              versus, "≤ 1.5×", 1.5, at_least=False, figures=[],
                              label=f"build {wire} ÷ json.dumps"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for row in request_build_rows(args.runs):
        print(f"{row.number:4} {row.title:60} {row.ratio:8.3f}×  {row.target:8} {row.verdict}")
        for line in row.figures:
            print(f"     {line}")


if __name__ == "__main__":
    main()
