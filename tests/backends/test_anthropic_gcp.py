"""Vertex AI tokens: a given token or callable, the metadata server of a Google Cloud
machine (a loopback fake of
https://cloud.google.com/compute/docs/access/authenticate-workloads, reached through
``GCE_METADATA_HOST`` as google-auth reaches it), google-auth's application-default
credentials when that package is installed (its real code, refreshing against a loopback
OAuth token endpoint), and the ConfigError that says what to set when none applies."""

import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nacelle import ConfigError, Request, RunContext, TransportError, user_text
from nacelle.backends import anthropic
from nacelle.backends.anthropic import gcp
from nacelle.testing.server import FakeServer, Reply
from nacelle.testing.wire import anthropic_stream

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
PROJECT_PATH = "/computeMetadata/v1/project/project-id"
GOOGLE = {"Metadata-Flavor": "Google"}


def has_google_auth() -> bool:
    try:
        import google.auth  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    for name in ("GCE_METADATA_HOST", "K_SERVICE", "GOOGLE_APPLICATION_CREDENTIALS",
                 "ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT", "CLOUD_ML_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(gcp, "_DMI", str(tmp_path / "no-dmi"))


@pytest.fixture
def without_google_auth(monkeypatch):
    """The environment path as it runs where google-auth is not installed."""
    monkeypatch.setitem(sys.modules, "google.auth", None)
    monkeypatch.setitem(sys.modules, "google.auth.transport.requests", None)


@pytest.fixture
def metadata(monkeypatch):
    with FakeServer() as server:
        monkeypatch.setenv("GCE_METADATA_HOST", server.url.split("//", 1)[1])
        yield server


def token_reply(token: str, expires_in: Any = 3599) -> Reply:
    return Reply.json({"access_token": token, "expires_in": expires_in,
                       "token_type": "Bearer"}, headers=GOOGLE)


def test_a_given_token_is_sent_as_it_is_and_travels_in_a_pickle():
    tokens = gcp.Tokens("ya29.given")
    assert tokens() == "ya29.given" and "ya29" not in repr(tokens)
    assert pickle.loads(pickle.dumps(tokens))() == "ya29.given"


@pytest.mark.parametrize("bad", ["", "  ", 42])
def test_a_token_that_is_not_a_string_is_refused_at_once(bad: Any) -> None:
    with pytest.raises(ConfigError, match="token must be"):
        gcp.Tokens(bad)


def test_the_metadata_servers_token_is_kept_until_a_minute_before_it_expires(
        without_google_auth, metadata, monkeypatch):
    metadata.queue(TOKEN_PATH, token_reply("ya29.first"), token_reply("ya29.second"))
    metadata.queue(PROJECT_PATH, Reply(chunks=[b"meta-project"], content_type="text/plain",
                                       headers=GOOGLE))
    tokens = gcp.Tokens()
    assert tokens() == "ya29.first" and tokens() == "ya29.first"
    assert tokens.project == "meta-project"
    sent = metadata.requests[0]
    assert sent.method == "GET" and sent.headers["metadata-flavor"] == "Google"
    later = time.monotonic() + 3599 - 59
    monkeypatch.setattr(gcp.time, "monotonic", lambda: later)
    assert tokens() == "ya29.second"
    assert "ya29" not in repr(tokens) and b"ya29" not in pickle.dumps(tokens)
    metadata.assert_consumed()


def test_vertex_takes_its_token_and_project_from_the_metadata_server(without_google_auth,
                                                                     metadata):
    metadata.queue(TOKEN_PATH, token_reply("ya29.vm"))
    metadata.queue(PROJECT_PATH, Reply(chunks=[b"vm-project"], content_type="text/plain",
                                       headers=GOOGLE))
    with FakeServer() as server:
        server.queue("/v1/projects/vm-project/locations/global/publishers/anthropic/models/"
                     "claude-opus-4-1@20250805:streamRawPredict",
                     Reply(chunks=anthropic_stream()))
        backend = anthropic.vertex(model="claude-opus-4-1@20250805", region="global",
                                   base_url=server.url + "/v1")
        request = Request("Be brief.", messages=(user_text("hi"),))
        list(backend.turn(request, request.messages, RunContext()))
        assert server.requests[0].headers["authorization"] == "Bearer ya29.vm"


def test_a_metadata_answer_without_the_google_flavor_or_a_token_is_refused(
        without_google_auth, metadata):
    metadata.queue(TOKEN_PATH, Reply.json({"access_token": "x"}),  # no Metadata-Flavor
                   Reply.json({"token_type": "Bearer"}, headers=GOOGLE))
    with pytest.raises(ConfigError, match="HTTP 200"):
        gcp.Tokens()()
    with pytest.raises(TransportError, match="no access_token"):
        gcp.Tokens()()


def test_an_unreachable_metadata_server_is_a_transport_error(without_google_auth, monkeypatch):
    with FakeServer() as server:
        gone = server.url.split("//", 1)[1]
    monkeypatch.setenv("GCE_METADATA_HOST", gone)
    with pytest.raises(TransportError, match="did not answer"):
        gcp.Tokens()()


def test_off_google_cloud_without_google_auth_the_error_says_what_to_set(without_google_auth):
    with pytest.raises(ConfigError) as caught:
        gcp.Tokens()()
    said = str(caught.value)
    assert "token=" in said and "google-auth" in said and "GOOGLE_APPLICATION_CREDENTIALS" in said


def test_a_google_vm_is_known_by_its_dmi_product_name(tmp_path, monkeypatch):
    (tmp_path / "dmi").write_text("Google Compute Engine\n")
    monkeypatch.setattr(gcp, "_DMI", str(tmp_path / "dmi"))
    assert gcp._metadata_host() == gcp.METADATA_HOST
    (tmp_path / "dmi").write_text("Standard PC (Q35 + ICH9, 2009)\n")
    assert gcp._metadata_host() is None
    monkeypatch.setenv("K_SERVICE", "my-service")
    assert gcp._metadata_host() == gcp.METADATA_HOST


@pytest.mark.skipif(not has_google_auth(), reason="google-auth is not installed (an optional "
                    "dependency): pip install google-auth to test the application-default path")
def test_google_auths_application_default_credentials_are_refreshed_and_used(
        tmp_path, monkeypatch):
    # A service account key file, the kind GOOGLE_APPLICATION_CREDENTIALS names
    # (https://cloud.google.com/iam/docs/keys-create-delete), whose token_uri google-auth
    # honours: its real code signs a JWT with the key and trades it at the fake endpoint.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    with FakeServer() as oauth:
        oauth.queue("/token", Reply.json({"access_token": "ya29.from-google-auth",
                                          "expires_in": 3600, "token_type": "Bearer"}))
        path = Path(tmp_path / "key.json")
        path.write_text(json.dumps({
            "type": "service_account", "project_id": "sa-project", "private_key_id": "k1",
            "private_key": pem, "client_email": "agent@sa-project.iam.gserviceaccount.com",
            "client_id": "1", "token_uri": oauth.url + "/token"}))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
        tokens = gcp.Tokens()
        assert tokens() == "ya29.from-google-auth" and tokens() == "ya29.from-google-auth"
        assert len(oauth.requests) == 1  # valid until it expires: not refreshed again
        assert b"assertion=" in oauth.requests[0].body
        assert tokens.project == "sa-project"


@pytest.mark.skipif(not has_google_auth(), reason="google-auth is not installed (an optional "
                    "dependency): pip install google-auth to test the application-default path")
def test_google_auth_without_credentials_says_what_to_set(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="gcloud auth application-default login"):
        gcp.Tokens()()
