"""AWS Signature Version 4 and the AWS credentials it signs with, on the standard
library (``hmac``, ``hashlib``, ``configparser``): what the Bedrock backend needs of
botocore, without botocore.

:func:`sign` returns the headers that sign one request — ``X-Amz-Date``,
``X-Amz-Security-Token`` when the credentials are temporary, and ``Authorization`` —
following https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html:
the canonical request (method, the path's segments URI-encoded as AWS services other
than S3 want them, the query sorted, the signed headers lowercased, trimmed and
sorted, the payload's SHA-256), the string to sign, and the HMAC chain ``AWS4`` +
secret -> date -> region -> service -> ``aws4_request``. It is checked against
vectors of the AWS SigV4 test suite (``tests/data/aws_sigv4``).

:func:`credentials` finds the keys the way the AWS CLI and SDKs do for the common
cases (https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html):

1. ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` (with ``AWS_SESSION_TOKEN`` for
   temporary keys), unless a profile was named explicitly — botocore skips the
   environment's keys then too;
2. the profile (``profile=``, else ``AWS_PROFILE``, else ``default``) in the shared
   credentials file (``~/.aws/credentials`` or ``AWS_SHARED_CREDENTIALS_FILE``), then
   in the config file (``~/.aws/config`` or ``AWS_CONFIG_FILE``, where a profile's
   section is ``[profile NAME]`` but for ``[default]``).

What this does not do, and says so in its ``ConfigError``: single sign-on, role
assumption, ``credential_process``, container and instance-metadata credentials. For
those, ``aws configure export-credentials --format env`` puts the keys they yield in
the environment, or Bedrock's API keys avoid signing altogether.
:func:`region` reads ``AWS_REGION``, ``AWS_DEFAULT_REGION``, then the profile's
``region`` in the config file.

Secrets: :class:`Credentials` never shows its secret key or session token in a repr,
and no error here quotes a value read from a file or the environment.

Outer ring, held to a leaf's rules: imports the standard library and ``nacelle.errors`` only.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from ...errors import ConfigError

if TYPE_CHECKING:
    import datetime

__all__ = ["Credentials", "canonical_request", "credentials", "region", "sign"]

ALGORITHM = "AWS4-HMAC-SHA256"

#: Headers as a mapping, or as (name, value) pairs where a name may come twice.
Headers = Union[Mapping[str, str], Iterable[Tuple[str, str]]]


class Credentials:
    """An access key id, its secret key and, for temporary keys, a session token.

    The repr shows the key id only: the secret and the token are what signs.
    """

    __slots__ = ("access_key", "secret_key", "token")

    def __init__(self, access_key: str, secret_key: str, token: Optional[str] = None) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.token = token or None

    def __repr__(self) -> str:
        temporary = ", temporary" if self.token else ""
        return f"Credentials({self.access_key!r}{temporary})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Credentials) and other.access_key == self.access_key
                and other.secret_key == self.secret_key and other.token == self.token)

    __hash__ = None  # type: ignore[assignment]


def sign(method: str, url: str, headers: Headers, body: bytes, creds: Credentials,
         region_name: str, service: str,
         now: Optional[datetime.datetime] = None) -> Dict[str, str]:
    """The headers that sign this request: ``X-Amz-Date``, ``X-Amz-Security-Token``
    (temporary keys only) and ``Authorization``.

    ``headers`` are the ones that will be sent (``Host`` is taken from ``url`` when
    absent); each is signed. ``now`` defaults to the current UTC time.
    """
    import datetime  # SigV4 only: not loaded with the backends
    import hashlib
    import hmac

    moment = (now or datetime.datetime.now(datetime.timezone.utc)).astimezone(
        datetime.timezone.utc)
    stamp = moment.strftime("%Y%m%dT%H%M%SZ")
    added = {"X-Amz-Date": stamp}
    if creds.token:
        added["X-Amz-Security-Token"] = creds.token
    signed_headers = [(name, value) for name, value in _pairs(headers)
                      if name.lower() not in {"x-amz-date", "x-amz-security-token",
                                              "authorization"}]
    signed_headers.extend(added.items())
    canonical, names = canonical_request(method, url, signed_headers, body)
    scope = f"{stamp[:8]}/{region_name}/{service}/aws4_request"
    to_sign = "\n".join((ALGORITHM, stamp, scope,
                         hashlib.sha256(canonical.encode("utf-8")).hexdigest()))
    key = _hmac(("AWS4" + creds.secret_key).encode("utf-8"), stamp[:8])
    for part in (region_name, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    added["Authorization"] = (f"{ALGORITHM} Credential={creds.access_key}/{scope}, "
                              f"SignedHeaders={names}, Signature={signature}")
    return added


def canonical_request(method: str, url: str, headers: Headers,
                      body: bytes) -> Tuple[str, str]:
    """The canonical request of SigV4 and its signed header names (``a;b;c``).

    The path is encoded as it stands in ``url`` once more (a ``%`` becomes ``%25``), the
    second encoding AWS services other than S3 ask for; the query's pairs, already
    encoded in ``url``, are sorted by name then value. Header values are trimmed and
    their inner runs of spaces made one; a name given twice has its values joined with
    a comma.
    """
    from urllib.parse import quote, urlsplit  # not loaded with the backend

    parts = urlsplit(url)
    path = quote(parts.path or "/", safe="/~")
    pairs = sorted(pair.partition("=")[::2] for pair in parts.query.split("&") if pair)
    query = "&".join(f"{name}={value}" for name, value in pairs)
    found: Dict[str, List[str]] = {}
    for name, value in _pairs(headers):
        found.setdefault(name.strip().lower(), []).append(" ".join(str(value).split()))
    if "host" not in found:
        found["host"] = [parts.netloc.rsplit("@", 1)[-1]]
    names = sorted(found)
    lines = "".join(f"{name}:{','.join(found[name])}\n" for name in names)
    signed = ";".join(names)
    import hashlib

    payload = hashlib.sha256(body).hexdigest()
    return "\n".join((method.upper(), path, query, lines, signed, payload)), signed


def _pairs(headers: Headers) -> Iterable[Tuple[str, str]]:
    return headers.items() if isinstance(headers, Mapping) else headers


def _hmac(key: bytes, text: str) -> bytes:
    import hashlib
    import hmac

    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


# -- where the keys and the region come from ----------------------------------------------

def _files(environ: Mapping[str, str]) -> Tuple[str, str]:
    home = os.path.expanduser("~")
    return (environ.get("AWS_SHARED_CREDENTIALS_FILE")
            or os.path.join(home, ".aws", "credentials"),
            environ.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config"))


def _section(path: str, name: str) -> Optional[Dict[str, str]]:
    """The section ``name`` of the INI file at ``path``, or None (no file or section)."""
    import configparser  # read at the first use of the AWS files, not with the backend

    parser = configparser.RawConfigParser(default_section="\0none")
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            parser.read_file(handle)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise ConfigError(f"cannot read the AWS file {path}: {type(exc).__name__}") from None
    if not parser.has_section(name):
        return None
    return {key.lower(): value.strip() for key, value in parser.items(name)}


def _profile(name: str, environ: Mapping[str, str]) -> Tuple[Optional[Dict[str, str]],
                                                            Optional[Dict[str, str]]]:
    """The profile's section of the credentials file and of the config file."""
    shared, config = _files(environ)
    return (_section(shared, name),
            _section(config, name if name == "default" else f"profile {name}"))


def credentials(profile: Optional[str] = None,
                environ: Optional[Mapping[str, str]] = None) -> Credentials:
    """The credentials to sign with (see the module docstring for the order)."""
    env = os.environ if environ is None else environ
    if profile is None:
        key, secret = env.get("AWS_ACCESS_KEY_ID", ""), env.get("AWS_SECRET_ACCESS_KEY", "")
        if key and secret:
            return Credentials(key, secret, env.get("AWS_SESSION_TOKEN") or None)
    name = profile or env.get("AWS_PROFILE") or "default"
    for section in _profile(name, env):
        if section and section.get("aws_access_key_id") and section.get(
                "aws_secret_access_key"):
            return Credentials(section["aws_access_key_id"], section["aws_secret_access_key"],
                               section.get("aws_session_token") or None)
    shared, config = _files(env)
    found = [section for section in _profile(name, env) if section is not None]
    other = sorted({key for section in found for key in section} & _UNSUPPORTED)
    why = (f"profile {name!r} uses {', '.join(other)}, which this client does not run; "
           if other else f"no keys for profile {name!r} in {shared} or {config}; ")
    raise ConfigError(
        "no AWS credentials for Bedrock: " + why + "set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys; `aws configure "
        "export-credentials --format env` prints them for any profile), give a profile "
        "with aws_access_key_id and aws_secret_access_key, or use a Bedrock API key "
        "(api_key= or AWS_BEARER_TOKEN_BEDROCK)")


#: Profile settings of credential sources this module does not implement.
_UNSUPPORTED = frozenset({"sso_session", "sso_start_url", "role_arn", "credential_process",
                          "credential_source", "web_identity_token_file"})


def region(profile: Optional[str] = None,
           environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The region: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, then the profile's
    ``region`` in the config file; None when none says."""
    env = os.environ if environ is None else environ
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if env.get(variable, "").strip():
            return env[variable].strip()
    name = profile or env.get("AWS_PROFILE") or "default"
    config = _profile(name, env)[1]
    return (config or {}).get("region") or None
