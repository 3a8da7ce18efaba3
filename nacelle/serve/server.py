"""Running the WSGI app locally: :func:`serve`, :func:`run_server`, :func:`main`.

The standard library's ``wsgiref`` server with a thread per connection — enough for
one person's chat page or a small team's tool, and nothing to install. It streams:
wsgiref's handler writes and flushes each chunk the app yields to an unbuffered
socket, and answers in HTTP/1.0 without a length, so the stream ends when the
connection closes. For more, run :func:`~nacelle.serve.wsgi_app` under gunicorn's
threaded workers or :func:`~nacelle.serve.asgi_app` under uvicorn.

Choices: the default host is 127.0.0.1, and binding elsewhere without an
``authorize`` hook is logged as a warning (anyone who reaches the port can run the
agent and its tools). wsgiref's request log and tracebacks, which it writes to
stderr, go to this module's logger instead. A client that hangs up is not an error.
The default store is ``$XDG_DATA_HOME/nacelle/serve`` (``~/.local/share/nacelle/serve``).

:func:`main` is ``python -m nacelle.serve MODULE:FACTORY``: the one place here that
writes to stderr, to say where it listens, as a command line should.

Outer ring: imports the standard library and nacelle's core.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from socketserver import ThreadingMixIn
from typing import Any, Callable, List, Optional, Sequence
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from ..sessions import FileStore
from .wsgi import wsgi_app

__all__ = ["default_store_dir", "main", "make_server", "run_server", "serve"]

log = logging.getLogger(__name__)

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


class Server(ThreadingMixIn, WSGIServer):
    """wsgiref's server, a daemon thread per connection."""

    daemon_threads = True
    allow_reuse_address = True

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}/"


class _LogStream:
    """``wsgi.errors`` and wsgiref's traceback stream, onto the logger."""

    def write(self, text: str) -> int:
        if text.strip():
            log.error("%s", text.rstrip())
        return len(text)

    def writelines(self, lines: List[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass


class _Handler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        log.info("%s %s", self.address_string(), format % args)

    def get_stderr(self) -> Any:
        return _LogStream()


def make_server(app: Callable[..., Any], host: str = "127.0.0.1", port: int = 8000) -> Server:
    """A threaded wsgiref server for ``app``, bound (``port=0``: a free port; see
    ``server.url``). Call ``serve_forever()``; ``shutdown()`` from another thread."""
    server = Server((host, port), _Handler)
    server.set_app(app)
    return server


def default_store_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "nacelle", "serve")


def serve(make_agent: Any, *, host: str = "127.0.0.1", port: int = 8000, store: Any = None,
          authorize: Optional[Callable[[Any], bool]] = None, keepalive: float = 15.0,
          key: "str | bytes | None" = None, allowed_hosts: Sequence[str] = (),
          on_ready: Optional[Callable[[str], None]] = None) -> None:
    """Serve ``make_agent``'s runs and the chat page until interrupted.

    ``store`` defaults to a :class:`~nacelle.sessions.FileStore` in
    :func:`default_store_dir`; ``on_ready(url)`` is called once the port is bound.
    """
    if store is None:
        store = FileStore(default_store_dir())
    if host not in _LOOPBACK and authorize is None:
        log.warning("serving on %s with no authorize hook: anyone who reaches the port can "
                    "run the agent and its tools", host)
    app = wsgi_app(make_agent, store=store, authorize=authorize, keepalive=keepalive, key=key,
                   allowed_hosts=allowed_hosts)
    server = make_server(app, host, port)
    try:
        log.info("serving on %s", server.url)
        if on_ready is not None:
            on_ready(server.url)
        server.serve_forever()
    except KeyboardInterrupt:
        log.info("stopped")
    finally:
        server.server_close()


def run_server(agent_factory: Any, host: str = "127.0.0.1", port: int = 8000,
               store_dir: "str | os.PathLike[str] | None" = None, *,
               on_ready: Optional[Callable[[str], None]] = None, **options: Any) -> None:
    """:func:`serve` for a command line: the store is a directory (None: the default)."""
    store = FileStore(store_dir if store_dir is not None else default_store_dir())
    serve(agent_factory, host=host, port=port, store=store, on_ready=on_ready, **options)


def load_factory(target: str) -> Any:
    """``"package.module:name"`` → that attribute (a function making an Agent, or one)."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"nacelle serve: expected MODULE:FACTORY, got {target!r}")
    value: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m nacelle.serve MODULE:FACTORY [--host H] [--port P] [--store DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m nacelle.serve",
        description="Serve an agent over HTTP: POST /runs streams a run as SSE, GET / is a chat page.")
    parser.add_argument("factory", help="MODULE:NAME of a function returning an Agent (or an Agent)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--store", default=None, help=f"directory for sessions and paused runs "
                                                      f"(default {default_store_dir()})")
    parser.add_argument("--keepalive", type=float, default=15.0)
    parser.add_argument("--allowed-host", action="append", default=[], dest="allowed_hosts",
                        metavar="NAME", help="a host name to answer to besides IP addresses "
                        "and localhost (repeatable; .example.com for a domain, * for any)")
    args = parser.parse_args(argv)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would, so a local module imports
    factory = load_factory(args.factory)

    def ready(url: str) -> None:
        sys.stderr.write(f"nacelle: serving on {url}\n")

    run_server(factory, args.host, args.port, args.store, keepalive=args.keepalive,
               allowed_hosts=args.allowed_hosts, on_ready=ready)
    return 0
