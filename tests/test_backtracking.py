"""The bound on ``re``'s work read from a pattern's shape: catastrophic shapes cost more
than any budget on a few dozen characters, simple ones stay linear or polynomial, and
the bound is never below what the matcher is measured to do."""

import re
import time

import pytest

from nacelle.backtracking import CAP, search_cost

BUDGET = 20_000_000


@pytest.mark.parametrize("pattern", [
    r"^(a+)+$", r"(a|aa)*b", r"(\w+\s?)*$", r"(a?){30}a{30}", r"(?:x{1,30}){1,30}y",
    r"^([a-z0-9]+\.)*[a-z]+$", r"(?:a*)*", r"((ab)*)*c",
])
def test_catastrophic_shapes_cost_more_than_any_budget_on_short_strings(pattern):
    assert search_cost(pattern, 40) >= 10 ** 12


@pytest.mark.parametrize("pattern, length", [
    (r"^[a-z0-9-]+$", 3_000_000),        # anchored, one repeat: linear
    (r"\A\d{4}-\d{2}-\d{2}\Z", 10_000_000),  # no choice at all
    (r"[a-z]+", 2_000),                  # unanchored: n starts of n steps
    (r"^[^@\s]+@[^@\s]+\.[^@\s]+$", 150),
    (r"^(a+)+$", 4),                     # a few characters are cheap even here
])
def test_ordinary_patterns_fit_the_budget_on_ordinary_strings(pattern, length):
    assert search_cost(pattern, length) <= BUDGET


def test_the_cost_grows_with_the_length_and_saturates():
    costs = [search_cost(r"\d+\d+x", n) for n in (0, 10, 100, 1000)]
    assert costs == sorted(costs) and costs[0] > 0
    assert search_cost(r"^(a+)+$", 10_000) == CAP


def test_multiline_caret_is_no_anchor():
    anchored, multiline = search_cost(r"^\d+x", 1000), search_cost(r"(?m)^\d+x", 1000)
    assert multiline > 100 * anchored


@pytest.mark.parametrize("pattern", ["(", "a{2,1}", "(?P<x>a)(?P=y)", "\\"])
def test_a_pattern_re_refuses_raises_re_error(pattern):
    with pytest.raises(re.error):
        search_cost(pattern, 10)


@pytest.mark.parametrize("pattern, text", [
    (r"\d+x", "1" * 4000), (r"\d+\d+x", "1" * 300), (r"(?:\d\d)+x", "1" * 2000),
    (r"\d*[0-9]{200}x", "1" * 600), (r"(a|a)*b", "a" * 14), (r"(?=(\d+))\dx", "1" * 1500),
    (r"(.*)\1x", "ab" * 200), (r"(a?){12}a{12}", "a" * 12),
])
def test_the_bound_is_not_below_the_measured_work(pattern, text):
    # Measured at 0.2 to 4 ns a counted step on this kind of machine; 50 ns a step
    # leaves room for a slow, shared one.
    compiled = re.compile(pattern)
    started = time.perf_counter()
    compiled.search(text)
    seconds = time.perf_counter() - started
    assert seconds <= max(0.01, search_cost(pattern, len(text)) * 50e-9), seconds
