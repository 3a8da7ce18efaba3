"""Hooks: before/after semantics, the inject cap, with_timeout, detached, and the
checks on a hooks mapping."""

import pickle
import threading
import time

import pytest

from nacelle import (
    MAX_INJECT, ConfigError, HookEvent, HookPoint, HookResult, detached, with_timeout,
)
from nacelle.hooks import cut_inject, normalize_hooks, run_after, run_before

BEFORE = HookEvent(HookPoint.BEFORE_TOOL_CALL, "shell", '{"cmd": "ls"}')
AFTER = HookEvent(HookPoint.AFTER_TOOL_CALL, "shell", '{"cmd": "ls"}', result="a b")


def test_hook_points_have_their_documented_values():
    assert HookPoint("before_tool_call") is HookPoint.BEFORE_TOOL_CALL
    assert HookPoint.AFTER_TOOL_CALL.value == "after_tool_call"


def test_before_hooks_run_in_order_and_the_first_deny_is_final():
    seen = []
    hooks = [lambda e: seen.append(1), lambda e: HookResult(deny="no"), lambda e: seen.append(3)]
    assert run_before(hooks, BEFORE) == ("no", "")
    assert seen == [1]


def test_before_hook_injects_are_joined():
    hooks = [lambda e: HookResult(inject="one"), lambda e: None, lambda e: HookResult(inject="two")]
    assert run_before(hooks, BEFORE) == ("", "one\ntwo")


def test_a_before_hook_that_raises_denies_with_a_readable_reason():
    def broken(event):
        raise RuntimeError("policy crashed")

    deny, _ = run_before([broken], BEFORE)
    assert "shell" in deny and "RuntimeError: policy crashed" in deny


def test_a_before_hook_returning_something_else_denies():
    deny, _ = run_before([lambda e: "yes"], BEFORE)
    assert "HookResult" in deny


def test_an_after_hook_that_raises_is_ignored():
    def broken(event):
        raise RuntimeError("x")

    assert run_after([broken, lambda e: HookResult(inject="kept")], AFTER) == ("", "kept")


def test_an_after_hook_deny_replaces_the_result():
    assert run_after([lambda e: HookResult(deny="withheld")], AFTER) == ("withheld", "")


def test_inject_is_cut_to_max_inject_bytes_on_a_character_boundary():
    assert MAX_INJECT == 10_000
    text = "a" + "€" * 5000  # 1 + 15000 bytes; a cut at 10000 lands inside a character
    cut = cut_inject(text)
    assert len(cut.encode()) <= MAX_INJECT and text.startswith(cut)
    assert len(cut.encode()) > MAX_INJECT - 3
    assert cut_inject("short") == "short"


def test_with_timeout_denies_a_before_hook_that_does_not_answer_in_time():
    release = threading.Event()
    slow = with_timeout(0.1, lambda e: release.wait(5))
    started = time.monotonic()
    answer = slow(BEFORE)
    release.set()
    assert time.monotonic() - started < 1.0
    assert answer.deny and "0.1 s" in answer.deny


def test_with_timeout_drops_a_late_after_hook_answer():
    release = threading.Event()
    assert with_timeout(0.1, lambda e: release.wait(5) and HookResult(inject="x"))(AFTER) is None
    release.set()


def test_with_timeout_passes_a_timely_answer_and_reraises_an_error():
    assert with_timeout(1, lambda e: HookResult(inject="ok"))(BEFORE) == HookResult(inject="ok")

    def broken(event):
        raise KeyError("k")

    with pytest.raises(KeyError):
        with_timeout(1, broken)(BEFORE)


@pytest.mark.slow
def test_detached_returns_at_once_and_runs_the_hook_in_the_background():
    done = threading.Event()

    def slow(event):
        time.sleep(0.2)
        done.set()
        return HookResult(deny="ignored")

    started = time.monotonic()
    assert detached(slow)(BEFORE) is None
    assert time.monotonic() - started < 0.15
    assert done.wait(2)


def audit(event):
    return None


def test_wrapped_hooks_pickle_when_their_hook_does():
    copy = pickle.loads(pickle.dumps(with_timeout(2, audit)))
    assert copy.hook is audit and copy.seconds == 2
    assert pickle.loads(pickle.dumps(detached(audit))).hook is audit


@pytest.mark.parametrize("bad, words", [
    ([], "mapping"),
    ({"sometime": []}, "unknown hook point"),
    ({HookPoint.BEFORE_TOOL_CALL: [1]}, "callables"),
])
def test_a_bad_hooks_mapping_is_a_config_error(bad, words):
    with pytest.raises(ConfigError, match=words):
        normalize_hooks(bad)


def test_hooks_keyed_by_string_are_normalized_and_copied():
    mine = [audit]
    hooks = normalize_hooks({"before_tool_call": mine, HookPoint.AFTER_TOOL_CALL: audit})
    mine.append(print)
    assert hooks == {HookPoint.BEFORE_TOOL_CALL: (audit,), HookPoint.AFTER_TOOL_CALL: (audit,)}


@pytest.mark.parametrize("seconds", [0, -1])
def test_with_timeout_needs_positive_seconds(seconds):
    with pytest.raises(ValueError):
        with_timeout(seconds, audit)
