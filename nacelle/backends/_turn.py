"""One model turn over HTTP, the same for every backend: the :class:`Accumulator`
protocol, :func:`stream_turn`, and the checks and :class:`Endpoint` every backend's
constructor shares.

Every HTTP backend is a request body (its ``*_wire`` module), an accumulator (its
``*_stream`` module) and a ``turn`` method that is a few lines around
:func:`stream_turn`::

    def turn(self, request, messages, ctx):
        body = to_wire(request, messages, model=self.model)
        return stream_turn(self._endpoint, "/v1/messages", body, ctx,
                           lambda scrub: Accumulator(scrub=scrub))

What the skeleton promises, so no backend has to:

- The accumulator is fed every SSE event as it arrives and its events are yielded
  at once; the stream is read up to the event after which ``accumulator.done`` is
  true (the transport then frees the connection for the next turn); the turn's
  :class:`~nacelle.backend.TurnEnd` comes from ``accumulator.finish()``, last.
- When the turn fails — the stream breaks, the provider reports an error in band,
  the run is cancelled — ``accumulator.abandon()`` is yielded before the error is
  raised, so every call the consumer saw announced (a server-side tool call) is
  closed by a result.
- The accumulator is made after the request was sent, with the transport's
  scrubber: every text it makes from what the provider sent passes through it, so a
  key the provider echoed never reaches an exception.
- The response is closed however the turn ends, at once when the consumer leaves
  early.
- No lone UTF-16 surrogate reaches the consumer: the accumulators join a pair split
  over two deltas (``_stream.Deltas``), and every event and the TurnEnd pass through
  ``_stream.clean``, which makes any half left over U+FFFD — a ``str`` holding one
  cannot be written to a terminal, a file or a socket as UTF-8.

:class:`Endpoint` holds a backend's HTTP settings, checked when the backend is made
(a bad ``base_url`` or timeout is a ``ConfigError`` then, not at the first request),
and makes the transport — and so imports ``requests`` — at the first request:
``import nacelle.backends.anthropic`` costs nothing it does not use, which is what a
notebook or a CLI that never sends a request wants.

Outer ring: imports the standard library, nacelle's core, ``nacelle._net`` (the header
checks and ``scrub``), ``_stream`` beside it and, lazily, ``_http``.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Protocol, Union,
)

from .._loggers import get_logger
from ..backend import Request, TurnEnd
from ..context import RunContext, new_span
from ..errors import Cancelled, ConfigError, NacelleError, StreamError
from ..events import Event, Kind, Usage, _wire_count
from ..sse import SSEEvent
from .._net.headers import checked, checked_settings
from .._net.secrets import scrub
from ._stream import _SURROGATE as _SURROGATE_PATTERN, Tagging, clean

if TYPE_CHECKING:  # typing only: the import costs requests
    from ._http import Transport

__all__ = ["Accumulator", "Endpoint", "base_url_from", "check_key", "check_model", "count_tokens", "stream_turn"]

log = get_logger(__name__)


class Accumulator(Protocol):
    """One turn's stream state, pure: SSE events in, nacelle events and a TurnEnd out."""

    @property
    def done(self) -> bool:
        """True once the stream's final event was fed."""

    def feed(self, sse: SSEEvent) -> List[Event]:
        """Take one SSE event; return the events to yield now."""

    def finish(self) -> TurnEnd:
        """Close the turn at the end of the stream (raises when it is incomplete)."""

    def abandon(self) -> List[Event]:
        """The events closing whatever was announced, for a turn that failed."""


def check_model(model: Any, what: str, example: str) -> str:
    """``model``, when it is a non-empty string; else a ``ConfigError`` saying it must
    name ``what`` ("an OpenRouter model"), with an example."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"model must name {what} (\"{example}\", say), got {model!r}")
    return model


def base_url_from(base_url: Optional[str], variable: str, default: str) -> str:
    """The base URL a backend uses: ``base_url`` when given, else the environment
    variable the provider's official SDK reads (``ANTHROPIC_BASE_URL``,
    ``OPENAI_BASE_URL``, ``OPENROUTER_BASE_URL``) when set and not empty, else the
    provider's own. So a proxy, a gateway or a local fake configured for the SDKs
    serves nacelle too, and an explicit argument still wins."""
    if base_url is not None:
        return base_url
    return os.environ.get(variable, "").strip() or default


def check_key(api_key: Any, variable: str) -> None:
    """Refuse an ``api_key`` that is neither None nor a non-empty string; the error
    names ``variable``, never the value."""
    if api_key is not None and (not isinstance(api_key, str) or not api_key.strip()):
        then = f" (then ${variable} is used)" if variable else ""
        raise ConfigError(f"api_key must be a non-empty string or None{then}")


class Endpoint:
    """A backend's HTTP settings, checked now; its transport, made at the first request.

    The arguments are :class:`~nacelle.backends._http.Transport`'s. ``headers`` go on
    every request and are treated as secrets; ``secret_headers`` is asked for the
    key-bearing headers when the transport is made; ``sign``, ``stream_media`` and
    ``decoder`` are for the clouds whose requests are signed one by one and whose
    stream is not SSE.
    """

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        max_retries: int = 2,
        timeout: float = 600.0,
        stall_timeout: float = 600.0,
        name: str,
        key_variable: str = "",
        secret_headers: Optional[Callable[[], Mapping[str, str]]] = None,
        sign: Optional[Callable[[str, bytes, Mapping[str, str]], Mapping[str, str]]] = None,
        stream_media: str = "text/event-stream",
        decoder: Optional[Callable[[], Any]] = None,
        auth_hint: str = "",
    ) -> None:
        try:
            self.base_url = checked_settings(base_url, max_retries, {
                "timeout": timeout, "stall_timeout": stall_timeout})
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self._settings: Dict[str, Any] = dict(
            headers=checked(headers), max_retries=max_retries, timeout=float(timeout),
            stall_timeout=float(stall_timeout), name=name, key_variable=key_variable,
            secret_headers=secret_headers, sign=sign, stream_media=stream_media,
            decoder=decoder, auth_hint=auth_hint)
        self.name = name
        self._transport: Optional[Transport] = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Endpoint({self.name!r}, {self.base_url!r})"

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state  # the transport pickles itself, without its sessions or the key

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def transport(self) -> "Transport":
        """The transport, made (and ``requests`` imported) on first use."""
        transport = self._transport
        if transport is None:
            with self._lock:
                if self._transport is None:
                    from ._http import Transport

                    self._transport = Transport(self.base_url, **self._settings)
                transport = self._transport
        return transport


#: Headers the transport writes for every request; ``extra_headers`` never replaces one.
_OWN = frozenset({"content-type", "content-length", "accept", "accept-encoding", "host",
                  "transfer-encoding", "connection"})
#: The headers a signing transport (``sign``: a cloud's token or signature) adds.
_SIGNED = frozenset({"authorization", "x-amz-date", "x-amz-security-token"})


def with_extra_headers(endpoint: Endpoint, headers: Optional[Mapping[str, str]],
                       extra: Mapping[str, str]) -> Dict[str, str]:
    """A request's ``headers`` with ``ModelSettings.extra_headers`` added.

    A name the backend's transport already sends on every request — its key header
    above all, its version and attribution headers, the framing ones — is a
    ConfigError, not an override: a key given there would travel past the secret
    handling the real one gets, and a silent replacement is a request nobody asked
    for. A name the backend sends on this request only (``anthropic-beta``) is joined
    to its value with a comma, as HTTP list headers are (RFC 9110, section 5.3), so
    both sets of betas apply. Only names ever appear in the error.
    """
    transport = endpoint.transport
    fixed = _OWN | {name.lower() for name in transport.request_headers()}
    if transport.sign is not None:
        fixed |= _SIGNED
    out = dict(headers or {})
    given = {name.lower(): name for name in out}
    for name, value in extra.items():
        key = name.lower()
        if key in fixed:
            raise ConfigError(f"extra_headers may not replace the {name} header that "
                              f"{endpoint.name} sends itself")
        if key in given:
            out[given[key]] = f"{out[given[key]]},{value}"
        else:
            out[name] = value
    return out


def stream_turn(
    endpoint: Endpoint,
    path: str,
    body: Any,
    ctx: RunContext,
    accumulator: Callable[[Callable[[str], str]], Accumulator],
    *,
    headers: Optional[Mapping[str, str]] = None,
    keepalive: Optional[Callable[[SSEEvent], bool]] = None,
    request: Optional[Request] = None,
    model: str = "",
) -> Iterator[Union[Event, TurnEnd]]:
    """One streamed model turn: POST ``body`` to ``path``, feed the SSE events to the
    accumulator made by ``accumulator(scrub)``, yield its events, then its TurnEnd.

    With observers on ``ctx`` (``observe.py``) the turn is one request span:
    ``request.start``, ``request.first_byte`` once the response's head is in,
    ``request.end`` with the usage, the stop and the time to the first delta — or the
    failure, a consumer leaving early included. ``request`` and ``model`` describe it.
    """
    if request is not None and request.settings.extra_headers:
        headers = with_extra_headers(endpoint, headers, request.settings.extra_headers)
    if ctx.observer is None:
        return _stream_turn(endpoint, path, body, ctx, accumulator, headers, keepalive, None)
    return _observed_turn(endpoint, path, body, ctx, accumulator, headers, keepalive,
                          request, model)


def _stream_turn(
    endpoint: Endpoint, path: str, body: Any, ctx: RunContext,
    accumulator: Callable[[Callable[[str], str]], Accumulator],
    headers: Optional[Mapping[str, str]], keepalive: Optional[Callable[[SSEEvent], bool]],
    seen: Optional["_Seen"],
) -> Iterator[Union[Event, TurnEnd]]:
    transport = endpoint.transport
    response = transport.post_stream(path, body, ctx, headers=headers)
    state = accumulator(functools.partial(scrub, headers=transport.secrets()))
    if seen is not None:
        seen.answered(response, state)
    # The events come a read at a time (what arrived together), so this generator is
    # the only one resumed per event. The run is looked at before each event, as
    # iter_sse does; ``done`` is asked after each event was fed (and its events
    # consumed), so the accumulator's own reading of the stream decides, and the
    # transport is then told so: it reads the rest of the body and frees the
    # connection for the next turn.
    from ._http import next_batch  # loaded with the transport, which exists by now

    reads = transport.batches(response, ctx, keepalive=keepalive)
    feed = state.feed
    is_set, deadline = ctx.cancelled.is_set, ctx.deadline  # a context's deadline is fixed
    # A forwarding sub-agent's run (RunContext._tags): its accumulator makes its deltas
    # with their tags (_stream.Tagging), so none is copied to be tagged.
    tags = ctx._tags
    if tags is not None and isinstance(state, Tagging):
        state.tag(tags["agent"], tags["via"])
    try:
        batch = next_batch(reads, False)
        while batch is not None:
            for sse in batch:
                if is_set() or (deadline is not None and ctx.expired()):
                    ctx.check()
                out = feed(sse)
                if out:
                    if seen is not None and seen.first is None:
                        seen.delta(out)
                    for event in out:
                        # A text delta with no surrogate in it, and a TOOL_INPUT, are
                        # what clean() would return untouched (its tests, inline); they
                        # are the events nearly every SSE event makes.
                        kind = event.kind
                        if type(event) is Event and (
                                kind is _TEXT and event.tool is None
                                and (event.text.isascii() or not _SURROGATE(event.text))
                                or kind is _TOOL_INPUT):
                            yield event
                        else:
                            yield clean(event)
                if state.done:
                    break
            batch = next_batch(reads, state.done)
        end = clean(state.finish())
    except NacelleError:
        yield from clean(tuple(state.abandon()))
        raise
    finally:
        reads.close()  # at once when the consumer left early or the stream failed
        response.close()
    log.debug("%s turn ended: %s, %s", endpoint.name, end.stop.value, end.usage)
    if seen is not None:
        seen.end = end
    yield end


_DELTAS = frozenset({Kind.TEXT, Kind.THINKING, Kind.TOOL_CALL})
_TEXT, _TOOL_INPUT = Kind.TEXT, Kind.TOOL_INPUT
#: Per text delta a short string, for which the search is quicker than the encoder
#: ``messages.has_surrogate`` asks (a call fewer).
_SURROGATE = _SURROGATE_PATTERN.search


class _Seen:
    """What one observed request has shown so far: when it started, its response's
    head and first delta, its end."""

    __slots__ = ("ctx", "base", "started", "clock", "status", "request_id", "first", "end",
                 "state")

    def __init__(self, ctx: RunContext, base: Dict[str, Any]) -> None:
        self.ctx = ctx
        self.base = base
        self.clock = ctx.clock
        self.started = ctx.clock()
        self.status = 0
        self.request_id = ""
        self.first: Optional[float] = None
        self.end: Optional[TurnEnd] = None
        self.state: Optional[Accumulator] = None

    def answered(self, response: Any, state: Accumulator) -> None:
        self.status = int(getattr(response, "status_code", 0) or 0)
        found = getattr(response, "headers", {})
        self.request_id = next((found[h] for h in _REQUEST_ID_HEADERS if h in found), "")
        self.state = state
        self.ctx.observe("request.first_byte", **self.base, status=self.status,
                         request_id=self.request_id, latency=self.clock() - self.started)

    def delta(self, events: List[Event]) -> None:
        # A local call's TOOL_INPUT and early TOOL_CALL are not counted: the time to
        # the first token is observe.py's "first text or thinking delta, or
        # server-side call", which a turn of local calls only does not have.
        if any(e.kind in _DELTAS and (e.kind is not Kind.TOOL_CALL or e.tool is None
                                      or e.tool.server) for e in events):
            self.first = self.clock() - self.started


#: Where providers put the id of a request (Anthropic and OpenAI: ``request-id`` /
#: ``x-request-id``; OpenRouter and most proxies echo one of them).
_REQUEST_ID_HEADERS = ("request-id", "x-request-id")


def _observed_turn(
    endpoint: Endpoint, path: str, body: Any, ctx: RunContext,
    accumulator: Callable[[Callable[[str], str]], Accumulator],
    headers: Optional[Mapping[str, str]], keepalive: Optional[Callable[[SSEEvent], bool]],
    request: Optional[Request], model: str,
) -> Iterator[Union[Event, TurnEnd]]:
    import urllib.parse  # loaded by the transport anyway; not with the backends

    url = endpoint.base_url + path
    parts = urllib.parse.urlsplit(url)
    base = {"span": new_span(), "provider": endpoint.name, "model": model}
    seen = _Seen(ctx, base)
    ctx.observe("request.start", **base, url=url, server_address=parts.hostname or "",
                server_port=parts.port or (443 if parts.scheme == "https" else 80),
                max_tokens=request.max_tokens if request is not None else None,
                profile=request.profile if request is not None else None)
    failure: Optional[BaseException] = None
    try:
        yield from _stream_turn(endpoint, path, body, ctx, accumulator, headers, keepalive,
                                seen)
    except BaseException as exc:
        # Closed after its TurnEnd is the turn ending as it should; any other exit,
        # a consumer leaving early included, is the request's failure.
        if not (isinstance(exc, GeneratorExit) and seen.end is not None):
            failure = (Cancelled("the consumer stopped reading the turn")
                       if isinstance(exc, GeneratorExit) else exc)
        raise
    finally:
        end, state = seen.end, seen.state
        status = seen.status or int(getattr(failure, "status", 0) or 0)
        ctx.observe("request.end", **base, status=status, latency=ctx.clock() - seen.started,
                    ttft=seen.first, usage=end.usage if end is not None else Usage(),
                    stop=end.stop if end is not None else None, request_id=seen.request_id
                    or str(getattr(failure, "request_id", "") or ""),
                    response_id=str(getattr(state, "response_id", "") or ""),
                    response_model=str(getattr(state, "response_model", "") or ""),
                    error=failure)


def count_tokens(endpoint: Endpoint, path: str, body: Any, ctx: RunContext, provider: str,
                 *, headers: Optional[Mapping[str, str]] = None) -> int:
    """The ``input_tokens`` a provider's counting endpoint answers for ``body``.

    An answer without a plausible count (a whole number from zero to 2**53) is a
    ``StreamError`` naming ``provider``: a wrong count would be trusted by whatever
    budgets on it.
    """
    try:
        answer = endpoint.transport.post_json(path, body, ctx, headers=headers)
    except RecursionError:  # the transport's JSON parser met runaway nesting
        answer = None
    tokens = answer.get("input_tokens") if isinstance(answer, dict) else None
    count = _wire_count(tokens) if type(tokens) is int else None
    if count is None:
        raise StreamError(f"{provider}'s token count had no input_tokens count (a whole "
                          "number of zero or more)")
    return count

