"""Two variants of one call timed in alternating blocks (``A B B A ...``) sharing host state."""

from __future__ import annotations

import logging
import math
import statistics
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.loop import BenchResult, stop_fields, summarize, timed_call, warm_up
from ascendbench.bench.stats import Shift
from ascendbench.progress import Progress, ProgressOptions
from ascendbench.progress import quiet as quiet_calls

log = logging.getLogger(__name__)

PATTERN = (0, 1, 1, 0)  # one cycle of blocks (0: A, 1: B): each side first in half of the pairs
BLOCK_S = 0.016  # a block lasts about this long: 1 to MAX_BLOCK_CALLS calls
MAX_BLOCK_CALLS = 16
# Untimed calls opening a block of more than one call: the first call after a switch pays for it
# (caches, a patch applied) and would bias the side whose context costs more.
LEAD_IN = 1
MIN_PAIRS = 8  # fewest pairs before the precision stop may end the run


@dataclass(frozen=True)
class Side:
    """One variant: its name, its call, and the context each of its blocks runs in."""

    name: str
    call: Callable[[], Any]
    context: Callable[[], ContextManager[Any]] | None = None

    def block(self) -> ContextManager[Any]:
        """The context of one block of this side (a patch applied and restored)."""
        return self.context() if self.context is not None else nullcontext()


@dataclass
class Interleaved:
    """Both sides' results (A first), the pairs' block medians, and how the run went."""

    results: tuple[BenchResult, BenchResult]
    pairs: list[tuple[float, float]]
    block_calls: int
    seconds: float
    reason: str
    id: str


def paired_half_width(pairs: list[tuple[float, float]]) -> float | None:
    """The larger relative side of the sign test's 95% interval of B/A; None below 6 pairs."""
    if not pairs:
        return None
    shift = Shift.paired([a for a, _ in pairs], [b for _, b in pairs])
    low, high = shift.bounds(0.025)
    if low <= -1.0:
        return None
    return math.expm1(max(shift.log - math.log1p(low), math.log1p(high) - shift.log))


@dataclass
class _Blocks:
    """Each side's calls (in time order), the pairs' block medians, why and when blocks stopped."""

    samples: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    pairs: list[tuple[float, float]] = field(default_factory=list)
    reason: str | None = None
    seconds: float = 0.0


@dataclass
class InterleavedLoop:
    """The interleaved timing loop on one device (arguments as in ``BenchLoop``)."""

    adapter: Any
    budget: BenchBudget
    noise_threshold: float = 0.10
    clock: Callable[[], float] = time.perf_counter
    progress: ProgressOptions | None = None

    def run(self, a: Side, b: Side) -> Interleaved:
        """Cold call and warm-up of each side, then alternating blocks until the budget stops."""
        sides, cold, warm = (a, b), [], []
        for side in sides:
            label = f"cold call ({side.name})"
            with side.block(), Progress(label, unit="", options=self.progress).ticking():
                cold.append(timed_call(side.call, self.adapter, self.clock, keep=True)[:2])
        for side, (_, cold_ms) in zip(sides, cold, strict=True):
            with side.block():
                warm.append(warm_up(side.call, self, cold_ms, name=f" ({side.name})"))
        median_s = max(statistics.median(r.times_ms or [c[1]])
                       for r, c in zip(warm, cold, strict=True)) / 1e3
        fit = int(BLOCK_S / median_s) if median_s > 0 else MAX_BLOCK_CALLS
        calls = max(1, min(MAX_BLOCK_CALLS, fit))
        self.adapter.synchronize()
        self.adapter.reset_peak_memory()
        timed = self._blocks(sides, calls)
        run_id, memory = uuid.uuid4().hex, self.adapter.peak_memory_mb()
        width = paired_half_width(timed.pairs)
        stop = {"reason": timed.reason, "timed_s": timed.seconds, "interleaved": True,
                **stop_fields(width, self.budget, "paired"), **self.budget.to_dict()}
        results = []
        for i, side in enumerate(sides):
            latency, interval, noise = summarize(timed.samples[i], self.noise_threshold)
            results.append(BenchResult(
                cold_ms=cold[i][1], latency=latency, memory=memory, samples_ms=timed.samples[i],
                first_outputs=cold[i][0], interval=interval.to_dict() if interval else None,
                noise=noise, warmup=warm[i].to_dict(),
                stop={**stop, "iters": len(timed.samples[i])},
                interleave={"id": run_id, "side": side.name, "position": "AB"[i],
                            "order": "".join("AB"[k] for k in PATTERN), "block_calls": calls,
                            "untimed_lead_in": LEAD_IN if calls > 1 else 0,
                            "pairs": len(timed.pairs),
                            "block_medians_ms": [pair[i] for pair in timed.pairs]}))
        run = Interleaved((results[0], results[1]), timed.pairs, calls, timed.seconds,
                          reason=timed.reason or "", id=run_id)
        log.info("interleaved %s: %d pairs of %d-call blocks in %s", f"{a.name} | {b.name}",
                 len(run.pairs), calls,
                 f"{run.seconds:.3g} s, stopped by {run.reason} (paired 95% CI +-"
                 f"{'n/a' if width is None else f'{width:.2%}'})")
        return run

    def _blocks(self, sides: tuple[Side, Side], calls: int) -> _Blocks:
        timed = _Blocks()
        bar = Progress("timing A/B", unit="pairs", budget_s=self.budget.max_time_s,
                       options=self.progress)
        with quiet_calls():
            while timed.reason is None:
                for k in range(0, len(PATTERN), 2):  # two pairs of neighbouring blocks: AB, BA
                    medians = [0.0, 0.0]
                    for index in PATTERN[k:k + 2]:
                        medians[index] = self._block(sides[index], calls, timed, index)
                    timed.pairs.append((medians[0], medians[1]))
                timed.reason = self._stop(timed, calls)
                bar.update(len(PATTERN) // 2, last=f"{len(timed.pairs)} pairs")
        bar.close()
        return timed

    def _block(self, side: Side, calls: int, timed: _Blocks, index: int) -> float:
        """The median (ms) of ``calls`` timed calls of ``side`` in its (untimed) context."""
        into = timed.samples[index]
        start = len(into)
        with side.block():
            for _ in range(LEAD_IN if calls > 1 else 0):
                timed_call(side.call, self.adapter, self.clock)
            t0 = self.clock()
            for _ in range(calls):
                into.append(timed_call(side.call, self.adapter, self.clock)[1])
            timed.seconds += self.clock() - t0
        return statistics.median(into[start:])

    def _stop(self, timed: _Blocks, calls: int) -> str | None:
        b, n = self.budget, len(timed.pairs)
        if n * calls >= b.max_iters:
            return "max_iters"
        if timed.seconds >= b.max_time_s:
            return "max_time_s"
        if n < MIN_PAIRS or timed.seconds < b.min_time_s or n * calls < b.min_iters:
            return None
        if b.precision is None:
            return "min_reached"
        width = paired_half_width(timed.pairs)
        return "precision" if width is not None and width <= b.precision else None
