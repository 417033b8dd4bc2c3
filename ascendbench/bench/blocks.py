"""Blocks of timed calls, and the median's interval from the spread between them (batch means).

Consecutive calls share the host's state of the moment (its clock speed, its other load, the device's
temperature): they are not independent, and the order-statistics interval of the median
(:func:`~ascendbench.bench.stats.median_ci_ranks`, here the **within** interval) is too narrow when the level
drifts during a run. The timed calls, in the order they ran, are therefore cut into ``k`` consecutive blocks
of near-equal size spread over the whole timed region (``k = min(BLOCKS, n // MIN_BLOCK_CALLS)``; as the
run grows the blocks grow, so they grow past the drift's time scale: consistent batch means). The
**between** interval is Student's t on the block medians, with a term for the level's movement::

    median * exp(+- t(0.975, k - 1) * sqrt(s_b^2 / k + s_L^2))

``s_b`` is the spread of the block medians (of their logs: relative to the median); ``s_b^2 / k`` is the
batch-means variance of the run's level, the part more calls shrink. ``s_L^2 = max(0, s_b^2 - s_w^2)`` is the
spread of the level itself between blocks (one-way random effects): ``s_w`` is the spread a block median would
have if the calls were exchangeable (the bootstrap's, from all the calls pooled, computed exactly:
:func:`exchangeable_median_var`; pooled calls hold the level's movement too, so ``s_w`` errs large and ``s_L``
small). A rerun meets the host in another state and its median moves with the level: the interval is for that
rerun's median, so the level term stays however many calls are timed. It is 0 when the blocks agree as well as
exchangeable calls would, and the interval is then the batch-means one, as tight as the within one.
``level_rel_half_width`` (``exp(t * s_L) - 1``) is the part no count of calls narrows: when it alone exceeds
``bench.precision`` and the blocks disagree beyond chance at both block lengths (``s_b^2 / s_w^2`` above the
99.9% point of chi^2(k - 1) / (k - 1)), the precision cannot be met on the host as it is, and the stop rule says
``drift`` instead of timing on to the cap.

The wider of ``k`` blocks and ``k // 2`` blocks twice as long is kept (a two-level blocking: slow drift makes
short neighbouring blocks agree, longer ones still disagree). The **honest** interval is the wider of the two
(by relative half-width): the record's ``median_ci95_*``, the stop rule and the summary use it, and
``bench.interval.used`` says which it was.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from ascendbench.bench.stats import median_ci_ranks

# Blocks a run is cut into at most; the precision stop waits until all of them exist.
BLOCKS = 8
# Fewest calls a block holds (so a block median is a median of something) and fewest blocks with an interval.
MIN_BLOCK_CALLS = 2
MIN_BLOCKS = 3
# Calls per block the precision stop waits for (BLOCKS * STOP_BLOCK_CALLS calls): shorter blocks sit inside one
# level of a drifting host and agree too well (measured on a drifting fake clock and on this host's matmul)
STOP_BLOCK_CALLS = 4
# Order statistics the exchangeable calls' variance of a block median is computed from at most.
EXCHANGEABLE_POINTS = 256
# t(0.975, dof) for dof = 1..30 (scipy.stats.t.ppf; checked against scipy in the tests).
_T975 = (12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252,
         2.306004135, 2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688,
         2.131449546, 2.119905299, 2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845,
         2.073873068, 2.068657610, 2.063898562, 2.059538553, 2.055529439, 2.051830516, 2.048407142,
         2.045229642, 2.042272456)
_Z975 = 1.959963984540054
# The normal quantile of the blocks' disagreement test (99.9%): the drift stop ends a run early only on clear evidence.
_Z999 = 3.090232306167813


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


def chi2_ratio_999(dof: int) -> float:
    """The 99.9% point of chi^2(dof) / dof (Wilson-Hilferty; at most 3.1% above the exact one, for dof >= 1).

    >>> round(chi2_ratio_999(7), 2)
    3.5
    """
    c = 2.0 / (9.0 * dof)
    return (1.0 - c + _Z999 * math.sqrt(c)) ** 3


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
    level_rel_half_width: float | None = None
    blocks_disagree: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record's entry (``bench.interval.within`` / ``.between``)."""
        entry = {"low_ms": self.low_ms, "high_ms": self.high_ms, "rel_half_width": self.rel_half_width,
                 "method": self.method}
        if self.level_rel_half_width is not None:
            entry.update(level_rel_half_width=self.level_rel_half_width, blocks_disagree=self.blocks_disagree)
        return entry


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


@dataclass(frozen=True)
class BlockSpread:
    """Relative variances of ``k`` block medians: ``between`` (their spread), ``level`` (the level's own spread,
    net of what exchangeable calls would give), and whether the blocks disagree beyond chance."""

    k: int
    between: float
    level: float
    disagree: bool


def exchangeable_median_var(ordered: Sequence[float], n: float) -> float:
    """Variance of the median of ``n`` values drawn from ``ordered`` (sorted), as if they were exchangeable.

    The bootstrap's exact answer, no resampling (Maritz-Jarrett): the median of ``n`` draws is the order
    statistic of rank ``(n + 1) / 2``, which falls on ``x_(j)`` with probability ``I(j/N) - I((j-1)/N)``,
    ``I`` the regularised incomplete beta of ``((n + 1) / 2, (n + 1) / 2)``. Heavy tails (a call preempted now
    and then) make a short block's median vary much more than the normal approximation of the median says; this
    does not. At most ``EXCHANGEABLE_POINTS`` evenly spaced order statistics are used (its cost stays flat).
    """
    x = _thinned(ordered)
    weights = _median_weights(x.size, n)
    mean = float(weights @ x)
    return max(0.0, float(weights @ (x * x)) - mean * mean)


def _thinned(ordered: Sequence[float]) -> np.ndarray:
    """At most ``EXCHANGEABLE_POINTS`` evenly spaced values of ``ordered``, as an array."""
    x = np.asarray(ordered, dtype=np.float64)
    if x.size <= EXCHANGEABLE_POINTS:
        return x
    return x[np.linspace(0, x.size - 1, EXCHANGEABLE_POINTS).round().astype(int)]


def _median_weights(size: int, n: float) -> np.ndarray:
    """P(the median of ``n`` draws is the j-th of ``size`` sorted values), j = 1..size."""
    from scipy.special import betainc  # imported once, at the first check with every block

    a = (n + 1.0) / 2.0
    return np.diff(betainc(a, a, np.linspace(0.0, 1.0, size + 1)))


def block_spread(samples: Sequence[float], k: int, pooled_logs: np.ndarray) -> BlockSpread:
    """The spread of ``k`` block medians of ``samples`` (in call order, all > 0), on the log scale (relative,
    and a call preempted to 5x its time weighs as a log, not as a multiple), and the spread a median of a
    block's size drawn from all the calls pooled (``pooled_logs``: the sorted logs, thinned) would have
    (exchangeable calls). The pooled calls hold the level's movement too, so ``chance`` errs large: the level
    term and the disagreement test err small, never calling independent heavy-tailed calls drifting.

    Plain floats for the block medians and a single numpy pass for ``chance``: the stop rule runs this between
    timed calls, and work there disturbs the next call (its caches), so it is kept short.
    """
    raw = block_medians(samples, k)
    medians = [math.log(m / raw[0]) for m in raw]  # relative to one of them: equal blocks give exactly 0
    mean = sum(medians) / k
    between = sum((m - mean) ** 2 for m in medians) / (k - 1)
    weights = _median_weights(pooled_logs.size, len(samples) / k)
    centre = float(weights @ pooled_logs)
    chance = max(0.0, float(weights @ (pooled_logs * pooled_logs)) - centre * centre)
    return BlockSpread(k, between, max(0.0, between - chance), between > chance * chi2_ratio_999(k - 1))


def _t_interval(spread: BlockSpread, median: float) -> Interval | None:
    t = t975(spread.k - 1)
    half = t * math.sqrt(spread.between / spread.k + spread.level)  # on the logs: the bounds are multiplicative
    found = _interval(median, median * math.exp(-half), median * math.exp(half),
                      f"t on {spread.k} block medians, with the level's spread between them")
    if found is None:
        return None
    return replace(found, level_rel_half_width=math.expm1(t * math.sqrt(spread.level)),
                   blocks_disagree=spread.disagree)


def spreads(samples: Sequence[float], blocks: int = BLOCKS) -> list[BlockSpread]:
    """The block spreads at ``k`` and ``k // 2`` blocks (those of >= 3 blocks); empty below 3 blocks or when a
    sample is not > 0."""
    k = block_count(len(samples), blocks)
    if k < MIN_BLOCKS or min(samples) <= 0:
        return []
    ordered = sorted(samples)
    pooled = np.log(_thinned(ordered) / ordered[len(ordered) // 2])  # centred: equal calls give exactly 0
    return [block_spread(samples, kk, pooled) for kk in (k, k // 2) if kk >= MIN_BLOCKS]


def level_variance(samples: Sequence[float], blocks: int = BLOCKS) -> float:
    """The level's own spread between blocks (a variance of logs), at the block length whose interval is the
    wider; 0 below 3 blocks. A rerun's level moves by this much: the regression gate adds it to each side."""
    found = spreads(samples, blocks)
    return max(found, key=lambda s: s.between / s.k + s.level).level if found else 0.0


def between_interval(samples: Sequence[float], median: float, blocks: int = BLOCKS) -> Interval | None:
    """Student's t on the block medians of ``samples`` (in call order) with the level term, around ``median``;
    None below 3 blocks.

    Two block lengths are tried, ``blocks`` blocks and half as many twice as long, and the wider interval is
    kept: a drift slower than the short blocks makes neighbours agree, the long blocks still see it. Its
    ``blocks_disagree`` is true when the blocks disagree beyond chance at both lengths (a drift faster than the
    long blocks averages out in them: more calls would still narrow the interval).
    """
    found = [i for i in (_t_interval(s, median) for s in spreads(samples, blocks)) if i is not None]
    if not found:
        return None
    wider = max(found, key=lambda i: i.rel_half_width)
    return replace(wider, blocks_disagree=all(i.blocks_disagree for i in found))  # at every block length


def honest(within: Interval | None, between: Interval | None,
           runs: Interval | None = None) -> tuple[str, Interval] | None:
    """The widest of the three (``between``, then ``between_runs``, on a tie: they allow for drift), or None
    without ``within``.

    Without the within interval (fewer than 6 calls) no interval is claimed, as before blocks existed. ``runs``
    is the between-runs interval (:func:`ascendbench.bench.runs.runs_interval`), None without earlier runs.
    """
    if within is None:
        return None
    chosen = ("within", within)
    for name, found in (("between", between), ("between_runs", runs)):
        if found is not None and found.rel_half_width >= chosen[1].rel_half_width:
            chosen = (name, found)
    return chosen


def interval_section(samples: Sequence[float], median: float, runs: Interval | None = None) -> dict[str, Any]:
    """The record's ``bench.interval``: the intervals, which one is ``used``, and the blocks behind ``between``.

    ``blocks`` holds the calls and the median of every block, in order: the regression gate compares
    two records by their block medians. ``between_runs`` (with ``runs`` given: the spread of this workload's
    earlier runs on this host) is added only when there were earlier runs to make it from.
    """
    within = within_interval(sorted(samples), median)
    between = between_interval(samples, median)
    choice = honest(within, between, runs)
    k = block_count(len(samples))
    extra = {"between_runs": runs.to_dict()} if runs is not None else {}
    return {
        "within": within.to_dict() if within else None,
        "between": between.to_dict() if between else None,
        **extra,
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
