"""MCP's stdio transport, server side (nacelle.mcp.server.stdio): one message a line
each way, both protocol generations told apart per request, calls on threads of their
own so ping and cancellation are answered meanwhile, and a cap on a line's length."""

import io
import json
import os
import threading
import time

import nacelle
from nacelle import ToolContext
from nacelle.mcp.server import run_stdio
from nacelle.mcp.server.dispatch import Dispatcher
from nacelle.mcp.server.served import ServedTools
from nacelle.mcp.server.stdio import serve_lines

CANCELLED = []
STARTED = threading.Event()


@nacelle.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@nacelle.tool
def waits(ctx: ToolContext) -> str:
    """Waits for its cancel."""
    STARTED.set()
    CANCELLED.append(ctx.cancelled.wait(10))
    return "done"


@nacelle.tool
def counts(ctx: ToolContext) -> str:
    """Counts to two."""
    ctx.progress(1, 2)
    ctx.progress(2, 2, "done")
    return "counted"


class Server:
    """run_stdio on a pair of pipes, in a thread; ``send`` a message, ``read`` a line."""

    def __init__(self, **options):
        client_in, self._to_server = os.pipe()
        self._from_server, server_out = os.pipe()
        self.stdin = os.fdopen(client_in, "rb")
        self.stdout = os.fdopen(server_out, "wb")
        self.writer = os.fdopen(self._to_server, "wb")
        self.reader = os.fdopen(self._from_server, "rb")
        self.thread = threading.Thread(target=run_stdio, args=([add, waits, counts],),
                                       kwargs=dict(stdin=self.stdin, stdout=self.stdout, **options),
                                       daemon=True)
        self.thread.start()

    def send(self, message):
        line = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.writer.write(line)
        self.writer.flush()

    def read(self):
        return json.loads(self.reader.readline())

    def close(self):
        self.writer.close()
        self.thread.join(5)
        self.stdout.close()
        self.reader.close()
        self.stdin.close()


def request(ident, method, params=None):
    message = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        message["params"] = params
    return message


def test_the_handshake_then_a_call_each_answer_one_line():
    server = Server()
    try:
        server.send(request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}))
        assert server.read()["result"]["protocolVersion"] == "2025-11-25"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.send(request(2, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}))
        assert server.read() == {"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": "2"}], "isError": False}}
    finally:
        server.close()


def test_a_request_with_a_2026_envelope_is_answered_statelessly_and_its_version_checked():
    server = Server()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    try:
        server.send(request(1, "server/discover", {"_meta": meta}))
        assert server.read()["result"]["supportedVersions"] == ["2026-07-28"]
        server.send(request(2, "tools/list", {"_meta": {
            **meta, "io.modelcontextprotocol/protocolVersion": "2031-01-01"}}))
        assert server.read()["error"]["code"] == -32022
    finally:
        server.close()


def test_a_line_past_the_cap_is_a_parse_error_and_the_next_line_is_read():
    out = io.BytesIO()
    lines = (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "' + b"x" * 5000
             + b'"}}\n' + json.dumps(request(2, "initialize", {})).encode() + b"\n")
    serve_lines(Dispatcher(ServedTools([add]), name="t", version="1"), io.BytesIO(lines), out,
                max_line=1000)
    first, second = [json.loads(line) for line in out.getvalue().splitlines()]
    assert first["error"]["code"] == -32700 and "1000 bytes" in first["error"]["message"]
    assert second["id"] == 2 and "protocolVersion" in second["result"]


def test_ping_is_answered_while_a_call_runs_and_a_cancelled_call_gets_no_answer():
    server = Server()
    CANCELLED.clear()
    STARTED.clear()
    try:
        server.send(request("slow", "tools/call", {"name": "waits", "arguments": {}}))
        server.send(request(2, "ping"))
        assert server.read() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        # Cancelled once it runs: a call cancelled before its tool starts never runs it.
        assert STARTED.wait(10)
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": "slow"}})
        for _ in range(200):
            if CANCELLED:
                break
            time.sleep(0.01)
        assert CANCELLED == [True]
        server.send(request(3, "ping"))
        assert server.read()["id"] == 3  # nothing was written for the cancelled call
    finally:
        server.close()


def test_progress_goes_out_as_notifications_before_the_result():
    server = Server()
    try:
        server.send(request(1, "tools/call", {"name": "counts", "arguments": {},
                                              "_meta": {"progressToken": "p"}}))
        first, second, result = server.read(), server.read(), server.read()
        assert first == {"jsonrpc": "2.0", "method": "notifications/progress",
                         "params": {"progressToken": "p", "progress": 1.0, "total": 2}}
        assert second["params"] == {"progressToken": "p", "progress": 2.0, "total": 2,
                                    "message": "done"}
        assert result["result"]["content"][0]["text"] == "counted"
    finally:
        server.close()


def test_the_end_of_input_cancels_what_still_runs():
    server = Server()
    CANCELLED.clear()
    server.send(request(1, "tools/call", {"name": "waits", "arguments": {}}))
    time.sleep(0.2)
    server.close()
    for _ in range(200):
        if CANCELLED:
            break
        time.sleep(0.01)
    assert CANCELLED == [True]
