"""The paired test of the regression gate: two variants timed in alternating blocks of one run.

Records written by :mod:`ascendbench.bench.interleave` hold ``bench.interleave``: the run's ``id``, the side's
``position`` (A or B) and one block median per pair of neighbouring blocks, in time order. When OLD and NEW are
the two sides of one such run, pair ``i`` of OLD and pair ``i`` of NEW ran next to each other, under the same
state of the host, and their log ratio holds the difference between the variants and little of the host.

The test is the sign test on those log ratios (distribution-free: a pair that straddles a change of the host's
state gives one wild ratio, which counts once, like any other): one-sided p that NEW is slower is the binomial
tail of the count of pairs where NEW's block was slower; the shift is the median ratio minus 1, with the
order-statistics 95% interval of that median (:func:`ascendbench.bench.stats.median_ci_ranks`). Pairs whose
blocks were equal are left out of the count, as the sign test does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ascendbench.bench.stats import median_ci_ranks

PAIRED_TEST = "sign test on interleaved block pairs"
# Fewest pairs for the paired test (the sign test's 95% interval of a median needs 6).
MIN_PAIRS = 6
# Exact binomial tail up to this many pairs, normal approximation above.
EXACT_MAX = 1000


@dataclass(frozen=True)
class Pairing:
    """One side's share of an interleaved run: the run's id, the side's position, its block medians (ms)."""

    id: str
    position: str
    block_medians_ms: tuple[float, ...]

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> "Pairing | None":
        """From a record's ``bench.interleave``; ``None`` when absent or not of the expected shape."""
        if not isinstance(section, Mapping):
            return None
        run, position, medians = section.get("id"), section.get("position"), section.get("block_medians_ms")
        if not isinstance(run, str) or position not in ("A", "B") or not isinstance(medians, (list, tuple)):
            return None
        try:
            values = tuple(float(v) for v in medians)
        except (TypeError, ValueError):
            return None
        if not all(math.isfinite(v) and v > 0 for v in values):
            return None
        return cls(run, position, values)


def why_not_paired(old: Pairing | None, new: Pairing | None) -> str | None:
    """Why OLD and NEW cannot be paired (``None`` when they can)."""
    if old is None or new is None:
        which = "OLD and NEW" if old is None and new is None else ("OLD" if old is None else "NEW")
        return f"{which} not timed interleaved with the other (no bench.interleave)"
    if old.id != new.id:
        return "OLD and NEW were timed in different interleaved runs (bench.interleave.id differs)"
    if old.position == new.position:
        return "OLD and NEW are the same side of one interleaved run"
    if len(old.block_medians_ms) != len(new.block_medians_ms):
        return "OLD and NEW hold different counts of interleaved pairs (a damaged record)"
    if len(old.block_medians_ms) < MIN_PAIRS:
        return f"{PAIRED_TEST} underpowered: {len(old.block_medians_ms)} pairs < {MIN_PAIRS}, not used"
    return None


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
