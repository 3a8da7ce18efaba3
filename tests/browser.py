"""Headless Chromium for the tests that look at a page as a person would: finding the
binary, launching it with its DevTools port, and the smallest DevTools client (one
page target over a stdlib WebSocket). Shared by tests/test_report.py and
tests/test_serve_page.py; a plain helper module, not a test module."""

import base64
import contextlib
import json
import os
import re
import shutil
import socket
import struct
import zlib
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from servers import stop


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class DevTools:
    """The smallest DevTools client: one page target over a stdlib WebSocket."""

    def __init__(self, url):
        host, port, path = re.match(r"ws://([^:/]+):(\d+)(/.*)", url).groups()
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        self.next_id, self.events = 0, []

    def _send(self, text):
        data, mask = text.encode(), os.urandom(4)
        size = len(data)
        head = struct.pack("!BB", 0x81, 0x80 | size) if size < 126 else (
            struct.pack("!BBH", 0x81, 0x80 | 126, size) if size < 65536 else
            struct.pack("!BBQ", 0x81, 0x80 | 127, size))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "DevTools closed the connection"
            out += chunk
        return out

    def _receive(self):
        message = b""
        while True:
            first, second = self._exact(2)
            size = second & 0x7F
            if size == 126:
                size = struct.unpack("!H", self._exact(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", self._exact(8))[0]
            message += self._exact(size)
            if first & 0x80:
                return json.loads(message)

    def call(self, method, **params):
        self.next_id += 1
        self._send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = self._receive()
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]
            self.events.append(message)

    def wait_for(self, method, timeout=20):
        deadline = time.monotonic() + timeout
        while not any(m.get("method") == method for m in self.events):
            assert time.monotonic() < deadline, f"no {method} within {timeout} s"
            self.events.append(self._receive())

    def evaluate(self, expression):
        answer = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in answer, answer["exceptionDetails"]
        return answer["result"].get("value")

    def load(self, url):
        """Navigate and wait for this page's load event (not one left from a page before)."""
        self.call("Page.enable")  # load events come only from an enabled Page domain
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")


def artifacts():
    path = Path(os.environ.get("NACELLE_ARTIFACTS") or Path(tempfile.gettempdir()) / "nacelle-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def launched(binary, profile, bypass):
    """A headless Chromium on ``profile``, its page as a DevTools client. Every address
    but ``bypass`` (a Chromium proxy-bypass list) goes to a proxy that is bound and
    never listens, so any request off the allowed set fails instead of leaving."""
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    process = subprocess.Popen(
        [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--hide-scrollbars", "--disable-extensions", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
         f"--proxy-server=127.0.0.1:{dead.getsockname()[1]}", f"--proxy-bypass-list={bypass}",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            assert process.poll() is None, "Chromium exited at start"
            assert time.monotonic() < deadline, "Chromium gave no DevTools port in 30 s"
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        targets = json.loads(opener.open(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t["type"] == "page")
        yield DevTools(page["webSocketDebuggerUrl"])
    finally:
        stop(process)
        dead.close()


def png(width=24, height=16):
    """A real PNG: a red-to-blue gradient, so a screenshot shows it was decoded."""
    def chunk(kind, body):
        return (struct.pack("!I", len(body)) + kind + body
                + struct.pack("!I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    rows = b"".join(b"\x00" + b"".join(bytes((255 - x * 10, 40, x * 10)) for x in range(width))
                    for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack("!IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
