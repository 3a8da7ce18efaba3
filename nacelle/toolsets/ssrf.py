"""The address guard behind ``web_fetch``: which addresses a fetch may reach, and an
HTTP connection that reaches only the address it checked.

``web_fetch`` is the one tool whose destination the model chooses, and the model reads
text written by strangers, so a URL it asks for may point back inside the host's
network (a cloud metadata endpoint, an admin port on localhost, a router). Checking
the URL's spelling cannot stop that: ``127.1``, ``0x7f000001``, ``[::ffff:7f00:1]`` and
a public name whose DNS answer is ``10.0.0.1`` all look harmless. So the guard works at
connect time, on addresses:

1. the host is resolved **once** (:func:`_lookup`);
2. every address in the answer is classified (:func:`blocked_reason`); if *any* is
   forbidden the fetch is refused — a record set mixing public and private addresses
   is a steering attempt, not a reason to pick the good one;
3. the connection is made to the checked address itself (:func:`_dial`), never by
   name, so a second lookup cannot answer differently (DNS rebinding); the hostname is
   kept for the ``Host`` header and for TLS (SNI and certificate checks).

:func:`open_url` applies this to every redirect hop (at most five), accepts only http
and https, refuses credentials in the URL, and never uses a proxy from the environment
(a proxy would make the checked address irrelevant). Each hop must have its whole
response head within its time limit, not merely each read of it: a server sending
its status line and headers a byte at a time would otherwise outlast any socket
timeout. A :class:`~nacelle.read_limits.Cutoff` shuts the hop's socket down when the
limit passes, or at once when ``cancelled`` (a ``CancelEvent``) is set, and the
returned :class:`Opened` keeps it, so the body's reads stay bounded too.

Forbidden: IPv4 0.0.0.0/8, 10/8, 100.64/10 (CGNAT), 127/8, 169.254/16 (link-local,
cloud metadata), 172.16/12, 192.0.0/24, 192.168/16, 198.18/15 (benchmarking),
224/4 (multicast), 240/4 (reserved) and the broadcast address; IPv6 ``::``, ``::1``,
everything outside global unicast 2000::/3 (which covers ULA fc00::/7, link-local
fe80::/10, site-local fec0::/10, multicast ff00::/8, discard 100::/64), the local-use
NAT64 prefix 64:ff9b:1::/48, and IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96),
6to4 (2002::/16) and Teredo forms whose embedded IPv4 address is forbidden. The table
is written out here rather than taken from ``ipaddress.is_private`` / ``is_global``,
whose answers changed between Python releases. Documentation ranges (192.0.2/24,
198.51.100/24, 203.0.113/24, 2001:db8::/32) are not refused: they route nowhere on
the internet, and no rule in the guard's list names them.

Limits, stated where they are decided: the guard knows addresses, not intent — a
public server can still serve anything, and a service the host exposes on a public
address is reachable. ``allow_private=True`` switches the refusal off for trusted,
internal use (the host's own documentation server, say); nothing else changes.

Outer ring: imports the standard library, ``nacelle.errors`` and ``nacelle.read_limits``.
"""

from __future__ import annotations

import functools
import http.client
import ipaddress
import socket
import ssl
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import quote, urljoin, urlsplit

from .._loggers import get_logger
from ..errors import Cancelled, NacelleError, TransportError
from ..read_limits import Cutoff

__all__ = [
    "FetchError",
    "FetchRefused",
    "Opened",
    "blocked_reason",
    "open_url",
    "resolve_checked",
]

logger = get_logger(__name__)

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

Address = Tuple[int, Tuple[Any, ...]]  # (socket family, sockaddr) as getaddrinfo gives them
IP = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


class FetchError(NacelleError):
    """A fetch failed: an HTTP error status, too many redirects, a response that
    cannot be read."""


class FetchRefused(FetchError, ValueError):
    """The guard refused a URL: a forbidden address, scheme or credentials."""


def _v4(text: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(text)


# Order matters only for the wording: the first match names the reason.
_IPV4_BLOCKED = (
    (_v4("0.0.0.0/32"), "the unspecified address"),
    (_v4("0.0.0.0/8"), "in 0.0.0.0/8 ('this network')"),
    (_v4("10.0.0.0/8"), "a private address (RFC 1918)"),
    (_v4("100.64.0.0/10"), "a shared carrier-grade NAT address (100.64.0.0/10)"),
    (_v4("127.0.0.0/8"), "a loopback address"),
    (_v4("169.254.0.0/16"), "a link-local address (where cloud metadata services live)"),
    (_v4("172.16.0.0/12"), "a private address (RFC 1918)"),
    (_v4("192.0.0.0/24"), "a reserved protocol-assignment address (192.0.0.0/24)"),
    (_v4("192.168.0.0/16"), "a private address (RFC 1918)"),
    (_v4("198.18.0.0/15"), "a benchmarking address (198.18.0.0/15)"),
    (_v4("224.0.0.0/4"), "a multicast address"),
    (_v4("255.255.255.255/32"), "the broadcast address"),
    (_v4("240.0.0.0/4"), "a reserved address (240.0.0.0/4)"),
)

_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_SIXTOFOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")

_IPV6_NAMED = (
    (ipaddress.IPv6Network("::/128"), "the unspecified address"),
    (ipaddress.IPv6Network("::1/128"), "a loopback address"),
    (ipaddress.IPv6Network("fc00::/7"), "a unique local address (fc00::/7)"),
    (ipaddress.IPv6Network("fe80::/10"), "a link-local address"),
    (ipaddress.IPv6Network("fec0::/10"), "a site-local address"),
    (ipaddress.IPv6Network("ff00::/8"), "a multicast address"),
    (ipaddress.IPv6Network("100::/64"), "a discard-only address"),
    (_NAT64_LOCAL, "a local-use NAT64 address (64:ff9b:1::/48)"),
)


def _v4_reason(ip: ipaddress.IPv4Address) -> Optional[str]:
    for network, reason in _IPV4_BLOCKED:
        if ip in network:
            return reason
    return None


def _embedded(ip: ipaddress.IPv6Address, form: str, v4: ipaddress.IPv4Address) -> Optional[str]:
    reason = _v4_reason(v4)
    return f"the {form} form of {v4}, {reason}" if reason else None


def blocked_reason(ip: IP) -> Optional[str]:
    """Why ``ip`` may not be fetched (a phrase: "a loopback address"), or None."""
    if isinstance(ip, ipaddress.IPv4Address):
        return _v4_reason(ip)
    ip = ipaddress.IPv6Address(int(ip))  # drop any scope id: it changes nothing here
    for network, reason in _IPV6_NAMED:
        if ip in network:
            return reason
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _MAPPED:
        return _embedded(ip, "IPv4-mapped", low32)
    if ip in _COMPATIBLE:
        return _embedded(ip, "IPv4-compatible", low32) or "a deprecated IPv4-compatible address"
    if ip in _NAT64:
        return _embedded(ip, "NAT64", low32)
    if ip in _SIXTOFOUR:
        return _embedded(ip, "6to4", ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF))
    if ip in _TEREDO:
        server, client = ip.teredo  # type: ignore[misc]
        return _embedded(ip, "Teredo server", server) or _embedded(ip, "Teredo client", client)
    if ip not in _GLOBAL_UNICAST:
        return "a reserved IPv6 address (outside global unicast 2000::/3)"
    return None


def _parse_ip(sockaddr: Tuple[Any, ...]) -> IP:
    return ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])


def _lookup(host: str, port: int) -> List[Address]:
    """Resolve ``host`` once; the seam tests replace to play a resolver."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [(family, sockaddr) for family, _, _, _, sockaddr in infos]


def _dial(family: int, sockaddr: Tuple[Any, ...], timeout: Optional[float]) -> socket.socket:
    """Open a TCP connection to one checked address; the seam tests replace to
    record destinations without dialling them."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


def resolve_checked(host: str, port: int, *, allow_private: bool = False) -> List[Address]:
    """Resolve ``host`` once and return the addresses to connect to, or raise
    :class:`FetchRefused` if any of them is forbidden (unless ``allow_private``)."""
    try:
        answers = _lookup(host, port)
    except (socket.gaierror, UnicodeError) as err:
        raise TransportError(f"cannot resolve host {host!r}: {err}") from None
    if not answers:
        raise TransportError(f"cannot resolve host {host!r}: no addresses")
    addresses: List[Address] = []
    for family, sockaddr in answers:
        ip = _parse_ip(sockaddr)
        reason = None if allow_private else blocked_reason(ip)
        if reason:
            shown = f"{host} is {reason}" if str(ip) == host else f"{host} resolves to {ip}, {reason}"
            raise FetchRefused(
                f"refused: {shown}. web_fetch only reaches addresses on the public internet."
            )
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            # Dial the IPv4 address itself: an IPv6-only socket cannot reach a mapped one.
            family, sockaddr = socket.AF_INET, (str(ip.ipv4_mapped), sockaddr[1])
        if (family, sockaddr) not in addresses:
            addresses.append((family, sockaddr))
    return addresses


def _connect_first(addresses: List[Address], timeout: Optional[float], host: str) -> socket.socket:
    errors = []
    for family, sockaddr in addresses:
        try:
            return _dial(family, sockaddr, timeout)
        except OSError as err:
            errors.append(f"{sockaddr[0]}: {err}")
    raise TransportError(f"cannot connect to {host}: " + "; ".join(errors))


class _GuardedHTTP(http.client.HTTPConnection):
    """An HTTP connection whose socket goes to a pre-checked address; the hostname
    given to the constructor still names the ``Host`` header."""

    def __init__(self, host: str, port: int, addresses: List[Address], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._addresses = addresses

    def connect(self) -> None:
        self.sock = _connect_first(self._addresses, self.timeout, self.host)


class _GuardedHTTPS(http.client.HTTPSConnection):
    """The TLS twin of :class:`_GuardedHTTP`: the socket goes to the checked address,
    and the hostname drives SNI and certificate verification."""

    def __init__(self, host: str, port: int, addresses: List[Address], timeout: float,
                 context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._addresses = addresses
        self._tls = context

    def connect(self) -> None:
        sock = self.raw_sock = _connect_first(self._addresses, self.timeout, self.host)
        try:  # the handshake reads from raw_sock, where a cutoff can reach it
            self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise


class Opened:
    """A response whose headers have arrived: ``response`` (``http.client``),
    ``url`` (after redirects), ``redirects`` (the URLs left behind). Close it.

    Its socket is still under the hop's time limit and cancellation; ``cause`` says
    whether either has cut it ("timeout", "cancelled") — a read that returned
    nothing, or failed, after a cut is no end of the page.
    """

    def __init__(self, response: http.client.HTTPResponse, connection: http.client.HTTPConnection,
                 url: str, redirects: List[str], cutoff: Optional[Cutoff] = None,
                 release: Callable[[], None] = lambda: None) -> None:
        self.response = response
        self.connection = connection
        self.url = url
        self.redirects = redirects
        self._cutoff = cutoff
        self._release = release

    @property
    def cause(self) -> Optional[str]:
        return None if self._cutoff is None else self._cutoff.cause

    def set_timeout(self, seconds: Optional[float]) -> None:
        """Each read times out after ``seconds``, and all of them together end
        ``seconds`` from now."""
        if self.connection.sock is not None:
            self.connection.sock.settimeout(seconds)
        if self._cutoff is not None and seconds is not None:
            self._cutoff.arm(time.monotonic() + seconds, "timeout")

    def close(self) -> None:
        if self._cutoff is not None:
            self._cutoff.disarm()
        self._release()
        self.response.close()
        self.connection.close()


def _socket_of(conn: http.client.HTTPConnection) -> Optional[socket.socket]:
    return conn.sock if conn.sock is not None else getattr(conn, "raw_sock", None)


def _on_cancel(cancelled: Optional[threading.Event], callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` when ``cancelled`` is set, if it can call back (a
    ``CancelEvent``); returns the function that unregisters it."""
    add: Optional[Callable[[Callable[[], None]], Callable[[], None]]] = getattr(
        cancelled, "add_callback", None)
    return add(callback) if add is not None else _nothing


def _nothing() -> None:
    return None


def _split(url: str) -> Tuple[str, str, int, str]:
    """Check the parts of ``url`` the guard cares about; return (scheme, host, port, target)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as err:
        raise FetchRefused(f"refused: {url!r} is not a valid URL ({err})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        shown = f"{scheme}:" if scheme else "a URL without a scheme"
        raise FetchRefused(f"refused: only http and https URLs can be fetched, not {shown}")
    if "@" in parts.netloc:
        raise FetchRefused("refused: URLs with credentials (user:password@) are not fetched")
    host = parts.hostname or ""
    if not host:
        raise FetchRefused(f"refused: {url!r} names no host")
    try:
        host.encode("ascii")
    except UnicodeEncodeError:
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as err:
            raise FetchRefused(f"refused: host {host!r} is not a valid name ({err})") from None
    # Quote what a browser would (spaces, non-ASCII) and keep what is already escaped.
    target = quote(parts.path or "/", safe="/%:@!$&'()*+,;=~-._")
    if parts.query:
        target += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=~-._?")
    return scheme, host, port or (443 if scheme == "https" else 80), target


def open_url(url: str, *, headers: Dict[str, str], allow_private: bool = False,
             timeout: float = 10.0, deadline: Optional[float] = None,
             cancelled: Optional[threading.Event] = None,
             verify: Union[bool, str] = True, max_redirects: int = MAX_REDIRECTS) -> Opened:
    """GET ``url`` through the guard, following up to ``max_redirects`` redirects,
    each hop resolved and checked anew. Returns once a non-redirect response's headers
    arrived; HTTP error statuses are returned too (the caller decides). Each hop has
    ``timeout`` seconds, and none outlives ``deadline``, for all of its connecting,
    sending and head; a hop that runs out is a ``TransportError``, a cancelled one
    ``Cancelled``."""
    redirects: List[str] = []
    while True:
        if cancelled is not None and cancelled.is_set():
            raise Cancelled("fetch cancelled")
        hop_timeout = timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransportError(f"timed out fetching {url}")
            hop_timeout = min(timeout, left)
        scheme, host, port, target = _split(url)
        addresses = resolve_checked(host, port, allow_private=allow_private)
        logger.debug("fetching %s via %s", url, addresses[0][1][0])
        if scheme == "https":
            context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
            if verify is False:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            conn: http.client.HTTPConnection = _GuardedHTTPS(host, port, addresses, hop_timeout, context)
        else:
            conn = _GuardedHTTP(host, port, addresses, hop_timeout)
        cutoff = Cutoff(functools.partial(_socket_of, conn))
        cutoff.arm(time.monotonic() + hop_timeout, "timeout")
        release = _on_cancel(cancelled, lambda: cutoff.cut("cancelled"))
        try:
            try:
                conn.request("GET", target, headers=headers)
                cutoff.enforce()  # a cut made while it was still connecting
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as err:
                if cutoff.cause is None:
                    raise TransportError(f"fetching {url} failed: {err}") from None
            # A head cut short is no answer, however it looks.
            if cutoff.cause == "cancelled":
                raise Cancelled("fetch cancelled")
            if cutoff.cause is not None:
                raise TransportError(f"timed out fetching {url}: no complete response within "
                                     f"{hop_timeout:g} s")
        except BaseException:
            cutoff.disarm()
            release()
            conn.close()
            raise
        location = response.getheader("Location")
        if response.status not in REDIRECT_STATUSES or not location:
            return Opened(response, conn, url, redirects, cutoff, release)
        cutoff.disarm()
        release()
        response.close()
        conn.close()
        if len(redirects) >= max_redirects:
            raise FetchError(f"stopped after {max_redirects} redirects (the last one from {url})")
        redirects.append(url)
        url = urljoin(url, location.strip())
