"""The local MCP client: MCP servers' tools as ordinary nacelle tools.

``connect_stdio`` starts a server as a child process, ``connect_http`` talks to one
over streamable HTTP; both return an :class:`MCPClient` whose ``tools()`` are plain
:class:`~nacelle.tools.Tool` objects, usable on every backend. Failures raise
:class:`MCPError`.

The package, by subject: ``errors`` (the error tree), ``client`` (the session:
JSON-RPC routing, the handshake, requests, and the ``Transport`` protocol),
``content`` (results as text), ``stdio`` and ``http`` (the two transports, each with
its ``connect_*``). Importing it loads no third-party module: ``requests`` is
imported by the HTTP transport when it starts.

Outer ring: re-exports from its own modules only.
"""

from .client import MCPClient as MCPClient, MCPTool as MCPTool
from .errors import MCPError as MCPError
from .http import connect_http as connect_http
from .stdio import connect_stdio as connect_stdio

__all__ = ["MCPClient", "MCPError", "MCPTool", "connect_http", "connect_stdio"]
