"""OAuth 2.1 for MCP servers over HTTP: :class:`OAuth`, given as
``connect_http(url, auth=OAuth(...))``, and where its tokens are kept
(:class:`TokenStore`, :class:`MemoryTokenStore`, :class:`FileTokenStore`).

It follows the MCP authorization spec — 2025-06-18, 2025-11-25 and 2026-07-28
(https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization,
https://modelcontextprotocol.io/specification/2026-07-28/basic/authorization), and
2025-03-26's discovery for a server that publishes no protected-resource metadata
(:mod:`nacelle.mcp.auth_metadata` says when) — and what it builds on:
protected-resource metadata (RFC 9728 §3, §5.1), authorization server metadata
(RFC 8414 §3, with OpenID Connect Discovery as the spec's fallback), Client ID
Metadata Documents (draft-ietf-oauth-client-id-metadata-document), dynamic client
registration (RFC 7591 §3), the authorization code grant with PKCE
S256 and the refresh and client-credentials grants (draft-ietf-oauth-v2-1-13 §4,
RFC 7636), the ``resource`` parameter on every authorization and token request
(RFC 8707 §2), a loopback redirect (RFC 8252 §7.3) and the ``iss`` check (RFC 9207).

**The interface for the transport.** Two methods, both thread-safe (one lock: a
single flow runs at a time, and requests waiting on it use its token):

- ``headers(server_url) -> Dict[str, str]`` — the headers to add to every request to
  the MCP endpoint ``server_url``: ``{"Authorization": "Bearer …"}``, refreshing an
  expired token first (``expires_at`` minus a clock skew of ``skew`` seconds, at most
  half the token's lifetime). ``{}`` when no token is held: the first request goes
  without, and the server's 401 starts the flow, so a server that asks for nothing
  never opens a browser. Raises :class:`MCPAuthError` only when a refresh could not
  reach the token endpoint.
- ``unauthorized(server_url, www_authenticate) -> bool`` — call on a 401 or 403 with
  the response's ``WWW-Authenticate`` value (``""`` if absent), on the thread that
  called ``headers`` for that request. True means: call ``headers`` again and resend
  the request, once. It uses a token another thread got meanwhile; else it reads the
  server's metadata again and, when it names another authorization server than the
  token came from, authorizes anew there (a new registration too: credentials belong
  to the server that issued them, SEP-2352); else refreshes, else authorizes anew (a
  403 ``insufficient_scope`` asks for the union of the scopes asked before and the
  challenge's). False means another attempt cannot
  help (a scope already asked for, a token issued moments ago rejected): fail the
  request. Raises :class:`MCPAuthError` when authorization fails (refused, timed out,
  no usable metadata).

Choices where the specs leave room, and why:

- The first of ``authorization_servers`` is used (RFC 9728 §7.6 leaves the choice to
  the client). Registrations are kept per issuer, tokens per server.
- Every URL a server names is checked before it is used: the server's own origin, or
  another that is HTTPS and public (loopback and private addresses only for a server
  on the same kind of address); :func:`~nacelle.mcp.auth_flows.check_destination`.
- An authorization server whose ``grant_types_supported`` lacks the configured
  ``flow`` is refused before any registration, browser or token request.
- Scopes: the challenge's ``scope``, else the ``scopes=`` given, else the metadata's
  ``scopes_supported``, else none; plus ``offline_access`` for the code flow when the
  authorization server lists it (2026-07-28 "Refresh Tokens").
- The client is, in the MCP spec's order of preference: the pre-registered
  ``client_id``; else the ``client_metadata_url`` given, when the authorization
  server's metadata says ``client_id_metadata_document_supported: true`` (a public
  client: the URL is its id, and the server reads the document there); else one it
  registers, once per issuer, as a public client with its loopback redirect URI
  (RFC 7591). A refresh response's new
  refresh token replaces the old one (rotation), and a refresh refused with a 4xx
  drops the tokens, so the next 401 authorizes again.
- A token that a 401 rejects and a refresh replaced is not refreshed again on the next
  401: that one authorizes from scratch, so a resource that refuses refreshed tokens
  cannot keep the client refreshing forever.

Tokens and client secrets never appear in a repr (``<hidden>``), a log record or an
error (see :mod:`nacelle.mcp.auth_flows`). :class:`MCPAuthError` is an
:class:`~nacelle.mcp.MCPError`.

Outer ring: imports the standard library, ``nacelle.errors``, ``nacelle.bounded_json``,
``nacelle._files`` (the private-file writing and lock every file nacelle keeps
shares), ``nacelle.mcp.auth_flows`` and ``nacelle.mcp.auth_metadata``; ``requests``
only in the first of those, inside functions.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple

from .._loggers import get_logger
from .. import bounded_json
from ..errors import ConfigError
from .._files import file_lock, private_directory, write_atomic
from .auth_flows import (
    Client, LoopbackRedirect, MCPAuthError, authorization_url, canonical,
    check_authorization_response, check_destination, parse_challenge, pkce_pair, register,
    safe_url, token_request,
)
from .auth_metadata import Discovery, check_client_metadata_url, discover

__all__ = ["FileTokenStore", "MCPAuthError", "MemoryTokenStore", "OAuth", "TokenStore"]

logger = get_logger(__name__)

FLOWS = ("authorization_code", "client_credentials")


class TokenStore(Protocol):
    """Where :class:`OAuth` keeps tokens and registrations: JSON objects by key (a
    server's canonical URL, or ``client <issuer>`` for a registration)."""

    def load(self, key: str) -> Optional[Dict[str, Any]]: ...

    def save(self, key: str, tokens: Dict[str, Any]) -> None: ...

    def delete(self, key: str) -> None: ...


class MemoryTokenStore:
    """Tokens for this process's lifetime only (the default)."""

    def __init__(self) -> None:
        self._entries: Dict[str, str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryTokenStore({len(self._entries)} entries, tokens=<hidden>)"

    def load(self, key: str) -> Optional[Dict[str, Any]]:
        with self._lock:
            text = self._entries.get(key)
        return None if text is None else dict(json.loads(text))

    def save(self, key: str, tokens: Dict[str, Any]) -> None:
        text = json.dumps(tokens)  # a copy: the caller's dict may change after
        with self._lock:
            self._entries[key] = text

    def delete(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)


class FileTokenStore:
    """Every entry in one JSON file, 0600 in a 0700 directory, replaced atomically by
    :func:`nacelle._files.write_atomic` (a temporary file in the same directory,
    fsynced, renamed over, the directory fsynced), and read-modify-written
    under an ``flock`` so processes sharing it keep each other's rotated tokens."""

    def __init__(self, path: "os.PathLike[str] | str") -> None:
        self.path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        self.directory = os.path.dirname(self.path)
        if not os.path.isdir(self.directory):
            private_directory(self.directory)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileTokenStore({self.path!r})"

    def load(self, key: str) -> Optional[Dict[str, Any]]:
        with self._locked():
            entry = self._read().get(key)
        return dict(entry) if isinstance(entry, dict) else None

    def save(self, key: str, tokens: Dict[str, Any]) -> None:
        with self._locked():
            entries = self._read()
            entries[key] = dict(tokens)
            self._write(entries)

    def delete(self, key: str) -> None:
        with self._locked():
            entries = self._read()
            if entries.pop(key, None) is not None:
                self._write(entries)

    def _read(self) -> Dict[str, Any]:
        try:
            with open(self.path, "rb") as handle:
                value = bounded_json.loads(handle.read().decode("utf-8"), what="the token file",
                                           max_depth=bounded_json.DOCUMENT_DEPTH)
        except FileNotFoundError:
            return {}
        except (UnicodeDecodeError, ValueError):
            value = None
        if not isinstance(value, dict):  # left as it is, for someone to look at
            raise MCPAuthError(f"the token file {self.path} cannot be read: not a JSON object")
        return value

    def _write(self, entries: Dict[str, Any]) -> None:
        write_atomic(self.path, json.dumps(entries, indent=1, sort_keys=True).encode("utf-8"))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock, file_lock(self.path + ".lock"):
            yield


class OAuth:
    """OAuth 2.1 credentials for MCP servers over HTTP; the module docstring gives
    the two methods the transport calls and what they promise.

    ``flow`` is ``"authorization_code"`` (a person signs in: the authorization page's
    URL goes to ``open_browser``, by default :func:`webbrowser.open`, and the answer
    comes back to a one-shot server on ``127.0.0.1:redirect_port``, 0 for any free
    port, within ``redirect_timeout`` seconds) or ``"client_credentials"`` (a
    service; needs ``client_id`` and ``client_secret``). ``clock`` gives the time in
    seconds since the epoch, for tests.

    ``client_metadata_url`` is the ``https://`` URL of a Client ID Metadata Document
    you publish (its ``client_id`` member that same URL, its ``redirect_uris``
    holding ``http://127.0.0.1/callback``: an authorization server takes a loopback
    redirect on any port, RFC 8252 §7.3, or give ``redirect_port`` the one the
    document names). It is used as the client id with an authorization server that
    says it reads such documents, and dynamic registration with any other; a
    ``client_id`` given too wins over it, as the MCP spec orders them.
    """

    def __init__(self, *, client_id: Optional[str] = None, client_secret: Optional[str] = None,
                 flow: str = "authorization_code", scopes: Optional[Sequence[str]] = None,
                 client_metadata_url: Optional[str] = None,
                 store: Optional[TokenStore] = None,
                 open_browser: Optional[Callable[[str], Any]] = None,
                 client_name: str = "nacelle", redirect_port: int = 0,
                 redirect_timeout: float = 300.0, timeout: float = 30.0,
                 skew: float = 60.0, clock: Callable[[], float] = time.time) -> None:
        if flow not in FLOWS:
            raise ConfigError(f"flow must be one of {', '.join(FLOWS)}, got {flow!r}")
        if flow == "client_credentials" and not (client_id and client_secret):
            raise ConfigError("the client_credentials flow needs client_id and client_secret")
        if client_secret and not client_id:
            raise ConfigError("a client_secret needs its client_id")
        if client_metadata_url is not None and flow != "authorization_code":
            raise ConfigError("client_metadata_url names a public client of the "
                              "authorization_code flow; client_credentials needs a client_id")
        self.client_id, self.flow, self.client_name = client_id, flow, client_name
        self.client_metadata_url = None if client_metadata_url is None else \
            check_client_metadata_url(client_metadata_url)
        self._secret = client_secret or None
        self.scopes = " ".join(scopes) if scopes else None
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self.open_browser = open_browser or _open_in_browser
        self.redirect_port, self.redirect_timeout = redirect_port, redirect_timeout
        self.timeout, self.skew, self.clock = timeout, skew, clock
        self._lock = threading.RLock()
        self._sent = threading.local()

    def __repr__(self) -> str:
        secret = ", client_secret=<hidden>" if self._secret else ""
        document = f", client_metadata_url={self.client_metadata_url!r}" \
            if self.client_metadata_url else ""
        return (f"OAuth(flow={self.flow!r}, client_id={self.client_id!r}{secret}{document}, "
                f"store={self.store!r})")

    def headers(self, server_url: str) -> Dict[str, str]:
        """The ``Authorization`` header for ``server_url``, refreshed if it expired;
        ``{}`` when no token is held yet."""
        key = canonical(server_url)
        with self._lock:
            record = self.store.load(key)
            if record and self._expired(record):
                record = self._renewed(key, record)
                if record is None:  # expired for good: the next 401 authorizes anew
                    self.store.delete(key)
            self._sent.token = record["access_token"] if record else None
        return {"Authorization": f"Bearer {record['access_token']}"} if record else {}

    def unauthorized(self, server_url: str, www_authenticate: str) -> bool:
        """React to a 401/403 from ``server_url``; True means resend the request once."""
        challenge = parse_challenge(www_authenticate)
        key, sent = canonical(server_url), getattr(self._sent, "token", None)
        with self._lock:
            record = self.store.load(key)
            if record and record.get("access_token") != sent:
                logger.debug("another request replaced the token for %s", safe_url(key))
                return True
            step_up = challenge.get("error") == "insufficient_scope"
            asked = set((record or {}).get("requested_scope", "").split())
            scope, metadata_url = challenge.get("scope"), challenge.get("resource_metadata")
            found: Optional[Discovery] = None
            if step_up:
                if record and set((scope or "").split()) <= asked:
                    logger.debug("%s wants scopes already asked for", safe_url(key))
                    return False
                scope = " ".join(sorted(asked | set((scope or "").split()))) or None
            elif record:
                found = discover(server_url, metadata_url, timeout=self.timeout)
                if found.issuer != record.get("issuer"):
                    # The resource moved to another authorization server (SEP-2352): the
                    # tokens and the client registered at the old one mean nothing there.
                    logger.debug("%s now names another authorization server", safe_url(key))
                elif self._renewable(record):
                    logger.debug("refreshing the token %s rejected", safe_url(key))
                    if self._renewed(key, record, after_401=True):
                        return True
                elif self.clock() - float(record.get("issued_at", 0)) < min(self.skew, 10):
                    logger.debug("%s rejected a token issued moments ago", safe_url(key))
                    return False
            self._authorize(key, server_url, metadata_url, scope, found)
            return True

    def _expired(self, record: Dict[str, Any]) -> bool:
        expires, issued = record.get("expires_at"), float(record.get("issued_at", 0))
        if not isinstance(expires, (int, float)):
            return False
        margin = min(self.skew, max(0.0, (expires - issued) / 2))
        return self.clock() >= expires - margin

    def _renewable(self, record: Dict[str, Any]) -> bool:
        return not record.get("refreshed_after_401") and bool(
            record.get("refresh_token") or self.flow == "client_credentials")

    def _renewed(self, key: str, record: Dict[str, Any],
                 after_401: bool = False) -> Optional[Dict[str, Any]]:
        """``record`` with a new token (refresh grant, or a new client-credentials grant),
        saved; None, the tokens dropped, when the server refused; None if impossible."""
        endpoint, client = record.get("token_endpoint"), _client(record)
        if not endpoint or client is None:
            return None
        if record.get("refresh_token"):
            form = {"grant_type": "refresh_token", "refresh_token": record["refresh_token"]}
        elif self.flow == "client_credentials":
            form = {"grant_type": "client_credentials"}
        else:
            return None
        form.update(resource=record.get("resource") or key)
        if record.get("requested_scope"):
            form["scope"] = record["requested_scope"]
        try:
            answer = token_request(endpoint, form, client, timeout=self.timeout, server=key)
        except MCPAuthError as exc:
            if not 400 <= exc.status < 500:
                raise
            logger.debug("the token endpoint refused to renew the token for %s (%s)",
                         safe_url(key), exc.error or exc.status)
            self.store.delete(key)
            return None
        renewed = self._record(answer, record, record.get("requested_scope"))
        renewed["refreshed_after_401"] = after_401
        self.store.save(key, renewed)
        logger.debug("renewed the token for %s", safe_url(key))
        return renewed

    def _record(self, answer: Dict[str, Any], base: Dict[str, Any],
                scope: Optional[str]) -> Dict[str, Any]:
        now = self.clock()
        record = dict(base, access_token=answer["access_token"], issued_at=now,
                      requested_scope=scope or "", expires_at=None)
        lifetime = answer.get("expires_in")
        if isinstance(lifetime, (int, float)) and not isinstance(lifetime, bool):
            record["expires_at"] = now + float(lifetime)
        if isinstance(answer.get("refresh_token"), str):  # rotated: the new one replaces it
            record["refresh_token"] = answer["refresh_token"]
        if isinstance(answer.get("scope"), str):
            record["scope"] = answer["scope"]
        return record

    def _authorize(self, key: str, server_url: str, metadata_url: Optional[str],
                   scope: Optional[str], found: Optional[Discovery] = None) -> None:
        resource, issuer, meta = found or discover(server_url, metadata_url,
                                                   timeout=self.timeout)
        self._check_grant(issuer, meta)
        scope = scope or self.scopes or resource.get("scope")
        target = str(resource.get("resource") or key)
        base = {"issuer": issuer, "token_endpoint": meta["token_endpoint"], "resource": target}
        if self.flow == "client_credentials":
            client = Client(str(self.client_id), self._secret,
                            _method(meta, None if self._secret is None else "client_secret_basic"))
            form = {"grant_type": "client_credentials", "resource": target}
            if scope:
                form["scope"] = scope
            answer = token_request(meta["token_endpoint"], form, client, timeout=self.timeout,
                                   server=server_url)
        else:
            if "offline_access" in (meta.get("scopes_supported") or []) and scope:
                scope = " ".join(sorted(set(scope.split()) | {"offline_access"}))
            client, answer = self._code_flow(issuer, meta, scope, target, server_url)
        record = self._record(answer, dict(base, **client.as_dict()), scope)
        self.store.save(key, record)
        logger.debug("authorized with %s for %s", safe_url(issuer), safe_url(key))

    def _check_grant(self, issuer: str, meta: Dict[str, Any]) -> None:
        """MCPAuthError before anything is sent when the authorization server says it
        does not offer the grant ``flow`` needs. Only a list it gives is believed:
        RFC 8414 §2's default when it is absent (``authorization_code`` and
        ``implicit``) is left to the token endpoint to confirm, since servers that
        issue client-credentials tokens often leave the member out."""
        grants = meta.get("grant_types_supported")
        if isinstance(grants, list) and self.flow not in grants:
            offered = ", ".join(str(g)[:40] for g in grants[:10]) or "none"
            raise MCPAuthError(f"the authorization server {safe_url(issuer)} does not offer "
                               f"the {self.flow} grant this OAuth is set up for (it offers: "
                               f"{offered})", error="unsupported_grant_type")

    def _code_flow(self, issuer: str, meta: Dict[str, Any], scope: Optional[str],
                   target: str, server_url: str) -> Tuple[Client, Dict[str, Any]]:
        if "S256" not in (meta.get("code_challenge_methods_supported") or []):
            raise MCPAuthError(f"the authorization server {safe_url(issuer)} does not offer "
                               "PKCE with S256; the MCP spec says not to proceed")
        # The user's browser opens it: no page a server names may point it at a local one.
        check_destination(meta.get("authorization_endpoint"), server_url,
                          "the authorization endpoint")
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(32)
        with LoopbackRedirect(state, port=self.redirect_port) as receiver:
            client = self._client_for(issuer, meta, receiver.redirect_uri, server_url)
            url = authorization_url(meta["authorization_endpoint"], {
                "response_type": "code", "client_id": client.client_id,
                "redirect_uri": receiver.redirect_uri, "code_challenge": challenge,
                "code_challenge_method": "S256", "state": state, "scope": scope,
                "resource": target})
            logger.debug("opening the authorization page of %s", safe_url(issuer))
            self.open_browser(url)
            params = receiver.wait(self.redirect_timeout)
        code = check_authorization_response(
            params, issuer, meta.get("authorization_response_iss_parameter_supported") is True)
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                "redirect_uri": receiver.redirect_uri, "resource": target}
        return client, token_request(meta["token_endpoint"], form, client, timeout=self.timeout,
                                     server=server_url)

    def _client_for(self, issuer: str, meta: Dict[str, Any], redirect_uri: str,
                    server_url: str) -> Client:
        if self.client_id:
            return Client(self.client_id, self._secret, _method(meta, None))
        if self.client_metadata_url and meta.get("client_id_metadata_document_supported") is True:
            logger.debug("using the client id metadata document with %s", safe_url(issuer))
            return Client(self.client_metadata_url)
        key = f"client {issuer}"
        saved = _client(self.store.load(key) or {})
        if saved is not None:
            return saved
        endpoint = meta.get("registration_endpoint")
        if not endpoint:
            hint = " or one that reads client id metadata documents" \
                if self.client_metadata_url else ""
            raise MCPAuthError(f"the authorization server {safe_url(issuer)} offers no "
                               f"registration{hint}: pass OAuth(client_id=...)")
        # "native": the redirect is a loopback one, which the OIDC registration
        # default ("web") would refuse; the MCP spec asks for it since 2026-07-28.
        client = register(endpoint, {
            "client_name": self.client_name, "redirect_uris": [redirect_uri],
            "application_type": "native",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "token_endpoint_auth_method": "none"},
            timeout=self.timeout, server=server_url)
        self.store.save(key, client.as_dict())
        logger.debug("registered a client with %s", safe_url(issuer))
        return client


def _client(record: Dict[str, Any]) -> Optional[Client]:
    client_id = record.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        return None
    return Client(client_id, record.get("client_secret"), record.get("auth_method"))


def _method(meta: Dict[str, Any], default: Optional[str]) -> Optional[str]:
    """``client_secret_post`` if the server names it and not ``client_secret_basic``."""
    methods: List[str] = meta.get("token_endpoint_auth_methods_supported") or []
    if "client_secret_post" in methods and "client_secret_basic" not in methods:
        return "client_secret_post"
    return default


def _open_in_browser(url: str) -> None:
    import webbrowser  # only when a person is to sign in

    if not webbrowser.open(url):
        logger.warning("no browser could be opened for the authorization page")
