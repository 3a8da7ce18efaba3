"""The ``requests`` sessions of the model transport, wired so that a request in
flight can be cut off from outside: at its time limit, at the run's deadline, or the
moment the run is cancelled from another thread.

Why a socket timeout is not enough: it bounds one ``recv``. A server or proxy that
sends its status line and headers one byte at a time, each byte inside the timeout,
keeps ``http.client`` reading the head for as long as it likes. So each request is
an :class:`InFlight` holding a :class:`~nacelle.read_limits.Cutoff` of its
connection's socket, armed twice, each time capped by the run's deadline:

1. when the request starts: connecting and sending within ``connect + read``
   seconds ("send");
2. when the request has been sent: the whole response head — status line and every
   header — within ``read`` seconds ("head"). For a JSON answer the body is read
   inside the same limit.

A cancel callback cuts it at once ("cancelled"), and a cut made while the
connection had no socket yet is carried out as soon as it has one. ``InFlight.cause``
then tells the transport which error to raise.

How it finds the socket: the session's urllib3 pools (those of a proxy from the
environment too) note which connection this thread's request took, and their
connections say when the request has gone out (``getresponse``). The same works on
urllib3 1.26 and 2.x. One gap: urllib3 1.26 gives a TLS connection its socket only
after the handshake, so there a handshake is bounded per read by the connect timeout
alone; 2.x exposes the socket while it shakes hands, and the cutoff reaches it.

Outer ring: imports ``requests``, ``urllib3``, the standard library and
``nacelle.read_limits``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict

from ..read_limits import Cutoff

__all__ = ["Environment", "InFlight", "environment", "new_session"]

_current = threading.local()  # .flight: the InFlight of this thread's request, if any


class InFlight:
    """One request on its way; ``with`` it around the call that sends it.

    ``deadline`` is the run's, in ``time.monotonic()`` seconds, or None.
    """

    __slots__ = ("_conn", "cutoff", "_connect", "_read", "_deadline")

    def __init__(self, connect: float, read: float, deadline: Optional[float]) -> None:
        # The connection is held in a list the cutoff's lookup shares, not reached
        # through self: a bound method would make a reference cycle of every request,
        # keeping its connection (socket, buffers) alive until the collector ran.
        conn: List[Any] = [None]
        self._conn = conn
        self.cutoff = Cutoff(lambda: getattr(conn[0], "sock", None))
        self._connect = connect
        self._read = read
        self._deadline = deadline

    @property
    def cause(self) -> Optional[str]:
        """What cut the request off ("send", "head", "deadline", "cancelled"), or None."""
        return self.cutoff.cause

    def cancel(self) -> None:
        """Cut the request off now (the run's cancel callback)."""
        self.cutoff.cut("cancelled")

    def __enter__(self) -> "InFlight":
        self._arm(self._connect + self._read, "send")
        _current.flight = self
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _current.flight = None
        self.cutoff.disarm()

    @property
    def conn(self) -> Any:
        """The connection the request took, once it has one."""
        return self._conn[0]

    def _arm(self, seconds: float, cause: str) -> None:
        at = time.monotonic() + seconds
        if self._deadline is not None and self._deadline <= at:
            at, cause = self._deadline, "deadline"
        self.cutoff.arm(at, cause)

    def _taken(self, conn: Any) -> None:
        self._conn[0] = conn
        self.cutoff.enforce()

    def _sent(self) -> None:
        self.cutoff.enforce()  # a cut made before the socket existed
        if self.cutoff.cause is None:
            self._arm(self._read, "head")


_WATCHED: Dict[Any, Any] = {}


def _watched(pool_class: Any) -> Any:
    """``pool_class`` whose connections tell this thread's :class:`InFlight` when
    they are taken and when their request has been sent."""
    if getattr(pool_class, "_nacelle_watched", False):
        return pool_class
    watched = _WATCHED.get(pool_class)
    if watched is not None:
        return watched
    base = pool_class.ConnectionCls
    namespace: Dict[str, Any] = {"_nacelle_watched": True}
    if hasattr(base, "getresponse"):  # not urllib3's stand-in for a missing ssl module
        class Connection(base):  # type: ignore[misc, valid-type]
            def getresponse(self, *args: Any, **kwargs: Any) -> Any:
                flight = getattr(_current, "flight", None)
                if flight is not None:
                    flight._sent()
                return super().getresponse(*args, **kwargs)

        Connection.__name__ = Connection.__qualname__ = "Watched" + base.__name__
        namespace["ConnectionCls"] = Connection

    def _get_conn(self: Any, timeout: Optional[float] = None) -> Any:
        conn = pool_class._get_conn(self, timeout)
        flight = getattr(_current, "flight", None)
        if flight is not None:
            flight._taken(conn)
        return conn

    namespace["_get_conn"] = _get_conn
    watched = _WATCHED[pool_class] = type("Watched" + pool_class.__name__, (pool_class,), namespace)
    return watched


class _Adapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _watched(urllib3.HTTPConnectionPool),
            "https": _watched(urllib3.HTTPSConnectionPool),
        }

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = {
            scheme: _watched(pool) for scheme, pool in manager.pool_classes_by_scheme.items()}
        return manager


Environment = Tuple[Dict[str, str], Optional[str]]


def environment(base_url: str) -> Environment:
    """The proxies the environment names for ``base_url`` and the CA bundle it names
    (or None), as requests would read them on every request with ``trust_env`` on:
    proxies from HTTP(S)_PROXY, ALL_PROXY and NO_PROXY, the bundle from
    REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE. A .netrc is not read: its credentials have
    no business beside an API key. Reading them costs a pass over ``os.environ``
    (about a millisecond on loopback, most of our time to the first byte), so the
    transport does it once, for its first session, and every thread's session shares
    what it found."""
    proxies = requests.utils.get_environ_proxies(base_url)
    return proxies, os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")


def new_session(base_url: str, environ: Optional[Environment] = None) -> requests.Session:
    """A session for the one host ``base_url`` names, its pools watched, with the
    proxies and CA bundle of ``environ`` (read now when not given: see
    :func:`environment`)."""
    session = requests.Session()
    adapter = _Adapter()  # urllib3 retries nothing: the transport's rule is the one rule
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    proxies, bundle = environment(base_url) if environ is None else environ
    session.proxies.update(proxies)
    if bundle:
        session.verify = bundle
    session.trust_env = False
    return session


def post(session: requests.Session, url: str, data: Any, headers: Dict[str, str],
         timeout: Tuple[float, float]) -> requests.Response:
    """``session.post(url, data=data, headers=headers, stream=True, timeout=timeout,
    allow_redirects=False)`` for a session of :func:`new_session`, without the
    merging ``Session.request`` does first.

    That merging is for settings a request may bring and the environment may name;
    a transport's requests bring none but their headers, and its sessions read no
    environment (``trust_env`` off). What it would merge is therefore known: the
    session's headers under the request's (a None removing one), no parameters,
    the session's auth, cookies, hooks, proxies, CA bundle and client certificate.
    So the request is prepared with those directly and sent with ``Session.send``,
    which still keeps the cookies a response sets, as a session does. Merging cost
    about 0.1 ms a request, a fifth of a short request's CPU, most of it
    ``requests`` asking a runtime-checkable protocol of each mapping it merges."""
    merged = CaseInsensitiveDict(session.headers)
    merged.update(headers)
    prepared = requests.PreparedRequest()
    prepared.prepare(method="POST", url=url, data=data, auth=session.auth,
                     headers={k: v for k, v in merged.items() if v is not None},
                     cookies=session.cookies, hooks=session.hooks)
    proxies = {k: v for k, v in session.proxies.items() if v is not None}
    return session.send(prepared, stream=True, timeout=timeout, allow_redirects=False,
                        proxies=proxies, verify=session.verify, cert=session.cert)
