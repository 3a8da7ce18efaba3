"""A small MCP server written with the official MCP Python SDK (``mcp`` on PyPI).

The client tests talk to it over stdio (``python sdk_server.py``) and over streamable
HTTP on loopback (``python sdk_server.py --http PORT``), so nacelle's client is held
to a server nobody on the project wrote. It needs Python 3.10+ and ``mcp`` 2.3 or
later (the test extra's pin), which serves both protocol generations: the 2025
handshake and the stateless 2026-07-28 revision.

Beyond tools it has resources (a text one, a PNG blob, a PDF blob, a binary blob),
a tool whose result holds every kind of medium (an image, an embedded PDF, audio, a
resource link), a prompt
with arguments, tools that add and remove tools (announced the way the client's
protocol generation hears it), a tool with structured output, one that asks the
user for their name (an elicitation: a 2025 server request, or a 2026
``input_required`` round), and one that reports progress.

``--drop-discover`` makes it a 2025 server that never answers the 2026 probe, and
``--start-delay`` one that starts slowly, for the client's era negotiation.
"""

import argparse
import base64
import os
import sys
import threading
import time
from typing import Annotated

import anyio
from pydantic import BaseModel

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, Elicit, Image, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError

from mcp.types import (
    AudioContent, BlobResourceContents, EmbeddedResource, ResourceLink, ToolAnnotations,
)

server = MCPServer("nacelle-test-server")

# How many ``slow`` calls were cancelled by the client; read back through a tool so a
# test can prove that ``notifications/cancelled`` reached the server.
CANCELLED = []
# Tiny but valid PNG (1x1, transparent).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)



def one_page_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text``, its cross-reference table at the right offsets
    (ISO 32000-1 §7.5)."""
    stream = f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
               b" /Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


PDF = one_page_pdf("Quarterly report: all is well.")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Repeat the text back."""
    return text


@server.tool()
def fail(reason: str) -> str:
    """Always fail, with the reason given."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
def picture() -> list:
    """Return a caption and a tiny PNG."""
    return ["a dot", Image(data=PNG, format="png")]


@server.tool()
def media() -> list:
    """Return a caption, a PNG, an embedded PDF, a moment of audio and a resource link."""
    return ["the report", Image(data=PNG, format="png"),
            EmbeddedResource(type="resource", resource=BlobResourceContents(
                uri="doc://report", mimeType="application/pdf", blob=b64(PDF))),
            AudioContent(type="audio", data=b64(b"RIFF" + bytes(40)), mimeType="audio/wav"),
            ResourceLink(type="resource_link", uri="note://readme", name="readme",
                         description="A short note.")]


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for a while, noting whether the client cancelled the call."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        CANCELLED.append(seconds)
        raise
    return f"slept {seconds}"


@server.tool()
def cancellations() -> int:
    """How many slow calls were cancelled so far."""
    return len(CANCELLED)


async def announce(ctx: Context) -> None:
    """Tell the client the tool list changed, the way its protocol generation hears it."""
    if ctx.protocol_version == "2026-07-28":
        await ctx.notify_tools_changed()  # to subscriptions/listen streams
    else:
        await ctx.session.send_tool_list_changed()


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` (it returns its input reversed) and announce it."""

    def reverse(text: str) -> str:
        return text[::-1]

    server.add_tool(reverse, name=name, description="Reverse the text.")
    await announce(ctx)
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Remove the tool called ``name`` and announce it."""
    server.remove_tool(name)
    await announce(ctx)
    return f"removed {name}"


class Weather(BaseModel):
    city: str
    celsius: float


@server.tool()
def weather(city: str) -> Weather:
    """The weather in a city, as structured content."""
    return Weather(city=city, celsius=21.5)


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
def greet(answer: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
    """Greet the user by the name they give when asked."""
    if isinstance(answer, AcceptedElicitation):
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


@server.tool()
async def count(to: int, ctx: Context) -> str:
    """Count to ``to``, reporting progress at each step."""
    for step in range(1, to + 1):
        await ctx.report_progress(step, to, f"step {step}")
    return f"counted to {to}"


@server.resource("note://readme", name="readme", mime_type="text/plain",
                 description="A short note.")
def readme() -> str:
    return "Read me first."


@server.resource("image://dot", name="dot", mime_type="image/png")
def dot() -> bytes:
    return PNG


@server.resource("doc://report", name="report", mime_type="application/pdf")
def report() -> bytes:
    return PDF


@server.resource("data://bytes", name="bytes", mime_type="application/octet-stream")
def raw() -> bytes:
    return bytes(range(10))


@server.prompt(description="Ask for a review of some code.")
def review(code: str, language: str = "python") -> list:
    return [f"Review this {language} code:\n{code}",
            {"role": "assistant", "content": {"type": "text", "text": "Looking at it now."}}]


def drop_discover() -> None:
    """Make this a 2025 server that never answers ``server/discover``, as servers whose
    SDK drops a request it does not know before the handshake do: the lines naming it
    are taken out of stdin before the SDK reads them (a pipe in place of fd 0)."""
    wire = os.fdopen(os.dup(0), "rb")
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)

    def forward() -> None:
        with os.fdopen(write_end, "wb", buffering=0) as sink:
            for line in wire:
                if b'"server/discover"' not in line:
                    sink.write(line)

    threading.Thread(target=forward, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP on this port")
    parser.add_argument("--drop-discover", action="store_true",
                        help="over stdio, never answer server/discover (a silent 2025 server)")
    parser.add_argument("--start-delay", type=float, default=0.0,
                        help="wait this many seconds before reading anything (a slow start)")
    args = parser.parse_args()
    time.sleep(args.start_delay)
    if args.drop_discover:
        drop_discover()
    if args.http:
        server.run(transport="streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    sys.exit(main())
