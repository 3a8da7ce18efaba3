"""OAuth for MCP servers over HTTP, against an authorization server and an MCP-looking
protected resource that run here, on loopback, on free ports.

The authorization server checks what a real one checks — the PKCE verifier against
its S256 challenge, the redirect URI against the registered one (any loopback port,
RFC 8252 §7.3), the ``resource`` parameter, rotating refresh tokens — and echoes the
secrets it was sent in its error messages, so the tests can see they are scrubbed.
The resource answers 401 with ``WWW-Authenticate: Bearer resource_metadata=...``
until it is sent a token the authorization server issued for it. ``call`` does what
the HTTP transport does with an ``OAuth``: headers, and on a 401 ``unauthorized``
and one resend.
"""

import base64
import hashlib
import http.server
import ipaddress
import json
import logging
import os
import pickle
import secrets
import socket
import stat
import threading
import time
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import requests

from nacelle.errors import ConfigError, NacelleError
from nacelle.mcp import auth_flows, connect_http
from nacelle.mcp.auth import FileTokenStore, MCPAuthError, MemoryTokenStore, OAuth
from nacelle.mcp.auth_flows import (
    Client, canonical, check_destination, covers, metadata_urls, parse_challenge, pkce_pair,
    resource_metadata_urls, token_request,
)

SERVICE_ID, SERVICE_SECRET = "service-1", "s3cret-service-password"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class AuthServer:
    """The authorization server's state; ``serve`` wires it to HTTP."""

    def __init__(self) -> None:
        self.url = ""
        self.clients = {SERVICE_ID: {"secret": SERVICE_SECRET, "redirect_uris": []}}
        self.codes, self.access, self.refresh = {}, {}, {}
        self.issued, self.seen = [], []
        self.expires_in = 3600
        self.forge_state = False
        self.oauth_metadata, self.pkce = True, True
        self.issuer_override = None
        self.grant_types = None
        self.token_requests = 0
        # Client ID Metadata Documents: what the metadata says, and the documents a
        # real server would fetch from their https URLs (a table here: nothing local
        # serves https), as the draft's §4 has it read client_id and redirect_uris.
        self.cimd = None
        self.documents = {}
        self.token_client_ids = []
        self.registrations = []
        self.lock = threading.Lock()

    def metadata(self):
        extra = {} if self.grant_types is None else {"grant_types_supported": self.grant_types}
        if self.cimd is not None:
            extra["client_id_metadata_document_supported"] = self.cimd
        return {**extra, "issuer": self.issuer_override or self.url,
                "authorization_endpoint": self.url + "/authorize",
                "token_endpoint": self.url + "/token",
                "registration_endpoint": self.url + "/register",
                "scopes_supported": ["tools", "offline_access"],
                "code_challenge_methods_supported": ["S256"] if self.pkce else []}

    def get(self, path, query):
        if path == "/.well-known/oauth-authorization-server" and self.oauth_metadata:
            return 200, {}, self.metadata()
        if path == "/.well-known/openid-configuration":
            return 200, {}, self.metadata()
        if path == "/authorize":
            return self.authorize(query)
        return 404, {}, {"error": "not_found"}

    def authorize(self, q):
        client = self.clients.get(q.get("client_id"))
        if client is None and self.cimd is True:
            client = self.documents.get(q.get("client_id"))
        if client is None or _without_port(q.get("redirect_uri")) not in map(
                _without_port, client["redirect_uris"]):
            return 400, {}, {"error": "invalid_request"}
        if q.get("code_challenge_method") != "S256" or not q.get("resource"):
            return 400, {}, {"error": "invalid_request"}
        code = secrets.token_urlsafe(16)
        self.codes[code] = dict(q)
        self.issued.append(code)
        state = "forged" if self.forge_state else q["state"]
        location = q["redirect_uri"] + "?" + urlencode({"code": code, "state": state})
        return 302, {"Location": location}, {}

    def post(self, path, form, body, authorization):
        if path == "/register":
            client_id = "dyn-" + secrets.token_hex(4)
            self.clients[client_id] = {"secret": None, "redirect_uris": body["redirect_uris"]}
            self.registrations.append(body)
            return 201, {}, {"client_id": client_id, **body}
        if path == "/token":
            with self.lock:
                self.token_requests += 1
                return self.token(form, authorization)
        return 404, {}, {}

    def token(self, form, authorization):
        client_id, secret = form.get("client_id"), form.get("client_secret")
        if authorization.startswith("Basic "):
            client_id, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
        grant = form.get("grant_type")
        self.token_client_ids.append(client_id)
        if grant == "client_credentials":
            if self.clients.get(client_id, {}).get("secret") != secret or not secret:
                return 401, {}, {"error": "invalid_client",
                                 "error_description": f"bad secret {secret}"}
            return 200, {}, self.tokens(form["resource"], form.get("scope", ""), refresh=False)
        if grant == "authorization_code":
            grant_info = self.codes.pop(form.get("code"), None)
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(
                hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if (grant_info is None or grant_info["code_challenge"] != challenge
                    or grant_info["redirect_uri"] != form.get("redirect_uri")
                    or grant_info["resource"] != form.get("resource")):
                return 400, {}, {"error": "invalid_grant",
                                 "error_description": f"code {form.get('code')} with {verifier}"}
            return 200, {}, self.tokens(form["resource"], grant_info.get("scope", ""))
        if grant == "refresh_token":
            resource = self.refresh.pop(form.get("refresh_token"), None)
            if resource is None:
                return 400, {}, {"error": "invalid_grant",
                                 "error_description": f"unknown token {form.get('refresh_token')}"}
            return 200, {}, self.tokens(resource, form.get("scope", ""))
        return 400, {}, {"error": "unsupported_grant_type"}

    def tokens(self, resource, scope, refresh=True):
        access = secrets.token_urlsafe(24)
        self.access[access] = resource
        answer = {"access_token": access, "token_type": "Bearer",
                  "expires_in": self.expires_in, "scope": scope}
        self.issued.append(access)
        if refresh:
            answer["refresh_token"] = secrets.token_urlsafe(24)
            self.refresh[answer["refresh_token"]] = resource
            self.issued.append(answer["refresh_token"])
        return answer


class Resource:
    """The MCP-looking protected resource at ``/mcp``."""

    def __init__(self, auth_server: AuthServer) -> None:
        self.auth_server, self.url = auth_server, ""
        self.name_metadata = True
        self.metadata_redirect = None
        self.seen = []

    def get(self, path, query):
        if path == "/.well-known/oauth-protected-resource/mcp" and self.metadata_redirect:
            return 302, {"Location": self.metadata_redirect}, {}
        if path in ("/.well-known/oauth-protected-resource/mcp", "/moved"):
            return 200, {}, {"resource": self.url + "/mcp",
                             "authorization_servers": [self.auth_server.url],
                             "scopes_supported": ["tools"]}
        return 404, {}, {}

    def post(self, path, form, body, authorization):
        token = authorization[7:] if authorization.startswith("Bearer ") else ""
        if path == "/mcp" and self.auth_server.access.get(token) == self.url + "/mcp":
            return 200, {}, {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
        challenge = "Bearer error=\"invalid_token\", scope=\"tools\""
        if self.name_metadata:
            challenge = (f'Bearer resource_metadata="{self.url}/.well-known/oauth-protected-'
                         f'resource/mcp", scope="tools"')
        return 401, {"WWW-Authenticate": challenge}, {"error": "unauthorized"}


def _without_port(uri):
    parts = urlsplit(uri or "")
    return (parts.scheme, parts.hostname, parts.path)


def serve(app):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            parts = urlsplit(self.path)
            app.seen.append(("GET", parts.path))
            self.answer(*app.get(parts.path, dict(parse_qsl(parts.query))))

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            app.seen.append(("POST", urlsplit(self.path).path))
            is_json = self.headers.get("Content-Type", "").startswith("application/json")
            form = {} if is_json else dict(parse_qsl(raw))
            body = json.loads(raw) if is_json else {}
            self.answer(*app.post(urlsplit(self.path).path, form, body,
                                  self.headers.get("Authorization", "")))

        def answer(self, status, headers, document):
            data = json.dumps(document).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    app.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return server


@pytest.fixture
def servers():
    auth_server = AuthServer()
    resource = Resource(auth_server)
    running = []
    try:
        running.append(serve(auth_server))
        running.append(serve(resource))
        yield auth_server, resource
    finally:
        for server in running:
            server.shutdown()
            server.server_close()


class Browser:
    """The user: follows the authorization URL, and its redirect to the loopback."""

    def __init__(self) -> None:
        self.opened = []

    def __call__(self, url):
        self.opened.append(url)
        requests.get(url, timeout=5)


def call(auth, url):
    """One request the way the transport makes it: a 401 may earn one resend."""
    for attempt in range(2):
        response = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                 headers=auth.headers(url), timeout=5)
        if response.status_code in (401, 403) and attempt == 0 and auth.unauthorized(
                url, response.headers.get("WWW-Authenticate", "")):
            continue
        return response
    return response


def interactive(**options):
    options.setdefault("open_browser", Browser())
    options.setdefault("redirect_timeout", 5.0)
    options.setdefault("timeout", 5.0)
    return OAuth(**options)


# Pure parts


def test_the_bearer_challenge_is_read_among_other_schemes():
    header = ('Basic realm="x", Bearer realm="mcp", resource_metadata="https://a.example/'
              'meta", scope="files:read files:write", error="insufficient_scope", '
              'error_description="needs \\"write\\""')
    found = parse_challenge(header)
    assert found["resource_metadata"] == "https://a.example/meta"
    assert found["scope"] == "files:read files:write"
    assert found["error_description"] == 'needs "write"'
    assert found["realm"] == "mcp"
    assert parse_challenge("") == {} and parse_challenge('Basic realm="x"') == {}
    assert parse_challenge("bearer error=invalid_token") == {"error": "invalid_token"}


def test_well_known_urls_are_tried_in_the_order_the_spec_gives():
    assert resource_metadata_urls("https://example.com/public/mcp?k=1") == [
        "https://example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://example.com/.well-known/oauth-protected-resource"]
    assert resource_metadata_urls("https://example.com/") == [
        "https://example.com/.well-known/oauth-protected-resource"]
    assert metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration"]
    assert metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration"]


def test_the_canonical_uri_drops_query_fragment_and_trailing_slash():
    assert canonical("HTTPS://MCP.Example.com/mcp/?key=secret#x") == "https://mcp.example.com/mcp"
    assert covers("https://mcp.example.com", "https://mcp.example.com/mcp")
    assert covers("https://mcp.example.com/mcp/", "https://mcp.example.com/mcp")
    assert not covers("https://mcp.example.com/m", "https://mcp.example.com/mcp")
    assert not covers("https://other.example.com", "https://mcp.example.com/mcp")


def test_the_pkce_challenge_is_the_s256_of_the_verifier():
    verifier, challenge = pkce_pair()
    assert 43 <= len(verifier) <= 128
    digest = hashlib.sha256(verifier.encode()).digest()
    assert challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert pkce_pair()[0] != verifier


def test_a_plain_http_authorization_server_off_loopback_is_refused():
    auth = interactive()
    with pytest.raises(MCPAuthError, match="https"):
        auth.unauthorized("https://mcp.example.com/mcp",
                          'Bearer resource_metadata="http://evil.example/meta"')


def test_bad_options_are_config_errors():
    with pytest.raises(ValueError):
        OAuth(flow="password")
    with pytest.raises(ValueError):
        OAuth(flow="client_credentials", client_id="x")


# Against the loopback servers


def test_a_401_runs_discovery_registration_and_the_pkce_code_flow(servers):
    auth_server, resource = servers
    browser = Browser()
    auth = interactive(open_browser=browser)
    url = resource.url + "/mcp"
    assert auth.headers(url) == {}  # nothing held: the first request goes without
    response = call(auth, url)
    assert response.status_code == 200, response.text
    assert ("GET", "/.well-known/oauth-protected-resource/mcp") in resource.seen
    assert auth_server.seen[:3] == [("GET", "/.well-known/oauth-authorization-server"),
                                    ("POST", "/register"), ("GET", "/authorize")]
    query = dict(parse_qsl(urlsplit(browser.opened[0]).query))
    assert query["code_challenge_method"] == "S256"
    assert query["resource"] == url
    assert set(query["scope"].split()) == {"tools", "offline_access"}
    assert query["client_id"].startswith("dyn-")
    # The next request carries the token without another flow.
    assert call(auth, url).status_code == 200 and len(browser.opened) == 1


def test_a_registration_says_the_client_is_native_with_a_loopback_redirect(servers):
    auth_server, resource = servers
    assert call(interactive(), resource.url + "/mcp").status_code == 200
    [body] = auth_server.registrations
    assert body["application_type"] == "native"
    assert urlsplit(body["redirect_uris"][0]).hostname == "127.0.0.1"
    assert body["token_endpoint_auth_method"] == "none"


def test_the_well_known_path_is_probed_when_the_challenge_names_no_metadata(servers):
    auth_server, resource = servers
    resource.name_metadata = False
    auth = interactive()
    assert call(auth, resource.url + "/mcp").status_code == 200
    assert resource.seen[1] == ("GET", "/.well-known/oauth-protected-resource/mcp")


def test_openid_configuration_is_the_fallback_for_server_metadata(servers):
    auth_server, resource = servers
    auth_server.oauth_metadata = False
    assert call(interactive(), resource.url + "/mcp").status_code == 200
    assert ("GET", "/.well-known/openid-configuration") in auth_server.seen


@pytest.mark.slow
def test_a_redirect_with_the_wrong_state_is_refused_and_its_code_never_exchanged(servers):
    auth_server, resource = servers
    auth_server.forge_state = True
    auth = interactive(redirect_timeout=0.5)
    with pytest.raises(MCPAuthError, match="wrong state"):
        call(auth, resource.url + "/mcp")
    assert auth_server.token_requests == 0


def test_metadata_naming_another_issuer_is_not_used(servers):
    auth_server, resource = servers
    auth_server.issuer_override = "https://impostor.example"
    with pytest.raises(MCPAuthError, match="another issuer"):
        call(interactive(), resource.url + "/mcp")


def test_a_server_without_s256_is_refused_before_the_browser_opens(servers):
    auth_server, resource = servers
    auth_server.pkce = False
    browser = Browser()
    with pytest.raises(MCPAuthError, match="S256"):
        call(interactive(open_browser=browser), resource.url + "/mcp")
    assert browser.opened == []


def test_client_credentials_get_a_token_without_a_browser(servers):
    auth_server, resource = servers
    browser = Browser()
    auth = OAuth(flow="client_credentials", client_id=SERVICE_ID, client_secret=SERVICE_SECRET,
                 open_browser=browser, timeout=5.0)
    assert call(auth, resource.url + "/mcp").status_code == 200
    assert browser.opened == [] and ("POST", "/register") not in auth_server.seen


def test_an_expired_token_is_refreshed_by_the_next_headers_call(servers):
    auth_server, resource = servers
    clock, store = Clock(), MemoryTokenStore()
    auth = interactive(clock=clock, store=store)
    url = resource.url + "/mcp"
    assert call(auth, url).status_code == 200
    first = store.load(canonical(url))
    clock.now += 3600 - 30  # inside the skew: treated as expired
    header = auth.headers(url)
    second = store.load(canonical(url))
    assert header == {"Authorization": "Bearer " + second["access_token"]}
    assert second["access_token"] != first["access_token"]
    assert second["refresh_token"] != first["refresh_token"]  # rotated, and kept
    assert first["refresh_token"] not in auth_server.refresh
    assert call(auth, url).status_code == 200
    assert len(auth.open_browser.opened) == 1


def test_a_token_the_resource_rejects_is_replaced_by_a_new_authorization(servers):
    auth_server, resource = servers
    store, url = MemoryTokenStore(), resource.url + "/mcp"
    store.save(canonical(url), {"access_token": "revoked-token", "issued_at": 0,
                                "token_endpoint": auth_server.url + "/token",
                                "client_id": "dyn-gone"})
    auth = interactive(store=store)
    assert auth.headers(url) == {"Authorization": "Bearer revoked-token"}
    assert call(auth, url).status_code == 200
    assert store.load(canonical(url))["access_token"] != "revoked-token"
    assert len(auth.open_browser.opened) == 1


def test_a_token_the_resource_rejects_is_refreshed_at_the_same_authorization_server(servers):
    auth_server, resource = servers
    store, url = MemoryTokenStore(), resource.url + "/mcp"
    auth = interactive(store=store)
    assert call(auth, url).status_code == 200
    first = store.load(canonical(url))["access_token"]
    del auth_server.access[first]  # revoked: the resource answers 401
    assert call(auth, url).status_code == 200
    assert len(auth.open_browser.opened) == 1  # refreshed, not signed in again
    assert auth_server.seen[-1] == ("POST", "/token")


def test_a_resource_naming_another_authorization_server_is_authorized_there_anew(servers):
    auth_server, resource = servers
    second = AuthServer()
    running = serve(second)
    try:
        auth, url = interactive(), resource.url + "/mcp"
        assert call(auth, url).status_code == 200
        [registered] = [c for c in auth_server.clients if c.startswith("dyn-")]
        resource.auth_server = second  # the metadata names it; its tokens alone are taken
        assert call(auth, url).status_code == 200
        assert len(second.registrations) == 1 and len(auth.open_browser.opened) == 2
        assert registered not in second.token_client_ids and second.token_client_ids
        assert auth_server.token_requests == 1  # no refresh tried at the old one
    finally:
        running.shutdown()
        running.server_close()


def test_a_refused_refresh_drops_the_tokens_and_the_next_401_authorizes(servers):
    auth_server, resource = servers
    clock, store, url = Clock(), MemoryTokenStore(), resource.url + "/mcp"
    auth = interactive(clock=clock, store=store)
    assert call(auth, url).status_code == 200
    auth_server.refresh.clear()  # the authorization server forgot every refresh token
    clock.now += 7200
    assert auth.headers(url) == {}
    assert call(auth, url).status_code == 200
    assert len(auth.open_browser.opened) == 2


def test_the_file_store_is_private_and_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "state" / "tokens.json"
    store = FileTokenStore(path)
    store.save("https://a.example/mcp", {"access_token": "one"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    before = os.stat(path).st_ino
    store.save("https://b.example/mcp", {"access_token": "two"})
    assert os.stat(path).st_ino != before  # a new file renamed over, not rewritten in place
    assert FileTokenStore(path).load("https://a.example/mcp") == {"access_token": "one"}

    def broken_replace(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        store.save("https://a.example/mcp", {"access_token": "three"})
    monkeypatch.undo()
    assert store.load("https://a.example/mcp") == {"access_token": "one"}
    assert sorted(p.name for p in path.parent.iterdir()) == ["tokens.json", "tokens.json.lock"]
    store.delete("https://a.example/mcp")
    assert store.load("https://a.example/mcp") is None
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_an_unreadable_token_file_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text("[not json")
    with pytest.raises(MCPAuthError, match="tokens.json"):
        FileTokenStore(path).load("k")
    assert path.read_text() == "[not json"


def test_a_token_file_nested_five_thousand_deep_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text('{"k": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(MCPAuthError, match="tokens.json"):
        FileTokenStore(path).load("k")


def _chain(error):
    while error is not None:
        yield error
        error = error.__cause__ or error.__context__


def test_no_token_or_secret_appears_in_reprs_logs_or_errors(servers, tmp_path, caplog):
    auth_server, resource = servers
    caplog.set_level(logging.DEBUG)
    url = resource.url + "/mcp"
    store = FileTokenStore(tmp_path / "tokens.json")
    interactive_auth = interactive(store=store, clock=Clock())
    assert call(interactive_auth, url).status_code == 200
    service = OAuth(flow="client_credentials", client_id=SERVICE_ID,
                    client_secret=SERVICE_SECRET, timeout=5.0)
    assert call(service, url).status_code == 200
    interactive_auth.clock.now += 7200
    interactive_auth.headers(url)  # a refresh, logged at DEBUG

    errors = []
    wrong = OAuth(flow="client_credentials", client_id=SERVICE_ID,
                  client_secret="wrong-secret-value", timeout=5.0)
    with pytest.raises(MCPAuthError) as refused_client:
        call(wrong, url)
    errors.append(refused_client.value)
    echoed = "a-refresh-token-to-echo"
    with pytest.raises(MCPAuthError) as refused_refresh:
        token_request(auth_server.url + "/token",
                      {"grant_type": "refresh_token", "refresh_token": echoed},
                      Client("dyn-x"), timeout=5.0)
    errors.append(refused_refresh.value)
    assert refused_refresh.value.error == "invalid_grant" and refused_refresh.value.status == 400
    assert isinstance(refused_refresh.value, NacelleError)
    copy = pickle.loads(pickle.dumps(refused_refresh.value))
    assert (str(copy), copy.status, copy.error) == (
        str(refused_refresh.value), 400, "invalid_grant")

    secrets_seen = auth_server.issued + [SERVICE_SECRET, "wrong-secret-value", echoed]
    # urllib3 logs the request lines of the simulated user's browser, whose redirect
    # holds the code: that is the browser's log, not nacelle's, so it is left out.
    logged = "\n".join(r.getMessage() for r in caplog.records
                       if not ("/authorize?" in r.getMessage() or "/callback?" in r.getMessage()))
    assert "nacelle.mcp.auth" in {r.name for r in caplog.records}
    texts = [logged, repr(interactive_auth), repr(service), repr(wrong), repr(store),
             repr(Client("id", SERVICE_SECRET)), repr(MemoryTokenStore())]
    texts += [f"{e!s} {e!r} {e.error}" for error in errors for e in _chain(error)]
    assert len(auth_server.issued) >= 6
    for secret in secrets_seen:
        for text in texts:
            assert secret not in text
    assert "<hidden>" in str(refused_refresh.value) and "<hidden>" in repr(service)
    assert "<hidden>" in str(refused_client.value)


# Where discovery may go


def resolver(monkeypatch, table):
    """Play a resolver for the destination check: ``table`` maps a host, or a
    ``host:port``, to the addresses it answers; others resolve for real."""
    real = auth_flows._addresses

    def addresses(url):
        parts = urlsplit(url)
        found = table.get(f"{parts.hostname}:{parts.port}", table.get(parts.hostname))
        return [ipaddress.ip_address(a) for a in found] if found is not None else real(url)

    monkeypatch.setattr(auth_flows, "_addresses", addresses)


def public_resource(monkeypatch, resource):
    """Make the loopback resource look like a server on the public internet."""
    resolver(monkeypatch, {f"127.0.0.1:{urlsplit(resource.url).port}": ["93.184.216.34"]})


def test_a_destination_is_the_servers_own_origin_or_public_or_the_servers_own_kind(
        monkeypatch):
    resolver(monkeypatch, {"mcp.example": ["93.184.216.34"], "auth.example": ["93.184.216.35"],
                           "evil.example": ["10.0.0.7"], "metadata.example": ["169.254.169.254"],
                           "mixed.example": ["93.184.216.36", "127.0.0.1"],
                           "corp.internal": ["10.1.1.1"], "sso.internal": ["10.1.1.2"]})
    public, internal = "https://mcp.example/mcp", "https://corp.internal/mcp"
    assert check_destination("https://auth.example/token", public, "t")
    assert check_destination("https://mcp.example/.well-known/x", public, "t")
    assert check_destination("https://sso.internal/token", internal, "t")
    # loopback beside loopback: a local development or test set-up
    assert check_destination("http://127.0.0.1:9/token", "http://127.0.0.1:8/mcp", "t")
    assert check_destination("http://localhost:9/token", "http://[::1]:8/mcp", "t")
    refused = [("http://127.0.0.1:9/token", public), ("https://evil.example/token", public),
               ("https://mixed.example/token", public), ("http://auth.example/token", public),
               ("https://metadata.example/x", internal), ("http://127.0.0.1:9/x", internal),
               ("https://evil.example/x", "http://127.0.0.1:8/mcp")]
    for url, server in refused:
        with pytest.raises(MCPAuthError):
            check_destination(url, server, "the token endpoint")
    # the caller's own choice (no server named) is held to HTTPS-or-loopback only
    assert check_destination("http://127.0.0.1:9/token", None, "t")


def test_a_public_servers_challenge_cannot_send_discovery_to_loopback(servers, monkeypatch):
    auth_server, resource = servers
    public_resource(monkeypatch, resource)
    auth = interactive()
    challenge = f'Bearer resource_metadata="{auth_server.url}/.well-known/oauth-authorization-server"'
    with pytest.raises(MCPAuthError, match="loopback"):
        auth.unauthorized(resource.url + "/mcp", challenge)
    assert auth_server.seen == [] and auth.open_browser.opened == []


def test_a_public_servers_metadata_cannot_name_a_loopback_authorization_server(
        servers, monkeypatch):
    auth_server, resource = servers
    public_resource(monkeypatch, resource)
    auth = OAuth(flow="client_credentials", client_id=SERVICE_ID, client_secret=SERVICE_SECRET,
                 timeout=5.0)
    with pytest.raises(MCPAuthError, match="the authorization server .* loopback"):
        call(auth, resource.url + "/mcp")
    assert ("GET", "/.well-known/oauth-protected-resource/mcp") in resource.seen
    assert auth_server.seen == [] and auth_server.token_requests == 0


def test_a_metadata_redirect_to_loopback_is_not_followed_for_a_public_server(
        servers, monkeypatch):
    auth_server, resource = servers
    public_resource(monkeypatch, resource)
    resource.metadata_redirect = auth_server.url + "/.well-known/oauth-authorization-server"
    with pytest.raises(MCPAuthError, match="redirect"):
        call(interactive(), resource.url + "/mcp")
    assert auth_server.seen == []


def test_a_metadata_redirect_on_loopback_is_followed_for_a_loopback_server(servers):
    auth_server, resource = servers
    resource.metadata_redirect = "/moved"
    assert call(interactive(), resource.url + "/mcp").status_code == 200
    assert ("GET", "/moved") in resource.seen


def test_a_silent_connection_to_the_redirect_port_does_not_hold_up_the_real_redirect(servers):
    auth_server, resource = servers

    class SilentFirst(Browser):
        def __call__(self, url):
            port = int(dict(parse_qsl(urlsplit(url).query))["redirect_uri"].split(":")[2]
                       .split("/")[0])
            self.silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
            super().__call__(url)

    browser = SilentFirst()
    auth = interactive(open_browser=browser, redirect_timeout=3.0)
    started = time.monotonic()
    try:
        assert call(auth, resource.url + "/mcp").status_code == 200
    finally:
        for sock in browser.silent:
            sock.close()
    assert time.monotonic() - started < 3.0


# Failures as connect_http raises them


def service(**options):
    return OAuth(flow="client_credentials", client_id=SERVICE_ID,
                 client_secret=options.pop("client_secret", SERVICE_SECRET), timeout=5.0)


def no_s256(auth_server, resource):
    auth_server.pkce = False
    return interactive(), "S256", 0, ""


def impostor(auth_server, resource):
    auth_server.issuer_override = "https://impostor.example"
    return interactive(), "another issuer", 0, ""


def forged_state(auth_server, resource):
    auth_server.forge_state = True
    return interactive(redirect_timeout=0.5), "wrong state", 0, ""


def wrong_secret(auth_server, resource):
    return service(client_secret="not-the-secret"), "invalid_client", 401, "invalid_client"


def no_metadata(auth_server, resource):
    resource.metadata_redirect = "/nowhere"
    return interactive(), "no protected resource metadata", 0, ""


def no_such_grant(auth_server, resource):
    auth_server.grant_types = ["authorization_code", "refresh_token"]
    return service(), "does not offer the client_credentials grant", 0, "unsupported_grant_type"


@pytest.mark.slow
@pytest.mark.parametrize("failure", [no_s256, impostor, forged_state, wrong_secret, no_metadata,
                                     no_such_grant])
def test_an_oauth_failure_reaches_the_caller_of_connect_http_as_itself(servers, failure):
    auth_server, resource = servers
    auth, message, status, error = failure(auth_server, resource)
    with pytest.raises(MCPAuthError, match=message) as raised:
        connect_http(resource.url + "/mcp", timeout=10.0, auth=auth)
    assert (raised.value.status, raised.value.error) == (status, error)
    # one flow, not a second one started by a handshake that follows a failed probe
    assert [s for s in resource.seen if s[0] == "POST"] == [("POST", "/mcp")]


def test_a_grant_the_authorization_server_does_not_offer_is_refused_before_any_request(servers):
    auth_server, resource = servers
    auth_server.grant_types = ["client_credentials"]
    with pytest.raises(MCPAuthError, match="authorization_code grant"):
        call(interactive(), resource.url + "/mcp")
    assert auth_server.seen == [("GET", "/.well-known/oauth-authorization-server")]
    auth_server.grant_types = ["client_credentials", "authorization_code"]
    assert call(interactive(), resource.url + "/mcp").status_code == 200


# Servers of the 2025-03-26 revision: no protected-resource metadata


class LegacyServer(AuthServer):
    """An MCP server of the 2025-03-26 revision, its endpoint at ``/v1/mcp`` and its
    authorization server on the same origin, as that revision's "Authorization Base
    URL" puts it: no protected-resource metadata, and a challenge naming none. With
    ``oauth_metadata`` off no authorization server metadata is served either, which
    leaves the default endpoints, ``/authorize``, ``/token`` and ``/register`` at the
    root (https://modelcontextprotocol.io/specification/2025-03-26/basic/authorization,
    "Fallbacks for Servers without Metadata Discovery")."""

    def __init__(self) -> None:
        super().__init__()
        self.resource_status = 404  # what the protected-resource metadata URLs answer
        self.metadata_status = 404  # what the metadata URLs answer without metadata

    def get(self, path, query):
        if path.startswith("/.well-known/oauth-protected-resource"):
            return self.resource_status, {}, {"error": "not_found"}
        if path.startswith("/.well-known/") and not self.oauth_metadata:
            return self.metadata_status, {}, {"error": "not_found"}
        return super().get(path, query)

    def post(self, path, form, body, authorization):
        if path != "/v1/mcp":
            return super().post(path, form, body, authorization)
        token = authorization[7:] if authorization.startswith("Bearer ") else ""
        if self.access.get(token) == self.url + "/v1/mcp":
            return 200, {}, {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
        return 401, {"WWW-Authenticate": 'Bearer realm="mcp"'}, {"error": "unauthorized"}


@pytest.fixture
def legacy():
    server = LegacyServer()
    running = serve(server)
    try:
        yield server
    finally:
        running.shutdown()
        running.server_close()


def test_a_server_without_any_metadata_is_authorized_at_the_default_endpoints_of_its_root(
        legacy, caplog):
    caplog.set_level(logging.DEBUG)
    legacy.oauth_metadata = False
    browser = Browser()
    url = legacy.url + "/v1/mcp"
    assert call(interactive(open_browser=browser), url).status_code == 200
    assert legacy.seen == [
        ("POST", "/v1/mcp"),
        ("GET", "/.well-known/oauth-protected-resource/v1/mcp"),
        ("GET", "/.well-known/oauth-protected-resource"),
        ("GET", "/.well-known/oauth-authorization-server"),
        ("GET", "/.well-known/openid-configuration"),
        ("POST", "/register"), ("GET", "/authorize"), ("POST", "/token"), ("POST", "/v1/mcp")]
    assert browser.opened[0].startswith(legacy.url + "/authorize?")
    query = dict(parse_qsl(urlsplit(browser.opened[0]).query))
    assert query["code_challenge_method"] == "S256" and query["resource"] == url
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("nacelle"))
    assert "2025-03-26 default endpoints" in logged
    for secret in legacy.issued:
        assert secret not in logged


def test_a_token_from_the_default_endpoints_is_refreshed_at_the_default_token_endpoint(legacy):
    legacy.oauth_metadata = False
    clock, url = Clock(), legacy.url + "/v1/mcp"
    auth = interactive(clock=clock)
    assert call(auth, url).status_code == 200
    clock.now += 7200
    assert auth.headers(url)["Authorization"] != ""
    assert legacy.seen[-1] == ("POST", "/token") and len(auth.open_browser.opened) == 1


def test_client_credentials_reach_the_default_token_endpoint(legacy):
    legacy.oauth_metadata = False
    assert call(service(), legacy.url + "/v1/mcp").status_code == 200
    assert ("POST", "/token") in legacy.seen and ("POST", "/register") not in legacy.seen


def test_the_authorization_server_metadata_at_the_root_is_used_when_served(legacy):
    legacy.issuer_override = legacy.url + "/tenant"  # a path, on the server's origin
    assert call(interactive(), legacy.url + "/v1/mcp").status_code == 200
    assert legacy.seen[3:6] == [("GET", "/.well-known/oauth-authorization-server"),
                                ("POST", "/register"), ("GET", "/authorize")]


def test_root_metadata_naming_an_issuer_off_the_servers_origin_is_not_used(legacy):
    legacy.issuer_override = "https://impostor.example"
    with pytest.raises(MCPAuthError, match="off the MCP server's origin"):
        call(interactive(), legacy.url + "/v1/mcp")
    assert ("POST", "/register") not in legacy.seen


def test_root_metadata_of_a_public_server_cannot_name_a_loopback_token_endpoint(
        legacy, monkeypatch):
    resolver(monkeypatch, {f"127.0.0.1:{urlsplit(legacy.url).port}": ["93.184.216.34"]})
    original = legacy.metadata
    legacy.metadata = lambda: dict(original(), token_endpoint="http://127.0.0.1:9/token")
    with pytest.raises(MCPAuthError, match="the token endpoint .* loopback"):
        call(interactive(), legacy.url + "/v1/mcp")
    assert ("POST", "/register") not in legacy.seen


@pytest.mark.parametrize("resource_status, metadata_status, message", [
    (500, 404, "no protected resource metadata"),
    (401, 404, "no protected resource metadata"),
    (404, 500, "no authorization server metadata .*HTTP 500"),
])
def test_endpoints_are_guessed_only_when_every_metadata_url_answered_404(
        legacy, resource_status, metadata_status, message):
    legacy.oauth_metadata = False
    legacy.resource_status, legacy.metadata_status = resource_status, metadata_status
    with pytest.raises(MCPAuthError, match=message):
        call(interactive(), legacy.url + "/v1/mcp")
    assert not {("POST", "/register"), ("GET", "/authorize")} & set(legacy.seen)


def test_a_challenge_naming_metadata_that_is_missing_does_not_fall_back(legacy):
    legacy.oauth_metadata = False
    challenge = f'Bearer resource_metadata="{legacy.url}/.well-known/oauth-protected-resource"'
    with pytest.raises(MCPAuthError, match="no protected resource metadata"):
        interactive().unauthorized(legacy.url + "/v1/mcp", challenge)
    assert legacy.seen == [("GET", "/.well-known/oauth-protected-resource")]


# Client ID Metadata Documents

DOCUMENT_URL = "https://app.example/oauth/client-metadata.json"


def with_document(auth_server, supported=True):
    auth_server.cimd = supported
    auth_server.documents[DOCUMENT_URL] = {
        "client_id": DOCUMENT_URL, "redirect_uris": ["http://127.0.0.1/callback"]}


def test_the_client_metadata_url_is_the_client_id_where_the_server_reads_such_documents(
        servers):
    auth_server, resource = servers
    with_document(auth_server)
    browser = Browser()
    auth = interactive(open_browser=browser, client_metadata_url=DOCUMENT_URL)
    assert call(auth, resource.url + "/mcp").status_code == 200
    assert dict(parse_qsl(urlsplit(browser.opened[0]).query))["client_id"] == DOCUMENT_URL
    assert auth_server.token_client_ids == [DOCUMENT_URL]
    assert ("POST", "/register") not in auth_server.seen
    assert "client-metadata.json" in repr(auth)


@pytest.mark.parametrize("supported", [None, False, "true"])
def test_a_server_that_does_not_say_it_reads_client_metadata_documents_gets_a_registration(
        servers, supported):
    auth_server, resource = servers
    with_document(auth_server, supported)
    browser = Browser()
    auth = interactive(open_browser=browser, client_metadata_url=DOCUMENT_URL)
    assert call(auth, resource.url + "/mcp").status_code == 200
    assert dict(parse_qsl(urlsplit(browser.opened[0]).query))["client_id"].startswith("dyn-")
    assert ("POST", "/register") in auth_server.seen


def test_a_pre_registered_client_id_wins_over_the_client_metadata_url(servers):
    auth_server, resource = servers
    with_document(auth_server)
    auth_server.clients["app-1"] = {"secret": None, "redirect_uris": ["http://127.0.0.1/callback"]}
    browser = Browser()
    auth = interactive(open_browser=browser, client_id="app-1",
                       client_metadata_url=DOCUMENT_URL)
    assert call(auth, resource.url + "/mcp").status_code == 200
    assert dict(parse_qsl(urlsplit(browser.opened[0]).query))["client_id"] == "app-1"


def test_without_registration_the_error_names_both_ways_a_server_could_have_offered(servers):
    auth_server, resource = servers
    original = auth_server.metadata
    auth_server.metadata = lambda: {k: v for k, v in original().items()
                                    if k != "registration_endpoint"}
    with pytest.raises(MCPAuthError, match="registration or one that reads client id"):
        call(interactive(client_metadata_url=DOCUMENT_URL), resource.url + "/mcp")


def test_a_client_metadata_url_is_checked_when_oauth_is_made():
    with pytest.raises(ConfigError, match="https"):
        OAuth(client_metadata_url="http://app.example/client.json")
    with pytest.raises(ConfigError, match="path"):
        OAuth(client_metadata_url="https://app.example/")
    with pytest.raises(ConfigError, match="authorization_code"):
        OAuth(flow="client_credentials", client_id=SERVICE_ID, client_secret=SERVICE_SECRET,
              client_metadata_url=DOCUMENT_URL)
