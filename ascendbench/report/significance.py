"""Is NEW slower than OLD? The gate's one latency rule (docs/reports.md "Regression gate")."""

from __future__ import annotations

import json
import logging
import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.bench.stats import RUNS_CAP, Interval, Shift
from ascendbench.report import fmt

log = logging.getLogger(__name__)

# compare.method's values before the one rule: accepted (validated), logged as deprecated, ignored.
METHODS = ("paired", "blocks", "mann_whitney", "ci_overlap", "median")
MIN_PAIRS = 6  # fewest interleaved pairs the sign test's bound is taken from
PAIRED = "paired"
INTERVALS = "intervals"
MEDIANS = "medians only"


@dataclass(frozen=True)
class Pairing:
    """One side's share of an interleaved run: its id, the side's position, its block medians."""

    id: str
    position: str
    block_medians_ms: tuple[float, ...]

    @classmethod
    def from_section(cls, section: Any, samples: Sequence[float] | None) -> Pairing | None:
        """From ``bench.interleave`` and the side's calls; None if absent or not its own medians."""
        if not isinstance(section, Mapping) or not samples:
            return None
        run, position = section.get("id"), section.get("position")
        medians, calls = section.get("block_medians_ms"), section.get("block_calls")
        if (not isinstance(run, str) or position not in ("A", "B") or not isinstance(medians, list)
                or not isinstance(calls, int) or isinstance(calls, bool) or calls < 1
                or len(samples) != calls * len(medians)):
            return None
        own = [statistics.median(samples[i * calls:(i + 1) * calls]) for i in range(len(medians))]
        if all(isinstance(stated, (int, float)) and math.isclose(stated, found, rel_tol=1e-9)
               for stated, found in zip(medians, own, strict=True)):
            return cls(run, position, tuple(own))
        return None


def why_not_paired(old: Pairing | None, new: Pairing | None) -> str | None:
    """Why OLD and NEW cannot be paired (None when they can)."""
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
        return f"{len(old.block_medians_ms)} interleaved pairs < {MIN_PAIRS}, too few to pair"
    return None


@dataclass(frozen=True)
class Latency:
    """One side's median, interval (None without calls), pairing, and doubt (None: believed)."""

    median_ms: float
    interval: Interval | None = None
    pairing: Pairing | None = None
    doubt: str | None = None


@dataclass(frozen=True)
class LatencyRule:
    """When a slower median counts as a regression (report.yaml ``compare``)."""

    alpha: float = 0.05
    min_effect: float = 0.03

    @classmethod
    def from_options(cls, options: Any) -> LatencyRule:
        """From the ``compare`` options (``method``, ``min_samples``: logged, ignored)."""
        for key in ("method", "min_samples"):
            if options.get(key) is not None:
                log.warning("compare.%s=%s is deprecated and ignored: the gate has one rule "
                            "(docs/reports.md \"Regression gate\"); drop it from your overrides",
                            key, options.get(key))
        return cls(alpha=float(options.alpha), min_effect=float(options.min_effect))

    def describe(self) -> str:
        """The rule in one sentence, for the head of the gate's output."""
        return (f"latency rule: NEW is slower when the one-sided {1 - self.alpha:.0%} lower bound "
                f"of its median over OLD's exceeds +{self.min_effect:.1%} (from the pairs of an "
                "interleaved run, else from both runs' intervals)")


@dataclass(frozen=True)
class Decision:
    """The verdict on one workload's latency: regressed or not, how, the effect, and why."""

    regressed: bool
    method: str
    effect: str
    why: str

    def text(self) -> str:
        """One line: the effect with its interval, and the verdict with its reason."""
        return f"{self.effect}: {'SLOWER' if self.regressed else 'ok'} ({self.why})"


def decide(old: Latency, new: Latency, rule: LatencyRule) -> Decision:
    """Judge NEW's latency against OLD's by the one rule."""
    interleaved = old.pairing is not None or new.pairing is not None
    note = why_not_paired(old.pairing, new.pairing) if interleaved else None
    if interleaved and note is None:
        method = PAIRED
        shift = Shift.paired(old.pairing.block_medians_ms, new.pairing.block_medians_ms)
    else:  # NEW's own history ends in NEW: a real slowdown there would count as the host's spread
        runs = old.interval.earlier_ms if old.interval else ()
        new_interval = replace(new.interval, earlier_ms=runs) if new.interval else None
        shift = Shift.apart((old.median_ms, old.interval), (new.median_ms, new_interval))
        method = INTERVALS if old.interval or new.interval else MEDIANS
    low = shift.bounds(rule.alpha)[0]
    regressed = shift.slower(rule.alpha, rule.min_effect)
    why = [f"{'the shift' if method == MEDIANS else 'its lower bound'} {low:+.1%} "
           f"{'>' if regressed else '<='} the minimum effect +{rule.min_effect:.1%}"]
    if method == MEDIANS:
        why[0] += ", untested"
        why.append("no per-call samples in OLD and NEW")
    why += [note] if note else []
    if old.interval and old.interval.set_aside:
        why.append(f"OLD's {len(old.interval.earlier_ms)} earlier run medians set aside: beyond "
                   f"{RUNS_CAP:g}x its calls' spread (a host gone wild or a forged history)")
    return Decision(regressed, method, shift.text(rule.alpha), "; ".join(why))


def section_latency(bench: Any, median: float) -> Latency:
    """A ``bench`` section's interval and pairing, recomputed from its calls and earlier medians."""
    if not isinstance(bench, Mapping):
        return Latency(median)
    samples, stated = _positive(bench.get("samples_ms")), bench.get("interval")
    stated = stated if isinstance(stated, Mapping) else {}
    runs = stated.get("runs") if isinstance(stated.get("runs"), Mapping) else {}
    found = Interval.of(samples, _positive(runs.get("earlier_ms")) or ()) if samples else None
    width, doubt = _positive([stated.get("rel_half_width")]), None
    if (found and width and runs.get("capped") is not True  # capped: older records
            and not math.isclose(width[0], found.rel_half_width(), rel_tol=1e-6)):
        doubt = (f"its bench.interval.rel_half_width is {width[0]:.4g}, while its own calls and "
                 f"earlier runs give {found.rel_half_width():.4g}: an edited record")
    return Latency(median, found, Pairing.from_section(bench.get("interleave"), samples), doubt)


def _positive(values: Any) -> tuple[float, ...] | None:
    if not isinstance(values, list) or not values:
        return None
    usable = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                 and v > 0 for v in values)
    return tuple(float(v) for v in values) if usable else None


def latency_of(row: Mapping[str, Any]) -> Latency | None:
    """A row's median with the interval and pairing of its record file (None: no finite median)."""
    median = fmt.latency(row)
    if not median or not math.isfinite(median) or median < 0:  # NaN or Inf is no measurement
        return None
    try:
        bench = json.loads(Path(row["record"]).read_text()).get("bench")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        bench = None
    return section_latency(bench, median)
