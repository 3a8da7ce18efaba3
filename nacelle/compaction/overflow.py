"""Telling when a provider has refused a request as too long for the model's context.

:func:`is_context_overflow` recognises a provider's "the context is full" refusal: an
:class:`~nacelle.errors.APIError` with status 400, 413, 422 or 500 whose type or
message says so, in the wordings recorded from

- Anthropic: ``invalid_request_error`` "prompt is too long: 200251 tokens > 200000
  maximum" (https://github.com/boldsoftware/exe.dev/issues/62), and 413
  ``request_too_large`` for a body over 32 MB;
- OpenAI Chat Completions (and vLLM, which copies it): code ``context_length_exceeded``,
  "This model's maximum context length is 8192 tokens. However, your messages resulted
  in 8227 tokens" (https://github.com/crewAIInc/crewAI-examples/issues/121,
  https://github.com/vllm-project/vllm/issues/20409);
- OpenRouter: "This endpoint's maximum context length is 65536 tokens. However, you
  requested about 92208 tokens" (https://github.com/musistudio/claude-code-router/issues/252);
- llama.cpp's server: ``exceed_context_size_error``, "the request exceeds the available
  context size" (https://github.com/ggml-org/llama.cpp/pull/15780, sent as 500 then and
  400 since) and the older 500 "Context size has been exceeded."
  (https://github.com/ggml-org/llama.cpp/issues/19774);
- Gemini: "The input token count (1200293) exceeds the maximum number of tokens allowed"
  (https://github.com/google-gemini/gemini-cli/issues/6678).

Ollama's OpenAI-compatible endpoint truncates an over-long prompt rather than refusing
it (https://github.com/ollama/ollama/issues/2208), so there is nothing to recognise; a
turn that ends with ``Stop.CONTEXT`` is the loop's other signal. An error's
``__cause__`` chain is followed, so a wrapped refusal is still recognised.

Core: imports the standard library and ``nacelle.errors`` only.
"""

from __future__ import annotations

from typing import Optional

from ..errors import APIError

__all__ = ["is_context_overflow"]

_OVERFLOW_STATUSES = frozenset({400, 413, 422, 500})
_OVERFLOW_WORDS = (
    "prompt is too long",                   # Anthropic
    "request_too_large",                    # Anthropic 413
    "context_length_exceeded",              # OpenAI's code, where a proxy passes it on
    "maximum context length",               # OpenAI, vLLM, OpenRouter
    "exceed_context_size_error",            # llama.cpp
    "exceeds the available context size",   # llama.cpp
    "context size has been exceeded",       # llama.cpp, older
    "exceeds the context window",           # OpenAI Responses
    "exceeds the maximum number of tokens",  # Gemini
)


def is_context_overflow(exc: BaseException) -> bool:
    """True when ``exc`` (or an error in its ``__cause__`` chain) is a provider's
    refusal of a request as too long for the model's context."""
    seen = 0
    current: Optional[BaseException] = exc
    while current is not None and seen < 8:
        if isinstance(current, APIError) and current.status in _OVERFLOW_STATUSES:
            said = f"{current.type} {current.message}".lower()
            if current.status == 413 or any(word in said for word in _OVERFLOW_WORDS):
                return True
        current = current.__cause__
        seen += 1
    return False
