"""Gemini's native API as a backend: ``POST {base_url}/models/{model}:streamGenerateContent?alt=sse``.

``Backend(api_key=None, *, model, base_url=None, max_retries=2, timeout=600.0,
stall_timeout=600.0, pricing=None)``; without ``base_url``, ``$GOOGLE_GEMINI_BASE_URL``
when set (the google-genai SDK's variable), else
https://generativelanguage.googleapis.com/v1beta.

Why a native backend beside ``chat.gemini`` (Gemini's OpenAI-compatible endpoint):
the native API carries thought signatures on the exact parts they belong to (Gemini 3
refuses function calls that lost theirs), reports cached and thinking tokens
(``usageMetadata``), says why an answer was withheld (``finishReason``,
``promptFeedback``), and takes structured output and tool schemas in Gemini's own
terms (https://ai.google.dev/api/generate-content).

The backend is three parts, as every nacelle backend: :func:`~.wire.to_wire` (the
request body, pure), :class:`~.stream.Accumulator` (SSE events to nacelle events,
pure) and the thin I/O here, one streaming POST per turn through ``backends/_turn.py``
(``requests`` is imported at the first request, not with this module).

Choices where the contract is silent:

- The key comes from ``api_key`` or ``$GEMINI_API_KEY`` (read at the first request)
  and travels in the ``x-goog-api-key`` header, never in the URL, where proxies and
  logs would keep it (https://ai.google.dev/api#authentication). It never appears
  in a repr, an exception or a log line.
- ``model`` is required (``"gemini-2.5-flash"``); a name with a ``/`` in it
  (``"tunedModels/x"``, ``"models/gemini-2.5-pro"``) is used as the resource name
  it is, as the SDK does.
- Errors: Google's ``{"error": {"code", "message", "status"}}`` is read by the
  shared transport (the ``status``, ``INVALID_ARGUMENT`` say, becomes the error's
  ``type``), and retried by status like every backend (429, 5xx); an invalid key is
  a 400 whose message says so.
- ``pricing`` (a :class:`nacelle.pricing.Price`) fills ``Usage.cost``; by default
  :func:`nacelle.pricing.price_for` ``("gemini", model)``.
- ``count_tokens`` asks ``models/{model}:countTokens`` with the body a turn of
  ``request.messages`` would send as its ``generateContentRequest``
  (https://ai.google.dev/api/tokens) and reads ``totalTokens``.
- ``capabilities``: thinking (budgets and efforts), images, documents (PDF and plain
  text as ``inlineData``), media inside tool results (Gemini 3 and later; a Gemini 1
  or 2 model gets them after the responses), structured output, token
  counting, the provider's own search, URL reading and code execution
  (``nacelle.native``, without options); no server-side MCP.

Outer ring: imports ``backends._turn`` (and, through it at the first request,
``requests``), ``backends._wire_cache``, ``nacelle._net.headers``, the two pure halves,
``nacelle.pricing`` and the core. Never another backend.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Callable, Dict, Iterator, Optional, Tuple, Union

from ...backend import Capabilities, Request, TurnEnd
from ...context import RunContext
from ...errors import ConfigError, StreamError
from ...events import Event, _wire_count
from ...messages import Message
from ..._net.headers import read_key
from .._turn import Endpoint, base_url_from, check_key, check_model, stream_turn
from .._wire_cache import WireCache
from .stream import Accumulator
from .wire import PROTOCOL, encode_body, media_inside, to_wire

if TYPE_CHECKING:
    from ...pricing import Price

__all__ = ["Accumulator", "Backend", "PROTOCOL", "capabilities", "to_wire"]

KEY_VARIABLE = "GEMINI_API_KEY"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"

#: What the Gemini backend can do. ``cost`` is true on an instance whose model has a
#: price (given, or in the table).
capabilities = Capabilities(
    mcp=False, thinking=True, effort=True, min_budget=0, cost=False, token_counting=True,
    images=True, structured_output=True, documents=True, tool_media=True,
    native_tools=frozenset({"web_search", "web_fetch", "code_execution"}),
    settings=frozenset({"temperature", "top_p", "top_k", "stop", "seed", "tool_choice",
                        "forced_tool_choice", "extra_body", "extra_headers"}),
)


class Backend:
    """Gemini's native ``streamGenerateContent`` API. See the module docstring."""

    name = "gemini"

    def __init__(
        self,
        api_key: Optional[str] = None,
        *,
        model: str,
        base_url: Optional[str] = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        stall_timeout: float = 600.0,
        pricing: Optional[Price] = None,
    ) -> None:
        check_model(model, "a Gemini model", "gemini-2.5-flash")
        check_key(api_key, KEY_VARIABLE)
        # The price table (and decimal, datetime) is read where a backend is made, not
        # when the module is imported (benchmarks/README.md, row 4).
        from ...pricing import Price, price_for

        if pricing is not None and not isinstance(pricing, Price):
            raise ConfigError(f"pricing must be a nacelle.pricing.Price, got "
                              f"{type(pricing).__name__}")
        self.model = model
        bare = model[len("models/"):] if model.startswith("models/") else model
        self.pricing = pricing if pricing is not None else price_for("gemini", bare)
        self._resource = model if "/" in model else f"models/{model}"
        import urllib.parse  # imported where a backend is made, not with it

        self._base_path = f"/{urllib.parse.quote(self._resource, safe='/-._~')}"
        self._path = self._base_path + ":streamGenerateContent?alt=sse"
        self._wire_cache = WireCache()  # each message's entry, encoded once a run
        self._endpoint = Endpoint(
            base_url_from(base_url, "GOOGLE_GEMINI_BASE_URL", DEFAULT_BASE_URL), {},
            max_retries=max_retries, timeout=timeout, stall_timeout=stall_timeout,
            name=self.name, key_variable=KEY_VARIABLE,
            secret_headers=functools.partial(_key_header, api_key),
        )
        self.base_url = self._endpoint.base_url
        self.capabilities = dataclasses.replace(
            capabilities, cost=self.pricing is not None, tool_media=media_inside(model))

    def __repr__(self) -> str:
        priced = f", pricing={self.pricing!r}" if self.pricing is not None else ""
        return f"gemini.Backend(model={self.model!r}, base_url={self.base_url!r}{priced})"

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        """The input tokens of ``request`` (its ``messages`` the conversation), as Gemini
        counts them: ``POST models/{model}:countTokens`` with the body a turn would send
        as its ``generateContentRequest``, answered with ``totalTokens``
        (https://ai.google.dev/api/tokens). An answer without a plausible count is a
        ``StreamError``: a wrong count would be trusted."""
        body = to_wire(request, request.messages, model=self.model)
        body.pop("generationConfig", None)  # what only a generation takes
        body["model"] = self._resource
        try:
            answer = self._endpoint.transport.post_json(
                self._base_path + ":countTokens", {"generateContentRequest": body}, ctx)
        except RecursionError:  # the transport's JSON parser met runaway nesting
            answer = None
        tokens = answer.get("totalTokens") if isinstance(answer, dict) else None
        count = _wire_count(tokens) if type(tokens) is int else None
        if count is None:
            raise StreamError("Gemini's token count had no totalTokens count (a whole "
                              "number of zero or more)")
        return count

    def turn(
        self, request: Request, messages: Tuple[Message, ...], ctx: RunContext
    ) -> Iterator[Union[Event, TurnEnd]]:
        """One model turn: its TEXT / THINKING / TOOL_INPUT / TOOL_CALL events as they
        arrive, then its TurnEnd."""
        body = encode_body(request, messages, model=self.model, cache=self._wire_cache)
        return stream_turn(self._endpoint, self._path, body, ctx, self._accumulator,
                           request=request, model=self.model)

    def _accumulator(self, scrub: Callable[[str], str]) -> Accumulator:
        price = self.pricing.priced if self.pricing is not None else None
        return Accumulator(scrub=scrub, price=price)


def _key_header(api_key: Optional[str]) -> Dict[str, str]:
    """The header carrying the key, asked for by the transport at the first request."""
    return {"x-goog-api-key": read_key(api_key, KEY_VARIABLE, "Gemini", "gemini")}
