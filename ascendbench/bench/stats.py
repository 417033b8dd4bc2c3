"""Latency statistics of a list of timed samples, and the noise verdict on them.

Percentiles use numpy's default linear interpolation; the 95% confidence interval of the median is
distribution-free (order statistics of a Binomial(n, 1/2)), so it holds for the skewed, heavy-tailed
latency distributions seen on shared hosts and accelerators alike.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

# Below this many samples no pair of order statistics covers the median with 95% probability.
MIN_CI_SAMPLES = 6
# Exact binomial ranks up to this many samples (2**n stays a finite float); normal approximation above.
EXACT_CI_MAX_SAMPLES = 1000
_Z = {0.95: 1.959963984540054, 0.99: 2.5758293035489004, 0.9: 1.6448536269514722}


@functools.lru_cache(maxsize=4096)
def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks ``(j, n + 1 - j)`` of the sorted samples bounding the median with ``level``.

    The interval ``[x_(j), x_(n+1-j)]`` covers the population median with probability
    ``1 - 2 * P(B <= j - 1)``, ``B ~ Binomial(n, 1/2)``; the narrowest ``j`` that still reaches
    ``level`` is returned, or ``None`` when even ``[min, max]`` falls short (n < 6 at 95%).

    >>> median_ci_ranks(10), median_ci_ranks(20)
    ((2, 9), (6, 15))
    """
    if n > EXACT_CI_MAX_SAMPLES:  # normal approximation of the binomial: exact enough, and O(1)
        z = _Z[level] if level in _Z else 1.959963984540054
        j = max(1, math.floor(n / 2.0 - z * math.sqrt(n) / 2.0))
        return (j, n + 1 - j)
    best = None
    tail = 0.0
    pmf = 0.5 ** n  # P(B = 0); the recurrence below walks P(B = k) in floats (n <= 1000: no underflow)
    for j in range(1, n // 2 + 1):
        tail += pmf  # P(B <= j - 1)
        if 1.0 - 2.0 * tail < level:
            break
        best = (j, n + 1 - j)
        pmf = pmf * (n - j + 1) / j
    return best


@dataclass(frozen=True)
class LatencyStats:
    """Summary of per-call latencies, in milliseconds unless the name says otherwise.

    ``cv`` is ``std_ms / mean_ms``; ``iqr_over_median`` is the noise measure the stability stop and the
    noise warning use; ``median_ci95_*_ms`` are ``None`` with fewer than 6 samples.
    """

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
    def from_ms(cls, samples_ms: Sequence[float]) -> "LatencyStats":
        """Build from samples in milliseconds (at least one).

        >>> s = LatencyStats.from_ms([1.0, 2.0, 3.0, 4.0])
        >>> s.median_ms, s.iqr_ms, round(s.p99_ms, 6)
        (2.5, 1.5, 3.97)
        """
        if len(samples_ms) == 0:
            raise ValueError("LatencyStats needs at least one sample")
        ms = np.asarray(samples_ms, dtype=np.float64)
        p25, median, p75, p90, p95, p99 = (float(v) for v in np.percentile(ms, [25, 50, 75, 90, 95, 99]))
        mean = float(ms.mean())
        std = float(ms.std(ddof=1)) if ms.size > 1 else 0.0
        ranks = median_ci_ranks(int(ms.size))
        ordered = np.sort(ms)
        return cls(
            count=int(ms.size), mean_ms=mean, median_ms=median, min_ms=float(ordered[0]),
            max_ms=float(ordered[-1]), std_ms=std, p25_ms=p25, p75_ms=p75, iqr_ms=p75 - p25,
            p90_ms=p90, p95_ms=p95, p99_ms=p99,
            cv=std / mean if mean > 0 else 0.0,
            iqr_over_median=(p75 - p25) / median if median > 0 else 0.0,
            median_ci95_low_ms=float(ordered[ranks[0] - 1]) if ranks else None,
            median_ci95_high_ms=float(ordered[ranks[1] - 1]) if ranks else None,
        )

    @classmethod
    def from_seconds(cls, samples: Sequence[float]) -> "LatencyStats":
        """Build from samples in seconds (at least one).

        >>> LatencyStats.from_seconds([0.001, 0.002, 0.003]).median_ms
        2.0
        """
        return cls.from_ms([s * 1e3 for s in samples])

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the record."""
        return asdict(self)


def noise_verdict(stats: LatencyStats, threshold: float) -> dict[str, Any]:
    """The record's noise entry: ``noisy`` when IQR/median exceeds ``threshold``, with a warning text."""
    ratio = stats.iqr_over_median
    noisy = stats.count >= 4 and ratio > threshold
    warning = None
    if noisy:
        warning = (f"noisy timing: IQR/median {ratio:.1%} > {threshold:.0%} over {stats.count} timed calls; "
                   "the median is less trustworthy (close other work on the host/device, raise "
                   "bench.min_time_s or bench.max_iters, or pin the device)")
    return {"iqr_over_median": ratio, "threshold": threshold, "noisy": noisy, "warning": warning}
