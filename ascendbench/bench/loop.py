"""The timing loop: cold call, warmups, timed calls with host clock and device events, stop rule.

Every call is bracketed the same way::

    adapter.synchronize(); t0 = clock(); start.record(); call(); end.record(); adapter.synchronize(); t1 = clock()

so the host sample ``t1 - t0`` is end-to-end wall time of finished device work, and the event sample
``start.elapsed_time(end)`` is the device's own timeline (where the device has events: CUDA, NPU).
Both are recorded; the host one is primary (throughput, stop rule). The first call is timed apart as
``cold`` (it includes NPU operator compilation and CUDA context/kernel loading); ``warmup`` untimed
calls follow; then timed calls until the :class:`~ascendbench.bench.budget.StopRule` says stop.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ascendbench.bench.budget import BenchBudget, StopRule
from ascendbench.bench.phases import summarize_phases
from ascendbench.bench.stats import LatencyStats, noise_verdict

log = logging.getLogger(__name__)

HOST_TIMER = "host perf_counter bracketed by device synchronize"


@dataclass
class BenchResult:
    """What the timing loop measured; ``first_outputs`` are the outputs of the cold call."""

    cold_ms: float
    latency: LatencyStats
    memory: dict[str, Any]
    samples_ms: list[float] = field(default_factory=list)
    first_outputs: Any = None
    timer: str = HOST_TIMER
    cold_event_ms: float | None = None
    event_latency: LatencyStats | None = None
    event_samples_ms: list[float] | None = None
    event_timer: str | None = None
    noise: dict[str, Any] = field(default_factory=dict)
    stop: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, Any] | None = None

    def to_dict(self, items_per_call: int, unit: str) -> dict[str, Any]:
        """The record's ``bench`` section; throughput from the median host latency."""
        median_s = self.latency.median_ms / 1e3
        section = {
            "cold_ms": self.cold_ms,
            "cold_event_ms": self.cold_event_ms,
            "cold_over_median": self.cold_ms / self.latency.median_ms if self.latency.median_ms > 0 else None,
            "latency": self.latency.to_dict(),
            "event_latency": self.event_latency.to_dict() if self.event_latency else None,
            "throughput": {"value": items_per_call / median_s if median_s > 0 else None,
                           "unit": f"{unit}/s", "items_per_call": items_per_call},
            "memory": self.memory,
            "noise": self.noise,
            "stop": self.stop,
            "samples_ms": self.samples_ms,
            "event_samples_ms": self.event_samples_ms,
            "timer": self.timer,
            "event_timer": self.event_timer,
        }
        if self.phases:
            section["phases"] = self.phases
        return section


def _timed_call(call: Callable[[], Any], adapter: Any, clock: Callable[[], float],
                events: tuple[Any, Any] | None, keep: bool = False) -> tuple[Any, float, float | None]:
    """One bracketed call: (outputs if ``keep`` else None, host ms, event ms or None).

    Outputs not kept are freed before the next call starts, as in a plain loop: holding them would
    make every call allocate fresh memory next to the previous outputs (slower, and a higher peak).
    """
    adapter.synchronize()
    t0 = clock()
    if events is not None:
        events[0].record()
    out = call()
    if events is not None:
        events[1].record()
    adapter.synchronize()
    host_ms = (clock() - t0) * 1e3
    return (out if keep else None), host_ms, (float(events[0].elapsed_time(events[1])) if events is not None else None)


def _event_pair(adapter: Any, use_events: bool) -> tuple[Any, Any] | None:
    if not use_events:
        return None
    start = adapter.new_event()
    return None if start is None else (start, adapter.new_event())


@dataclass
class BenchLoop:
    """The timing loop on one device: what it runs on and how samples are judged.

    Attributes:
        adapter: the device adapter (synchronize, events, peak memory).
        budget: warmup count, iteration and time bounds, stability threshold.
        noise_threshold: IQR/median above which the record carries a noise warning.
        use_events: also time with device events where the device has them.
        clock: host clock in seconds (a fake one in tests).
    """

    adapter: Any
    budget: BenchBudget
    noise_threshold: float = 0.10
    use_events: bool = True
    clock: Callable[[], float] = time.perf_counter

    def run(self, call: Callable[[], Any], phase_timer: Any = None) -> BenchResult:
        """Time ``call``: a cold call, the warmups, then timed calls until the stop rule says stop.

        Args:
            call: zero-argument callable running one model call on inputs already on the device.
            phase_timer: object with ``reset()`` and ``result()`` (a :class:`PhaseTimer`) for per-phase
                timing; reset before every call, read after every timed one.

        Peak memory covers the timed calls only (reset right before them).
        """
        adapter, budget, clock = self.adapter, self.budget, self.clock
        events = _event_pair(adapter, self.use_events)
        if phase_timer is not None:
            phase_timer.reset()
        first, cold_ms, cold_event_ms = _timed_call(call, adapter, clock, events, keep=True)
        cold_phases = phase_timer.result() if phase_timer is not None else None
        log.info("cold call: %.3f ms; %d warmup call(s), then %d-%d timed (%.3g-%.3g s, stability %s)", cold_ms,
                 budget.warmup, budget.min_iters, budget.max_iters, budget.min_time_s, budget.max_time_s,
                 budget.stability)
        for _ in range(budget.warmup):
            if phase_timer is not None:
                phase_timer.reset()
            call()
        adapter.synchronize()
        adapter.reset_peak_memory()

        rule = StopRule(budget)
        samples: list[float] = []
        event_samples: list[float] = []
        phase_runs: list[dict[str, list[float]]] = []
        start = clock()
        while True:
            if phase_timer is not None:
                phase_timer.reset()
            _, host_ms, event_ms = _timed_call(call, adapter, clock, events)
            samples.append(host_ms)
            rule.add(host_ms)
            if event_ms is not None:
                event_samples.append(event_ms)
            if phase_timer is not None:
                phase_runs.append(phase_timer.result())
            reason = rule.reason(clock() - start)
            if reason is not None:
                break
        timed_s = clock() - start
        memory = adapter.peak_memory_mb()
        log.info("timed %d call(s) in %.3g s, stopped by %s", len(samples), timed_s, reason)

        latency = LatencyStats.from_ms(samples)
        noise = noise_verdict(latency, self.noise_threshold)
        if noise["noisy"]:
            log.warning(noise["warning"])
        return BenchResult(
            cold_ms=cold_ms, latency=latency, memory=memory, samples_ms=samples, first_outputs=first,
            cold_event_ms=cold_event_ms,
            event_latency=LatencyStats.from_ms(event_samples) if event_samples else None,
            event_samples_ms=event_samples or None,
            event_timer=f"{adapter.name} events recorded around the call" if events is not None else None,
            noise=noise,
            stop={"reason": reason, "iters": len(samples), "timed_s": timed_s, **budget.to_dict()},
            phases=summarize_phases(phase_runs, latency.median_ms, cold_phases) if phase_runs else None,
        )


def run_bench(call: Callable[[], Any], adapter: Any, budget: BenchBudget, noise_threshold: float = 0.10,
              use_events: bool = True, phase_timer: Any = None) -> BenchResult:
    """Time ``call`` on ``adapter``'s device with the host clock: ``BenchLoop(...).run(call, phase_timer)``.

    See :class:`BenchLoop` for the arguments (a test with a fake clock builds the loop itself).
    """
    return BenchLoop(adapter, budget, noise_threshold, use_events).run(call, phase_timer)
