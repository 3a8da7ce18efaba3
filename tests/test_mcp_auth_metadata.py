"""Where the MCP client's authorization finds its endpoints, and the client id URL it
gives: the parts that need no server. Discovery against running servers, the 2025-03-26
fallback and Client ID Metadata Documents included, is in tests/test_mcp_auth.py."""

import pytest

from nacelle.errors import ConfigError
from nacelle.mcp.auth_flows import check_destination
from nacelle.mcp.auth_metadata import check_client_metadata_url, legacy_endpoints


@pytest.mark.parametrize("server_url", [
    "https://api.example.com/v1/mcp?key=secret#frag",
    "https://user:password@API.Example.com/v1/mcp",
    "https://api.example.com",
])
def test_the_default_endpoints_are_at_the_root_of_the_servers_own_origin(server_url):
    meta = legacy_endpoints(server_url)
    assert meta == {"issuer": "https://api.example.com",
                    "authorization_endpoint": "https://api.example.com/authorize",
                    "token_endpoint": "https://api.example.com/token",
                    "registration_endpoint": "https://api.example.com/register",
                    "code_challenge_methods_supported": ["S256"]}


def test_a_default_endpoint_is_never_another_origin_so_every_destination_check_passes():
    # No resolver is consulted: the same origin is allowed before any address check,
    # which is what makes a default endpoint safe wherever the server is.
    for server_url in ("https://mcp.invalid:8443/a/b/mcp", "http://127.0.0.1:9/mcp",
                       "http://[::1]:7/x/mcp"):
        meta = legacy_endpoints(server_url)
        for name in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
            assert check_destination(meta[name], server_url, name) == meta[name]
    assert legacy_endpoints("https://mcp.invalid:8443/a/b/mcp")["token_endpoint"] == \
        "https://mcp.invalid:8443/token"


def test_a_client_metadata_url_is_an_https_url_with_a_path():
    for good in ("https://app.example/client.json", "https://app.example/oauth/client?v=2",
                 "https://app.example:8443/c"):
        assert check_client_metadata_url(good) == good
    bad = {"http://app.example/client.json": "https", "https:///client.json": "https",
           "ftp://app.example/c": "https", "https://app.example": "path",
           "https://app.example/": "path", "https://app.example/a/../c": r"\.\.",
           "https://app.example/./c": r"\.", "https://app.example/c#top": "fragment",
           "https://app.example/c#": "fragment",
           "https://me:pw@app.example/c": "user name or password", 42: "a string"}
    for url, message in bad.items():
        with pytest.raises(ConfigError, match=message):
            check_client_metadata_url(url)


def test_a_refused_client_metadata_url_is_named_without_its_password():
    with pytest.raises(ConfigError) as raised:
        check_client_metadata_url("https://me:hunter2@app.example/c")
    assert "hunter2" not in str(raised.value)
