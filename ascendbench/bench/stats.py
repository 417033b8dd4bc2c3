"""Latency statistics, the median's 95% interval, the shift of two medians (docs/performance.md)."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
from scipy.special import bdtr, stdtrit

BLOCKS = 8  # the timed calls are cut into this many consecutive blocks (fewer below 16 calls)
MIN_CALLS = 6  # fewest calls with an interval: 3 blocks of 2
MIN_EARLIER = 3  # fewest earlier runs whose spread enters the interval
RUNS_CAP = 10.0  # earlier runs spread beyond this many times the calls' spread are set aside


def t_quantile(p: float, dof: float) -> float:
    """Student's t quantile by ``scipy.special.stdtrit`` (scipy.stats costs 0.5 s of import)."""
    return float(stdtrit(dof, p))


def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks ``(j, n + 1 - j)`` of the order statistics bounding the median of ``n`` values
    with ``level`` (the sign test's, from Binomial(n, 1/2)); None when ``[min, max]`` falls short.
    >>> median_ci_ranks(10), median_ci_ranks(5)
    ((2, 9), None)"""
    tails = bdtr(np.arange(n // 2 + 1), n, 0.5)  # P(B <= i)
    j = int(np.searchsorted(tails, (1.0 - level) / 2.0, side="right"))
    return (j, n + 1 - j) if j >= 1 else None


@dataclass(frozen=True)
class Interval:
    """The 95% interval of a rerun's median, ``median * exp(+- t(0.975, dof) sqrt(2) se)``."""

    median_ms: float
    calls_sd: float
    block_calls: tuple[int, ...]
    block_medians_ms: tuple[float, ...]
    earlier_ms: tuple[float, ...] = ()

    @classmethod
    def of(cls, samples_ms: Sequence[float], earlier_ms: Sequence[float] = ()) -> Interval | None:
        """From the calls in call order and earlier medians; None below 6 calls or a call <= 0."""
        if len(samples_ms) < MIN_CALLS or min(samples_ms) <= 0:
            return None
        ms = np.asarray(samples_ms, dtype=np.float64)
        p25, p75 = np.percentile(np.log(ms), [25, 75])
        parts = np.array_split(ms, min(BLOCKS, ms.size // 2))
        return cls(float(np.median(ms)), float(p75 - p25) / 1.349, tuple(p.size for p in parts),
                   tuple(float(np.median(p)) for p in parts), tuple(earlier_ms))

    @property
    def own(self) -> tuple[float, int]:
        """``(se, dof)`` of this run's calls: sd of the log block medians / sqrt(blocks)."""
        k = len(self.block_medians_ms)
        return statistics.stdev(np.log(self.block_medians_ms)) / math.sqrt(k), k - 1

    @property
    def runs_sd(self) -> float | None:
        """The sd of the earlier runs' log medians (uncapped); None below ``MIN_EARLIER``."""
        if len(self.earlier_ms) < MIN_EARLIER:
            return None
        return statistics.stdev(np.log(self.earlier_ms))

    @property
    def set_aside(self) -> bool:
        """True when the earlier runs spread beyond ``RUNS_CAP`` times this run's calls: unused."""
        return self.runs_sd is not None and self.runs_sd > RUNS_CAP * self.calls_sd

    @property
    def term(self) -> tuple[str, float, int]:
        """``(used, se, dof)``: ``blocks`` (this run's calls) or ``runs`` (earlier runs)."""
        own, runs = self.own, self.runs_sd
        if runs is not None and not self.set_aside and runs > own[0]:
            return "runs", runs, len(self.earlier_ms) - 1
        return ("blocks", *own)

    def rel_half_width(self, own: bool = False) -> float:
        """``exp(t * sqrt(2) * se) - 1`` of the interval, or (``own``) of this run's calls."""
        se, dof = self.own if own else self.term[1:]
        return math.expm1(t_quantile(0.975, dof) * math.sqrt(2.0) * se)

    def limits(self) -> tuple[float, float]:
        """``(low_ms, high_ms)``."""
        factor = 1.0 + self.rel_half_width()
        return self.median_ms / factor, self.median_ms * factor

    def to_dict(self) -> dict[str, Any]:
        """The record's ``bench.interval``."""
        (used, se, dof), (low, high) = self.term, self.limits()
        entry = {"low_ms": low, "high_ms": high, "rel_half_width": self.rel_half_width(),
                 "used": used, "se_log": se, "dof": dof,
                 "own_rel_half_width": self.rel_half_width(own=True),
                 "blocks": {"calls": list(self.block_calls),
                            "medians_ms": list(self.block_medians_ms)}}
        if self.runs_sd is not None:
            entry["runs"] = {"earlier_ms": list(self.earlier_ms), "sd_log": self.runs_sd,
                             "set_aside": self.set_aside}
        return entry


@dataclass(frozen=True)
class LatencyStats:
    """Per-call latencies in ms; ``median_ci95_*_ms`` is the :class:`Interval` (None below 6)."""

    count: int
    mean_ms: float
    median_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    p25_ms: float
    p75_ms: float
    iqr_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    cv: float
    iqr_over_median: float
    median_ci95_low_ms: float | None
    median_ci95_high_ms: float | None

    @classmethod
    def from_ms(cls, samples_ms: Sequence[float], earlier_ms: Sequence[float] = ()) -> LatencyStats:
        """From samples in ms in call order (at least one) and the earlier runs' medians.
        >>> s = LatencyStats.from_ms([1.0, 2.0, 3.0, 4.0])
        >>> s.median_ms, s.iqr_ms, round(s.p99_ms, 6)
        (2.5, 1.5, 3.97)"""
        if len(samples_ms) == 0:
            raise ValueError("LatencyStats needs at least one sample")
        ms = np.asarray(samples_ms, dtype=np.float64)
        p25, median, p75, p90, p95, p99 = np.percentile(ms, [25, 50, 75, 90, 95, 99]).tolist()
        mean, std = float(ms.mean()), float(ms.std(ddof=1)) if ms.size > 1 else 0.0
        found = Interval.of(samples_ms, earlier_ms)
        low, high = found.limits() if found else (None, None)
        return cls(count=int(ms.size), mean_ms=mean, median_ms=median, min_ms=float(ms.min()),
                   max_ms=float(ms.max()), std_ms=std, p25_ms=p25, p75_ms=p75, iqr_ms=p75 - p25,
                   p90_ms=p90, p95_ms=p95, p99_ms=p99, cv=std / mean if mean > 0 else 0.0,
                   iqr_over_median=(p75 - p25) / median if median > 0 else 0.0,
                   median_ci95_low_ms=low, median_ci95_high_ms=high)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the record."""
        return asdict(self)


def noise_verdict(stats: LatencyStats, threshold: float,
                  interval: Interval | None = None) -> dict[str, Any]:
    """``bench.noise``: ``noisy`` when IQR/median > ``threshold`` or earlier runs set aside."""
    ratio = stats.iqr_over_median
    noisy = stats.count >= 4 and ratio > threshold
    warning = runs = None
    if noisy:
        warning = (f"noisy timing: IQR/median {ratio:.1%} > {threshold:.0%} over {stats.count} "
                   "timed calls; the median is less trustworthy (close other work on the "
                   "host/device, raise bench.min_time_s or bench.max_iters, or pin the device)")
    if interval is not None and interval.set_aside:
        runs = (f"reruns move: the workload's {len(interval.earlier_ms)} earlier run medians on "
                f"this host spread {interval.runs_sd:.1%} (sd of logs), beyond {RUNS_CAP:g}x the "
                f"spread of this run's calls ({interval.calls_sd:.1%}), and are set aside (a host "
                "that switches state between runs, or a history written by someone else: check "
                "bench.history.dir, or time two variants interleaved with bench.ab)")
    return {"iqr_over_median": ratio, "threshold": threshold, "noisy": noisy or runs is not None,
            "warning": warning, "runs_warning": runs}


@dataclass(frozen=True)
class Shift:
    """NEW vs OLD as ``log(median ratio)``, bounded by Student's t (se, dof) or a sign test."""

    log: float
    se: float = 0.0
    dof: float = math.inf
    how: str = "medians only"
    pairs: tuple[float, ...] = ()  # sorted log ratios NEW/OLD of interleaved block pairs

    @classmethod
    def paired(cls, old: Sequence[float], new: Sequence[float]) -> Shift:
        """Median log ratio of an interleaved run's block medians, pair by pair; sign-test bounds.
        >>> s = Shift.paired([1.0] * 8, [1.05, 1.04, 1.06, 1.05, 1.05, 1.03, 1.07, 1.05])
        >>> [round(v, 3) for v in (math.expm1(s.log), *s.bounds(0.05))]
        [0.05, 0.04, 0.06]"""
        logs = sorted(math.log(b / a) for a, b in zip(old, new, strict=True))
        how = f"sign test on {len(logs)} interleaved block pairs"
        return cls(statistics.median(logs), how=how, pairs=tuple(logs))

    @classmethod
    def apart(cls, old: tuple[float, Interval | None], new: tuple[float, Interval | None]) -> Shift:
        """From two runs timed apart, ``(median, Interval or None)`` each: Welch's t."""
        terms = [i.term[1:] for _, i in (old, new) if i is not None and i.term[1] > 0]
        var = sum(se ** 2 for se, _ in terms)
        dof = var ** 2 / sum(se ** 4 / d for se, d in terms) if terms else math.inf
        sides = [name for name, (_, i) in (("OLD", old), ("NEW", new)) if i is not None]
        how = f"t on the intervals of {' and '.join(sides)}" if sides else "medians only"
        return cls(math.log(new[0] / old[0]), math.sqrt(var), dof, how)

    def bounds(self, alpha: float) -> tuple[float, float]:
        """One-sided ``1 - alpha`` lower and upper bounds of NEW/OLD - 1 (a ``1 - 2 alpha`` CI)."""
        if self.pairs:
            ranks = median_ci_ranks(len(self.pairs), 1.0 - 2.0 * alpha)
            if ranks is None:
                return -1.0, math.inf
            return math.expm1(self.pairs[ranks[0] - 1]), math.expm1(self.pairs[ranks[1] - 1])
        half = t_quantile(1.0 - alpha, self.dof) * self.se if self.se > 0 else 0.0
        return math.expm1(self.log - half), math.expm1(self.log + half)

    def slower(self, alpha: float, min_effect: float) -> bool:
        """The rule: the lower bound of NEW/OLD - 1 exceeds ``min_effect``."""
        return self.bounds(alpha)[0] > min_effect

    def faster(self, alpha: float, min_effect: float) -> bool:
        """The rule the other way round: OLD/NEW - 1 at NEW's upper bound exceeds ``min_effect``."""
        return 1.0 / (1.0 + self.bounds(alpha)[1]) - 1.0 > min_effect

    def text(self, alpha: float) -> str:
        """``+10.2% (90% CI +7.9% .. +12.4%), <how>``."""
        (low, high), tested = self.bounds(alpha), self.se > 0 or self.pairs
        ci = f" ({1 - 2 * alpha:.0%} CI {low:+.1%} .. {high:+.1%})" if tested else ""
        return f"{math.expm1(self.log):+.1%}{ci}, {self.how}"
