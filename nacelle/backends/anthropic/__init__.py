"""The Anthropic backend: the Messages API over ``POST {base_url}/v1/messages``.

``Backend(api_key=None, *, model="claude-opus-5", base_url=None, max_retries=2,
timeout=600.0, stall_timeout=600.0, pricing=None)``; without ``base_url``,
``$ANTHROPIC_BASE_URL`` when set, else https://api.anthropic.com (as the official SDK).

The backend is three parts, as every nacelle backend:

- :func:`to_wire` (``wire.py``): the request body, pure — prompt caching,
  thinking and effort, server-side MCP, replay of signed reasoning;
- :class:`Accumulator` (``stream.py``): decoded SSE events to nacelle events
  and the turn's end, pure;
- the thin I/O here: one streaming POST per model turn through ``backends/_turn.py``
  and the transport under it (sessions per thread, retries before the body with
  Retry-After, error statuses mapped to ``APIError``; ``requests`` is imported at
  the first request, not with this module). The Agent runs the
  loop around :meth:`turn`; this module never imports it.

Choices where the contract is silent:

- The key comes from ``api_key`` or, when that is not given, from
  ``ANTHROPIC_API_KEY`` read at the first request — not at construction — so a
  Backend can be built (and an Agent configured, pickled, shipped) before the
  environment holds the key. A missing key is a ``ConfigError`` naming the variable
  when the first request is made. The key never appears in a repr, an exception or
  a log line. An explicit ``api_key`` travels inside a pickle like any other
  configuration; a key read from the environment does not (the unpickled copy reads
  its own environment).
- Server-side MCP needs the ``mcp-client-2025-11-20`` beta; the ``anthropic-beta``
  header is sent only on requests that have MCP servers.
- A stream is read up to ``message_stop``, which is the transport's ``final`` event:
  the transport then reads the rest of the body (normally only the end of the
  chunked encoding; at most a second of it) so the next turn reuses the connection
  instead of paying a new TLS handshake. ``ping`` events are keepalives: they do not
  count as progress for ``stall_timeout``, so a stream that only pings is still
  noticed as stalled.
- ``count_tokens`` sends the body a turn of ``request.messages`` would send, minus
  ``max_tokens`` and ``stream``, to ``/v1/messages/count_tokens``. An answer without a plausible
  count (a whole number from zero to 2**53) is a ``StreamError``: a wrong count
  would be trusted by whatever budgets on it.
- Event data is read with :func:`nacelle.sse.parse_json` (no NaN, no Infinity, no
  runaway nesting), and every error made from what the provider sent — an
  in-band error, a broken data line — passes through the transport's scrubber,
  the one that cleans HTTP error bodies, so an echoed key never reaches an
  exception. When a turn fails after server-side calls were announced, their
  failed results are yielded before the error, so each announced call is closed.
- ``capabilities.settings`` is per model (:func:`settings_for`): the Claude families
  that dropped sampling refuse ``temperature``, ``top_p`` and ``top_k`` at construction,
  and ``thinking_settings`` holds what a thinking model still takes.
  ``ModelSettings.extra_headers`` go on each turn's request, never over a header the
  transport sends itself (``backends/_turn.py``).
- ``capabilities.structured_output`` is per model: true but for the models
  Anthropic's structured-outputs page does not list (the Claude 3 family and the
  first Claude 4 releases: Opus 4 and 4.1, Sonnet 4), which refuse
  ``output_config.format``; there ``output_mode="auto"`` uses the final-answer tool.
- ``pricing`` fills ``Usage.cost`` per turn; by default it is the model's row in
  :data:`nacelle.pricing.PRICES` (:func:`nacelle.pricing.price_for`), so a current
  model is priced out of the box, and a model without a published price leaves
  ``Usage.priced`` false (and ``capabilities.cost`` off) rather than reporting a
  free turn. Cache writes are priced by their lifetime, as the stream's
  ``usage.cache_creation`` splits them (five-minute writes 1.25× input, one-hour
  writes 2×; ``Cache(ttl="1h")`` asks for the second). Server-tool fees (web searches are billed per request) are not
  included: the stream reports their count, not their price.

What Claude takes (``capabilities``, ``settings_for``, the output-format rule) lives in
``claude.py``, shared with the clouds that serve the same wire; ``anthropic.vertex``
and ``anthropic.bedrock`` (``clouds.py``) are re-exported here, ``clouds.py`` (with
the AWS, Google and event-stream modules it needs) imported at the first use of either
name, so the Anthropic API alone does not load them.

Outer ring: imports ``backends._turn`` (and, through it at the first request,
``requests``), ``backends._wire_cache``, ``nacelle._net.headers``, the two pure halves,
``claude`` and ``clouds`` beside it, and the core. Never another backend.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Tuple, Union

from ..._loggers import get_logger
from ...backend import Request, TurnEnd
from ...context import RunContext
from ...errors import ConfigError
from ...events import Event
from ...messages import Message
from ..._net.headers import read_key
from .._sampling import claude_exclusive
from .._turn import Endpoint, base_url_from, check_key, check_model, count_tokens, stream_turn
from .._wire_cache import WireCache
from .claude import (
    beta_header as _beta_header, capabilities, has_output_format as _has_output_format,
    is_ping as _is_ping, open_server_calls as _open_server_calls, settings_for,
)
from .stream import Accumulator, Pricing
from .wire import DEFAULT_MODEL, PROTOCOL, count_tokens_body, encode_body, to_wire

if TYPE_CHECKING:
    from .clouds import bedrock as bedrock
    from .clouds import vertex as vertex

__all__ = [
    "Accumulator", "Backend", "PROTOCOL", "Pricing", "bedrock", "capabilities",
    "count_tokens_body", "settings_for", "to_wire", "vertex",
]

log = get_logger(__name__)

KEY_VARIABLE = "ANTHROPIC_API_KEY"
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"

class Backend:
    """Anthropic's Messages API, streamed. See the module docstring."""

    name = "anthropic"

    def __init__(
        self,
        api_key: Optional[str] = None,
        *,
        model: str = DEFAULT_MODEL,
        base_url: Optional[str] = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        stall_timeout: float = 600.0,
        pricing: Optional[Pricing] = None,
    ) -> None:
        check_model(model, "an Anthropic model", DEFAULT_MODEL)
        check_key(api_key, KEY_VARIABLE)
        if pricing is not None and not isinstance(pricing, Pricing):
            raise ConfigError(
                "pricing must be anthropic.Pricing(input, output, cache_read, cache_write)"
                f" in dollars per million tokens, got {type(pricing).__name__}"
            )
        if pricing is None:
            # The price table (and decimal, datetime) is read where a backend is made,
            # not when the module is imported (benchmarks/README.md, row 4).
            from ...pricing import price_for

            pricing = price_for("anthropic", model)
        self._endpoint = Endpoint(
            base_url_from(base_url, "ANTHROPIC_BASE_URL", DEFAULT_BASE_URL),
            {"anthropic-version": API_VERSION}, max_retries=max_retries,
            timeout=timeout, stall_timeout=stall_timeout, name=self.name,
            key_variable=KEY_VARIABLE, secret_headers=functools.partial(_key_header, api_key),
        )
        self.model = model
        self.base_url = self._endpoint.base_url
        self.pricing = pricing
        self._wire_cache = WireCache()  # each message's JSON, encoded once a run
        self.capabilities = dataclasses.replace(
            capabilities, cost=pricing is not None, structured_output=_has_output_format(model),
            settings=settings_for(model), exclusive_settings=claude_exclusive(model))

    def __repr__(self) -> str:
        priced = f", pricing={self.pricing!r}" if self.pricing is not None else ""
        return f"anthropic.Backend(model={self.model!r}, base_url={self.base_url!r}{priced})"

    # -- the Backend protocol ------------------------------------------------------

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        """The input tokens of ``request`` (its ``messages`` the conversation), as
        Anthropic counts them."""
        body = count_tokens_body(request, request.messages, model=self.model)
        return count_tokens(self._endpoint, "/v1/messages/count_tokens", body, ctx, "Anthropic",
                            headers=_beta_header(request))

    def turn(
        self, request: Request, messages: Tuple[Message, ...], ctx: RunContext
    ) -> Iterator[Union[Event, TurnEnd]]:
        """One model turn: its deltas as they arrive, then its TurnEnd."""
        body = encode_body(request, messages, model=self.model, cache=self._wire_cache)
        calls = _open_server_calls(messages)
        return stream_turn(
            self._endpoint, "/v1/messages", body, ctx,
            lambda scrub: Accumulator(pricing=self.pricing, calls=calls, scrub=scrub),
            headers=_beta_header(request), keepalive=_is_ping, request=request, model=self.model)


def _key_header(api_key: Optional[str]) -> Dict[str, str]:
    """The header carrying the key, asked for by the transport at the first request."""
    return {"x-api-key": read_key(api_key, KEY_VARIABLE, "Anthropic", "anthropic")}


def __getattr__(name: str) -> Any:
    """``bedrock`` and ``vertex``, from ``clouds.py`` imported now (PEP 562,
    https://peps.python.org/pep-0562/)."""
    if name in ("bedrock", "vertex"):
        from . import clouds

        return getattr(clouds, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> "list[str]":
    return sorted(set(globals()) | {"bedrock", "vertex"})
