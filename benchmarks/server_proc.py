"""The benchmark model server: a loopback HTTP server run in a process of its own.

Every streaming row points its clients here, so no client shares the server's GIL
and the server's cost never lands on a client's clock. Start it as a process::

    python benchmarks/server_proc.py        # prints the port on one line, serves
                                            # until stdin closes or SIGTERM

A client picks what it gets through the path of its ``base_url``,
``http://127.0.0.1:PORT/<wire>/<kind>/<n>``, to which the SDKs append their own paths
(``/v1/messages``, ``/chat/completions``, ``/responses``,
``/models/M:streamGenerateContent?alt=sse``, ``/model/M/invoke-with-response-stream``):

- ``wire``: ``anthropic``, ``openrouter``, ``chat``, ``responses``, ``gemini`` or
  ``bedrock`` (built with ``nacelle.testing.wire`` and ``nacelle.testing.clouds``, so
  the bodies carry what the providers send: pings, role repeats, usage chunks,
  sequence numbers; ``chat`` is the Chat Completions body without OpenRouter's
  keepalive comments, as an OpenAI-compatible server sends it; ``responses`` the
  OpenAI Responses stream; ``gemini`` Gemini's ``alt=sse`` stream, one whole
  ``GenerateContentResponse`` per event; ``bedrock`` the Anthropic stream in AWS
  event-stream messages, ``application/vnd.amazon.eventstream``, as Bedrock's
  ``InvokeModelWithResponseStream`` answers);
- ``kind``: ``text`` (``n`` short text deltas), ``big`` (``n`` bytes of text in
  256-byte deltas), ``ttfe`` (the first delta is flushed, then the stream stalls
  2 s before the rest), ``tools`` (``n`` calls of ``sleep_02`` in one turn; a
  request that already carries tool results gets a final text answer) or ``args``
  (Anthropic only: one call of ``note`` whose input streams in ``n`` deltas of 10
  characters, then a final text answer) or ``delegate`` (one call of ``subagent``
  with a task, then a final text answer: a parent whose sub-agent talks to a
  ``text`` URL).

Bodies are built once per URL and written in 64 KiB HTTP chunks: a benchmark of
client decoding must not be paced by a server writing one tiny chunk per event.
OpenRouter bodies get a ``: OPENROUTER PROCESSING`` comment every 100 events, as a
slow upstream would send. A request without ``"stream": true`` gets the whole
message as JSON (the Anthropic SDK's tool runner asks that way), except on the
``gemini`` and ``bedrock`` wires, whose streaming is named by the URL, not the body.

Benchmark-only: imports the standard library and ``nacelle.testing.wire``. It binds
127.0.0.1 only.
"""

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from nacelle.testing.clouds import EVENTSTREAM, bedrock_stream  # noqa: E402
from nacelle.testing.wire import (  # noqa: E402
    KEEPALIVE, anthropic_stream, gemini_stream, openrouter_stream, responses_stream, sse_event,
)

WRITE = 64 * 1024
STALL = 2.0
BIG_DELTA = 256
ARG_DELTA = 10  # characters per input_json_delta of the ``args`` kind
WORDS = (" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog.",
         " Résumé", " naïve", " café", " 42", ",", " and", " then", " it", " slept")
MODEL = "claude-opus-5"
URL_STREAMED = ("gemini", "bedrock")  # wires whose URL, not body, asks for a stream


def text_deltas(count):
    """``count`` model-sized deltas (one to three words, some non-ASCII)."""
    return ["".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(1 + i % 3))
            for i in range(count)]


def big_deltas(size):
    """``size`` bytes of ASCII text in 256-byte deltas."""
    line = ("lorem ipsum dolor sit amet " * 10)[:BIG_DELTA]
    count, rest = divmod(size, BIG_DELTA)
    return [line] * count + ([line[:rest]] if rest else [])


def stream_events(wire, deltas, tool_calls=()):
    """The SSE body of one turn, one bytes item per event."""
    if wire == "anthropic" and tool_calls and tool_calls[0][0] == "toolu_args":
        return args_stream(tool_calls[0])
    if wire == "anthropic":
        return anthropic_stream(deltas, tool_calls=tool_calls)
    if wire == "chat":
        return openrouter_stream(deltas, tool_calls=tool_calls, keepalives=0, model="gpt-5-mini")
    if wire == "responses":
        return responses_stream(deltas, tool_calls=tool_calls)
    if wire == "gemini":
        return gemini_stream(deltas, tool_calls=tool_calls)
    if wire == "bedrock":
        return bedrock_stream(anthropic_stream(deltas, tool_calls=tool_calls))
    events = openrouter_stream(deltas, tool_calls=tool_calls, keepalives=2)
    spaced = []
    for number, event in enumerate(events):
        spaced.append(event)
        if number % 100 == 99:
            spaced.append(KEEPALIVE)
    return spaced


def args_stream(call):
    """An Anthropic turn of one call whose input streams in ARG_DELTA-character
    ``input_json_delta`` events, as a model writing a long argument sends it."""
    call_id, name, arguments = call
    events = anthropic_stream((), tool_calls=[(call_id, name, "")], pings=False)
    stop = next(i for i, e in enumerate(events) if b"content_block_stop" in e)
    deltas = [sse_event({"type": "content_block_delta", "index": 0, "delta": {
        "type": "input_json_delta", "partial_json": arguments[i:i + ARG_DELTA]}},
        event="content_block_delta") for i in range(0, len(arguments), ARG_DELTA)]
    return events[:stop] + deltas + events[stop:]


def json_message(wire, deltas, tool_calls=()):
    """The same turn as one non-streamed JSON answer."""
    if wire == "anthropic":
        content = [{"type": "text", "text": "".join(deltas)}] if deltas else []
        content += [{"type": "tool_use", "id": i, "name": n, "input": json.loads(a)}
                    for i, n, a in tool_calls]
        return {"id": "msg_bench", "type": "message", "role": "assistant", "model": MODEL,
                "content": content, "stop_reason": "tool_use" if tool_calls else "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": 25, "output_tokens": 12}}
    message = {"role": "assistant", "content": "".join(deltas) or None}
    if tool_calls:
        message["tool_calls"] = [{"id": i, "type": "function",
                                  "function": {"name": n, "arguments": a}}
                                 for i, n, a in tool_calls]
    return {"id": "gen-bench", "object": "chat.completion", "created": 1754800000,
            "model": MODEL, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}}


def has_tool_results(request):
    for message in request.get("messages", ()):
        if message.get("role") == "tool":
            return True
        content = message.get("content")
        if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return True
    return False


def turn_for(kind, n, request):
    """(deltas, tool_calls) of the turn a request to ``kind``/``n`` gets."""
    if kind == "text":
        return text_deltas(n), ()
    if kind == "big":
        return big_deltas(n), ()
    if kind == "ttfe":
        return text_deltas(max(n, 2)), ()
    if kind == "args":
        if has_tool_results(request):
            return ["All ", "done."], ()
        # {"text": "xx…"}: 12 characters of JSON around the text, n deltas in all
        return [], (("toolu_args", "note", json.dumps({"text": "x" * (ARG_DELTA * n - 12)})),)
    if kind == "delegate":
        if has_tool_results(request):
            return ["All ", "done."], ()
        return [], (("toolu_delegate", "subagent", json.dumps({"task": "go"})),)
    if kind == "tools":
        if has_tool_results(request):
            return ["All ", "done."], ()
        return [], tuple((f"toolu_{i:02d}", "sleep_02", "{}") for i in range(n))
    raise ValueError(f"unknown kind {kind!r}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "bench"
    sys_version = ""

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format, *args):  # noqa: A002 - quiet: stdout carries the port
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        try:
            _, wire, kind, n = self.path.split("/", 4)[:4]
            deltas, calls = turn_for(kind, int(n), request)
        except (ValueError, IndexError) as exc:
            return self._send(404, "application/json", [json.dumps(
                {"error": {"type": "not_found", "message": str(exc)}}).encode()])
        if not request.get("stream") and wire not in URL_STREAMED:
            body = json.dumps(json_message(wire, deltas, calls)).encode()
            return self._send(200, "application/json", [body])
        head, tail = self.server.body(self.path, wire, deltas, calls)
        media = EVENTSTREAM if wire == "bedrock" else "text/event-stream"
        if kind == "ttfe":
            return self._send(200, media, [head, None, tail])
        body = head + tail
        self._send(200, media, [body[i:i + WRITE] for i in range(0, len(body), WRITE)])

    def _send(self, status, content_type, pieces):
        """Write ``pieces`` as HTTP chunks; a None piece is a stall of STALL seconds."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for piece in pieces:
                if piece is None:
                    self.wfile.flush()
                    time.sleep(STALL)
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client left early (time-to-first-event runs do)
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self._cache = {}
        self._lock = threading.Lock()

    def handle_error(self, request, client_address):
        pass  # a client that leaves early (time to first event) is expected, not news

    def body(self, path, wire, deltas, calls):
        """The SSE body for ``path``, split after its first text delta."""
        key = (path, calls)
        with self._lock:
            if key not in self._cache:
                events = stream_events(wire, deltas, calls)
                first = next((i for i, event in enumerate(events) if is_text_delta(event)),
                             len(events) - 1)
                self._cache[key] = (b"".join(events[:first + 1]), b"".join(events[first + 1:]))
            return self._cache[key]


def is_text_delta(event):
    return b'"text_delta"' in event or (b'"content":"' in event
                                        and b'"content":""' not in event)


def main():
    server = Server()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # the parent closes our stdin (or exits) to stop us
    server.shutdown()


if __name__ == "__main__":
    main()
