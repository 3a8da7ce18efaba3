"""nacelle's MCP client as the official conformance suite drives a client under test.

The suite (``@modelcontextprotocol/conformance``, client mode) starts a test server
per scenario and runs ``python client_driver.py <server-url>`` with the scenario's name
in ``MCP_CONFORMANCE_SCENARIO``, its data (credentials, say) as JSON in
``MCP_CONFORMANCE_CONTEXT`` and the protocol revision it asks for in
``MCP_CONFORMANCE_PROTOCOL_VERSION`` (https://github.com/modelcontextprotocol/conformance,
README "Client Testing"). What each scenario expects the client to do follows the
suite's own reference client, ``examples/clients/typescript/everything-client.ts``:
connect, list the tools, call the one the scenario is about. Everything goes through
the public client API (``connect_http``, ``OAuth``); the driver only plays the user
— it answers elicitations with the schema's defaults and "signs in" by following the
authorization URL to the loopback redirect, as a browser would.

Exits 0 when the flow finished, 1 with the reason on stderr when the client raised.
"""

import json
import os
import sys
from typing import Any, Dict, List, Mapping

import requests

from nacelle.mcp import Elicitation, MCPClient, connect_http
from nacelle.mcp.auth import OAuth


def _context() -> Dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}"
    data = json.loads(raw)
    return data if isinstance(data, dict) else {}


def _browser(url: str) -> None:
    """A user who approves at once: follow the authorization server's redirects
    until they reach the loopback redirect URI, which takes the code."""
    for _ in range(10):
        response = requests.get(url, allow_redirects=False, timeout=10)
        location = response.headers.get("Location")
        if not location or response.status_code not in (301, 302, 303, 307, 308):
            return
        url = requests.compat.urljoin(url, location)
        if url.startswith(("http://127.0.0.1", "http://localhost")) and "code=" in url:
            requests.get(url, timeout=10)
            return


def _defaults(request: Elicitation) -> Dict[str, Any]:
    properties = request.schema.get("properties")
    fields: Mapping[str, Any] = properties if isinstance(properties, dict) else {}
    return {name: spec["default"] for name, spec in fields.items()
            if isinstance(spec, dict) and "default" in spec}


def _connect(url: str, **options: Any) -> MCPClient:
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or None
    return connect_http(url, protocol_version=version, timeout=60.0, **options)


def _call_each(client: MCPClient, names: List[str], arguments: Dict[str, Any]) -> None:
    offered = {tool["name"] for tool in client.list_tools()}
    for name in names:
        if name in offered:
            client.call_tool_result(name, arguments)


def basic(url: str) -> None:
    with _connect(url) as client:
        tools = client.list_tools()
        if tools:
            client.call_tool_result(tools[0]["name"], {"a": 2, "b": 3})


def list_only(url: str) -> None:
    with _connect(url) as client:
        client.list_tools()


def schema_echo(url: str) -> None:
    with _connect(url) as client:
        focal = next(t for t in client.list_tools() if t["name"] == "json_schema_2020_12_tool")
        client.call_tool_result("json_schema_echo", {"schema": focal["inputSchema"]})


def elicitation_defaults(url: str) -> None:
    with _connect(url, on_elicit=_defaults) as client:
        _call_each(client, ["test_client_elicitation_defaults"], {})


def sse_retry(url: str) -> None:
    with _connect(url) as client:
        _call_each(client, ["test_reconnection"], {})


def mrtr(url: str) -> None:
    def confirm(request: Elicitation) -> Dict[str, Any]:
        return {"confirmed": True}

    with _connect(url, on_elicit=confirm) as client:
        names = [t["name"] for t in client.list_tools()]
        for name in names:
            client.call_tool_result(name, {})


def headers(url: str) -> None:
    """Each request that carries a standard or mirrored header: the calls the
    scenario's context names (with its awkward values), else every tool, resource
    and prompt the server offers."""
    calls = _context().get("toolCalls")
    with _connect(url) as client:
        tools = client.list_tools()
        if isinstance(calls, list):
            for call in calls:
                client.call_tool_result(call["name"], call.get("arguments") or {})
            return
        for tool in tools:
            client.call_tool_result(tool["name"], {})
        for resource in client.resources():
            client.read_resource(resource["uri"])
        for prompt in client.prompts():
            client.get_prompt(prompt["name"])


#: The client id metadata document URL the suite's reference client gives (the
#: auth/basic-cimd scenario checks the authorization request carries it); an
#: authorization server that does not say it reads such documents gets a registration.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def auth(url: str) -> None:
    context = _context()
    if context.get("client_id"):
        oauth = OAuth(client_id=context["client_id"], client_secret=context.get("client_secret"),
                      open_browser=_browser, redirect_timeout=15.0)
    else:
        oauth = OAuth(open_browser=_browser, client_name="nacelle-conformance",
                      client_metadata_url=CLIENT_METADATA_URL, redirect_timeout=15.0)
    with _connect(url, auth=oauth) as client:
        client.list_tools()
        if client.offers("test-tool"):
            client.call_tool_result("test-tool", {})


def client_credentials(url: str) -> None:
    context = _context()
    oauth = OAuth(client_id=context.get("client_id"), client_secret=context.get("client_secret"),
                  flow="client_credentials")
    with _connect(url, auth=oauth) as client:
        client.list_tools()


SCENARIOS = {
    "initialize": basic, "tools_call": basic, "request-metadata": list_only,
    "json-schema-ref-no-deref": list_only, "json-schema-2020-12-preservation": schema_echo,
    "elicitation-sep1034-client-defaults": elicitation_defaults, "sse-retry": sse_retry,
    "sep-2322-client-request-state": mrtr, "http-standard-headers": headers,
    "http-custom-headers": headers, "http-invalid-tool-headers": headers,
    "auth/client-credentials-basic": client_credentials,
}


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    run = SCENARIOS.get(scenario) or (auth if scenario.startswith("auth/") else basic)
    try:
        run(url)
    except Exception as exc:  # noqa: BLE001 - the suite reads the exit code, a person stderr
        print(f"{scenario}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
