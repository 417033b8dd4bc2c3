"""The paired test of the regression gate: two variants timed in alternating blocks of one run.

Records written by :mod:`ascendbench.bench.interleave` hold ``bench.interleave``: the run's ``id``, the side's
``position`` (A or B) and one block median per pair of neighbouring blocks, in time order. When OLD and NEW are
the two sides of one such run, pair ``i`` of OLD and pair ``i`` of NEW ran next to each other, under the same
state of the host, and their log ratio holds the difference between the variants and little of the host.

The test is the sign test on those log ratios (distribution-free: a pair that straddles a change of the host's
state gives one wild ratio, which counts once, like any other): one-sided p that NEW is slower is the binomial
tail of the count of pairs where NEW's block was slower; the shift is the median ratio minus 1, with the
order-statistics 95% interval of that median (:func:`ascendbench.bench.stats.median_ci_ranks`). Pairs whose
blocks were equal are left out of the count, as the sign test does (:mod:`ascendbench.bench.pairs`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

# The test itself lives with the interleaved run, where the job's A/B uses it too (re-exported here).
from ascendbench.bench.pairs import EXACT_MAX, MIN_PAIRS, PAIRED_TEST, paired_shift, sign_p


@dataclass(frozen=True)
class Pairing:
    """One side's share of an interleaved run: the run's id, the side's position, its block medians (ms)."""

    id: str
    position: str
    block_medians_ms: tuple[float, ...]

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None, samples: Sequence[float] | None) -> "Pairing | None":
        """From a record's ``bench.interleave`` and the side's own calls (``bench.samples_ms``); ``None`` when absent,
        not of the expected shape, or when its block medians are not the medians of the side's own calls, block by
        block (a record is data: pairs copied from another run, or typed in, are no evidence of neighbours)."""
        if not isinstance(section, Mapping) or not samples:
            return None
        run, position, medians = section.get("id"), section.get("position"), section.get("block_medians_ms")
        if not isinstance(run, str) or position not in ("A", "B") or not isinstance(medians, (list, tuple)):
            return None
        try:
            values = tuple(float(v) for v in medians)
        except (TypeError, ValueError):
            return None
        if not all(math.isfinite(v) and v > 0 for v in values) or not _of_calls(values, section, samples):
            return None
        return cls(run, position, values)


def _of_calls(medians: Sequence[float], section: Mapping[str, Any], samples: Sequence[float]) -> bool:
    """True when ``medians`` are the medians of consecutive ``block_calls``-call blocks of ``samples``."""
    calls = section.get("block_calls")
    if not isinstance(calls, int) or isinstance(calls, bool) or calls < 1 or len(samples) != calls * len(medians):
        return False
    return all(math.isclose(statistics.median(samples[i * calls:(i + 1) * calls]), median, rel_tol=1e-9)
               for i, median in enumerate(medians))


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


__all__ = ["EXACT_MAX", "MIN_PAIRS", "PAIRED_TEST", "Pairing", "paired_shift", "sign_p", "why_not_paired"]
