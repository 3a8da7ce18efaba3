"""``nacelle serve --mcp MODULE:OBJECT``: tools of the user's as an MCP server
(:mod:`nacelle.mcp.server`), over Streamable HTTP at ``/mcp`` on ``--host``/``--port``
(the standard library's threaded server that ``nacelle serve`` uses), or with
``--stdio`` on stdin/stdout, for a client that starts the server itself (Claude
Desktop's ``command``, an IDE's MCP settings). OBJECT is a tool, a toolset, a list
of them, or an Agent (served as one ``subagent`` tool).

Imports the standard library and nacelle's errors; the server code inside
:func:`serve_mcp`; prints (to stderr only: with ``--stdio``, stdout carries the
protocol).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Sequence

from ..errors import ConfigError, NacelleError
from .help import EXIT_OK
from ..terminal_text import visible
from .terminal import fail, one_line

__all__ = ["load_object", "serve_mcp"]


def load_object(target: str) -> Any:
    """``"package.module:name"`` → that attribute, imported as ``python -m`` would (the
    current directory first on the path); it must be a tool, a toolset, a list of
    them or an Agent. Anything else is a ConfigError saying what was found."""
    from .. import Agent
    from ..tools import is_toolset

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"expected MODULE:OBJECT (as in mytools:tools), got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r} for {target!r}: {exc}") from None
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigError(f"{module_name!r} has no {attribute!r} (from {target!r})") from None
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not (isinstance(item, Agent) or is_toolset(item) or callable(getattr(item, "run", None))):
            raise ConfigError(f"{target!r} holds a {type(item).__name__}; serve a tool "
                              f"(@nacelle.tool), a toolset, a list of them, or an Agent")
    return value


def serve_mcp(target: str, *, host: str, port: int, allowed_hosts: Sequence[str],
              stdio: bool) -> int:
    """Serve ``target``'s tools until interrupted (HTTP) or until stdin ends (stdio)."""
    from ..mcp.server import run_stdio, wsgi_app

    name = target.partition(":")[0].rpartition(".")[2] or "nacelle"
    try:
        tools = load_object(target)
        if stdio:
            run_stdio(tools, name=name)
            return EXIT_OK
        from ..serve.server import make_server

        app = wsgi_app(tools, name=name, allowed_hosts=allowed_hosts)
    except NacelleError as err:
        return fail(one_line(err))
    try:
        server = make_server(app, host, port)
    except OSError as err:
        return fail(f"cannot serve on {host}:{port}: {err.strerror or err}")
    try:
        print(f"nacelle: serving {visible(target)} over MCP at {server.url.rstrip('/')}/mcp (Ctrl-C stops)",
              file=sys.stderr, flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK
