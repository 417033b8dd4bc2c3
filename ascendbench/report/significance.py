"""Is NEW slower than OLD? The latency decision of the regression gate, as pure functions.

A workload's latency regresses when NEW is slower **significantly** and **by enough**. The evidence used is
the best both records hold, tried in this order (``compare.method`` names the first one to try):

0. ``paired``: OLD and NEW are the two sides of one interleaved run (:mod:`ascendbench.bench.interleave`,
   ``bench.interleave`` with the same ``id``): the sign test on the log ratios of their neighbouring blocks
   (:mod:`ascendbench.report.paired`). The host's state of the moment cancels out, so this sees a 2% change on a
   host whose level moves by 10% between two runs. Records timed apart go on down the chain.
1. ``blocks``: the per-block medians (``bench.interval.blocks.medians_ms``, at least ``MIN_BLOCKS`` on each side).
   Consecutive calls share the host's state of the moment, so calls are not independent samples and a test on
   them calls an unchanged workload slower when the host's level moved between the two runs; block medians,
   each over a stretch of the run, are close to independent (batch means). A one-sided Welch t test on their
   logs must give ``p < alpha``, and the shift (the ratio of the geometric means of the block medians, minus
   1) must exceed ``min_effect``; it is printed with its 95% Welch interval. Each side's variance holds, besides
   the batch-means term, the level's own spread between its blocks, recomputed from its per-call samples
   (:func:`~ascendbench.bench.blocks.level_variance`, 0 when the blocks agree as exchangeable calls would):
   the host's level moves between two runs as it moves between the blocks of one, and a test blind to that
   calls an unchanged workload slower whenever the host's level moved between OLD and NEW. Before the test, the
   blocks a burst on the host disturbed (beyond three robust spreads from their side's centre) are set aside,
   and the line says how many (:mod:`ascendbench.report.steady`). Blocks see the level move only while a run
   lasts; when OLD's record holds ``bench.interval.between_runs`` (its workload's earlier runs on the host,
   :mod:`ascendbench.bench.runs`), the host's level spread between runs ``s_L^2`` is added to each side's
   variance as well: OLD and NEW each sit at their own level, and a shift the host makes between two runs is no
   regression. OLD's, not NEW's: NEW's history ends in NEW, and a real slowdown would count as the host's spread.
   Records written before blocks existed have none, and the per-call test decides (the reason says so).
2. ``mann_whitney``: the per-call samples (``bench.samples_ms``, at least ``compare.min_samples`` on each
   side). A one-sided Mann-Whitney U test (NEW stochastically greater) must give ``p < alpha``, and the
   Hodges-Lehmann estimate of the relative shift (the median of every NEW/OLD ratio of two calls, minus 1)
   must exceed ``min_effect``. The shift is printed with its distribution-free 95% confidence interval.
3. ``ci_overlap``: the recorded 95% confidence intervals of the medians. NEW's lower bound must lie above
   OLD's upper bound, and the ratio of the medians minus 1 must exceed ``min_effect``.
4. ``median``: the medians alone: their ratio minus 1 must exceed ``min_effect`` (no statistics at all).

Too few samples never yield "significant": the test is then called underpowered and the next method decides.

>>> rule = LatencyRule(alpha=0.05, min_effect=0.03)
>>> old = Latency(median_ms=100.0, samples_ms=tuple(100.0 + i for i in range(10)))
>>> new = Latency(median_ms=110.0, samples_ms=tuple(110.0 + i for i in range(10)))
>>> decision = decide(old, new, rule)
>>> decision.regressed, decision.method
(True, 'Mann-Whitney U')
>>> decision.effect
'+9.6% (95% CI +6.5% .. +12.7%), p=9e-5, Mann-Whitney U, n=10/10'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from ascendbench.report.paired import PAIRED_TEST, Pairing, paired_shift, why_not_paired
from ascendbench.report.steady import steady

METHODS = ("paired", "blocks", "mann_whitney", "ci_overlap", "median")
LEVEL = 0.95  # confidence level of the printed shift, like the records' median_ci95
_Z95 = 1.959963984540054
# Pairs of calls the Hodges-Lehmann estimate enumerates at most (memory m*n*8 bytes); larger sides are thinned.
MAX_PAIRS = 4_000_000
TEST_NAME = "Mann-Whitney U"
BLOCK_TEST = "Welch t on block medians"
# Fewest block medians a side for the block test (fewer: the per-call test, then the CIs, decide).
MIN_BLOCKS = 4


@dataclass(frozen=True)
class LatencyRule:
    """When a slower median counts as a regression (the validated ``compare`` options of report.yaml)."""

    alpha: float = 0.05
    min_effect: float = 0.03
    min_samples: int = 5
    method: str = "paired"

    @classmethod
    def from_options(cls, options: Any) -> "LatencyRule":
        """The rule from report.yaml's ``compare`` section (validated by ``settings.load_settings``)."""
        return cls(alpha=float(options.alpha), min_effect=float(options.min_effect),
                   min_samples=int(options.min_samples), method=str(options.method))

    def describe(self) -> str:
        """The rule in one sentence, for the head of the gate's output."""
        steps = {"paired": f"{PAIRED_TEST} (p < {self.alpha:g}, when both were timed in one interleaved run)",
                 "blocks": f"{BLOCK_TEST} (p < {self.alpha:g}, >= {MIN_BLOCKS} blocks a side)",
                 "mann_whitney": f"{TEST_NAME} on the per-call samples (p < {self.alpha:g}, "
                                 f">= {self.min_samples} a side)",
                 "ci_overlap": "CI overlap (the medians' recorded 95% CIs apart)",
                 "median": "medians only (untested)"}
        evidence = ", else ".join(steps[m] for m in METHODS[METHODS.index(self.method):])
        return (f"latency rule: NEW is slower when the median shift exceeds {self.min_effect:.1%} and the evidence "
                f"agrees; evidence, the first both sides hold: {evidence}")


@dataclass(frozen=True)
class Latency:
    """One side's latency evidence: the median, its recorded 95% CI and the per-call samples, when present."""

    median_ms: float
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    samples_ms: tuple[float, ...] | None = None
    count: int | None = None
    block_medians_ms: tuple[float, ...] | None = None
    pairing: Pairing | None = None
    runs_level: float = 0.0  # variance of the log of the level between runs (bench.interval.between_runs)

    @property
    def n(self) -> int | None:
        """How many timed calls the median is over (the samples', else the recorded count)."""
        return len(self.samples_ms) if self.samples_ms else self.count

    @property
    def has_ci(self) -> bool:
        """True when both bounds of the median's 95% CI are recorded."""
        return self.ci_low_ms is not None and self.ci_high_ms is not None


@dataclass(frozen=True)
class Shift:
    """NEW relative to OLD as a fraction (0.1: 10% slower), with its confidence interval when known."""

    estimate: float
    low: float | None = None
    high: float | None = None

    def text(self) -> str:
        """``+10.2% (95% CI +7.9% .. +12.4%)``, or just the estimate."""
        if self.low is None or self.high is None:
            return f"{self.estimate:+.1%}"
        return f"{self.estimate:+.1%} ({LEVEL:.0%} CI {self.low:+.1%} .. {self.high:+.1%})"


@dataclass(frozen=True)
class Decision:
    """The verdict on one workload's latency: did it regress, by which method, the effect and why."""

    regressed: bool
    method: str
    effect: str
    why: str

    def text(self) -> str:
        """One line: the effect with its confidence, the method, and the verdict with its reason."""
        return f"{self.effect}: {'SLOWER' if self.regressed else 'ok'} ({self.why})"


def mann_whitney_p(old: Sequence[float], new: Sequence[float]) -> float:
    """One-sided p-value of the Mann-Whitney U test that NEW's calls are slower than OLD's.

    >>> round(mann_whitney_p([1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]), 6)
    0.003968
    """
    from scipy.stats import mannwhitneyu  # 0.6 s to import: only when a gate runs the test

    return float(mannwhitneyu(new, old, alternative="greater").pvalue)


def hodges_lehmann_shift(old: Sequence[float], new: Sequence[float], level: float = LEVEL) -> Shift:
    """Relative latency shift NEW/OLD - 1: the median of all pairwise ratios, with a distribution-free CI.

    The CI bounds are order statistics of the pairwise log-ratios at the ranks the Mann-Whitney
    distribution gives (normal approximation, rounded outward); ``None`` when the sides are too small.

    >>> shift = hodges_lehmann_shift([100.0, 101.0, 102.0, 103.0, 104.0], [110.0, 111.0, 112.0, 113.0, 114.0])
    >>> round(shift.estimate, 4), round(shift.low, 4), round(shift.high, 4)
    (0.098, 0.068, 0.1287)
    """
    logs_old, logs_new = _thin(np.log(np.asarray(old, float))), _thin(np.log(np.asarray(new, float)))
    diffs = np.sort((logs_new[:, None] - logs_old[None, :]).ravel())
    m, n = logs_old.size, logs_new.size
    z = _Z95 if level == LEVEL else _z(level)
    k = math.floor(m * n / 2.0 - z * math.sqrt(m * n * (m + n + 1) / 12.0))
    estimate = math.expm1(float(np.median(diffs)))
    if k < 1:
        return Shift(estimate)
    return Shift(estimate, math.expm1(float(diffs[k - 1])), math.expm1(float(diffs[diffs.size - k])))


def _thin(values: np.ndarray) -> np.ndarray:
    """At most ``sqrt(MAX_PAIRS)`` evenly spaced order statistics (fewer points: a wider, still valid CI)."""
    cap = int(math.isqrt(MAX_PAIRS))
    ordered = np.sort(values)
    return ordered if ordered.size <= cap else ordered[np.linspace(0, ordered.size - 1, cap).round().astype(int)]


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2.0))


def p_text(p: float) -> str:
    """A p-value in two significant figures at most: ``p=0.31``, ``p=0.004``, ``p=3e-6``.

    >>> p_text(0.3123), p_text(0.00412), p_text(3.2e-6)
    ('p=0.31', 'p=0.004', 'p=3e-6')
    """
    if p >= 0.01:
        return f"p={p:.2g}"
    mantissa, exponent = f"{p:.0e}".split("e")
    return f"p={mantissa}e{int(exponent)}" if p < 0.001 else f"p={p:.1g}"


def decide(old: Latency, new: Latency, rule: LatencyRule) -> Decision:
    """Judge NEW's latency against OLD's with the first method of the rule's chain that both sides support."""
    notes: list[str] = []
    chain = METHODS[METHODS.index(rule.method):]
    if "paired" in chain and (old.pairing is not None or new.pairing is not None):
        missing = why_not_paired(old.pairing, new.pairing)
        if missing is None:
            return by_pairs(old.pairing.block_medians_ms, new.pairing.block_medians_ms, rule)
        notes.append(missing)
    if "blocks" in chain:
        missing = _why_no_blocks(old, new)
        if missing is None:
            a, b = steady(old.block_medians_ms, old.samples_ms), steady(new.block_medians_ms, new.samples_ms)
            levels = (a.level + old.runs_level, b.level + old.runs_level)
            decision = by_blocks(a.medians, b.medians, rule, levels, (a.set_aside, b.set_aside))
            return _noted(_with_runs_level(decision, old.runs_level), notes)
        notes.append(missing)
    if "mann_whitney" in chain:
        missing = _why_no_test(old, new, rule)
        if missing is None:
            return _noted(by_test(old.samples_ms, new.samples_ms, rule), notes)
        notes.append(missing)
    if "ci_overlap" in chain:
        if old.has_ci and new.has_ci:
            return _noted(by_ci_overlap(old, new, rule), notes)
        notes.append("no 95% CI of the median in " + _sides(not old.has_ci, not new.has_ci))
    return _noted(by_medians(old, new, rule), notes)


def _why_no_blocks(old: Latency, new: Latency) -> str | None:
    """Why the block medians cannot decide (None when they can): absent on a side (an older record), or too few."""
    if not old.block_medians_ms or not new.block_medians_ms:
        return ("no per-block medians in " + _sides(not old.block_medians_ms, not new.block_medians_ms)
                + " (a record from before blocks; the per-call test assumes independent calls)")
    m, n = len(old.block_medians_ms), len(new.block_medians_ms)
    if min(m, n) < MIN_BLOCKS:
        return f"{BLOCK_TEST} underpowered: {m}/{n} blocks < {MIN_BLOCKS} a side, not used"
    return None


def welch_shift(old: Sequence[float], new: Sequence[float], level: float = LEVEL,
                extra: tuple[float, float] = (0.0, 0.0)) -> tuple[Shift, float]:
    """(NEW/OLD - 1 of the geometric means with its Welch interval, one-sided p that NEW is slower).

    ``extra`` adds a variance (of logs) to OLD's and NEW's mean: the level's own movement between runs.

    >>> shift, p = welch_shift([100.0, 101.0, 99.0, 100.0], [110.0, 111.0, 109.0, 110.0])
    >>> round(shift.estimate, 4), round(shift.low, 4), round(shift.high, 4), p < 1e-4
    (0.1, 0.0852, 0.115, True)
    """
    from scipy.stats import t as student  # as mann_whitney_p: only when a gate runs the test

    a, b = np.log(np.asarray(old, float)), np.log(np.asarray(new, float))
    diff = float(b.mean() - a.mean())
    va, vb = float(a.var(ddof=1)) / a.size + extra[0], float(b.var(ddof=1)) / b.size + extra[1]
    se = math.sqrt(va + vb)
    if se == 0.0:
        return Shift(math.expm1(diff), math.expm1(diff), math.expm1(diff)), (0.0 if diff > 0 else 1.0)
    dof = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = float(student.ppf(0.5 + level / 2.0, dof)) * se
    p = float(student.sf(diff / se, dof))
    return Shift(math.expm1(diff), math.expm1(diff - half), math.expm1(diff + half)), p


def merged_pairs(medians: Sequence[float]) -> list[float]:
    """Neighbouring block medians merged two by two (geometric mean; an odd last one is dropped): blocks twice
    as long, the bench's second block length.

    >>> merged_pairs([1.0, 4.0, 9.0, 1.0, 5.0])
    [2.0, 3.0]
    """
    return [math.sqrt(medians[i] * medians[i + 1]) for i in range(0, len(medians) - 1, 2)]


def by_blocks(old: Sequence[float], new: Sequence[float], rule: LatencyRule,
              levels: tuple[float, float] = (0.0, 0.0), set_aside: tuple[int, int] = (0, 0)) -> Decision:
    """Welch t (one-sided) on the logs of the block medians, plus the shift against ``min_effect``; ``levels``
    (OLD's and NEW's level spread between blocks) are added to the sides' variances; ``set_aside`` (the blocks
    of each side a burst disturbed, :mod:`ascendbench.report.steady`, left out of ``old``/``new``) is printed.

    As the bench's interval, two block lengths are tried when both sides have enough blocks (the recorded ones,
    and neighbours merged two by two): a drift slower than the short blocks makes them agree too well, and the
    less significant of the two results is the one reported.
    """
    shift, p = welch_shift(old, new, extra=levels)
    if min(len(old), len(new)) >= 2 * MIN_BLOCKS:
        longer = welch_shift(merged_pairs(old), merged_pairs(new), extra=levels)
        shift, p = max((shift, p), longer, key=lambda found: found[1])
    sizes = f"blocks={len(old)}/{len(new)}"
    if any(set_aside):
        sizes += f" ({set_aside[0]}/{set_aside[1]} more set aside as disturbed)"
    return _decide(BLOCK_TEST, sizes, (shift, p), rule)


def _with_runs_level(decision: Decision, runs_level: float) -> Decision:
    """The block decision's effect line, told how far two runs' levels differ at 95% on OLD's history, when that
    entered the test."""
    if runs_level <= 0.0:
        return decision
    spread = math.expm1(_Z95 * math.sqrt(2.0 * runs_level))
    return replace(decision, effect=f"{decision.effect}, levels of two runs +-{spread:.1%} (OLD's runs)")


def by_pairs(old: Sequence[float], new: Sequence[float], rule: LatencyRule) -> Decision:
    """The sign test on the log ratios of interleaved block pairs (:func:`ascendbench.report.paired.paired_shift`),
    plus the median shift against ``min_effect``."""
    estimate, low, high, p = paired_shift(old, new)
    return _decide(PAIRED_TEST, f"pairs={len(old)}", (Shift(estimate, low, high), p), rule)


def _decide(method: str, sizes: str, found: tuple[Any, float], rule: LatencyRule) -> Decision:
    """A regression when the shift is significant (``p < alpha``) and larger than ``min_effect``."""
    shift, p = found
    effect = f"{shift.text()}, {p_text(p)}, {method}, {sizes}"
    if p >= rule.alpha:
        return Decision(False, method, effect, f"not significant: p >= alpha {rule.alpha:g}")
    if shift.estimate <= rule.min_effect:
        return Decision(False, method, effect, f"significant, but the shift is within the minimum effect "
                                               f"{rule.min_effect:.1%}")
    return Decision(True, method, effect, f"p < alpha {rule.alpha:g} and shift > {rule.min_effect:.1%}")


def _why_no_test(old: Latency, new: Latency, rule: LatencyRule) -> str | None:
    """Why the samples cannot decide (None when they can): absent on a side, or too few to have power."""
    if not old.samples_ms or not new.samples_ms:
        return "no per-call samples in " + _sides(not old.samples_ms, not new.samples_ms)
    m, n = len(old.samples_ms), len(new.samples_ms)
    if min(m, n) < rule.min_samples:
        return (f"{TEST_NAME} underpowered: n={m}/{n} < compare.min_samples={rule.min_samples} a side, "
                "not used")
    return None


def _sides(old_lacks: bool, new_lacks: bool) -> str:
    return "OLD and NEW" if old_lacks and new_lacks else ("OLD" if old_lacks else "NEW")


def _noted(decision: Decision, notes: list[str]) -> Decision:
    if not notes:
        return decision
    return Decision(decision.regressed, decision.method, decision.effect, f"{decision.why}; {'; '.join(notes)}")


def by_test(old: Sequence[float], new: Sequence[float], rule: LatencyRule) -> Decision:
    """Mann-Whitney U (one-sided) plus the Hodges-Lehmann shift against ``min_effect``."""
    found = (hodges_lehmann_shift(old, new), mann_whitney_p(old, new))
    return _decide(TEST_NAME, f"n={len(old)}/{len(new)}", found, rule)


def by_ci_overlap(old: Latency, new: Latency, rule: LatencyRule) -> Decision:
    """NEW's median CI entirely above OLD's, and the median ratio beyond ``min_effect``."""
    shift = new.median_ms / old.median_ms - 1.0
    effect = (f"{shift:+.1%} (medians; 95% CI {_ms(new.ci_low_ms)} .. {_ms(new.ci_high_ms)} vs "
              f"{_ms(old.ci_low_ms)} .. {_ms(old.ci_high_ms)}), CI overlap, n={_n(old)}/{_n(new)}")
    if new.ci_low_ms <= old.ci_high_ms:
        return Decision(False, "CI overlap", effect, "the medians' 95% CIs overlap")
    if shift <= rule.min_effect:
        return Decision(False, "CI overlap", effect, f"CIs apart, but the shift is within the minimum effect "
                                                     f"{rule.min_effect:.1%}")
    return Decision(True, "CI overlap", effect, f"NEW's CI above OLD's and shift > {rule.min_effect:.1%}")


def by_medians(old: Latency, new: Latency, rule: LatencyRule) -> Decision:
    """The plain rule: the median ratio beyond ``min_effect`` (no significance test possible)."""
    shift = new.median_ms / old.median_ms - 1.0
    effect = f"{shift:+.1%} (medians {_ms(old.median_ms)} -> {_ms(new.median_ms)}), medians only"
    regressed = shift > rule.min_effect
    return Decision(regressed, "medians only", effect,
                    f"shift {'>' if regressed else '<='} minimum effect {rule.min_effect:.1%}, untested")


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:.4g} ms"


def _n(side: Latency) -> str:
    return "?" if side.n is None else str(side.n)
