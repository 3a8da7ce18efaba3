"""JSON-RPC 2.0 over an MCP transport: request ids, routing, waiting, failing.

:class:`Session` sends requests and routes whatever the server sends, in any order,
from the transport's threads: answers to the request they name, the server's own
requests to :meth:`Session._answer` and notifications to :meth:`Session._notified`,
which :class:`~nacelle.mcp.client.MCPClient` overrides with MCP's meaning. It knows
nothing of any MCP method beyond ``notifications/cancelled``, ``notifications/progress``
and which requests may not be cancelled.

Choices, and why:

- ``timeout`` bounds every request; a caller's deadline and cancellation cut it
  shorter. A waiting call blocks once, until its answer, the connection's end, its
  deadline or a cancel callback wakes it; only a plain ``threading.Event``, which
  cannot call back, is looked at every 50 ms. Giving up sends
  ``notifications/cancelled`` so the server stops work, except where the protocol
  forbids it (the handshake, the discovery probe) or closing the request's own HTTP
  response is the cancellation (2026-07-28 Streamable HTTP).
- A message the client cannot use fails the request it names, by its ``id`` or by
  arriving on that request's own HTTP answer, and the whole connection when it
  names none: no caller then waits out its timeout for a reply that cannot be
  routed. An ``id`` must be a string or an integer (``true`` would pass for request
  1 in a dict).
- The server's own requests that may wait (for a person, say: elicitation) are
  answered by at most :data:`ANSWERING` worker threads, with at most
  :data:`WAITING` more queued; one past that is answered at once with a JSON-RPC
  error (``-32000``, the range JSON-RPC leaves to implementations) saying the client
  is busy. A server that sends 300 such requests then gets 300 answers, and the
  host a handful of threads and callbacks running at once, not 300.
- A request may ask for progress: its ``_meta.progressToken`` is the request id, and
  each ``notifications/progress`` naming it goes to the caller's callback (from the
  transport's thread, so the callback must be quick).

Outer ring (with the rest of the MCP client); imports the standard library,
``nacelle.errors`` and the package's ``content`` (for quoting) and ``errors``.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from typing import Any, Callable, Deque, Dict, Mapping, Optional, Protocol, Tuple

from .._loggers import get_logger
from ..errors import Cancelled
from .content import preview as _preview
from .errors import MCPError, copy_error

__all__ = ["ANSWERING", "BUSY", "Progress", "Session", "Transport", "WAITING", "Workers",
           "is_request_id"]

logger = get_logger(__name__)

_POLL = 0.05  # how often a waiting call looks at a plain threading.Event
#: Requests the protocol forbids cancelling, or that are sent before there is a
#: session to cancel anything in.
_UNCANCELLABLE = ("initialize", "server/discover")

#: ``progress(progress, total, message)``, as a server's ``notifications/progress`` says.
Progress = Callable[[float, Optional[float], str], None]
#: How many of the server's requests are answered at once, and how many more may wait.
ANSWERING = 4
WAITING = 16
#: The JSON-RPC error code of a request refused because the client is busy (-32000 to
#: -32099 are left to implementations: https://www.jsonrpc.org/specification#error_object).
BUSY = -32000


class Transport(Protocol):
    """What the session needs from a byte transport (``stdio``, ``http``).

    ``start`` gets two callbacks, called from the transport's own threads:
    ``deliver(message, answering=None)`` for every parsed message (``answering`` is
    the id of the request whose own answer carried it, when the transport knows),
    and ``fail(request_id, error)`` to fail one request, or the whole connection
    when ``request_id`` is None. ``send`` never blocks for long and raises
    :class:`MCPError` when the message cannot go out.
    """

    describe: str

    def start(self, deliver: Callable[..., Any],
              fail: Callable[[Any, MCPError], Any]) -> None: ...

    def opened(self, protocol_version: str) -> None: ...

    def reset_session(self) -> None: ...

    def send(self, message: Dict[str, Any]) -> None: ...

    def abandon(self, request_id: Any) -> None: ...

    def close(self) -> None: ...


def is_request_id(value: Any) -> bool:
    """Whether ``value`` can be a JSON-RPC request id here: a string or an integer
    (not a bool, which Python would take for 0 or 1, and not a float)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


class Workers:
    """At most ``workers`` daemon threads running jobs, and at most ``backlog`` jobs
    waiting for one: :meth:`submit` says False rather than queue past that.

    Threads start when there is work and end when there is none, so an idle
    connection holds none. A job's exception is logged, never raised.
    """

    def __init__(self, name: str, *, workers: int, backlog: int) -> None:
        self.name = name
        self._workers = workers
        self._backlog = backlog
        self._lock = threading.Lock()
        self._jobs: Deque[Callable[[], None]] = collections.deque()
        self._running = 0
        self._closed = False

    def submit(self, job: Callable[[], None]) -> bool:
        """Queue ``job``; False when the queue is full or the workers are closed."""
        with self._lock:
            if self._closed or len(self._jobs) >= self._backlog:
                return False
            self._jobs.append(job)
            start = self._running < self._workers
            if start:
                self._running += 1
        if start:
            try:
                threading.Thread(target=self._work, daemon=True, name=self.name).start()
            except RuntimeError:  # the host can start no more threads
                with self._lock:
                    self._running -= 1
                    if self._running == 0 and job in self._jobs:
                        self._jobs.remove(job)
                        return False
        return True

    def close(self) -> None:
        """Drop what waits; what runs finishes, and no more starts."""
        with self._lock:
            self._closed = True
            self._jobs.clear()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._running -= 1
                    return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # noqa: BLE001 - one job must not end the worker
                logger.warning("a job of %s raised", self.name, exc_info=True)


class _Pending:
    """One request's wait. ``settled`` is set once its answer or failure is in;
    ``wake`` then too, and also by a cancel callback, so a single wait sees both."""

    __slots__ = ("settled", "wake", "result", "error")

    def __init__(self) -> None:
        self.settled = threading.Event()
        self.wake = threading.Event()
        self.result: Optional[Dict[str, Any]] = None
        self.error: Optional[MCPError] = None

    def settle(self, result: Optional[Dict[str, Any]] = None,
               error: Optional[MCPError] = None) -> None:
        self.result, self.error = result, error
        self.settled.set()
        self.wake.set()


class Session:
    """One JSON-RPC conversation with an MCP server over a :class:`Transport`.

    Safe to use from several threads at once: each request has its own id and
    waits on its own reply.
    """

    def __init__(self, transport: Transport, *, name: str, timeout: Optional[float] = 30.0) -> None:
        self.name = name
        self.timeout = timeout
        #: True once the server speaks 2026-07-28: requests then carry ``_meta``.
        self.modern = False
        self._transport = transport
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: Dict[Any, _Pending] = {}
        self._progress: Dict[Any, Progress] = {}
        self._broken: Optional[MCPError] = None
        self._closed = False
        self._answering = Workers(f"nacelle-mcp-answer-{name}", workers=ANSWERING,
                                  backlog=WAITING)

    def close(self) -> None:
        """End the session and release the server (for stdio: stop the process)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending, self._pending = self._pending, {}
        self._answering.close()
        error = MCPError(f"the connection to MCP server {self.name} was closed")
        for waiter in pending.values():
            waiter.settle(error=error)
        self._transport.close()

    # -- hooks for the client ------------------------------------------------------------

    def _prepare(self, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
        """The params as sent (the client adds 2026-07-28's ``_meta`` here)."""
        return params

    def _answer(self, request_id: Any, method: str, params: Any) -> None:
        """Answer one of the server's requests; this base knows none but ``ping``."""
        if method == "ping":
            self._send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            self._send({"jsonrpc": "2.0", "id": request_id, "error": {
                "code": -32601, "message": f"method not supported by this client: {method}"}})

    def _notified(self, method: str, params: Dict[str, Any]) -> None:
        logger.debug("MCP server %s sent %s", self.name, method)

    def _answer_later(self, request_id: Any, method: str,
                      work: Callable[[], Dict[str, Any]]) -> None:
        """Answer one of the server's requests with what ``work`` returns (or the
        :class:`MCPError` it raises), on a worker thread: ``work`` may wait for a
        person, and this is the thread reading the server. Past the workers and
        their queue, the request is refused at once (:data:`BUSY`)."""

        def answer() -> None:
            try:
                result = work()
            except Exception as err:  # noqa: BLE001 - the server gets an error either way
                if not isinstance(err, MCPError):
                    logger.warning("answering %s for MCP server %s raised", method, self.name,
                                   exc_info=True)
                code = err.code if isinstance(err, MCPError) and err.code else -32603
                self._send({"jsonrpc": "2.0", "id": request_id,
                            "error": {"code": code, "message": str(err)}})
                return
            self._send({"jsonrpc": "2.0", "id": request_id, "result": result})

        if not self._answering.submit(answer):
            logger.warning("MCP server %s sent more %s requests than the client answers at "
                           "once; refused one", self.name, method)
            self._send({"jsonrpc": "2.0", "id": request_id, "error": {
                "code": BUSY, "message": f"too many requests in flight: the client answers "
                                         f"{ANSWERING} at once and queues {WAITING}"}})

    # -- requests --------------------------------------------------------------------------

    def _request(self, method: str, params: Optional[Mapping[str, Any]],
                 cancelled: Optional[threading.Event], deadline: Optional[float],
                 timeout: Optional[float], progress: Optional[Progress] = None,
                 ) -> Dict[str, Any]:
        request_id, waiter = self._issue(method, params, progress)
        timeout = self.timeout if timeout is None else timeout
        try:
            self._wait(waiter, request_id, method, cancelled, deadline, timeout)
        finally:
            if progress is not None:
                with self._lock:
                    self._progress.pop(request_id, None)
        return self._outcome(waiter)

    def _issue(self, method: str, params: Optional[Mapping[str, Any]],
               progress: Optional[Progress] = None) -> Tuple[int, "_Pending"]:
        """Send a request without waiting for it: its id, and the waiter its answer
        settles (wait with :meth:`_wait`, read with :meth:`_outcome`)."""
        waiter = _Pending()
        with self._lock:
            if self._closed:
                raise MCPError(f"the connection to MCP server {self.name} is closed")
            if self._broken is not None:
                raise MCPError(str(self._broken))
            request_id = next(self._ids)
            self._pending[request_id] = waiter
            if progress is not None:
                self._progress[request_id] = progress
        message: Dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        sent = dict(params) if params is not None else None
        if progress is not None:
            sent = dict(sent or {})
            sent["_meta"] = {**dict(sent.get("_meta") or {}), "progressToken": request_id}
        sent = self._prepare(method, sent if sent is not None else {})
        if sent or params is not None:
            message["params"] = sent
        try:
            self._transport.send(message)
        except MCPError as err:
            self._fail(request_id, err)
        except BaseException:  # arguments that are not JSON, say: nobody will answer
            self._fail(request_id, MCPError(f"{method} was not sent"))
            raise
        return request_id, waiter

    @staticmethod
    def _outcome(waiter: "_Pending") -> Dict[str, Any]:
        """A settled request's result, or its error raised."""
        error = waiter.error
        if error is not None:
            # A copy for each caller: one failure reaches every waiting thread, and a
            # shared exception would gather all their tracebacks (and the transport
            # thread's frames) as each raises it.
            raise copy_error(error)
        return waiter.result if waiter.result is not None else {}

    def _wait(self, waiter: "_Pending", request_id: int, method: str,
              cancelled: Optional[threading.Event], deadline: Optional[float],
              timeout: Optional[float]) -> None:
        """Block until the request settles, ``cancelled`` is set, or time is up:
        the transport settles the waiter, a ``cancelled`` with ``add_callback`` (a
        :class:`~nacelle.context.CancelEvent`) wakes it, the wait's timeout is the
        deadline. Only a plain ``threading.Event`` is looked at every 50 ms."""
        ends = [t for t in (deadline, time.monotonic() + timeout if timeout else None)
                if t is not None]
        end = min(ends) if ends else None
        add_callback = getattr(cancelled, "add_callback", None)
        unregister = add_callback(waiter.wake.set) if add_callback is not None else None
        poll = cancelled is not None and add_callback is None
        try:
            while not waiter.settled.is_set():
                left = None if end is None else end - time.monotonic()
                if cancelled is not None and cancelled.is_set():
                    reason = "cancelled by the client"
                    error: Exception = Cancelled(f"MCP {method} to {self.name} was cancelled")
                elif left is not None and left <= 0:
                    reason = "timed out"
                    error = MCPError(f"MCP server {self.name} did not answer {method} " + (
                        "before the call's deadline" if end == deadline else
                        f"within {timeout:g}s"))
                else:
                    waiter.wake.wait(min(_POLL, left or _POLL) if poll else left)
                    continue
                if self._give_up(request_id, method, reason):
                    raise error
                waiter.settled.wait()  # the answer won the race and is being handed over
        finally:
            if unregister is not None:
                unregister()

    def _give_up(self, request_id: Any, method: str, reason: str) -> bool:
        """Stop waiting for a request and tell the server; False when its answer (or
        failure) came first."""
        with self._lock:
            if self._pending.pop(request_id, None) is None:
                return False
        self._transport.abandon(request_id)
        closing_cancels = self.modern and getattr(self._transport, "cancels_by_closing", False)
        if method not in _UNCANCELLABLE and not closing_cancels:
            logger.debug("MCP %s %s to %s: %s", method, request_id, self.name, reason)
            self._send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": request_id, "reason": reason}})
        return True

    def _send(self, message: Dict[str, Any]) -> None:
        """Send a notification or a response; nobody waits for these, so a failure
        is logged, and the next request reports the broken connection."""
        try:
            self._transport.send(message)
        except MCPError as err:
            logger.debug("could not send %s to MCP server %s: %s",
                         message.get("method", "a response"), self.name, err)

    # -- called from transport threads ----------------------------------------------

    def _deliver(self, message: Any, answering: Any = None) -> bool:
        """Route one parsed message from the server (any thread, any order).

        ``answering`` is the id of the request whose own answer carried the message,
        when the transport knows it (an HTTP POST's response), else None. Returns
        whether the message settled that request.
        """
        if isinstance(message, list) and message:  # a JSON-RPC batch, allowed by 2025-03-26
            settled = False
            for item in message:  # a batch inside a batch is not an object: refused
                settled = self._route(item, answering) or settled
            return settled
        return self._route(message, answering)

    def _route(self, message: Any, answering: Any) -> bool:
        if not isinstance(message, dict):
            return self._reject(None, answering, "a message that is not a JSON object", message)
        is_call = "method" in message  # the server's own request or notification
        if message.get("jsonrpc") != "2.0" or (is_call and not isinstance(message["method"], str)):
            # A request's id is the server's numbering, not ours: it names no call.
            return self._reject(None if is_call else message.get("id"), answering,
                                "a message that is not JSON-RPC 2.0", message)
        if is_call:
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if "id" not in message:
                if message["method"] == "notifications/progress":
                    self._progressed(params)
                else:
                    self._notified(message["method"], params)
            elif is_request_id(message["id"]):
                self._answer(message["id"], message["method"], params)
            else:  # no answer could name it; and nobody of ours waits for it
                logger.warning("MCP server %s sent a request with an id that is not a string "
                               "or an integer: %s", self.name, _preview(message))
            return False
        request_id = message.get("id")
        if "result" not in message and "error" not in message:
            return self._reject(request_id, answering,
                                "a response with neither result nor error", message)
        if request_id is None and answering is not None:
            request_id = answering  # an error the server could not tie to a request id
        if not is_request_id(request_id):
            return self._reject(None, answering, "a response whose id is not a string or "
                                "an integer", message)
        with self._lock:
            waiter = self._pending.pop(request_id, None)
        if waiter is None:
            # Usually the late answer to a call we gave up on.
            logger.debug("MCP server %s answered unknown request %r", self.name, request_id)
        elif "error" in message:
            waiter.settle(error=rpc_error(self.name, message["error"]))
        elif isinstance(message["result"], dict):
            waiter.settle(result=message["result"])
        else:
            waiter.settle(error=MCPError(
                f"MCP server {self.name} answered request {request_id} with a result that "
                f"is not an object: {_preview(message['result'])}"))
        return bool(request_id == answering)

    def _reject(self, request_id: Any, answering: Any, what: str, message: Any) -> bool:
        """Fail the request a message the client cannot use belongs to, or, when it
        belongs to none we can name, the whole connection."""
        error = MCPError(f"MCP server {self.name} sent {what}: {_preview(message)}")
        owner = answering if answering is not None else request_id
        if not is_request_id(owner):
            self._fail(None, error)
            return False
        logger.warning("%s", error)
        self._fail(owner, error)
        return bool(owner == answering)

    def _fail(self, request_id: Any, error: MCPError) -> bool:
        """Fail one pending request, or (``request_id`` None) the whole connection.
        Returns whether anybody was waiting."""
        with self._lock:
            if request_id is not None:
                failed = [self._pending.pop(request_id)] if request_id in self._pending else []
            else:
                if self._closed:
                    return False
                first = self._broken is None
                if first:
                    self._broken = error
                failed, self._pending = list(self._pending.values()), {}
        if request_id is None and first:
            logger.warning("%s", error)
        for waiter in failed:
            waiter.settle(error=error)
        return bool(failed)

    def _progressed(self, params: Dict[str, Any]) -> None:
        token = params.get("progressToken")
        with self._lock:
            callback = self._progress.get(token) if is_request_id(token) else None
        progress, total = params.get("progress"), params.get("total")
        if callback is None or not isinstance(progress, (int, float)):
            logger.debug("MCP server %s reported progress %s", self.name, _preview(params))
            return
        try:
            callback(float(progress), float(total) if isinstance(total, (int, float)) else None,
                     str(params.get("message") or ""))
        except Exception:  # noqa: BLE001 - a caller's callback must not break the reader
            logger.warning("a progress callback for MCP server %s raised", self.name,
                           exc_info=True)


def rpc_error(server: str, error: Any) -> MCPError:
    """A JSON-RPC error object as an :class:`MCPError`."""
    if not isinstance(error, dict):
        return MCPError(f"MCP server {server} answered with an error: {_preview(error)}")
    code = error.get("code")
    text = f"MCP server {server} answered with error {code}: {error.get('message', '')}"
    return MCPError(text, code=code if isinstance(code, int) and not isinstance(code, bool)
                    else None, data=error.get("data"))
