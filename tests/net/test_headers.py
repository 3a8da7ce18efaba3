"""``nacelle._net.headers``: the header checks the model backends and the MCP client
share."""

import pytest

from nacelle import ConfigError
from nacelle._net.headers import checked

SECRET = "sk-shared-secret-0123"


@pytest.mark.parametrize("headers", [
    {"Authorization": f"Bearer {SECRET}\r\nX-Injected: 1"},
    {"Authorization": f"Bearer {SECRET}\u20ac"},
    {"Authorization": f"Bearer {SECRET}\x00"},
    {"Authorization": f" Bearer {SECRET}"},
    {"Authorization": f"Bearer {SECRET}\t"},
    {f"Authorization: Bearer {SECRET}": "x"},
    {f"X-Key\n{SECRET}": "x"},
    {"": SECRET},
])
def test_a_header_http_cannot_carry_is_refused_without_being_repeated(headers):
    with pytest.raises(ConfigError) as caught:
        checked(headers)
    assert SECRET not in str(caught.value) and "header" in str(caught.value)


def test_latin_1_values_and_token_names_pass_as_a_copy():
    headers = {"X-Caf\u00e9-Name".replace("\u00e9", "e"): "caf\u00e9", "x-api-key": SECRET}
    out = checked(headers)
    assert out == headers and out is not headers


def test_the_message_says_whose_header_it_is():
    with pytest.raises(ConfigError, match="the MCP server's X-Key header ends with"):
        checked({"X-Key": "v "}, what="the MCP server's")
