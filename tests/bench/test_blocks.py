"""The median's interval from blocks of timed calls, on a fake clock whose level drifts between blocks.

Consecutive calls on a real host share its state of the moment; the fake timer here reproduces that: a call's
time is ``level * noise``, the level held for a few calls and then redrawn. Its long-run median is exactly 1 ms
(log-level and log-noise are centred normals), so every run's recorded 95% interval can be checked for covering
it. Many seeded runs give the coverage figures.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from scipy import stats as scipy_stats

from ascendbench.bench import blocks, summary
from ascendbench.bench.blocks import (
    BLOCKS,
    between_interval,
    block_medians,
    block_sizes,
    interval_section,
    t975,
    within_interval,
)
from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.loop import BenchLoop

from helpers.timing import FakeClock, HostOnlyAdapter

TRIALS = 100


def test_docstring_examples_hold():
    assert doctest.testmod(blocks).failed == 0
    assert doctest.testmod(summary).failed == 0


@pytest.mark.parametrize("dof", [1, 2, 7, 30, 31, 60, 500])
def test_t_quantiles_match_scipy(dof):
    assert t975(dof) == pytest.approx(scipy_stats.t.ppf(0.975, dof), rel=1e-4)


def test_blocks_are_consecutive_and_match_numpy_array_split():
    samples = np.random.default_rng(0).lognormal(0.0, 0.1, 37).tolist()
    parts = np.array_split(np.array(samples), 8)
    assert block_sizes(37, 8) == [len(p) for p in parts]
    assert block_medians(samples, 8) == pytest.approx([float(np.median(p)) for p in parts])


def test_exchangeable_median_var_is_the_bootstrap_variance_of_a_block_median():
    rng = np.random.default_rng(3)
    calls = np.sort(rng.lognormal(0.0, 0.5, 120))  # skewed, as a host's call times are
    draws = np.median(rng.choice(calls, size=(40000, 9)), axis=1)  # resampled blocks of 9 calls
    assert blocks.exchangeable_median_var(calls.tolist(), 9) == pytest.approx(draws.var(), rel=0.05)


def _reference_half(samples: np.ndarray, k: int) -> float:
    """exp(t * sqrt(s_b^2 / k + max(0, s_b^2 - s_w^2))) - 1, on the logs; s_w^2 from scipy's beta distribution over all
    the calls."""
    logs = np.log([np.median(p) for p in np.array_split(samples, k)])
    between = logs.var(ddof=1)
    x = np.log(np.sort(samples))
    a = (samples.size / k + 1) / 2
    w = np.diff(scipy_stats.beta.cdf(np.linspace(0, 1, x.size + 1), a, a))
    chance = w @ x ** 2 - (w @ x) ** 2
    return np.expm1(scipy_stats.t.ppf(0.975, k - 1) * np.sqrt(between / k + max(0.0, between - chance)))


def test_between_interval_is_t_on_the_block_medians_with_the_level_term_the_wider_of_two_lengths():
    samples = 1.0 + 0.05 * np.sin(np.arange(64) / 20.0) + np.random.default_rng(4).normal(0, 0.01, 64)
    median = float(np.median(samples))
    got = between_interval(samples.tolist(), median)
    assert got.rel_half_width == pytest.approx(max(_reference_half(samples, k) for k in (8, 4)), rel=1e-4)
    assert got.level_rel_half_width > 0, "a slow sine over the run: the level moves"
    assert between_interval(samples[:5].tolist(), median) is None, "2 blocks: no interval"


def test_the_chi2_point_of_the_disagreement_test_is_close_above_scipys():
    for dof in (1, 3, 7, 30):
        exact = scipy_stats.chi2.ppf(0.999, dof) / dof
        assert exact <= blocks.chi2_ratio_999(dof) <= 1.031 * exact


def test_the_record_section_keeps_both_intervals_and_the_block_medians():
    samples = [1.0, 1.1] * 8 + [2.0, 2.1] * 8  # the level doubles half-way: the blocks disagree
    section = interval_section(samples, float(np.median(samples)))
    assert section["used"] == "between"
    assert section["between"]["rel_half_width"] > 2 * section["within"]["rel_half_width"]
    assert section["blocks"]["calls"] == [4] * BLOCKS and len(section["blocks"]["medians_ms"]) == BLOCKS
    assert within_interval(sorted(samples[:5]), 1.0) is None


def _drifting_run(seed: int, hold: int, level_sigma: float, noise_sigma: float = 0.01):
    """The timing loop (precision 1%) on a fake timer whose level is redrawn every ``hold`` calls."""
    rng = np.random.default_rng(seed)
    levels = np.repeat(rng.lognormal(0.0, level_sigma, 5000 // hold + 1), hold)[:5000]
    durations = iter([1e-3] + (1e-3 * levels * rng.lognormal(0.0, noise_sigma, 5000)).tolist())
    clock = FakeClock()

    def call():
        clock.now += next(durations)

    budget = BenchBudget(warmup=0, min_iters=5, max_iters=4000, max_time_s=1000.0, precision=0.01)
    return BenchLoop(HostOnlyAdapter(), budget, clock=clock).run(call)


def _covers(low: float, high: float) -> bool:
    return low <= 1.0 <= high


def test_on_a_drifting_clock_the_old_interval_under_covers_and_the_new_one_covers():
    runs = [_drifting_run(seed, hold=4, level_sigma=0.02) for seed in range(TRIALS)]
    old = np.mean([_covers(r.interval["within"]["low_ms"], r.interval["within"]["high_ms"]) for r in runs])
    new = np.mean([_covers(r.latency.median_ci95_low_ms, r.latency.median_ci95_high_ms) for r in runs])
    # Measured over these 100 seeds: within (order statistics of the calls) 75%, the honest interval 92%.
    assert old <= 0.82, f"the calls-only interval should under-cover a drifting level, covered {old:.0%}"
    assert new >= 0.88, f"the interval with the between-block spread should cover, covered {new:.0%}"
    assert all(r.stop["ci_source"] in ("within", "between") for r in runs)
    assert np.mean([r.interval["used"] == "between" for r in runs]) > 0.5
    drifting = [r for r in runs if r.noise["drifting"]]
    assert drifting and all("drifting timing" in r.noise["drift_warning"] and r.noise["noisy"] for r in drifting)


def test_on_a_stable_clock_the_interval_stays_tight():
    """Independent calls: the new interval covers as the old one did, at a similar count of calls."""
    runs = [_drifting_run(seed, hold=1, level_sigma=0.0, noise_sigma=0.03) for seed in range(TRIALS // 2)]
    new = np.mean([_covers(r.latency.median_ci95_low_ms, r.latency.median_ci95_high_ms) for r in runs])
    ratio = np.median([r.interval["between"]["rel_half_width"] / r.interval["within"]["rel_half_width"]
                       for r in runs])
    assert new >= 0.9 and ratio < 1.5, (new, ratio)
    assert np.mean([r.noise["drifting"] for r in runs]) <= 0.1, "no drift warning on a stable clock"


def test_the_summary_says_which_interval_and_warns_of_drift():
    run = next(r for r in (_drifting_run(seed, hold=4, level_sigma=0.02) for seed in range(20)) if r.noise["drifting"])
    lines = summary.bench_lines({**run.to_dict(1, "images"), "flops": {}})
    assert "between blocks (+-" in lines[0] and "; within +-" in lines[0]
    assert any(line.startswith("warning   drifting timing: the block medians disagree") for line in lines)
