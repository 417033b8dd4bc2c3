"""Latency statistics against numpy on known samples; the median CI against the binomial law."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ascendbench.bench.stats import LatencyStats, median_ci_ranks, noise_verdict

SKEWED_MS = [10.0, 10.2, 10.1, 9.9, 10.0, 30.0, 10.3, 9.8, 10.1, 55.0, 10.0, 10.2]


def test_every_statistic_matches_numpy_on_a_skewed_sample():
    s = LatencyStats.from_ms(SKEWED_MS)
    x = np.array(SKEWED_MS)
    p25, p75 = np.percentile(x, 25), np.percentile(x, 75)
    expected = {
        "count": 12, "mean_ms": x.mean(), "median_ms": np.median(x), "min_ms": x.min(), "max_ms": x.max(),
        "std_ms": x.std(ddof=1), "p25_ms": p25, "p75_ms": p75, "iqr_ms": p75 - p25,
        "p90_ms": np.percentile(x, 90), "p95_ms": np.percentile(x, 95), "p99_ms": np.percentile(x, 99),
        "cv": x.std(ddof=1) / x.mean(), "iqr_over_median": (p75 - p25) / np.median(x),
    }
    for key, value in expected.items():
        assert getattr(s, key) == pytest.approx(value, rel=1e-12), key


def test_seconds_and_milliseconds_constructors_agree():
    a = LatencyStats.from_seconds([v / 1e3 for v in SKEWED_MS])
    b = LatencyStats.from_ms(SKEWED_MS)
    for key, value in b.to_dict().items():
        assert getattr(a, key) == pytest.approx(value, rel=1e-12), key


def test_one_sample_has_zero_spread_and_no_interval():
    s = LatencyStats.from_ms([4.0])
    assert (s.count, s.median_ms, s.std_ms, s.iqr_ms, s.cv) == (1, 4.0, 0.0, 0.0, 0.0)
    assert s.median_ci95_low_ms is None and s.median_ci95_high_ms is None


def test_empty_samples_are_refused():
    with pytest.raises(ValueError):
        LatencyStats.from_ms([])


@pytest.mark.parametrize("n, ranks", [(6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (50, (18, 33)), (100, (40, 61))])
def test_median_ci_ranks_match_the_published_tables(n, ranks):
    assert median_ci_ranks(n) == ranks


@pytest.mark.parametrize("n", range(1, 80))
def test_median_ci_is_the_narrowest_interval_covering_95_percent(n):
    def coverage(j):  # P(x_(j) <= median <= x_(n+1-j)) = 1 - 2 P(Binomial(n, 1/2) <= j - 1)
        return 1 - 2 * sum(math.comb(n, i) for i in range(j)) / 2 ** n

    ranks = median_ci_ranks(n)
    if ranks is None:
        assert coverage(1) < 0.95
        return
    j = ranks[0]
    assert ranks[1] == n + 1 - j and coverage(j) >= 0.95
    assert j + 1 > n // 2 or coverage(j + 1) < 0.95


def test_median_ci_bounds_are_order_statistics_of_the_sample():
    samples = [float(v) for v in range(20, 0, -1)]  # 20 distinct values, given unsorted
    s = LatencyStats.from_ms(samples)
    assert (s.median_ci95_low_ms, s.median_ci95_high_ms) == (6.0, 15.0)
    assert s.median_ci95_low_ms <= s.median_ms <= s.median_ci95_high_ms


def test_noise_verdict_warns_only_above_the_threshold():
    quiet = noise_verdict(LatencyStats.from_ms([10.0, 10.1, 9.9, 10.0, 10.05]), 0.10)
    assert quiet["noisy"] is False and quiet["warning"] is None
    noisy = noise_verdict(LatencyStats.from_ms([10.0, 14.0, 8.0, 12.0, 9.0, 15.0]), 0.10)
    assert noisy["noisy"] is True and noisy["threshold"] == 0.10
    assert "IQR/median" in noisy["warning"] and "> 10%" in noisy["warning"]


def test_large_samples_use_the_normal_approximation_without_overflow():
    exact, approx = median_ci_ranks(1000), median_ci_ranks(1001)
    assert abs(exact[0] - approx[0]) <= 1, "no jump where the exact computation hands over"
    s = LatencyStats.from_ms([float(v) for v in range(5000)])
    assert s.median_ci95_low_ms < s.median_ms < s.median_ci95_high_ms
    assert (s.median_ci95_high_ms - s.median_ci95_low_ms) == pytest.approx(1.96 * 5000 ** 0.5, abs=3)
