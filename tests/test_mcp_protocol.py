"""What differs between MCP's protocol generations, as pure functions: the 2026-07-28
``_meta`` envelope, the capabilities declared, ``UnsupportedProtocolVersion`` errors,
``x-mcp-header`` rules, and elicitation answers and refusals."""

import pickle
import subprocess
import sys

import pytest

from nacelle.mcp import Elicitation, MCPError
from nacelle.mcp.protocol import (
    LEGACY_VERSIONS, MODERN_VERSION, answer_elicitation, capabilities, elicitation, modern_meta,
    offers_modern, param_headers, param_values, refusal, unsupported_versions)

FORM = {"mode": "form", "message": "Name?", "requestedSchema": {
    "type": "object", "properties": {"name": {"type": "string"}}}}


def test_the_versions_are_2026_07_28_and_the_four_handshake_revisions_newest_first():
    assert MODERN_VERSION == "2026-07-28"
    assert LEGACY_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


def test_every_2026_request_carries_version_capabilities_and_client_info():
    meta = modern_meta(elicit=True)
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {"form": {}}}
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "nacelle"
    assert modern_meta(elicit=False)["io.modelcontextprotocol/clientCapabilities"] == {}


@pytest.mark.slow
def test_the_client_info_carries_the_package_version_not_a_copy_of_it():
    # A fresh interpreter, so the version can be changed before the module reads it:
    # a literal in the module would still say what it said.
    script = ("import nacelle; nacelle.__version__ = '9.8.7'\n"
              "from nacelle.mcp import protocol\n"
              "print(protocol.CLIENT_INFO['version'], "
              "protocol.modern_meta(False)['io.modelcontextprotocol/clientInfo']['version'])")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["9.8.7", "9.8.7"]


@pytest.mark.parametrize("result, expected", [
    ({"supportedVersions": ["2026-07-28"]}, True), ({"supportedVersions": ["2025-11-25"]}, False),
    ({"supportedVersions": "2026-07-28"}, False), ({}, False),
])
def test_only_a_discover_result_listing_2026_is_evidence_of_it(result, expected):
    assert offers_modern(result) is expected


def test_elicitation_is_declared_only_with_a_callback():
    assert capabilities(True) == {"elicitation": {"form": {}}} and capabilities(False) == {}


@pytest.mark.parametrize("data, expected", [
    ({"supported": ["2026-07-28", "2025-11-25"], "requested": "1900-01-01"},
     ["2026-07-28", "2025-11-25"]),
    ({"requested": "x"}, None), ("not an object", None),
])
def test_unsupported_version_errors_give_the_versions_they_name(data, expected):
    assert unsupported_versions(MCPError("no", code=-32022, data=data)) == expected
    assert unsupported_versions(MCPError("no", code=-32601, data=data)) is None


def test_the_draft_code_for_an_unsupported_version_is_understood_too():
    assert unsupported_versions(MCPError("no", code=-32004, data={"supported": ["a"]})) == ["a"]


def test_an_mcp_error_keeps_its_data_through_pickling():
    err = pickle.loads(pickle.dumps(MCPError("no", code=-32022, data={"supported": ["a"]})))
    assert (err.code, err.data) == (-32022, {"supported": ["a"]})


def test_an_elicitation_request_becomes_an_elicitation_value():
    request = elicitation("srv", FORM)
    assert request == Elicitation("srv", "Name?", FORM["requestedSchema"], "form", "")
    assert elicitation("srv", None) == Elicitation("srv", "")


@pytest.mark.parametrize("answer, result", [
    ({"name": "Ada"}, {"action": "accept", "content": {"name": "Ada"}}),
    ("accept", {"action": "accept"}), ("decline", {"action": "decline"}),
    (None, {"action": "decline"}), ("cancel", {"action": "cancel"}),
])
def test_what_on_elicit_returns_becomes_the_elicit_result(answer, result):
    assert answer_elicitation(lambda request: answer, "srv", FORM) == result


def test_an_answer_of_another_kind_is_an_error_naming_the_accepted_forms():
    with pytest.raises(MCPError, match="must return a dict, 'accept', 'decline', 'cancel'"):
        answer_elicitation(lambda request: 42, "srv", FORM)


class SDKResult:
    """Shaped as the MCP SDK's ``ElicitResult``: ``action``, ``content``, ``meta``."""

    def __init__(self, action, content=None):
        self.action, self.content, self.meta = action, content, None


@pytest.mark.parametrize("answer, result", [
    ({"action": "decline"}, {"action": "decline"}),
    ({"action": "cancel"}, {"action": "cancel"}),
    ({"action": "cancel", "content": None}, {"action": "cancel"}),
    ({"action": "accept"}, {"action": "accept"}),
    ({"action": "accept", "content": {"name": "Ada"}, "_meta": {}},
     {"action": "accept", "content": {"name": "Ada"}}),
    (SDKResult("decline"), {"action": "decline"}),
    (SDKResult("accept", {"name": "Ada"}), {"action": "accept", "content": {"name": "Ada"}}),
])
def test_an_elicit_result_written_the_mcp_sdks_way_is_sent_with_its_own_action(answer, result):
    assert answer_elicitation(lambda request: answer, "srv", FORM) == result


@pytest.mark.parametrize("answer, reason", [
    ({"action": "maybe"}, "action 'maybe'"),
    ({"action": "Decline"}, "action 'Decline'"),
    ({"action": "decline", "content": {"name": "Ada"}}, "content only with 'accept'"),
    ({"action": "cancel", "content": {}}, "content only with 'accept'"),
    ({"action": "accept", "content": "Ada"}, "content must be a dict"),
    (SDKResult("nope"), "action 'nope'"),
    (SDKResult("decline", {"name": "Ada"}), "content only with 'accept'"),
])
def test_an_elicit_result_that_is_not_one_the_spec_allows_is_refused_not_accepted(answer, reason):
    with pytest.raises(MCPError, match=reason) as raised:
        answer_elicitation(lambda request: answer, "srv", FORM)
    assert "{'action': 'decline'}" in str(raised.value)  # the error names the forms
    assert raised.value.code == -32603


def test_without_on_elicit_the_server_is_refused_with_the_question_it_asked():
    with pytest.raises(MCPError, match=r"asked for the user's input \('Name\?'\), but this "
                                       r"client was connected without on_elicit") as raised:
        answer_elicitation(None, "srv", FORM)
    assert raised.value.code == -32601


def test_sampling_and_roots_are_refused_by_name():
    err = refusal("srv", "sampling/createMessage")
    assert err.code == -32601 and "sampling/createMessage" in str(err)


def test_x_mcp_header_names_are_found_with_the_path_to_their_value():
    schema = {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "nested": {"type": "object", "properties": {"id": {"type": "integer",
                                                          "x-mcp-header": "Id"}}}}}
    params = param_headers(schema)
    assert params == {"Region": ("region",), "Id": ("nested", "id")}
    assert param_values(params, {"region": "eu", "nested": {"id": 7}}) == {
        "Mcp-Param-Region": "eu", "Mcp-Param-Id": "7"}
    assert param_values(params, {"region": None}) == {}  # absent or null: no header


@pytest.mark.parametrize("schema, why", [
    ({"properties": {"n": {"type": "number", "x-mcp-header": "N"}}}, "only string"),
    ({"properties": {"a": {"type": "string", "x-mcp-header": "A"},
                     "b": {"type": "string", "x-mcp-header": "a"}}}, "given twice"),
    ({"properties": {"a": {"type": "string", "x-mcp-header": "Not A Token"}}}, "token"),
    ({"properties": {"a": {"type": "array", "items": {"type": "string",
                                                     "x-mcp-header": "A"}}}}, "properties alone"),
    ({"oneOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]},
     "properties alone"),
])
def test_x_mcp_header_annotations_that_break_the_rules_are_refused(schema, why):
    with pytest.raises(ValueError, match=why):
        param_headers(schema)
