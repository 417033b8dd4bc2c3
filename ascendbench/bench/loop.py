"""The timing loop: cold call, warm-up, synchronized timed calls, the stop rule (``bench``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ascendbench.bench.budget import BenchBudget, StopRule, WarmupRule
from ascendbench.bench.phases import summarize_phases
from ascendbench.bench.stats import MIN_CALLS, Interval, LatencyStats, noise_verdict
from ascendbench.digits import figure
from ascendbench.progress import Progress, ProgressOptions
from ascendbench.progress import quiet as quiet_calls

log = logging.getLogger(__name__)

HOST_TIMER = "host perf_counter bracketed by device synchronize"
TICK_S = 0.5  # the timed loop refreshes its progress at most this often


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
    warmup: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, Any] | None = None
    interval: dict[str, Any] | None = None
    interleave: dict[str, Any] | None = None

    def to_dict(self, items_per_call: int, unit: str) -> dict[str, Any]:
        """The record's ``bench`` section; throughput from the median host latency."""
        median_ms = self.latency.median_ms
        section = {
            "cold_ms": self.cold_ms, "cold_event_ms": self.cold_event_ms,
            "cold_over_median": self.cold_ms / median_ms if median_ms > 0 else None,
            "latency": self.latency.to_dict(),
            "event_latency": self.event_latency.to_dict() if self.event_latency else None,
            "throughput": {"value": items_per_call * 1e3 / median_ms if median_ms > 0 else None,
                           "unit": f"{unit}/s", "items_per_call": items_per_call},
            "memory": self.memory, "noise": self.noise, "interval": self.interval,
            "stop": self.stop, "warmup": self.warmup, "samples_ms": self.samples_ms,
            "event_samples_ms": self.event_samples_ms, "timer": self.timer,
            "event_timer": self.event_timer}
        extra = (("phases", self.phases), ("interleave", self.interleave))
        section.update({key: value for key, value in extra if value})
        return section


def timed_call(call: Callable[[], Any], adapter: Any, clock: Callable[[], float],
               events: tuple[Any, Any] | None = None,
               keep: bool = False) -> tuple[Any, float, float | None]:
    """One synchronized call: (outputs if ``keep``, host ms, event ms); unkept outputs are freed."""
    adapter.synchronize()
    t0 = clock()
    if events is not None:
        events[0].record()
    out = call()
    if events is not None:
        events[1].record()
    adapter.synchronize()
    host_ms = (clock() - t0) * 1e3
    event_ms = float(events[0].elapsed_time(events[1])) if events else None
    return (out if keep else None), host_ms, event_ms


def warm_up(call: Callable[[], Any], loop: Any, cold_ms: float,
            reset: Callable[[], None] | None = None, name: str = "") -> WarmupRule:
    """Warm-up calls (host-timed, quiet) until the :class:`WarmupRule` of ``loop.budget`` ends."""
    rule = WarmupRule(loop.budget, cold_ms)
    bar = Progress(f"warm-up{name}", total=rule.cap or None, unit="calls", options=loop.progress)
    with quiet_calls():
        while rule.reason() is None:
            if reset is not None:
                reset()
            rule.add(timed_call(call, loop.adapter, loop.clock)[1])
            bar.update(1, last=f"{figure(rule.times_ms[-1])} ms")
    bar.close()
    log.info("warm-up%s: %d call(s), stopped by %s", name, len(rule.times_ms), rule.reason())
    return rule


def summarize(samples_ms: list[float], threshold: float, earlier_ms: tuple[float, ...] = ()
              ) -> tuple[LatencyStats, Interval | None, dict[str, Any]]:
    """The statistics, the interval and the noise verdict of one side's calls (warnings logged)."""
    latency = LatencyStats.from_ms(samples_ms, earlier_ms)
    interval = Interval.of(samples_ms, earlier_ms)
    noise = noise_verdict(latency, threshold, interval)
    for warning in filter(None, (noise["warning"], noise["runs_warning"])):
        log.warning(warning)
    return latency, interval, noise


def stop_fields(interval: Any, budget: BenchBudget, source: str | None) -> dict[str, Any]:
    """``bench.stop``'s ``ci_rel_half_width``, ``ci_source``, ``precision_met``."""
    achieved = interval.rel_half_width() if isinstance(interval, Interval) else interval
    met = None if budget.precision is None or achieved is None else achieved <= budget.precision
    return {"ci_rel_half_width": achieved, "ci_source": source, "precision_met": met}


@dataclass
class BenchLoop:
    """The timing loop on one device (its workload's :class:`RunHistory` or None)."""

    adapter: Any
    budget: BenchBudget
    noise_threshold: float = 0.10
    use_events: bool = True
    clock: Callable[[], float] = time.perf_counter
    progress: ProgressOptions | None = None
    history: Any = None

    def run(self, call: Callable[[], Any], phase_timer: Any = None) -> BenchResult:
        """Time ``call``: cold call, warm-up, timed calls until the stop rule (``phase_timer``)."""
        adapter, budget = self.adapter, self.budget
        earlier = tuple(self.history.earlier()) if self.history is not None else ()
        events = None
        if self.use_events and (start := adapter.new_event()) is not None:
            events = (start, adapter.new_event())
        reset = phase_timer.reset if phase_timer is not None else None
        if reset:
            reset()
        with Progress("cold call", unit="", options=self.progress).ticking():
            first, cold_ms, cold_event_ms = timed_call(call, adapter, self.clock, events, keep=True)
        cold_phases = phase_timer.result() if phase_timer is not None else None
        warmup = warm_up(call, self, cold_ms, reset)
        adapter.synchronize()
        adapter.reset_peak_memory()  # peak memory covers the timed calls only
        rule = StopRule(budget, earlier)
        timed = self._timed(call, events, phase_timer, rule)
        latency, interval, noise = summarize(rule.samples, self.noise_threshold, earlier)
        if self.history is not None and len(rule) >= MIN_CALLS:
            self.history.add(latency.median_ms)
        events_ms, phases = timed["events"], timed["phases"]
        stop = {"reason": timed["reason"], "iters": len(rule), "timed_s": timed["seconds"],
                "untimed_after_checks": timed["rewarm"],
                **stop_fields(interval, budget, interval.term[0] if interval else None),
                **budget.to_dict()}
        return BenchResult(
            cold_ms=cold_ms, latency=latency, memory=adapter.peak_memory_mb(),
            samples_ms=rule.samples, first_outputs=first, cold_event_ms=cold_event_ms, noise=noise,
            stop=stop, warmup=warmup.to_dict(), interval=interval.to_dict() if interval else None,
            event_latency=LatencyStats.from_ms(events_ms) if events_ms else None,
            event_samples_ms=events_ms or None,
            event_timer=f"{adapter.name} events recorded around the call" if events_ms else None,
            phases=summarize_phases(phases, latency.median_ms, cold_phases) if phases else None)

    def _timed(self, call: Callable[[], Any], events: tuple[Any, Any] | None, phase_timer: Any,
               rule: StopRule) -> dict[str, Any]:
        """The timed calls into ``rule``, quiet; progress is shown between calls only."""
        timed: dict[str, Any] = {"events": [], "phases": [], "reason": None, "rewarm": 0}
        bar = Progress("timing", unit="calls", budget_s=self.budget.max_time_s,
                       options=self.progress)
        with quiet_calls():
            start = self.clock()
            next_tick = start + TICK_S
            while timed["reason"] is None:
                if phase_timer is not None:
                    phase_timer.reset()
                _, host_ms, event_ms = timed_call(call, self.adapter, self.clock, events)
                rule.add(host_ms)
                if event_ms is not None:
                    timed["events"].append(event_ms)
                if phase_timer is not None:
                    timed["phases"].append(phase_timer.result())
                now = self.clock()
                timed["reason"] = rule.reason(now - start)
                if timed["reason"] is None and rule.disturbed:  # a check ran: one untimed call
                    rule.disturbed = False
                    timed_call(call, self.adapter, self.clock)
                    timed["rewarm"] += 1
                if now >= next_tick:
                    next_tick = now + TICK_S
                    bar.update(len(rule) - bar.done, median=median_text(rule))
            timed["seconds"] = self.clock() - start
        bar.close()
        log.info("timed %d call(s) in %.3g s, stopped by %s (median %s)", len(rule),
                 timed["seconds"], timed["reason"], median_text(rule))
        return timed


def median_text(rule: StopRule) -> str:
    """``31.2 ms +- 0.4 ms (95% CI)`` from the samples so far (the larger side of the interval)."""
    if not len(rule):
        return "n/a"
    median, found = rule.median(), rule.interval()
    ci = (f" +- {figure(found.rel_half_width() * median)} ms (95% CI)" if found
          else " (CI from 6 calls)")
    return f"{figure(median)} ms{ci}"


def run_bench(call: Callable[[], Any], adapter: Any, budget: BenchBudget,
              noise_threshold: float = 0.10) -> BenchResult:
    """Time ``call`` on ``adapter``'s device with the host clock (see :class:`BenchLoop`)."""
    return BenchLoop(adapter, budget, noise_threshold).run(call)
