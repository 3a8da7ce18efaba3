"""The HTTP transport's side of credentials: the origin rule for redirects, and the
bookkeeping that tells a request waiting on a sign-in from one a server ignored."""

import threading
import time

import pytest

from nacelle.errors import ConfigError
from nacelle.mcp.auth import MCPAuthError
from nacelle.mcp.http_auth import Authorization, same_origin


def test_the_same_origin_is_scheme_host_and_port_or_the_https_upgrade():
    server = "http://mcp.example/mcp"
    assert same_origin(server, "http://MCP.example:80/other?x=1")
    assert same_origin(server, "https://mcp.example/mcp")  # the upgrade requests allows too
    assert not same_origin(server, "http://mcp.example:8080/mcp")
    assert not same_origin(server, "http://evil.example/mcp")
    assert not same_origin("https://mcp.example/mcp", "http://mcp.example/mcp")  # no downgrade
    assert not same_origin(server, "http://mcp.example:notaport/mcp")


class Flow:
    def __init__(self, delay, error=None):
        self.delay, self.error, self.started = delay, error, threading.Event()

    def headers(self, server_url):
        return {}

    def unauthorized(self, server_url, challenge):
        self.started.set()
        time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return True


@pytest.mark.slow
def test_settle_is_false_with_no_flow_running_and_waits_for_one_that_is():
    flow = Flow(0.3)
    auth = Authorization(flow, "https://mcp.example/mcp")
    assert auth.settle() is False
    threading.Thread(target=auth.unauthorized, args=("",), daemon=True).start()
    flow.started.wait(2)
    started = time.monotonic()
    assert auth.settle() is True
    assert time.monotonic() - started >= 0.2
    assert auth.settle() is False  # what ended before is no reason to wait again


@pytest.mark.slow
def test_settle_raises_a_copy_of_the_error_the_running_flow_failed_with():
    failure = MCPAuthError("authorization refused: access_denied", error="access_denied")
    flow = Flow(0.2, failure)
    auth = Authorization(flow, "https://mcp.example/mcp")
    thread = threading.Thread(target=lambda: pytest.raises(MCPAuthError, auth.unauthorized, ""))
    thread.start()
    flow.started.wait(2)
    with pytest.raises(MCPAuthError, match="access_denied") as raised:
        auth.settle()
    thread.join()
    assert raised.value is not failure and raised.value.error == "access_denied"


def test_an_auth_without_the_two_methods_is_a_config_error():
    with pytest.raises(ConfigError, match="auth must have headers"):
        Authorization(object(), "https://mcp.example/mcp")
