"""OpenAI's Responses API as a backend, used statelessly: ``POST {base_url}/responses``.

``Backend(api_key=None, *, model, base_url=None, max_retries=2, timeout=600.0,
stall_timeout=600.0, pricing=None)``; without ``base_url``, ``$OPENAI_BASE_URL`` when
set, else https://api.openai.com/v1 (as the official SDK).

Why a second OpenAI backend beside ``chat.openai``: OpenAI's reasoning models refuse
function tools together with reasoning on ``/v1/chat/completions`` ("To use function
tools, use /v1/responses or set reasoning_effort to 'none'"), and Chat Completions
cannot carry their reasoning from one turn to the next. The Responses API can, as
encrypted reasoning items, and this backend replays them, so a tool loop keeps the
model's reasoning without OpenAI storing anything.

The backend is three parts, as every nacelle backend:

- :func:`~.wire.to_wire` (``wire.py``): the request body, pure —
  ``store: false``, the conversation as input items, encrypted reasoning replayed;
- :class:`~.stream.Accumulator` (``stream.py``): decoded SSE events to
  nacelle events and the turn's end, pure;
- the thin I/O here: one streaming POST per model turn through ``backends/_turn.py``
  (``requests`` is imported at the first request, not with this module). The Agent
  runs the loop around :meth:`turn`; this module never imports it.

Choices where the contract is silent:

- The key comes from ``api_key`` or ``OPENAI_API_KEY``, read at the first request; a
  missing key is a ``ConfigError`` naming the variable then. The key never appears in
  a repr, an exception or a log line; every error text made from the server's answer
  passes through the transport's scrubber.
- ``model`` is required: OpenAI renames and retires models too often for a default
  to stay right.
- Reasoning comes back as ``Reasoning(text=summary, state=<the reasoning item as
  JSON, encrypted content included>, protocol="openai-responses")`` and goes back
  unchanged in every later request, within a run and across runs
  (``nacelle.dumps``/``loads`` keep it); another protocol's reasoning is dropped.
- ``count_tokens`` asks ``POST /responses/input_tokens`` (operation
  ``Getinputtokencounts`` in OpenAI's OpenAPI document, answering
  ``{"object": "response.input_tokens", "input_tokens": N}``) with the body
  a turn of ``request.messages`` would send, minus what only a generation takes. An answer without
  a plausible count is a ``StreamError``: a wrong count would be trusted.
- ``pricing`` (a :class:`nacelle.pricing.Price`) fills ``Usage.cost``; by default it
  is :func:`nacelle.pricing.price_for` ``("openai", model)``. The table has no OpenAI
  rows yet (no official OpenAI price page could be read, and rows are never copied
  from third parties), so out of the box a turn is unpriced (``Usage.priced`` false,
  ``capabilities.cost`` off) rather than reported free.
- ``capabilities``: thinking, effort (all seven levels), images, documents (PDF and
  plain text, as ``input_file``), media inside tool results and token counting;
  no server-side MCP (the Agent refuses MCP servers at construction; connect them
  locally with ``nacelle.mcp``); ``cost`` only with a price; structured output
  (``text.format``, see ``wire.py``).
- **OpenRouter's Responses endpoint is not supported**, behind a flag or otherwise.
  Its documentation (OpenRouterTeam/docs ``api_reference/responses/overview.mdx``
  and ``reasoning.mdx``) calls it a beta "that may have breaking changes", streams
  reasoning as ``response.reasoning.delta`` rather than OpenAI's
  ``response.reasoning_summary_text.delta``, and shows ``summary`` as a list of
  strings rather than ``summary_text`` parts — differences in exactly the replayed
  state this backend exists for. ``nacelle.backends.openrouter`` already serves
  every OpenRouter model, OpenAI's included, with their ``reasoning_details``
  (``reasoning.encrypted`` items among them) replayed.

Outer ring: imports ``backends._turn`` (and, through it at the first request,
``requests``), ``backends._sampling``, ``backends._wire_cache``, ``nacelle._net.headers``,
the two pure halves,
``nacelle.pricing`` and the core. Never another backend.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import TYPE_CHECKING, Callable, Dict, Iterator, Optional, Tuple, Union

from ...backend import Capabilities, Request, TurnEnd
from ...context import RunContext
from ...errors import ConfigError
from ...events import Event
from ...messages import Message
from ..._net.headers import read_key
from .._sampling import openai_settings
from .._turn import Endpoint, base_url_from, check_key, check_model, count_tokens, stream_turn
from .._wire_cache import WireCache
from .stream import Accumulator
from .wire import PROTOCOL, count_tokens_body, encode_body, to_wire

if TYPE_CHECKING:
    from ...pricing import Price

__all__ = ["Accumulator", "Backend", "PROTOCOL", "capabilities", "count_tokens_body",
           "to_wire"]

KEY_VARIABLE = "OPENAI_API_KEY"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: What the OpenAI backend can do. ``cost`` is true on an instance whose model has a
#: price (given, or in the table): the API reports tokens, not dollars.
capabilities = Capabilities(
    mcp=False, thinking=True, effort=True, min_budget=0, cost=False, token_counting=True,
    images=True, structured_output=True, documents=True, tool_media=True,
    native_tools=frozenset({"web_search", "web_search:allowed_domains", "code_execution"}),
    settings=frozenset({"temperature", "top_p", "tool_choice", "forced_tool_choice",
                        "parallel_tool_calls", "extra_body", "extra_headers", "cache_key"}),
)



def settings_for(model: str) -> Capabilities:
    """:data:`capabilities` as ``model`` takes them (``backends/_sampling.py``)."""
    return openai_settings(capabilities, model)


class Backend:
    """OpenAI's Responses API, streamed and stateless. See the module docstring."""

    name = "openai"

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
        check_model(model, "an OpenAI model", "gpt-5-mini")
        check_key(api_key, KEY_VARIABLE)
        # The price table (and decimal, datetime) is read where a backend is made, not
        # when the module is imported (benchmarks/README.md, row 4).
        from ...pricing import Price, price_for

        if pricing is not None and not isinstance(pricing, Price):
            raise ConfigError(f"pricing must be a nacelle.pricing.Price, got "
                              f"{type(pricing).__name__}")
        self.model = model
        self.pricing = pricing if pricing is not None else price_for("openai", model)
        self._endpoint = Endpoint(
            base_url_from(base_url, "OPENAI_BASE_URL", DEFAULT_BASE_URL), {}, max_retries=max_retries, timeout=timeout,
            stall_timeout=stall_timeout, name=self.name, key_variable=KEY_VARIABLE,
            secret_headers=functools.partial(_key_header, api_key),
        )
        self.base_url = self._endpoint.base_url
        self._wire_cache = WireCache()  # each message's items, encoded once a run
        self.capabilities = dataclasses.replace(settings_for(model),
                                                cost=self.pricing is not None,
                                                tool_search=_searches_tools(model))

    def __repr__(self) -> str:
        priced = f", pricing={self.pricing!r}" if self.pricing is not None else ""
        return f"openai.Backend(model={self.model!r}, base_url={self.base_url!r}{priced})"

    # -- the Backend protocol ------------------------------------------------------

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        """The input tokens of ``request`` (its ``messages`` the conversation), as OpenAI
        counts them (``POST /responses/input_tokens``)."""
        body = count_tokens_body(request, request.messages, model=self.model)
        return count_tokens(self._endpoint, "/responses/input_tokens", body, ctx, "OpenAI")

    def turn(
        self, request: Request, messages: Tuple[Message, ...], ctx: RunContext
    ) -> Iterator[Union[Event, TurnEnd]]:
        """One model turn: its TEXT / THINKING deltas as they arrive, then its TurnEnd."""
        body = encode_body(request, messages, model=self.model, cache=self._wire_cache)
        return stream_turn(self._endpoint, "/responses", body, ctx, self._accumulator,
                           request=request, model=self.model)

    def _accumulator(self, scrub: Callable[[str], str]) -> Accumulator:
        price = self.pricing.priced if self.pricing is not None else None
        return Accumulator(scrub=scrub, price=price)


def _searches_tools(model: str) -> bool:
    """Whether ``model`` takes the hosted ``tool_search`` tool: "only gpt-5.4 and later
    models support tool_search" (developers.openai.com/api/docs/guides/tools-tool-search).
    A name that is not a versioned gpt model is taken not to."""
    match = re.match(r"gpt-(\d+)(?:\.(\d+))?", model)
    if match is None:
        return False
    return (int(match.group(1)), int(match.group(2) or 0)) >= (5, 4)


def _key_header(api_key: Optional[str]) -> Dict[str, str]:
    """The header carrying the key, asked for by the transport at the first request."""
    return {"Authorization": f"Bearer {read_key(api_key, KEY_VARIABLE, 'OpenAI', 'openai')}"}
