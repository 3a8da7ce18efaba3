"""JSON-RPC over an MCP transport, with a transport double: progress routed to the
request that asked for it, the 2026-07-28 ``_meta`` and progress token in what is
sent, and the cancellation rules of each generation and transport."""

import threading
import time

import pytest

import nacelle
from nacelle.mcp import MCPError
from nacelle.mcp.client import MCPClient


class Transport:
    """Records what is sent; the test answers by calling ``deliver``."""

    describe = "'fake'"

    def __init__(self, cancels_by_closing=False):
        self.cancels_by_closing = cancels_by_closing
        self.sent, self.abandoned = [], []
        self.deliver = None

    def start(self, deliver, fail):
        self.deliver = deliver

    def opened(self, version):
        pass

    def reset_session(self):
        pass

    def send(self, message):
        self.sent.append(message)

    def abandon(self, request_id):
        self.abandoned.append(request_id)

    def close(self):
        pass


def client(modern=False, **transport_options):
    transport = Transport(**transport_options)
    session = MCPClient(transport, name="fake", timeout=5)
    transport.start(session._deliver, session._fail)
    session.modern = modern
    return session, transport


def answer_when_sent(transport, respond, count=1):
    """Answer the ``count``-th request sent, from another thread, as a server would."""
    def run():
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            requests = [m for m in transport.sent if "id" in m and "method" in m]
            if len(requests) >= count:
                respond(requests[count - 1])
                return
            time.sleep(0.005)
    threading.Thread(target=run, daemon=True).start()


def test_progress_goes_to_the_request_that_asked_for_it_and_its_token_is_sent():
    session, transport = client()
    steps = []

    def respond(request):
        token = request["params"]["_meta"]["progressToken"]
        for done in (1, 2):
            transport.deliver({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": token, "progress": done, "total": 2, "message": f"{done}"}})
        transport.deliver({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": 999, "progress": 1}})  # nobody's: logged, not delivered
        transport.deliver({"jsonrpc": "2.0", "id": request["id"], "result": {"ok": True}})

    answer_when_sent(transport, respond)
    result = session._request("tools/call", {"name": "x"}, None, None, None,
                              lambda *step: steps.append(step))
    assert result == {"ok": True}
    assert steps == [(1.0, 2.0, "1"), (2.0, 2.0, "2")]
    assert session._progress == {}  # forgotten once answered


def test_a_2026_request_carries_the_meta_envelope_and_a_2025_one_does_not():
    for modern in (True, False):
        session, transport = client(modern=modern)
        answer_when_sent(transport, lambda r: transport.deliver(
            {"jsonrpc": "2.0", "id": r["id"], "result": {}}))
        session.request("tools/list", {})
        meta = transport.sent[-1].get("params", {}).get("_meta", {})
        assert ("io.modelcontextprotocol/protocolVersion" in meta) is modern


@pytest.mark.slow
@pytest.mark.parametrize("modern, closing, notified", [
    (False, False, True), (False, True, True),  # 2025, stdio or HTTP: notifications/cancelled
    (True, False, True),                         # 2026 stdio: still notifications/cancelled
    (True, True, False),                         # 2026 HTTP: closing the response is enough
])
def test_a_cancelled_request_is_abandoned_and_the_server_told_as_its_generation_says(
        modern, closing, notified):
    session, transport = client(modern=modern, cancels_by_closing=closing)
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    with pytest.raises(nacelle.Cancelled):
        session.request("tools/call", {"name": "slow"}, cancelled=cancel)
    assert transport.abandoned == [1]
    told = [m for m in transport.sent if m.get("method") == "notifications/cancelled"]
    assert bool(told) is notified
    if told:
        assert told[0]["params"]["requestId"] == 1


def test_the_discovery_probe_is_never_cancelled():
    session, transport = client()
    with pytest.raises(MCPError, match="did not answer server/discover"):
        session.request("server/discover", {}, timeout=0.05)
    assert not [m for m in transport.sent if m.get("method") == "notifications/cancelled"]


def test_an_error_keeps_its_code_and_data():
    session, transport = client()
    answer_when_sent(transport, lambda r: transport.deliver({"jsonrpc": "2.0", "id": r["id"],
        "error": {"code": -32022, "message": "no", "data": {"supported": ["x"]}}}))
    with pytest.raises(MCPError) as raised:
        session.request("tools/list", {})
    assert (raised.value.code, raised.value.data) == (-32022, {"supported": ["x"]})
