"""The stop rules of the timed loop, driven by a fake clock (no wall-clock time involved)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ascendbench.bench.budget import BenchBudget, StopRule
from ascendbench.bench.loop import BenchLoop
from ascendbench.errors import ConfigError


class FakeClock:
    """A clock that only moves when a fake call runs."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class HostOnlyAdapter:
    """A CPU-like adapter: no events, synchronize is a no-op; counts what the loop asks of it."""

    name = "fake"

    def __init__(self):
        self.log = []

    def synchronize(self):
        self.log.append("sync")

    def new_event(self):
        return None

    def reset_peak_memory(self):
        self.log.append("reset_peak")

    def peak_memory_mb(self):
        return {"peak_rss_mb": 1.0, "scope": "fake"}


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
    base = dict(warmup=0, min_iters=3, max_iters=10, min_time_s=0.0, max_time_s=1000.0, stability=None)
    return BenchBudget(**{**base, **kw})


def test_without_stability_the_loop_stops_once_the_minimums_are_met():
    result, calls = timed_calls([1.0] + [0.01] * 50, budget(min_iters=4))
    assert result.stop["reason"] == "min_reached" and result.latency.count == 4
    assert result.cold_ms == pytest.approx(1000.0), "the first call is timed apart as cold"
    assert result.samples_ms == pytest.approx([10.0] * 4)


def test_min_time_keeps_short_calls_going_past_min_iters():
    result, _ = timed_calls([0.0] + [0.125] * 100, budget(min_iters=2, max_iters=100, min_time_s=1.0))
    assert result.latency.count == 8 and result.stop["reason"] == "min_reached"


def test_max_iters_caps_a_loop_that_never_stabilises():
    noisy = [0.0] + [0.01, 0.05] * 50
    result, _ = timed_calls(noisy, budget(min_iters=3, max_iters=9, stability=0.05))
    assert result.latency.count == 9 and result.stop["reason"] == "max_iters"
    assert result.noise["noisy"] is True


def test_max_time_wins_over_min_iters_for_long_calls():
    result, _ = timed_calls([0.0] + [10.0] * 20, budget(min_iters=5, max_iters=20, max_time_s=25.0))
    assert result.latency.count == 3 and result.stop["reason"] == "max_time_s"
    assert result.stop["timed_s"] == pytest.approx(30.0)


def test_stability_stops_early_once_iqr_over_median_is_small():
    steady = [0.0, 0.02, 0.05, 0.01] + [0.010] * 50  # a noisy start, then steady
    result, _ = timed_calls(steady, budget(min_iters=3, max_iters=50, stability=0.05))
    assert result.stop["reason"] == "stable"
    assert 5 <= result.latency.count < 50
    assert result.latency.iqr_over_median <= 0.05


def test_stability_is_not_judged_on_fewer_than_five_samples():
    result, _ = timed_calls([0.0] + [0.01] * 20, budget(min_iters=1, max_iters=20, stability=0.05))
    assert result.latency.count == 5 and result.stop["reason"] == "stable"


def test_warmup_calls_run_untimed_between_cold_and_timed_calls():
    result, calls = timed_calls([0.5, 9.0, 9.0] + [0.01] * 10, budget(warmup=2, min_iters=3))
    assert len(calls) == 1 + 2 + 3
    assert result.samples_ms == pytest.approx([10.0] * 3), "warmup durations never reach the samples"
    assert result.first_outputs == {"n": 1}, "outputs come from the cold call"


def test_iters_fixes_the_count_and_turns_off_time_minimum_and_stability():
    node = OmegaConf.create({"warmup": 3, "iters": 10, "min_iters": 2, "max_iters": 500, "min_time_s": 9.0,
                             "max_time_s": 60, "stability": 0.05})
    b = BenchBudget.from_config(node)
    assert (b.warmup, b.min_iters, b.max_iters, b.min_time_s, b.stability) == (3, 10, 10, 0.0, None)
    result, _ = timed_calls([0.0] + [0.01, 0.05] * 10, b)
    assert result.latency.count == 10 and result.stop["reason"] == "max_iters"


def test_adaptive_budget_reads_every_key():
    node = OmegaConf.create({"warmup": 1, "iters": None, "min_iters": 4, "max_iters": 40, "min_time_s": 0.5,
                             "max_time_s": 9, "stability": 0.03})
    assert BenchBudget.from_config(node).to_dict() == {"warmup": 1, "min_iters": 4, "max_iters": 40,
                                                       "min_time_s": 0.5, "max_time_s": 9.0, "stability": 0.03}


@pytest.mark.parametrize("key, value, allowed", [
    ("min_iters", 0, ">= 1"), ("max_iters", 2, ">= bench.min_iters"), ("max_time_s", 0, "> 0"),
    ("stability", -0.1, "ratio > 0"), ("warmup", -1, ">= 0"), ("min_time_s", -1, ">= 0"),
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


def test_stop_rule_percentiles_match_numpy():
    import numpy as np

    rule = StopRule(budget())
    values = [5.0, 1.0, 4.0, 2.0, 9.0, 3.0, 7.0]
    for v in values:
        rule.add(v)
    p25, p50, p75 = np.percentile(values, [25, 50, 75])
    assert rule.iqr_over_median() == pytest.approx((p75 - p25) / p50)
