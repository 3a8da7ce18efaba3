"""The local MCP client: MCP servers' tools, resources and prompts for nacelle.

``connect_stdio`` starts a server as a child process, ``connect_http`` talks to one
over streamable HTTP; both return an :class:`MCPClient` whose ``tools()`` are plain
:class:`~nacelle.tools.Tool` objects, usable on every backend, and which reads the
server's resources and prompts. It speaks the stateless 2026-07-28 revision to
servers that offer it and the 2025 handshake to the rest. Failures raise
:class:`MCPError`.

The package, by subject: ``errors`` (the error tree), ``session`` (JSON-RPC: ids,
routing, waiting, and the ``Transport`` protocol), ``protocol`` (what differs between
the two protocol generations; elicitation), ``client`` (the MCP client), ``toolset``
(its tools), ``content`` (results as text, parts and messages), ``stdio`` and
``http`` (the two transports, each with its ``connect_*``). ``nacelle.mcp.server``
is the other direction: nacelle's tools served to MCP clients. Importing it loads no
third-party module: ``requests`` is imported by the HTTP transport when it starts.

Outer ring: re-exports from its own modules only.
"""

from .client import MCPClient as MCPClient
from .errors import MCPError as MCPError
from .http import connect_http as connect_http
from .protocol import Elicitation as Elicitation
from .stdio import connect_stdio as connect_stdio
from .toolset import LiveTools as LiveTools, MCPTool as MCPTool

__all__ = ["Elicitation", "LiveTools", "MCPClient", "MCPError", "MCPTool", "connect_http",
           "connect_stdio"]
