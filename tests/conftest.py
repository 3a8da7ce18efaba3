"""The suite-wide network fence: no test may connect anywhere but loopback.

Traffic from these machines to private or public addresses is forbidden, so the
fence holds even when the code under test is broken: every ``socket.connect`` (and
``connect_ex``) to an address outside 127.0.0.0/8 and ::1 is refused before a packet
is sent, recorded, and fails the test. A test that runs inside its own network
namespace may allow that namespace's test addresses with ``network_fence.allow(...)``.
Subprocesses are outside the fence; the tests only point them at loopback servers.

Proxy variables are cleared for every test too: a proxy from the environment would
carry requests meant for a loopback server somewhere else (a test that is about
proxies sets its own).
"""

import ipaddress
import os
import socket

import pytest


class Fence:
    def __init__(self):
        self.allowed = set()
        self.attempts = []

    def allow(self, *addresses):
        self.allowed.update(addresses)

    def permits(self, host):
        host = str(host).split("%", 1)[0]
        if host in self.allowed:
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:  # connect() is given addresses; a name here is suspect
            return False


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
                   "http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def private_data_home(monkeypatch, tmp_path_factory):
    """The nacelle command keeps its log of runs, its history and its sessions in the
    data directory: a test's runs go to a directory of their own, never the user's."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))


@pytest.fixture(autouse=True)
def network_fence(monkeypatch):
    fence = Fence()
    real_connect = socket.socket.connect

    def connect(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not fence.permits(address[0]):
            fence.attempts.append(address)
            raise AssertionError(f"test fence: connection to {address[0]} refused")
        return real_connect(sock, address)

    def connect_ex(sock, address):
        return connect(sock, address) or 0

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield fence
    assert fence.attempts == [], f"connections outside loopback were attempted: {fence.attempts}"


def pytest_configure(config):
    # Tests against real servers started as subprocesses (tests/servers/): each can be
    # run alone with -m, and is skipped with a reason where its server cannot run.
    config.addinivalue_line("markers", "fakellm: runs against the fakellm mock server")
    config.addinivalue_line("markers", "llamacpp: runs against a real llama.cpp llama-server")
    config.addinivalue_line("markers", "integration: drives a real outside client or runtime "
                            "(a Node package, a conformance suite, a sandbox); CI runs these "
                            "on one interpreter (NACELLE_INTEGRATION)")


def pytest_collection_modifyitems(config, items):
    # A test against a real server process is slow by nature (llama-server loads a
    # model; fakellm is a process to start), so it is left out of `-m "not slow"`
    # without each one having to say so twice.
    # NACELLE_INTEGRATION=off is how CI runs the heavy integration tests (Node clients,
    # conformance suites, sandboxes, and every test given the headless Chromium
    # ``browser`` fixture) on one interpreter only: elsewhere they skip, and
    # say where they ran. Unset (a developer's run), they run wherever they can.
    elsewhere = os.environ.get("NACELLE_INTEGRATION", "") == "off"
    for item in items:
        if item.get_closest_marker("llamacpp") or item.get_closest_marker("fakellm"):
            item.add_marker(pytest.mark.slow)
        if "browser" in getattr(item, "fixturenames", ()):  # a headless Chromium
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.slow)
            if elsewhere:
                item.add_marker(pytest.mark.skip(reason=(
                    "integration tests run on one interpreter in this CI run "
                    f"({os.environ.get('NACELLE_INTEGRATION_ON', 'another')}); "
                    "NACELLE_INTEGRATION=off here")))
