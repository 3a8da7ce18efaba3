"""MCP servers the client tests run: ``sdk_server.py`` (written with the official MCP
Python SDK), ``bad_server.py`` (a hand-written stdio server that misbehaves on cue)
and ``http_server.py`` (a hand-written streamable HTTP endpoint scripted per test),
plus the helpers that start them on loopback."""

import contextlib
import importlib.util
import subprocess
import sys
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
