"""The timing loop: cold call, warmups, timed calls bracketed by device synchronize."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ascendbench.bench.stats import LatencyStats

log = logging.getLogger(__name__)


@dataclass
class BenchResult:
    """What the timing loop measured; ``first_outputs`` are the outputs of the cold call."""

    cold_ms: float
    latency: LatencyStats
    memory: dict[str, Any]
    samples_ms: list[float] = field(default_factory=list)
    first_outputs: Any = None
    timer: str = "host perf_counter bracketed by device synchronize"

    def to_dict(self, items_per_call: int, unit: str) -> dict[str, Any]:
        """The record's ``bench`` section; throughput from the median latency."""
        median_s = self.latency.median_ms / 1e3
        return {
            "cold_ms": self.cold_ms,
            "latency": self.latency.to_dict(),
            "throughput": {"value": items_per_call / median_s if median_s > 0 else None,
                           "unit": f"{unit}/s", "items_per_call": items_per_call},
            "memory": self.memory,
            "samples_ms": self.samples_ms,
            "timer": self.timer,
        }


def run_bench(call: Callable[[], Any], adapter: Any, warmup: int, iters: int, max_time_s: float,
              clock: Callable[[], float] = time.perf_counter) -> BenchResult:
    """Time ``call`` on ``adapter``'s device.

    The first call is timed alone as ``cold`` (it includes operator compilation on NPU); ``warmup``
    calls follow untimed; then up to ``iters`` calls are timed one by one, each bracketed by
    ``adapter.synchronize()``, stopping early once ``max_time_s`` of timed calls have run (at least
    one is always timed). Peak memory covers the timed calls only.
    """
    adapter.synchronize()
    start = clock()
    first = call()
    adapter.synchronize()
    cold_ms = (clock() - start) * 1e3
    log.info("cold call: %.1f ms; %d warmup call(s), then up to %d timed", cold_ms, warmup, iters)
    for _ in range(int(warmup)):
        call()
    adapter.synchronize()
    adapter.reset_peak_memory()
    samples: list[float] = []
    budget_start = clock()
    while len(samples) < max(1, int(iters)):
        adapter.synchronize()
        t0 = clock()
        call()
        adapter.synchronize()
        samples.append(clock() - t0)
        if clock() - budget_start > max_time_s:
            log.info("bench.max_time_s=%s reached after %d timed call(s)", max_time_s, len(samples))
            break
    return BenchResult(cold_ms=cold_ms, latency=LatencyStats.from_seconds(samples),
                       memory=adapter.peak_memory_mb(), samples_ms=[s * 1e3 for s in samples],
                       first_outputs=first)
