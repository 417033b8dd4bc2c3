"""The sign test on interleaved block pairs, as pure functions of two lists of block medians.

An interleaved run (:mod:`ascendbench.bench.interleave`) leaves one block median per side and pair; pair ``i``
of A and pair ``i`` of B ran next to each other, under the same state of the host. The test is the sign test on
their log ratios (distribution-free: a pair that straddles a change of the host's state gives one wild ratio,
which counts once, like any other). Both the regression gate (:mod:`ascendbench.report.paired`) and the job's
A/B of its patches against none (:mod:`ascendbench.job.ab`) read them from here.
"""

from __future__ import annotations

import math
from typing import Sequence

from ascendbench.bench.stats import median_ci_ranks

PAIRED_TEST = "sign test on interleaved block pairs"
# Fewest pairs for the paired test (the sign test's 95% interval of a median needs 6).
MIN_PAIRS = 6
# Exact binomial tail up to this many pairs, normal approximation above.
EXACT_MAX = 1000


def sign_p(slower: int, total: int) -> float:
    """One-sided p of the sign test: P(at least ``slower`` of ``total`` fair coin flips come up "slower").

    >>> round(sign_p(9, 10), 6), sign_p(0, 0)
    (0.010742, 1.0)
    """
    if total == 0:
        return 1.0
    if total > EXACT_MAX:  # normal approximation with continuity correction
        z = (slower - 0.5 - total / 2.0) / (math.sqrt(total) / 2.0)
        return 0.5 * math.erfc(z / math.sqrt(2.0))
    return sum(math.comb(total, k) for k in range(slower, total + 1)) / 2.0 ** total


def paired_shift(old: Sequence[float], new: Sequence[float]) -> tuple[float, float | None, float | None, float]:
    """(NEW/OLD - 1 of the median pair, its 95% interval's low and high (``None`` below 6 pairs), one-sided p).

    >>> shift, low, high, p = paired_shift([1.0] * 8, [1.05, 1.04, 1.06, 1.05, 1.05, 1.03, 1.07, 1.05])
    >>> round(shift, 3), round(low, 3), round(high, 3), round(p, 4)
    (0.05, 0.03, 0.07, 0.0039)
    """
    logs = sorted(math.log(b / a) for a, b in zip(old, new, strict=True))
    n, mid = len(logs), len(logs) // 2
    median = logs[mid] if n % 2 else 0.5 * (logs[mid - 1] + logs[mid])
    slower, untied = sum(d > 0 for d in logs), sum(d != 0 for d in logs)
    ranks = median_ci_ranks(n)
    low, high = (None, None) if ranks is None else (math.expm1(logs[ranks[0] - 1]), math.expm1(logs[ranks[1] - 1]))
    return math.expm1(median), low, high, sign_p(slower, untied)
