"""MCP's stdio transport, server side: :func:`serve_lines`, newline-delimited JSON-RPC
on a pair of byte streams (https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#stdio).

Each line is one message; each answer is one line of ASCII JSON (non-ASCII escaped,
so no byte the spec forbids — an embedded newline — can appear). Which generation a
request belongs to is read from the request itself: one whose ``params._meta``
names a protocol version is a 2026-07-28 request (checked as on HTTP, without the
header rung: an unknown version is -32022), any other follows the handshake.
``tools/call`` runs on a thread of its own, so ``ping`` and
``notifications/cancelled`` are answered while it runs; a cancelled call gets no
answer, as the spec's cancellation page asks
(https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/cancellation).
Progress the call reports goes out as ``notifications/progress`` when the request
carried a ``progressToken``.

A line is read under a cap (``max_line`` bytes, 4 MiB by default): a longer one is
skipped to its end and answered with a parse error, so a client that never ends a
line cannot take the server's memory. End of input cancels what still runs.

Outer ring (with the rest of ``nacelle.mcp``); imports the standard library,
``nacelle.bounded_json`` and the package's ``errors``, ``protocol`` and ``server``
modules.
"""

from __future__ import annotations

import json
import threading
from typing import Any, BinaryIO, Dict, Optional

from ..._loggers import get_logger
from ... import bounded_json
from ..errors import MCPError
from ..protocol import PROTOCOL_KEY
from .dispatch import (
    PARSE_ERROR, Call, Dispatcher, envelope_problem, error_message, params_of, parse_message,
    progress_token, result_message,
)

__all__ = ["serve_lines"]

log = get_logger(__name__)


def serve_lines(dispatcher: Dispatcher, stdin: BinaryIO, stdout: BinaryIO, *,
                max_line: int = 4 * 1024 * 1024) -> None:
    """Answer the messages on ``stdin`` until it ends."""
    lock = threading.Lock()
    inflight: Dict[Any, threading.Event] = {}

    def write(message: Dict[str, Any]) -> None:
        line = json.dumps(message).encode("ascii") + b"\n"
        with lock:
            try:
                stdout.write(line)
                stdout.flush()
            except (OSError, ValueError):  # the client closed our stdout
                log.debug("could not write an answer: stdout is closed")

    try:
        while True:
            line = stdin.readline(max_line + 1)
            if not line:
                return
            if len(line) > max_line and not line.endswith(b"\n"):
                _skip_rest(stdin, max_line)
                write(error_message(None, MCPError(f"Parse error: a line longer than "
                                                   f"{max_line} bytes", code=PARSE_ERROR)))
                continue
            if line.strip():
                _one(dispatcher, line, write, inflight, lock)
    finally:
        with lock:
            for cancel in inflight.values():
                cancel.set()


def _skip_rest(stdin: BinaryIO, max_line: int) -> None:
    while True:
        more = stdin.readline(max_line)
        if not more or more.endswith(b"\n"):
            return


def _one(dispatcher: Dispatcher, line: bytes, write: Any,
         inflight: Dict[Any, threading.Event], lock: threading.Lock) -> None:
    try:
        message = parse_message(bounded_json.loads(line, what="an MCP message"))
    except (ValueError, bounded_json.TooDeep) as exc:
        write(error_message(None, MCPError(f"Parse error: {str(exc)[:200]}", code=PARSE_ERROR)))
        return
    except MCPError as err:
        write(error_message(None, err))
        return
    method, params = message["method"], params_of(message)
    if "id" not in message:
        if method == "notifications/cancelled":
            key = _key(params.get("requestId"))
            with lock:
                cancel = inflight.get(key)
            if cancel is not None:
                cancel.set()
        return
    ident = message["id"]
    meta = params.get("_meta")
    modern = isinstance(meta, dict) and PROTOCOL_KEY in meta
    if modern:
        problem = envelope_problem(params, None)
        if problem is not None:
            write(error_message(ident, problem))
            return
    call = Call(ident)
    token = progress_token(params)
    if token is not None:
        def progress(done: float, total: Optional[float], text: str) -> None:
            note: Dict[str, Any] = {"progressToken": token, "progress": done}
            if total is not None:
                note["total"] = total
            if text:
                note["message"] = text
            write({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
        call.progress = progress

    def answer() -> None:
        try:
            result = (dispatcher.modern if modern else dispatcher.legacy)(method, params, call)
        except MCPError as err:
            write(error_message(ident, err))
            return
        except Exception:  # noqa: BLE001 - the client gets -32603, the log the reason
            log.exception("answering %s failed", method)
            write(error_message(ident, MCPError("Internal error", code=-32603)))
            return
        finally:
            with lock:
                inflight.pop(_key(ident), None)
        if result is not None:
            write(result_message(ident, result))

    with lock:
        inflight[_key(ident)] = call.cancelled
    if method == "tools/call":
        threading.Thread(target=answer, name="nacelle-mcp-call", daemon=True).start()
    else:
        answer()


def _key(request_id: Any) -> Any:
    return (type(request_id).__name__, request_id)
