"""SSE decoding throughput and time to first event, side by side.

Run by hand (not part of the test suite)::

    python3 -m venv benchmarks/.env
    benchmarks/.env/bin/pip install -r benchmarks/requirements.txt
    benchmarks/.env/bin/python benchmarks/sse_decode.py          # --mb 50 --runs 5

Throughput: ~50 MB of Anthropic-shaped and OpenRouter-shaped streams (built with
``nacelle.testing.wire``, keepalives included) fed in 16 KiB chunks to nacelle's
``SSEDecoder``, the anthropic and openai SDKs' SSE decoders (reported as not
installed when missing), and a floor that only splits the bytes on ``b"\\n"``,
decoding nothing. Medians of the runs, in MB/s.

Time to first event: ``iter_sse`` against FakeServer, which flushes one event and then
stalls 2 s; measured from the response headers and from the start of the request to
the first event, in chunked and close-delimited modes.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from nacelle.sse import SSEDecoder  # noqa: E402
from nacelle.testing.wire import anthropic_stream, openrouter_stream  # noqa: E402

CHUNK = 16 * 1024
FLOOR = "floor: split on LF"
WORDS = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
         " Résumé", " naïve", " 日本語", " café", " —", " 😀", "\n\n", " `code`", " 42", ",")


def text_deltas(count, seed):
    return ["".join(WORDS[(seed + i * k) % len(WORDS)] for k in range(1 + i % 4))
            for i in range(count)]


def anthropic_body(size):
    parts, total, seed = [], 0, 0
    while total < size:
        message = b"".join(anthropic_stream(
            text_deltas(120, seed), thinking_deltas=text_deltas(40, seed + 1),
            tool_calls=[("toolu_01A09q90qw90lq917835lq9", "search_events",
                         '{"query": "what happened today in Zürich", "limit": 10}')],
            usage={"input_tokens": 2679, "output_tokens": 503}))
        parts.append(message)
        total += len(message)
        seed += 1
    return b"".join(parts)


def openrouter_body(size):
    parts, total, seed = [], 0, 0
    while total < size:
        message = b"".join(openrouter_stream(
            text_deltas(120, seed), reasoning_deltas=text_deltas(30, seed + 1),
            tool_calls=[("toolu_bdrk_01L9", "search_events", '{"query": "Zürich", "limit": 10}')],
            keepalives=3))
        parts.append(message)
        total += len(message)
        seed += 1
    return b"".join(parts)


def floor(chunks):
    count, rest = 0, b""
    for chunk in chunks:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        count += len(lines)
    return count


def nacelle_decoder(chunks):
    decoder = SSEDecoder()
    count = 0
    for chunk in chunks:
        count += len(decoder.feed(chunk))
    decoder.close()
    return count


def sdk_decoder(module_name):
    try:
        module = __import__(module_name + "._streaming", fromlist=["SSEDecoder"])
    except ImportError:
        return None

    def run(chunks):
        return sum(1 for _ in module.SSEDecoder().iter_bytes(iter(chunks)))

    return run


def median_rate(run, chunks, size, runs):
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = run(chunks)
        times.append(time.perf_counter() - started)
    return size / statistics.median(times) / 1e6, result


def throughput(mb, runs):
    contenders = [(FLOOR, floor), ("nacelle SSEDecoder", nacelle_decoder),
                  ("anthropic SDK", sdk_decoder("anthropic")), ("openai SDK", sdk_decoder("openai"))]
    print(f"Throughput, {mb} MB per stream, {CHUNK // 1024} KiB chunks, median of {runs} runs")
    print(f"{'stream':<12}{'decoder':<22}{'MB/s':>10}{'events':>10}")
    for label, build in (("anthropic", anthropic_body), ("openrouter", openrouter_body)):
        body = build(mb * 10**6)
        chunks = [body[i:i + CHUNK] for i in range(0, len(body), CHUNK)]
        rates = {}
        for name, run in contenders:
            if run is None:
                print(f"{label:<12}{name:<22}{'not installed':>20}")
                continue
            rate, count = median_rate(run, chunks, len(body), runs)
            rates[name] = rate
            shown = "lines" if name == FLOOR else count
            print(f"{label:<12}{name:<22}{rate:>10.1f}{shown:>10}")
        ours = rates["nacelle SSEDecoder"]
        sdks = [rates[n] for n in ("anthropic SDK", "openai SDK") if n in rates]
        if sdks:
            print(f"{label:<12}{'nacelle / faster SDK':<22}{ours / max(sdks):>9.2f}x   (target >= 1.5x)")
        print(f"{label:<12}{'floor / nacelle':<22}{rates[FLOOR] / ours:>9.2f}x"
              "   (target <= 8x)")


def time_to_first_event(runs):
    from nacelle.backend import RunContext
    from nacelle.backends._http import Transport
    from nacelle.testing import FakeServer, Reply

    print(f"\nTime to first event through iter_sse (server stalls 2 s after it), median of {runs}")
    print(f"{'mode':<10}{'after headers':>16}{'after request':>16}   (target < 20 ms)")
    for mode in ("chunked", "close"):
        after_headers, after_request = [], []
        with FakeServer() as server:
            transport = Transport(server.url, {"x-api-key": "bench"})
            for _ in range(runs):
                server.queue("/v1/messages", Reply(
                    chunks=[b'event: ping\ndata: {"type": "ping"}\n\n', (b"data: late\n\n", 2.0)],
                    mode=mode))
                ctx = RunContext()
                started = time.perf_counter()
                response = transport.post_stream("/v1/messages", {"model": "m"}, ctx)
                headers_at = time.perf_counter()
                events = transport.events(response, ctx)
                next(events)
                now = time.perf_counter()
                events.close()
                after_headers.append(now - headers_at)
                after_request.append(now - started)
        print(f"{mode:<10}{statistics.median(after_headers) * 1e3:>13.2f} ms"
              f"{statistics.median(after_request) * 1e3:>13.2f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=50, help="size of each stream in MB")
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median)")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}")
    throughput(args.mb, max(args.runs, 1))
    time_to_first_event(max(args.runs, 1))


if __name__ == "__main__":
    main()
