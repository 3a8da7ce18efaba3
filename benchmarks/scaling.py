"""Row 7: per-turn overhead as the conversation grows — 10, 100, 1,000, 10,000 messages.

What a turn costs nacelle itself, the network left out: the loop's bookkeeping, the
request build (``encode_body``: the bytes of the body, each message encoded once a
run, the breakpoints moved; row 9 measures it alone) and the accumulation of the answer
(``json.loads`` of each SSE event's data and the Anthropic ``Accumulator``). The run
is real — ``Agent.run`` on the real ``anthropic.Backend``, its ``turn`` unchanged —
with the backend's transport swapped for one that serialises the body and replays
pre-decoded SSE events. That swap reaches into a private attribute
(``_endpoint._transport``); a benchmark may, the package's users should not.

Each run is a conversation of N messages (user and assistant turns of a sentence
each) followed by ten model turns (five with ``quick``): one tool call per turn,
then a final answer. Growth should be linear: the ratio of per-turn times between
sizes a decade apart should stay near 10 (target ≤ 12).

Benchmark-only: imports the standard library, ``measure`` and nacelle.
"""

import gc
import json
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional

from measure import Row, Stat, ratio_row

SIZES = (10, 100, 1_000, 10_000)
SENTENCE = "Here is a sentence of about the length a person types into a chat box."


class ReplayTransport:
    """Stands in for ``backends._http.Transport``: takes each body as the real one
    does (bytes or a Body of pieces as they are, a dict serialised), then replays the next recorded turn."""

    def __init__(self, turns: List[list]) -> None:
        self.turns = turns
        self.requests = 0
        self.bytes_sent = 0

    def post_stream(self, path: str, body: Any, ctx: Any,
                    headers: Optional[Mapping[str, str]] = None) -> "Replay":
        from nacelle.backends._wire_cache import Body

        data = body if isinstance(body, (bytes, Body)) else json.dumps(
            body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.bytes_sent += len(data)
        self.requests += 1
        return Replay(self.turns[self.requests - 1])

    def request_headers(self) -> Dict[str, str]:
        return {}  # nothing secret for the scrubber to look for

    def secrets(self) -> Dict[str, str]:
        return {}

    def batches(self, response: "Replay", ctx: Any, keepalive: Any = None) -> Iterator[list]:
        """The recorded events as one read (``_http.sse_batches``' shape): a replayed
        body arrives whole."""
        yield list(response.events)

    def events(self, response: "Replay", ctx: Any, keepalive: Any = None,
               final: Any = None) -> Iterator[Any]:
        for event in response.events:
            yield event
            if final is not None and final(event):
                return


class Replay:
    """A response whose body was decoded beforehand."""

    def __init__(self, events: list) -> None:
        self.events = events

    def close(self) -> None:
        pass


def _decoded(chunks: List[bytes]) -> list:
    from nacelle.sse import SSEDecoder
    decoder = SSEDecoder()
    events = decoder.feed(b"".join(chunks))
    return events + decoder.close()


def per_turn_seconds(size: int, turns: int) -> Dict[str, float]:
    import nacelle
    from nacelle.backends import anthropic
    from nacelle.testing.wire import anthropic_stream

    @nacelle.tool
    def noop() -> str:
        """Do nothing."""
        return ""

    history = []
    for i in range(size // 2):
        history += [nacelle.user_text(f"{SENTENCE} ({i})"), nacelle.assistant_text(SENTENCE)]
    history.append(nacelle.user_text("now"))
    backend = anthropic.Backend("bench-key-not-secret", base_url="http://127.0.0.1:9")
    # Every call needs an id of its own: the loop pairs results with calls by id.
    transport = ReplayTransport(
        [_decoded(anthropic_stream([], tool_calls=[(f"toolu_{n:02d}", "noop", "{}")]))
         for n in range(turns - 1)] + [_decoded(anthropic_stream(["Done", "."]))])
    backend._endpoint._transport = transport
    # loop_guard=0: every turn calls noop with the same (empty) input, on purpose.
    agent = nacelle.Agent(backend, "bench", max_tokens=1024, tools=[noop], loop_guard=0)
    gc.collect()
    started = time.perf_counter()
    result = agent.run(history)
    took = time.perf_counter() - started
    if result.turns != turns:
        raise RuntimeError(f"{result.turns} turns, expected {turns}")
    return {"seconds": took / turns, "bytes": transport.bytes_sent / turns}


def scaling_rows(quick: bool, runs: int) -> List[Row]:
    turns = 5 if quick else 10
    per_turn: Dict[int, Stat] = {}
    sent: Dict[int, float] = {}
    for size in SIZES:
        per_turn_seconds(size, 2)  # warm-up
        samples = [per_turn_seconds(size, turns) for _ in range(runs)]
        per_turn[size] = Stat.of([s["seconds"] * 1e3 for s in samples])
        sent[size] = samples[0]["bytes"]
    figures = [f"{size:>6,} messages: {per_turn[size].show(' ms', 3)} per turn, "
               f"{sent[size] / 1e3:,.1f} kB request body" for size in SIZES]
    rows = []
    for letter, (small, large) in zip("abc", zip(SIZES, SIZES[1:])):
        ratio = per_turn[large].median / per_turn[small].median
        rows.append(ratio_row("7" + letter, f"per-turn overhead, {large:,} ÷ {small:,} messages",
                              ratio, "≤ 12×", 12.0, at_least=False,
                              figures=figures if letter == "a" else [],
                              label=f"turn cost {large:,} ÷ {small:,} msgs"))
    return rows
