"""Serve an agent over HTTP: a run as Server-Sent Events, approvals that pause and
resume over HTTP, and a small chat page.

- :func:`sse` turns a run's events into SSE bytes (the versioned event schema is in
  ``encode.py``), with ``: keepalive`` comments while nothing happens;
- :func:`wsgi_app` and :func:`asgi_app` serve the same routes (``routes.py``):
  ``GET /`` the chat page, ``POST /runs`` a run, ``POST /runs/{id}/decisions`` the
  resumption of a paused run, whose checkpoint stays in the server's ``store`` (by
  default a :class:`~nacelle.sessions.MemoryStore`), owned by the principal
  ``authorize`` named; ``POST /api/chat`` the Vercel AI SDK's ``useChat`` stream
  (``vercel.encode`` is its pure encoder); ``POST /runs/{id}/cancel`` stops a
  streaming run and ``GET /sessions/{name}`` reads a saved conversation back (the
  page's stop button and reload);
- :func:`serve` / :func:`run_server` run the WSGI app on the standard library's
  threaded server, and ``python -m nacelle.serve MODULE:FACTORY`` does from a shell.

No dependency: WSGI and ASGI need no library, and the page is one HTML file with
its script and style inline (``page.html``, shipped as package data).

Outer ring: imports the standard library and nacelle's core; nothing in the package
imports it but ``nacelle serve`` (``cli.serve``), when that command runs.
"""

from .asgi import asgi_app as asgi_app
from .encode import SCHEMA_VERSION as SCHEMA_VERSION
from .encode import event_json as event_json
from .encode import sse as sse
from .routes import RequestInfo as RequestInfo
from .server import main as main
from .server import make_server as make_server
from .server import run_server as run_server
from .server import serve as serve
from .wsgi import wsgi_app as wsgi_app

__all__ = ["RequestInfo", "SCHEMA_VERSION", "asgi_app", "event_json", "main", "make_server",
           "run_server", "serve", "sse", "wsgi_app"]
