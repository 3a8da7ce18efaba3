"""The socket under a ``requests`` response, found by walking urllib3's objects: 2.x
keeps it on the response's connection (``raw._connection.sock``), 1.26 only under
http.client's file object (``raw._fp.fp.raw._sock``). A transport needs it to bound a
read in time (a socket timeout per read) and to wake a thread blocked in ``recv``
(closing the file object does not, on every platform; shutting the socket down does).

Neither walk is an API of urllib3's, so both are tried, and ``None`` means "not found":
the caller then does without (no drain, a plain close).

Outer ring; imports the standard library only.
"""

from __future__ import annotations

import socket
from typing import Any, Optional

__all__ = ["shut", "socket_of"]


def socket_of(response: Any) -> Optional[socket.socket]:
    """The socket a ``requests`` response reads from, or None."""
    raw = getattr(response, "raw", None)
    sock = getattr(getattr(raw, "_connection", None), "sock", None)
    if sock is None:
        fp = getattr(getattr(raw, "_fp", None), "fp", None)
        sock = getattr(getattr(fp, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def shut(response: Any) -> None:
    """Close a response another thread may be blocked reading: its socket is shut
    down first (which wakes the reader), then the response is closed. Best effort:
    never raises."""
    if response is None:
        return
    sock = socket_of(response)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    try:
        response.close()
    except Exception:  # noqa: BLE001 - closing is best effort
        pass
