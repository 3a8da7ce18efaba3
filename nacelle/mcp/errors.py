"""The MCP client's errors.

::

    NacelleError
    └── MCPError            the server could not start, refused the handshake, died,
        │                   sent something that is not JSON-RPC, answered with an
        │                   error, or did not answer in time (``code``: JSON-RPC's)
        └── SessionExpired  the HTTP server no longer knows the session (404); the
                            client starts a new one and resends, so callers rarely
                            see it

A tool's failure reported by the server (``isError``) is an :class:`MCPError` too:
nacelle tools report failure by raising, and its text is what the model reads.

Outer ring (with the rest of the MCP client); imports ``nacelle.errors`` only.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Type

from ..errors import NacelleError

__all__ = ["MCPError", "SessionExpired"]


class MCPError(NacelleError):
    """The MCP client failed: the server could not start, refused the handshake,
    died, sent something that is not JSON-RPC, answered with an error, or did not
    answer in time. ``code`` is the JSON-RPC error code when the server sent one,
    ``data`` the error's ``data`` member (the versions a server supports, say)."""

    def __init__(self, message: str, *, code: Optional[int] = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data

    def __reduce__(self) -> Tuple[Any, ...]:
        return (rebuild_error, (type(self), str(self), self.code, self.data))


def rebuild_error(cls: Type["MCPError"], message: str, code: Optional[int],
                  data: Any = None) -> "MCPError":
    """A fresh copy of an error, for pickling."""
    return cls(message, code=code, data=data)


def copy_error(error: MCPError) -> MCPError:
    """A fresh copy of ``error``, of its own class and with everything its
    ``__reduce__`` keeps (an ``MCPAuthError``'s status and OAuth error too), for each
    thread that raises it: a shared exception would gather all their tracebacks."""
    rebuild, args = error.__reduce__()[:2]
    copied = rebuild(*args)
    return copied if isinstance(copied, MCPError) else MCPError(str(error), code=error.code)


class SessionExpired(MCPError):
    """The HTTP server no longer knows our session (404); the client starts a new one."""
