"""MCP servers the client tests run: ``sdk_server.py`` (written with the official MCP
Python SDK), ``bad_server.py`` (a hand-written stdio server that misbehaves on cue)
and ``http_server.py`` (a hand-written streamable HTTP endpoint scripted per test),
plus the helpers that start them on loopback and :class:`ThreadPeak`, which counts
the client's threads while a server floods it."""

import contextlib
import importlib.util
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from servers import free_port, stop, wait_listening

HERE = Path(__file__).resolve().parent
SDK_SERVER = str(HERE / "sdk_server.py")
BAD_SERVER = str(HERE / "bad_server.py")

needs_sdk = pytest.mark.skipif(
    sys.version_info < (3, 10) or importlib.util.find_spec("mcp") is None,
    reason="needs the official MCP SDK (`mcp` on PyPI), which requires Python 3.10+ "
           "and is not installed for this interpreter",
)


@contextlib.contextmanager
def sdk_http_server(startup: float = 30.0):
    """Run ``sdk_server.py`` over streamable HTTP on 127.0.0.1; yield its MCP URL."""
    port = free_port()
    process = subprocess.Popen([sys.executable, SDK_SERVER, "--http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, process, startup)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process, 5.0)


class ThreadPeak:
    """The most of nacelle's threads alive at once while the block runs (sampled
    every ms), beyond those alive when it started."""

    def __enter__(self):
        self.before = self.count()
        self.peak = self.before
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    @staticmethod
    def count():
        return sum(1 for t in threading.enumerate() if t.name.startswith("nacelle-"))

    def _sample(self):
        while not self._done.wait(0.001):
            self.peak = max(self.peak, self.count())

    def __exit__(self, *exc_info):
        self._done.set()
        self._sampler.join()

    @property
    def added(self):
        return self.peak - self.before
