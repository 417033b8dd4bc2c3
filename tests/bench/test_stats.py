"""Latency statistics against numpy, and the median's interval and the gate's shift against
scipy.stats."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from ascendbench.bench import stats
from ascendbench.bench.stats import (
    Interval,
    LatencyStats,
    Shift,
    median_ci_ranks,
    noise_verdict,
    t_quantile,
)

SKEWED_MS = [10.0, 10.2, 10.1, 9.9, 10.0, 30.0, 10.3, 9.8, 10.1, 55.0, 10.0, 10.2]


def test_docstring_examples_hold():
    assert doctest.testmod(stats).failed == 0


def test_every_statistic_matches_numpy_on_a_skewed_sample():
    s = LatencyStats.from_ms(SKEWED_MS)
    x = np.array(SKEWED_MS)
    p25, p75 = np.percentile(x, 25), np.percentile(x, 75)
    expected = {
        "count": 12, "mean_ms": x.mean(), "median_ms": np.median(x), "min_ms": x.min(),
        "max_ms": x.max(),
        "std_ms": x.std(ddof=1), "p25_ms": p25, "p75_ms": p75, "iqr_ms": p75 - p25,
        "p90_ms": np.percentile(x, 90), "p95_ms": np.percentile(x, 95),
        "p99_ms": np.percentile(x, 99),
        "cv": x.std(ddof=1) / x.mean(), "iqr_over_median": (p75 - p25) / np.median(x),
    }
    for key, value in expected.items():
        assert getattr(s, key) == pytest.approx(value, rel=1e-12), key
    found = Interval.of(SKEWED_MS)
    assert (s.median_ci95_low_ms, s.median_ci95_high_ms) == found.limits()


def test_one_sample_has_zero_spread_and_no_interval():
    s = LatencyStats.from_ms([4.0])
    assert (s.count, s.median_ms, s.std_ms, s.iqr_ms, s.cv) == (1, 4.0, 0.0, 0.0, 0.0)
    assert s.median_ci95_low_ms is None and s.median_ci95_high_ms is None
    with pytest.raises(ValueError):
        LatencyStats.from_ms([])


@pytest.mark.parametrize("dof", [1, 2, 7, 30, 500, 7.5])
def test_t_quantiles_are_scipys(dof):
    assert t_quantile(0.975, dof) == pytest.approx(scipy_stats.t.ppf(0.975, dof), rel=1e-12)


@pytest.mark.parametrize("n", [5, 6, 10, 20, 50, 100, 999, 5000])
def test_median_ci_ranks_are_the_binomial_ones(n):
    """The widest j with P(Binomial(n, 1/2) <= j - 1) <= 2.5%: 1 - 2 P(...) >= 95%."""
    ranks = median_ci_ranks(n)
    j = int(scipy_stats.binom.ppf(0.025, n, 0.5))
    j = j + 1 if scipy_stats.binom.cdf(j, n, 0.5) <= 0.025 else j
    assert ranks == ((j, n + 1 - j) if j >= 1 else None)
    assert median_ci_ranks(10) == (2, 9) and median_ci_ranks(100) == (40, 61)


def test_the_interval_is_t_on_the_log_block_medians_for_a_rerun():
    """median * exp(+- t(0.975, k - 1) * sqrt(2) * sd(log block medians) / sqrt(k)), 8 consecutive
    blocks."""
    samples = np.random.default_rng(0).lognormal(0.0, 0.1, 37)
    found = Interval.of(samples.tolist())
    parts = np.array_split(samples, 8)
    logs = np.log([np.median(p) for p in parts])
    half = scipy_stats.t.ppf(0.975, 7) * math.sqrt(2) * logs.std(ddof=1) / math.sqrt(8)
    assert found.block_calls == tuple(len(p) for p in parts)
    assert found.term[0] == "blocks"
    assert found.term[2] == 7
    assert found.limits() == pytest.approx(np.median(samples) * np.exp([-half, half]), rel=1e-12)
    assert found.rel_half_width() == pytest.approx(math.expm1(half))
    assert found.rel_half_width(own=True) == found.rel_half_width()
    assert Interval.of(samples[:7].tolist()).term[2] == 2, "7 calls: 3 blocks"
    assert Interval.of(samples[:5].tolist()) is None and Interval.of([1.0, 0.0] * 4) is None


def test_earlier_runs_widen_the_interval_by_their_spread_unless_set_aside():
    samples = (10.0 * np.random.default_rng(1).lognormal(0.0, 0.05, 64)).tolist()
    own = Interval.of(samples)
    earlier = [10.0, 10.5, 9.6, 10.2]
    wide = Interval.of(samples, earlier)
    sd = np.log(earlier).std(ddof=1)
    assert wide.term == ("runs", pytest.approx(sd), 3) and not wide.to_dict()["runs"]["set_aside"]
    half = scipy_stats.t.ppf(0.975, 3) * math.sqrt(2) * sd
    assert wide.rel_half_width() == pytest.approx(math.expm1(half))
    assert wide.rel_half_width(own=True) == pytest.approx(own.rel_half_width())
    few = Interval.of(samples, earlier[:2])
    assert few.term[0] == "blocks", "fewer than 3 earlier runs: no term"
    agreeing = Interval.of(samples, [10.0, 10.0001, 9.9999])
    assert agreeing.term == own.term
    assert agreeing.rel_half_width() == own.rel_half_width(), "never narrower"
    forged = Interval.of(samples, [0.01, 1000.0, 0.02, 900.0])
    assert forged.term == own.term and forged.to_dict()["runs"]["set_aside"]
    warning = noise_verdict(LatencyStats.from_ms(samples), 0.5, forged)["runs_warning"]
    assert "beyond 10x the spread of this run's calls" in warning and "bench.history.dir" in warning


def test_the_paired_bounds_are_the_sign_tests_order_statistics():
    """The one-sided 95% lower bound of the median log ratio is x_(j), j - 1 the largest count with
    P(Binomial(n, 1/2) <= j - 1) <= 5%: scipy's sign test rejects 'median < x_(j)' at 5%, not
    'median < x_(j+1)'."""
    rng = np.random.default_rng(2)
    old = rng.lognormal(0.0, 0.2, 30)
    new = old * rng.lognormal(0.04, 0.02, 30)
    shift = Shift.paired(old.tolist(), new.tolist())
    logs = np.sort(np.log(new / old))
    j = max(k for k in range(1, 16) if scipy_stats.binom.cdf(k - 1, 30, 0.5) <= 0.05)
    low, high = shift.bounds(0.05)
    assert (math.log1p(low),
            math.log1p(high)) == pytest.approx((logs[j - 1], logs[30 - j]), rel=1e-12)
    for rank, rejected in ((j, True), (j + 1, False)):
        p = scipy_stats.binomtest(int(np.sum(logs >= logs[rank - 1])), 30, 0.5,
                                  alternative="greater").pvalue
        assert bool(p <= 0.05) is rejected
    assert shift.log == pytest.approx(np.median(logs))
    assert "sign test on 30 interleaved block pairs" in shift.how
    assert shift.slower(0.05, 0.01) and not shift.slower(0.05, 0.05) and not shift.faster(0.05, 0.0)
    assert Shift.paired(new.tolist(), old.tolist()).faster(0.05, 0.01)
    nothing = Shift.paired([1.0] * 4, [2.0] * 4).bounds(0.05)
    assert nothing == (-1.0, math.inf), "4 pairs bound nothing"


def test_two_runs_apart_combine_their_errors_as_welch():
    a, b = Interval.of(list(np.linspace(9, 11, 40))), Interval.of(list(np.linspace(9.5, 12, 24)))
    shift = Shift.apart((10.0, a), (11.0, b))
    (_, sa, da), (_, sb, db) = a.term, b.term
    dof = (sa ** 2 + sb ** 2) ** 2 / (sa ** 4 / da + sb ** 4 / db)
    assert shift.se == pytest.approx(math.hypot(sa, sb)) and shift.dof == pytest.approx(dof)
    low = math.expm1(math.log(1.1) - scipy_stats.t.ppf(0.95, dof) * shift.se)
    assert shift.bounds(0.05)[0] == pytest.approx(low)
    bare = Shift.apart((10.0, None), (11.0, None))
    assert bare.se == 0 and bare.how == "medians only"
    assert bare.bounds(0.05) == pytest.approx((0.1, 0.1))
    assert Shift.apart((10.0, a), (11.0, None)).how == "t on the intervals of OLD"


def test_noise_verdict_warns_only_above_the_threshold():
    quiet = noise_verdict(LatencyStats.from_ms([10.0, 10.1, 9.9, 10.0, 10.05]), 0.10)
    assert quiet["noisy"] is False and quiet["warning"] is None and quiet["runs_warning"] is None
    noisy = noise_verdict(LatencyStats.from_ms([10.0, 14.0, 8.0, 12.0, 9.0, 15.0]), 0.10)
    assert noisy["noisy"] is True and noisy["threshold"] == 0.10
    assert "IQR/median" in noisy["warning"] and "> 10%" in noisy["warning"]
