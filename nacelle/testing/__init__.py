"""Test doubles for nacelle and for the agents built on it — public, so users can
test their own agents offline with the same doubles nacelle's tests use.

- ``ScriptedBackend`` / ``Turn`` / ``FakeClock`` (``nacelle.testing.scripted``): a
  backend that plays back scripted model turns through the real tool loop.
- ``FakeServer`` / ``Reply`` (``nacelle.testing.server``): a loopback HTTP server
  serving scripted, byte-exact replies, with delays, drops and stalls.
- ``Cassette`` (``nacelle.testing.cassette``): a loopback server that records real HTTP
  exchanges to a JSON file once and replays them offline, byte for byte — regression
  tests and evals of a real agent that run in CI without a key.
- Wire-format stream builders (``nacelle.testing.wire``): realistic Anthropic and
  OpenRouter SSE bodies.

Names load on first use, so importing this package costs nothing until a double is
touched. Never imported by the core.
"""

import importlib as _importlib
from typing import Any, List

_HOMES = {
    "ScriptedBackend": "scripted",
    "Turn": "scripted",
    "FakeClock": "scripted",
    "Cassette": "cassette",
    "FakeServer": "server",
    "Reply": "server",
    "RecordedRequest": "server",
    "anthropic_stream": "wire",
    "openrouter_stream": "wire",
    "rechunk": "wire",
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
