"""What the MCP client's authorization (:mod:`nacelle.mcp.auth`) learns before it
sends anyone anywhere, and what it says about itself: the server's protected-resource
metadata, its authorization server's metadata, the endpoints a server of the
2025-03-26 revision implies when it publishes neither, and the URL of the client's
own metadata document.

:func:`discover` returns the metadata to authorize with, by the first of:

1. **Protected-resource metadata** (RFC 9728 §3, §5.1): at the challenge's
   ``resource_metadata``, else at the well-known places
   (:func:`~nacelle.mcp.auth_flows.resource_metadata_urls`); its first
   ``authorization_servers`` entry is the issuer, whose metadata (RFC 8414 §3, or
   OpenID Connect Discovery) must name that same issuer (RFC 8414 §3.3).
2. **The 2025-03-26 revision's discovery**, only when the challenge named no
   metadata and every well-known place answered 404: the server publishes none,
   which no server of a later revision may do (2025-06-18 made RFC 9728 a MUST for
   servers), so it follows the revision before. There the *authorization base URL*
   is the server URL with its path removed, and the authorization server's metadata
   is looked for there
   (https://modelcontextprotocol.io/specification/2025-03-26/basic/authorization,
   "Server Metadata Discovery"). The issuer a document found there names may carry a
   path (it need not equal the base URL, as RFC 8414 §3.3 would ask of a discovered
   issuer, since the client never learnt one) but must be on the server's origin:
   the server vouches for its own origin only.
3. **The 2025-03-26 default endpoints**, when every one of those places answered 404
   too: ``/authorize``, ``/token`` and ``/register`` at the authorization base URL
   (the same page, "Fallbacks for Servers without Metadata Discovery"). They are on
   the server's own origin by construction, so no rule of
   :func:`~nacelle.mcp.auth_flows.check_destination` is relaxed for them; PKCE S256
   is assumed, since that revision requires PKCE of every client and offers no way
   to say which methods a server takes.

The protocol version the server speaks cannot decide this: the 401 that starts
authorization answers ``initialize``, before any version is agreed. Publishing no
metadata is the mark of the older revision, and the official TypeScript and Python
SDKs fall back on it the same way. Any other failure — a 500, a timeout, a document
that is not JSON — is an :class:`MCPAuthError` naming where the client looked, as
before: endpoints are guessed only for a server that said "not here".

:func:`check_client_metadata_url` holds the URL a user gives as their client id
(OAuth Client ID Metadata Documents,
https://datatracker.ietf.org/doc/draft-ietf-oauth-client-id-metadata-document/ §3;
the MCP 2025-11-25 revision's "Client ID Metadata Documents",
https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization) to
what the draft requires of one.

Outer ring: imports the standard library, ``nacelle.errors`` and
``nacelle.mcp.auth_flows``.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple
from urllib.parse import urlsplit, urlunsplit

from .._loggers import get_logger
from ..errors import ConfigError
from .auth_flows import (
    MCPAuthError, check_destination, covers, fetch_json, metadata_urls,
    resource_metadata_urls, safe_url,
)

__all__ = ["Discovery", "check_client_metadata_url", "discover", "legacy_endpoints"]

logger = get_logger(__name__)


class Discovery(NamedTuple):
    """What :func:`discover` found: the protected-resource metadata (``{}`` for a
    server of the 2025-03-26 revision; its ``scopes_supported`` joined as
    ``scope``), the issuer, and its authorization server metadata."""

    resource: Dict[str, Any]
    issuer: str
    meta: Dict[str, Any]


def discover(server_url: str, metadata_url: Optional[str], *, timeout: float) -> Discovery:
    """The metadata to authorize with for the MCP server at ``server_url`` (the
    module docstring gives the order); MCPAuthError when there is none to use."""
    found = _protected_resource(server_url, metadata_url, timeout)
    if found is not None:
        resource, issuer = found
        return Discovery(resource, issuer, _authorization_server(issuer, server_url, timeout))
    base = _base_url(server_url)
    places = metadata_urls(base)
    for url in places:
        status, meta = fetch_json(url, timeout=timeout, server=server_url)
        if meta is not None:
            named = meta.get("issuer")
            if not isinstance(named, str) or _base_url(named) != base:
                raise MCPAuthError(f"the metadata at {safe_url(url)} names an issuer off the "
                                   f"MCP server's origin {safe_url(base)}; not used")
            check_destination(meta.get("token_endpoint"), server_url, "the token endpoint")
            logger.debug("using the 2025-03-26 metadata at %s", safe_url(url))
            return Discovery({}, named, meta)
        if status != 404:
            raise MCPAuthError(f"no authorization server metadata at {safe_url(url)} "
                               f"(HTTP {status or 'no answer'})")
    logger.debug("no metadata for %s: using the 2025-03-26 default endpoints",
                 safe_url(server_url))
    return Discovery({}, base, legacy_endpoints(server_url))


def legacy_endpoints(server_url: str) -> Dict[str, Any]:
    """The authorization server metadata the 2025-03-26 revision implies for a server
    that publishes none: its default endpoints at the authorization base URL."""
    base = _base_url(server_url)
    return {"issuer": base, "authorization_endpoint": base + "/authorize",
            "token_endpoint": base + "/token", "registration_endpoint": base + "/register",
            "code_challenge_methods_supported": ["S256"]}


def check_client_metadata_url(url: Any) -> str:
    """``url`` if it may be a client id naming a Client ID Metadata Document: an
    ``https`` URL with a host and a path other than ``/``, no ``.`` or ``..``
    segment, no fragment and no user name or password (draft §3); ConfigError
    otherwise. Nothing is fetched: the authorization server reads the document."""
    parts = urlsplit(url) if isinstance(url, str) else None
    problem = ""
    if parts is None:
        problem = f"a string, got {type(url).__name__}"
    elif parts.scheme != "https" or not parts.hostname:
        problem = "an https:// URL"
    elif parts.path in ("", "/"):
        problem = "a URL with a path (the document's own, not the site's root)"
    elif {".", ".."} & set(parts.path.split("/")):
        problem = "a URL without . or .. path segments"
    elif parts.fragment or "#" in str(url):
        problem = "a URL without a fragment"
    elif parts.username is not None or parts.password is not None:
        problem = "a URL without a user name or password"
    if problem:
        shown = f" ({safe_url(url)!r})" if isinstance(url, str) else ""
        raise ConfigError(f"client_metadata_url must be {problem}{shown}")
    return str(url)


def _protected_resource(server_url: str, metadata_url: Optional[str],
                        timeout: float) -> Optional[Tuple[Dict[str, Any], str]]:
    """The RFC 9728 metadata of ``server_url`` and the issuer it names first; None
    when the challenge named none and every well-known place answered 404."""
    places = [check_destination(metadata_url, server_url, "resource_metadata")] \
        if metadata_url else resource_metadata_urls(server_url)
    statuses: List[int] = []
    for url in places:
        status, document = fetch_json(url, timeout=timeout, server=server_url)
        statuses.append(status)
        if document is None:
            continue
        servers, resource = document.get("authorization_servers"), document.get("resource")
        if isinstance(resource, str) and not covers(resource, server_url):
            raise MCPAuthError(f"the metadata at {safe_url(url)} describes another "
                               f"resource ({safe_url(resource)}); not used (RFC 9728 §3.3)")
        if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
            raise MCPAuthError(f"the metadata at {safe_url(url)} names no authorization server")
        supported = document.get("scopes_supported")
        if isinstance(supported, list) and supported:
            document["scope"] = " ".join(str(s) for s in supported)
        return document, check_destination(servers[0], server_url, "the authorization server")
    if not metadata_url and all(status == 404 for status in statuses):
        return None
    raise MCPAuthError("no protected resource metadata at " +
                       ", ".join(safe_url(u) for u in places))


def _authorization_server(issuer: str, server_url: str, timeout: float) -> Dict[str, Any]:
    places = metadata_urls(issuer)
    for url in places:
        meta = fetch_json(url, timeout=timeout, server=server_url)[1]
        if meta is None:
            continue
        if meta.get("issuer") != issuer:  # RFC 8414 §3.3: identical, or not used
            raise MCPAuthError(f"the metadata at {safe_url(url)} names another issuer")
        check_destination(meta.get("token_endpoint"), server_url, "the token endpoint")
        return meta
    raise MCPAuthError("no authorization server metadata at " +
                       ", ".join(safe_url(u) for u in places))


def _base_url(url: str) -> str:
    """The 2025-03-26 revision's authorization base URL: ``url`` without its path
    (and without query, fragment and user information)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2].lower()
    return urlunsplit((parts.scheme.lower(), host, "", "", ""))
