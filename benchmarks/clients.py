"""The streaming clients the benchmarks compare, each run in a process of its own.

``python benchmarks/clients.py MODE CLIENT URL [--runs N]`` imports one client, warms
it up on one full stream, measures, and prints one JSON object on stdout. Modes:

- ``throughput``: ``runs`` whole streams; per run the wall and CPU seconds (CPU of
  the whole process, every thread included) and the text deltas received.
- ``marginal``: ``runs`` whole streams of ``URL`` each followed by one of
  ``--short-url`` (the same body, fewer deltas), alternately in this process; per run
  pair both CPU figures and both counts. What a delta costs is the difference over
  the difference in deltas: what a run costs once (its turns' requests, a tool, a
  parent's own turns) cancels out.
- ``ttfe``: ``runs`` requests to a stream that stalls after its first delta; per
  run the seconds from the call to the first text delta, then the stream is closed.
- ``memory``: one stream, keeping the answer as a user would; the peak RSS growth
  over the RSS before the request (the kernel's high-water mark is reset first
  through ``/proc/self/clear_refs``, so imports and warm-up do not count).

Clients (``URL`` is the server's base URL for the wanted body):

- ``nacelle-anthropic`` / ``nacelle-openrouter`` / ``nacelle-chat`` /
  ``nacelle-responses`` / ``nacelle-gemini`` / ``nacelle-bedrock``: ``Agent.stream``
  on the backend (``chat`` is ``chat.Backend`` with the plain Chat Completions
  dialect, ``responses`` is ``openai.Backend``, ``bedrock`` is ``anthropic.bedrock``
  with an API key), no tools, counting TEXT events.
- ``nacelle-arguments-ignored`` / ``nacelle-arguments-read``: ``Agent.stream`` on the
  Anthropic wire with one tool, for a call whose input streams in many deltas, counting
  TOOL_INPUT events; ``-read`` also reads each one's id, name and delta.
- ``nacelle-subagent-forwarded`` / ``nacelle-subagent``: a parent ``Agent.stream`` on
  the Anthropic wire (a ``delegate`` URL) whose model calls a ``subagent_tool`` once,
  the sub-agent streaming the ``text`` body of the same size; ``-forwarded`` with
  ``forward=True``, counting and reading the forwarded TEXT events.
- ``sdk-anthropic``: the anthropic SDK's ``messages.stream`` text iterator.
- ``sdk-openai``: the openai SDK's ``chat.completions.create(stream=True)``,
  counting chunks with content.
- ``sdk-openai-responses``: the openai SDK's ``responses.create(stream=True)``,
  counting ``response.output_text.delta`` events.
- ``sdk-bedrock``: the anthropic SDK's ``AnthropicBedrock`` (SigV4 through botocore,
  with fixed fake keys) ``messages.stream`` text iterator.
- ``floor-anthropic`` / ``floor-openrouter`` / ``floor-chat`` / ``floor-responses`` /
  ``floor-gemini``: ``requests`` with ``raw.read1``, split on ``b"\\n"``,
  ``json.loads`` of each data line, nothing else — the least any Python client on
  ``requests`` must do.
- ``floor-bedrock``: ``requests`` with ``raw.read1``; the AWS event-stream frames
  split by their length prefix, both CRC32s checked (the prelude's and the
  message's: a client that trusts a length it has not checked can be made to wait
  for gigabytes, and botocore checks both), the payload ``json.loads``-ed, its
  ``bytes`` base64-decoded and ``json.loads``-ed; headers are not parsed.

Every client counts the same thing (text deltas), so rates compare directly; the
floor counts every data line it parsed, and its rate is reported per text delta.

Benchmark-only: imports nacelle, requests and the peer SDKs (when installed).
"""

import argparse
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

KEY = "bench-key-not-secret"
MODEL = "claude-opus-5"
PROMPT = [{"role": "user", "content": "go"}]
GEMINI = "gemini-2.5-flash"
BEDROCK = "anthropic.claude-sonnet-4-5-20250929-v1:0"


# -- clients: build(url) -> (run, first); run() -> deltas, first() -> seconds -------------


def nacelle_client(wire):
    def build(url):
        import nacelle
        if wire == "anthropic":
            from nacelle.backends import anthropic
            backend = anthropic.Backend(KEY, base_url=url, max_retries=0)
        elif wire == "chat":
            from nacelle.backends import chat
            backend = chat.Backend(KEY, model="gpt-5-mini", base_url=url, max_retries=0)
        elif wire == "responses":
            from nacelle.backends import openai
            backend = openai.Backend(KEY, model="gpt-5-mini", base_url=url, max_retries=0)
        elif wire == "gemini":
            from nacelle.backends import gemini
            backend = gemini.Backend(KEY, model=GEMINI, base_url=url, max_retries=0)
        elif wire == "bedrock":
            from nacelle.backends import anthropic
            backend = anthropic.bedrock(model=BEDROCK, region="us-east-1", api_key=KEY,
                                        base_url=url, max_retries=0)
        else:
            from nacelle.backends import openrouter
            backend = openrouter.Backend(KEY, model="anthropic/" + MODEL, base_url=url,
                                         max_retries=0)
        agent = nacelle.Agent(backend, "bench", max_tokens=1024)
        conversation = [nacelle.user_text("go")]
        text = nacelle.Kind.TEXT

        def run():
            return sum(1 for event in agent.stream(conversation) if event.kind is text)

        def first():
            started = time.perf_counter()
            events = agent.stream(conversation)
            for event in events:
                if event.kind is text:
                    took = time.perf_counter() - started
                    events.close()
                    return took
            raise RuntimeError("no text")

        def keep():
            return agent.run(conversation).text

        return run, first, keep
    return build


def nacelle_arguments(read):
    """``Agent.stream`` on the Anthropic wire with one tool, for a turn whose call's
    input streams in many deltas: counting TOOL_INPUT events, and with ``read`` also
    reading what a display would (the call's id and name, the delta's length)."""
    def build(url):
        import nacelle
        from nacelle.backends import anthropic

        @nacelle.tool
        def note(text: str) -> str:
            """Keep a note."""
            return "kept"

        agent = nacelle.Agent(anthropic.Backend(KEY, base_url=url, max_retries=0), "bench",
                              tools=[note], max_tokens=1024)
        conversation = [nacelle.user_text("go")]
        written = nacelle.Kind.TOOL_INPUT

        def run():
            count = 0
            if read:
                shown = 0
                for event in agent.stream(conversation):
                    if event.kind is written:
                        tool = event.tool
                        shown += len(event.text) + len(tool.id) + len(tool.name)
                        count += 1
            else:
                for event in agent.stream(conversation):
                    if event.kind is written:
                        count += 1
            return count

        return run, None, None
    return build


def nacelle_subagent(forward):
    """A parent ``Agent.stream`` on the Anthropic wire whose model calls a sub-agent
    (``subagent_tool``) once; the sub-agent streams the ``text`` body of the same
    size. With ``forward``, the child's events come through the parent's stream and
    each forwarded TEXT is read (its text and ``agent``); without, the parent's
    stream has only its own events and the child's run is the tool's work."""
    def build(url):
        import nacelle
        from nacelle.backends import anthropic

        child_url = url.replace("/anthropic/delegate/", "/anthropic/text/")
        child = nacelle.Agent(anthropic.Backend(KEY, base_url=child_url, max_retries=0),
                              "bench", max_tokens=1024)
        agent = nacelle.Agent(anthropic.Backend(KEY, base_url=url, max_retries=0), "bench",
                              tools=[nacelle.subagent_tool(child, forward=forward)],
                              max_tokens=1024)
        conversation = [nacelle.user_text("go")]
        text = nacelle.Kind.TEXT

        def run():
            count = shown = 0
            for event in agent.stream(conversation):
                if event.kind is text and event.agent:
                    shown += len(event.text) + len(event.agent)
                    count += 1
            return count

        return run, None, None
    return build


def sdk_anthropic(url):
    import anthropic
    client = anthropic.Anthropic(api_key=KEY, base_url=url, max_retries=0)

    def open_stream():
        return client.messages.stream(model=MODEL, max_tokens=1024, messages=PROMPT)

    def run():
        with open_stream() as stream:
            return sum(1 for _ in stream.text_stream)

    def first():
        started = time.perf_counter()
        with open_stream() as stream:
            for _ in stream.text_stream:
                return time.perf_counter() - started
        raise RuntimeError("no text")

    def keep():
        with open_stream() as stream:
            for _ in stream.text_stream:
                pass
            return stream.get_final_message().content[0].text

    return run, first, keep


def sdk_openai(url):
    import openai
    client = openai.OpenAI(api_key=KEY, base_url=url, max_retries=0)

    def open_stream():
        return client.chat.completions.create(model="anthropic/" + MODEL, messages=PROMPT,
                                              stream=True)

    def run():
        count = 0
        for chunk in open_stream():
            if chunk.choices and chunk.choices[0].delta.content:
                count += 1
        return count

    def first():
        started = time.perf_counter()
        stream = open_stream()
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                took = time.perf_counter() - started
                stream.close()
                return took
        raise RuntimeError("no text")

    def keep():
        return "".join(chunk.choices[0].delta.content or "" for chunk in open_stream()
                       if chunk.choices)

    return run, first, keep


def sdk_openai_responses(url):
    import openai
    client = openai.OpenAI(api_key=KEY, base_url=url, max_retries=0)

    def open_stream():
        return client.responses.create(model="gpt-5-mini", input="go", stream=True)

    def run():
        count = 0
        for event in open_stream():
            if event.type == "response.output_text.delta":
                count += 1
        return count

    return run, None, None


def sdk_bedrock(url):
    from anthropic import AnthropicBedrock
    client = AnthropicBedrock(aws_access_key="AKIDBENCHNOTSECRET", aws_secret_key=KEY,
                              aws_region="us-east-1", base_url=url, max_retries=0)

    def run():
        with client.messages.stream(model=BEDROCK, max_tokens=1024, messages=PROMPT) as stream:
            return sum(1 for _ in stream.text_stream)

    return run, None, None


def floor_bedrock(url):
    """The least a client of Bedrock's event stream must do: split the frames by their
    length prefix, check both CRCs, decode the payload's JSON, its base64 ``bytes``
    and the JSON event inside."""
    import base64
    import struct
    import zlib

    import requests
    session = requests.Session()
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 1024, "messages": PROMPT}
    path = f"/model/{BEDROCK}/invoke-with-response-stream"

    def run():
        response = session.post(url + path, json=body, stream=True)
        read1, loads, crc32 = response.raw.read1, json.loads, zlib.crc32
        unpack, b64decode = struct.Struct(">III").unpack_from, base64.b64decode
        parsed, buffer = 0, b""
        while True:
            data = read1(65536)
            if not data:
                break
            buffer += data
            at, size = 0, len(buffer)
            while size - at >= 12:
                total, headers, prelude = unpack(buffer, at)
                if crc32(buffer[at:at + 8]) != prelude:
                    raise ValueError("prelude CRC")
                if size - at < total:
                    break
                frame = buffer[at:at + total]
                if crc32(frame[:-4]) != int.from_bytes(frame[-4:], "big"):
                    raise ValueError("message CRC")
                loads(b64decode(loads(frame[12 + headers:-4])["bytes"]))
                parsed += 1
                at += total
            buffer = buffer[at:]
        response.close()
        return parsed

    return run, None, None


def floor_client(wire):
    path = {"anthropic": "/v1/messages", "responses": "/responses",
            "gemini": f"/models/{GEMINI}:streamGenerateContent?alt=sse"}.get(
        wire, "/chat/completions")

    def build(url):
        import requests
        session = requests.Session()
        body = {"model": MODEL, "max_tokens": 1024, "messages": PROMPT, "stream": True}

        def run():
            response = session.post(url + path, json=body, stream=True)
            read1, loads = response.raw.read1, json.loads
            parsed, rest = 0, b""
            while True:
                data = read1(65536)
                if not data:
                    break
                lines = (rest + data).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    if line.startswith(b"data: ") and line != b"data: [DONE]":
                        loads(line[6:])
                        parsed += 1
            response.close()
            return parsed

        return run, None, None
    return build


CLIENTS = {
    "nacelle-anthropic": nacelle_client("anthropic"),
    "nacelle-openrouter": nacelle_client("openrouter"),
    "nacelle-chat": nacelle_client("chat"),
    "nacelle-responses": nacelle_client("responses"),
    "nacelle-gemini": nacelle_client("gemini"),
    "nacelle-bedrock": nacelle_client("bedrock"),
    "sdk-openai-responses": sdk_openai_responses,
    "sdk-bedrock": sdk_bedrock,
    "floor-responses": floor_client("responses"),
    "floor-gemini": floor_client("gemini"),
    "floor-bedrock": floor_bedrock,
    "sdk-anthropic": sdk_anthropic,
    "sdk-openai": sdk_openai,
    "nacelle-arguments-ignored": nacelle_arguments(False),
    "nacelle-arguments-read": nacelle_arguments(True),
    "nacelle-subagent-forwarded": nacelle_subagent(True),
    "nacelle-subagent": nacelle_subagent(False),
    "floor-anthropic": floor_client("anthropic"),
    "floor-openrouter": floor_client("openrouter"),
    "floor-chat": floor_client("chat"),
}


# -- modes ----------------------------------------------------------------------------


def throughput(client, url, runs):
    run, _, _ = client(url)
    count = run()  # warm-up: imports, connection, caches
    samples = []
    for _ in range(runs):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        got = run()
        samples.append({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                        "events": got})
    return {"warmup_events": count, "runs": samples}


def marginal(client, url, short_url, runs):
    run, _, _ = client(url)
    short, _, _ = client(short_url)
    count = run()  # warm-up: imports, connection, caches
    short()
    samples = []
    for _ in range(runs):
        gc.collect()
        cpu = time.process_time()
        got = run()
        long_cpu = time.process_time() - cpu
        gc.collect()
        cpu = time.process_time()
        short_got = short()
        samples.append({"cpu": long_cpu, "short_cpu": time.process_time() - cpu,
                        "events": got, "short_events": short_got})
    return {"warmup_events": count, "runs": samples}


def ttfe(client, url, runs, warm_url):
    run, first, _ = client(url)
    client(warm_url)[0]()  # warm-up on a full stream: imports and lazy set-up
    first()
    return {"runs": [first() for _ in range(runs)]}


def memory(client, url, warm_url):
    run, _, keep = client(url)
    client(warm_url)[0]()
    gc.collect()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # resets VmHWM to the current RSS
    before = _status("VmRSS")
    started = time.perf_counter()
    text = keep()
    took = time.perf_counter() - started
    peak = _status("VmHWM")
    return {"before": before, "peak": peak, "growth": peak - before, "text_bytes": len(text),
            "seconds": took}


def _status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("throughput", "marginal", "ttfe", "memory"))
    parser.add_argument("client", choices=sorted(CLIENTS))
    parser.add_argument("url")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--short-url", help="the same body with fewer deltas (marginal)")
    parser.add_argument("--warm-url", help="a small full stream for warm-up (ttfe, memory)")
    args = parser.parse_args()
    client = CLIENTS[args.client]
    try:
        if args.mode == "throughput":
            result = throughput(client, args.url, args.runs)
        elif args.mode == "marginal":
            result = marginal(client, args.url, args.short_url, args.runs)
        elif args.mode == "ttfe":
            result = ttfe(client, args.url, args.runs, args.warm_url)
        else:
            result = memory(client, args.url, args.warm_url)
    except ImportError as exc:
        result = {"missing": str(exc)}
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
