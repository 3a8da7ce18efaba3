"""The MCP methods a tool server answers, for both protocol generations, without a
transport: a parsed JSON-RPC message in, its result (or an :class:`MCPError`) out.

The handshake generation (2024-11-05 to 2025-11-25) opens with ``initialize``: the
server answers with the client's version when it speaks it, else its newest
(https://modelcontextprotocol.io/specification/2025-11-25/basic/lifecycle#version-negotiation),
and then serves ``ping``, ``tools/list`` and ``tools/call``. The stateless generation
(2026-07-28) has no handshake: each request carries its version and the client's
capabilities in ``params._meta``; ``server/discover`` says what the server speaks;
``initialize`` and ``ping`` are gone (-32601); every result says its ``resultType``
and carries the server's identity in ``_meta`` (``io.modelcontextprotocol/serverInfo``),
and the cacheable ones (``server/discover``, ``tools/list``) ``ttlMs`` and
``cacheScope`` (SEP-2549). Those shapes are the official Python SDK's, ``mcp`` 2.3.0
(``mcp_types`` for 2026-07-28, ``mcp/server/lowlevel/server.py``, ``caching.py``),
whose server answers both generations.

Choices where the specs leave room:

- Only tools are offered: the capabilities name ``tools`` (``listChanged`` false:
  no notification stream is kept), and resources, prompts, logging and completion
  are methods not found. A tool list is never paged: a ``cursor`` is ignored.
- The cache hints are ``ttlMs: 0`` and ``cacheScope: "private"``: a toolset may
  change its tools at any time, and an ``authorize`` hook may tell principals apart.
- ``arguments`` that are not an object, a missing ``name`` and an unknown tool are
  JSON-RPC errors (-32602); everything about the arguments' content is the tool's
  ``isError`` result, so a model can correct it (SEP-1303).

Outer ring (with the rest of ``nacelle.mcp``); imports the standard library,
``nacelle.context`` and the package's ``errors``, ``protocol`` and ``server.served``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from ...context import CancelEvent
from ..errors import MCPError
from ..protocol import CAPABILITIES_KEY, LEGACY_VERSIONS, MODERN_VERSION, PROTOCOL_KEY, SERVER_INFO_KEY
from .served import INVALID_PARAMS, Progress, ServedTools

__all__ = ["Call", "Dispatcher", "INVALID_REQUEST", "METHOD_NOT_FOUND", "PARSE_ERROR",
           "envelope_problem", "error_message", "parse_message"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
#: 2026-07-28's errors (``mcp_types/jsonrpc.py``).
HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022


@dataclass
class Call:
    """What a method needs of its request besides params: its id, the event that
    cancels it (a :class:`~nacelle.context.CancelEvent`, so setting it reaches the
    running tool's ``ctx.cancelled`` at once), and how to send a progress notification (None: the client asked
    for none)."""

    id: Any
    cancelled: threading.Event = field(default_factory=CancelEvent)
    progress: Optional[Progress] = None


class Dispatcher:
    """The methods of the module docstring over one :class:`ServedTools`."""

    def __init__(self, served: ServedTools, *, name: str, version: str,
                 instructions: Optional[str] = None) -> None:
        self.served = served
        self.info = {"name": name, "version": version}
        self.instructions = instructions

    def capabilities(self) -> Dict[str, Any]:
        return {"tools": {"listChanged": False}}

    def legacy(self, method: str, params: Dict[str, Any], call: Call) -> Optional[Dict[str, Any]]:
        """A handshake-generation request's result (None: cancelled, no answer)."""
        if method == "initialize":
            asked = params.get("protocolVersion")
            version = asked if asked in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
            result = {"protocolVersion": version, "capabilities": self.capabilities(),
                      "serverInfo": dict(self.info)}
            if self.instructions:
                result["instructions"] = self.instructions
            return result
        if method == "ping":
            return {}
        return self._common(method, params, call)

    def modern(self, method: str, params: Dict[str, Any], call: Call) -> Optional[Dict[str, Any]]:
        """A 2026-07-28 request's result, shaped as that revision asks."""
        if method == "server/discover":
            result: Optional[Dict[str, Any]] = {
                "supportedVersions": [MODERN_VERSION], "capabilities": self.capabilities(),
                "ttlMs": 0, "cacheScope": "private"}
            assert result is not None
            if self.instructions:
                result["instructions"] = self.instructions
        else:
            result = self._common(method, params, call)
            if result is None:
                return None
            if method == "tools/list":
                result.update(ttlMs=0, cacheScope="private")
        result["resultType"] = "complete"
        result["_meta"] = {SERVER_INFO_KEY: dict(self.info)}
        return result

    def _common(self, method: str, params: Dict[str, Any], call: Call) -> Optional[Dict[str, Any]]:
        if method == "tools/list":
            return {"tools": self.served.listing()}
        if method == "tools/call":
            name = params.get("name")
            if not isinstance(name, str) or not name:
                raise MCPError("tools/call needs the tool's name", code=INVALID_PARAMS)
            arguments = params.get("arguments", {})
            if arguments is None:
                arguments = {}
            if not isinstance(arguments, dict):
                raise MCPError("tools/call arguments must be an object", code=INVALID_PARAMS)
            return self.served.call(name, arguments, call_id=f"mcp-{call.id}",
                                    cancelled=call.cancelled, progress=call.progress)
        raise MCPError(f"Method not found: {method[:100]}", code=METHOD_NOT_FOUND)


def parse_message(value: Any) -> Dict[str, Any]:
    """``value`` checked as one JSON-RPC request or notification (a dict with
    ``jsonrpc: "2.0"``, a str ``method``, ``params`` an object when present and an
    ``id`` that is a str or a whole number); :class:`MCPError` (-32600) otherwise."""
    if not isinstance(value, dict):
        raise MCPError("the body must be one JSON-RPC request or notification object",
                       code=INVALID_REQUEST)
    if value.get("jsonrpc") != "2.0" or not isinstance(value.get("method"), str):
        raise MCPError("not a JSON-RPC 2.0 request: it needs jsonrpc \"2.0\" and a method",
                       code=INVALID_REQUEST)
    if "id" in value:
        ident = value["id"]
        if isinstance(ident, bool) or not isinstance(ident, (str, int)):
            raise MCPError("a request id must be a string or an integer", code=INVALID_REQUEST)
    params = value.get("params", {})
    if params is not None and not isinstance(params, dict):
        raise MCPError("params must be an object", code=INVALID_REQUEST)
    return value


def params_of(message: Mapping[str, Any]) -> Dict[str, Any]:
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def progress_token(params: Mapping[str, Any]) -> Any:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def envelope_problem(params: Mapping[str, Any], header_version: Optional[str]) -> Optional[MCPError]:
    """What is wrong with a 2026-07-28 request's ``_meta`` envelope (checked in the
    SDK's order: the envelope's keys, the version header against it, the version
    itself), or None. ``header_version`` None skips the header rung (stdio)."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return MCPError(f"params._meta must be an object carrying {PROTOCOL_KEY!r} and "
                        f"{CAPABILITIES_KEY!r}", code=INVALID_PARAMS)
    missing = [key for key in (PROTOCOL_KEY, CAPABILITIES_KEY) if key not in meta]
    if missing:
        return MCPError(f"params._meta is missing {', '.join(missing)}", code=INVALID_PARAMS)
    version = meta[PROTOCOL_KEY]
    if header_version is not None and header_version != version:
        return MCPError("the MCP-Protocol-Version header does not match the request's "
                        "_meta protocol version", code=HEADER_MISMATCH)
    if not isinstance(version, str):
        return MCPError("the protocol version in _meta must be a string", code=INVALID_PARAMS)
    if version != MODERN_VERSION:
        return unsupported(version)
    return None


def unsupported(version: str) -> MCPError:
    return MCPError("Unsupported protocol version", code=UNSUPPORTED_VERSION,
                    data={"supported": [MODERN_VERSION], "requested": version[:100]})


def error_message(ident: Any, err: MCPError) -> Dict[str, Any]:
    error: Dict[str, Any] = {"code": err.code if err.code is not None else -32603,
                             "message": str(err)}
    if err.data is not None:
        error["data"] = err.data
    return {"jsonrpc": "2.0", "id": ident, "error": error}


def result_message(ident: Any, result: Dict[str, Any]) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "result": result}
