"""The stdio transport of the local MCP client: a child process speaking
newline-delimited JSON-RPC on its stdin and stdout.

Two daemon threads per server: one reads stdout and hands each parsed message to
the client, one forwards stderr line by line to the ``nacelle.mcp_stdio.stderr``
logger at INFO (a separate logger, so an application can quiet chatty servers
without losing nacelle's own messages); the last lines are kept, and an error for a
server that died quotes them, because that is where a crashing server says why.

Choices, and why:

- The child runs in its own process group (a new session on POSIX), so ``close``
  reaches whatever it started too. Closing follows the spec's order: close stdin,
  wait, SIGTERM the group, wait, SIGKILL the group (two seconds each, as the
  official SDKs wait).
- The child's environment is a short list of harmless variables (``PATH``,
  ``HOME``, ``LANG``...) plus the caller's ``env``, as the official SDKs do: the
  host's API keys must not leak into a third-party server by default.
- A line on stdout that is not JSON fails the whole connection: the protocol
  reserves stdout for messages, and a server that breaks that rule may be
  answering anything. One line is capped at 64 MiB, so a server that never ends
  a line cannot take the host's memory.

Outer ring: imports the standard library and ``nacelle.mcp``.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Any, Callable, Deque, Dict, Mapping, Optional, Sequence

from .errors import ConfigError
from .mcp import MCPError

__all__ = ["StdioTransport", "default_environment"]

logger = logging.getLogger(__name__)
stderr_logger = logging.getLogger(__name__ + ".stderr")

MAX_LINE = 64 * 2**20
GRACE = 2.0  # seconds to wait after closing stdin, and again after SIGTERM
STDERR_TAIL = 20

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    _INHERITED = ("APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT",
                  "PROCESSOR_ARCHITECTURE", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP",
                  "USERNAME", "USERPROFILE")
else:
    _INHERITED = ("HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TERM",
                  "TMPDIR", "USER")


def default_environment() -> Dict[str, str]:
    """The variables a stdio MCP server inherits from the host without being given
    them: enough to find programs and a home directory, and no secrets."""
    return {key: os.environ[key] for key in _INHERITED
            if key in os.environ and not os.environ[key].startswith("()")}


class StdioTransport:
    """Runs one MCP server process; ``describe`` names it for logs and errors."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise ConfigError(f"an MCP server command must be a non-empty string, got {command!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"MCP server args must be a sequence of strings, got {args!r}")
        self.command = command
        self.args = tuple(args)
        if env is not None and not all(isinstance(k, str) and isinstance(v, str)
                                       for k, v in dict(env).items()):
            raise ConfigError("an MCP server's env must map strings to strings")
        self.env = {**default_environment(), **dict(env or {})}
        self.cwd = cwd
        self.describe = repr(" ".join([os.path.basename(command), *self.args])[:80])
        self._process: Optional[subprocess.Popen] = None
        self._write_lock = threading.Lock()
        self._closing = threading.Event()
        self._stderr_tail: Deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._threads: list = []

    def __repr__(self) -> str:
        pid = self._process.pid if self._process else None
        return f"<StdioTransport {self.describe} pid={pid}>"

    def start(self, deliver: Callable[[Any], None], fail: Callable[[Any, MCPError], None]) -> None:
        popen_options: Dict[str, Any] = {}
        if os.name == "posix":
            popen_options["start_new_session"] = True
        else:  # pragma: no cover - Windows
            popen_options["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP
        try:
            self._process = subprocess.Popen(
                [self.command, *self.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=self.env, cwd=self.cwd, bufsize=0,
                **popen_options)
        except (OSError, ValueError) as err:
            reason = getattr(err, "strerror", None) or str(err)
            raise MCPError(f"cannot start MCP server {self.describe}: {reason}") from None
        logger.debug("started MCP server %s as pid %d", self.describe, self._process.pid)
        for target, args in ((self._read_stdout, (deliver, fail)), (self._read_stderr, ())):
            thread = threading.Thread(target=target, args=args, daemon=True,
                                      name=f"nacelle-mcp-{target.__name__[6:]}-{self._process.pid}")
            thread.start()
            self._threads.append(thread)

    def opened(self, protocol_version: str) -> None:
        """Nothing to do once the handshake is done: stdio has no session state."""

    def reset_session(self) -> None:
        """Stdio sessions never expire."""

    def abandon(self, request_id: Any) -> None:
        """Nothing to release: the answer, if it comes, is read and dropped."""

    def send(self, message: Dict[str, Any]) -> None:
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        process = self._process
        if process is None or process.stdin is None:
            raise MCPError(f"MCP server {self.describe} is not running")
        with self._write_lock:
            try:
                process.stdin.write(line + b"\n")
                process.stdin.flush()
            except (OSError, ValueError):
                raise MCPError(f"MCP server {self.describe} is gone{self._exit_note()}") from None

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        process = self._process
        if process is None:
            return
        try:
            if process.stdin is not None:
                with self._write_lock:
                    process.stdin.close()
        except OSError:
            pass
        if not self._wait(process, GRACE):
            self._signal(process, signal.SIGTERM)
            if not self._wait(process, GRACE):
                self._signal(process, getattr(signal, "SIGKILL", signal.SIGTERM))
                self._wait(process, GRACE)
        # Whatever the server started may outlive it in its group; nothing of it
        # should outlive the client.
        self._signal(process, getattr(signal, "SIGKILL", signal.SIGTERM))
        current = threading.current_thread()
        for thread in self._threads:
            if thread is not current:
                thread.join(1.0)
        for stream in (process.stdout, process.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        logger.debug("MCP server %s stopped (exit code %s)", self.describe, process.returncode)

    # -- threads --------------------------------------------------------------------

    def _read_stdout(self, deliver: Callable[[Any], None],
                     fail: Callable[[Any, MCPError], None]) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        stdout = process.stdout
        try:
            while True:
                line = stdout.readline(MAX_LINE + 1)
                if not line:
                    break
                if len(line) > MAX_LINE:
                    fail(None, MCPError(f"MCP server {self.describe} wrote a line longer than "
                                        f"{MAX_LINE} bytes"))
                    self._kill_quietly(process)
                    return
                if not line.strip():
                    continue
                try:
                    message = json.loads(line.decode("utf-8"))
                except ValueError:
                    fail(None, MCPError(f"MCP server {self.describe} wrote something that is "
                                        f"not JSON on stdout: {_shorten(line)}"))
                    self._kill_quietly(process)
                    return
                deliver(message)
        except (OSError, ValueError):
            pass  # the pipe was closed under us: close() is running
        if self._closing.is_set():
            return
        # The server closed stdout, which it only does on its way out; give it a
        # moment to exit so the error can say how.
        try:
            process.wait(1.0)
        except subprocess.TimeoutExpired:
            pass
        fail(None, MCPError(f"MCP server {self.describe} closed its output{self._exit_note()}"))

    def _read_stderr(self) -> None:
        process = self._process
        assert process is not None and process.stderr is not None
        try:
            for raw in iter(lambda: process.stderr.readline(65536), b""):
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    self._stderr_tail.append(line)
                    stderr_logger.info("[%s] %s", self.describe.strip("'"), line)
        except (OSError, ValueError):
            pass

    # -- helpers ------------------------------------------------------------------------

    def _exit_note(self) -> str:
        process = self._process
        code = process.poll() if process is not None else None
        note = "" if code is None else f" (exit code {code})"
        # The stderr reader may still be catching up with the last lines.
        for thread in self._threads[1:]:
            if thread is not threading.current_thread() and code is not None:
                thread.join(0.5)
        if self._stderr_tail:
            note += "; its last stderr lines:\n" + "\n".join(self._stderr_tail)
        return note

    def _kill_quietly(self, process: subprocess.Popen) -> None:
        self._signal(process, getattr(signal, "SIGKILL", signal.SIGTERM))

    def _wait(self, process: subprocess.Popen, seconds: float) -> bool:
        try:
            process.wait(seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def _signal(self, process: subprocess.Popen, sig: int) -> None:
        try:
            if os.name == "posix":
                os.killpg(process.pid, sig)
            elif process.poll() is None:  # pragma: no cover - Windows
                process.kill()
        except (OSError, ProcessLookupError):
            pass


def _shorten(line: bytes, limit: int = 120) -> str:
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    return repr(text if len(text) <= limit else text[:limit] + "...")
