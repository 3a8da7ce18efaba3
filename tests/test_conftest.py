"""The suite's fences: non-loopback connections are refused before a packet is sent, and
the nacelle command's data stays out of the user's home."""

import os
import socket

import pytest


def test_the_fence_refuses_a_non_loopback_connection_and_records_it(network_fence):
    with socket.socket() as sock:
        with pytest.raises(AssertionError, match="192.0.2.1"):
            sock.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed, and never dialled here
    assert network_fence.attempts == [("192.0.2.1", 9)]
    network_fence.attempts.clear()  # recorded as expected; let teardown pass


def test_the_fence_lets_loopback_through(network_fence):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=2):
            pass
    assert network_fence.attempts == []


def test_an_allowed_address_passes_the_fence(network_fence):
    network_fence.allow("203.0.113.7")
    assert network_fence.permits("203.0.113.7") and not network_fence.permits("203.0.113.8")


def test_each_test_keeps_the_commands_data_in_a_directory_of_its_own():
    data = os.environ["XDG_DATA_HOME"]
    assert os.path.isdir(data) and os.listdir(data) == []
    assert not data.startswith(os.path.join(os.path.expanduser("~"), ".local"))
