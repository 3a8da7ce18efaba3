"""The :class:`Price` of a model's tokens, on its own: what a backend needs to type
its ``pricing=`` and check it, without the price table.

Why a module of its own: :mod:`nacelle.pricing` builds its table of a hundred prices
when imported (``decimal`` and ``datetime`` with it), and a backend that only names
the class — ``anthropic.Pricing`` is ``Price`` — would load all of that with its own
import. ``Price`` is ``nacelle.pricing.Price`` (its ``__module__`` says so, so
pickles and docs name that path); ``decimal`` and ``datetime`` are imported when a
price is made. See :mod:`nacelle.pricing` for the accounting rules.

Core module: imports the standard library, ``errors`` and ``events``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Tuple

from .errors import ConfigError
from .events import Usage, _with_cost

if TYPE_CHECKING:
    import datetime
    from decimal import Decimal

__all__ = ["Price"]

_MILLION = 1_000_000
_LARGEST_FLOAT = sys.float_info.max
#: ``priced``'s default: the one-hour writes ``usage`` says it holds (None is refused,
#: as any count that is not a whole number).
_FROM_USAGE: Any = object()

_RATES = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
# As decimal text: Decimal (and the decimal module) is made when a price is.
_DEFAULT_MULTIPLIERS = {"cache_read": "0.1", "cache_write": "1.25", "cache_write_1h": "2"}


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens for one model.

    ``input`` is full-rate input; ``cache_read``, ``cache_write`` (a five-minute
    write) and ``cache_write_1h`` default to 0.1×, 1.25× and 2× ``input``, and hold
    the worked-out price once made. ``long_context`` is ``(threshold, Price)``: a
    request whose prompt is more than ``threshold`` tokens is billed entirely at that
    price. ``source`` is the address of the provider's page the price is from,
    ``checked`` the day it was last read there, ``via`` where it was read when that
    page itself could not be (an aggregator; "" otherwise) — none compared, none in
    the repr. Give the fields after ``cache_write`` by keyword.

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
    #: the day the price was last read on ``source`` (None: not recorded)
    checked: Optional[datetime.date] = field(default=None, repr=False, compare=False)
    #: where the price was read when ``source`` itself could not be ("" for the page)
    via: str = field(default="", repr=False, compare=False)
    # Pico-dollars per million tokens, in _RATES order: the integers the cost is
    # worked out in. Derived, so neither compared nor shown.
    _rates: Tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from decimal import ROUND_HALF_EVEN, Decimal

        base = _checked_rate("input", self.input)
        _checked_rate("output", self.output)
        for name, multiplier in _DEFAULT_MULTIPLIERS.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, float(base * Decimal(multiplier)))
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
        if not isinstance(self.source, str) or not isinstance(self.via, str):
            raise ConfigError(f"Price.source and Price.via must be str; got "
                              f"{_shown(self.source)}, {_shown(self.via)}")
        if self.checked is not None and not _is_date(self.checked):
            raise ConfigError(f"Price.checked must be a datetime.date or None; got "
                              f"{_shown(self.checked)}")

    def scaled(self, factor: float) -> "Price":
        """Every rate (and the long-context tier's) times ``factor``: a batch price is
        ``price.scaled(BATCH[provider])``. The source, date and channel stay."""
        from decimal import Decimal

        def times(value: float) -> float:
            return float(Decimal(repr(value)) * Decimal(repr(float(factor))))
        tier = self.long_context
        return Price(times(self.input), times(self.output), times(self.cache_read or 0),
                     times(self.cache_write or 0), cache_write_1h=times(self.cache_write_1h or 0),
                     long_context=None if tier is None else (tier[0], tier[1].scaled(factor)),
                     source=self.source, checked=self.checked, via=self.via)

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
    from decimal import Decimal

    if (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0 <= value <= _LARGEST_FLOAT):  # false for NaN; exact for a huge int
        return Decimal(repr(value) if isinstance(value, float) else int(value))
    raise ConfigError(f"Price.{name} must be a finite number of dollars per million "
                      f"tokens, zero or more; got {_shown(value)}")


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() <= 64 else (
        f"an integer of {value.bit_length()} bits")
    return text if len(text) <= 60 else text[:59] + "…"


def _is_date(value: Any) -> bool:
    import datetime

    return isinstance(value, datetime.date)


# The public path: pickles, reprs of the class and the docs name nacelle.pricing.Price.
Price.__module__ = "nacelle.pricing"
