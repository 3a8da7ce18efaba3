"""search_content's regular expression, matched in a child process that can be killed.

Why a process: Python's ``re`` cannot be interrupted. A pattern that backtracks
catastrophically — ``(a+)+$`` against forty ``a`` and a ``b`` — runs for hours inside
one C call that holds the GIL, so in a thread it would stall every thread of the
agent, and no timeout or cancellation could reach it. A process can be killed.

:class:`Matcher` is the parent's side. Its caller gives it the command that runs
this file as a script (see :mod:`nacelle.toolsets.interpreter`); it starts the child
on first use, sends it the pattern once, then each file's bytes, and waits for the
matching lines with a time bound, checking the call's cancellation and deadline
every 50 ms while it waits. Past the bound it kills the child and says so; cancelled,
it kills the child and lets ``Cancelled`` through; :meth:`Matcher.close` kills it
at the end of the search. The child's side is :func:`main`.

Every message, both ways, is a header of two big-endian 32-bit numbers and a body:

- pattern: ``(cut, length)`` and the pattern as UTF-8 (lone surrogates passed
  through); ``cut`` is how many characters of a matching line to send back, plus one
  so the parent can tell the line was longer;
- request: ``(limit, length)`` and a file's bytes; the child decodes them as UTF-8
  (undecodable bytes replaced), splits them into lines with ``str.splitlines`` and
  searches each line, stopping after ``limit`` matches;
- reply: ``(count, length)`` and ``count`` lines ``NUMBER<tab>TEXT<newline>``
  (``splitlines`` leaves no line break inside a line).

Both sides import the standard library only: the child runs as ``python -I -S
matcher.py``, outside the package.
"""

from __future__ import annotations

import os
import re
import selectors
import struct
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["Matcher", "main"]

POLL_SECONDS = 0.05
_HEADER = struct.Struct(">II")


class Matcher:
    """The parent's handle on one matching child, started on first use."""

    def __init__(self, command: List[str], env: Dict[str, str], pattern: str, cut: int) -> None:
        self.command = command
        self.env = env
        self.pattern = pattern.encode("utf-8", "surrogatepass")
        self.cut = cut
        self._proc: Optional["subprocess.Popen[bytes]"] = None

    def lines(self, data: bytes, limit: int, seconds: float,
              ctx: Any) -> Optional[List[Tuple[int, str]]]:
        """The first ``limit`` matching lines of ``data`` as ``(number, text)``, the text
        cut to ``cut + 1`` characters; None if matching took more than ``seconds`` (the
        child is killed, and the next call starts another)."""
        try:
            proc = self._started()
            self._send(proc, limit, data)
            body = self._receive(proc, time.monotonic() + seconds, ctx)
        except BaseException:
            self.close()
            raise
        if body is None:
            self.close()
            return None
        found = []
        for entry in body.decode("utf-8", "surrogatepass").split("\n")[:-1]:
            number, _, text = entry.partition("\t")
            found.append((int(number), text))
        return found

    def close(self) -> None:
        """Kill the child, if there is one, and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.kill()  # our own unreaped child: its pid cannot have been reused
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    def _started(self) -> "subprocess.Popen[bytes]":
        if self._proc is None:
            self._proc = subprocess.Popen(
                self.command, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, close_fds=True)
            self._send(self._proc, self.cut, self.pattern)
        return self._proc

    def _send(self, proc: "subprocess.Popen[bytes]", number: int, body: bytes) -> None:
        fd = proc.stdin.fileno()  # type: ignore[union-attr]
        try:
            _write_all(fd, _HEADER.pack(number, len(body)))
            _write_all(fd, body)
        except BrokenPipeError:
            raise self._died(proc) from None

    def _receive(self, proc: "subprocess.Popen[bytes]", until: float,
                 ctx: Any) -> Optional[bytes]:
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        got = bytearray()
        need: Optional[int] = None  # the whole message's length, once the header is in
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                if need is None and len(got) >= _HEADER.size:
                    need = _HEADER.size + _HEADER.unpack_from(got)[1]
                if need is not None and len(got) >= need:
                    return bytes(got[_HEADER.size:need])
                if ctx is not None:
                    ctx.check()
                left = until - time.monotonic()
                if left <= 0:
                    return None
                if sel.select(min(POLL_SECONDS, left)):
                    chunk = os.read(fd, max(65536, (need or 0) - len(got)))
                    if not chunk:
                        raise self._died(proc)
                    got += chunk

    @staticmethod
    def _died(proc: "subprocess.Popen[bytes]") -> RuntimeError:
        code = proc.wait()
        return RuntimeError(f"the process matching the regular expression ended "
                            f"unexpectedly (exit code {code})")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(stream: Any, size: int) -> Optional[bytes]:
    data = stream.read(size)
    return data if len(data) == size else None


def main() -> int:
    """The child: read the pattern, then answer requests until the parent closes stdin."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    header = _read_exactly(source, _HEADER.size)
    if header is None:
        return 0
    cut, size = _HEADER.unpack(header)
    regex = re.compile((_read_exactly(source, size) or b"").decode("utf-8", "surrogatepass"))
    while True:
        header = _read_exactly(source, _HEADER.size)
        if header is None:
            return 0
        limit, size = _HEADER.unpack(header)
        data = _read_exactly(source, size)
        if data is None:
            return 0
        found = []
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if regex.search(line):
                found.append(f"{number}\t{line[:cut + 1]}\n")
                if len(found) >= limit:
                    break
        body = "".join(found).encode("utf-8", "surrogatepass")
        sink.write(_HEADER.pack(len(found), len(body)) + body)
        sink.flush()


if __name__ == "__main__":
    sys.exit(main())
