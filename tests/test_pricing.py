"""Prices, the dated table and pricing a usage: the contract of nacelle.pricing."""

import dataclasses
import datetime
from decimal import Decimal
from fractions import Fraction

import pytest

from nacelle import pricing
from nacelle.errors import ConfigError
from nacelle.events import Usage
from nacelle.pricing import AS_OF, PRICES, PROVIDERS, Price, price_for

ROWS = [(provider, model, price) for provider, rows in PRICES.items()
        for model, price in rows.items()]


def exact_cost(price, usage, write_1h=0):
    """The dollars ``usage`` costs, worked out in exact fractions from the floats."""
    tier = price.for_prompt(usage.input_tokens + usage.cache_read_tokens
                            + usage.cache_creation_tokens)
    rate = {name: Fraction(Decimal(repr(getattr(tier, name))))
            for name in ("input", "output", "cache_read", "cache_write", "cache_write_1h")}
    return (usage.input_tokens * rate["input"] + usage.output_tokens * rate["output"]
            + usage.cache_read_tokens * rate["cache_read"]
            + (usage.cache_creation_tokens - write_1h) * rate["cache_write"]
            + write_1h * rate["cache_write_1h"]) / 1_000_000


# -- the table --------------------------------------------------------------------------


def test_the_table_names_every_documented_provider_and_is_dated():
    assert set(PRICES) == set(PROVIDERS) == {
        "anthropic", "openai", "groq", "deepseek", "gemini", "mistral", "together", "xai"}
    assert isinstance(AS_OF, datetime.date)
    assert AS_OF.isoformat() in pricing.__doc__


def test_every_row_cites_the_page_it_was_read_from():
    assert ROWS
    for provider, model, price in ROWS:
        assert price.source.startswith("https://"), (provider, model)
        assert price.source.split("/")[2] in pricing.__doc__, (provider, model)
        if price.long_context is not None:
            assert price.long_context[1].source.startswith("https://"), (provider, model)


def test_the_table_cannot_be_changed_in_place():
    with pytest.raises(TypeError):
        PRICES["anthropic"]["claude-new"] = Price(1, 2)  # type: ignore[index]
    with pytest.raises(TypeError):
        PRICES["openai"] = {}  # type: ignore[index]


def test_every_row_is_a_price_whose_cache_reads_cost_no_more_than_input():
    for provider, model, price in ROWS:
        assert isinstance(price, Price)
        assert price.cache_read <= price.input <= price.cache_write <= price.cache_write_1h, (
            provider, model)


def test_a_row_is_found_by_its_exact_model_id():
    for provider, model, price in ROWS:
        assert price_for(provider, model) is price


def test_a_dated_snapshot_is_priced_as_its_model():
    assert price_for("anthropic", "claude-sonnet-4-5-20250929") is PRICES["anthropic"]["claude-sonnet-4-5"]
    assert price_for("anthropic", "claude-haiku-4-5-20251001") is PRICES["anthropic"]["claude-haiku-4-5"]


def test_an_openai_style_dated_snapshot_is_priced_as_its_model(monkeypatch):
    row = Price(1.25, 10.0, 0.125, 1.25, cache_write_1h=1.25)
    monkeypatch.setattr(pricing, "PRICES", {"openai": {"gpt-5": row}})
    assert pricing.price_for("openai", "gpt-5-2025-08-07") is row
    assert pricing.price_for("openai", "gpt-5") is row


@pytest.mark.parametrize("provider, model", [
    ("anthropic", "claude-unknown-9"),
    ("anthropic", "claude-sonnet-4-5-2025092"),      # seven digits is no date
    ("anthropic", "claude-sonnet-4-5-20250929-v2"),  # the date is not at the end
    ("anthropic", "CLAUDE-SONNET-4-5"),               # ids are matched exactly
    ("anthropic", "claude-sonnet-4-5-२०२५०९२९"),      # Devanagari digits are no date
    ("openrouter", "claude-sonnet-4-5"),              # reports its own cost
    ("nobody", "x"), ("", ""), ("anthropic", ""),
    ("anthropic", "-" * 100_000 + "1"),
])
def test_an_unknown_provider_or_model_has_no_price(provider, model):
    assert price_for(provider, model) is None


@pytest.mark.parametrize("bad", [None, 3, b"anthropic", ["anthropic"], {"a": 1}])
def test_price_for_never_raises_for_a_value_that_is_not_a_name(bad):
    assert price_for(bad, "claude-opus-5") is None  # type: ignore[arg-type]
    assert price_for("anthropic", bad) is None  # type: ignore[arg-type]


# -- a price ----------------------------------------------------------------------------


def test_price_keeps_the_positional_order_of_the_anthropic_pricing_it_replaces():
    assert Price(5.0, 25.0, 0.5, 6.25) == Price(input=5.0, output=25.0, cache_read=0.5,
                                                cache_write=6.25)
    assert [f.name for f in dataclasses.fields(Price)][:4] == [
        "input", "output", "cache_read", "cache_write"]


def test_cache_prices_default_to_anthropics_multipliers_of_input_exactly():
    price = Price(3, 15)
    # 3 * 0.1 is 0.30000000000000004 in floats; the default is the decimal 0.3.
    assert (price.cache_read, price.cache_write, price.cache_write_1h) == (0.3, 3.75, 6.0)
    assert all(type(getattr(price, name)) is float for name in
               ("input", "output", "cache_read", "cache_write", "cache_write_1h"))


def test_a_given_cache_price_is_kept():
    price = Price(2, 10, cache_read=0.1, cache_write=2, cache_write_1h=2)
    assert (price.cache_read, price.cache_write, price.cache_write_1h) == (0.1, 2.0, 2.0)


def test_prices_are_frozen_values_with_readable_reprs():
    price = Price(1, 5, source="https://example.com/pricing")
    with pytest.raises(dataclasses.FrozenInstanceError):
        price.input = 2  # type: ignore[misc]
    assert repr(price) == ("Price(input=1.0, output=5.0, cache_read=0.1, cache_write=1.25,"
                           " cache_write_1h=2.0, long_context=None)")
    assert price == Price(1, 5) and hash(price) == hash(Price(1, 5))


@pytest.mark.parametrize("field", ["input", "output", "cache_read", "cache_write",
                                   "cache_write_1h"])
@pytest.mark.parametrize("bad", [-1, -0.01, float("nan"), float("inf"), 10**400, "3",
                                 True, [3]])
def test_a_price_that_is_not_a_finite_amount_of_zero_or_more_is_a_config_error(field, bad):
    values = {"input": 1.0, "output": 1.0, field: bad}
    with pytest.raises(ConfigError, match=f"Price.{field}"):
        Price(**values)


@pytest.mark.parametrize("bad", [
    200_000, (200_000,), (0, Price(6, 22.5)), (-1, Price(6, 22.5)), (1.5, Price(6, 22.5)),
    (True, Price(6, 22.5)), (200_000, (6, 22.5)),
    (100, Price(6, 22.5, long_context=(200, Price(9, 30)))),
])
def test_a_long_context_tier_that_is_not_a_threshold_and_a_flat_price_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="long_context"):
        Price(3, 15, long_context=bad)


def test_a_config_error_is_a_value_error_that_never_prints_a_huge_number_whole():
    with pytest.raises(ValueError) as caught:
        Price(-(10**5000), 1)
    assert len(str(caught.value)) < 200


# -- pricing a usage --------------------------------------------------------------------


def test_priced_fills_the_cost_from_the_price_and_marks_it_known():
    price = PRICES["anthropic"]["claude-opus-5"]
    usage = Usage(input_tokens=1234, output_tokens=567, cache_read_tokens=8901,
                  cache_creation_tokens=2345, reasoning_tokens=12)
    priced = price.priced(usage)
    assert priced.priced and not usage.priced
    assert (priced.input_tokens, priced.output_tokens, priced.cache_read_tokens,
            priced.cache_creation_tokens, priced.reasoning_tokens) == (1234, 567, 8901, 2345, 12)
    assert priced.cost == float(exact_cost(price, usage))
    assert price.cost(usage) == priced.cost


def test_five_minute_writes_cost_one_and_a_quarter_input_and_one_hour_writes_twice():
    price = Price(4, 20)
    writes = Usage(cache_creation_tokens=1_000_000)
    assert price.cost(writes) == 4 * 1.25
    assert price.cost(writes, cache_write_1h_tokens=1_000_000) == 4 * 2
    assert price.cost(writes, cache_write_1h_tokens=250_000) == 4 * (0.75 * 1.25 + 0.25 * 2)


def test_the_one_hour_part_uses_a_rows_published_one_hour_price():
    price = PRICES["anthropic"]["claude-opus-5-5"]
    usage = Usage(input_tokens=10, cache_creation_tokens=3000)
    assert price.cost(usage, cache_write_1h_tokens=1000) == float(exact_cost(price, usage, 1000))


@pytest.mark.parametrize("bad", [-1, 3001, 1.0, "5", None, True])
def test_a_one_hour_count_outside_the_cache_writes_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="cache_write_1h_tokens"):
        Price(1, 2).priced(Usage(cache_creation_tokens=3000), cache_write_1h_tokens=bad)


def test_pricing_something_that_is_not_a_usage_is_a_type_error():
    with pytest.raises(TypeError):
        Price(1, 2).priced({"input_tokens": 3})  # type: ignore[arg-type]


def test_a_prompt_above_the_threshold_bills_every_token_at_the_long_context_price():
    price = PRICES["anthropic"]["claude-sonnet-4-5"]
    threshold, long = price.long_context
    # The prompt counts cache reads and writes too, as Anthropic counts it.
    at = Usage(input_tokens=threshold - 300, cache_read_tokens=200, cache_creation_tokens=100,
               output_tokens=1000)
    above = dataclasses.replace(at, input_tokens=at.input_tokens + 1)
    assert price.for_prompt(threshold) is price and price.for_prompt(threshold + 1) is long
    assert price.cost(at) == float(exact_cost(price, at))
    assert price.cost(above) == float(exact_cost(long, above))
    assert (long.input, long.output) == (6.0, 22.5)
    assert price.cost(above) > price.cost(at) * 1.9


def test_a_price_without_a_tier_bills_a_long_prompt_at_its_one_rate():
    price = PRICES["anthropic"]["claude-opus-5"]
    assert price.long_context is None and price.for_prompt(10**9) is price


def test_cost_without_cache_bills_reads_and_writes_as_full_rate_input():
    price = PRICES["anthropic"]["claude-sonnet-4-6"]
    usage = Usage(input_tokens=100, output_tokens=50, cache_read_tokens=9000,
                  cache_creation_tokens=900)
    priced = price.priced(usage, cache_write_1h_tokens=100)
    plain = Usage(input_tokens=10_000, output_tokens=50)
    assert priced.cost_without_cache == price.cost(plain)
    assert priced.cost_without_cache - priced.cost > 0  # reads saved more than writes cost


def test_a_cache_write_never_read_back_is_a_negative_saving():
    priced = Price(3, 15).priced(Usage(cache_creation_tokens=1000))
    assert priced.cost_without_cache < priced.cost


def test_a_turns_cost_is_exact_to_the_pico_dollar():
    # One token at $0.10 per million is 1e-7 dollars: micro-dollars could not hold it.
    usage = Price(0.1, 0.1).priced(Usage(input_tokens=1))
    assert usage._pico == 100_000 and usage.cost == 1e-7


def test_a_cost_below_a_pico_dollar_rounds_half_to_even():
    price = Price(5e-7, 0)  # half a pico-dollar a token
    assert price.priced(Usage(input_tokens=1))._pico == 0   # 0.5 → 0
    assert price.priced(Usage(input_tokens=3))._pico == 2   # 1.5 → 2
    assert price.priced(Usage(input_tokens=2_000_001))._pico == 1_000_000  # 1,000,000.5


def test_a_run_of_priced_turns_is_priced_and_sums_the_costs_exactly():
    price = PRICES["anthropic"]["claude-haiku-4-5"]
    turns = [price.priced(Usage(input_tokens=n, output_tokens=n // 3, cache_read_tokens=7 * n))
             for n in range(1, 400)]
    total = sum(turns, Usage())
    assert total.priced
    assert total._pico == sum(t._pico for t in turns)
    assert total.cost == float(sum(exact_cost(price, t) for t in turns))
    assert total.cost_without_cache == float(sum(Fraction(t._pico_without_cache, 10**12)
                                                  for t in turns))


def test_a_usage_that_says_its_one_hour_writes_is_priced_by_them():
    price = PRICES["anthropic"]["claude-opus-5-5"]
    usage = Usage(input_tokens=10, cache_creation_tokens=3000, cache_write_1h_tokens=1000)
    assert price.cost(usage) == float(exact_cost(price, usage, 1000))
    assert price.priced(usage).cache_write_1h_tokens == 1000
    # an explicit count still wins over what the usage says
    assert price.cost(usage, cache_write_1h_tokens=0) == float(exact_cost(price, usage, 0))


# -- rows read through an aggregator, batch prices ----------------------------------------


def test_every_provider_that_publishes_prices_has_rows():
    assert {provider for provider, rows in PRICES.items() if rows} == set(PROVIDERS)


def test_a_row_read_through_the_aggregator_says_so_and_when_it_was_checked():
    for provider, model, price in ROWS:
        assert isinstance(price.checked, datetime.date), (provider, model)
        assert price.checked <= AS_OF, (provider, model)
        if provider == "anthropic":
            assert price.via == "", model  # read on Anthropic's own pages
        else:
            assert "github.com/pydantic/genai-prices" in price.via, (provider, model)


def test_a_long_prompt_on_gemini_2_5_pro_is_billed_at_the_long_context_rates():
    price = price_for("gemini", "gemini-2.5-pro")
    assert price.cost(Usage(200_000, 1_000)) == pytest.approx(0.25 + 0.01)
    assert price.cost(Usage(200_001, 1_000)) == pytest.approx(200_001 * 2.5e-6 + 0.015)


def test_a_batch_price_is_half_the_standard_price_on_every_rate():
    standard = price_for("openai", "gpt-5.4")
    batch = pricing.batch_price("openai", "gpt-5.4")
    assert (batch.input, batch.output, batch.cache_read) == (1.25, 7.5, 0.125)
    assert batch.long_context[1].input == standard.long_context[1].input / 2
    usage = Usage(10_000, 2_000, 5_000)
    assert batch.cost(usage) == pytest.approx(standard.cost(usage) / 2)
    assert set(pricing.BATCH) == {"anthropic", "openai", "gemini"}
    assert pricing.batch_price("groq", "llama-3.1-8b-instant") is None  # no batch row
    assert pricing.batch_price("openai", "an-unreleased-model") is None


def test_scaled_keeps_the_rows_source_and_date():
    price = price_for("gemini", "gemini-2.5-flash")
    half = price.scaled(0.5)
    assert (half.source, half.checked, half.via) == (price.source, price.checked, price.via)
    assert half.input == 0.15  # the shortest decimal, not 0.3 * 0.5's binary rounding


def test_checked_and_via_are_checked():
    with pytest.raises(ConfigError, match="Price.checked"):
        Price(1, 2, checked="2026-01-01")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="Price.via"):
        Price(1, 2, via=3)  # type: ignore[arg-type]


# -- every preset with a published price reports a cost ------------------------------------


def _chat_answer():
    """A Chat Completions stream in the shape every hosted preset sends (the usage in
    a last chunk with no choices, as ``stream_options.include_usage`` asks)."""
    from nacelle.testing import Reply
    from nacelle.testing.wire import sse_event

    chunks = [sse_event({"choices": [{"index": 0, "delta": {"content": "Hi."}}]}),
              sse_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
              sse_event({"choices": [], "usage": {"prompt_tokens": 1200,
                                                  "completion_tokens": 300}}),
              b"data: [DONE]\n\n"]
    return Reply(chunks=chunks)


def _presets():
    """(name, maker(model, base_url), provider, path, reply): every Chat Completions
    preset, and each native backend, with the table's name for its provider."""
    from nacelle.backends import anthropic, chat, gemini, openai
    from nacelle.testing import Reply
    from nacelle.testing.wire import anthropic_stream, gemini_stream, responses_stream

    out = []
    for name in chat.__all__:
        preset = getattr(chat, name)
        if not callable(preset) or name in ("Accumulator", "Backend", "Dialect", "to_wire"):
            continue
        provider = preset("probe", api_key="k").dialect.pricing
        out.append((f"chat.{name}", lambda model, url, preset=preset: preset(
            model, api_key="k", base_url=url + "/v1"), provider, "/v1/chat/completions",
            _chat_answer))
    out.append(("anthropic.Backend", lambda model, url: anthropic.Backend(
        "k", model=model, base_url=url), "anthropic", "/v1/messages",
        lambda: Reply(chunks=anthropic_stream(("Hi.",)))))
    out.append(("openai.Backend", lambda model, url: openai.Backend(
        "k", model=model, base_url=url + "/v1"), "openai", "/v1/responses",
        lambda: Reply(chunks=responses_stream(("Hi.",)))))
    out.append(("gemini.Backend", lambda model, url: gemini.Backend(
        "k", model=model, base_url=url + "/v1beta"), "gemini",
        "/v1beta/models/{}:streamGenerateContent", lambda: Reply(chunks=gemini_stream(("Hi.",)))))
    return out


@pytest.mark.parametrize("preset", _presets(), ids=lambda p: p[0])
def test_a_turn_on_every_preset_with_a_published_price_reports_a_cost(preset):
    from nacelle import Agent, user_text
    from nacelle.testing import FakeServer

    name, make, provider, path, reply = preset
    if not provider:
        assert name in ("chat.ollama", "chat.vllm", "chat.lmstudio", "chat.llamacpp")
        pytest.skip(f"{name} serves local models, which have no published price")
    assert PRICES[provider], f"{name}: no rows for {provider}"
    for model in PRICES[provider]:
        with FakeServer() as server:
            server.queue(path.format(model), reply())
            backend = make(model, server.url)
            assert backend.capabilities.cost, (name, model)
            result = Agent(backend, "Be brief.").run([user_text("Hi")])
            assert result.usage.priced and result.usage.cost > 0, (name, model)
