"""The timing budget (``bench.*``) and the rule that decides when the timed loop stops.

Rules, checked after every timed call:
  1. ``max_iters`` calls, or ``max_time_s`` seconds of timed region: stop (hard caps, they win).
  2. Before ``min_iters`` calls and ``min_time_s`` seconds: go on.
  3. Then, with ``stability`` set: stop once IQR/median of the samples is at or below it (checked
     from 5 samples on); without it: stop.
``iters`` (when set) fixes the count: ``min_iters = max_iters = iters``, no time minimum, no
stability stop -- the "3 warmups + 10 timed runs" protocol of the seed reports.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Mapping

from ascendbench.errors import ConfigError

# IQR needs a few samples before it means anything.
MIN_STABILITY_SAMPLES = 5


@dataclass(frozen=True)
class BenchBudget:
    """How many calls are timed and for how long (all from ``bench.*``)."""

    warmup: int = 1
    min_iters: int = 5
    max_iters: int = 100
    min_time_s: float = 0.0
    max_time_s: float = 60.0
    stability: float | None = 0.05

    def __post_init__(self) -> None:
        checks = (
            ("warmup", self.warmup >= 0, "an integer >= 0"),
            ("min_iters", self.min_iters >= 1, "an integer >= 1"),
            ("max_iters", self.max_iters >= self.min_iters, f"an integer >= bench.min_iters ({self.min_iters})"),
            ("min_time_s", self.min_time_s >= 0, "a number of seconds >= 0"),
            ("max_time_s", self.max_time_s > 0, "a number of seconds > 0"),
            ("stability", self.stability is None or self.stability > 0, "a ratio > 0 (e.g. 0.05) or null"),
        )
        for key, ok, allowed in checks:
            if not ok:
                raise ConfigError(
                    f"bench.{key}={getattr(self, key)!r} is not allowed: it must be {allowed}. "
                    f"Fix the override, e.g. `bench.{key}={getattr(BenchBudget, key)}` (the preset sets the defaults)."
                )

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> "BenchBudget":
        """Read ``bench.*``; ``iters`` (when not null) fixes the number of timed calls."""
        iters = node.get("iters")
        stability = node.get("stability")
        budget = {
            "warmup": int(node.get("warmup", cls.warmup)),
            "min_iters": int(node.get("min_iters", cls.min_iters)),
            "max_iters": int(node.get("max_iters", cls.max_iters)),
            "min_time_s": float(node.get("min_time_s", cls.min_time_s)),
            "max_time_s": float(node.get("max_time_s", cls.max_time_s)),
            "stability": None if stability is None else float(stability),
        }
        if iters is not None:
            if int(iters) < 1:
                raise ConfigError(f"bench.iters={iters!r} must be an integer >= 1, or null to let min_iters/"
                                  "max_iters/min_time_s and the stability stop decide; e.g. `bench.iters=10`.")
            budget.update(min_iters=int(iters), max_iters=int(iters), min_time_s=0.0, stability=None)
        return cls(**budget)

    def to_dict(self) -> dict[str, Any]:
        """The budget in force, for the record."""
        return {"warmup": self.warmup, "min_iters": self.min_iters, "max_iters": self.max_iters,
                "min_time_s": self.min_time_s, "max_time_s": self.max_time_s, "stability": self.stability}


class StopRule:
    """Tracks the timed samples and answers "stop now?" in O(log n) per call (no numpy in the loop)."""

    def __init__(self, budget: BenchBudget) -> None:
        self.budget = budget
        self._sorted: list[float] = []

    def add(self, sample: float) -> None:
        """Record one timed sample (any unit)."""
        bisect.insort(self._sorted, sample)

    def iqr_over_median(self) -> float:
        """IQR / median of the samples so far (numpy's linear percentiles)."""
        median = _percentile(self._sorted, 50.0)
        spread = _percentile(self._sorted, 75.0) - _percentile(self._sorted, 25.0)
        return spread / median if median > 0 else 0.0

    def reason(self, elapsed_s: float) -> str | None:
        """Why the loop stops after ``len(samples)`` calls and ``elapsed_s`` seconds, or ``None`` to go on."""
        b, n = self.budget, len(self._sorted)
        if n >= b.max_iters:
            return "max_iters"
        if elapsed_s >= b.max_time_s:
            return "max_time_s"
        if n < b.min_iters or elapsed_s < b.min_time_s:
            return None
        if b.stability is None:
            return "min_reached"
        if n >= MIN_STABILITY_SAMPLES and self.iqr_over_median() <= b.stability:
            return "stable"
        return None


def _percentile(ordered: list[float], q: float) -> float:
    """numpy's default (linear) percentile of an already sorted list."""
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
