"""Two variants of one call timed in alternating blocks, so that the host's state of the moment cancels out.

Two runs timed one after the other meet the host in two states: on a shared host the level of a 1 ms op moves
by 5% to 40% from one second to the next (another tenant's work on the same cores), and no test on two such
runs tells a 5% regression from that. Timed in alternating short blocks (``A B B A A B B A ...``, each block
``block_calls`` calls), neighbouring blocks of A and B share the host's state; the log ratio of each such pair
of block medians holds the difference between the variants and little of the host. A block of more than one
call starts with ``LEAD_IN`` untimed call: the first call after a switch pays for it. ``ABBA`` rather than
``ABAB``: each variant goes first in half of the pairs, so whatever the first block of a pair pays (the
caches the other variant left) falls on both alike.

The paired evidence is kept in each side's record as ``bench.interleave`` (the run's ``id``, the ``side``,
``order``, ``block_calls`` and the per-pair ``block_medians_ms`` in time order); the regression gate pairs two
records holding the same ``id`` (:mod:`ascendbench.report.paired`). Each side is otherwise an ordinary
:class:`~ascendbench.bench.loop.BenchResult`: cold call, warm-up, latency and interval of its own calls.

Budget (:class:`~ascendbench.bench.budget.BenchBudget`): the warm-up rule per side; then blocks until the paired
shift's 95% interval is within ``precision`` (checked after every ``ABBA`` cycle, once ``MIN_PAIRS`` pairs and
``min_time_s`` seconds are timed), or ``max_time_s`` seconds of timed blocks (both sides together), or
``max_iters`` timed calls a side.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Sequence

from ascendbench.bench.blocks import drift_verdict
from ascendbench.bench.budget import BenchBudget, WarmupRule
from ascendbench.bench.loop import BenchResult, _timed_call, warmup_section, with_interval
from ascendbench.bench.stats import median_ci_ranks, noise_verdict
from ascendbench.progress import Progress, ProgressOptions
from ascendbench.progress import quiet as quiet_calls

log = logging.getLogger(__name__)

# The sides of one cycle of blocks (0: A, 1: B): two pairs, A then B, then B then A.
PATTERN = (0, 1, 1, 0)
# A block lasts about this long (its calls: the warm-up median's share of it, 1 to MAX_BLOCK_CALLS): short
# against the seconds over which a shared host's level moves, long enough for a block median.
BLOCK_S = 0.016
MAX_BLOCK_CALLS = 16
# Untimed calls at the start of every block of more than one call: the first call after a switch pays for it (the
# caches the other variant left, the work of entering this side's context, a patch applied) and would bias the side
# whose context costs more; blocks of one call (calls of 16 ms or more) have none, the switch is small beside them.
LEAD_IN = 1
# Fewest pairs of blocks before the precision stop may end the run (the sign test's interval needs 6).
MIN_PAIRS = 8


@dataclass(frozen=True)
class Side:
    """One variant: its call, and the context its calls run in (entered around every block of it).

    Attributes:
        name: the variant's name in the log and the record (``unpatched``, ``patched``, ``old``).
        call: zero-argument callable running one call of this variant.
        context: returns the context manager a block of this variant runs in (a patch applied and restored);
            ``None``: no context.
    """

    name: str
    call: Callable[[], Any]
    context: Callable[[], ContextManager[Any]] | None = None

    def block(self) -> ContextManager[Any]:
        """The context of one block of this side."""
        return self.context() if self.context is not None else nullcontext()


@dataclass
class Interleaved:
    """Both sides' results (A first), each carrying its ``interleave`` section, and the pairs' block medians."""

    results: tuple[BenchResult, BenchResult]
    pairs: list[tuple[float, float]]
    block_calls: int
    seconds: float
    reason: str
    id: str

    def describe(self, a: str, b: str) -> str:
        """One line: the sides, the pairs and block length, the time, why the run stopped, the paired interval."""
        width = self.relative_half_width()
        return (f"interleaved {a} | {b}: {len(self.pairs)} pairs of {self.block_calls}-call blocks in "
                f"{self.seconds:.3g} s, stopped by {self.reason} (paired 95% CI +-"
                f"{'n/a' if width is None else f'{width:.2%}'})")

    def relative_half_width(self) -> float | None:
        """Half-width of the paired shift's distribution-free 95% interval (relative), or ``None``."""
        return paired_half_width(self.pairs)


def paired_half_width(pairs: Sequence[tuple[float, float]]) -> float | None:
    """The larger side of the sign-test 95% interval of the median log ratio B/A, as a relative width."""
    ranks = median_ci_ranks(len(pairs))
    if ranks is None:
        return None
    logs = sorted(math.log(b / a) for a, b in pairs)
    mid = statistics.median(logs)
    return math.expm1(max(mid - logs[ranks[0] - 1], logs[ranks[1] - 1] - mid))


@dataclass
class InterleavedLoop:
    """The interleaved timing loop on one device (the arguments of :class:`~ascendbench.bench.loop.BenchLoop`)."""

    adapter: Any
    budget: BenchBudget
    noise_threshold: float = 0.10
    clock: Callable[[], float] = time.perf_counter
    progress: ProgressOptions | None = None

    def run(self, a: Side, b: Side) -> Interleaved:
        """Cold call and warm-up of each side, then alternating blocks (``ABBA``) until the budget says stop."""
        sides = (a, b)
        cold = [self._cold(side) for side in sides]
        warm = [self._warmup(side, ms) for side, (_, ms) in zip(sides, cold, strict=True)]
        median_s = _median_s(*(rule.times_ms or [ms] for rule, (_, ms) in zip(warm, cold, strict=True)))
        calls = max(1, min(MAX_BLOCK_CALLS, int(BLOCK_S / median_s) if median_s > 0 else MAX_BLOCK_CALLS))
        self.adapter.synchronize()
        self.adapter.reset_peak_memory()
        timed = self._blocks(sides, calls)
        shared = (uuid.uuid4().hex, calls, self.adapter.peak_memory_mb())
        results = tuple(self._result(i, (sides[i], cold[i], warm[i]), timed, shared) for i in range(2))
        run = Interleaved(results=results, pairs=timed.pairs, block_calls=calls,  # type: ignore[arg-type]
                          seconds=timed.seconds, reason=timed.reason or "", id=shared[0])
        log.info("%s", run.describe(a.name, b.name))
        return run

    def _cold(self, side: Side) -> tuple[Any, float]:
        with side.block(), Progress(f"cold call ({side.name})", unit="", options=self.progress).ticking():
            out, ms, _ = _timed_call(side.call, self.adapter, self.clock, None, keep=True)
        return out, ms

    def _warmup(self, side: Side, cold_ms: float) -> WarmupRule:
        rule = WarmupRule(self.budget, cold_ms)
        with side.block(), quiet_calls():
            while rule.reason() is None:
                rule.add(_timed_call(side.call, self.adapter, self.clock, None)[1])
        return rule

    def _blocks(self, sides: tuple[Side, Side], calls: int) -> "_Blocks":
        timed, budget = _Blocks(), self.budget
        bar = Progress("timing A/B", unit="pairs", budget_s=budget.max_time_s, options=self.progress)
        with quiet_calls():
            while timed.reason is None:
                for k in range(0, len(PATTERN), 2):  # a cycle: ABBA, two pairs of neighbouring blocks
                    medians = [0.0, 0.0]
                    for index in PATTERN[k:k + 2]:
                        medians[index] = self._block(sides[index], calls, timed, index)
                    timed.pairs.append((medians[0], medians[1]))
                timed.reason = self._stop(timed, calls)
                bar.update(len(PATTERN) // 2, last=f"{len(timed.pairs)} pairs")
        bar.close()
        return timed

    def _block(self, side: Side, calls: int, timed: "_Blocks", index: int) -> float:
        """One block of ``side`` (``index`` 0 or 1): ``calls`` timed calls in its context; their median (ms).
        The seconds the calls took count towards the timed region (the context's own entry and exit do not)."""
        into = timed.samples[index]
        start = len(into)
        with side.block():
            for _ in range(LEAD_IN if calls > 1 else 0):
                _timed_call(side.call, self.adapter, self.clock, None)
            t0 = self.clock()
            for _ in range(calls):
                into.append(_timed_call(side.call, self.adapter, self.clock, None)[1])
            timed.seconds += self.clock() - t0
        return statistics.median(into[start:])

    def _stop(self, timed: "_Blocks", calls: int) -> str | None:
        b = self.budget
        if len(timed.pairs) * calls >= b.max_iters:
            return "max_iters"
        if timed.seconds >= b.max_time_s:
            return "max_time_s"
        if len(timed.pairs) < MIN_PAIRS or timed.seconds < b.min_time_s or len(timed.pairs) * calls < b.min_iters:
            return None
        if b.precision is None:
            return "min_reached"
        width = paired_half_width(timed.pairs)
        return "precision" if width is not None and width <= b.precision else None

    def _result(self, index: int, done: tuple[Side, tuple[Any, float], WarmupRule], timed: "_Blocks",
                run: tuple[str, int, Any]) -> BenchResult:
        """Side ``index``'s result: its own calls' statistics, the run's stop, and its ``interleave`` section.
        ``done``: the side, its cold call (outputs, ms) and warm-up; ``run``: the run's id, block calls, peak memory."""
        side, (first, cold_ms), warm = done
        memory = run[2]
        samples, width = timed.samples[index], paired_half_width(timed.pairs)
        latency, interval = with_interval(samples)
        noise = {**noise_verdict(latency, self.noise_threshold), **drift_verdict(interval)}
        precise = None if self.budget.precision is None or width is None else width <= self.budget.precision
        return BenchResult(
            cold_ms=cold_ms, latency=latency, memory=memory, samples_ms=samples, first_outputs=first,
            interval=interval, noise=noise, warmup=warmup_section(warm),
            stop={"reason": timed.reason, "iters": len(samples), "timed_s": timed.seconds, "interleaved": True,
                  "ci_rel_half_width": width, "ci_source": "paired", "precision_met": precise,
                  **self.budget.to_dict()},
            interleave={"id": run[0], "side": side.name, "position": "AB"[index], "order": order(),
                        "block_calls": run[1], "untimed_lead_in": LEAD_IN if run[1] > 1 else 0,
                        "pairs": len(timed.pairs),
                        "block_medians_ms": [pair[index] for pair in timed.pairs]},
        )


def order() -> str:
    """The cycle of blocks as letters (``ABBA``)."""
    return "".join("AB"[i] for i in PATTERN)


@dataclass
class _Blocks:
    """What the alternating blocks left: each side's calls (time order), the pairs' medians, why they stopped."""

    samples: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    pairs: list[tuple[float, float]] = field(default_factory=list)
    reason: str | None = None
    seconds: float = 0.0


def _median_s(*times_ms: Sequence[float]) -> float:
    """The larger of the sides' median warm-up call, in seconds (it sizes the blocks)."""
    return max(statistics.median(times) for times in times_ms) / 1e3


def run_interleaved(a: Side, b: Side, adapter: Any, budget: BenchBudget) -> Interleaved:
    """Time ``a`` and ``b`` in alternating blocks on ``adapter``'s device: ``InterleavedLoop(...).run(a, b)``."""
    return InterleavedLoop(adapter, budget).run(a, b)
