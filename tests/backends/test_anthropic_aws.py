"""SigV4 and AWS credentials: the signer against vectors of the AWS SigV4 test suite
(``tests/data/aws_sigv4``, as botocore ships them) and against botocore's own signer on
Bedrock requests (``bedrock.json``, written with ``make_bedrock_vectors.py``); the keys
found in the environment and the ``~/.aws`` files as the AWS SDKs find them."""

import datetime
import json
from pathlib import Path
from typing import List, Tuple

import pytest

from nacelle.backends.anthropic import aws
from nacelle.errors import ConfigError

DATA = Path(__file__).parent.parent / "data" / "aws_sigv4"
SUITE = sorted(path.stem for path in DATA.glob("*.req"))
SUITE_CREDS = aws.Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SUITE_TIME = datetime.datetime(2015, 8, 30, 12, 36, tzinfo=datetime.timezone.utc)


def parse(name: str) -> Tuple[str, str, List[Tuple[str, str]], bytes]:
    """A suite ``.req`` file: its method, URL, headers (in order, repeats kept) and body."""
    head, _, body = (DATA / f"{name}.req").read_bytes().partition(b"\n\n")
    first, *lines = head.decode("utf-8").split("\n")
    method, _, rest = first.partition(" ")
    target = rest.rsplit(" ", 1)[0]
    headers = [(line.split(":", 1)[0], line.split(":", 1)[1]) for line in lines]
    host = next(value for name_, value in headers if name_.lower() == "host")
    return method, f"https://{host}{target}", headers, body


def test_the_suite_has_the_vectors_it_claims() -> None:
    assert {"get-vanilla", "post-vanilla", "get-vanilla-query-order-key",
            "post-x-www-form-urlencoded", "get-header-key-duplicate"} <= set(SUITE)


@pytest.mark.parametrize("name", SUITE)
def test_the_canonical_request_matches_the_suite(name: str) -> None:
    method, url, headers, body = parse(name)
    canonical, _ = aws.canonical_request(method, url, headers, body)
    assert canonical == (DATA / f"{name}.creq").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", SUITE)
def test_the_authorization_header_matches_the_suite(name: str) -> None:
    method, url, headers, body = parse(name)
    signed = aws.sign(method, url, headers, body, SUITE_CREDS, "us-east-1", "service",
                      now=SUITE_TIME)
    assert signed["Authorization"] == (DATA / f"{name}.authz").read_text(encoding="utf-8")
    assert signed["X-Amz-Date"] == "20150830T123600Z"
    assert "X-Amz-Security-Token" not in signed


BEDROCK = json.loads((DATA / "bedrock.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", BEDROCK["cases"], ids=lambda case: case["name"])
def test_a_bedrock_request_is_signed_as_botocore_signs_it(case: dict) -> None:
    creds = aws.Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                            case["token"])
    now = datetime.datetime(2026, 12, 2, 1, 2, 3, tzinfo=datetime.timezone.utc)
    signed = aws.sign("POST", case["url"], case["headers"], case["body"].encode(), creds,
                      case["region"], "bedrock", now=now)
    assert signed == case["signed"]


def test_credentials_never_show_the_secret_or_the_token() -> None:
    creds = aws.Credentials("AKID", "s3cr3t-key", "s3ss10n-token")
    assert "s3cr3t" not in repr(creds) and "s3ss10n" not in repr(creds)
    assert repr(creds) == "Credentials('AKID', temporary)"


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_environment_keys_come_first_unless_a_profile_is_named(tmp_path: Path) -> None:
    shared = write(tmp_path / "credentials",
                   "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n"
                   "[work]\naws_access_key_id = WORKKEY\naws_secret_access_key = worksecret\n"
                   "aws_session_token = worktoken\n")
    env = {"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "envsecret",
           "AWS_SESSION_TOKEN": "envtoken", "AWS_SHARED_CREDENTIALS_FILE": shared,
           "AWS_CONFIG_FILE": str(tmp_path / "none")}
    assert aws.credentials(environ=env) == aws.Credentials("ENVKEY", "envsecret", "envtoken")
    assert aws.credentials("work", environ=env) == aws.Credentials(
        "WORKKEY", "worksecret", "worktoken")
    del env["AWS_ACCESS_KEY_ID"]
    assert aws.credentials(environ=env) == aws.Credentials("FILEKEY", "filesecret")
    env["AWS_PROFILE"] = "work"
    assert aws.credentials(environ=env).access_key == "WORKKEY"


def test_a_profile_may_keep_its_keys_and_region_in_the_config_file(tmp_path: Path) -> None:
    config = write(tmp_path / "config",
                   "[default]\nregion = us-west-2\n[profile dev]\nregion = eu-central-1\n"
                   "aws_access_key_id = DEVKEY\naws_secret_access_key = devsecret\n")
    env = {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "missing"), "AWS_CONFIG_FILE": config}
    assert aws.credentials("dev", environ=env) == aws.Credentials("DEVKEY", "devsecret")
    assert aws.region("dev", environ=env) == "eu-central-1"
    assert aws.region(environ=env) == "us-west-2"
    assert aws.region(environ={**env, "AWS_DEFAULT_REGION": "ap-south-1"}) == "ap-south-1"
    assert aws.region(environ={**env, "AWS_REGION": "sa-east-1",
                               "AWS_DEFAULT_REGION": "ap-south-1"}) == "sa-east-1"
    assert aws.region("nobody", environ=env) is None


def test_missing_or_unsupported_credentials_say_what_to_set(tmp_path: Path) -> None:
    config = write(tmp_path / "config",
                   "[profile sso]\nsso_session = corp\nsso_account_id = 1\n")
    env = {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "missing"), "AWS_CONFIG_FILE": config}
    with pytest.raises(ConfigError, match="AWS_ACCESS_KEY_ID.*AWS_BEARER_TOKEN_BEDROCK"):
        aws.credentials(environ=env)
    with pytest.raises(ConfigError, match="sso_session"):
        aws.credentials("sso", environ=env)


def test_an_unreadable_file_is_a_config_error_quoting_nothing_from_it(tmp_path: Path) -> None:
    shared = write(tmp_path / "credentials", "aws_secret_access_key = leaked\n[x\n")
    env = {"AWS_SHARED_CREDENTIALS_FILE": shared, "AWS_CONFIG_FILE": str(tmp_path / "none")}
    with pytest.raises(ConfigError) as caught:
        aws.credentials(environ=env)
    assert "leaked" not in str(caught.value)
