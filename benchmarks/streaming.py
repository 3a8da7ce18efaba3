"""Rows 1–3, 8, 10 and 15–17: streaming end to end, time to first event, memory, and
the Chat Completions, Responses, Gemini and Bedrock wires.

The server (``server_proc.py``) and each client (``clients.py``) run in processes of
their own, so no client shares a GIL with the server or with another client, and a
client's CPU time is its own.

- Throughput (rows 1, 2): 20,000 text deltas per stream; per client the CPU µs per
  delta (the ratio is computed on this, the figure the shared machine disturbs
  least) and deltas per second of wall time.
- Time to first event (row 3): the server flushes the first delta and stalls 2 s;
  the time from the call to the first text delta, then the stream is closed.
- Memory (row 8): 20 MB of text in 256-byte deltas (10 MB with ``quick``), one fresh
  process per run; peak RSS growth over the text size. The anthropic SDK rebuilds
  its snapshot string on every delta (``text += delta`` on a model attribute, which
  CPython cannot extend in place), so its time grows with the square of the answer:
  it is measured at a smaller size, beside nacelle at that same size.

Benchmark-only: imports the standard library and ``measure``.
"""

from typing import Dict, List, Optional

from measure import Row, ServerProcess, Stat, ratio_row, run_client

DELTAS = 20_000


SDKS = {"anthropic": "sdk-anthropic", "responses": "sdk-openai-responses",
        "bedrock": "sdk-bedrock", "gemini": None}  # no google-genai in the benchmark env


def _throughput(server: ServerProcess, wire: str, runs: int,
                sdk_runs: Optional[int] = None) -> Dict[str, dict]:
    url = server.url(wire, "text", DELTAS)
    names = {"floor": f"floor-{wire}", "nacelle": f"nacelle-{wire}",
             "sdk": SDKS.get(wire, "sdk-openai")}
    out = {}
    for role, client in names.items():
        if client is None:
            out[role] = {"client": "(no SDK)", "missing": "no SDK of this wire installed"}
            continue
        count = sdk_runs if role == "sdk" and sdk_runs else runs
        result = run_client("throughput", client, url, runs=count)
        if "runs" in result:
            got = {r["events"] for r in result["runs"]}
            if role != "floor" and got != {DELTAS}:
                result = {"error": f"received {sorted(got)} text deltas, expected {DELTAS}"}
            else:
                result["cpu_us"] = Stat.of([r["cpu"] / DELTAS * 1e6 for r in result["runs"]])
                result["rate"] = Stat.of([DELTAS / r["wall"] for r in result["runs"]])
        result["client"] = client
        out[role] = result
    return out


def _describe(result: dict) -> str:
    if "cpu_us" not in result:
        return f"{result['client']}: {result.get('missing') or result.get('error')}"
    return (f"{result['client']}: {result['cpu_us'].show(' µs', 2)} CPU per delta, "
            f"{result['rate'].scaled(1e-3).show('k', 1)} deltas/s")


def throughput_rows(server: ServerProcess, runs: int) -> List[Row]:
    rows = []
    for number, wire, sdk in (("1", "anthropic", "anthropic SDK"), ("2", "openrouter", "openai SDK")):
        measured = _throughput(server, wire, runs)
        figures = [_describe(measured[role]) for role in ("nacelle", "sdk", "floor")]
        ours = measured["nacelle"].get("cpu_us")
        theirs = measured["sdk"].get("cpu_us")
        floor = measured["floor"].get("cpu_us")
        if ours and theirs:
            figures.append(f"wall-time ratio {sdk} ÷ nacelle: "
                           f"{measured['nacelle']['rate'].median / measured['sdk']['rate'].median:.1f}×")
        if theirs and floor:
            figures.append(f"{sdk} ÷ floor: {theirs.median / floor.median:.1f}×")
        title = f"stream {wire} wire: CPU per delta"
        rows.append(ratio_row(number + "a", f"{title}, {sdk} ÷ nacelle",
                              theirs.median / ours.median if ours and theirs else None,
                              "≥ 5×", 5.0, at_least=True, figures=figures,
                              label=f"{wire}: {sdk.split()[0]} ÷ nacelle"))
        rows.append(ratio_row(number + "b", f"{title}, nacelle ÷ floor",
                              ours.median / floor.median if ours and floor else None,
                              "≤ 1.5×", 1.5, at_least=False, figures=[],
                              label=f"{wire}: nacelle ÷ floor"))
    return rows


def chat_rows(server: ServerProcess, runs: int) -> List[Row]:
    """Row 10: the Chat Completions wire (``chat.Backend``), 20,000 deltas, against the
    openai SDK and the floor on the same body."""
    measured = _throughput(server, "chat", runs)
    figures = [_describe(measured[role]) for role in ("nacelle", "sdk", "floor")]
    ours, theirs, floor = (measured[role].get("cpu_us") for role in ("nacelle", "sdk", "floor"))
    if ours and theirs:
        figures.append(f"wall-time ratio openai SDK ÷ nacelle: "
                       f"{measured['nacelle']['rate'].median / measured['sdk']['rate'].median:.1f}×")
    if ours and floor:
        figures.append(f"wall-time ratio nacelle ÷ floor: "
                       f"{measured['floor']['rate'].median / measured['nacelle']['rate'].median:.1f}×")
    title = "stream chat wire: CPU per delta"
    return [
        ratio_row("10a", f"{title}, openai SDK ÷ nacelle",
                  theirs.median / ours.median if ours and theirs else None, "≥ 5×", 5.0,
                  at_least=True, figures=figures, label="chat: openai ÷ nacelle"),
        ratio_row("10b", f"{title}, nacelle ÷ floor",
                  ours.median / floor.median if ours and floor else None, "≤ 1.5×", 1.5,
                  at_least=False, figures=[], label="chat: nacelle ÷ floor"),
    ]


def wire_rows(server: ServerProcess, runs: int) -> List[Row]:
    """Rows 15–17: the Responses wire (``openai.Backend``) against the openai SDK's
    ``responses.create(stream=True)``, native Gemini (floor only: the google-genai SDK
    is not in the benchmark environment) and Bedrock's event stream
    (``anthropic.bedrock``) against the anthropic SDK's ``AnthropicBedrock``; each
    20,000 deltas, and nacelle against the floor on the same body. An SDK spends 15–20×
    nacelle's CPU here, so five of its runs settle its row, and the time goes to the
    nacelle ÷ floor rows, whose margin is small."""
    rows = []
    for number, wire, sdk in (("15", "responses", "openai SDK"), ("16", "gemini", None),
                              ("17", "bedrock", "anthropic SDK")):
        measured = _throughput(server, wire, runs, sdk_runs=min(runs, 5))
        figures = [_describe(measured[role]) for role in ("nacelle", "sdk", "floor")]
        ours, theirs, floor = (measured[role].get("cpu_us")
                               for role in ("nacelle", "sdk", "floor"))
        if ours and floor:
            figures.append(f"wall-time ratio nacelle ÷ floor: "
                           f"{measured['floor']['rate'].median / measured['nacelle']['rate'].median:.1f}×")
        title = f"stream {wire} wire: CPU per delta"
        if sdk is not None:
            rows.append(ratio_row(number + "a", f"{title}, {sdk} ÷ nacelle",
                                  theirs.median / ours.median if ours and theirs else None,
                                  "≥ 5×", 5.0, at_least=True, figures=figures,
                                  label=f"{wire}: {sdk.split()[0]} ÷ nacelle"))
            figures = []
        rows.append(ratio_row(number + "b", f"{title}, nacelle ÷ floor",
                              ours.median / floor.median if ours and floor else None,
                              "≤ 1.5×", 1.5, at_least=False, figures=figures,
                              label=f"{wire}: nacelle ÷ floor"))
    return rows


def ttfe_rows(server: ServerProcess, runs: int) -> List[Row]:
    rows = []
    for wire, ours, theirs, sdk in (("anthropic", "nacelle-anthropic", "sdk-anthropic", "anthropic SDK"),
                                    ("openrouter", "nacelle-openrouter", "sdk-openai", "openai SDK")):
        url, warm = server.url(wire, "ttfe", 50), server.url(wire, "text", 200)
        mine = run_client("ttfe", ours, url, runs=runs, warm_url=warm)
        peer = run_client("ttfe", theirs, url, runs=runs, warm_url=warm)
        figures = []
        stats: Dict[str, Optional[Stat]] = {}
        for name, result in ((ours, mine), (theirs, peer)):
            if "runs" in result:
                stats[name] = Stat.of([t * 1e3 for t in result["runs"]])
                figures.append(f"{name}: {stats[name].show(' ms', 2)} to the first delta")
            else:
                stats[name] = None
                figures.append(f"{name}: {result.get('missing') or result.get('error')}")
        a, b = stats[ours], stats[theirs]
        ratio = b.median / a.median if a and b else None
        # Met when nacelle's slowest run is within 20 ms and its median is no slower
        # than the SDK's median.
        met = None if ratio is None else (a.high <= 20.0 and ratio >= 1.0)
        figures.append("target: nacelle's slowest run ≤ 20 ms and its median ≤ the SDK's")
        rows.append(Row("3" + ("a" if wire == "anthropic" else "b"),
                        f"time to first event, {wire}: {sdk} ÷ nacelle", ratio,
                        "≥ 1×, ≤ 20 ms", met, figures, label=f"TTFE {wire}: SDK ÷ nacelle"))
    return rows


def memory_rows(server: ServerProcess, quick: bool, runs: int) -> List[Row]:
    size = 10_000_000 if quick else 20_000_000
    peer_size = 1_000_000 if quick else 2_000_000
    warm = server.url("anthropic", "text", 200)
    figures = []

    def measure(client: str, nbytes: int, count: int) -> Optional[dict]:
        results = [run_client("memory", client, server.url("anthropic", "big", nbytes),
                              warm_url=warm, timeout=300) for _ in range(count)]
        bad = [r for r in results if "growth" not in r]
        if bad:
            figures.append(f"{client} at {nbytes / 1e6:g} MB: "
                           f"{bad[0].get('missing') or bad[0].get('error')}")
            return None
        wrong = [r["text_bytes"] for r in results if r["text_bytes"] != nbytes]
        if wrong:
            figures.append(f"{client} returned {wrong[0]} bytes of text, expected {nbytes}")
            return None
        growth = Stat.of([r["growth"] / nbytes for r in results])
        seconds = Stat.of([r["seconds"] for r in results])
        figures.append(f"{client} at {nbytes / 1e6:g} MB: peak RSS growth "
                       f"{growth.show('×', 2)} the text, {seconds.show(' s', 2)}")
        return {"growth": growth, "seconds": seconds}

    ours = measure("nacelle-anthropic", size, runs)
    ours_small = measure("nacelle-anthropic", peer_size, runs)
    theirs = measure("sdk-anthropic", peer_size, runs)
    peer_ratio = None
    if ours_small and theirs:
        peer_ratio = theirs["growth"].median / ours_small["growth"].median
        figures.append(f"at {peer_size / 1e6:g} MB the anthropic SDK takes "
                       f"{theirs['seconds'].median / ours_small['seconds'].median:.0f}× "
                       f"nacelle's time (its time grows with the square of the answer)")
    return [
        ratio_row("8a", f"memory, {size // 1_000_000} MB streamed: peak RSS growth ÷ text size",
                  ours["growth"].median if ours else None, "≤ 3×", 3.0, at_least=False,
                  figures=figures, label="memory: growth ÷ text"),
        Row("8b", f"memory, {peer_size / 1e6:g} MB streamed: anthropic SDK ÷ nacelle peak growth",
            peer_ratio, "(none)", None, [], label="memory: SDK ÷ nacelle"),
    ]
