"""The timing budget (``bench.*``) and the rules that end the timed loop and the warm-up."""

from __future__ import annotations

import logging
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from ascendbench.bench.stats import BLOCKS, Interval
from ascendbench.errors import ConfigError

log = logging.getLogger(__name__)

# The precision stop waits for BLOCKS blocks of this many calls (shorter ones sit in one level).
STOP_BLOCK_CALLS = 4
# Checks run every CHECK_GAP calls or every n // CHECK_SPACING (a flat cost per call); each one
# disturbs the next call's caches, so the loop runs one untimed call after it.
CHECK_SPACING = 50
CHECK_GAP = 4
PROTOCOLS = ("adaptive", "fixed")
FIXED_EXAMPLE = "`bench.protocol=fixed preset.warmup=5 preset.iters=20`"


@dataclass(frozen=True)
class BenchBudget:
    """How many calls are timed and for how long, and how long the warm-up lasts (``bench.*``)."""

    warmup: int = 1
    min_iters: int = 5
    max_iters: int = 100
    min_time_s: float = 0.0
    max_time_s: float = 60.0
    stability: float | None = None  # deprecated (ignored): see ``precision``
    precision: float | None = None
    warmup_max: int | None = None
    warmup_tolerance: float = 0.05
    warmup_patience: int = 2
    protocol: str = "adaptive"

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ConfigError(
                f"bench.protocol={self.protocol!r} is not allowed: use one of "
                f"{', '.join(PROTOCOLS)} (fixed: exactly bench.warmup warm-ups and bench.iters "
                "timed calls, the seeds' protocol; adaptive: warm up until calls stop getting "
                f"faster, time until the median is precise). E.g. {FIXED_EXAMPLE}.")
        checks = (
            ("warmup", self.warmup >= 0, "an integer >= 0"),
            ("min_iters", self.min_iters >= 1, "an integer >= 1"),
            ("max_iters", self.max_iters >= self.min_iters,
             f"an integer >= bench.min_iters ({self.min_iters})"),
            ("min_time_s", self.min_time_s >= 0, "a number of seconds >= 0"),
            ("max_time_s", self.max_time_s > 0, "a number of seconds > 0"),
            ("stability", self.stability is None or self.stability > 0,
             "a ratio > 0 (e.g. 0.05) or null"),
            ("precision", self.precision is None or 0 < self.precision < 1,
             "a ratio in (0, 1) (e.g. 0.01) or null"),
            ("warmup_max", self.warmup_max is None or self.warmup_max >= 0,
             "an integer >= 0 or null"),
            ("warmup_tolerance", 0 <= self.warmup_tolerance < 1, "a ratio in [0, 1) (e.g. 0.05)"),
            ("warmup_patience", self.warmup_patience >= 1, "an integer >= 1"),
        )
        for key, ok, allowed in checks:
            if not ok:
                raise ConfigError(
                    f"bench.{key}={getattr(self, key)!r} is not allowed: it must be {allowed}. Fix "
                    f"the override, e.g. `bench.{key}={getattr(BenchBudget, key)}` (the preset "
                    "sets the defaults).")

    @property
    def adaptive_warmup(self) -> bool:
        """True when the warm-up may run past ``warmup`` calls (``warmup_max`` above it)."""
        return self.warmup >= 1 and self.warmup_max is not None and self.warmup_max > self.warmup

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> BenchBudget:
        """Read ``bench.*``; ``iters`` (when not null) fixes the number of timed calls."""
        iters, stability = node.get("iters"), node.get("stability")
        if stability is not None:
            log.warning("bench.stability=%s is deprecated and ignored: IQR/median does not shrink "
                        "with more samples, so on a noisy host it never stopped the loop early. "
                        "The loop now stops once the median's 95%% interval is within "
                        "bench.precision (e.g. `bench.precision=0.01`); drop bench.stability / "
                        "preset.stability from your overrides.", stability)
        budget = {key: kind(node.get(key, getattr(cls, key))) for key, kind in (
            ("warmup", int), ("min_iters", int), ("max_iters", int), ("min_time_s", float),
            ("max_time_s", float), ("warmup_tolerance", float), ("warmup_patience", int))}
        for key, kind in (("stability", float), ("precision", float), ("warmup_max", int)):
            budget[key] = None if node.get(key) is None else kind(node.get(key))
        budget["protocol"] = str(node.get("protocol") or "adaptive")
        if budget["protocol"] == "fixed":
            if iters is None:
                raise ConfigError("bench.protocol=fixed needs a count of timed calls: set "
                                  f"`preset.iters=N` (or `bench.iters=N`), e.g. {FIXED_EXAMPLE}.")
            budget.update(warmup_max=None)
        if iters is not None:
            if int(iters) < 1:
                raise ConfigError(f"bench.iters={iters!r} must be an integer >= 1, or null to let "
                                  "min_iters/max_iters/min_time_s and the precision stop decide; "
                                  "e.g. `bench.iters=10`.")
            count = int(iters)
            budget.update(min_iters=count, max_iters=count, min_time_s=0.0, precision=None)
        return cls(**budget)

    def to_dict(self) -> dict[str, Any]:
        """The budget in force, for the record."""
        return asdict(self)


class StopRule:
    """Keeps the timed samples (in call order) and answers "stop now?" after each one."""

    def __init__(self, budget: BenchBudget, earlier_ms: Sequence[float] = ()) -> None:
        self.budget = budget
        self.earlier = tuple(earlier_ms)  # the workload's earlier run medians on this host
        self.samples: list[float] = []
        self._next_check = BLOCKS * STOP_BLOCK_CALLS
        self.disturbed = False  # a check ran since the loop last looked: the next call is untimed

    def add(self, sample: float) -> None:
        """Record one timed sample."""
        self.samples.append(sample)

    def __len__(self) -> int:
        return len(self.samples)

    def median(self) -> float:
        """The median of the samples so far (needs one)."""
        return statistics.median(self.samples)

    def interval(self) -> Interval | None:
        """The 95% interval of the median so far (None below 6 samples)."""
        return Interval.of(self.samples, self.earlier)

    def judge(self) -> str | None:
        """``precision`` (interval within it), ``runs`` (only earlier runs widen it) or None."""
        if self.budget.precision is None or len(self.samples) < BLOCKS * STOP_BLOCK_CALLS:
            return None
        self.disturbed = True
        found = self.interval()
        if found is None:
            return None
        if found.rel_half_width() <= self.budget.precision:
            return "precision"
        return "runs" if found.rel_half_width(own=True) <= self.budget.precision else None

    def reason(self, elapsed_s: float) -> str | None:
        """Why the loop stops after ``len(self)`` calls and ``elapsed_s`` seconds, or None."""
        b, n = self.budget, len(self.samples)
        timed_out = elapsed_s >= b.max_time_s and b.protocol != "fixed"  # fixed: never cut short
        cap = "max_iters" if n >= b.max_iters else "max_time_s" if timed_out else None
        if cap is not None:
            return "precision" if n >= b.min_iters and self.judge() == "precision" else cap
        if n < b.min_iters or elapsed_s < b.min_time_s:
            return None
        if b.precision is None:
            return "min_reached"
        if n < self._next_check:
            return None
        verdict = self.judge()
        self._next_check = n + max(CHECK_GAP, n // CHECK_SPACING)
        return verdict


class WarmupRule:
    """Decides when the warm-up ends (docs/performance.md); every warm-up call's time is kept."""

    def __init__(self, budget: BenchBudget, cold_ms: float | None = None) -> None:
        self.budget = budget
        self.times_ms: list[float] = []
        self._best = cold_ms if cold_ms is not None else float("inf")
        self._slow_streak = 0

    @property
    def cap(self) -> int:
        """The most warm-up calls that can run."""
        return max(self.budget.warmup, self.budget.warmup_max or 0)

    def add(self, ms: float) -> None:
        """Record one warm-up call's time."""
        self.times_ms.append(ms)
        faster = ms < (1.0 - self.budget.warmup_tolerance) * self._best
        self._slow_streak = 0 if faster else self._slow_streak + 1
        self._best = min(self._best, ms)

    def reason(self) -> str | None:
        """``fixed``, ``plateau``, ``warmup_max`` or ``max_time_s`` once the warm-up is over."""
        n, b = len(self.times_ms), self.budget
        if n < b.warmup:
            return None
        if not b.adaptive_warmup:
            return "fixed"
        if self._slow_streak >= b.warmup_patience:
            return "plateau"
        if n >= self.cap:
            return "warmup_max"
        return "max_time_s" if sum(self.times_ms) >= b.max_time_s * 1e3 else None

    def to_dict(self) -> dict[str, Any]:
        """The record's ``bench.warmup``: every warm-up call's time and why the warm-up ended."""
        b = self.budget
        return {"calls": len(self.times_ms), "calls_ms": list(self.times_ms),
                "reason": self.reason(), "min": b.warmup, "max": self.cap,
                "tolerance": b.warmup_tolerance, "patience": b.warmup_patience}
