"""Test doubles for nacelle and for the agents built on it — public, so users can
test their own agents offline with the same doubles nacelle's tests use.

- ``ScriptedBackend`` / ``Turn`` / ``FakeClock`` (``nacelle.testing.scripted``): a
  backend that plays back scripted model turns through the real tool loop.
- ``FakeServer`` / ``Reply`` (``nacelle.testing.server``): a loopback HTTP server
  serving scripted, byte-exact replies, with delays, drops and stalls.
- ``Cassette`` (``nacelle.testing.cassette``): a loopback server that records real HTTP
  exchanges to a JSON file once and replays them offline, byte for byte — regression
  tests and evals of a real agent that run in CI without a key.
- ``FakeBatches`` and the result builders ``anthropic_message``, ``openai_response``,
  ``chat_completion`` (``nacelle.testing.batches``): the providers' batch APIs on a
  FakeServer (``server.batches(answer)``), for testing provider batches offline.
- Wire-format stream builders (``nacelle.testing.wire``): realistic Anthropic,
  OpenRouter, OpenAI Responses and Gemini SSE bodies.

Names load on first use, so importing this package costs nothing until a double is
touched. Never imported by the core.
"""

import importlib as _importlib
from typing import TYPE_CHECKING, Any, List

if TYPE_CHECKING:  # what a type checker sees; at run time each loads on first use
    from .batches import FakeBatches as FakeBatches
    from .batches import anthropic_message as anthropic_message
    from .batches import chat_completion as chat_completion
    from .batches import openai_response as openai_response
    from .cassette import Cassette as Cassette
    from .scripted import FakeClock as FakeClock
    from .scripted import ScriptedBackend as ScriptedBackend
    from .scripted import Turn as Turn
    from .server import FakeServer as FakeServer
    from .server import RecordedRequest as RecordedRequest
    from .server import Reply as Reply
    from .wire import anthropic_stream as anthropic_stream
    from .wire import gemini_stream as gemini_stream
    from .wire import openrouter_stream as openrouter_stream
    from .wire import rechunk as rechunk
    from .wire import responses_stream as responses_stream
    from .wire import sse_event as sse_event

_HOMES = {
    "ScriptedBackend": "scripted",
    "Turn": "scripted",
    "FakeClock": "scripted",
    "Cassette": "cassette",
    "FakeBatches": "batches",
    "anthropic_message": "batches",
    "openai_response": "batches",
    "chat_completion": "batches",
    "FakeServer": "server",
    "Reply": "server",
    "RecordedRequest": "server",
    "anthropic_stream": "wire",
    "gemini_stream": "wire",
    "openrouter_stream": "wire",
    "rechunk": "wire",
    "responses_stream": "wire",
    "sse_event": "wire",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'nacelle.testing' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_HOMES))
