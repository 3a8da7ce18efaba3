"""``nacelle.mcp.server`` serving a few nacelle tools, for the tests that hold it to the
official MCP SDK's client (tests/test_mcp_server.py).

``python nacelle_server.py stdio`` serves on stdin/stdout; ``python nacelle_server.py
asgi PORT`` (uvicorn) or ``wsgi PORT`` (the standard library's threaded server) on
127.0.0.1:PORT at ``/mcp``. The tools: ``add`` (read-only, idempotent, closed world),
``remove_file`` (destructive by default), ``pixel`` (an image), ``report`` (a PDF and
a note), ``fails``, ``counts`` (progress), ``waits`` (sleeps until cancelled, noting
each cancel in ``cancelled``), ``stuck`` (ignores cancellation, past its 0.5 s
timeout), ``long_text`` (cut at ``max_result_chars``) and ``cancelled`` (how many
``waits`` calls were cancelled), and ``subagent``: an Agent on a scripted model.
"""

import sys
import threading
import time

from nacelle import Agent, Document, Image, Text, ToolContext, tool
from nacelle.mcp.server import asgi_app, run_stdio, wsgi_app
from nacelle.testing import ScriptedBackend

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
CANCELLED = []


@tool(read_only=True, idempotent=True, open_world=False)
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@tool
def remove_file(path: str) -> str:
    """Remove a file (it only says it would)."""
    return f"would remove {path}"


@tool(read_only=True)
def pixel() -> Image:
    """One transparent pixel."""
    return Image.from_bytes(PNG)


@tool(read_only=True)
def report() -> list:
    """A note and a PDF."""
    return [Text("the report:"), Document.from_bytes(PDF, title="report.pdf")]


@tool
def fails() -> str:
    """Always fails."""
    raise ValueError("the disk is full")


@tool
def counts(ctx: ToolContext) -> str:
    """Reports progress 1, 2 and 3 of 3."""
    for done in (1, 2, 3):
        ctx.progress(done, 3, f"step {done}")
    return "counted"


@tool
def waits(ctx: ToolContext) -> str:
    """Waits until cancelled (30 s at most)."""
    if ctx.cancelled.wait(30):
        CANCELLED.append(time.monotonic())
        return "cancelled"
    return "waited"


@tool(timeout=0.5)
def stuck() -> str:
    """Ignores cancellation for 2 s: past its timeout."""
    threading.Event().wait(2)
    return "late"


@tool(max_result_chars=100)
def long_text() -> str:
    """A long answer, cut at 100 characters."""
    return "x" * 1000


@tool(read_only=True)
def cancelled() -> int:
    """How many ``waits`` calls were cancelled."""
    return len(CANCELLED)


helper = Agent(ScriptedBackend(["The answer is 42."] * 20), "Answer briefly.")
TOOLS = [add, remove_file, pixel, report, fails, counts, waits, stuck, long_text, cancelled,
         helper]


def main() -> None:
    kind = sys.argv[1]
    if kind == "stdio":
        run_stdio(TOOLS, name="nacelle-test")
        return
    port = int(sys.argv[2])
    if kind == "asgi":
        import uvicorn

        uvicorn.run(asgi_app(TOOLS, name="nacelle-test"), host="127.0.0.1", port=port,
                    log_level="warning")
        return
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Threaded(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    # A WSGI server learns that a client left a stream only when a write fails: a
    # keepalive every second lets a cancelled 2026-07-28 call (its stream closed)
    # be noticed within that.
    make_server("127.0.0.1", port, wsgi_app(TOOLS, name="nacelle-test", keepalive=1.0),
                server_class=Threaded, handler_class=Quiet).serve_forever()


if __name__ == "__main__":
    main()
