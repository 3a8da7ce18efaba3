"""MCP server tools as nacelle tools: :class:`MCPTool`, :class:`LiveTools`, and the
two tools that expose a server's resources.

Choices, and why:

- A tool keeps the server's name (behind ``prefix__`` when asked) unless that name
  holds characters model APIs refuse in tool names (MCP allows ``.``, nacelle's
  names are ``[a-zA-Z0-9_-]{1,64}``): each such character becomes ``_`` and the
  name is cut to 64 characters, so one odd name does not make a whole server
  unusable. The call still goes out under the server's own name.
- Before each call a tool checks that the server still lists it (from the cached
  list, refreshed only after the server said it changed): a tool the server removed
  fails with a result saying so, rather than with whatever the server answers an
  unknown name with.
- :class:`LiveTools` is a toolset (``current()``) and an iterable that yields the
  server's tools as they are *now*. Given to an Agent, in ``tools=[live, ...]`` or
  bare as ``tools=live``, it is asked again before every model turn, so a tool the
  server added mid-run is offered at the next turn; spread into a list
  (``tools=[*live]``) it is the list of that moment. "Now" is listed again after
  any of the server's tools was called, not only when its notification came: the
  notification travels apart from the call's answer and may come after the next
  turn began, and a change the call made must be offered at that turn every time.
  That is one ``tools/list`` per round of calls, on a live list only.
- ``inputSchema`` is the server's data, like its annotations (``advisory``): the
  model's input is checked against it with nothing fetched and bounded regex work
  (:func:`nacelle.validation.input_check`), and a schema that cannot be used fails
  the call with a result saying why.
- ``outputSchema`` is kept as :attr:`MCPTool.output_schema`; the model reads the
  result's ``content``, ``structuredContent`` as JSON when the server sent no content
  blocks.
- A result that holds an image or a PDF (a block, an embedded resource, a resource
  read by ``read_resource``) is returned as parts, so the model sees it where its
  backend can take it (``ToolResult.content``); a result that is all text is returned
  as text, as any tool's. What the parts are is ``content``'s (see there).

Outer ring (with the rest of the MCP client); imports the standard library, nacelle's
core (``context``, ``messages``, ``tools``) and the package's ``errors``. It names the
client only by the :class:`ToolSource` protocol, so the client may import it.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Protocol, Union

from .._loggers import get_logger
from ..context import ToolContext
from ..messages import Document, Image, Part, Text, ToolMedia
from ..tools import from_hints
from .errors import MCPError

__all__ = ["LiveTools", "MCPTool", "ToolSource", "resource_tools", "tool_name"]

logger = get_logger(__name__)

# A prefix joins the tool name with two underscores; both must stay inside the
# names every backend accepts.
PREFIX = re.compile(r"^[a-zA-Z0-9_-]{1,60}\Z")  # \Z: "$" lets a final "\n" through
_NOT_IN_NAMES = re.compile(r"[^a-zA-Z0-9_-]")


class ToolSource(Protocol):
    """What a tool needs of its :class:`~nacelle.mcp.client.MCPClient`."""

    name: str

    def list_tools(self) -> List[Dict[str, Any]]: ...

    def offers(self, remote_name: str) -> bool: ...

    def call_tool_parts(self, name: str, arguments: Optional[Mapping[str, Any]] = None, *,
                        cancelled: Optional[threading.Event] = None,
                        deadline: Optional[float] = None,
                        progress: Any = None) -> List[ToolMedia]: ...

    def resources(self) -> List[Dict[str, Any]]: ...

    def read_resource(self, uri: str, *, cancelled: Optional[threading.Event] = None,
                      deadline: Optional[float] = None) -> List[Part]: ...


def tool_name(name: str) -> str:
    """A server's tool name as a name every model API accepts."""
    return _NOT_IN_NAMES.sub("_", name)[:64] or "_"


class MCPTool:
    """One MCP server tool, as a nacelle :class:`~nacelle.tools.Tool`.

    ``schema`` is the server's ``inputSchema``, ``output_schema`` its
    ``outputSchema`` (or None); the metadata, its annotations' claim.
    """

    exclusive = False
    advisory = True  # a claim (tools.from_hints): policy.secure() trusts it only if told to

    def __init__(self, client: ToolSource, spec: Dict[str, Any], name: str) -> None:
        self.client = client
        self.name = name
        self.remote_name: str = spec["name"]
        self.description: str = (spec.get("description") or spec.get("title") or "")
        self.schema: Dict[str, Any] = json.loads(json.dumps(spec["inputSchema"]))
        output = spec.get("outputSchema")
        self.output_schema: Optional[Dict[str, Any]] = (
            json.loads(json.dumps(output)) if isinstance(output, dict) else None)
        hints = from_hints(spec.get("annotations"))
        self.read_only, self.destructive, self.idempotent, self.open_world = hints

    def __repr__(self) -> str:
        return f"<MCPTool {self.name!r} from {self.client.name!r}>"

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> Union[str, List[ToolMedia]]:
        if not self.client.offers(self.remote_name):
            raise MCPError(f"MCP server {self.client.name} no longer offers the tool "
                           f"{self.remote_name!r}: its tool list changed")
        # The context's deadline is on its own clock (a test's fake one, say); what
        # is left of it is the same on any clock.
        remaining = ctx.remaining()
        deadline = None if remaining is None else time.monotonic() + remaining
        return _output(self.client.call_tool_parts(
            self.remote_name, input, cancelled=ctx.cancelled, deadline=deadline,
            progress=_progress(ctx, self.name)))


def _output(parts: List[ToolMedia]) -> Union[str, List[ToolMedia]]:
    """Parts as a tool returns them: text when they are all text, so a text result
    is what it always was (no ``content``), the parts when there is a medium."""
    if all(isinstance(part, Text) for part in parts):
        return "\n".join(part.text for part in parts if isinstance(part, Text))
    return parts


def _progress(ctx: ToolContext, name: str) -> Any:
    report = getattr(ctx, "progress", None)
    if callable(report):
        return report

    def log(progress: float, total: Optional[float], message: str) -> None:
        of = f"/{total:g}" if total is not None else ""
        logger.debug("MCP tool %s: progress %g%s %s", name, progress, of, message)

    return log


class LiveTools:
    """A server's tools as they are now: iterate it (or call :meth:`current`) for
    the list of this moment. Made by ``client.tools(live=True)``."""

    def __init__(self, client: Any, prefix: Optional[str] = None) -> None:
        self.client = client
        self.prefix = prefix

    def __repr__(self) -> str:
        return f"<LiveTools from {self.client.name!r}>"

    def current(self) -> List[MCPTool]:
        """The server's tools now: listed again when it said its list changed, and
        after any call of its tools (see :meth:`MCPClient.list_tools`)."""
        prefix = self.prefix
        return [MCPTool(self.client, spec, tool_name(f"{prefix}__{spec['name']}" if prefix
                                                     else spec["name"]))
                for spec in self.client.list_tools(fresh=True)]

    def __iter__(self) -> Iterator[MCPTool]:
        return iter(self.current())

    def __len__(self) -> int:
        return len(self.client.list_tools(fresh=True))


class _ListResources:
    description = ("List the resources (documents, files, data) this MCP server offers: "
                   "one line each, URI first.")
    schema: Dict[str, Any] = {"type": "object", "properties": {}}
    exclusive = False
    advisory = True
    read_only, destructive, idempotent, open_world = True, False, True, False

    def __init__(self, client: ToolSource, name: str) -> None:
        self.client, self.name = client, name

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> str:
        lines = []
        for res in self.client.resources():
            line = f"{res.get('uri', '')} {res.get('name') or res.get('title') or ''}".rstrip()
            if res.get("mimeType"):
                line += f" ({res['mimeType']})"
            if res.get("description"):
                line += f": {res['description']}"
            lines.append(line)
        return "\n".join(lines) or "This server offers no resources."


class _ReadResource:
    description = "Read one of this MCP server's resources by its URI."
    schema: Dict[str, Any] = {"type": "object", "properties": {"uri": {
        "type": "string", "description": "The resource's URI, as list_resources gives it."}},
        "required": ["uri"]}
    exclusive = False
    advisory = True
    read_only, destructive, idempotent, open_world = True, False, True, False

    def __init__(self, client: ToolSource, name: str) -> None:
        self.client, self.name = client, name

    def run(self, input: Dict[str, Any], ctx: ToolContext) -> Union[str, List[ToolMedia]]:
        remaining = ctx.remaining()
        deadline = None if remaining is None else time.monotonic() + remaining
        parts = self.client.read_resource(str(input["uri"]), cancelled=ctx.cancelled,
                                          deadline=deadline)
        return _output([part for part in parts if isinstance(part, (Text, Image, Document))])


def resource_tools(client: ToolSource, prefix: Optional[str] = None) -> List[Any]:
    """``list_resources`` and ``read_resource`` (behind ``prefix__`` when asked)."""
    head = f"{prefix}__" if prefix else ""
    return [_ListResources(client, f"{head}list_resources"),
            _ReadResource(client, f"{head}read_resource")]
