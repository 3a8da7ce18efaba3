"""What a model's tokens cost: :class:`Price`, a dated table of published prices
(:data:`PRICES`, :data:`AS_OF`) and :func:`price_for`.

A backend prices each turn in one call, ``usage = price.priced(usage,
cache_write_1h_tokens=n)``, which fills ``Usage.cost``, sets ``Usage.priced`` and
records what the same tokens would have cost with no cache
(``Usage.cost_without_cache``). A ``pricing=`` argument a user passes overrides the
table.

Integer accounting. Prices are US dollars per million tokens, as every provider
publishes them; inside, each is held as a whole number of pico-dollars (10**-12
USD) per million tokens, read from the price's shortest decimal (``0.3`` is 0.3,
not the binary fraction nearest it). A turn's cost is then an exact integer sum,
rounded once to the pico-dollar, and ``Usage`` adds those integers, so a long run's
total does not drift the way a float sum does. Floats appear only at the surface:
the fields of :class:`Price` and ``Usage.cost``.

Cache rules. A cache read defaults to 0.1× the input price, a five-minute cache
write to 1.25× and a one-hour write to 2× (Anthropic's multipliers). Rows for a
provider that charges no write surcharge give the write prices as the input price.
A ``long_context`` tier, ``(threshold, Price)``, bills a whole request at the other
price when its prompt — input, cache reads and cache writes, as Anthropic counts it
— is more than ``threshold`` tokens. A tier is decided per request, so price each
turn, never a run's total.

The table (as of 2026-12-01; pages are undated, so this is the day they were read;
each row also carries its own ``checked`` date where the day it was read is known):

- Anthropic: https://platform.claude.com/docs/en/about-claude/pricing, the model
  pages under https://platform.claude.com/docs/zh-CN/models/ (Opus 5.5, Sonnet 5.5,
  Sonnet 5) and, for the Sonnet 4 and 4.5 long-context tier,
  https://docs.anthropic.com/en/docs/about-claude/pricing. Each row names its page.
- OpenAI, Gemini, Groq, DeepSeek, Mistral, Together and xAI: their own pages
  (https://developers.openai.com/api/docs/pricing and the model pages under it,
  https://ai.google.dev/gemini-api/docs/pricing, https://groq.com/pricing/,
  https://api-docs.deepseek.com/quick_start/pricing, https://mistral.ai/pricing,
  https://www.together.ai/pricing, https://docs.x.ai/docs/models) could not be read
  here, so these rows were read from an aggregator that cites them: pydantic's
  genai-prices (github.com/pydantic/genai-prices, ``prices/providers/*.yml`` at commit
  47df840a, 2026-08-21). Each row says so: ``Price.source`` is the provider's page,
  ``Price.via`` the aggregator's file, ``Price.checked`` the day the aggregator last
  checked that price against the page. These providers cache on their own and bill
  a cache write as input (OpenAI's GPT-5.6 models excepted: 1.25×). Left out on
  purpose: DeepSeek's ``deepseek-chat`` and ``deepseek-reasoner``, billed by time of
  day, which one :class:`Price` cannot say; Gemini 3.6 and 3.7 Flash, whose
  introductory rates end on 2027-01-01; audio input, dearer on Gemini and not told
  apart in the usage a backend reads.

:data:`BATCH` holds the Batch API discount of each provider that publishes one, as
data (a batch price is ``price.scaled(BATCH[provider])``, :func:`batch_price`).

Dated snapshots (``claude-sonnet-4-5-20250929``, ``gpt-5-2025-08-07``) are priced as
their base model.

``Price`` itself lives in ``_price`` (this module's name for it is the public one), so
a backend can name it without building the table.

Core module: imports the standard library, ``_price`` and ``events``.
"""

from __future__ import annotations

import datetime
import re
from decimal import ROUND_HALF_EVEN, Decimal
from types import MappingProxyType
from typing import Dict, Mapping, Optional, Tuple

from ._price import Price
from .events import Usage, _with_cost

__all__ = ["AS_OF", "BATCH", "PRICES", "PROVIDERS", "Price", "batch_price", "batch_priced",
           "price_for"]

# -- the table ------------------------------------------------------------------------

#: The provider names :func:`price_for` knows, in the order DESIGN.md lists them.
PROVIDERS = ("anthropic", "openai", "groq", "deepseek", "gemini", "mistral", "together",
             "xai")

#: The day the table's pages were read (they carry no date of their own).
AS_OF = datetime.date(2026, 12, 1)

_CLAUDE = "https://platform.claude.com/docs/en/about-claude/pricing"
_CLAUDE_ZH = "https://platform.claude.com/docs/zh-CN/about-claude/pricing"
_CLAUDE_MODELS = "https://platform.claude.com/docs/zh-CN/models/"
_CLAUDE_LONG = "https://docs.anthropic.com/en/docs/about-claude/pricing"


def _claude(input: float, output: float, read: float, write: float, write_1h: float,
            source: str, long_context: Optional[Tuple[int, Price]] = None) -> Price:
    # Every price as the page prints it, not as the multipliers would make it: the
    # pages are the authority, and two (Fable 5.1, Opus 5.5) depart from 0.1× reads.
    return Price(input, output, read, write, cache_write_1h=write_1h,
                 long_context=long_context, source=source, checked=AS_OF)


# Sonnet 4 and 4.5 bill a whole request above 200k prompt tokens at $6 in and $22.50
# out; the cache prices of that tier follow the same multipliers of its input.
_SONNET_4_LONG = (200_000, Price(6.0, 22.5, source=_CLAUDE_LONG))

_ANTHROPIC: Dict[str, Price] = {
    "claude-fable-5-1": _claude(10, 50, 0.25, 12.5, 20, _CLAUDE),
    "claude-mythos-5-1": _claude(10, 50, 0.25, 12.5, 20, _CLAUDE),
    "claude-fable-5": _claude(10, 50, 1, 12.5, 20, _CLAUDE),
    "claude-mythos-5": _claude(10, 50, 1, 12.5, 20, _CLAUDE),
    "claude-opus-5-5": _claude(4, 20, 0.2, 5, 8, _CLAUDE_MODELS + "opus-5-5/overview"),
    "claude-opus-5": _claude(5, 25, 0.5, 6.25, 10, _CLAUDE),
    "claude-opus-4-8": _claude(5, 25, 0.5, 6.25, 10, _CLAUDE),
    "claude-opus-4-7": _claude(5, 25, 0.5, 6.25, 10, _CLAUDE),
    "claude-opus-4-6": _claude(5, 25, 0.5, 6.25, 10, _CLAUDE),
    "claude-opus-4-5": _claude(5, 25, 0.5, 6.25, 10, _CLAUDE),
    "claude-opus-4-1": _claude(15, 75, 1.5, 18.75, 30, _CLAUDE),
    "claude-sonnet-5-5": _claude(2, 10, 0.2, 2.5, 4, _CLAUDE_MODELS + "sonnet-5-5/overview"),
    "claude-sonnet-5": _claude(2, 10, 0.2, 2.5, 4, _CLAUDE_MODELS + "sonnet-5/overview"),
    "claude-sonnet-4-6": _claude(3, 15, 0.3, 3.75, 6, _CLAUDE_ZH),
    "claude-sonnet-4-5": _claude(3, 15, 0.3, 3.75, 6, _CLAUDE_ZH, _SONNET_4_LONG),
    "claude-sonnet-4": _claude(3, 15, 0.3, 3.75, 6, _CLAUDE_ZH, _SONNET_4_LONG),
    "claude-haiku-4-5": _claude(1, 5, 0.1, 1.25, 2, _CLAUDE_ZH),
}

# -- rows read through the aggregator ---------------------------------------------------------

#: The price list rows are read from where a provider's own page could not be read
#: here (a public, dated, per-provider table whose rows cite the providers' pages).
_VIA = ("github.com/pydantic/genai-prices, prices/providers/{}.yml at commit "
        "47df840a5ab10bbcffb8e5ac01b9899032245d1b (2026-08-21)")


def _row(provider: str, source: str, checked: str, input: float, output: float,
         read: Optional[float] = None, write: Optional[float] = None,
         long_context: Optional[Tuple[int, Price]] = None) -> Price:
    """A row read through the aggregator: no cache write surcharge unless ``write`` is
    given (these providers cache on their own and bill writes as input), the same
    price for a one-hour write, ``read`` defaulting to 0.1× input."""
    write = input if write is None else write
    return Price(input, output, read, write, cache_write_1h=write, long_context=long_context,
                 source=source, checked=datetime.date.fromisoformat(checked),
                 via=_VIA.format(provider))


_OPENAI_PAGE = "https://developers.openai.com/api/docs/pricing"
_GEMINI_PAGE = "https://ai.google.dev/gemini-api/docs/pricing"
_GROQ_PAGE = "https://groq.com/pricing/"
_DEEPSEEK_PAGE = "https://api-docs.deepseek.com/quick_start/pricing"
_MISTRAL_PAGE = "https://mistral.ai/pricing#api-pricing"
_TOGETHER_PAGE = "https://www.together.ai/pricing"
_XAI_PAGE = "https://docs.x.ai/docs/models"


def _openai(checked: str, input: float, output: float, read: float,
            write: Optional[float] = None, long: Optional[Tuple[float, float, float]] = None,
            page: str = _OPENAI_PAGE) -> Price:
    # GPT-5.4 and later bill a whole request above 272k input tokens at the long rates.
    tier = None
    if long is not None:
        tier = (272_000, _row("openai", page, checked, long[0], long[1], long[2],
                              None if write is None else long[0] * 1.25))
    return _row("openai", page, checked, input, output, read, write, tier)


_OPENAI: Dict[str, Price] = {
    "gpt-5.6-sol": _openai("2026-08-02", 5, 30, 0.5, 6.25, (10, 45, 1),
                           "https://developers.openai.com/api/docs/models/gpt-5.6-sol"),
    # Terra and Luna at the prices of 2026-07-30 (the changelog's cut of 20% and 80%).
    "gpt-5.6-terra": _openai("2026-08-02", 2, 12, 0.2, 2.5, (4, 18, 0.4),
                             "https://developers.openai.com/api/docs/models/gpt-5.6-terra"),
    "gpt-5.6-luna": _openai("2026-08-02", 0.2, 1.2, 0.02, 0.25, (0.4, 1.8, 0.04),
                            "https://developers.openai.com/api/docs/models/gpt-5.6-luna"),
    "gpt-5.5": _openai("2026-04-24", 5, 30, 0.5),
    "gpt-5.4": _openai("2026-03-06", 2.5, 15, 0.25, long=(5, 22.5, 0.5)),
    "gpt-5.4-mini": _openai("2026-03-18", 0.75, 4.5, 0.075),
    "gpt-5.4-nano": _openai("2026-03-18", 0.2, 1.25, 0.02),
    "gpt-5.3": _openai("2026-05-07", 1.75, 14, 0.175),
    "gpt-5.2": _openai("2025-12-11", 1.75, 14, 0.175),
    "gpt-5.1": _openai("2025-11-13", 1.25, 10, 0.125),
    "gpt-5": _openai("2025-11-13", 1.25, 10, 0.125),
    "gpt-5-mini": _openai("2025-11-13", 0.25, 2, 0.025),
    "gpt-5-nano": _openai("2025-11-13", 0.05, 0.4, 0.005),
    "gpt-4.1": _openai("2025-07-04", 2, 8, 0.5),
    "gpt-4.1-mini": _openai("2025-07-04", 0.4, 1.6, 0.1),
    "gpt-4.1-nano": _openai("2025-07-04", 0.1, 0.4, 0.025),
    "gpt-4o": _openai("2025-07-04", 2.5, 10, 1.25),
    "gpt-4o-mini": _openai("2025-07-04", 0.15, 0.6, 0.075),
    "o4-mini": _openai("2025-07-04", 1.1, 4.4, 0.275),
}


def _gemini(checked: str, input: float, output: float, read: float,
            long: Optional[Tuple[float, float, float]] = None) -> Price:
    # The Pro models bill a whole request above 200k prompt tokens at the long rates.
    tier = None if long is None else (200_000, _row("gemini", _GEMINI_PAGE, checked, *long))
    return _row("gemini", _GEMINI_PAGE, checked, input, output, read, None, tier)


# Text, image and video input (audio input is dearer and not told apart by usage).
_GEMINI: Dict[str, Price] = {
    "gemini-3.5-flash": _gemini("2026-05-19", 1.5, 9, 0.15),
    "gemini-3.5-flash-lite": _gemini("2026-07-22", 0.3, 2.5, 0.03),
    "gemini-3.1-pro-preview": _gemini("2026-02-23", 2, 12, 0.2, (4, 18, 0.4)),
    "gemini-3.1-flash-lite": _gemini("2026-05-12", 0.25, 1.5, 0.025),
    "gemini-3-pro-preview": _gemini("2025-11-18", 2, 12, 0.2, (4, 18, 0.4)),
    "gemini-3-flash-preview": _gemini("2025-12-19", 0.5, 3, 0.05),
    "gemini-2.5-pro": _gemini("2025-10-31", 1.25, 10, 0.125, (2.5, 15, 0.25)),
    "gemini-2.5-flash": _gemini("2025-10-31", 0.3, 2.5, 0.03),
    "gemini-2.5-flash-lite": _gemini("2025-10-31", 0.1, 0.4, 0.01),
    "gemini-2.0-flash": _gemini("2025-07-04", 0.1, 0.4, 0.025),
    "gemini-2.0-flash-lite": _gemini("2025-07-04", 0.075, 0.3, 0.0075),
}

_GROQ: Dict[str, Price] = {
    "openai/gpt-oss-120b": _row("groq", _GROQ_PAGE, "2025-08-06", 0.15, 0.6, 0.075),
    "openai/gpt-oss-20b": _row("groq", _GROQ_PAGE, "2025-08-06", 0.075, 0.3, 0.0375),
    "moonshotai/kimi-k2-instruct": _row("groq", _GROQ_PAGE, "2025-08-12", 1, 3, 0.5),
    "qwen/qwen3-32b": _row("groq", _GROQ_PAGE, "2025-08-12", 0.29, 0.59, 0.29),
    "llama-3.3-70b-versatile": _row("groq", _GROQ_PAGE, "2025-08-12", 0.59, 0.79, 0.59),
    "llama-3.1-8b-instant": _row("groq", _GROQ_PAGE, "2025-08-12", 0.05, 0.08, 0.05),
    "meta-llama/llama-4-maverick-17b-128e-instruct": _row(
        "groq", _GROQ_PAGE, "2025-08-12", 0.2, 0.6, 0.2),
    "meta-llama/llama-4-scout-17b-16e-instruct": _row(
        "groq", _GROQ_PAGE, "2025-08-12", 0.11, 0.34, 0.11),
}

# deepseek-chat and deepseek-reasoner bill by time of day, which one Price cannot say.
_DEEPSEEK: Dict[str, Price] = {
    "deepseek-v4-pro": _row("deepseek", _DEEPSEEK_PAGE, "2026-06-02", 0.435, 0.87, 0.003625),
    "deepseek-v4-flash": _row("deepseek", _DEEPSEEK_PAGE, "2026-05-12", 0.14, 0.28, 0.0028),
}

_MISTRAL: Dict[str, Price] = {
    "mistral-large-2512": _row("mistral", _MISTRAL_PAGE, "2026-06-09", 0.5, 1.5, 0.05),
    "mistral-small-2603": _row("mistral", _MISTRAL_PAGE, "2026-06-09", 0.15, 0.6, 0.015),
    "mistral-medium-3": _row("mistral", _MISTRAL_PAGE, "2025-08-12", 0.4, 2, 0.4),
    "magistral-medium": _row("mistral", _MISTRAL_PAGE, "2025-08-12", 2, 5, 2),
    "magistral-small": _row("mistral", _MISTRAL_PAGE, "2025-08-12", 0.5, 1.5, 0.5),
    "devstral-2512": _row("mistral", _MISTRAL_PAGE, "2026-06-09", 0.4, 2, 0.04),
    "codestral-2508": _row("mistral", _MISTRAL_PAGE, "2026-06-09", 0.3, 0.9, 0.03),
    "ministral-14b-2512": _row("mistral", _MISTRAL_PAGE, "2026-06-09", 0.2, 0.2, 0.02),
    "ministral-3b-2512": _row("mistral", _MISTRAL_PAGE, "2026-06-09", 0.1, 0.1, 0.01),
}

_TOGETHER: Dict[str, Price] = {
    "meta-llama/Llama-3.3-70B-Instruct-Turbo": _row(
        "together", _TOGETHER_PAGE, "2025-07-03", 0.88, 0.88, 0.88),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8": _row(
        "together", _TOGETHER_PAGE, "2025-07-03", 0.27, 0.85, 0.27),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": _row(
        "together", _TOGETHER_PAGE, "2025-07-03", 0.18, 0.59, 0.18),
    "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo": _row(
        "together", _TOGETHER_PAGE, "2025-07-03", 0.18, 0.18, 0.18),
}

_XAI: Dict[str, Price] = {
    "grok-4.5": _row("x_ai", _XAI_PAGE, "2026-07-08", 2, 6, 0.5),
    "grok-4.3": _row("x_ai", _XAI_PAGE, "2026-05-12", 1.25, 2.5, 0.2),
    "grok-4.20": _row("x_ai", _XAI_PAGE, "2026-06-09", 1.25, 2.5, 0.2),
    "grok-4": _row("x_ai", _XAI_PAGE, "2025-07-12", 3, 15, 0.75),
    "grok-4-1-fast-reasoning": _row("x_ai", _XAI_PAGE, "2026-01-19", 0.2, 0.5, 0.05),
    "grok-4-1-fast-non-reasoning": _row("x_ai", _XAI_PAGE, "2026-01-19", 0.2, 0.5, 0.05),
    "grok-code-fast-1": _row("x_ai", _XAI_PAGE, "2026-01-19", 0.2, 1.5, 0.02),
    "grok-3-mini": _row("x_ai", _XAI_PAGE, "2025-07-12", 0.3, 0.5, 0.075),
}

_ROWS: Dict[str, Dict[str, Price]] = {
    "anthropic": _ANTHROPIC, "openai": _OPENAI, "groq": _GROQ, "deepseek": _DEEPSEEK,
    "gemini": _GEMINI, "mistral": _MISTRAL, "together": _TOGETHER, "xai": _XAI,
}

#: provider → model id → :class:`Price`. Read-only.
PRICES: Mapping[str, Mapping[str, Price]] = MappingProxyType({
    name: MappingProxyType(_ROWS[name]) for name in PROVIDERS
})

#: provider → what a Batch API request costs, as a share of the same request's
#: standard price (every rate, cache reads and writes included): half at Anthropic
#: (https://platform.claude.com/docs/en/build-with-claude/batch-processing, "50% of
#: standard API prices"), OpenAI (https://developers.openai.com/api/docs/guides/batch,
#: "a 50% discount") and Gemini (https://ai.google.dev/gemini-api/docs/batch-mode, "50%
#: of the standard cost"). A provider missing here has no batch price in the table.
BATCH: Mapping[str, float] = MappingProxyType({"anthropic": 0.5, "openai": 0.5, "gemini": 0.5})


def batch_price(provider: str, model: str) -> Optional[Price]:
    """The price of ``model`` at ``provider`` through its Batch API, or None when
    either the model or the provider's batch discount is not in the table."""
    price = price_for(provider, model)
    share = BATCH.get(provider) if isinstance(provider, str) else None
    return None if price is None or share is None else price.scaled(share)


def batch_priced(usage: Usage, provider: str) -> Usage:
    """``usage``, priced as a streamed request, at ``provider``'s batch share
    (:data:`BATCH`) of that cost — what a turn sent through a provider batch is
    billed; unchanged when it is not priced or the provider has no batch share."""
    share = BATCH.get(provider) if isinstance(provider, str) else None
    pico = usage._pico
    if share is None or not usage.priced or pico is None:
        return usage
    without = usage._pico_without_cache
    factor = Decimal(repr(float(share)))
    return _with_cost(usage, _share(pico, factor),
                      _share(pico if without is None else without, factor))


def _share(pico: int, share: Decimal) -> int:
    return int((Decimal(pico) * share).to_integral_value(ROUND_HALF_EVEN))


# A date at the end of an id: Anthropic's -20250929, OpenAI's -2025-08-07.
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})\Z", re.ASCII)


def price_for(provider: str, model: str) -> Optional[Price]:
    """The published price of ``model`` at ``provider``, or None when the table has none.

    ``provider`` is one of :data:`PROVIDERS`. A dated snapshot is priced as its base
    model. Never raises: an unknown name, or a value that is not a str, is None.
    """
    if not isinstance(provider, str) or not isinstance(model, str):
        return None
    rows = PRICES.get(provider)
    if rows is None:
        return None
    price = rows.get(model)
    if price is None:
        base = _SNAPSHOT.sub("", model, count=1)
        if base != model:
            price = rows.get(base)
    return price
