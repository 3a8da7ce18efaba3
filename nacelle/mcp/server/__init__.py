"""nacelle tools as an MCP server: :func:`wsgi_app`, :func:`asgi_app` and
:func:`run_stdio`.

Any MCP client — Claude Desktop, an IDE, another agent, the official SDKs — can list
and call the tools given: a ``@tool`` function, a toolset (``LocalTools``, an MCP
client's live tools), a list of them, or an :class:`~nacelle.Agent`, served as one
tool by :func:`~nacelle.subagent_tool` (named ``subagent``; the agent's tools that
need approval are refused, since nobody is there to approve them). The HTTP apps
speak both protocol generations on one endpoint: 2026-07-28 (stateless, each request
whole) and the 2025 handshake with sessions (``Mcp-Session-Id``), chosen by the
client's ``MCP-Protocol-Version`` header as the spec and the official SDKs do;
``run_stdio`` speaks both on stdin/stdout.

Calls run as they do in an agent run (``toolcalls.run_tool``): validated input, the
tool's timeout, ``max_result_chars``; a failure is a result with ``isError: true``.
Tool metadata becomes MCP's annotations, and media results content blocks
(``served``). The package, by subject: ``served`` (tools and calls), ``dispatch``
(the methods of both generations), ``http`` (the Streamable HTTP transport),
``sessions`` (its sessions), ``apps`` (WSGI and ASGI) and ``stdio``.

Outer ring (with the rest of ``nacelle.mcp``); imports the standard library,
``nacelle`` for its version, and its own modules.
"""

from __future__ import annotations

import sys
from typing import Any, Awaitable, BinaryIO, Callable, Dict, Iterable, Optional, Sequence

from ... import __version__
from .apps import asgi, wsgi
from .dispatch import Dispatcher
from .http import Endpoint
from .served import ServedTools
from .stdio import serve_lines

__all__ = ["asgi_app", "run_stdio", "wsgi_app"]


def _dispatcher(tools: Any, name: str, version: str, instructions: Optional[str],
                max_result_chars: int, tool_timeout: Optional[float]) -> Dispatcher:
    served = ServedTools(tools, max_result_chars=max_result_chars, tool_timeout=tool_timeout)
    return Dispatcher(served, name=name, version=version, instructions=instructions)


def _max_body(max_body: int) -> int:
    from ...errors import ConfigError

    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ConfigError(f"max_body must be a positive number of bytes, got {max_body!r:.40}")
    return max_body


def wsgi_app(tools: Any, *, name: str = "nacelle", version: str = __version__,
             authorize: Optional[Callable[[Any], Any]] = None,
             allowed_hosts: Sequence[str] = (), instructions: Optional[str] = None,
             max_body: int = 4_000_000, max_result_chars: int = 100_000,
             tool_timeout: Optional[float] = None, keepalive: float = 15.0,
             ) -> Callable[..., Iterable[bytes]]:
    """A WSGI application serving ``tools`` as an MCP endpoint (at whatever path it
    is mounted).

    ``name`` and ``version`` are the ``serverInfo`` clients see; ``instructions``,
    when given, what the server tells a client's model about itself.
    ``authorize(environ)`` returning True lets a request in, a non-empty str lets it
    in as that principal (a session belongs to the principal that opened it), and
    anything else is a 401 (no hook: every request is let in — bind to loopback, or
    give one). ``allowed_hosts`` names the hosts it answers to besides IP addresses
    and ``localhost`` (as for :func:`nacelle.serve.wsgi_app`; any other ``Host`` is a
    400, another ``Origin`` a 403). ``max_body`` caps a request's bytes (413);
    ``max_result_chars`` cuts a tool's longer answer unless the tool sets its own;
    ``tool_timeout`` bounds every call (a tool's own ``call_timeout``, the sooner,
    applies too); ``keepalive`` is the seconds of silence before a comment on a
    streamed call. Under gunicorn use threaded workers: a call holds its thread.
    """
    dispatcher = _dispatcher(tools, name, version, instructions, max_result_chars, tool_timeout)
    endpoint = Endpoint(dispatcher, authorize=authorize, allowed_hosts=allowed_hosts,
                        keepalive=keepalive)
    return wsgi(endpoint, _max_body(max_body))


def asgi_app(tools: Any, *, name: str = "nacelle", version: str = __version__,
             authorize: Optional[Callable[[Any], Any]] = None,
             allowed_hosts: Sequence[str] = (), instructions: Optional[str] = None,
             max_body: int = 4_000_000, max_result_chars: int = 100_000,
             tool_timeout: Optional[float] = None, keepalive: float = 15.0,
             max_calls: int = 64) -> Callable[[Dict[str, Any], Any, Any], Awaitable[None]]:
    """An ASGI 3 application; the arguments are :func:`wsgi_app`'s (``authorize`` is
    given the scope). Requests run on threads of their own, never on the loop, at
    most ``max_calls`` at once (a 503 with ``Retry-After`` past that)."""
    dispatcher = _dispatcher(tools, name, version, instructions, max_result_chars, tool_timeout)
    endpoint = Endpoint(dispatcher, authorize=authorize, allowed_hosts=allowed_hosts,
                        keepalive=keepalive)
    if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
        from ...errors import ConfigError

        raise ConfigError(f"max_calls must be a positive number, got {max_calls!r:.40}")
    return asgi(endpoint, _max_body(max_body), max_calls)


def run_stdio(tools: Any, *, name: str = "nacelle", version: str = __version__,
              instructions: Optional[str] = None, max_result_chars: int = 100_000,
              tool_timeout: Optional[float] = None, stdin: Optional[BinaryIO] = None,
              stdout: Optional[BinaryIO] = None) -> None:
    """Serve ``tools`` on stdin/stdout (the process's, unless byte streams are given)
    until stdin ends; the arguments are :func:`wsgi_app`'s. Nothing else may write to
    stdout meanwhile: it carries only MCP messages (log to stderr)."""
    dispatcher = _dispatcher(tools, name, version, instructions, max_result_chars, tool_timeout)
    serve_lines(dispatcher, stdin if stdin is not None else sys.stdin.buffer,
                stdout if stdout is not None else sys.stdout.buffer)
