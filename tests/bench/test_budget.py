"""The stop rules of the timed loop, driven by a fake clock (no wall-clock time involved)."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from ascendbench.bench.budget import (
    CHECK_GAP,
    CHECK_SPACING,
    STOP_BLOCK_CALLS,
    BenchBudget,
    StopRule,
)
from ascendbench.bench.loop import BenchLoop
from ascendbench.bench.stats import BLOCKS, Interval
from ascendbench.errors import ConfigError

from helpers.timing import FakeClock, HostOnlyAdapter


def timed_calls(durations_s, budget, clock=None):
    """Run the loop on a call whose n-th invocation takes durations_s[n] seconds of fake time."""
    clock = clock or FakeClock()
    durations = iter(durations_s)
    calls = []

    def call():
        calls.append(clock.now)
        clock.now += next(durations)
        return {"n": len(calls)}

    result = BenchLoop(HostOnlyAdapter(), budget, clock=clock).run(call)
    return result, calls


def budget(**kw):
    base = dict(warmup=0, min_iters=3, max_iters=10, min_time_s=0.0, max_time_s=1000.0,
                stability=None)
    return BenchBudget(**{**base, **kw})


def test_without_precision_the_loop_stops_once_the_minimums_are_met():
    result, calls = timed_calls([1.0] + [0.01] * 50, budget(min_iters=4))
    assert result.stop["reason"] == "min_reached" and result.latency.count == 4
    assert result.cold_ms == pytest.approx(1000.0), "the first call is timed apart as cold"
    assert result.samples_ms == pytest.approx([10.0] * 4)


def test_min_time_keeps_short_calls_going_past_min_iters():
    result, _ = timed_calls([0.0] + [0.125] * 100,
                            budget(min_iters=2, max_iters=100, min_time_s=1.0))
    assert result.latency.count == 8 and result.stop["reason"] == "min_reached"


def test_max_iters_caps_a_loop_that_never_converges():
    noisy = [0.0] + [0.01, 0.05] * 50
    result, _ = timed_calls(noisy, budget(min_iters=3, max_iters=9, precision=0.01))
    assert result.latency.count == 9 and result.stop["reason"] == "max_iters"
    assert result.stop["precision_met"] is False and result.stop["ci_rel_half_width"] > 0.01
    assert result.noise["noisy"] is True


def test_max_time_wins_over_min_iters_for_long_calls():
    result, _ = timed_calls([0.0] + [10.0] * 20, budget(min_iters=5, max_iters=20, max_time_s=25.0))
    assert result.latency.count == 3 and result.stop["reason"] == "max_time_s"
    assert result.stop["timed_s"] == pytest.approx(30.0)


def _seeded_stream(n, spread, seed=0):
    """``n`` call durations around 10 ms (seconds): 10 ms x (1 + spread x N(0, 1)), all positive."""
    rng = np.random.default_rng(seed)
    return [0.0] + np.clip(0.010 * (1 + spread * rng.standard_normal(n)), 0.001, None).tolist()


def _achieved(latency):
    """The record's CI of the median, as a relative half-width (the larger side)."""
    return max(latency.median_ms - latency.median_ci95_low_ms,
               latency.median_ci95_high_ms - latency.median_ms) \
        / latency.median_ms


def test_precision_stops_once_the_median_ci_is_within_it_long_before_max_time():
    stream = _seeded_stream(3000, spread=0.05)
    result, calls = timed_calls(stream,
                                budget(min_iters=10, max_iters=3000, max_time_s=1000.0,
                                       precision=0.01))
    stop = result.stop
    assert stop["reason"] == "precision" and stop["precision_met"] is True
    assert 10 < stop["iters"] < 3000 and stop["timed_s"] < 1000.0
    assert stop["ci_rel_half_width"] <= 0.01
    assert _achieved(result.latency) == pytest.approx(stop["ci_rel_half_width"]), "the record's CI"
    # the stop is the first precise count among the checked ones: CHECK_GAP calls or 2% of the
    # samples apart
    assert stop["iters"] == _first_precise_check(result.samples_ms, 0.01)
    # every check but the last is followed by one untimed call (a check disturbs the next call's
    # caches)
    assert stop["untimed_after_checks"] >= 1
    assert len(calls) == 1 + stop["iters"] + stop["untimed_after_checks"]


def _first_precise_check(samples_ms, precision):
    rule, check = StopRule(budget(precision=precision)), BLOCKS * STOP_BLOCK_CALLS
    for n, ms in enumerate(samples_ms, start=1):
        rule.add(ms)
        if n == check:
            if rule.judge() == "precision":
                return n
            check = n + max(CHECK_GAP, n // CHECK_SPACING)
    raise AssertionError("the stream never reaches the precision")


def test_noisy_samples_run_to_max_time_and_keep_the_noise_warning():
    rng = np.random.default_rng(1)
    heavy = [0.0] + (0.01 * rng.lognormal(0.0, 1.0, 5000)).tolist()  # IQR/median ~ 1.3: very noisy
    result, _ = timed_calls(heavy,
                            budget(min_iters=10, max_iters=5000, max_time_s=5.0, precision=0.001))
    assert result.stop["reason"] == "max_time_s" and result.stop["precision_met"] is False
    assert result.stop["timed_s"] >= 5.0 and result.stop["ci_rel_half_width"] > 0.001
    assert result.noise["noisy"] is True and "noisy timing" in result.noise["warning"]


def test_a_cap_reached_with_the_precision_met_says_precision():
    full = BLOCKS * STOP_BLOCK_CALLS
    result, _ = timed_calls([0.0] + [0.01] * (full + 4),
                            budget(min_iters=full, max_iters=full, precision=0.5))
    assert result.stop["reason"] == "precision" and result.latency.count == full
    result, _ = timed_calls([0.0] + [0.01] * 12, budget(min_iters=8, max_iters=8, precision=0.5))
    assert result.stop["reason"] == "max_iters", "8 calls do not fill every block"


def test_precision_is_not_judged_before_every_block_exists():
    """The CI exists from 6 calls, but the precision stop waits for all blocks (drift shows between
    them)."""
    result, _ = timed_calls([0.0] + [0.01] * 40, budget(min_iters=1, max_iters=40, precision=0.05))
    assert result.latency.count == BLOCKS * STOP_BLOCK_CALLS
    assert result.stop["reason"] == "precision"


def test_stability_is_deprecated_logged_and_ignored(caplog):
    node = OmegaConf.create({"warmup": 0, "min_iters": 3, "max_iters": 9, "max_time_s": 9,
                             "stability": 0.5})
    with caplog.at_level("WARNING", logger="ascendbench.bench.budget"):
        b = BenchBudget.from_config(node)
    assert "bench.stability=0.5 is deprecated and ignored" in caplog.text
    assert "bench.precision" in caplog.text
    steady = [0.0] + [0.01] * 20  # IQR/median 0 from the first calls: the old rule stopped at 5
    result, _ = timed_calls(steady, b)
    assert result.stop["reason"] == "min_reached" and result.latency.count == 3


def test_warmup_calls_run_untimed_between_cold_and_timed_calls():
    result, calls = timed_calls([0.5, 9.0, 9.0] + [0.01] * 10, budget(warmup=2, min_iters=3))
    assert len(calls) == 1 + 2 + 3
    assert result.samples_ms == pytest.approx([10.0] * 3), "warm-up calls never reach the samples"
    assert result.first_outputs == {"n": 1}, "outputs come from the cold call"


def test_iters_fixes_the_count_and_turns_off_time_minimum_and_precision():
    node = OmegaConf.create({"warmup": 3, "iters": 10, "min_iters": 2, "max_iters": 500,
                             "min_time_s": 9.0, "max_time_s": 60, "precision": 0.01})
    b = BenchBudget.from_config(node)
    assert (b.warmup, b.min_iters, b.max_iters, b.min_time_s, b.precision) == (3, 10, 10, 0.0, None)
    result, _ = timed_calls([0.0] + [0.0] * 3 + [0.01, 0.05] * 10, b)
    assert result.latency.count == 10 and result.stop["reason"] == "max_iters"


def test_adaptive_budget_reads_every_key():
    node = OmegaConf.create({"warmup": 1, "iters": None, "min_iters": 4, "max_iters": 40,
                             "min_time_s": 0.5,
                             "max_time_s": 9, "stability": None, "precision": 0.02,
                             "warmup_max": 12, "warmup_tolerance": 0.1, "warmup_patience": 3})
    assert BenchBudget.from_config(node).to_dict() == {
        "warmup": 1, "min_iters": 4, "max_iters": 40, "min_time_s": 0.5, "max_time_s": 9.0,
        "stability": None,
        "precision": 0.02, "warmup_max": 12, "warmup_tolerance": 0.1, "warmup_patience": 3,
        "protocol": "adaptive"}


@pytest.mark.parametrize("key, value, allowed", [
    ("min_iters", 0, ">= 1"), ("max_iters", 2, ">= bench.min_iters"), ("max_time_s", 0, "> 0"),
    ("stability", -0.1, "ratio > 0"), ("warmup", -1, ">= 0"), ("min_time_s", -1, ">= 0"),
    ("precision", 0.0, "ratio in (0, 1)"), ("precision", 1.5, "ratio in (0, 1)"),
    ("warmup_max", -1, ">= 0"),
    ("warmup_tolerance", 1.0, "ratio in [0, 1)"), ("warmup_patience", 0, ">= 1"),
])
def test_bad_budget_values_name_the_key_and_what_is_allowed(key, value, allowed):
    kw = dict(warmup=1, min_iters=3, max_iters=10, min_time_s=0.0, max_time_s=10.0, stability=0.05)
    kw[key] = value
    with pytest.raises(ConfigError) as err:
        BenchBudget(**kw)
    assert f"bench.{key}={value!r}" in str(err.value) and allowed in str(err.value)


def test_bad_iters_is_a_config_error():
    with pytest.raises(ConfigError, match="bench.iters=0"):
        BenchBudget.from_config(OmegaConf.create({"iters": 0}))


def test_stop_rule_median_and_interval_are_those_of_the_samples_in_call_order():
    rule = StopRule(budget())
    values = [5.0, 1.0, 4.0, 2.0, 9.0, 3.0, 7.0]
    for v in values:
        rule.add(v)
    assert rule.median() == np.median(values) and rule.interval() == Interval.of(values)


def test_adaptive_warmup_goes_on_until_the_calls_stop_getting_faster():
    compile_then_steady = [5.0, 2.0, 1.0, 0.5, 0.1, 0.1, 0.1] + [0.01] * 10 + [0.1] * 20
    result, calls = timed_calls(compile_then_steady, budget(warmup=1, warmup_max=20, min_iters=3))
    warm = result.warmup
    assert warm["reason"] == "plateau"
    assert warm["calls"] == 6, "two calls in a row no faster than the best"
    assert warm["calls_ms"] == pytest.approx([2000.0, 1000.0, 500.0, 100.0, 100.0, 100.0])
    assert result.samples_ms == pytest.approx([10.0] * 3), "warm-up calls never reach the samples"
    assert len(calls) == 1 + 6 + 3


def test_adaptive_warmup_stops_at_its_cap_when_calls_keep_getting_faster():
    faster = [10.0 * 0.5 ** i for i in range(12)] + [0.001] * 5
    result, _ = timed_calls(faster, budget(warmup=2, warmup_max=6, min_iters=3))
    assert result.warmup["reason"] == "warmup_max" and result.warmup["calls"] == 6


def test_adaptive_warmup_runs_at_least_warmup_calls():
    flat = [0.01] * 20
    result, _ = timed_calls(flat, budget(warmup=4, warmup_max=10, min_iters=3))
    assert result.warmup["reason"] == "plateau" and result.warmup["calls"] == 4


def test_fixed_warmup_without_warmup_max():
    result, _ = timed_calls([1.0, 0.5, 0.2, 0.1] + [0.01] * 5, budget(warmup=2, min_iters=3))
    assert result.warmup["reason"] == "fixed"
    assert result.warmup["calls_ms"] == pytest.approx([500.0, 200.0])


def test_the_warmup_lands_in_the_record_section():
    result, _ = timed_calls([0.1] * 10, budget(warmup=1, warmup_max=3, min_iters=3))
    section = result.to_dict(items_per_call=1, unit="images")
    assert section["warmup"]["calls_ms"] == result.warmup["calls_ms"]
    assert section["warmup"]["max"] == 3
    assert section["stop"]["reason"] == "min_reached" and "ci_rel_half_width" in section["stop"]


def test_adaptive_warmup_never_spends_more_than_the_timed_budget():
    faster = [100.0] + [10.0 * 0.5 ** i for i in range(12)] + [0.001] * 5
    result, _ = timed_calls(faster, budget(warmup=1, warmup_max=12, min_iters=3, max_time_s=14.0))
    assert result.warmup["reason"] == "max_time_s"
    assert result.warmup["calls"] == 2, "10 s + 5 s >= 14 s"


def test_warmup_zero_means_no_warmup_even_with_a_cap():
    result, calls = timed_calls([0.5] + [0.01] * 5, budget(warmup=0, warmup_max=10, min_iters=3))
    assert result.warmup["calls"] == 0 and result.warmup["reason"] == "fixed" and len(calls) == 4
