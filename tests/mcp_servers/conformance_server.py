"""``nacelle.mcp.server`` with the tools the MCP conformance suite's server scenarios
call (https://github.com/modelcontextprotocol/conformance, ``src/scenarios/server/``:
``tools.ts`` names ``test_simple_text``, ``test_image_content``,
``test_embedded_resource``, ``test_multiple_content_types``, ``test_error_handling``,
``test_tool_with_progress``; ``json-schema-2020-12.ts`` the schema of
``json_schema_2020_12_tool``), as plain nacelle tools.

``python conformance_server.py PORT [asgi|wsgi]`` serves them on 127.0.0.1:PORT at
``/mcp``: the ASGI app under uvicorn, or the WSGI app under the standard library's
threaded server. Scenarios about what a tools-only server does not offer
(resources, prompts, sampling, elicitation, logging, audio) find nothing here.
"""

import struct
import sys
import time
import zlib

from nacelle import Document, Image, Text, ToolContext, tool
from nacelle.mcp.server import asgi_app, wsgi_app


def png() -> bytes:
    """A 1x1 red PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels)
            + chunk(b"IEND", b""))


@tool(read_only=True)
def test_simple_text() -> str:
    """Returns a simple text answer."""
    return "This is a simple text response for testing."


@tool(read_only=True)
def test_image_content() -> Image:
    """Returns a small PNG image."""
    return Image.from_bytes(png())


@tool(read_only=True)
def test_embedded_resource() -> Document:
    """Returns an embedded text resource."""
    return Document.from_bytes(b"This is an embedded resource content.",
                               title="test://embedded-resource")


@tool(read_only=True)
def test_multiple_content_types() -> list:
    """Returns text, an image and an embedded resource."""
    return [Text("Multiple content types test:"), Image.from_bytes(png()),
            Document.from_bytes(b'{"test":"data","value":123}',
                                title="test://mixed-content-resource")]


@tool(read_only=True)
def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool(read_only=True)
def test_tool_with_progress(ctx: ToolContext) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for done in (0, 50, 100):
        ctx.progress(done, 100)
        if done < 100:
            time.sleep(0.05)
    return "Progress reported: 0, 50, 100 of 100."


class SchemaTool:
    """A tool whose input schema uses JSON Schema 2020-12's keywords."""

    name = "json_schema_2020_12_tool"
    description = "Takes input described with JSON Schema 2020-12 keywords."
    read_only = True
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                              "properties": {"street": {"type": "string"},
                                             "city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"},
                       "address": {"$ref": "#/$defs/address"},
                       "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                       "phone": {"type": "string"}, "email": {"type": "string"}},
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}},
               "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    }

    def run(self, input, ctx):
        return f"received {sorted(input)}"


class RegionTool:
    """A tool one of whose arguments is mirrored in an HTTP header (2026-07-28)."""

    name = "test_region_header"
    description = "Echoes the region, which clients mirror in Mcp-Param-Region."
    read_only = True
    schema = {"type": "object",
              "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
              "required": ["region"]}

    def run(self, input, ctx):
        return f"region: {input['region']}"


TOOLS = [test_simple_text, test_image_content, test_embedded_resource,
         test_multiple_content_types, test_error_handling, test_tool_with_progress,
         SchemaTool(), RegionTool()]


def main() -> None:
    port = int(sys.argv[1])
    kind = sys.argv[2] if len(sys.argv) > 2 else "asgi"
    if kind == "asgi":
        import uvicorn

        uvicorn.run(asgi_app(TOOLS, name="nacelle-conformance"), host="127.0.0.1", port=port,
                    log_level="warning")
        return
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    class Threaded(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    server = make_server("127.0.0.1", port, wsgi_app(TOOLS, name="nacelle-conformance"),
                         server_class=Threaded, handler_class=Quiet)
    server.serve_forever()


if __name__ == "__main__":
    main()
