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

The table (as of 2026-12-01; pages are undated, so this is the day they were read):

- Anthropic: https://platform.claude.com/docs/en/about-claude/pricing, the model
  pages under https://platform.claude.com/docs/zh-CN/models/ (Opus 5.5, Sonnet 5.5,
  Sonnet 5) and, for the Sonnet 4 and 4.5 long-context tier,
  https://docs.anthropic.com/en/docs/about-claude/pricing. Each row names its page.
- OpenAI, Groq, DeepSeek, Gemini, Mistral, Together and xAI have no rows yet: no
  current official price page for them could be read when the table was made, and a
  row is only ever copied from the provider's own page, never from a third party's
  summary. DeepSeek bills by time of day (peak and off-peak rates since
  2026-08-16), which one :class:`Price` cannot say. Their models are unpriced until
  rows are added, which is what a wrong price would be worse than.

Dated snapshots (``claude-sonnet-4-5-20250929``, ``gpt-5-2025-08-07``) are priced as
their base model.

Core module: imports the standard library, ``errors`` and ``events``.
"""

from __future__ import annotations

import datetime
import sys
import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import ConfigError
from .events import Usage, _with_cost

__all__ = ["AS_OF", "PRICES", "PROVIDERS", "Price", "price_for"]

_MILLION = 1_000_000
_LARGEST_FLOAT = sys.float_info.max
#: ``priced``'s default: the one-hour writes ``usage`` says it holds (None is refused,
#: as any count that is not a whole number).
_FROM_USAGE: Any = object()

_RATES = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
_DEFAULT_MULTIPLIERS = {"cache_read": Decimal("0.1"), "cache_write": Decimal("1.25"),
                        "cache_write_1h": Decimal("2")}


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens for one model.

    ``input`` is full-rate input; ``cache_read``, ``cache_write`` (a five-minute
    write) and ``cache_write_1h`` default to 0.1×, 1.25× and 2× ``input``, and hold
    the worked-out price once made. ``long_context`` is ``(threshold, Price)``: a
    request whose prompt is more than ``threshold`` tokens is billed entirely at that
    price. ``source`` is the address the price was read from (not compared, not in
    the repr). Give the fields after ``cache_write`` by keyword.

    Every price is a finite number of zero or more; anything else is a
    :class:`~nacelle.errors.ConfigError`.
    """

    input: float
    output: float
    cache_read: Optional[float] = None
    cache_write: Optional[float] = None
    cache_write_1h: Optional[float] = None
    long_context: Optional[Tuple[int, "Price"]] = None
    source: str = field(default="", repr=False, compare=False)
    # Pico-dollars per million tokens, in _RATES order: the integers the cost is
    # worked out in. Derived, so neither compared nor shown.
    _rates: Tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        base = _checked_rate("input", self.input)
        _checked_rate("output", self.output)
        for name, multiplier in _DEFAULT_MULTIPLIERS.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, float(base * multiplier))
            else:
                _checked_rate(name, getattr(self, name))
        for name in _RATES:  # a whole dollar given as an int is kept as a float
            object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "_rates", tuple(
            int(_checked_rate(name, getattr(self, name)).scaleb(12)
                .to_integral_value(ROUND_HALF_EVEN))
            for name in _RATES))
        tier = self.long_context
        if tier is not None:
            if not (isinstance(tier, tuple) and len(tier) == 2
                    and type(tier[0]) is int and tier[0] > 0
                    and isinstance(tier[1], Price) and tier[1].long_context is None):
                raise ConfigError(
                    "Price.long_context must be (threshold, Price): a whole number of "
                    "prompt tokens above zero and the price of a request above it, "
                    f"itself without a tier; got {_shown(tier)}")
        if not isinstance(self.source, str):
            raise ConfigError(f"Price.source must be a str; got {_shown(self.source)}")

    def for_prompt(self, prompt_tokens: int) -> "Price":
        """The price a request with ``prompt_tokens`` of prompt is billed at."""
        tier = self.long_context
        if tier is not None and prompt_tokens > tier[0]:
            return tier[1]
        return self

    def priced(self, usage: Usage, *, cache_write_1h_tokens: int = _FROM_USAGE) -> Usage:
        """``usage`` (one request's) with its cost filled and ``priced`` set.

        ``cache_write_1h_tokens`` is the part of ``usage.cache_creation_tokens``
        written with a one-hour lifetime (Anthropic's
        ``usage.cache_creation.ephemeral_1h_input_tokens``); the rest are five-minute
        writes. Without it, ``usage.cache_write_1h_tokens`` says. A cost already on
        ``usage`` is replaced.
        """
        if not isinstance(usage, Usage):
            raise TypeError(f"Price prices a Usage, not {type(usage).__name__}")
        if cache_write_1h_tokens is _FROM_USAGE:
            cache_write_1h_tokens = usage.cache_write_1h_tokens
        pico, pico_without_cache = self._picos(usage, cache_write_1h_tokens)
        return _with_cost(usage, pico, pico_without_cache)

    def cost(self, usage: Usage, *, cache_write_1h_tokens: int = _FROM_USAGE) -> float:
        """The US dollars ``usage`` (one request's) costs at these prices."""
        return self.priced(usage, cache_write_1h_tokens=cache_write_1h_tokens).cost

    def _picos(self, usage: Usage, write_1h: int) -> Tuple[int, int]:
        if not isinstance(usage, Usage):
            raise TypeError(f"Price prices a Usage, not {type(usage).__name__}")
        writes = usage.cache_creation_tokens
        if type(write_1h) is not int or not 0 <= write_1h <= writes:
            raise ConfigError(
                "cache_write_1h_tokens must be a whole number from 0 to the usage's "
                f"{writes} cache_creation_tokens; got {_shown(write_1h)}")
        prompt = usage.input_tokens + usage.cache_read_tokens + writes
        rates = self.for_prompt(prompt)._rates
        full, out, read, write, write_long = rates
        billed = (usage.input_tokens * full + usage.output_tokens * out
                  + usage.cache_read_tokens * read + (writes - write_1h) * write
                  + write_1h * write_long)
        uncached = prompt * full + usage.output_tokens * out
        return _rounded(billed), _rounded(uncached)


def _rounded(pico_per_million: int) -> int:
    """Tokens × pico-dollars-per-million as whole pico-dollars, half to even."""
    whole, part = divmod(pico_per_million, _MILLION)
    if part * 2 > _MILLION or (part * 2 == _MILLION and whole % 2):
        whole += 1
    return whole


def _checked_rate(name: str, value: Any) -> Decimal:
    if (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0 <= value <= _LARGEST_FLOAT):  # false for NaN; exact for a huge int
        return Decimal(repr(value) if isinstance(value, float) else int(value))
    raise ConfigError(f"Price.{name} must be a finite number of dollars per million "
                      f"tokens, zero or more; got {_shown(value)}")


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() <= 64 else (
        f"an integer of {value.bit_length()} bits")
    return text if len(text) <= 60 else text[:59] + "…"


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
                 long_context=long_context, source=source)


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

#: provider → model id → :class:`Price`. Read-only.
PRICES: Mapping[str, Mapping[str, Price]] = MappingProxyType({
    name: MappingProxyType(_ANTHROPIC if name == "anthropic" else {})
    for name in PROVIDERS
})

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
