"""The stdio transport of the local MCP client: a child process speaking
newline-delimited JSON-RPC on its stdin and stdout.

Three daemon threads per server: one reads stdout and hands each parsed message to
the client, one writes the client's messages to stdin, one forwards stderr line by
line to the ``nacelle.mcp.stdio.stderr`` logger at INFO (a separate logger, so an
application can quiet chatty servers without losing nacelle's own messages); the
last lines are kept, and an error for a server that died quotes them, because that
is where a crashing server says why.

Choices, and why:

- :meth:`StdioTransport.send` only queues: a pipe write blocks once the server stops
  reading and the pipe (64 KiB) is full, and a caller blocked there could be reached
  by neither its timeout nor a cancel. The writer thread keeps the messages in
  order; when the pipe breaks, the connection fails.
- The child runs in its own process group (a new session on POSIX), so ``close``
  reaches whatever it started too. Closing follows the spec's order: close stdin,
  wait, SIGTERM the group, wait, SIGKILL the group (two seconds each, as the
  official SDKs wait).
- The child's environment is a short list of harmless variables (``PATH``,
  ``HOME``, ``LANG``...) plus the caller's ``env``, as the official SDKs do: the
  host's API keys must not leak into a third-party server by default.
- A line on stdout that cannot be read (not UTF-8, not JSON, or JSON that
  :func:`nacelle.sse.parse_json` refuses: nested too deeply, ``NaN``) fails the
  request it answers when its top-level ``id`` can still be read
  (:func:`readable_id`), and otherwise the whole connection: the protocol reserves
  stdout for messages, and a server that breaks that rule may be answering anything.
  One line is capped at 64 MiB, so a server that never ends a line cannot take the
  host's memory.
- The era probe is not given the whole timeout: a server silent on
  ``server/discover`` for ``PROBE_QUIET`` seconds gets ``initialize`` too, and
  whichever the server answers decides (``MCPClient._probe`` says why that is safe
  for a 2026 server that is merely slow to start).
- The reader thread never dies without a word: whatever goes wrong in it fails the
  connection with an :class:`~nacelle.mcp.MCPError` that every waiting call gets at
  once, and stops the server, which nobody reads any more.

Outer ring: imports the standard library, ``nacelle.errors``, the package's
``client``, ``errors``, ``protocol`` and ``session``, and ``nacelle.sse`` (whose
``parse_json`` is the one rule for reading a peer's JSON).
"""

from __future__ import annotations

import collections
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Deque, Dict, Mapping, Optional, Sequence, Union

from .._loggers import get_logger
from ..errors import ConfigError
from ..sse import parse_json
from .client import MCPClient
from .errors import MCPError
from .protocol import OnElicit
from .session import is_request_id

__all__ = ["StdioTransport", "connect_stdio", "decode_line", "default_environment",
           "readable_id"]

logger = get_logger(__name__)
stderr_logger = get_logger(__name__ + ".stderr")

MAX_LINE = 64 * 2**20
GRACE = 2.0  # seconds to wait after closing stdin, and again after SIGTERM
EXITING = 1.0  # seconds a server on its way out is given to exit, so errors can say how
STDERR_TAIL = 20
#: Seconds a server may leave ``server/discover`` unanswered before the handshake goes
#: out beside it (see ``MCPClient._probe``): a running server answers either at once,
#: so this is what a 2025 server that ignores the probe costs, and a wrong guess
#: (a server still starting) costs nothing.
PROBE_QUIET = 1.0
# Inside JSON, a string (escapes and all) or a bracket: everything that decides how
# deep a byte sits. What lies between them (numbers, commas, colons) is skipped.
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]')
_COLON = re.compile(r"\s*:\s*")
_DECODER = json.JSONDecoder()

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    _INHERITED = ("APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT",
                  "PROCESSOR_ARCHITECTURE", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP",
                  "USERNAME", "USERPROFILE")
else:
    _INHERITED = ("HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TERM",
                  "TMPDIR", "USER")


def decode_line(line: bytes) -> Any:
    """One line of the server's stdout as a JSON value; a ``ValueError`` saying what
    is wrong with it otherwise."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("a line that is not UTF-8") from None
    try:
        return parse_json(text)
    except json.JSONDecodeError:
        raise ValueError("something that is not JSON") from None
    except ValueError as err:  # too deep, NaN: parse_json's rules for any peer's JSON
        raise ValueError(f"JSON the client refuses ({err})") from None


def readable_id(line: bytes) -> Optional[Union[int, str]]:
    """The request id a line that would not parse still names, or None.

    Only a top-level ``"id"`` member of a line that starts as a JSON object counts,
    and only when it is a string or an integer: strings and brackets are followed
    (without recursion, so depth costs nothing) to tell that member from an ``"id"``
    nested anywhere inside, whichever order the members come in. A line too deep for
    the parser, or with one bad byte, is then still an answer to one request, and
    failing that request is enough.
    """
    text = line.decode("utf-8", "replace")
    if not text.lstrip().startswith("{"):
        return None
    depth = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
            if depth <= 0:
                return None
        elif depth == 1:
            colon = _COLON.match(text, match.end())
            if colon is None:
                continue  # a string value, not a member name
            try:
                if json.loads(token) != "id":
                    continue
                value, _ = _DECODER.raw_decode(text, colon.end())
            except (ValueError, RecursionError):
                return None
            return value if is_request_id(value) else None
    return None


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
        self._process: Optional["subprocess.Popen[bytes]"] = None
        self._outbox: "queue.SimpleQueue[Optional[bytes]]" = queue.SimpleQueue()
        self._closing = threading.Event()
        self._stderr_tail: Deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._threads: Dict[str, threading.Thread] = {}

    def __repr__(self) -> str:
        pid = self._process.pid if self._process else None
        return f"<StdioTransport {self.describe} pid={pid}>"

    def start(self, deliver: Callable[..., Any], fail: Callable[[Any, MCPError], Any]) -> None:
        popen_options: Dict[str, Any] = {}
        if os.name == "posix":
            popen_options["start_new_session"] = True
        else:  # pragma: no cover - Windows
            popen_options["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        try:
            self._process = subprocess.Popen(
                [self.command, *self.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=self.env, cwd=self.cwd, bufsize=0,
                **popen_options)
        except (OSError, ValueError) as err:
            reason = getattr(err, "strerror", None) or str(err)
            raise MCPError(f"cannot start MCP server {self.describe}: {reason}") from None
        logger.debug("started MCP server %s as pid %d", self.describe, self._process.pid)
        for role, target, args in (("stdout", self._read_stdout, (deliver, fail)),
                                   ("stdin", self._write_stdin, (fail,)),
                                   ("stderr", self._read_stderr, ())):
            thread = threading.Thread(target=target, args=args, daemon=True,
                                      name=f"nacelle-mcp-{role}-{self._process.pid}")
            self._threads[role] = thread
            thread.start()

    def opened(self, protocol_version: str) -> None:
        """Nothing to do once the handshake is done: stdio has no session state."""

    def reset_session(self) -> None:
        """Stdio sessions never expire."""

    def abandon(self, request_id: Any) -> None:
        """Nothing to release: the answer, if it comes, is read and dropped."""

    def send(self, message: Dict[str, Any]) -> None:
        """Queue one message for the writer thread; never blocks."""
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if self._process is None or self._closing.is_set():
            raise MCPError(f"MCP server {self.describe} is not running")
        self._outbox.put(line + b"\n")

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        process = self._process
        if process is None:
            return
        self._outbox.put(None)  # the writer closes stdin once what is queued is written
        if not self._wait(process, GRACE):
            self._signal(process, signal.SIGTERM)
            if not self._wait(process, GRACE):
                self._signal(process, getattr(signal, "SIGKILL", signal.SIGTERM))
                self._wait(process, GRACE)
        # Whatever the server started may outlive it in its group; nothing of it
        # should outlive the client.
        self._signal(process, getattr(signal, "SIGKILL", signal.SIGTERM))
        joined = time.monotonic() + 1.0  # a second for all of them, not one each
        for thread in self._threads.values():
            if thread is not threading.current_thread():
                thread.join(max(0.0, joined - time.monotonic()))
        for stream in (process.stdout, process.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        logger.debug("MCP server %s stopped (exit code %s)", self.describe, process.returncode)

    # -- threads --------------------------------------------------------------------

    def _read_stdout(self, deliver: Callable[..., Any],
                     fail: Callable[[Any, MCPError], Any]) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        try:
            if not self._read_lines(process.stdout, deliver, fail):
                self._kill_quietly(process)
                return
        # Whatever it is, a reader that ends here without failing the connection
        # leaves every caller waiting out its timeout for answers nobody reads.
        except BaseException as err:  # noqa: BLE001
            if self._closing.is_set():
                return  # close() closed the pipe under us
            logger.error("reading from MCP server %s failed", self.describe, exc_info=True)
            self._kill_quietly(process)
            fail(None, MCPError(f"reading from MCP server {self.describe} failed: "
                                f"{type(err).__name__}: {str(err)[:200]}"))
            return
        if self._closing.is_set():
            return
        # The server closed stdout, which it only does on its way out; give it a
        # moment to exit so the error can say how.
        self._wait(process, EXITING)
        fail(None, MCPError(f"MCP server {self.describe} closed its output{self._exit_note()}"))

    def _read_lines(self, stdout: Any, deliver: Callable[..., Any],
                    fail: Callable[[Any, MCPError], Any]) -> bool:
        """Deliver each message until the end of stdout (True), or until a line
        fails the connection (False)."""
        while True:
            line = stdout.readline(MAX_LINE + 1)
            if not line:
                return True
            if len(line) > MAX_LINE:
                fail(None, MCPError(f"MCP server {self.describe} wrote a line longer than "
                                    f"{MAX_LINE} bytes"))
                return False
            if not line.strip():
                continue
            try:
                message = decode_line(line)
            except ValueError as err:
                request_id = readable_id(line)
                if request_id is None:
                    fail(None, MCPError(f"MCP server {self.describe} wrote {err} on stdout: "
                                        f"{_shorten(line)}"))
                    return False
                error = MCPError(f"MCP server {self.describe} answered request {request_id!r} "
                                 f"with {err}: {_shorten(line)}")
                logger.warning("%s", error)
                fail(request_id, error)
                continue
            deliver(message)

    def _write_stdin(self, fail: Callable[[Any, MCPError], Any]) -> None:
        process = self._process
        assert process is not None and process.stdin is not None
        stdin = process.stdin
        try:
            while True:
                line = self._outbox.get()
                if line is None:
                    return
                view = memoryview(line)
                while view:  # a raw pipe write may take only part of a long line
                    view = view[stdin.write(view):]
        except BaseException as err:  # noqa: BLE001 - as in the reader: never end silently
            if self._closing.is_set():
                return
            if not isinstance(err, (OSError, ValueError)):
                logger.error("writing to MCP server %s failed", self.describe, exc_info=True)
            # Most often the server is on its way out, and the reader, seeing its
            # output end, says how; this error stands only for a server that closed
            # its input and went on running.
            self._threads["stdout"].join(2 * EXITING)
            fail(None, MCPError(f"MCP server {self.describe} stopped reading its input"
                                f"{self._exit_note()}"))
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def _read_stderr(self) -> None:
        process = self._process
        assert process is not None and process.stderr is not None
        stderr = process.stderr
        try:
            for raw in iter(lambda: stderr.readline(65536), b""):
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
        stderr_reader = self._threads.get("stderr")
        if stderr_reader is not None and code is not None:
            stderr_reader.join(0.5)
        if self._stderr_tail:
            note += "; its last stderr lines:\n" + "\n".join(self._stderr_tail)
        return note

    def _kill_quietly(self, process: "subprocess.Popen[bytes]") -> None:
        self._signal(process, getattr(signal, "SIGKILL", signal.SIGTERM))

    def _wait(self, process: "subprocess.Popen[bytes]", seconds: float) -> bool:
        try:
            process.wait(seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def _signal(self, process: "subprocess.Popen[bytes]", sig: int) -> None:
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


def connect_stdio(
    command: str,
    args: Sequence[str] = (),
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    timeout: Optional[float] = 30.0,
    *,
    on_elicit: Optional[OnElicit] = None,
    protocol_version: Optional[str] = None,
) -> MCPClient:
    """Start an MCP server as a child process and agree on a protocol with it.

    The child gets a minimal environment (``PATH``, ``HOME`` and a few like them)
    plus ``env``: an MCP server is somebody else's code, and the host's API keys are
    none of its business. Raises :class:`MCPError` when the server cannot start or
    does not complete the handshake within ``timeout`` seconds.

    ``on_elicit(Elicitation)`` answers a server that asks for the user's input
    (see :mod:`nacelle.mcp.protocol`); without it such servers are refused.
    ``protocol_version`` pins one revision instead of negotiating (2026-07-28 when
    the server offers it, else the 2025 handshake). Negotiating, a server that has
    not answered the 2026 probe within a second (``PROBE_QUIET``) also gets the 2025
    handshake, which then has the whole ``timeout``: a 2025 server that ignores the
    probe is connected in about a second, not after ``timeout``.
    """
    transport = StdioTransport(command, args, env=env, cwd=cwd)
    return MCPClient(transport, name=transport.describe, timeout=timeout, on_elicit=on_elicit,
                     protocol_version=protocol_version, probe_quiet=PROBE_QUIET)._start()
