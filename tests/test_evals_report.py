"""EvalReport: Wilson intervals of known values, compare beyond noise, JSON round trip,
and assert_passes for a project's test suite."""

import json

import pytest

from nacelle.errors import ConfigError
from nacelle.evals import CaseReport, EvalReport, assert_passes, wilson


@pytest.mark.parametrize("passes,runs,low,high", [
    # Wilson score interval at 95% (z = 1.95996); the values of e.g.
    # https://epitools.ausvet.com.au/ciproportion and R's prop.test(correct=FALSE)
    (0, 1, 0.0, 0.7935), (1, 1, 0.2065, 1.0), (8, 10, 0.4902, 0.9433),
    (10, 10, 0.7225, 1.0), (0, 10, 0.0, 0.2775), (50, 100, 0.4038, 0.5962),
    (1, 3, 0.0615, 0.7923),
])
def test_the_wilson_interval_has_its_known_values(passes, runs, low, high):
    got = wilson(passes, runs)
    assert got == pytest.approx((low, high), abs=1e-4)


def test_no_runs_is_an_interval_that_knows_nothing():
    assert wilson(0, 0) == (0.0, 1.0)


def report(**rates):
    return EvalReport(tuple(CaseReport(name, runs, passes) for name, (passes, runs) in rates.items()),
                      repeat=10)


def test_compare_names_regressions_and_improvements_beyond_noise_only():
    baseline = report(steady=(10, 10), worse=(10, 10), better=(1, 10), noisy=(8, 10), gone=(1, 1))
    new = report(steady=(10, 10), worse=(2, 10), better=(10, 10), noisy=(6, 10), fresh=(3, 3))
    comparison = new.compare(baseline)
    assert comparison.regressions == ("worse",)
    assert comparison.improvements == ("better",)
    assert comparison.added == ("fresh",) and comparison.removed == ("gone",)
    assert not comparison.ok
    assert str(comparison) == "1 regressed (worse), 1 improved (better), 1 new, 1 gone"
    assert baseline.compare(baseline).ok


def test_one_run_per_case_cannot_show_a_change_beyond_noise():
    assert report(a=(0, 1)).compare(report(a=(1, 1))).regressions == ()


def test_a_report_round_trips_through_json_and_a_file(tmp_path):
    original = EvalReport((CaseReport("a", 3, 2, 0.5, 0.01, 1200, 2.5,
                                      ({"attempt": 1, "reasons": ["x: y"], "text": "t"},)),),
                          repeat=3)
    data = json.loads(json.dumps(original.to_json()))
    assert data["cases"][0]["low"] == pytest.approx(wilson(2, 3)[0])
    assert EvalReport.from_json(data) == original
    original.save(tmp_path / "r.json")
    assert EvalReport.load(tmp_path / "r.json") == original


@pytest.mark.parametrize("text", ["[]", '{"version": 2}', '{"version": 1, "cases": [1]}',
                                  '{"version": 1, "cases": [{"name": "a", "runs": 1, "passes": 2}]}',
                                  "not json", "[" * 5000])
def test_a_file_that_is_not_a_report_is_a_config_error(tmp_path, text):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ConfigError):
        EvalReport.load(path)


def test_assert_passes_lists_the_cases_short_of_the_rate_with_their_reasons():
    good = report(a=(10, 10))
    assert_passes(good)
    flaky = EvalReport((CaseReport("a", 10, 10), CaseReport(
        "b", 10, 8, failures=({"attempt": 3, "reasons": ["contains('x'): 'x' not in 'y'"]},))))
    assert_passes(flaky, min_rate=0.8)
    with pytest.raises(AssertionError) as caught:
        assert_passes(flaky)
    assert str(caught.value) == ("1 of 2 cases passed less than 100% of their runs:\n"
                                 "- b: 8/10\n    run 3: contains('x'): 'x' not in 'y'")
