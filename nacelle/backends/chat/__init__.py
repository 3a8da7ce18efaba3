"""Any OpenAI-compatible Chat Completions server as a backend, and presets for the
common ones.

``Backend(api_key=None, *, model, base_url, key_env=None, dialect=None, max_retries=2,
timeout=600.0, stall_timeout=600.0, pricing=None)``, one streaming
``POST {base_url}/chat/completions`` per model turn. The body is ``wire.py``'s, the
stream is read by ``stream.py``'s accumulator, and the HTTP is
``backends/_turn.py``'s (``requests`` is imported at the first request, not with this
module). What differs between servers is a :class:`~.wire.Dialect`; the presets
return a Backend with the right one:

=================  ==========================================  =====================
preset             base_url (default)                          key
=================  ==========================================  =====================
``openai``         https://api.openai.com/v1                   ``OPENAI_API_KEY``
``ollama``         http://localhost:11434/v1                   none
``vllm``           http://localhost:8000/v1                    none
``llamacpp``       http://localhost:8080/v1                    none
``lmstudio``       http://localhost:1234/v1                    none
``groq``           https://api.groq.com/openai/v1              ``GROQ_API_KEY``
``deepseek``       https://api.deepseek.com                    ``DEEPSEEK_API_KEY``
``gemini``         https://generativelanguage.googleapis.com/  ``GEMINI_API_KEY``
                   v1beta/openai
``mistral``        https://api.mistral.ai/v1                   ``MISTRAL_API_KEY``
``together``       https://api.together.xyz/v1                 ``TOGETHER_API_KEY``
``xai``            https://api.x.ai/v1                         ``XAI_API_KEY``
=================  ==========================================  =====================

``chat.openai`` without ``base_url`` reads ``$OPENAI_BASE_URL`` first, as the official
SDK does; the other presets take only the argument (their SDKs, where they have one,
read no shared variable).

Choices where the contract is silent, following the official OpenAI SDK where it has
one:

- **The key is optional.** ``api_key`` is used when given; otherwise ``key_env`` (or
  the dialect's variable) is read at the first request, so a Backend can be built
  before the environment holds the key. A cloud preset whose variable is unset is
  a ``ConfigError`` naming it at the first request; a server with no key variable
  (Ollama, vLLM, llama.cpp, LM Studio) is sent no ``Authorization`` header at all.
  The key never appears in a repr, an exception or a log line, and errors name the
  server ("Ollama answered 404 ...", "check the API key ($GROQ_API_KEY ...)"),
  never a server it is not.
- **Servers that cannot stream tool calls.** Some servers refuse a streamed request
  that carries tools ("cannot use tools with stream" is the usual wording). Such a
  400 is answered by asking the same turn again without streaming, and the
  Backend remembers it for its later turns; the answer's message is read by the
  same accumulator, so its text, reasoning and calls become the same events.
- **Cost.** ``pricing`` (a :class:`nacelle.pricing.Price`) fills ``Usage.cost``; by
  default it is :func:`nacelle.pricing.price_for` of the dialect's provider and the
  model, and a model without a published price leaves ``Usage.priced`` false
  rather than reporting a free turn.
- ``count_tokens`` raises ``Unsupported``: Chat Completions has no counting endpoint.
- ``capabilities``: no server-side MCP; thinking and effort where the dialect sends
  an effort (Mistral's: ``high`` or ``none``, which its reasoning models take); images
  where it takes them; documents (PDFs as ``file`` parts) where the dialect documents
  them (OpenAI); never media inside a tool result (they follow it); ``cost`` when a
  price is known; structured
  output where the dialect has an ``output_schema`` form. The presets' forms: OpenAI,
  Groq, Mistral, Together and xAI take OpenAI's strict ``json_schema``
  (each documents ``response_format`` json_schema on its compatibility page); Gemini
  its own subset; llama.cpp, vLLM, Ollama and LM Studio the full schema, compiled into
  a grammar; DeepSeek none (it documents only ``json_object``). Per model a server
  may still refuse it (a Groq model without json_schema, say): pass
  ``output_mode="tool"`` there.

Outer ring: imports ``backends._turn``, ``backends._stream``, ``backends._wire_cache``,
``backends._sampling``,
``nacelle._net`` (``read_key``, ``scrub``), the two Chat Completions halves,
``nacelle.pricing`` and the core. Never another backend.
"""

from __future__ import annotations

import functools
import re
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Tuple, TypedDict,
    Union,
)

from ..._loggers import get_logger
from ...backend import Capabilities, Request, TurnEnd
from ...context import RunContext
from ...errors import APIError, ConfigError, Unsupported
from ...events import Event
from ...messages import Message
from ...sse import SSEEvent
from ..._net.headers import read_key
from ..._net.secrets import scrub
from .._stream import clean
from .._sampling import openai_settings
from .._turn import (
    Endpoint, base_url_from, check_key, check_model, stream_turn, with_extra_headers,
)
from .stream import Accumulator
from .._wire_cache import WireCache
from .wire import CHAT_SETTINGS, PROTOCOL, Dialect, encode_body, to_wire

if TYPE_CHECKING:
    from typing_extensions import Unpack  # checkers only: the core is stdlib + requests

    from ...pricing import Price

__all__ = [
    "Accumulator", "Backend", "Dialect", "PROTOCOL", "deepseek", "gemini", "groq",
    "llamacpp", "lmstudio", "mistral", "ollama", "openai", "to_wire", "together", "vllm",
    "xai",
]

log = get_logger(__name__)

#: How servers word their refusal to stream a request with tools.
_NO_STREAMED_TOOLS = re.compile(r"(?i)(tools?\b.*\bstream|stream\w*\b.*\btools?\b)")


class Backend:
    """An OpenAI-compatible Chat Completions server, streamed. See the module docstring."""

    name = "chat"

    def __init__(
        self,
        api_key: Optional[str] = None,
        *,
        model: str,
        base_url: str,
        key_env: Optional[str] = None,
        dialect: Optional[Dialect] = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        stall_timeout: float = 600.0,
        pricing: Optional[Price] = None,
    ) -> None:
        if dialect is None:
            dialect = Dialect()
        if not isinstance(dialect, Dialect):
            raise ConfigError(f"dialect must be a chat.Dialect, got {type(dialect).__name__}")
        if key_env is not None and (not isinstance(key_env, str) or not key_env.strip()):
            raise ConfigError(f"key_env must name an environment variable, got {key_env!r}")
        variable = key_env or dialect.key_env
        check_model(model, f"a model {dialect.name} serves", "gpt-5-mini")
        check_key(api_key, variable)
        # The price table (and decimal, datetime) is read where a backend is made, not
        # when the module is imported (benchmarks/README.md, row 4).
        from ...pricing import Price, price_for

        if pricing is not None and not isinstance(pricing, Price):
            raise ConfigError(f"pricing must be a nacelle.pricing.Price, got "
                              f"{type(pricing).__name__}")
        self.dialect = dialect
        self.model = model
        self.key_env = variable
        self.pricing = pricing if pricing is not None else (
            price_for(dialect.pricing, model) if dialect.pricing else None)
        self._endpoint = Endpoint(
            base_url, {}, max_retries=max_retries, timeout=timeout,
            stall_timeout=stall_timeout, name=dialect.name, key_variable=variable,
            secret_headers=functools.partial(_key_header, api_key, variable, dialect.name),
        )
        self.base_url = self._endpoint.base_url
        self._stream_tools = True  # false once the server refused tools in a stream
        self._wire_cache = WireCache()  # each message's JSON, encoded once a run
        self.capabilities = Capabilities(
            mcp=False, thinking=dialect.effort is not None or dialect.budget,
            effort=dialect.effort is not None, min_budget=0,
            cost=dialect.cost_in_usage or self.pricing is not None, token_counting=False,
            images=dialect.images, structured_output=bool(dialect.output_schema),
            documents=dialect.documents, tool_media=False,
            settings=chat_settings(dialect, model),
        )
        if dialect.openai_models:
            self.capabilities = openai_settings(self.capabilities, model)

    def __repr__(self) -> str:
        return (f"chat.Backend(model={self.model!r}, base_url={self.base_url!r}, "
                f"dialect={self.dialect.name!r})")

    # -- the Backend protocol ------------------------------------------------------

    def count_tokens(self, request: Request, ctx: RunContext) -> int:
        """Not offered: Chat Completions has no endpoint that counts a request's tokens."""
        raise Unsupported(self.dialect.name, "token counting",
                          "Chat Completions has no token-counting endpoint")

    def turn(
        self, request: Request, messages: Tuple[Message, ...], ctx: RunContext
    ) -> Iterator[Union[Event, TurnEnd]]:
        """One model turn: its TEXT / THINKING deltas as they arrive, then its TurnEnd."""
        seed = str(len(messages))
        if request.tools and not self._stream_tools:
            yield from self._unstreamed(request, messages, ctx, seed)
            return
        body = encode_body(request, messages, model=self.model, dialect=self.dialect,
                           cache=self._wire_cache)
        turn = stream_turn(self._endpoint, "/chat/completions", body, ctx,
                           functools.partial(self._accumulator, seed=seed),
                           request=request, model=self.model)
        try:
            first = next(turn)
        except StopIteration:  # pragma: no cover - a turn always ends with its TurnEnd
            return
        except APIError as refused:
            if not request.tools or not _refuses_streamed_tools(refused):
                raise
            log.debug("%s cannot stream tool calls; asking again without streaming",
                      self.dialect.name)
            self._stream_tools = False
            yield from self._unstreamed(request, messages, ctx, seed)
            return
        yield first
        yield from turn

    # -- internals --------------------------------------------------------------------

    def _accumulator(self, scrub: Callable[[str], str], *, seed: str) -> Accumulator:
        price = self.pricing.priced if self.pricing is not None else None
        return Accumulator(dialect=self.dialect, scrub=scrub, seed=seed, price=price)

    def _unstreamed(self, request: Request, messages: Tuple[Message, ...], ctx: RunContext,
                    seed: str) -> Iterator[Union[Event, TurnEnd]]:
        """The turn asked without streaming: the answer's message read as one chunk."""
        body = {k: v for k, v in to_wire(request, messages, model=self.model,
                                         dialect=self.dialect).items()
                if k not in ("stream", "stream_options")}
        transport = self._endpoint.transport
        extra = request.settings.extra_headers
        answer = transport.post_json("/chat/completions", body, ctx, headers=(
            with_extra_headers(self._endpoint, None, extra) if extra else None))
        accumulator = self._accumulator(
            functools.partial(scrub, headers=transport.request_headers()), seed=seed)
        for event in accumulator.feed_chunk(_as_chunk(answer)):
            yield clean(event)
        for event in accumulator.feed(SSEEvent(data="[DONE]")):
            yield clean(event)
        yield clean(accumulator.finish())


def _as_chunk(answer: Any) -> Any:
    """A non-streamed completion as the one chunk a stream would have sent: each
    choice's ``message`` becomes its ``delta``, its tool calls numbered."""
    if not isinstance(answer, dict):
        return answer  # the accumulator refuses it with a clear error
    chunk = dict(answer)
    choices = answer.get("choices")
    if isinstance(choices, list):
        converted: List[Any] = []
        for choice in choices:
            if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
                delta = dict(choice["message"])
                calls = delta.get("tool_calls")
                if isinstance(calls, list):
                    delta["tool_calls"] = [
                        {**call, "index": call.get("index", n)} if isinstance(call, dict)
                        else call for n, call in enumerate(calls)]
                choice = {**choice, "delta": delta}
            converted.append(choice)
        chunk["choices"] = converted
    return chunk


def _refuses_streamed_tools(error: APIError) -> bool:
    return error.status in (400, 422) and bool(_NO_STREAMED_TOOLS.search(error.message or ""))


def _key_header(api_key: Optional[str], variable: str, server: str) -> Dict[str, str]:
    """The header carrying the key, asked for by the transport at the first request:
    none for a server without a key."""
    if api_key is None and not variable:
        return {}
    key = read_key(api_key, variable, server, "chat")
    return {"Authorization": f"Bearer {key}"}


# -- presets ------------------------------------------------------------------------

def chat_settings(dialect: Dialect, model: str) -> FrozenSet[str]:
    """The settings a dialect's ``model`` takes: the dialect's, with the one-hour
    cache where the model gets cache breakpoints (OpenRouter's ``anthropic/``)."""
    if dialect.cache_prefixes and model.startswith(dialect.cache_prefixes):
        return dialect.settings | {"cache_ttl"}
    return dialect.settings


OPENAI = Dialect(
    name="OpenAI", key_env="OPENAI_API_KEY", max_tokens="max_completion_tokens",
    efforts=("none", "minimal", "low", "medium", "high", "xhigh"), reasoning_fields=(),
    parallel_tool_calls=True, pricing="openai", output_schema="openai", documents=True,
    settings=CHAT_SETTINGS | {"cache_key"}, openai_models=True)
OLLAMA = Dialect(name="Ollama", reasoning_fields=("reasoning", "reasoning_content"),
                 max_tokens="max_tokens", output_schema="full")
# vLLM and llama.cpp take top_k beside OpenAI's fields
# (docs.vllm.ai/en/latest/serving/openai_compatible_server.html, "Extra parameters";
# github.com/ggml-org/llama.cpp/tree/master/tools/server, POST /v1/chat/completions).
VLLM = Dialect(name="vLLM", tool_choice=True, output_schema="full",
               settings=CHAT_SETTINGS | {"top_k"})
LLAMACPP = Dialect(name="llama.cpp", output_schema="full", settings=CHAT_SETTINGS | {"top_k"})
LMSTUDIO = Dialect(name="LM Studio", output_schema="full")
GROQ = Dialect(name="Groq", key_env="GROQ_API_KEY", max_tokens="max_completion_tokens",
               reasoning_fields=("reasoning",), pricing="groq", output_schema="openai")
DEEPSEEK = Dialect(
    name="DeepSeek", key_env="DEEPSEEK_API_KEY", efforts=("low", "high", "max"),
    thinking_toggle=True, reasoning_fields=("reasoning_content",),
    echo_reasoning="reasoning_content", images=False, pricing="deepseek",
    # no seed or parallel_tool_calls in DeepSeek's request
    # (api-docs.deepseek.com/api/create-chat-completion)
    settings=CHAT_SETTINGS - {"seed", "parallel_tool_calls"})
GEMINI = Dialect(
    name="Gemini", key_env="GEMINI_API_KEY",
    efforts=("none", "minimal", "low", "medium", "high"), reasoning_fields=("reasoning",),
    pricing="gemini", output_schema="gemini")
# Mistral's models that reason take reasoning_effort "high" (a thinking chunk before the
# answer) or "none" (docs.mistral.ai/capabilities/reasoning/: mistral-small-latest and
# mistral-medium-3-5), and stream the thinking as typed content chunks (stream.py).
# Mistral's seed is named random_seed (docs.mistral.ai/api/#tag/chat): give it in
# extra_body.
MISTRAL = Dialect(name="Mistral", key_env="MISTRAL_API_KEY", efforts=("none", "high"),
                  tool_choice=True, include_usage=False, pricing="mistral",
                  output_schema="openai", settings=CHAT_SETTINGS - {"seed"})
TOGETHER = Dialect(name="Together", key_env="TOGETHER_API_KEY",
                   reasoning_fields=("reasoning", "reasoning_content"), pricing="together",
                   output_schema="openai")
XAI = Dialect(name="xAI", key_env="XAI_API_KEY", max_tokens="max_completion_tokens",
              efforts=("low", "high"), reasoning_fields=("reasoning_content",), pricing="xai",
              output_schema="openai")


class _PresetOptions(TypedDict, total=False):
    """The options a preset passes on to :class:`Backend` (each as documented there);
    a preset fixes the dialect and defaults the base URL."""

    api_key: Optional[str]
    base_url: Optional[str]
    key_env: Optional[str]
    max_retries: int
    timeout: float
    stall_timeout: float
    pricing: Optional[Price]


def _preset(dialect: Dialect, default: str, model: str, options: _PresetOptions,
            variable: str = "") -> Backend:
    given: Dict[str, Any] = dict(options)
    base_url, api_key = given.pop("base_url", None), given.pop("api_key", None)
    url = base_url_from(base_url, variable, default) if variable else base_url or default
    return Backend(api_key, model=model, base_url=url, dialect=dialect, **given)


# One plain function a preset, not one made by a factory, so a type checker sees each
# option (a misspelt one is an error) and help() shows the preset by its name.
def openai(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for OpenAI at ``base_url`` (default ``OPENAI_BASE_URL`` if set, else
    https://api.openai.com/v1); the options are :class:`Backend`'s."""
    return _preset(OPENAI, "https://api.openai.com/v1", model, options, "OPENAI_BASE_URL")


def ollama(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for Ollama at ``base_url`` (default http://localhost:11434/v1); the
    options are :class:`Backend`'s."""
    return _preset(OLLAMA, "http://localhost:11434/v1", model, options)


def vllm(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for vLLM at ``base_url`` (default http://localhost:8000/v1); the
    options are :class:`Backend`'s."""
    return _preset(VLLM, "http://localhost:8000/v1", model, options)


def lmstudio(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for LM Studio at ``base_url`` (default http://localhost:1234/v1); the
    options are :class:`Backend`'s."""
    return _preset(LMSTUDIO, "http://localhost:1234/v1", model, options)


def groq(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for Groq at ``base_url`` (default https://api.groq.com/openai/v1); the
    options are :class:`Backend`'s."""
    return _preset(GROQ, "https://api.groq.com/openai/v1", model, options)


def deepseek(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for DeepSeek at ``base_url`` (default https://api.deepseek.com); the
    options are :class:`Backend`'s."""
    return _preset(DEEPSEEK, "https://api.deepseek.com", model, options)


def gemini(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for Gemini at ``base_url`` (default https://generativelanguage.googleapis.com/v1beta/openai); the
    options are :class:`Backend`'s."""
    return _preset(GEMINI, "https://generativelanguage.googleapis.com/v1beta/openai", model, options)


def mistral(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for Mistral at ``base_url`` (default https://api.mistral.ai/v1); the
    options are :class:`Backend`'s."""
    return _preset(MISTRAL, "https://api.mistral.ai/v1", model, options)


def together(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for Together at ``base_url`` (default https://api.together.xyz/v1); the
    options are :class:`Backend`'s."""
    return _preset(TOGETHER, "https://api.together.xyz/v1", model, options)


def xai(model: str, **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for xAI at ``base_url`` (default https://api.x.ai/v1); the
    options are :class:`Backend`'s."""
    return _preset(XAI, "https://api.x.ai/v1", model, options)


def llamacpp(model: str = "local", **options: Unpack[_PresetOptions]) -> Backend:
    """A Backend for a llama.cpp server (``llama-server``) at ``base_url`` (default
    http://localhost:8080/v1). The server answers with the model it loaded whatever
    ``model`` says, so it has a default."""
    return _preset(LLAMACPP, "http://localhost:8080/v1", model, options)

