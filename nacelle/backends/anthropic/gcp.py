"""Google Cloud access tokens for Claude on Vertex AI: where a request's
``Authorization: Bearer`` comes from.

:class:`Tokens` is asked for a token before every request (the transport's ``sign``
hook), so a token that expires is replaced without the caller doing anything. In order:

1. ``token=`` given as a string: sent as it is (an access token from ``gcloud auth
   print-access-token``, say; it expires within the hour and is not refreshed).
2. ``token=`` given as a callable: called for every request, so it can refresh; what it
   returns must be a non-empty string.
3. Otherwise the environment, the way Google's client libraries find it
   (https://cloud.google.com/docs/authentication/application-default-credentials):

   - when the optional ``google-auth`` package is importable,
     ``google.auth.default()`` with the ``cloud-platform`` scope, refreshed when no
     longer valid. That covers ``GOOGLE_APPLICATION_CREDENTIALS``, the gcloud CLI's
     application-default login, workload identity and the metadata server — whatever
     ``google-auth`` supports. Needs ``pip install google-auth`` (and ``requests``,
     which nacelle has).
   - without it, the metadata server of a Google Cloud VM, Cloud Run or GKE
     (``http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token``
     with ``Metadata-Flavor: Google``,
     https://cloud.google.com/compute/docs/access/authenticate-workloads), asked only
     where the machine says it is on Google Cloud — ``GCE_METADATA_HOST`` set (as
     ``google-auth`` honours it), ``K_SERVICE`` set (Cloud Run,
     https://cloud.google.com/run/docs/container-contract), or
     ``/sys/class/dmi/id/product_name`` naming Google (VMs and GKE nodes) —
     with a two-second connect and five-second read limit. Its token is kept until a
     minute before the ``expires_in`` it came with. Needs nothing but the VM's service
     account, with the Vertex AI User role.
   - else a ``ConfigError`` saying what to set.

The project, when not given, comes from ``ANTHROPIC_VERTEX_PROJECT_ID`` (the official
SDK's variable), ``GOOGLE_CLOUD_PROJECT``, then what ``google.auth.default()`` or the
metadata server (``project/project-id``) says.

Secrets: a token never appears in a repr or an error; a token found in the environment
is not pickled (the copy finds its own), a token or callable given explicitly is, like
any other configuration.

Outer ring: imports the standard library, ``nacelle.errors`` and, at the first request
that needs them, ``google.auth`` (optional) or ``requests``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple, Union

from ...errors import ConfigError, TransportError

__all__ = ["METADATA_HOST", "SCOPE", "TokenSource", "Tokens", "project_from_environment"]

#: A token, or a callable returning a fresh one.
TokenSource = Union[str, Callable[[], str]]

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
METADATA_HOST = "metadata.google.internal"
_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
_PROJECT_PATH = "/computeMetadata/v1/project/project-id"
_DMI = "/sys/class/dmi/id/product_name"
_MARGIN = 60.0  # a metadata token is renewed this many seconds before it expires
_TIMEOUT = (2.0, 5.0)

_HOW = ("pass token= (a string, or a callable returning a fresh one), install google-auth "
        "and run `gcloud auth application-default login` or set "
        "GOOGLE_APPLICATION_CREDENTIALS, or run on Google Cloud with a service account")


def project_from_environment() -> Optional[str]:
    """The project the environment names: ``ANTHROPIC_VERTEX_PROJECT_ID``, then
    ``GOOGLE_CLOUD_PROJECT``; None when neither is set."""
    for variable in ("ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT"):
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return None


class Tokens:
    """Vertex AI bearer tokens from ``token`` or the environment (module docstring)."""

    def __init__(self, token: Optional[TokenSource] = None) -> None:
        if token is not None and not callable(token) and (
                not isinstance(token, str) or not token.strip()):
            raise ConfigError("token must be a non-empty string, a callable returning one, "
                              "or None (then the environment's credentials are used)")
        self._given = token
        self._lock = threading.Lock()
        self._google: Any = None  # google-auth credentials, once found
        self._metadata: Optional[Tuple[str, float]] = None  # token, monotonic expiry
        self.project: Optional[str] = None  # what the credentials' source says

    def __repr__(self) -> str:
        source = ("a token" if isinstance(self._given, str) else
                  "a callable" if self._given is not None else "the environment")
        return f"vertex.Tokens(from {source})"

    def __getstate__(self) -> Dict[str, Any]:
        return {"_given": self._given}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["_given"])  # type: ignore[misc]

    def __call__(self) -> str:
        """A token for the next request."""
        given = self._given
        if isinstance(given, str):
            return given
        if given is not None:
            value = given()
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"the token callable returned {type(value).__name__}, not "
                                  "a non-empty string")
            return value
        with self._lock:
            return self._from_environment()

    def _from_environment(self) -> str:
        try:
            import google.auth  # type: ignore[import-not-found, unused-ignore]
            import google.auth.transport.requests  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            return self._from_metadata()
        if self._google is None:
            try:
                self._google, project = google.auth.default(scopes=[SCOPE])
            except google.auth.exceptions.DefaultCredentialsError:
                raise ConfigError("google-auth found no Google Cloud credentials for "
                                  f"Vertex AI: {_HOW}") from None
            self.project = project if isinstance(project, str) and project else None
        credentials = self._google
        if not credentials.valid:
            try:
                credentials.refresh(google.auth.transport.requests.Request())
            except google.auth.exceptions.GoogleAuthError as exc:
                raise TransportError(f"google-auth could not refresh the Vertex AI token "
                                     f"({type(exc).__name__})") from None
        token = credentials.token
        if not isinstance(token, str) or not token:
            raise ConfigError(f"google-auth gave no access token for Vertex AI: {_HOW}")
        return token

    def _from_metadata(self) -> str:
        cached = self._metadata
        if cached is not None and time.monotonic() < cached[1]:
            return cached[0]
        host = _metadata_host()
        if host is None:
            raise ConfigError("no Google Cloud credentials for Vertex AI (google-auth is not "
                              f"installed and this is not a Google Cloud machine): {_HOW}")
        answer = _metadata_get(host, _TOKEN_PATH, json=True)
        token = answer.get("access_token") if isinstance(answer, dict) else None
        expires = answer.get("expires_in") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise TransportError(f"the metadata server at {host} gave no access_token")
        life = float(expires) if isinstance(expires, (int, float)) and not isinstance(
            expires, bool) and 0 < expires < 86400 else 300.0
        self._metadata = (token, time.monotonic() + max(life - _MARGIN, 0.0))
        if self.project is None:
            try:
                project = _metadata_get(host, _PROJECT_PATH, json=False)
            except (TransportError, ConfigError):
                project = None
            self.project = project.strip() if isinstance(project, str) and project.strip() \
                else None
        return token


def _metadata_host() -> Optional[str]:
    """The metadata server's host when this machine is on Google Cloud, else None."""
    host = os.environ.get("GCE_METADATA_HOST", "").strip()
    if host:
        return host
    if os.environ.get("K_SERVICE"):  # Cloud Run's container contract sets it
        return METADATA_HOST
    try:
        with open(_DMI, encoding="utf-8", errors="replace") as handle:
            product = handle.read(200)
    except OSError:
        return None
    return METADATA_HOST if product.strip().startswith(("Google", "Google Compute Engine")) \
        else None


def _metadata_get(host: str, path: str, *, json: bool) -> Any:
    """GET ``path`` of the metadata server, bounded in time."""
    import requests

    from ...sse import parse_json

    url = f"http://{host}{path}"
    try:
        with requests.Session() as session:
            session.trust_env = False  # the metadata server is never behind a proxy
            response = session.get(url, headers={"Metadata-Flavor": "Google"},
                                   timeout=_TIMEOUT, allow_redirects=False)
            body = response.content[:65536]
    except requests.RequestException as exc:
        raise TransportError(f"the metadata server at {host} did not answer "
                             f"({type(exc).__name__})") from None
    if response.status_code != 200 or response.headers.get("Metadata-Flavor") != "Google":
        raise ConfigError(f"the metadata server at {host} answered HTTP "
                          f"{response.status_code} for {path}: {_HOW}")
    if not json:
        return body.decode("utf-8", "replace")
    try:
        return parse_json(body)
    except ValueError:
        raise TransportError(f"the metadata server at {host} sent a token that is not "
                             "JSON") from None
