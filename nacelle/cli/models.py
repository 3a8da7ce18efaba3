"""``nacelle models``: the models a provider lists, from its own endpoint, cached briefly.

Providers and their endpoints (each documented by the provider):

- ``anthropic``: ``GET {ANTHROPIC_BASE_URL or https://api.anthropic.com}/v1/models``
  with the key (``x-api-key``), following ``has_more`` / ``last_id`` pages;
- ``openrouter``: ``GET {OPENROUTER_BASE_URL or https://openrouter.ai/api/v1}/models``,
  no key needed, each with its per-token price, shown per million tokens;
- ``openai``: ``GET {OPENAI_BASE_URL or https://api.openai.com/v1}/models`` with
  ``OPENAI_API_KEY`` as a bearer token;
- ``ollama``: ``GET {OLLAMA_HOST or http://localhost:11434}/api/tags``, the local
  models.

The default provider is the ``backend`` setting's (``openai-chat`` is listed as
``openai``); a backend without a listing here is a one-line error asking for
``--provider``. Where the price table
(:func:`nacelle.pricing.price_for`) knows a model, its price is shown; elsewhere
nothing is claimed. One model a line: the id, a tab, what is known about it, so
``nacelle models | cut -f1`` is the ids.

The cache. A listing is kept for ten minutes in ``$XDG_CACHE_HOME/nacelle`` (else
``~/.cache/nacelle``), one small JSON file per provider and base URL, written
atomically; ``--refresh`` skips it. Brief on purpose: a model list changes rarely,
but a new model someone is waiting for should show the same day, and a cache that
outlived a base URL change would list another server's models (hence the URL in the
key). Keys are never written to the cache or shown in errors. The names and
descriptions a provider lists are its text, shown through
:func:`nacelle.terminal_text.visible`.

HTTP is :mod:`urllib.request`, since this module sits beside the core and a listing
needs none of the backends' streaming; imports the standard library and the core
(with ``_files`` for the cache), ``settings`` and the sibling ``terminal`` when a
listing runs, and writes only to the streams it is given.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import bounded_json
from .._files import private_directory, write_atomic
from ..errors import NacelleError
from ..sse import parse_json
from ..terminal_text import visible

__all__ = ["PROVIDERS", "TTL", "ListingError", "fetch_models", "models_command"]

TTL = 600.0  # seconds a listing is reused
PROVIDERS = ("anthropic", "openrouter", "openai", "ollama")

Model = Tuple[str, str]  # (id, what is known about it)


def _base(provider: str) -> str:
    variable, default = {
        "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
        "openrouter": ("OPENROUTER_BASE_URL", "https://openrouter.ai/api/v1"),
        "openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        "ollama": ("OLLAMA_HOST", "http://localhost:11434"),
    }[provider]
    url = os.environ.get(variable, "").strip() or default
    if provider == "ollama" and "://" not in url:
        url = "http://" + url  # OLLAMA_HOST is often host:port
    return url.rstrip("/")


class ListingError(NacelleError):
    """A listing that could not be had; the message is one line, without a key."""


def _get(url: str, headers: Dict[str, str], timeout: float) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the user's URL
            return parse_json(response.read(16 * 2**20))
    except urllib.error.HTTPError as err:
        raise ListingError(f"{url} answered {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise ListingError(f"cannot reach {url}: {reason}") from None
    except ValueError:
        raise ListingError(f"{url} did not answer JSON") from None


def _price(provider: str, model: str) -> str:
    from ..pricing import price_for

    price = price_for(provider, model)
    return "" if price is None else f"${price.input:g}/${price.output:g} per Mtok"


def _per_million(value: Any) -> Optional[str]:
    try:
        number = float(value) * 1_000_000
    except (TypeError, ValueError):
        return None
    return f"{number:.4g}" if number >= 0 else None


def _listing(provider: str, base: str, timeout: float) -> List[Model]:
    models: List[Model] = []
    if provider == "anthropic":
        key = os.environ.get("ANTHROPIC_API_KEY", "")
        if not key:
            raise ListingError("ANTHROPIC_API_KEY is not set")
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        after: Optional[str] = None
        for _ in range(20):  # pages of 1,000; a bound, not an expectation
            query = {"limit": "1000", **({"after_id": after} if after else {})}
            page = _get(f"{base}/v1/models?{urllib.parse.urlencode(query)}", headers, timeout)
            for item in page.get("data") or []:
                about = " - ".join(x for x in (item.get("display_name") or "",
                                               _price("anthropic", item.get("id", ""))) if x)
                models.append((str(item.get("id", "")), about))
            after = page.get("last_id")
            if not page.get("has_more") or not after:
                break
    elif provider == "openrouter":
        for item in _get(f"{base}/models", {}, timeout).get("data") or []:
            pricing = item.get("pricing") or {}
            prompt, completion = (_per_million(pricing.get("prompt")),
                                  _per_million(pricing.get("completion")))
            parts = [str(item.get("name") or "")]
            if item.get("context_length"):
                parts.append(f"{int(item['context_length']):,} context")
            if prompt is not None and completion is not None:
                parts.append(f"${prompt}/${completion} per Mtok")
            models.append((str(item.get("id", "")), " - ".join(p for p in parts if p)))
    elif provider == "openai":
        key = os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        for item in _get(f"{base}/models", headers, timeout).get("data") or []:
            name = str(item.get("id", ""))
            models.append((name, " - ".join(x for x in (str(item.get("owned_by") or ""),
                                                        _price("openai", name)) if x)))
    else:
        for item in _get(f"{base}/api/tags", {}, timeout).get("models") or []:
            size = item.get("size")
            about = f"{size / 1e9:.1f} GB" if isinstance(size, (int, float)) else ""
            models.append((str(item.get("name") or item.get("model") or ""), about))
    return [(name, about) for name, about in models if name]


def _cache_path(provider: str, base: str) -> str:
    cache = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(cache):
        cache = os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha256(f"{provider} {base}".encode()).hexdigest()[:16]
    return os.path.join(cache, "nacelle", f"models-{provider}-{digest}.json")


def _read_cache(path: str, base: str, now: float) -> Optional[List[Model]]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = bounded_json.loads(handle.read(), what="the cache")
        if data["url"] != base or not 0 <= now - float(data["fetched"]) < TTL:
            return None
        return [(str(name), str(about)) for name, about in data["models"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, stale or damaged: fetch again


def _write_cache(path: str, base: str, now: float, models: List[Model]) -> None:
    data = json.dumps({"url": base, "fetched": now, "models": models}).encode("utf-8")
    try:
        private_directory(os.path.dirname(path))
        write_atomic(path, data)
    except OSError:
        pass  # no cache is slower, not wrong


def fetch_models(provider: str, *, refresh: bool = False, timeout: float = 30.0,
                 clock: Callable[[], float] = time.time) -> Tuple[List[Model], bool]:
    """The provider's models and whether they came from the cache."""
    base = _base(provider)
    path = _cache_path(provider, base)
    now = clock()
    if not refresh:
        cached = _read_cache(path, base, now)
        if cached is not None:
            return cached, True
    models = _listing(provider, base, timeout)
    _write_cache(path, base, now, models)
    return models, False


def models_command(argv: List[str], default_provider: Callable[[], str],
                   out: IO[str], err: IO[str]) -> int:
    """``nacelle models [--provider P] [--refresh]``; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="nacelle models",
        description="List the models a provider offers, from its endpoint (cached for "
                    f"{TTL / 60:.0f} minutes in $XDG_CACHE_HOME/nacelle).")
    parser.add_argument("--provider", choices=PROVIDERS,
                        help="whose models (default: the backend setting)")
    parser.add_argument("--refresh", action="store_true", help="ask again, past the cache")
    args = parser.parse_args(argv)
    try:
        provider = args.provider or default_provider()
        models, cached = fetch_models(provider, refresh=args.refresh)
    except ListingError as exc:
        err.write(f"nacelle: error: {visible(str(exc))}\n")
        return 1
    for name, about in models:
        # The names and descriptions are the provider's text, shown to a person.
        out.write(visible(f"{name}\t{about}" if about else name) + "\n")
    if not models:
        err.write(f"{provider} lists no models\n")
    elif cached:
        err.write(f"({len(models)} models from the cache; --refresh asks again)\n")
    return 0


def command(argv: Sequence[str]) -> int:
    """``nacelle models``, for the backend the settings name unless told."""
    import sys

    from ..settings import resolve
    from .terminal import fail, one_line

    from .backends import models_provider

    try:
        backend = resolve().backend
    except NacelleError as err:
        return fail(one_line(err))

    def provider() -> str:
        try:
            return models_provider(backend)
        except NacelleError as err:
            raise ListingError(str(err)) from None
    return models_command(list(argv), provider, sys.stdout, sys.stderr)
