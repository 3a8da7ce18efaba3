"""Rows 11–13: tool calls as they are written — eager start, TOOL_INPUT's cost, and
``PartialJSON`` staying linear.

- Eager start (row 11): one turn, streamed over a realistic 2 s reply (some text,
  then three calls whose inputs come in 25 deltas each), against an Anthropic wire
  served from a thread of this process, so the server's clock and the tool's are one.
  Per call, the time from the server's flush of the call's last argument delta to
  the tool starting, for ``Agent(eager_tools=True)`` and for the default; the ratio
  is eager over default (lower is better). The default waits for the whole reply, so
  its figure is about the reply's remaining time; eager's is the loop's own latency.
- TOOL_INPUT's cost (row 12): one call whose input streams in 20,000 deltas of 10
  characters (a 200 KB argument), each client in its own process against
  ``server_proc.py``: CPU per delta for a consumer that reads each TOOL_INPUT's id,
  name and delta, over one that ignores them (target within 10%); the same client's
  CPU per text delta on a 20,000-delta answer is shown beside it, and the argument
  delta's CPU over the text delta's is row 12b (a TOOL_INPUT nobody reads should cost
  what no event costs; a text delta, whose TEXT is also ignored, is the nearest run
  without one). Rows 12c and 12d: a parent whose model calls a sub-agent once, the
  sub-agent streaming the same 20,000 text deltas, CPU per child delta over the
  child's alone: forwarded (``forward=True``) with each forwarded TEXT read, and not
  forwarded. Every ratio of the row is one client over another, so the clients take
  turns, in rounds of three runs each in a fresh process.
- ``PartialJSON`` (row 13): a structured answer of records fed in 10-character
  deltas, 10× the deltas against 1×; the time's ratio (target: at most 12, i.e.
  linear within noise).

Benchmark-only: imports the standard library, nacelle and ``measure``.
"""

import json
import os
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple

from measure import Row, ServerProcess, Stat, ratio_row, run_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

DELTAS = 20_000
REPLY = 2.0  # seconds the eager-start turn takes to stream
CALLS = 3
PIECES = 25  # argument deltas per call in the eager-start turn


# -- row 11: eager start -----------------------------------------------------------------


def _paced_turn(server: "_PacedServer") -> List[tuple]:
    """The eager-start turn as (event bytes, call id whose last argument it is or "")."""
    from nacelle.testing.wire import anthropic_stream, sse_event

    calls = [(f"toolu_{n}", "work", json.dumps({"step": n, "note": "y" * 200}))
             for n in range(CALLS)]
    events = anthropic_stream([" word"] * 20, tool_calls=[(i, n, "") for i, n, _ in calls],
                              pings=False)
    out: List[tuple] = []
    block = 1  # the text block is 0
    for event in events:
        stopping = b"content_block_stop" in event and b'"index":%d' % block in event
        if stopping and block <= CALLS:
            call_id, _, arguments = calls[block - 1]
            size = -(-len(arguments) // PIECES)
            pieces = [arguments[i:i + size] for i in range(0, len(arguments), size)]
            for number, piece in enumerate(pieces):
                out.append((sse_event({"type": "content_block_delta", "index": block, "delta": {
                    "type": "input_json_delta", "partial_json": piece}},
                    event="content_block_delta"),
                    call_id if number == len(pieces) - 1 else ""))
            block += 1
        if b'"partial_json":""' in event:
            continue  # the fake's empty opening delta; the pieces above carry the input
        out.append((event, ""))
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002
        pass

    def do_POST(self):
        from nacelle.testing.wire import anthropic_stream

        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        answered = any(isinstance(m.get("content"), list) and any(
            b.get("type") == "tool_result" for b in m["content"]) for m in request["messages"])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        items = ([(e, "") for e in anthropic_stream(["Done."], pings=False)] if answered
                 else _paced_turn(self.server))
        gap = 0.0 if answered else REPLY / len(items)
        for event, last_of in items:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            if last_of:
                self.server.flushed[last_of] = time.perf_counter()
            if gap:
                time.sleep(gap)
        self.wfile.write(b"0\r\n\r\n")


class _PacedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.flushed: Dict[str, float] = {}


def _latencies(eager: bool) -> List[float]:
    import nacelle
    from nacelle.backends import anthropic

    started: Dict[int, float] = {}

    @nacelle.tool
    def work(step: int, note: str) -> str:
        """Do one step."""
        started[step] = time.perf_counter()
        return "done"

    server = _PacedServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        backend = anthropic.Backend("bench-key-not-secret",
                                    base_url=f"http://127.0.0.1:{server.server_port}",
                                    max_retries=0)
        agent = nacelle.Agent(backend, "bench", tools=[work], eager_tools=eager)
        agent.run([nacelle.user_text("go")])
    finally:
        server.shutdown()
        server.server_close()
    return [started[n] - server.flushed[f"toolu_{n}"] for n in range(CALLS)]


def eager_rows(runs: int) -> List[Row]:
    measured = {}
    for eager in (True, False):
        samples = [statistics.mean(_latencies(eager)) for _ in range(max(3, runs // 2))]
        measured[eager] = Stat.of([s * 1000 for s in samples])
    ratio = measured[True].median / measured[False].median if measured[False].median else None
    return [ratio_row(
        "11", "last argument byte to tool start, eager ÷ default", ratio, "≤ 0.1", 0.1,
        at_least=False, label="eager start", figures=[
            f"eager_tools=True: {measured[True].show(' ms', 1)} (mean of {CALLS} calls)",
            f"default: {measured[False].show(' ms', 1)} (waits for the reply's end)",
            f"reply: {REPLY:g} s, {CALLS} calls of {PIECES} argument deltas"])]


# -- row 12: TOOL_INPUT's cost -------------------------------------------------------------


#: Runs of one client in one process, between the other clients' (see _interleaved).
ROUND = 3
#: The short body's deltas: a run of it is subtracted from each run of the long one.
SHORT = 2_000


def _interleaved(clients: List[Tuple[str, str, str, Optional[bool]]], runs: int) -> List[dict]:
    """Each of ``clients`` (name, url of the long body, url of the short one, and
    True if it counts the deltas, False if it sees none, None for a floor client's
    count of data lines) measured ``runs`` times in rounds of :data:`ROUND` runs, the
    clients taking turns, each round in a fresh process: every ratio of row 12 is one
    nacelle client over another, so a machine that speeds up or slows down while the
    row runs must not favour whichever went first.

    Each run is a pair (``clients.py marginal``): the body of :data:`DELTAS` deltas,
    then the same body of :data:`SHORT`. ``cpu_us`` is the CPU a delta adds, the
    pair's difference over the difference in deltas; ``whole_us`` is the long run's
    CPU over its deltas. The two differ by what a run costs once, and that differs
    between the clients a ratio compares: a call's tool and second turn (12b), a
    parent's own two turns (12c, 12d). Those are paid per run whatever the deltas
    carry, so a ratio of whole runs would change with the body's length; the
    per-delta cost, which TOOL_INPUT and forwarding add to, does not."""
    results: List[dict] = [{"runs": []} for _ in clients]
    left = runs
    while left > 0:
        now = min(ROUND, left)
        left -= now
        for (name, url, short_url, _), result in zip(clients, results):
            if "runs" not in result:
                continue  # missing or failed already
            got = run_client("marginal", name, url, short_url=short_url, runs=now)
            if "runs" in got:
                result["runs"].extend(got["runs"])
            else:
                result.clear()
                result.update(got)
    for (name, _, _, counts_deltas), result in zip(clients, results):
        if "runs" not in result:
            continue
        counts = {(r["events"], r["short_events"]) for r in result["runs"]}
        expected = (DELTAS, SHORT) if counts_deltas else (0, 0)
        if counts_deltas is not None and counts != {expected}:
            result.clear()
            result["error"] = f"{name} received {sorted(counts)} deltas, expected {expected}"
            continue
        result["cpu_us"] = Stat.of([(r["cpu"] - r["short_cpu"]) / (DELTAS - SHORT) * 1e6
                                    for r in result["runs"]])
        result["whole_us"] = Stat.of([r["cpu"] / DELTAS * 1e6 for r in result["runs"]])
    return results


def overhead_rows(server: ServerProcess, runs: int) -> List[Row]:
    def urls(kind: str) -> Tuple[str, str]:
        return server.url("anthropic", kind, DELTAS), server.url("anthropic", kind, SHORT)

    arguments, text, delegate = urls("args"), urls("text"), urls("delegate")
    # The floor (requests, split, json.loads) on both bodies: 12b compares nacelle on
    # two bodies, so whether one is dearer to read for anyone is shown beside it.
    read, ignored, texts, floor_arguments, floor_text, forwarded, kept = _interleaved([
        ("nacelle-arguments-read", *arguments, True),
        ("nacelle-arguments-ignored", *arguments, True),
        ("nacelle-anthropic", *text, True),
        ("floor-anthropic", *arguments, None),
        ("floor-anthropic", *text, None),
        ("nacelle-subagent-forwarded", *delegate, True),
        ("nacelle-subagent", *delegate, False),
    ], runs)
    figures = [f"CPU a delta adds: a run of {DELTAS:,} deltas less one of {SHORT:,}, over "
               f"{DELTAS - SHORT:,} (in brackets: the whole run's CPU over its deltas)"]
    for name, result in (("TOOL_INPUT read", read), ("TOOL_INPUT ignored", ignored),
                         ("text deltas", texts), ("floor, argument body", floor_arguments),
                         ("floor, text body", floor_text),
                         ("sub-agent, its events forwarded and read", forwarded),
                         ("sub-agent, not forwarded", kept)):
        stat = result.get("cpu_us")
        unit = " CPU per child text delta" if name.startswith("sub-agent") else " CPU per delta"
        figures.append(f"{name}: {stat.show(' µs', 2)}{unit} "
                       f"({result['whole_us'].median:.2f} µs whole)" if stat else
                       f"{name}: {result.get('missing') or result.get('error')}")

    def over(top: dict, bottom: dict, field: str = "cpu_us") -> Optional[float]:
        return (top[field].median / bottom[field].median
                if field in top and field in bottom else None)

    wholes = [(number, over(top, texts, "whole_us")) for number, top in
              (("12b", ignored), ("12c", forwarded), ("12d", kept))]
    if all(ratio is not None for _, ratio in wholes):
        figures.append("whole runs over the child's or the text's whole run (a call's tool "
                       "and second turn, a parent's turns included): " + ", ".join(
                           f"{number} {ratio:.2f}×" for number, ratio in wholes))
    return [
        ratio_row("12", "CPU per argument delta, TOOL_INPUT read ÷ ignored", over(read, ignored),
                  "≤ 1.10", 1.10, at_least=False, label="TOOL_INPUT read", figures=figures),
        # A TOOL_INPUT nobody reads against no such event: the nearest run without
        # them is the same number of text deltas, whose TEXT events are ignored too.
        ratio_row("12b", "CPU per delta, argument (TOOL_INPUT ignored) ÷ text",
                  over(ignored, texts), "≤ 1.05", 1.05, at_least=False,
                  label="TOOL_INPUT ignored", figures=[]),
        ratio_row("12c", "CPU per child delta, sub-agent forwarded and read ÷ child alone",
                  over(forwarded, texts), "≤ 1.10", 1.10, at_least=False,
                  label="sub-agent forwarded", figures=[]),
        ratio_row("12d", "CPU per child delta, sub-agent not forwarded ÷ child alone",
                  over(kept, texts), "≤ 1.05", 1.05, at_least=False,
                  label="sub-agent not forwarded", figures=[]),
    ]


# -- row 13: PartialJSON stays linear --------------------------------------------------------


def _document(records: int) -> str:
    return json.dumps({"title": "inventory", "items": [
        {"id": n, "name": f"item {n}", "tags": ["a", "b"], "price": n * 0.25,
         "note": "text with \"quotes\" and \\u00e9"} for n in range(records)]})


def _feed_seconds(text: str) -> float:
    from nacelle import PartialJSON

    pieces = [text[i:i + 10] for i in range(0, len(text), 10)]
    reader = PartialJSON()
    started = time.perf_counter()
    for piece in pieces:
        reader.feed(piece)
    return time.perf_counter() - started


def partial_rows(runs: int) -> List[Row]:
    small = _document(200)
    large = _document(2000)
    small_s = Stat.of([_feed_seconds(small) for _ in range(runs)])
    large_s = Stat.of([_feed_seconds(large) for _ in range(runs)])
    deltas = (len(small) // 10, len(large) // 10)
    ratio = large_s.median / small_s.median
    return [ratio_row("13", "PartialJSON, 10× the deltas ÷ 1× (time)", ratio, "≤ 12", 12.0,
                      at_least=False, label="PartialJSON 10×", figures=[
                          f"{deltas[0]:,} deltas: {small_s.scaled(1e3).show(' ms', 1)}",
                          f"{deltas[1]:,} deltas: {large_s.scaled(1e3).show(' ms', 1)}"])]
