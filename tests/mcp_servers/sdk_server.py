"""A small MCP server written with the official MCP Python SDK (``mcp`` on PyPI).

The client tests talk to it over stdio (``python sdk_server.py``) and over streamable
HTTP on loopback (``python sdk_server.py --http PORT``), so nacelle's client is held
to a server nobody on the project wrote. It needs Python 3.10+ and the ``mcp``
package; mcp 2.x calls the high-level server ``MCPServer`` (1.x called it
``FastMCP``), and both are accepted.
"""

import argparse
import sys

import anyio

try:
    from mcp.server.mcpserver import Context, Image, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context, FastMCP as MCPServer, Image
    from mcp.server.fastmcp.exceptions import ToolError

from mcp.types import ToolAnnotations

server = MCPServer("nacelle-test-server")

# How many ``slow`` calls were cancelled by the client; read back through a tool so a
# test can prove that ``notifications/cancelled`` reached the server.
CANCELLED = []
# Tiny but valid PNG (1x1, transparent).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


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


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` (it returns its input reversed) and announce it."""

    def reverse(text: str) -> str:
        return text[::-1]

    server.add_tool(reverse, name=name, description="Reverse the text.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP on this port")
    args = parser.parse_args()
    if args.http:
        server.run(transport="streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    sys.exit(main())
