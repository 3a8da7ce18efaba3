"""nacelle tools as an MCP server offers them: the tool list, and one call run the way
an agent runs it.

:class:`ServedTools` takes what ``nacelle.mcp.server`` is given — a tool, a toolset
(asked again at every ``tools/list``, so a live MCP toolset's changes show), a list of
them, or an :class:`~nacelle.Agent`, served as the one tool
:func:`~nacelle.subagent_tool` makes of it — and answers two questions:

- ``listing()``: each tool as an MCP ``Tool`` (``name``, ``description``,
  ``inputSchema``, ``annotations``). nacelle's tool metadata uses MCP's own words
  (:func:`nacelle.tools.metadata`), so it becomes the hints one for one:
  ``read_only`` → ``readOnlyHint``, ``destructive`` → ``destructiveHint``,
  ``idempotent`` → ``idempotentHint``, ``open_world`` → ``openWorldHint``
  (https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool).
- ``call(name, arguments, ...)``: the call goes through
  :func:`nacelle.toolcalls.run_tool`, the one path every local call takes, so the
  input is validated against the schema, the result cut at the tool's
  ``max_result_chars`` (else the server's), and failures are what a model would read.
  A failed call — bad input, the tool raising, a timeout — is a result with
  ``isError: true``, as the spec asks for errors a model can correct; only a tool
  that does not exist is a JSON-RPC error (-32602, the spec's own example). The call
  runs on a thread of its own, so its ``call_timeout`` (and the server's
  ``tool_timeout``, the sooner applying) closes it as timed out while the tool is
  still running, and cancelling the request sets the call's ``ctx.cancelled``; a tool
  that ignores both is abandoned, as the agent loop abandons it. ``ctx.progress``
  becomes ``notifications/progress`` when the request carries a ``progressToken``.

A result's parts become content blocks: a Text a ``text`` block, an Image an
``image`` block, a Document an embedded ``resource`` (its text for ``text/plain``,
a ``blob`` for a PDF; its ``uri`` the title when the title is a URI, else a
``nacelle:`` URI naming the title), as
https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool-result
describes them.

Outer ring (with the rest of ``nacelle.mcp``); imports the standard library,
nacelle's core (``agent``, ``context``, ``messages``, ``subagent``, ``toolcalls``,
``tools``, ``errors``) and the package's ``errors``.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..._loggers import get_logger
from ...agent import Agent
from ...context import CancelEvent, RunContext
from ...errors import ConfigError
from ...messages import Document, Image, Text, ToolCall, ToolMedia
from ...subagent import subagent_tool
from ...toolcalls import ToolSink, run_tool
from ...tools import expand_tools, is_toolset, metadata, tools_by_name
from ..errors import MCPError

__all__ = ["INVALID_PARAMS", "Progress", "ServedTools", "content_blocks", "tool_entry"]

log = get_logger(__name__)

INVALID_PARAMS = -32602

#: ``progress(progress, total, message)``: one ``notifications/progress`` to send.
Progress = Callable[[float, Optional[float], str], None]


class ServedTools:
    """The tools a server offers; see the module docstring."""

    def __init__(self, tools: Any, *, max_result_chars: int = 100_000,
                 tool_timeout: Optional[float] = None) -> None:
        if isinstance(tools, Agent):
            items: Tuple[Any, ...] = (subagent_tool(tools),)
        elif isinstance(tools, (list, tuple)):
            items = tuple(subagent_tool(t) if isinstance(t, Agent) else t for t in tools)
        else:
            items = (tools,)
        if not items:
            raise ConfigError("an MCP server needs at least one tool to serve")
        if isinstance(max_result_chars, bool) or not isinstance(max_result_chars, int) \
                or max_result_chars < 0:
            raise ConfigError(f"max_result_chars must be a whole number of at least 0, "
                              f"got {max_result_chars!r:.40}")
        if tool_timeout is not None and (isinstance(tool_timeout, bool) or not isinstance(
                tool_timeout, (int, float)) or not tool_timeout > 0):
            raise ConfigError(f"tool_timeout must be a positive number of seconds or None, "
                              f"got {tool_timeout!r:.40}")
        self._items = items
        self.max_result_chars = max_result_chars
        self.tool_timeout = tool_timeout
        self.live = any(is_toolset(item) for item in items)
        self.tools()  # a tool that is not one, or two of one name, fail here, not at a call

    def __repr__(self) -> str:
        return f"<ServedTools {len(self._items)} items>"

    def tools(self) -> Dict[str, Any]:
        """The tools of the moment, by name (toolsets asked again)."""
        return tools_by_name(expand_tools(self._items))

    def listing(self) -> List[Dict[str, Any]]:
        return [tool_entry(tool) for tool in self.tools().values()]

    def schema(self, name: str) -> Optional[Dict[str, Any]]:
        tool = self.tools().get(name)
        return None if tool is None else dict(tool.schema)

    def call(self, name: str, arguments: Dict[str, Any], *, call_id: str,
             cancelled: threading.Event, progress: Optional[Progress] = None,
             ) -> Optional[Dict[str, Any]]:
        """The ``CallToolResult`` of one call, or None when ``cancelled`` was set
        before it finished (a cancelled request gets no answer). Raises
        :class:`MCPError` (-32602) for a tool that does not exist."""
        tool = self.tools().get(name)
        if tool is None:
            raise MCPError(f"Unknown tool: {name[:100]!r}", code=INVALID_PARAMS)
        timeout = _sooner(getattr(tool, "call_timeout", None), self.tool_timeout)
        observer = None if progress is None else _progress_observer(progress)
        run = RunContext(cancelled=CancelEvent(cancelled), observer=observer)
        ctx = run.tool(call_id, 0, name, timeout=timeout)
        sink = ToolSink(max_result_chars=self.max_result_chars)
        call = ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))
        outcome: List[Any] = []
        wake = threading.Event()  # the call finished, or the request was cancelled

        def work() -> None:
            try:
                outcome.append(run_tool(tool, call, 0, sink, ctx))
            except BaseException as exc:  # noqa: BLE001 - a hook that raised: the caller's failure
                outcome.append(exc)
            finally:
                ctx.release()
                wake.set()

        unhook = ctx.on_cancel(wake.set)
        threading.Thread(target=work, name=f"nacelle-mcp-{name}", daemon=True).start()
        try:
            wake.wait(timeout)
        finally:
            unhook()
        if cancelled.is_set():  # a cancelled request is not answered, finished or not
            log.debug("call %s of %s was cancelled", call_id, name)
            return None
        if not outcome:
            ctx.cancelled.set()
            log.debug("call %s of %s timed out after %g s; its thread is abandoned",
                      call_id, name, timeout)
            return error_result(f"timed out after {timeout:g} s")
        found = outcome[0]
        if isinstance(found, BaseException):
            log.warning("serving a call of %s failed", name, exc_info=found)
            return error_result(f"{type(found).__name__}: {found}")
        if found.failed:
            return error_result(found.result)
        return {"content": content_blocks(found.content) if found.content
                else [{"type": "text", "text": found.result}], "isError": False}


def _sooner(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None:
        return b
    return a if b is None else min(a, b)


def _progress_observer(progress: Progress) -> Callable[[str, Dict[str, Any]], None]:
    def observe(kind: str, data: Dict[str, Any]) -> None:
        if kind != "tool.progress":
            return
        try:
            progress(float(data.get("progress", 0.0)), data.get("total"),
                     str(data.get("message") or ""))
        except Exception:  # noqa: BLE001 - a lost progress note must not fail the call
            log.debug("a progress notification could not be sent", exc_info=True)
    return observe


def error_result(text: str) -> Dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def tool_entry(tool: Any) -> Dict[str, Any]:
    """One tool as an MCP ``Tool`` (see the module docstring)."""
    hints = metadata(tool)
    return {"name": tool.name, "description": tool.description,
            "inputSchema": dict(tool.schema),
            "annotations": {"readOnlyHint": hints["read_only"],
                            "destructiveHint": hints["destructive"],
                            "idempotentHint": hints["idempotent"],
                            "openWorldHint": hints["open_world"]}}


def content_blocks(parts: Sequence[ToolMedia]) -> List[Dict[str, Any]]:
    """A result's parts as MCP content blocks (see the module docstring)."""
    blocks: List[Dict[str, Any]] = []
    for index, part in enumerate(parts):
        if isinstance(part, Text):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, Image):
            blocks.append({"type": "image", "data": part.data, "mimeType": part.media_type})
        elif isinstance(part, Document):
            blocks.append({"type": "resource", "resource": _resource(part, index)})
    return blocks


def _resource(document: Document, index: int) -> Dict[str, Any]:
    title = document.title
    if urllib.parse.urlsplit(title).scheme and "://" in title or title.startswith("urn:"):
        uri = title
    else:
        uri = "nacelle:document/" + urllib.parse.quote(title or str(index + 1), safe="")
    resource: Dict[str, Any] = {"uri": uri, "mimeType": document.media_type}
    if document.media_type.startswith("text/"):
        try:
            resource["text"] = base64.b64decode(document.data, validate=True).decode("utf-8")
            return resource
        except (binascii.Error, UnicodeDecodeError):
            pass  # not the text it claims: sent as the bytes it is
    resource["blob"] = document.data
    return resource
