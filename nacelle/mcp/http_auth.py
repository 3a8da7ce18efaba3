"""The streamable HTTP transport's side of credentials: where the caller's headers may
go, and the OAuth flow as the transport's requests meet it.

- **The caller's headers stay on the server's origin.** ``requests`` follows a
  redirect to another host and drops only ``Authorization`` on the way; every
  other header the caller gave (an ``X-API-Key``, a cookie, a tenant id) would go
  along to whoever the server points at. Here every header the caller gave is a
  credential, so a redirect is followed only within the MCP server's origin
  (scheme, host and port; or ``http`` to ``https`` on the same host, the one change
  of origin ``requests`` itself treats as the same server): :func:`origin_guard`
  refuses any other before it is sent, with an error naming where it pointed, so a
  server that really moved can be given its new URL.
- **An authorization in progress is known.** :class:`Authorization` wraps the
  ``auth=`` object (:class:`nacelle.mcp.auth.OAuth`, or anything with its two
  methods) and counts the flows running: the client asks it, through
  :meth:`Authorization.settle`, whether a request that timed out was waiting on a
  person signing in, which says nothing about the server (the ``server/discover``
  probe must not read it as a legacy server's silence).

Outer ring: imports the standard library, ``nacelle.errors`` and the package's
``errors``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional, Tuple
from urllib.parse import urljoin, urlsplit

from ..errors import ConfigError
from .errors import MCPError, copy_error

__all__ = ["Authorization", "origin_guard", "same_origin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> Tuple[str, str, Optional[int]]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port that is not a number: no origin anything shares
        return scheme, "", -1
    return scheme, (parts.hostname or "").lower(), port


def same_origin(server_url: str, url: str) -> bool:
    """Whether ``url`` is on the origin of ``server_url``, or its HTTPS upgrade."""
    mine, theirs = _origin(server_url), _origin(url)
    if mine == theirs:
        return True
    return mine == ("http", theirs[1], 80) and theirs == ("https", mine[1], 443)


def origin_guard(server_url: str, describe: str) -> Callable[..., None]:
    """A ``requests`` response hook that refuses a redirect off ``server_url``'s
    origin before ``requests`` follows it (hooks run on every response, each
    redirect's included); raises :class:`MCPError` naming the server by
    ``describe`` and the target by scheme and host only."""

    def hook(response: Any, *args: Any, **kwargs: Any) -> None:
        if not response.is_redirect:
            return
        target = urljoin(response.url, response.headers.get("location", ""))
        if same_origin(server_url, target):
            return
        response.close()
        parts = urlsplit(target)
        raise MCPError(f"MCP server {describe} redirected to another origin "
                       f"({parts.scheme}://{parts.hostname or ''}); not followed, since the "
                       "request carries the headers given for this server: connect to that "
                       "URL instead if the server moved there")

    return hook


class Authorization:
    """The ``auth=`` object of one transport, and the flows running through it."""

    def __init__(self, auth: Any, server_url: str) -> None:
        if not (callable(getattr(auth, "headers", None))
                and callable(getattr(auth, "unauthorized", None))):
            raise ConfigError("auth must have headers(server_url) and "
                              "unauthorized(server_url, www_authenticate), as "
                              "nacelle.mcp.auth.OAuth has")
        self._auth, self._url = auth, server_url
        self._running = 0
        self._failure: Optional[MCPError] = None
        self._idle = threading.Condition()

    def headers(self) -> Dict[str, str]:
        """The headers the ``auth`` object gives for the server (its token)."""
        return dict(self._auth.headers(self._url))

    def unauthorized(self, challenge: str) -> bool:
        """Run the ``auth`` object's answer to a 401/403 (the flow, maybe a person
        signing in); True means resend the request once."""
        failure: Optional[MCPError] = None
        with self._idle:
            self._running += 1
        try:
            return bool(self._auth.unauthorized(self._url, challenge))
        except MCPError as err:
            failure = err
            raise
        finally:
            with self._idle:
                self._running -= 1
                self._failure = failure
                self._idle.notify_all()

    def settle(self) -> bool:
        """False when no flow is running. Otherwise wait until it ends (the flow keeps
        its own deadline: ``OAuth(redirect_timeout=...)``) and return True, or raise
        a copy of the MCPError it failed with."""
        with self._idle:
            if not self._running:
                return False
            self._idle.wait_for(lambda: not self._running)
            failure = self._failure
        if failure is not None:
            raise copy_error(failure)
        return True
