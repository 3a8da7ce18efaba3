"""The address guard: which addresses are refused, that the host is resolved once,
and that the connection goes to the checked address.

Nothing here may reach a non-loopback address, even with a broken guard: the
resolver is replaced by one that answers numeric hosts locally and a fixed table of
names (no DNS query leaves the machine), and every socket ``connect`` outside
loopback is refused and recorded by the suite's fence (tests/conftest.py) before a
packet is sent.
"""

import ipaddress
import socket
import threading

import pytest

from nacelle.errors import TransportError
from nacelle.toolsets import ssrf
from nacelle.toolsets.ssrf import FetchError, FetchRefused, blocked_reason, open_url, resolve_checked

LOOPBACK = {"127.0.0.1", "::1"}


@pytest.fixture
def fence(network_fence):
    """The suite's fence (tests/conftest.py): what it refused is in this list."""
    return network_fence.attempts


class Resolver:
    """Numeric hosts as the C library reads them (127.1, 0x7f000001, ...), names from a
    table; a list of answers per name is played one per lookup (for rebinding)."""

    def __init__(self, names=None):
        self.names = dict(names or {})
        self.calls = []

    def __call__(self, host, port):
        self.calls.append(host)
        if host in self.names:
            answers = self.names[host]
            answer = answers.pop(0) if isinstance(answers, list) and len(answers) > 1 else (
                answers[0] if isinstance(answers, list) else answers)
            return [(socket.AF_INET6 if ":" in ip else socket.AF_INET,
                     (ip, port, 0, 0) if ":" in ip else (ip, port)) for ip in answer.split(",")]
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
        return [(family, sockaddr) for family, _, _, _, sockaddr in infos]


@pytest.fixture
def resolver(monkeypatch):
    r = Resolver()
    monkeypatch.setattr(ssrf, "_lookup", r)
    return r


@pytest.fixture
def dials(monkeypatch):
    """Record every dial; loopback dials go through (so a broken guard shows up as a
    connection the server counts), anything else fails like an unreachable host."""
    record = []
    real = ssrf._dial

    def dial(family, sockaddr, timeout):
        record.append(sockaddr[0])
        if sockaddr[0] in LOOPBACK:
            return real(family, sockaddr, timeout)
        raise OSError(f"unreachable in tests: {sockaddr[0]}")

    monkeypatch.setattr(ssrf, "_dial", dial)
    return record


@pytest.fixture
def counting_server():
    """A loopback listener (127.0.0.1 and ::1 when available, same port) that counts
    connections and answers each with a small 200 page."""
    server = _CountingServer()
    yield server
    server.close()


class _CountingServer:
    def __init__(self):
        self.connections = 0
        self.sockets = [socket.create_server(("127.0.0.1", 0))]
        self.port = self.sockets[0].getsockname()[1]
        try:
            self.sockets.append(socket.create_server(("::1", self.port), family=socket.AF_INET6))
        except OSError:
            pass
        self.threads = [threading.Thread(target=self._serve, args=(s,), daemon=True) for s in self.sockets]
        for t in self.threads:
            t.start()

    def _serve(self, listener):
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                except OSError:
                    pass

    def close(self):
        for s in self.sockets:
            s.close()


FORBIDDEN = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "0.0.0.0/8"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("169.254.169.254", "link-local"),
    ("192.0.0.8", "protocol-assignment"),
    ("198.18.0.1", "benchmarking"),
    ("224.0.0.1", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("fe80::1", "link-local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("100::1", "discard"),
    ("::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1, a loopback"),
    ("::ffff:169.254.169.254", "IPv4-mapped form of 169.254.169.254"),
    ("::127.0.0.1", "IPv4-compatible form of 127.0.0.1"),
    ("::8.8.8.8", "deprecated IPv4-compatible"),
    ("64:ff9b::7f00:1", "NAT64 form of 127.0.0.1"),
    ("64:ff9b::a00:1", "NAT64 form of 10.0.0.1"),
    ("64:ff9b:1::1", "local-use NAT64"),
    ("2002:7f00:1::1", "6to4 form of 127.0.0.1"),
    ("2002:a9fe:a9fe::1", "6to4 form of 169.254.169.254"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo client form of 127.0.0.1"),
    ("::ffff:0:7f00:1", "reserved IPv6"),
    ("4000::1", "reserved IPv6"),
]

ALLOWED = [
    "8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.32.0.1",
    "169.253.255.255", "203.0.113.7", "2606:4700:4700::1111", "2001:4860:4860::8888",
    "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
]


@pytest.mark.parametrize("address, phrase", FORBIDDEN)
def test_forbidden_addresses_are_refused_with_a_reason(address, phrase):
    reason = blocked_reason(ipaddress.ip_address(address))
    assert reason is not None and phrase in reason


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_are_allowed(address):
    assert blocked_reason(ipaddress.ip_address(address)) is None


def test_a_scoped_link_local_address_is_refused():
    assert "link-local" in blocked_reason(ipaddress.ip_address("fe80::1%2"))


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "::ffff:7f00:1"])
def test_odd_spellings_of_loopback_are_refused_after_resolution(resolver, host):
    with pytest.raises(FetchRefused, match="loopback"):
        resolve_checked(host, 80)


def test_a_name_answering_any_private_address_is_refused(resolver):
    resolver.names["mixed.test"] = "203.0.113.7,10.1.2.3"
    with pytest.raises(FetchRefused, match=r"mixed\.test resolves to 10\.1\.2\.3, a private address"):
        resolve_checked("mixed.test", 443)


def test_resolution_returns_the_checked_addresses_and_looks_up_once(resolver):
    resolver.names["public.test"] = "203.0.113.7,2001:db8::7"
    addresses = resolve_checked("public.test", 8080)
    assert [a[1][0] for a in addresses] == ["203.0.113.7", "2001:db8::7"]
    assert resolver.calls == ["public.test"]


def test_an_ipv4_mapped_public_address_is_dialled_as_ipv4(resolver):
    assert resolve_checked("::ffff:8.8.8.8", 80) == [(socket.AF_INET, ("8.8.8.8", 80))]


def test_allow_private_lets_private_addresses_through(resolver):
    assert resolve_checked("127.0.0.1", 80, allow_private=True) == [(socket.AF_INET, ("127.0.0.1", 80))]


def test_an_unresolvable_name_is_a_transport_error(resolver):
    with pytest.raises(TransportError, match="cannot resolve host 'nowhere.test'"):
        resolve_checked("nowhere.test", 80)


@pytest.mark.parametrize("url, message", [
    ("file:///etc/passwd", "only http and https URLs can be fetched, not file:"),
    ("gopher://127.0.0.1:70/_x", "not gopher:"),
    ("ftp://example.test/", "not ftp:"),
    ("//example.test/", "not a URL without a scheme"),
    ("http://user:secret@example.test/", "credentials"),
    ("http://@example.test/", "credentials"),
    ("http:///path", "names no host"),
    ("http://example.test:99999/", "not a valid URL"),
])
def test_bad_urls_are_refused_before_any_lookup(resolver, dials, url, message):
    with pytest.raises(FetchRefused) as info:
        open_url(url, headers={})
    assert message in str(info.value)
    assert "secret" not in str(info.value)
    assert resolver.calls == [] and dials == []


def test_open_url_never_dials_a_refused_address(resolver, dials, counting_server):
    with pytest.raises(FetchRefused):
        open_url(f"http://127.0.0.1:{counting_server.port}/", headers={})
    assert dials == [] and counting_server.connections == 0


def test_a_rebinding_resolver_is_asked_once_and_its_second_answer_never_used(resolver, dials, counting_server):
    resolver.names["rebind.test"] = ["203.0.113.7", "127.0.0.1"]
    with pytest.raises(TransportError, match="cannot connect to rebind.test"):
        open_url(f"http://rebind.test:{counting_server.port}/", headers={})
    assert resolver.calls == ["rebind.test"]
    assert dials == ["203.0.113.7"]
    assert counting_server.connections == 0


def test_allow_private_connects_to_the_loopback_server(resolver, dials, counting_server):
    opened = open_url(f"http://127.0.0.1:{counting_server.port}/", headers={}, allow_private=True)
    try:
        assert opened.response.status == 200 and opened.response.read() == b"ok"
    finally:
        opened.close()
    assert dials == ["127.0.0.1"] and counting_server.connections == 1


def test_the_host_header_keeps_the_name_while_the_socket_goes_to_the_checked_address(resolver, dials):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    seen = []

    def serve():
        conn, _ = listener.accept()
        with conn:
            seen.append(conn.recv(65536))
            conn.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    resolver.names["intranet.test"] = "127.0.0.1"
    opened = open_url(f"http://intranet.test:{port}/a b?q=é", headers={}, allow_private=True)
    opened.close()
    thread.join(5)
    listener.close()
    assert seen[0].startswith(b"GET /a%20b?q=%C3%A9 HTTP/1.1\r\n")
    assert f"Host: intranet.test:{port}\r\n".encode() in seen[0]


def test_redirects_stop_after_the_limit(resolver, dials):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    try:
        with pytest.raises(FetchError, match="stopped after 5 redirects"):
            open_url(f"http://127.0.0.1:{port}/", headers={}, allow_private=True)
    finally:
        listener.close()
    assert len(dials) == 6
