"""Running the WSGI app locally: :func:`serve`, :func:`run_server`, :func:`main`.

The standard library's ``wsgiref`` server — enough for one person's chat page or a
small team's tool, and nothing to install. It streams: wsgiref's handler writes and
flushes each chunk the app yields to an unbuffered socket, and answers in HTTP/1.0
without a length, so the stream ends when the connection closes. For more, run
:func:`~nacelle.serve.wsgi_app` under gunicorn's threaded workers or
:func:`~nacelle.serve.asgi_app` under uvicorn.

Held to bounds, since whoever reaches the port can open connections:

- **Threads.** Connections wait in one queue for at most ``max_threads`` handler
  threads (started as needed); past ``max_waiting`` waiting connections a new one is
  answered 503 and closed at once. socketserver's ``ThreadingMixIn`` would start a
  thread for every connection, however many.
- **Time.** A request's line, headers and body must all arrive within
  ``request_timeout`` seconds of the connection's start, or the socket is shut down
  (a :class:`~nacelle.read_limits.Cutoff`): a socket timeout alone bounds one
  ``recv``, and a client sending a byte a second would hold its thread for ever. The
  same timeout bounds each later write, so a client that stops reading is dropped.
  Once the body is in, the run streams for as long as it takes.
- **Disconnects.** The app is handed the connection's socket (``nacelle.socket``), so
  a client that leaves cancels its run at once, not at the next keepalive.

A connection that is dropped holds its thread for ``request_timeout`` at most, so a
flood of silent connections slows the others by that much per ``max_threads`` of them;
past a few people's use, put a proxy that buffers requests in front, or use gunicorn.

Choices: the default host is 127.0.0.1, and binding elsewhere without an
``authorize`` hook is logged as a warning (anyone who reaches the port can run the
agent and its tools). wsgiref's request log and tracebacks, which it writes to
stderr, go to this module's logger instead. A client that hangs up is not an error.
The default store is ``$XDG_DATA_HOME/nacelle/serve`` (``~/.local/share/nacelle/serve``).

:func:`main` is ``python -m nacelle.serve MODULE:FACTORY``: the one place here that
writes to stderr, to say where it listens, as a command line should. ``nacelle serve
MODULE:FACTORY`` loads the factory with the same :func:`load_factory`.

Outer ring: imports the standard library and nacelle's core.
"""

from __future__ import annotations

import argparse
import importlib
import os
import queue
import sys
import threading
import time
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, cast
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

from .._loggers import get_logger
from ..errors import ConfigError
from ..read_limits import Cutoff, content_length
from ..sessions import FileStore, Store
from .routes import MakeAgent
from .wsgi import wsgi_app

__all__ = ["default_store_dir", "main", "make_server", "run_server", "serve"]

log = get_logger(__name__)

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\n"
         b"Connection: close\r\n\r\n")


class Server(WSGIServer):
    """wsgiref's server, its connections handled by at most ``max_threads`` daemon
    threads (see the module docstring)."""

    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog: a burst of connects is not refused

    def __init__(self, address: Tuple[str, int], handler: Any, *, max_threads: int = 64,
                 max_waiting: int = 1024, request_timeout: float = 30.0) -> None:
        for name, value in (("max_threads", max_threads), ("max_waiting", max_waiting)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not request_timeout > 0:
            raise ValueError(f"request_timeout must be a positive number of seconds, "
                             f"got {request_timeout!r}")
        self.max_threads = max_threads
        self.max_waiting = max_waiting
        self.request_timeout = float(request_timeout)
        self._waiting: "queue.Queue[Any]" = queue.Queue()
        self._lock = threading.Lock()
        self._threads = 0  # handler threads started and not ended
        self._idle = 0  # of them, those waiting for a connection
        self._unclaimed = 0  # connections queued and not yet taken
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Queue the connection for a handler thread (socketserver calls this on the
        thread that accepts)."""
        with self._lock:
            full = self._unclaimed >= self.max_waiting
            start = False
            if not full:
                self._unclaimed += 1
                # A thread that took a connection but has not yet said so still counts
                # as idle and the connection as unclaimed: the two stay paired.
                start = self._unclaimed > self._idle and self._threads < self.max_threads
                if start:
                    self._threads += 1
                    self._idle += 1
                self._waiting.put((request, client_address))
        if full:
            log.warning("%d connections wait for a thread already: refusing one", self.max_waiting)
            try:
                request.setblocking(False)
                request.send(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        if start:
            threading.Thread(target=self._work, name="nacelle-serve-handler", daemon=True).start()

    def _work(self) -> None:
        while True:
            item = self._waiting.get()
            with self._lock:
                self._idle -= 1
                if item is None:
                    self._threads -= 1
                    return
                self._unclaimed -= 1
            request, client_address = item
            try:
                self.finish_request(request, client_address)
            except Exception:  # noqa: BLE001 - one connection's failure, logged
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)
                with self._lock:
                    self._idle += 1

    def server_close(self) -> None:
        super().server_close()
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._waiting.put(None)  # each handler thread ends after its connection

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
    server: Server

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)  # each recv and send
        self.cutoff = Cutoff(lambda: self.connection)
        self.cutoff.arm(time.monotonic() + self.server.request_timeout, "request timeout")

    def handle(self) -> None:
        """wsgiref's ``handle``, with the request's time cut off once its body is in."""
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline = self.request_version = self.command = ""
                self.send_error(414)
                return
            if not self.parse_request():  # an error was sent, or the client sent nothing
                return
            environ = self.get_environ()
            try:
                length = content_length(environ.get("CONTENT_LENGTH"))
            except ValueError:
                length = None  # the app answers 400 without reading
            stdin: Any = self.rfile
            if length:
                stdin = _Body(self.rfile, length, self.cutoff.disarm)
            else:
                self.cutoff.disarm()
            app = self.server.get_app()
            assert app is not None  # make_server sets it
            handler = ServerHandler(stdin, cast(IO[bytes], self.wfile), self.get_stderr(),
                                    environ, multithread=False)
            handler.request_handler = self  # type: ignore[attr-defined] # wsgiref's back-pointer
            handler.run(app)
        except OSError as exc:
            log.debug("a connection ended early: %s", exc)
        finally:
            if self.cutoff.disarm() is not None:
                log.info("%s did not send its request within %g s: dropped",
                         self.client_address[0], self.server.request_timeout)

    def get_environ(self) -> Dict[str, Any]:
        environ: Dict[str, Any] = super().get_environ()
        environ["nacelle.socket"] = self.connection
        return environ

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        log.info("%s %s", self.address_string(), format % args)

    def get_stderr(self) -> Any:
        return _LogStream()


class _Body:
    """``wsgi.input`` for a body of ``length`` bytes: ``done`` is called once they are
    all read (the request's time limit ends there)."""

    def __init__(self, stream: Any, length: int, done: Callable[[], Any]) -> None:
        self._stream = stream
        self._left = length
        self._done: Optional[Callable[[], Any]] = done

    def read(self, size: int = -1) -> bytes:
        size = self._left if size is None or size < 0 else min(size, self._left)
        data: bytes = self._stream.read(size) if size else b""
        self._count(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        size = self._left if size is None or size < 0 else min(size, self._left)
        data: bytes = self._stream.readline(size) if size else b""
        self._count(data)
        return data

    def readlines(self, hint: int = -1) -> List[bytes]:
        return list(iter(self.readline, b""))

    def __iter__(self) -> Any:
        return iter(self.readline, b"")

    def _count(self, data: bytes) -> None:
        self._left -= len(data)
        if (self._left <= 0 or not data) and self._done is not None:
            done, self._done = self._done, None
            done()


def make_server(app: Callable[..., Any], host: str = "127.0.0.1", port: int = 8000, *,
                max_threads: int = 64, max_waiting: int = 1024,
                request_timeout: float = 30.0) -> Server:
    """A threaded wsgiref server for ``app``, bound (``port=0``: a free port; see
    ``server.url``). Call ``serve_forever()``; ``shutdown()`` from another thread.
    ``max_threads``, ``max_waiting`` and ``request_timeout`` bound it (module docstring)."""
    server = Server((host, port), _Handler, max_threads=max_threads, max_waiting=max_waiting,
                    request_timeout=request_timeout)
    server.set_app(app)
    return server


def default_store_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "nacelle", "serve")


def serve(make_agent: MakeAgent, *, host: str = "127.0.0.1", port: int = 8000, store: Optional[Store] = None,
          authorize: Optional[Callable[[Any], "bool | str"]] = None, keepalive: float = 15.0,
          key: "str | bytes | None" = None, allowed_hosts: Sequence[str] = (),
          max_runs: int = 16, max_threads: int = 64, request_timeout: float = 30.0,
          on_ready: Optional[Callable[[str], None]] = None,
          preview: Optional[Callable[[str, Mapping[str, Any]], str]] = None) -> None:
    """Serve ``make_agent``'s runs and the chat page until interrupted.

    ``store`` defaults to a :class:`~nacelle.sessions.FileStore` in
    :func:`default_store_dir` (a command line's sessions outlive it); ``max_runs`` is
    :func:`~nacelle.serve.wsgi_app`'s, ``max_threads`` and ``request_timeout``
    :func:`make_server`'s; ``on_ready(url)`` is called once the port is bound;
    ``preview`` is :func:`~nacelle.serve.wsgi_app`'s.
    """
    if store is None:
        store = FileStore(default_store_dir())
    if host not in _LOOPBACK and authorize is None:
        log.warning("serving on %s with no authorize hook: anyone who reaches the port can "
                    "run the agent and its tools", host)
    app = wsgi_app(make_agent, store=store, authorize=authorize, keepalive=keepalive, key=key,
                   allowed_hosts=allowed_hosts, max_runs=max_runs, preview=preview)
    server = make_server(app, host, port, max_threads=max_threads,
                         request_timeout=request_timeout)
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
    """``"package.module:name"`` → that attribute (a function making an Agent, or one),
    imported as ``python -m`` would: the current directory comes first on the path.
    A target that is not of that form, or names nothing, is a ConfigError."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"expected MODULE:FACTORY (as in myapp:make_agent), got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would, so a local module imports
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r} for {target!r}: {exc}") from None
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigError(f"{module_name!r} has no {attribute!r} (from {target!r})") from None
    if not callable(value):
        raise ConfigError(f"{target!r} is a {type(value).__name__}, not a function making an "
                          "Agent or an Agent")
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
    try:
        factory = load_factory(args.factory)
    except ConfigError as exc:
        parser.error(str(exc))

    def ready(url: str) -> None:
        sys.stderr.write(f"nacelle: serving on {url}\n")

    run_server(factory, args.host, args.port, args.store, keepalive=args.keepalive,
               allowed_hosts=args.allowed_hosts, on_ready=ready)
    return 0
