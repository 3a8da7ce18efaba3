"""nacelle.mcp.server held to the official MCP Python SDK's client (``mcp`` on PyPI,
Python 3.10+; skipped with a reason elsewhere): ``tests/mcp_servers/nacelle_server.py``
in a process of its own, over Streamable HTTP (the ASGI app under uvicorn and the
WSGI app under the standard library's threaded server) and over stdio, on both
protocol generations — the client's ``mode="auto"`` probes ``server/discover`` and
speaks 2026-07-28, ``mode="legacy"`` the 2025 handshake with a session. nacelle's own
client reads the same servers back at the end."""

import base64
import subprocess
import sys
import time

import pytest

from mcp_servers import HERE, needs_sdk
from servers import free_port, stop, wait_listening

pytestmark = [needs_sdk, pytest.mark.slow]

SERVER = str(HERE / "nacelle_server.py")
MODES = ["auto", "legacy"]


@pytest.fixture(scope="module", params=["asgi", "wsgi", "stdio"])
def target(request):
    """What the SDK's Client connects to: a URL, or stdio parameters."""
    if request.param == "stdio":
        from mcp.client.stdio import StdioServerParameters

        yield StdioServerParameters(command=sys.executable, args=[SERVER, "stdio"],
                                    env={"PYTHONPATH": ":".join(sys.path)})
        return
    if request.param == "asgi":
        pytest.importorskip("uvicorn", reason="the ASGI app is served by uvicorn (test extra)")
    port = free_port()
    process = subprocess.Popen([sys.executable, SERVER, request.param, str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, process, 30)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process, 5.0)


def session(target, mode, body):
    """Run ``body(client)`` in an SDK Client connected to ``target`` in ``mode``."""
    import anyio
    from mcp.client.client import Client

    async def main():
        async with Client(target, mode=mode, read_timeout_seconds=20) as client:
            return await body(client)

    return anyio.run(main)


@pytest.mark.parametrize("mode", MODES)
def test_the_sdk_client_lists_the_tools_with_schemas_and_annotations(target, mode):
    async def body(client):
        return client.protocol_version, {t.name: t for t in (await client.list_tools()).tools}

    version, tools = session(target, mode, body)
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    add = tools["add"]
    assert add.input_schema["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert add.description == "Add two whole numbers."
    hints = add.annotations
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint,
            hints.open_world_hint) == (True, False, True, False)
    removing = tools["remove_file"].annotations
    assert (removing.read_only_hint, removing.destructive_hint) == (False, True)
    assert tools["subagent"].input_schema["required"] == ["task"]


@pytest.mark.parametrize("mode", MODES)
def test_the_sdk_client_calls_a_tool_and_reads_its_text(target, mode):
    async def body(client):
        return await client.call_tool("add", {"a": 2, "b": 40})

    result = session(target, mode, body)
    assert not result.is_error
    assert [c.text for c in result.content] == ["42"]


@pytest.mark.parametrize("mode", MODES)
def test_media_results_arrive_as_image_and_embedded_resource_blocks(target, mode):
    async def body(client):
        return await client.call_tool("pixel", {}), await client.call_tool("report", {})

    pixel, report = session(target, mode, body)
    (image,) = pixel.content
    assert (image.type, image.mime_type) == ("image", "image/png")
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    note, document = report.content
    assert (note.type, note.text) == ("text", "the report:")
    assert document.type == "resource"
    assert str(document.resource.uri) == "nacelle:document/report.pdf"
    assert document.resource.mime_type == "application/pdf"
    assert base64.b64decode(document.resource.blob).startswith(b"%PDF-")


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_tool_and_bad_arguments_are_error_results_a_model_can_read(target, mode):
    async def body(client):
        return (await client.call_tool("fails", {}),
                await client.call_tool("add", {"a": 1, "b": "two"}))

    failed, invalid = session(target, mode, body)
    assert failed.is_error and failed.content[0].text == "the disk is full"
    assert invalid.is_error and "input.b" in invalid.content[0].text


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_tool_is_a_json_rpc_error(target, mode):
    from mcp.shared.exceptions import MCPError

    async def body(client):
        with pytest.raises(MCPError) as caught:
            await client.call_tool("no_such_tool", {})
        return caught.value

    err = session(target, mode, body)
    assert err.error.code == -32602
    assert "no_such_tool" in err.error.message


@pytest.mark.parametrize("mode", MODES)
def test_the_tools_own_timeout_and_result_cap_hold_when_served(target, mode):
    async def body(client):
        started = time.monotonic()
        stuck = await client.call_tool("stuck", {})
        waited = time.monotonic() - started
        return stuck, waited, await client.call_tool("long_text", {})

    stuck, waited, cut = session(target, mode, body)
    assert stuck.is_error and stuck.content[0].text == "timed out after 0.5 s"
    assert waited < 1.9
    assert cut.content[0].text.startswith("x" * 100)
    assert len(cut.content[0].text) < 300 and "cut" in cut.content[0].text


@pytest.mark.parametrize("mode", MODES)
def test_progress_the_tool_reports_reaches_the_clients_callback(target, mode):
    seen = []

    async def progress(done, total, message):
        seen.append((done, total, message))

    async def body(client):
        return await client.call_tool("counts", {}, progress_callback=progress)

    result = session(target, mode, body)
    assert result.content[0].text == "counted"
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_is_served_as_a_subagent_tool(target, mode):
    async def body(client):
        return await client.call_tool("subagent", {"task": "What is the answer?"})

    result = session(target, mode, body)
    assert not result.is_error
    assert result.content[0].text == "The answer is 42."


@pytest.mark.parametrize("mode", MODES)
def test_a_call_the_client_gives_up_on_is_cancelled_on_the_server(target, mode):
    """The SDK client sends ``notifications/cancelled`` (2025) or closes the response
    stream (2026-07-28) when a call times out; either way the tool's ctx is cancelled."""
    import anyio

    async def body(client):
        before = (await client.call_tool("cancelled", {})).content[0].text
        with pytest.raises(Exception):
            await client.call_tool("waits", {}, read_timeout_seconds=0.5)
        for _ in range(50):
            after = (await client.call_tool("cancelled", {})).content[0].text
            if after != before:
                return before, after
            await anyio.sleep(0.1)
        return before, after

    before, after = session(target, mode, body)
    assert int(after) == int(before) + 1


@pytest.mark.parametrize("stdio", [True, False], ids=["stdio", "http"])
def test_nacelle_serve_mcp_serves_a_modules_tools_to_the_sdk_client(stdio):
    """The README's command: ``nacelle serve --mcp MODULE:OBJECT [--stdio]``."""
    command = [sys.executable, "-m", "nacelle", "serve", "--mcp", "nacelle_server:TOOLS"]
    env = {"PYTHONPATH": ":".join(sys.path)}
    if stdio:
        from mcp.client.stdio import StdioServerParameters

        target = StdioServerParameters(command=command[0], args=command[1:] + ["--stdio"],
                                       env=env, cwd=str(HERE))
        process = None
    else:
        import os

        port = free_port()
        process = subprocess.Popen(command + ["--port", str(port)], cwd=str(HERE),
                                   env=dict(os.environ, **env), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        wait_listening(port, process, 30)
        target = f"http://127.0.0.1:{port}/mcp"
    try:
        async def body(client):
            names = {t.name for t in (await client.list_tools()).tools}
            return names, client.server_info.name, await client.call_tool("add", {"a": 1, "b": 2})

        names, server_name, result = session(target, "auto", body)
    finally:
        if process is not None:
            stop(process, 5.0)
    assert {"add", "pixel", "subagent"} <= names
    assert server_name == "nacelle_server"
    assert result.content[0].text == "3"


@pytest.mark.parametrize("pinned", [None, "2025-11-25"], ids=["2026-07-28", "2025-11-25"])
def test_nacelles_own_client_uses_the_served_tools_as_tools(target, pinned):
    """The two directions meet: tools served by nacelle.mcp.server, read back by
    nacelle.mcp's client as ordinary tools, metadata and media included."""
    from nacelle import Image
    from nacelle.mcp import connect_http, connect_stdio

    if isinstance(target, str):
        client = connect_http(target, timeout=20, protocol_version=pinned)
    else:
        client = connect_stdio(target.command, target.args, env=target.env, timeout=20,
                               protocol_version=pinned)
    with client:
        assert client.protocol_version == (pinned or "2026-07-28")
        tools = {tool.name: tool for tool in client.tools()}
        assert (tools["add"].read_only, tools["add"].destructive) == (True, False)
        assert client.call_tool("add", {"a": 20, "b": 22}) == "42"
        (picture,) = client.call_tool_parts("pixel", {})
        assert isinstance(picture, Image) and picture.media_type == "image/png"


def test_under_nacelle_serve_a_2026_client_closing_its_stream_cancels_the_call_at_once():
    """nacelle's own HTTP server hands the app the client's socket, so the call is
    cancelled when the client closes it, well before the next keepalive (15 s)."""
    import os

    import anyio

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nacelle", "serve", "--mcp", "nacelle_server:TOOLS",
         "--port", str(port)], cwd=str(HERE), env=dict(os.environ, PYTHONPATH=":".join(sys.path)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, process, 30)

        async def body(client):
            with pytest.raises(Exception):
                await client.call_tool("waits", {}, read_timeout_seconds=0.5)
            started = time.monotonic()
            while time.monotonic() - started < 10:
                if (await client.call_tool("cancelled", {})).content[0].text == "1":
                    return time.monotonic() - started
                await anyio.sleep(0.1)
            return None

        waited = session(f"http://127.0.0.1:{port}/mcp", "auto", body)
    finally:
        stop(process, 5.0)
    assert waited is not None and waited < 5
