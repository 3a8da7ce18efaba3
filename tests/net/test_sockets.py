"""``nacelle._net.sockets``: the socket under a ``requests`` response, on urllib3 2.x
and 1.26 alike, and closing a response another thread is blocked reading."""

import socket
import threading

import requests

from nacelle._net.sockets import shut, socket_of
from nacelle.testing import FakeServer, Reply


def test_the_socket_is_found_under_a_streamed_response():
    with FakeServer() as server:
        server.queue("/slow", Reply(chunks=[b"data: 1\n\n", (b"data: 2\n\n", 5.0)]))
        with requests.get(server.url + "/slow", stream=True, timeout=10) as response:
            sock = socket_of(response)
            assert isinstance(sock, socket.socket) and sock.fileno() != -1


def test_nothing_is_found_under_what_is_not_a_response():
    assert socket_of(object()) is None
    shut(None)  # nothing to close, no error


def test_shutting_a_response_wakes_the_thread_blocked_reading_it():
    with FakeServer() as server:
        server.queue("/hang", Reply(chunks=[b"data: 1\n\n", (b"data: 2\n\n", 30.0)]))
        response = requests.get(server.url + "/hang", stream=True, timeout=60)
        done = threading.Event()

        def read():
            try:
                for _ in response.iter_content(1):
                    pass
            except Exception:  # noqa: BLE001 - any end will do
                pass
            done.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(0.3)
        shut(response)
        assert done.wait(5)
