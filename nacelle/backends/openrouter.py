"""The OpenRouter backend: Chat Completions over ``POST {base_url}/chat/completions``.

``Backend(api_key=None, *, model, base_url=None, app_name=None, app_url=None,
max_retries=2, timeout=600.0, stall_timeout=600.0, provider=None)``; without
``base_url``, ``$OPENROUTER_BASE_URL`` when set, else https://openrouter.ai/api/v1. OpenRouter fronts hundreds of models, so ``model`` has no default.

OpenRouter speaks Chat Completions, so the backend is the Chat Completions
dialect (``chat/wire.py``, ``chat/stream.py``) with OpenRouter's :data:`DIALECT` and
extras:

- :func:`to_wire`: the request body, pure — ``max_tokens`` always sent (OpenRouter
  maps it for every provider and derives Anthropic thinking budgets from it), every
  effort level passed through as ``reasoning.effort`` and a budget as
  ``reasoning.max_tokens``, ``parallel_tool_calls`` with tools, no
  ``stream_options`` (OpenRouter always streams usage and calls the option
  deprecated), prompt-cache breakpoints for ``anthropic/*`` models, the
  ``reasoning_details`` of each turn echoed unchanged (plain reasoning text as
  ``reasoning``), the ``provider`` routing preferences, and native structured output
  as OpenAI's strict ``response_format`` with ``provider.require_parameters: true``
  added, so only providers that honour every parameter — the schema included — serve
  the request instead of one that would silently ignore it (openrouter.ai/docs,
  "Structured outputs" and "Provider routing: require_parameters");
- :class:`Accumulator`: SSE chunks to events and the turn's end, pure, with
  ``reasoning`` deltas, merged ``reasoning_details`` and ``usage.cost`` (credits,
  which are US dollars) read;
- the thin I/O: one streaming POST per model turn through ``backends/_turn.py``
  (the transport under it reads bytes, never ``requests``' guessed ISO-8859-1
  text, retries before the body, and maps error statuses to ``APIError`` — a 401
  names ``OPENROUTER_API_KEY``, a 402 says the account is out of credits). The Agent
  runs the loop around :meth:`turn`; this module never imports it.

Choices where the contract is silent:

- The key comes from ``api_key`` or, when that is not given, from
  ``OPENROUTER_API_KEY`` read at the first request — not at construction — so a
  Backend can be built (and an Agent configured, pickled, shipped) before the
  environment holds the key; a missing key is a ``ConfigError`` naming the variable
  when the first request is made. The key never appears in a repr, an exception or
  a log line. An explicit ``api_key`` travels inside a pickle like any other
  configuration; a key read from the environment does not (the unpickled copy reads
  its own environment at its first request).
- ``app_url`` is sent as ``HTTP-Referer`` and ``app_name`` as ``X-OpenRouter-Title``
  (OpenRouter's app attribution); ``provider`` is OpenRouter's provider-routing
  object (``{"order": [...], "allow_fallbacks": False}``, say), sent as given.
- ``count_tokens`` raises ``Unsupported``: OpenRouter has no token-counting endpoint.
- PDFs are ``file`` parts, which OpenRouter takes for any model, parsing the file
  for a model that cannot read one (openrouter.ai/docs/features/multimodal/pdfs); a
  tool's images and PDFs follow its ``tool`` message in a user message, as on any
  Chat Completions server (``chat/wire.py``).
- Server-side MCP is not offered (``capabilities.mcp`` is false), so an Agent given
  ``mcp=`` servers fails at construction; the local MCP client
  (``nacelle.mcp.connect_stdio`` / ``connect_http``) gives tools usable here.
- A stream is read up to ``[DONE]``, the transport's ``final`` event: the transport
  then reads the rest of the body (normally only the end of the chunked encoding;
  at most a second of it) so the next turn reuses the connection instead of paying
  a new TLS handshake. A body that ends after a finish but without ``[DONE]`` is
  accepted, one that ends before either is ``StreamTruncated``. In-band errors are
  ``StreamError`` (transient for 408, 429 and 5xx codes, so ``Retry`` reruns a turn
  that has shown nothing). Their text, like that of a data line that is not JSON,
  passes through the transport's scrubber first — the one that cleans HTTP error
  bodies — so a key the provider echoed never reaches an exception.

Outer ring: imports ``backends._turn`` (and, through it at the first request,
``requests``), ``backends._wire_cache``, ``backends._sampling``, ``nacelle._net.headers``,
the Chat Completions halves, and the core: the one backend built on another backend's dialect.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any, Callable, Dict, FrozenSet, Iterator, Optional, Sequence, Tuple, Union

from .._loggers import get_logger
from ..backend import Capabilities, Request, TurnEnd
from ..context import RunContext
from ..errors import ConfigError, Unsupported
from ..events import Event, Usage
from ..messages import Message
from .._net.headers import read_key
from ._sampling import (
    CLAUDE_NOT_WHILE_THINKING, CLAUDE_SAMPLING, claude_exclusive, claude_refuses_sampling,
)
from ._turn import Endpoint, base_url_from, check_key, check_model, stream_turn
from ._wire_cache import WireCache
from .chat import stream as chat_stream
from .chat import wire as chat_wire

__all__ = ["Accumulator", "Backend", "DIALECT", "PROTOCOL", "capabilities", "to_wire",
           "usage_from"]

log = get_logger(__name__)

KEY_VARIABLE = "OPENROUTER_API_KEY"
DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"

#: The ``Reasoning.protocol`` / ``ProviderBlock.protocol`` this backend produces.
PROTOCOL = "openrouter"

#: OpenRouter's Chat Completions, as the module docstring describes.
DIALECT = chat_wire.Dialect(
    name="OpenRouter", protocol=PROTOCOL, key_env=KEY_VARIABLE, max_tokens="max_tokens",
    always_max_tokens=True, effort="reasoning.effort",
    efforts=("none", "minimal", "low", "medium", "high", "xhigh", "max"), budget=True,
    reasoning_fields=("reasoning",), reasoning_details=True, echo_reasoning="reasoning",
    echo_with_calls_only=False, include_usage=False, parallel_tool_calls=True,
    cache_prefixes=("anthropic/",), cost_in_usage=True, output_schema="openai",
    documents=True,
    # ChatRequest's top_k and prompt_cache_key beside OpenAI's fields
    # (https://openrouter.ai/docs/api-reference/parameters); the one-hour cache on the
    # models that get breakpoints (chat.chat_settings).
    settings=chat_wire.CHAT_SETTINGS | {"top_k", "cache_key"},
)

MCP_HINT = (
    "OpenRouter has no server-side MCP; connect the server locally with "
    "nacelle.mcp.connect_stdio() or nacelle.mcp.connect_http() and pass its "
    ".tools() to the Agent"
)


def to_wire(request: Request, messages: Sequence[Message], *, model: str,
            provider: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The JSON body of one ``POST /chat/completions`` to OpenRouter for ``messages``
    (``provider``: OpenRouter's routing preferences, deep-copied into the body)."""
    if request.mcp:
        raise Unsupported("openrouter", "MCP servers", MCP_HINT)
    return chat_wire.to_wire(request, messages, model=model, dialect=DIALECT,
                             extra=_extra(request, provider))


def _extra(request: Request, provider: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The body's ``provider`` field: the routing preferences, with
    ``require_parameters`` for a native structured-output request."""
    output = request.output
    if output is not None and output.mode == "native":
        provider = {**(provider or {}), "require_parameters": True}
    return {"provider": provider} if provider else None


class Accumulator(chat_stream.Accumulator):
    """The Chat Completions accumulator, speaking OpenRouter's dialect."""

    def __init__(self, *, scrub: Optional[Callable[[str], str]] = None,
                 seed: str = "") -> None:
        super().__init__(dialect=DIALECT, scrub=scrub, seed=seed)


def usage_from(usage: Dict[str, Any]) -> Usage:
    """Map an OpenRouter ``usage`` object onto :class:`Usage`, its cost included."""
    return chat_stream.usage_from(usage, DIALECT)


#: What OpenRouter can do. Effort passes through for every level; a budget maps to
#: ``reasoning.max_tokens`` with no floor of its own (OpenRouter raises Anthropic's
#: 1024 minimum itself); ``cost`` comes with every stream's usage.
capabilities = Capabilities(
    mcp=False, thinking=True, effort=True, min_budget=0, cost=True,
    token_counting=False, images=True, structured_output=True, documents=True,
    tool_media=False, settings=DIALECT.settings,
)


def settings_for(model: str) -> FrozenSet[str]:
    """The settings ``model`` takes through OpenRouter: the dialect's, with the
    one-hour cache where the model gets breakpoints (``anthropic/``) and without
    sampling on the Claude models that refuse it (``backends/_sampling.py``;
    OpenRouter drops those fields there rather than failing, so asking for them would
    be a setting silently not applied)."""
    settings = DIALECT.settings
    if model.startswith(DIALECT.cache_prefixes):
        settings = settings | {"cache_ttl"}
        if claude_refuses_sampling(model):
            settings = settings - CLAUDE_SAMPLING
    return settings


class Backend:
    """OpenRouter, streaming Chat Completions. See the module docstring."""

    name = "openrouter"

    def __init__(
        self,
        api_key: Optional[str] = None,
        *,
        model: str,
        base_url: Optional[str] = None,
        app_name: Optional[str] = None,
        app_url: Optional[str] = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        stall_timeout: float = 600.0,
        provider: Optional[Dict[str, Any]] = None,
    ) -> None:
        check_model(model, "an OpenRouter model", "anthropic/claude-sonnet-4.5")
        check_key(api_key, KEY_VARIABLE)
        for label, value in (("app_name", app_name), ("app_url", app_url)):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{label} must be a string or None, got {type(value).__name__}")
        if provider is not None and not isinstance(provider, dict):
            raise ConfigError(
                f"provider must be a dict of OpenRouter routing preferences, got "
                f"{type(provider).__name__}"
            )
        headers = {}
        if app_url:
            headers["HTTP-Referer"] = app_url
        if app_name:
            headers["X-OpenRouter-Title"] = app_name
        self._endpoint = Endpoint(
            base_url_from(base_url, "OPENROUTER_BASE_URL", DEFAULT_BASE_URL), headers, max_retries=max_retries, timeout=timeout,
            stall_timeout=stall_timeout, name=self.name, key_variable=KEY_VARIABLE,
            secret_headers=functools.partial(_key_header, api_key),
        )
        self.model = model
        self.base_url = self._endpoint.base_url
        self.app_name = app_name
        self.app_url = app_url
        self.provider = copy.deepcopy(provider)
        self._wire_cache = WireCache()  # each message's JSON, encoded once a run
        claude = model.startswith("anthropic/")
        # A Claude keeps its rules behind OpenRouter: one of temperature and top_p on
        # the models that take one, and no sampling or forced tool choice while it
        # reasons (which OpenRouter's reasoning.effort or max_tokens turns on).
        self.capabilities = dataclasses.replace(
            capabilities, settings=settings_for(model),
            exclusive_settings=claude_exclusive(model) if claude else (),
            thinking_settings=DIALECT.settings - CLAUDE_NOT_WHILE_THINKING if claude else None)

    def __repr__(self) -> str:
        return f"openrouter.Backend(model={self.model!r}, base_url={self.base_url!r})"

    # -- the Backend protocol ------------------------------------------------------

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        """Not offered: OpenRouter has no endpoint that counts a request's tokens."""
        raise Unsupported(self.name, "token counting",
                          "OpenRouter has no token-counting endpoint")

    def turn(
        self, request: Request, messages: Tuple[Message, ...], ctx: RunContext
    ) -> Iterator[Union[Event, TurnEnd]]:
        """One model turn: its TEXT / THINKING deltas as they arrive, then its TurnEnd."""
        if request.mcp:
            to_wire(request, messages, model=self.model)  # refuses it, naming OpenRouter
        body = chat_wire.encode_body(
            request, messages, model=self.model, dialect=DIALECT,
            extra=_extra(request, self.provider), cache=self._wire_cache)
        seed = str(len(messages))
        return stream_turn(self._endpoint, "/chat/completions", body, ctx,
                           lambda scrub: Accumulator(scrub=scrub, seed=seed),
                           request=request, model=self.model)


def _key_header(api_key: Optional[str]) -> Dict[str, str]:
    """The header carrying the key, asked for by the transport at the first request."""
    key = read_key(api_key, KEY_VARIABLE, "OpenRouter", "openrouter")
    return {"Authorization": f"Bearer {key}"}
