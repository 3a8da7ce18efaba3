"""The backends ``--backend`` can name: one table from a name to what builds it, the
variables its key is read from, and whether it is a local server.

=================  =============================================  ======================
name               what it is                                     key (environment)
=================  =============================================  ======================
``anthropic``      Claude, Anthropic's Messages API               ``ANTHROPIC_API_KEY``
``openai``         OpenAI's Responses API                         ``OPENAI_API_KEY``
``gemini``         Google's Gemini API (native)                   ``GEMINI_API_KEY``
``openrouter``     OpenRouter                                     ``OPENROUTER_API_KEY``
``vertex``         Claude on Google Cloud's Vertex AI             Google credentials
``bedrock``        Claude on Amazon Bedrock                       AWS credentials
``chat``           any Chat Completions server (``--base-url``)   ``OPENAI_API_KEY`` if set
``openai-chat``    OpenAI's Chat Completions API                  ``OPENAI_API_KEY``
``gemini-chat``    Gemini's OpenAI-compatible endpoint            ``GEMINI_API_KEY``
``ollama``,        local servers (Chat Completions)               none
``vllm``,
``llamacpp``,
``lmstudio``
``groq``,          hosted Chat Completions services               ``GROQ_API_KEY``, …
``deepseek``,                                                     (``<NAME>_API_KEY``)
``mistral``,
``together``,
``xai``
=================  =============================================  ======================

Names. ``openai`` is the Responses backend (:mod:`nacelle.backends.openai`), the API
OpenAI recommends for new work and the one its reasoning models use with tools;
``openai-chat`` is the same service's Chat Completions preset, for a proxy or gateway
that only speaks that. Likewise ``gemini`` is the native backend and ``gemini-chat``
Google's OpenAI-compatible endpoint (kept because some gateways only forward Chat
Completions). ``chat`` is a server of nobody's in particular: it needs ``--base-url``,
and sends ``OPENAI_API_KEY`` when that is set (as the OpenAI SDK pointed at a
compatible server would) and no key otherwise.

Keys are read as each backend reads them, from the same variables, never from
settings (:mod:`nacelle.settings` refuses credentials). The CLI checks for the key
before the first request only to say, in a command line's words, which variable to set
(:class:`MissingKey`); the backend still reads it itself. Bedrock's credentials are
checked with the backend's own reader (:func:`nacelle.backends.anthropic.aws.credentials`)
and Vertex AI's token is fetched once with the backend's own :class:`~nacelle.backends.
anthropic.gcp.Tokens`, which the backend then keeps using (so the metadata server or
google-auth is asked once, not twice).

``--base-url`` (the ``base_url`` setting) replaces the endpoint of any of them: the
backend's ``base_url`` argument, which outranks the SDK variables
(``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, …) as an argument does in the library.

A model is needed everywhere but ``anthropic`` (its default model) and ``llamacpp``
(the server answers with the model it loaded).

Imports the standard library, ``nacelle.errors`` and ``nacelle.settings``; a backend's
module only when that backend is built.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from ..settings import Settings, SettingsError

__all__ = ["CHOICES", "LOCAL", "Choice", "MissingKey", "make_backend", "models_provider"]


class MissingKey(SettingsError):
    """No key (or credentials) for the chosen backend; the message says what to set."""

    for_the_command_line = True  # shown without its class name (terminal.one_line)


@dataclass(frozen=True)
class Choice:
    """One ``--backend`` name: ``make(model, base_url)`` builds it; ``keys`` are the
    variables any one of which holds its key (none: it needs no key, or says so
    itself)."""

    make: Callable[[str, Optional[str]], Any]
    keys: Tuple[str, ...] = ()
    local: bool = False
    needs_model: bool = True


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def _anthropic(model: str, base_url: Optional[str]) -> Any:
    from ..backends import anthropic

    if model:
        return anthropic.Backend(model=model, base_url=base_url)
    return anthropic.Backend(base_url=base_url)


def _openai(model: str, base_url: Optional[str]) -> Any:
    from ..backends import openai

    return openai.Backend(model=model, base_url=base_url)


def _gemini(model: str, base_url: Optional[str]) -> Any:
    from ..backends import gemini

    return gemini.Backend(model=model, base_url=base_url)


def _openrouter(model: str, base_url: Optional[str]) -> Any:
    from ..backends import openrouter

    return openrouter.Backend(model=model, base_url=base_url)


def _vertex(model: str, base_url: Optional[str]) -> Any:
    from ..backends import anthropic
    from ..backends.anthropic.gcp import Tokens, project_from_environment
    from ..errors import ConfigError

    tokens = Tokens()
    try:
        tokens()
    except ConfigError:
        raise MissingKey(
            "no Google Cloud credentials for Vertex AI: run `gcloud auth "
            "application-default login` or set GOOGLE_APPLICATION_CREDENTIALS (with "
            "google-auth installed), or run on Google Cloud with a service account "
            "(or pick another --backend)") from None
    project = project_from_environment() or tokens.project
    if project is None:
        raise MissingKey("no Google Cloud project for Vertex AI: set "
                         "ANTHROPIC_VERTEX_PROJECT_ID (or GOOGLE_CLOUD_PROJECT)")
    if not (_env("CLOUD_ML_REGION") or _env("GOOGLE_CLOUD_LOCATION")):
        raise MissingKey("no region for Vertex AI: set CLOUD_ML_REGION (\"global\", "
                         "\"us-east5\", …)")
    return anthropic.vertex(model=model, project=project, token=tokens, base_url=base_url)


def _bedrock(model: str, base_url: Optional[str]) -> Any:
    from ..backends import anthropic
    from ..backends.anthropic import aws
    from ..errors import ConfigError

    if not _env("AWS_BEARER_TOKEN_BEDROCK"):
        try:
            aws.credentials()
        except ConfigError:
            raise MissingKey(
                "no AWS credentials for Bedrock: set AWS_BEARER_TOKEN_BEDROCK (a Bedrock "
                "API key), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE "
                "naming a profile with keys (or pick another --backend)") from None
    if not aws.region():
        raise MissingKey("no AWS region for Bedrock: set AWS_REGION (\"us-east-1\", …)")
    return anthropic.bedrock(model=model, base_url=base_url)


def _chat(model: str, base_url: Optional[str]) -> Any:
    from ..backends import chat

    if not base_url:
        raise SettingsError("the chat backend needs --base-url (an OpenAI-compatible "
                            "server's URL, such as http://localhost:8000/v1)")
    return chat.Backend(model=model, base_url=base_url,
                        key_env="OPENAI_API_KEY" if _env("OPENAI_API_KEY") else None)


def _preset(name: str) -> Callable[[str, Optional[str]], Any]:
    def make(model: str, base_url: Optional[str]) -> Any:
        from ..backends import chat

        preset: Callable[..., Any] = getattr(chat, name)
        if model:
            return preset(model, base_url=base_url)
        return preset(base_url=base_url)  # llamacpp's default model
    return make


CHOICES: Dict[str, Choice] = {
    "anthropic": Choice(_anthropic, ("ANTHROPIC_API_KEY",), needs_model=False),
    "openai": Choice(_openai, ("OPENAI_API_KEY",)),
    "gemini": Choice(_gemini, ("GEMINI_API_KEY",)),
    "openrouter": Choice(_openrouter, ("OPENROUTER_API_KEY",)),
    "vertex": Choice(_vertex),
    "bedrock": Choice(_bedrock),
    "chat": Choice(_chat),
    "openai-chat": Choice(_preset("openai"), ("OPENAI_API_KEY",)),
    "gemini-chat": Choice(_preset("gemini"), ("GEMINI_API_KEY",)),
    "ollama": Choice(_preset("ollama"), local=True),
    "vllm": Choice(_preset("vllm"), local=True),
    "llamacpp": Choice(_preset("llamacpp"), local=True, needs_model=False),
    "lmstudio": Choice(_preset("lmstudio"), local=True),
    "groq": Choice(_preset("groq"), ("GROQ_API_KEY",)),
    "deepseek": Choice(_preset("deepseek"), ("DEEPSEEK_API_KEY",)),
    "mistral": Choice(_preset("mistral"), ("MISTRAL_API_KEY",)),
    "together": Choice(_preset("together"), ("TOGETHER_API_KEY",)),
    "xai": Choice(_preset("xai"), ("XAI_API_KEY",)),
}

#: The local servers, whose models are small enough that the default tool set is too.
LOCAL = frozenset(name for name, choice in CHOICES.items() if choice.local)


def make_backend(settings: Settings) -> Any:
    """The backend ``settings`` name, built; a :class:`MissingKey` saying which variable
    to set when its key is missing, a SettingsError when it needs a model."""
    name = settings.backend
    choice = CHOICES[name]
    if choice.needs_model and not settings.model:
        raise SettingsError(f"the {name} backend needs a model (--model or NACELLE_MODEL)")
    if choice.keys and not any(_env(variable) for variable in choice.keys):
        raise MissingKey(f"no API key: set {' or '.join(choice.keys)} (or pick another "
                         f"--backend)")
    return choice.make(settings.model, settings.base_url or None)


#: The ``nacelle models`` provider that lists a backend's models.
_PROVIDERS = {"anthropic": "anthropic", "openrouter": "openrouter", "openai": "openai",
              "openai-chat": "openai", "ollama": "ollama"}


def models_provider(backend: str) -> str:
    """The ``nacelle models`` provider for ``backend``, or a SettingsError saying to
    pass ``--provider``: the other backends' listings are not offered there."""
    provider = _PROVIDERS.get(backend)
    if provider is None:
        raise SettingsError(
            f"nacelle models cannot list the {backend} backend's models; pass --provider "
            f"({', '.join(sorted(set(_PROVIDERS.values())))})")
    return provider
