"""The OAuth 2.1 wire of the MCP client's authorization (:mod:`nacelle.mcp.auth`):
the error it raises, the ``WWW-Authenticate`` parser, the discovery requests, dynamic
client registration, PKCE, the token endpoint and the loopback redirect receiver.

:mod:`nacelle.mcp.auth` decides *when* to discover, refresh or re-authorize; this
module knows *how*, one function a step, so each step is tested alone. The choices
where the specifications are silent:

- **No secret leaves through an error.** A request that fails before any answer is
  named by its method, scheme, host and path and the exception's type alone, and is
  raised outside the ``except`` that caught ``requests``' exception, so neither its
  ``__cause__`` nor its ``__context__`` holds the request (its form, its
  ``Authorization`` header). An answer's error text — the OAuth ``error`` and
  ``error_description``, else a one-line preview of the body — has every secret the
  request carried (client secret, code, verifier, refresh token, in their raw and
  URL-encoded forms) replaced by ``<hidden>`` *before* it is cut to length, since an
  authorization server that echoes its input is not rare.
- **HTTPS, except on loopback.** Every metadata document, endpoint and redirect is
  refused unless it is ``https://`` or ``http://`` to ``127.0.0.1``, ``localhost`` or
  ``::1`` (OAuth 2.1 §1.5; the MCP spec's "Communication Security"). A token is a
  bearer credential: one sent in clear once is gone.
- **Discovery goes only where the user pointed, or to the public internet.** Every
  URL a server names (the challenge's ``resource_metadata``, the metadata's
  ``authorization_servers``, the endpoints, each redirect hop) is checked by
  :func:`check_destination` before anything is sent or a browser opened: the MCP
  server's own origin is always fine (the user chose it); another origin is fine when
  every address its host resolves to is public by the SSRF guard's table
  (:func:`nacelle.toolsets.ssrf.blocked_reason`). A loopback or private address on
  another origin is accepted only when the MCP server's own addresses are of the same
  kind — a server on 127.0.0.1 with its authorization server on another local port
  (how test and development set-ups run), a server inside a private network naming a
  sign-in service inside it — and a link-local one (cloud metadata) never. The MCP
  spec lets the authorization server be another origin ("may be hosted with the
  resource server or a separate entity",
  https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization), and
  its security guide asks clients to block private ranges for exactly these URLs
  (https://modelcontextprotocol.io/docs/tutorials/security/security_best_practices,
  "Server-Side Request Forgery"; RFC 9728 §7.7). The limit: the name is resolved for
  the check and again by ``requests`` to connect, so a name that answers differently
  the second time (DNS rebinding) is not stopped here.
- **Token and registration requests never follow redirects**, so a 307 cannot replay
  the client secret or the code to another host. Metadata ``GET``\\ s, which carry
  nothing, follow at most five, each hop checked as above.
- **The loopback receiver answers one authorization response whose ``state``
  matches** (compared in constant time) and refuses every other one with a 400,
  counting it, while it keeps waiting until the deadline: a stray or forged request
  to the port cannot end the user's login, and cannot complete it either. Each
  connection is served on its own thread with a 10 s socket timeout, at most 16 at
  once (more are closed unanswered), so a connection that sends nothing cannot hold
  up the browser's. It never logs a request line, which carries the code.
- **PKCE is S256 only.** The MCP spec says to refuse a server whose metadata does not
  list a code challenge method; ``plain`` is refused as well, since it protects
  nothing a network observer cannot see.

Outer ring: imports the standard library, ``nacelle.errors``, the package's
``errors``, ``nacelle.sse`` (``parse_json``), ``nacelle._net.secrets`` (URLs named
without their secrets), the SSRF guard's address table (``nacelle.toolsets.ssrf``,
standard library only) and ``requests`` inside the functions that send (``import
nacelle`` never imports it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import ipaddress
import re
import secrets
import threading
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple, Type
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit

from .._loggers import get_logger
from .._net.secrets import hide as scrub
from .._net.secrets import safe_url as safe_url
from ..errors import NacelleError
from ..sse import parse_json
from ..toolsets.ssrf import IP, blocked_reason, resolve_checked
from .errors import MCPError

__all__ = [
    "Client", "LoopbackRedirect", "MCPAuthError", "authorization_url", "canonical",
    "check_authorization_response", "check_destination", "covers", "fetch_json", "get_json",
    "metadata_urls", "parse_challenge",
    "pkce_pair", "register", "resource_metadata_urls", "safe_url", "scrub", "token_request",
]

logger = get_logger(__name__)

MAX_BODY = 2**20
MAX_REDIRECTS = 5
PREVIEW_CHARS = 200
#: The loopback receiver: how long one connection may take, and how many at once.
REDIRECT_READ_TIMEOUT = 10.0
REDIRECT_CONNECTIONS = 16
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_ITEM = re.compile(rf'[\s,]*(?:(?P<key>{_TOKEN})\s*=\s*(?P<value>"(?:[^"\\]|\\.)*"|[^\s,]*)'
                   rf'|(?P<scheme>{_TOKEN}))')


class MCPAuthError(MCPError):
    """Authorizing with an MCP server failed: discovery found no usable metadata, the
    user refused or did not answer in time, or a token endpoint refused.

    ``status`` is the HTTP status of a refusal (0 when none arrived); ``error`` the
    OAuth error code (``invalid_grant``…) when the server gave one. The message never
    holds a token or a client secret. An :class:`~nacelle.mcp.MCPError`, so a transport
    that meets it fails the request like any other MCP failure; it takes MCPError's
    ``code`` and ``data`` too, so whatever copies an MCPError by its constructor (the
    session does, for each thread that raises it) copies this one.
    """

    def __init__(self, message: str, *, status: int = 0, error: str = "",
                 code: Optional[int] = None, data: Any = None) -> None:
        super().__init__(message, code=code, data=data)
        self.status = status
        self.error = error

    def __reduce__(self) -> Tuple[Any, ...]:  # keep status and error through pickling
        return (_rebuild_error, (str(self), self.status, self.error, self.code, self.data))


def _rebuild_error(message: str, status: int, error: str, code: Optional[int] = None,
                   data: Any = None) -> MCPAuthError:
    return MCPAuthError(message, status=status, error=error, code=code, data=data)


class Client:
    """A client registration: its id, its secret if it has one, and how it
    authenticates at the token endpoint (``none``, ``client_secret_basic`` or
    ``client_secret_post``). The repr hides the secret."""

    def __init__(self, client_id: str, secret: Optional[str] = None,
                 method: Optional[str] = None) -> None:
        self.client_id = client_id
        self.secret = secret or None
        self.method = method or ("client_secret_basic" if self.secret else "none")

    def __repr__(self) -> str:
        shown = ", secret=<hidden>" if self.secret else ""
        return f"Client({self.client_id!r}{shown}, method={self.method!r})"

    def as_dict(self) -> Dict[str, Any]:
        return {"client_id": self.client_id, "client_secret": self.secret,
                "auth_method": self.method}


def parse_challenge(header: Optional[str]) -> Dict[str, str]:
    """The parameters of the ``Bearer`` challenge in a ``WWW-Authenticate`` value
    (RFC 9110 §11.6.1, RFC 6750 §3), names lower-cased, quoted strings unquoted; ``{}``
    when there is none. Other schemes' parameters are skipped."""
    text, position, scheme, found = header or "", 0, "", {}  # type: str, int, str, Dict[str, str]
    while position < len(text):
        match = _ITEM.match(text, position)
        if match is None or match.end() == position:
            position += 1
            continue
        position = match.end()
        if match.group("scheme"):
            scheme = match.group("scheme").lower()
        elif scheme == "bearer":
            value = match.group("value")
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            found.setdefault(match.group("key").lower(), value)
    return found


def canonical(url: str) -> str:
    """The resource identifier of an MCP server URL (RFC 8707 §2, the MCP spec's
    "Canonical Server URI"): scheme and host lower-cased, no query, no fragment, no
    trailing slash. The query is dropped, not kept: a URL's query may hold a key."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), "", ""))


def covers(resource: str, server_url: str) -> bool:
    """Whether metadata naming ``resource`` may be used for ``server_url``: the same
    canonical URI, or one of its leading path segments on the same origin (a server
    at ``/mcp`` whose metadata names its origin)."""
    mine, theirs = canonical(server_url), canonical(resource)
    return mine == theirs or mine.startswith(theirs + "/")


def check_url(url: Any, what: str) -> str:
    """``url`` if HTTPS (or HTTP to a loopback host); MCPAuthError otherwise."""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or not parts.hostname or not (
            parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK)):
        shown = safe_url(url) if isinstance(url, str) else type(url).__name__
        raise MCPAuthError(f"{what} must be an https:// URL (http:// only to a loopback "
                           f"address), got {shown!r}")
    return str(url)


def check_destination(url: Any, server: Optional[str], what: str) -> str:
    """``url`` if discovery for the MCP server at ``server`` may send to it (the
    module docstring gives the rule); MCPAuthError otherwise. ``server`` None means
    the caller chose ``url`` itself: only :func:`check_url` applies."""
    checked = check_url(url, what)
    if server is None or _origin(checked) == _origin(server):
        return checked
    mine = _kinds(server, _addresses(server))
    for ip in _addresses(checked):
        reason = blocked_reason(ip)
        if reason and _kind(ip) not in mine:
            raise MCPAuthError(
                f"{what} {safe_url(checked)} is {reason}, and the MCP server "
                f"{safe_url(server)} is not on such an address: not used (an MCP server may "
                "only send the client to its own origin or to the public internet)")
    return checked


def _origin(url: str) -> Tuple[str, str, Optional[int]]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port


def _addresses(url: str) -> List[IP]:
    """Every address the host of ``url`` resolves to; [] when it does not resolve
    (nothing can be sent there either). The seam tests replace to play a resolver."""
    _, host, port = _origin(url)
    try:
        found = resolve_checked(host, port or 443, allow_private=True)
    except (NacelleError, OSError, UnicodeError):
        return []
    return [ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]) for _, sockaddr in found]


def _kind(ip: IP) -> str:
    """Which non-public addresses may be named by a server on the same kind."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"  # cloud metadata services live here: never another origin
    return "private"


def _kinds(server: str, addresses: List[IP]) -> FrozenSet[str]:
    """The kinds of non-public address other origins may have, for a server on
    ``addresses``: its own, when every one of them is of that kind."""
    kinds = {_kind(ip) if blocked_reason(ip) else "public" for ip in addresses}
    return frozenset(kinds & {"loopback", "private"}) if len(kinds) == 1 else frozenset()


def resource_metadata_urls(server_url: str) -> List[str]:
    """Where RFC 9728 §3.1 protected-resource metadata may be, in the MCP spec's order:
    the well-known suffix inserted before the endpoint's path, then at the root."""
    parts = urlsplit(server_url)
    root = urlunsplit((parts.scheme, parts.netloc, "/.well-known/oauth-protected-resource", "", ""))
    path = parts.path.rstrip("/")
    return [root + path, root] if path else [root]


def metadata_urls(issuer: str) -> List[str]:
    """Where an authorization server's metadata may be, in the MCP spec's order:
    RFC 8414 §3.1 (path inserted), then OpenID Connect Discovery inserted and appended."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    oauth, oidc = "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"
    if not path:
        return [origin + oauth, origin + oidc]
    return [origin + oauth + path, origin + oidc + path, origin + path + oidc]


def pkce_pair() -> Tuple[str, str]:
    """A fresh RFC 7636 code verifier (64 unreserved characters, 384 random bits) and
    its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def get_json(url: str, *, timeout: float,
             server: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The JSON object served at ``url``, or None when there is none (any failure: the
    caller tries the next place, and says where it looked if none answers). Raises
    MCPAuthError when ``url``, or a redirect, goes where discovery for ``server``
    may not (:func:`check_destination`)."""
    return fetch_json(url, timeout=timeout, server=server)[1]


def fetch_json(url: str, *, timeout: float,
               server: Optional[str] = None) -> Tuple[int, Optional[Dict[str, Any]]]:
    """:func:`get_json` with the HTTP status of the answer (0 when none came): a
    caller that falls back on a 404 alone tells "not served here" from "failed"."""
    check_destination(url, server, "the metadata URL")
    try:
        status, body = _send("GET", url, timeout=timeout, server=server,
                             headers={"Accept": "application/json"})
    except _Refused:
        raise
    except MCPAuthError as exc:
        logger.debug("no metadata at %s: %s", safe_url(url), exc)
        return 0, None
    document = _json_object(body) if status == 200 else None
    if document is None:
        logger.debug("no metadata at %s (HTTP %d)", safe_url(url), status)
    return status, document


def register(endpoint: str, metadata: Mapping[str, Any], *, timeout: float,
             server: Optional[str] = None) -> Client:
    """Register a client by RFC 7591 §3.1 at ``endpoint``, with the given client
    metadata; the registration the server made. ``server`` as for :func:`get_json`."""
    check_destination(endpoint, server, "the registration endpoint")
    status, body = _send("POST", endpoint, timeout=timeout, json_body=dict(metadata),
                         headers={"Accept": "application/json"})
    answer = _json_object(body)
    if status not in (200, 201) or answer is None or not isinstance(answer.get("client_id"), str):
        raise _refusal("client registration", endpoint, status, body, ())
    secret = answer.get("client_secret")
    return Client(answer["client_id"], secret if isinstance(secret, str) else None,
                  _str(answer.get("token_endpoint_auth_method")))


def token_request(endpoint: str, form: Mapping[str, str], client: Client, *,
                  timeout: float, server: Optional[str] = None) -> Dict[str, Any]:
    """POST a token request (OAuth 2.1 §3.2) for ``client`` and return the token
    response, checked: a non-empty ``access_token`` of type Bearer. ``server`` as for
    :func:`get_json`."""
    check_destination(endpoint, server, "the token endpoint")
    fields, headers = dict(form), {"Accept": "application/json"}
    if client.secret and client.method == "client_secret_post":
        fields.update(client_id=client.client_id, client_secret=client.secret)
    elif client.secret:  # RFC 6749 §2.3.1: each part form-encoded before base64
        pair = f"{quote(client.client_id, safe='')}:{quote(client.secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    else:
        fields["client_id"] = client.client_id
    hidden = [client.secret, headers.get("Authorization"), fields.get("code"),
              fields.get("code_verifier"), fields.get("refresh_token")]
    status, body = _send("POST", endpoint, timeout=timeout, data=fields, headers=headers)
    answer = _json_object(body)
    token = answer.get("access_token") if answer else None
    if status != 200 or answer is None or not isinstance(token, str) or not token:
        raise _refusal("the token request", endpoint, status, body, hidden)
    if str(answer.get("token_type", "")).lower() != "bearer":
        raise MCPAuthError(f"the token endpoint {safe_url(endpoint)} issued a token of type "
                           f"{str(answer.get('token_type'))[:40]!r}, not Bearer")
    return answer


def authorization_url(endpoint: str, params: Mapping[str, Optional[str]]) -> str:
    """``endpoint`` with the authorization request's parameters added to its query."""
    query = urlencode([(k, v) for k, v in params.items() if v])
    return endpoint + ("&" if urlsplit(endpoint).query else "?") + query


def check_authorization_response(params: Mapping[str, str], issuer: str,
                                 iss_supported: bool) -> str:
    """The code from an authorization response whose ``state`` already matched, once
    its ``iss`` is checked (RFC 9207 §2.4, as the 2026-07-28 MCP revision requires:
    before an error in it is believed, too); MCPAuthError otherwise."""
    iss = params.get("iss")
    if (iss is None and iss_supported) or (iss is not None and iss != issuer):
        raise MCPAuthError("the authorization response did not come from the authorization "
                           "server it was sent to (RFC 9207 iss check failed)")
    if params.get("error"):
        words = " ".join(f"{params.get('error')}: {params.get('error_description', '')}".split())
        raise MCPAuthError(f"authorization refused: {words[:PREVIEW_CHARS]}",
                           error=params["error"][:60])
    code = params.get("code")
    if not code:
        raise MCPAuthError("the authorization response carried no code")
    return code


class LoopbackRedirect:
    """A one-shot HTTP server on ``127.0.0.1`` that receives the authorization response
    (RFC 8252 §7.3). Use as a context manager; :meth:`wait` returns the response's
    parameters once one with the right ``state`` arrives."""

    def __init__(self, state: str, *, port: int = 0, path: str = "/callback") -> None:
        self._state, self._path = state, path
        self._params: Optional[Dict[str, str]] = None
        self._done, self._closing = threading.Event(), threading.Event()
        self._lock = threading.Lock()  # connections are served on threads of their own
        self.refused = 0
        self._server = _Receiver(("127.0.0.1", port), _handler(self))
        self._server.timeout = 0.05
        self.redirect_uri = f"http://127.0.0.1:{self._server.server_address[1]}{path}"
        self._thread = threading.Thread(target=self._serve, name="nacelle-oauth-redirect",
                                        daemon=True)

    def __repr__(self) -> str:
        return f"LoopbackRedirect({self.redirect_uri!r})"

    def __enter__(self) -> "LoopbackRedirect":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._closing.set()
        self._thread.join(2.0)
        self._server.server_close()

    def wait(self, timeout: float) -> Dict[str, str]:
        """The authorization response's parameters; MCPAuthError after ``timeout`` s."""
        if not self._done.wait(timeout) or self._params is None:
            refused = f"; {self.refused} with a wrong state were refused" if self.refused else ""
            raise MCPAuthError(f"no authorization response reached {self.redirect_uri} "
                               f"within {timeout:g} s{refused}")
        return self._params

    def _serve(self) -> None:
        while not self._done.is_set() and not self._closing.is_set():
            self._server.handle_request()

    def receive(self, target: str) -> Tuple[int, str]:
        """Status and page for a request to ``target`` (path and query)."""
        parts = urlsplit(target)
        if parts.path != self._path:
            return 404, "Not found."
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        state = params.get("state", "")
        with self._lock:
            if self._done.is_set() or not hmac.compare_digest(state.encode(),
                                                              self._state.encode()):
                self.refused += 1
                logger.warning("refused an authorization response whose state does not match")
                return 400, "This authorization response was not expected; it was ignored."
            self._params = params
            self._done.set()
        return 200, "Authorization finished. You can close this window."


class _Receiver(http.server.ThreadingHTTPServer):
    """One thread a connection, at most :data:`REDIRECT_CONNECTIONS` at once: a
    connection that sends nothing waits out its own timeout, not the browser's."""

    daemon_threads = True

    def __init__(self, address: Tuple[str, int],
                 handler: Type[http.server.BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._open = threading.BoundedSemaphore(REDIRECT_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._open.acquire(blocking=False):
            self.shutdown_request(request)  # too many at once: closed unanswered
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._open.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._open.release()


def _handler(receiver: LoopbackRedirect) -> Type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = REDIRECT_READ_TIMEOUT  # per connection: StreamRequestHandler sets it

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            status, page = receiver.receive(self.path)
            body = f"<!doctype html><title>nacelle</title><p>{page}</p>".encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the request line holds the authorization code: never written anywhere

    return Handler


class _Refused(MCPAuthError):
    """A redirect went where discovery may not: not a missing document, a refusal."""


def _send(method: str, url: str, *, timeout: float, server: Optional[str] = None,
          **options: Any) -> Tuple[int, bytes]:
    """Send one request; a ``GET`` follows up to :data:`MAX_REDIRECTS` redirects,
    each hop checked by :func:`check_destination` before it is sent."""
    for _ in range(MAX_REDIRECTS + 1):
        status, body, location = _send_once(method, url, timeout=timeout, **options)
        if method != "GET" or location is None:
            return status, body
        target = urljoin(url, location)
        try:
            url = check_destination(target, server, f"a redirect from {safe_url(url)} to")
        except MCPAuthError as exc:
            raise _Refused(str(exc)) from None
    raise MCPAuthError(f"{method} {safe_url(url)} failed: more than {MAX_REDIRECTS} redirects")


def _send_once(method: str, url: str, *, timeout: float,
               **options: Any) -> Tuple[int, bytes, Optional[str]]:
    import requests

    kwargs: Dict[str, Any] = {"timeout": timeout, "allow_redirects": False, "stream": True}
    if "json_body" in options:
        kwargs["json"] = options.pop("json_body")
    kwargs.update(options)
    failure = ""
    try:
        with requests.request(method, url, **kwargs) as response:
            location = response.headers.get("location") if response.is_redirect else None
            body = b"" if location else response.raw.read(MAX_BODY + 1, decode_content=True)
            if len(body) <= MAX_BODY:
                return response.status_code, body, location
            failure = f"an answer over {MAX_BODY} bytes"
    except requests.RequestException as exc:
        failure = type(exc).__name__
    # Raised here, outside the except: the requests exception, its URL and its
    # request's headers must not ride along as __context__.
    raise MCPAuthError(f"{method} {safe_url(url)} failed: {failure}")


def _json_object(body: bytes) -> Optional[Dict[str, Any]]:
    try:
        value = parse_json(body)  # no NaN, and no nesting the token file cannot hold
    except ValueError:  # UnicodeDecodeError included
        return None
    return value if isinstance(value, dict) else None


def _refusal(what: str, url: str, status: int, body: bytes,
             hidden: Iterable[Optional[str]]) -> MCPAuthError:
    hidden = list(hidden)
    answer = _json_object(body)
    error = _str(answer.get("error")) if answer else None
    if error:
        text = f"{error}: {_str(answer.get('error_description')) or ''}" if answer else error
    else:
        text = body[:4 * PREVIEW_CHARS].decode("utf-8", "replace")
    text = " ".join(scrub(text, hidden).split())[:PREVIEW_CHARS]
    return MCPAuthError(f"{what} at {safe_url(url)} was refused (HTTP {status}): {text}",
                        status=status, error=scrub(error or "", hidden)[:60])


def _str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None
