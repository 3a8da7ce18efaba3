"""Where a text delta's CPU goes on the Chat Completions, Responses, Gemini and Bedrock
wires, layer by layer, for the floor and for nacelle: ``delta_cost.py``'s method on
rows 10 and 15–17's bodies.

Run by hand::

    benchmarks/.env/bin/python benchmarks/wire_cost.py   # --wire chat,responses,gemini,bedrock --runs 9

The same server and bodies as rows 10, 15, 16 and 17 (``server_proc.py`` in its own
process, 20,000 text deltas in 64 KiB writes). Each stage adds one layer to the one
before it, so the difference between two stages is what that layer costs; stages
run interleaved, ``--runs`` times each, timed by this thread's CPU time; figures are
medians in µs per text delta [min–max].

- ``floor: http``: ``requests``, ``raw.read1`` to the end of the body, nothing else;
- ``floor``: the floor client of the row (``clients.py``: lines and ``json.loads``;
  on Bedrock the frames split by length, both CRCs checked, the payload's JSON, its
  base64 and the event's JSON);
- ``nacelle: decode (in memory)``: the body's decoder alone on the chunks the HTTP
  reads returned (``SSEDecoder``; on Bedrock ``BedrockEvents``: framing, CRCs,
  headers, the chunk's base64);
- ``nacelle: iter_sse``: the transport's ``events()`` (HTTP reads, time limits,
  cancellation checks, the decoder);
- ``nacelle: + accumulator``: the backend's accumulator ``feed`` of each event (its
  ``parse_json`` included);
- ``nacelle: backend.turn``: the whole turn (``_turn.stream_turn``);
- ``nacelle: Agent.stream``: what the rows measure.

Benchmark-only: imports the standard library, ``requests``, nacelle and the
benchmark modules beside it.
"""

import argparse
import os
import statistics
import sys
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import requests  # noqa: E402

import nacelle  # noqa: E402
from nacelle.context import RunContext  # noqa: E402
from nacelle.sse import SSEDecoder  # noqa: E402

import clients  # noqa: E402
from delta_cost import measure, print_layers  # noqa: E402
from measure import ServerProcess  # noqa: E402

DELTAS = 20_000
KEY = "bench-key-not-secret"


def backend_of(wire: str, url: str) -> Any:
    """The backend and its accumulator's maker, as ``clients.py`` builds them."""
    if wire == "chat":
        from nacelle.backends import chat
        from nacelle.backends.chat.stream import Accumulator as Chat
        return chat.Backend(KEY, model="gpt-5-mini", base_url=url, max_retries=0), Chat
    if wire == "responses":
        from nacelle.backends import openai
        from nacelle.backends.openai.stream import Accumulator as Responses
        return openai.Backend(KEY, model="gpt-5-mini", base_url=url, max_retries=0), Responses
    if wire == "gemini":
        from nacelle.backends import gemini
        from nacelle.backends.gemini.stream import Accumulator as Gemini
        return gemini.Backend(KEY, model=clients.GEMINI, base_url=url, max_retries=0), Gemini
    from nacelle.backends import anthropic
    from nacelle.backends.anthropic.bedrock_stream import BedrockAccumulator
    return anthropic.bedrock(model=clients.BEDROCK, region="us-east-1", api_key=KEY,
                             base_url=url, max_retries=0), BedrockAccumulator


def readers(wire: str, url: str) -> Dict[str, Callable[[], None]]:
    """The stages, in order, each a function reading one whole stream."""
    backend, accumulator = backend_of(wire, url)
    transport = backend._endpoint.transport
    agent = nacelle.Agent(backend, "bench", max_tokens=1024)
    conversation = [nacelle.user_text("go")]
    request = agent.request(conversation)
    path, body = {
        "chat": ("/chat/completions", {"messages": clients.PROMPT, "stream": True}),
        "responses": ("/responses", {"input": "go", "stream": True}),
        "gemini": (f"/models/{clients.GEMINI}:streamGenerateContent?alt=sse", {}),
        "bedrock": (f"/model/{clients.BEDROCK}/invoke-with-response-stream",
                    {"messages": clients.PROMPT}),
    }[wire]
    session = requests.Session()
    chunks: List[bytes] = []
    floor = (clients.CLIENTS["floor-" + wire])(url)[0]

    def http() -> None:
        response = session.post(url + path, json=body, stream=True)
        read1 = response.raw.read1
        del chunks[:]
        while True:
            data = read1(65536)
            if not data:
                break
            chunks.append(data)
        response.close()

    def decode() -> None:
        decoder = transport.decoder() if transport.decoder else SSEDecoder()
        for chunk in chunks:
            decoder.feed(chunk)
        decoder.close()

    def events() -> None:
        ctx = RunContext()
        for _ in transport.events(transport.post_stream(path, body, ctx), ctx):
            pass

    def accumulated() -> None:
        ctx = RunContext()
        state = accumulator()
        for event in transport.events(transport.post_stream(path, body, ctx), ctx):
            state.feed(event)
        state.finish()

    def turn() -> None:
        for _ in backend.turn(request, request.messages, RunContext()):
            pass

    def stream() -> None:
        for _ in agent.stream(conversation):
            pass

    return {"floor: http": http, "floor": floor, "nacelle: decode (in memory)": decode,
            "nacelle: iter_sse": events, "nacelle: + accumulator": accumulated,
            "nacelle: backend.turn": turn, "nacelle: Agent.stream": stream}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wire", default="chat,responses,gemini,bedrock")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with ServerProcess() as server:
        for wire in args.wire.split(","):
            spent = measure(readers, wire, server, args.runs)
            print_layers(wire, args.runs, spent, aside="nacelle: decode (in memory)", width=30)
            floor = statistics.median(spent["floor"])
            print(f"Agent.stream ÷ floor: {statistics.median(spent['nacelle: Agent.stream']) / floor:.2f}×")


if __name__ == "__main__":
    main()
