"""MCP servers the client tests run: ``sdk_server.py`` (written with the official MCP
Python SDK), ``bad_server.py`` (a hand-written stdio server that misbehaves on cue)
and ``http_server.py`` (a hand-written streamable HTTP endpoint scripted per test),
plus the helpers that start them on loopback."""

import contextlib
import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SDK_SERVER = str(HERE / "sdk_server.py")
BAD_SERVER = str(HERE / "bad_server.py")

needs_sdk = pytest.mark.skipif(
    sys.version_info < (3, 10) or importlib.util.find_spec("mcp") is None,
    reason="needs the official MCP SDK (`mcp` on PyPI), which requires Python 3.10+ "
           "and is not installed for this interpreter",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def sdk_http_server(startup: float = 30.0):
    """Run ``sdk_server.py`` over streamable HTTP on 127.0.0.1; yield its MCP URL."""
    port = free_port()
    process = subprocess.Popen([sys.executable, SDK_SERVER, "--http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + startup
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the SDK server did not start listening")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
