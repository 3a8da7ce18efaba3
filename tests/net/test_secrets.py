"""``nacelle._net.secrets``: what an error or a log line may say about secrets and URLs."""

import pytest

from nacelle._net.secrets import hide, safe_url, scrub


def test_a_secret_headers_value_and_its_token_are_hidden_in_an_answer():
    text = 'echo: "Bearer sk-abcdef" and sk-abcdef and sk-abcdef%2F'
    headers = {"Authorization": "Bearer sk-abcdef", "Accept": "application/json"}
    assert scrub(text, headers) == 'echo: "<hidden>" and <hidden> and <hidden>%2F'
    assert scrub("application/json", headers) == "application/json"


def test_a_url_encoded_value_is_hidden_as_the_raw_one_is():
    assert hide("code=a%2Fb%3Dc&x=a/b=c", ["a/b=c"]) == "code=<hidden>&x=<hidden>"
    assert hide("abc", ["ab", None, ""]) == "abc"  # too short to hide usefully


@pytest.mark.parametrize("url, shown", [
    ("https://user:sk-pass@example.com:8443/mcp?token=sk-q#frag",
     "https://example.com/mcp (port 8443)"),
    ("admin:sk-hunter2@127.0.0.1/mcp", "text that is not a URL with a host (30 characters)"),
    (None, "a NoneType, not a URL"),
    ("https://example.com:99999/x", "https://example.com/x"),
])
def test_a_url_is_named_without_what_may_hold_a_secret(url, shown):
    assert safe_url(url) == shown
