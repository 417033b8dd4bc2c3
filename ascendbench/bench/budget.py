"""The timing budget (``bench.*``), the rule that decides when the timed loop stops, and the warm-up rule.

Stop rule, checked after every timed call:
  1. ``max_iters`` calls, or ``max_time_s`` seconds of timed region: stop (hard caps; the reason is
     ``precision`` when the precision target happens to be met at that moment too).
  2. Before ``min_iters`` calls and ``min_time_s`` seconds: go on.
  3. Then, with ``precision`` set: stop once the 95% confidence interval of the median lies within
     ``precision`` of the median (``max(median - low, high - median) / median <= precision``; reason
     ``precision``). The CI narrows like 1/sqrt(n) however noisy the host, so this converges, unlike
     a dispersion (IQR/median) that does not shrink with more samples. Without it: stop (``min_reached``).
     The interval is the honest one of :mod:`ascendbench.bench.blocks`: the wider of the order-statistics
     interval of all calls and the t interval of the block medians (drift between blocks widens it), and the
     precision stop waits until all ``BLOCKS`` blocks exist (``BLOCKS * STOP_BLOCK_CALLS`` calls).
     The interval holds a term for the level's own movement between blocks, which no count of calls
     narrows: when that term alone exceeds ``precision`` and the blocks disagree beyond chance, the
     precision is out of reach on the host as it is, and the loop stops (reason ``drift``) rather than
     timing on to a cap for nothing; the record then says ``precision_met: false`` and warns of drift.
     With earlier runs of the workload on this host (:mod:`ascendbench.bench.runs`), the honest interval is
     the widest of three: the third, ``between_runs``, is the spread of those runs' medians, for a rerun. When
     it is the widest, its level part alone exceeds ``precision`` and the runs disagree beyond chance, the loop
     stops (reason ``runs``) once this run's ``within`` interval is within half of it.
``iters`` (when set) fixes the count: ``min_iters = max_iters = iters``, no time minimum, no precision
stop -- the "3 warmups + 10 timed runs" protocol of the seed reports.

``protocol: fixed`` is the seeds' protocol ("warmup 5, 20 iterations"): exactly ``warmup`` warm-up calls
and exactly ``iters`` timed calls, no adaptive warm-up, no precision stop and no time cap (``max_time_s``
does not cut it short). ``adaptive`` (the default) is everything above.

``stability`` (the old IQR/median stop) is deprecated: accepted, logged, and ignored.

Warm-up rule (:class:`WarmupRule`): at least ``warmup`` calls; then, up to ``warmup_max`` calls, more
until ``warmup_patience`` calls in a row are not faster than ``(1 - warmup_tolerance)`` times the
fastest call before them (the cold call included): NPU operator compilation spreads over the first
calls, not only the first. The warm-up never spends more than ``max_time_s`` (the timed budget).
``warmup_max`` null (or <= ``warmup``) keeps the fixed count, and ``warmup: 0`` means no warm-up at
all (the text-to-video presets whose single call takes minutes).
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from ascendbench.bench.blocks import BLOCKS, STOP_BLOCK_CALLS, between_interval, honest, within_interval
from ascendbench.bench.runs import MIN_EARLIER, PastRun, runs_interval
from ascendbench.bench.stats import MIN_CI_SAMPLES
from ascendbench.errors import ConfigError

log = logging.getLogger(__name__)

# The precision check is O(n) in the worst case (CI ranks of a new n): from this many samples on it runs
# every n // CHECK_SPACING calls (samples grow by ~2% between checks), so its cost per call stays constant.
CHECK_SPACING = 50
# Fewest calls between two precision checks once every block exists: a check (the block spreads, numpy) between
# two calls disturbs the next call's caches (measured +7% on this host's 1 ms matmul), so the timing loop runs
# one untimed call after each check (:attr:`StopRule.disturbed`), and the checks are spaced to keep that rare.
CHECK_GAP = 4
PROTOCOLS = ("adaptive", "fixed")
# The ``runs`` stop: this run's ``within`` interval within this fraction of the between-runs one. More calls
# narrow only this run's part, and the median they would refine is already known within a small share of what
# a rerun moves (its sampling error adds under 12% to the between-runs half-width).
RUNS_STOP_FRACTION = 0.5


@dataclass(frozen=True)
class BenchBudget:
    """How many calls are timed and for how long, and how long the warm-up lasts (all from ``bench.*``)."""

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
            raise ConfigError(f"bench.protocol={self.protocol!r} is not allowed: use one of {', '.join(PROTOCOLS)} "
                              "(fixed: exactly bench.warmup warm-ups and bench.iters timed calls, the seeds' "
                              "protocol; adaptive: warm up until calls stop getting faster, time until the median "
                              "is precise). E.g. `bench.protocol=fixed preset.warmup=5 preset.iters=20`.")
        checks = (
            ("warmup", self.warmup >= 0, "an integer >= 0"),
            ("min_iters", self.min_iters >= 1, "an integer >= 1"),
            ("max_iters", self.max_iters >= self.min_iters, f"an integer >= bench.min_iters ({self.min_iters})"),
            ("min_time_s", self.min_time_s >= 0, "a number of seconds >= 0"),
            ("max_time_s", self.max_time_s > 0, "a number of seconds > 0"),
            ("stability", self.stability is None or self.stability > 0, "a ratio > 0 (e.g. 0.05) or null"),
            ("precision", self.precision is None or 0 < self.precision < 1, "a ratio in (0, 1) (e.g. 0.01) or null"),
            ("warmup_max", self.warmup_max is None or self.warmup_max >= 0, "an integer >= 0 or null"),
            ("warmup_tolerance", 0 <= self.warmup_tolerance < 1, "a ratio in [0, 1) (e.g. 0.05)"),
            ("warmup_patience", self.warmup_patience >= 1, "an integer >= 1"),
        )
        for key, ok, allowed in checks:
            if not ok:
                raise ConfigError(
                    f"bench.{key}={getattr(self, key)!r} is not allowed: it must be {allowed}. "
                    f"Fix the override, e.g. `bench.{key}={getattr(BenchBudget, key)}` (the preset sets the defaults)."
                )

    @property
    def adaptive_warmup(self) -> bool:
        """True when the warm-up may run past ``warmup`` calls (``warmup_max`` above it)."""
        return self.warmup >= 1 and self.warmup_max is not None and self.warmup_max > self.warmup

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> "BenchBudget":
        """Read ``bench.*``; ``iters`` (when not null) fixes the number of timed calls."""
        iters, stability = node.get("iters"), node.get("stability")
        if stability is not None:
            log.warning("bench.stability=%s is deprecated and ignored: IQR/median does not shrink with more "
                        "samples, so on a noisy host it never stopped the loop early. The loop now stops once the "
                        "median's 95%% CI is within bench.precision (e.g. `bench.precision=0.01`); drop "
                        "bench.stability / preset.stability from your overrides.", stability)
        budget = {
            "warmup": int(node.get("warmup", cls.warmup)),
            "min_iters": int(node.get("min_iters", cls.min_iters)),
            "max_iters": int(node.get("max_iters", cls.max_iters)),
            "min_time_s": float(node.get("min_time_s", cls.min_time_s)),
            "max_time_s": float(node.get("max_time_s", cls.max_time_s)),
            "stability": None if stability is None else float(stability),
            "precision": _optional(node.get("precision"), float),
            "warmup_max": _optional(node.get("warmup_max"), int),
            "warmup_tolerance": float(node.get("warmup_tolerance", cls.warmup_tolerance)),
            "warmup_patience": int(node.get("warmup_patience", cls.warmup_patience)),
        }
        budget["protocol"] = str(node.get("protocol") or "adaptive")
        if budget["protocol"] == "fixed":
            if iters is None:
                raise ConfigError("bench.protocol=fixed needs a count of timed calls: set `preset.iters=N` (or "
                                  "`bench.iters=N`), e.g. `bench.protocol=fixed preset.warmup=5 preset.iters=20`.")
            budget.update(warmup_max=None)
        if iters is not None:
            if int(iters) < 1:
                raise ConfigError(f"bench.iters={iters!r} must be an integer >= 1, or null to let min_iters/"
                                  "max_iters/min_time_s and the precision stop decide; e.g. `bench.iters=10`.")
            budget.update(min_iters=int(iters), max_iters=int(iters), min_time_s=0.0, precision=None)
        return cls(**budget)

    def to_dict(self) -> dict[str, Any]:
        """The budget in force, for the record."""
        return asdict(self)


def _optional(value: Any, kind: type) -> Any:
    return None if value is None else kind(value)


class StopRule:
    """Tracks the timed samples and answers "stop now?" in amortised O(1) per call (no numpy in the loop)."""

    def __init__(self, budget: BenchBudget, earlier: Sequence[PastRun] = ()) -> None:
        self.budget = budget
        self.earlier = tuple(earlier)  # this workload's earlier runs on this host (ascendbench.bench.runs)
        self._sorted: list[float] = []
        self._in_order: list[float] = []
        self._next_check = max(MIN_CI_SAMPLES, budget.min_iters)
        self.disturbed = False  # a full check ran since the loop last looked: the next call is not timed

    def add(self, sample: float) -> None:
        """Record one timed sample (any unit)."""
        bisect.insort(self._sorted, sample)
        self._in_order.append(sample)

    def __len__(self) -> int:
        return len(self._sorted)

    def median(self) -> float:
        """Median of the samples so far (numpy's linear percentile); needs at least one sample."""
        return _percentile(self._sorted, 50.0)

    def interval(self) -> tuple[str, Any] | None:
        """``(which, Interval)``: the honest 95% interval of the median (see :mod:`~ascendbench.bench.blocks`),
        the one the record's ``latency`` carries; ``None`` below 6 samples."""
        if not self._sorted:
            return None
        median = self.median()
        within, between = within_interval(self._sorted, median), between_interval(self._in_order, median)
        if within is None or len(self.earlier) < MIN_EARLIER:
            return honest(within, between)
        return honest(within, between, runs_interval(self.earlier, median, within.rel_half_width))

    def median_ci(self) -> tuple[float, float] | None:
        """The honest 95% interval of the median as ``(low, high)``, or ``None`` below 6 samples."""
        chosen = self.interval()
        return None if chosen is None else (chosen[1].low_ms, chosen[1].high_ms)

    def ci_rel_half_width(self) -> float | None:
        """``max(median - low, high - median) / median`` of the honest interval; ``None`` below 6 samples."""
        chosen = self.interval()
        return None if chosen is None else chosen[1].rel_half_width

    def iqr_over_median(self) -> float:
        """IQR / median of the samples so far (numpy's linear percentiles)."""
        median = _percentile(self._sorted, 50.0)
        spread = _percentile(self._sorted, 75.0) - _percentile(self._sorted, 25.0)
        return spread / median if median > 0 else 0.0

    def precise(self) -> bool:
        """True when ``precision`` is set, every block exists and the median's honest interval is within it."""
        return self._judge() == "precision"

    def _judge(self) -> str | None:
        """``precision`` (met), ``drift`` (out of reach: the level's own spread between blocks exceeds it and the
        blocks disagree beyond chance), ``runs`` (out of reach: earlier runs of this workload spread wider than
        it and disagree beyond chance, and this run's ``within`` interval is within half of theirs), or None; only
        once ``precision`` is set and every block exists."""
        if self.budget.precision is None or len(self._sorted) < BLOCKS * STOP_BLOCK_CALLS:
            return None
        self.disturbed = True
        chosen = self.interval()
        if chosen is None:
            return None
        if chosen[1].rel_half_width <= self.budget.precision:
            return "precision"
        level = chosen[1].level_rel_half_width
        if chosen[0] == "between_runs":
            within = within_interval(self._sorted, self.median())
            settled = within is not None and within.rel_half_width <= RUNS_STOP_FRACTION * chosen[1].rel_half_width
            return "runs" if chosen[1].blocks_disagree and level > self.budget.precision and settled else None
        return "drift" if level is not None and chosen[1].blocks_disagree and level > self.budget.precision else None

    def reason(self, elapsed_s: float) -> str | None:
        """Why the loop stops after ``len(samples)`` calls and ``elapsed_s`` seconds, or ``None`` to go on."""
        b, n = self.budget, len(self._sorted)
        timed_out = elapsed_s >= b.max_time_s and b.protocol != "fixed"  # a fixed count is never cut short
        cap = "max_iters" if n >= b.max_iters else "max_time_s" if timed_out else None
        if cap is not None:
            return "precision" if n >= b.min_iters and self.precise() else cap
        if n < b.min_iters or elapsed_s < b.min_time_s:
            return None
        if b.precision is None:
            return "min_reached"
        if n < self._next_check:
            return None
        verdict = self._judge()
        self._next_check = n + max(CHECK_GAP if self.disturbed else 1, n // CHECK_SPACING)
        return verdict


class WarmupRule:
    """Decides when the warm-up ends (see the module docstring); every warm-up call's time is kept."""

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
        """``fixed``, ``plateau``, ``warmup_max`` or ``max_time_s`` once the warm-up is over, else ``None``."""
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


def _percentile(ordered: list[float], q: float) -> float:
    """numpy's default (linear) percentile of an already sorted list."""
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
