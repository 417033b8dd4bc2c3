"""Blocks of timed calls, and the median's interval from the spread between them (batch means).

Consecutive calls share the host's state of the moment (its clock speed, its other load, the device's
temperature): they are not independent, and the order-statistics interval of the median
(:func:`~ascendbench.bench.stats.median_ci_ranks`, here the **within** interval) is too narrow when the level
drifts during a run. The timed calls, in the order they ran, are therefore cut into ``k`` consecutive blocks
of near-equal size spread over the whole timed region (``k = min(BLOCKS, n // MIN_BLOCK_CALLS)``; as the
run grows the blocks grow, so they grow past the drift's time scale: consistent batch means). The
**between** interval is Student's t on the block medians::

    median +- t(0.975, k - 1) * sd(block medians) / sqrt(k)

the wider of ``k`` blocks and ``k // 2`` blocks twice as long (a two-level blocking: slow drift makes short
neighbouring blocks agree, longer ones still disagree). It widens when the blocks disagree (drift) and stays
as tight as the within one when they do not. The **honest** interval is the wider of the two (by relative
half-width): the record's ``median_ci95_*``, the stop rule and the summary use it, and ``bench.interval.used``
says which it was.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from ascendbench.bench.stats import median_ci_ranks

# Blocks a run is cut into at most; the precision stop waits until all of them exist.
BLOCKS = 8
# Fewest calls a block holds (so a block median is a median of something) and fewest blocks with an interval.
MIN_BLOCK_CALLS = 2
MIN_BLOCKS = 3
# Calls per block the precision stop waits for (BLOCKS * STOP_BLOCK_CALLS calls): shorter blocks sit inside one
# level of a drifting host and agree too well (measured on a drifting fake clock and on this host's matmul)
STOP_BLOCK_CALLS = 4
# t(0.975, dof) for dof = 1..30 (scipy.stats.t.ppf; checked against scipy in the tests).
_T975 = (12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252,
         2.306004135, 2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688,
         2.131449546, 2.119905299, 2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845,
         2.073873068, 2.068657610, 2.063898562, 2.059538553, 2.055529439, 2.051830516, 2.048407142,
         2.045229642, 2.042272456)
_Z975 = 1.959963984540054


def t975(dof: int) -> float:
    """The 97.5% quantile of Student's t with ``dof`` degrees of freedom (Cornish-Fisher above 30).

    >>> round(t975(7), 4), round(t975(100), 3)
    (2.3646, 1.984)
    """
    if dof < 1:
        raise ValueError("t975 needs dof >= 1")
    if dof <= len(_T975):
        return _T975[dof - 1]
    z = _Z975
    return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)


def block_count(n: int, blocks: int = BLOCKS) -> int:
    """How many blocks ``n`` calls are cut into: ``min(blocks, n // MIN_BLOCK_CALLS)``.

    >>> block_count(5), block_count(10), block_count(400)
    (2, 5, 8)
    """
    return min(blocks, n // MIN_BLOCK_CALLS)


def block_sizes(n: int, k: int) -> list[int]:
    """Sizes of ``k`` consecutive blocks covering ``n`` calls, the larger ones first (as ``numpy.array_split``).

    >>> block_sizes(10, 4)
    [3, 3, 2, 2]
    """
    base, extra = divmod(n, k)
    return [base + 1] * extra + [base] * (k - extra)


def block_medians(samples: Sequence[float], k: int) -> list[float]:
    """The median of each of ``k`` consecutive blocks of ``samples`` (in the order the calls ran)."""
    medians, start = [], 0
    for size in block_sizes(len(samples), k):
        medians.append(statistics.median(samples[start:start + size]))
        start += size
    return medians


@dataclass(frozen=True)
class Interval:
    """A 95% interval of the median: bounds in ms, the larger side relative to the median, and how it was made."""

    low_ms: float
    high_ms: float
    rel_half_width: float
    method: str

    def to_dict(self) -> dict[str, Any]:
        """The record's entry (``bench.interval.within`` / ``.between``)."""
        return {"low_ms": self.low_ms, "high_ms": self.high_ms, "rel_half_width": self.rel_half_width,
                "method": self.method}


def _interval(median: float, low: float, high: float, method: str) -> Interval | None:
    if median <= 0:
        return None
    return Interval(float(low), float(high), float(max(median - low, high - median) / median), method)


def within_interval(ordered: Sequence[float], median: float) -> Interval | None:
    """Order statistics of all calls (assumes independent calls); ``ordered`` is sorted. None below 6 calls."""
    ranks = median_ci_ranks(len(ordered))
    if ranks is None:
        return None
    return _interval(median, ordered[ranks[0] - 1], ordered[ranks[1] - 1],
                     f"order statistics of {len(ordered)} calls")


def _t_interval(samples: Sequence[float], median: float, k: int) -> Interval | None:
    medians = block_medians(samples, k)
    mean = sum(medians) / k
    sd = math.sqrt(sum((m - mean) ** 2 for m in medians) / (k - 1))  # floats: statistics.stdev is 100x slower
    half = t975(k - 1) * sd / math.sqrt(k)
    return _interval(median, median - half, median + half, f"t on {k} block medians")


def between_interval(samples: Sequence[float], median: float, blocks: int = BLOCKS) -> Interval | None:
    """Student's t on the block medians of ``samples`` (in call order), around ``median``; None below 3 blocks.

    Two block lengths are tried, ``blocks`` blocks and half as many twice as long, and the wider interval is
    kept: a drift slower than the short blocks makes neighbours agree, the long blocks still see it.
    """
    k = block_count(len(samples), blocks)
    if k < MIN_BLOCKS:
        return None
    found = [_t_interval(samples, median, k)]
    if k // 2 >= MIN_BLOCKS:
        found.append(_t_interval(samples, median, k // 2))
    found = [i for i in found if i is not None]
    return max(found, key=lambda i: i.rel_half_width) if found else None


def honest(within: Interval | None, between: Interval | None) -> tuple[str, Interval] | None:
    """The wider of the two (``("between", ...)`` on a tie: it allows for drift), or None without ``within``.

    Without the within interval (fewer than 6 calls) no interval is claimed, as before blocks existed.
    """
    if within is None:
        return None
    if between is not None and between.rel_half_width >= within.rel_half_width:
        return "between", between
    return "within", within


def interval_section(samples: Sequence[float], median: float) -> dict[str, Any]:
    """The record's ``bench.interval``: both intervals, which one is ``used``, and the blocks behind ``between``.

    ``blocks`` holds the calls and the median of every block, in order: the regression gate compares
    two records by their block medians.
    """
    within = within_interval(sorted(samples), median)
    between = between_interval(samples, median)
    choice = honest(within, between)
    k = block_count(len(samples))
    return {
        "within": within.to_dict() if within else None,
        "between": between.to_dict() if between else None,
        "used": choice[0] if choice else None,
        "blocks": {"calls": block_sizes(len(samples), k) if k >= 1 else [],
                   "medians_ms": block_medians(samples, k) if k >= 1 else []},
    }


def drift_verdict(section: dict[str, Any], ratio_limit: float = 2.0) -> dict[str, Any]:
    """Do the blocks disagree? ``between_over_within`` and a warning when the between interval is the
    wider by more than ``ratio_limit`` (the level moved during the run more than the calls' spread explains)."""
    within, between = section.get("within"), section.get("between")
    if not within or not between or within["rel_half_width"] <= 0:
        return {"between_over_within": None, "drifting": False, "drift_warning": None}
    ratio = between["rel_half_width"] / within["rel_half_width"]
    drifting = ratio > ratio_limit
    warning = None
    if drifting:
        warning = (f"drifting timing: the block medians disagree, the median's interval from {between['method']} "
                   f"(+-{between['rel_half_width']:.1%}) is {ratio:.1f}x the one from the calls alone "
                   f"(+-{within['rel_half_width']:.1%}); the host's level moved during the run (close other work, "
                   "raise bench.min_time_s so the blocks span more of it)")
    return {"between_over_within": ratio, "drifting": drifting, "drift_warning": warning}
