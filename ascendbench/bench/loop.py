"""The timing loop: cold call, warmups, timed calls with host clock and device events, stop rule.

Every call is bracketed the same way::

    adapter.synchronize(); t0 = clock(); start.record(); call(); end.record(); adapter.synchronize(); t1 = clock()

so the host sample ``t1 - t0`` is end-to-end wall time of finished device work, and the event sample
``start.elapsed_time(end)`` is the device's own timeline (where the device has events: CUDA, NPU).
Both are recorded; the host one is primary (throughput, stop rule). The first call is timed apart as
``cold`` (it includes NPU operator compilation and CUDA context/kernel loading); warm-up calls follow
(host-timed, kept in ``bench.warmup`` but in no statistic) until the
:class:`~ascendbench.bench.budget.WarmupRule` says the calls stopped getting faster; then timed calls
until the :class:`~ascendbench.bench.budget.StopRule` says stop (``bench.stop`` says why, and how
close the median's CI came to ``bench.precision``). The stop rule's precision check, between two calls,
disturbs the next call's caches: the call after a check runs untimed (``bench.stop.untimed_after_checks``).
The median's interval allows for drift during the run: the
timed calls are cut into consecutive blocks (:mod:`ascendbench.bench.blocks`), ``bench.interval`` keeps the
interval from the calls (``within``) and from the block medians (``between``), and the wider is the one used.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from ascendbench.bench.blocks import drift_verdict, interval_section
from ascendbench.bench.budget import BenchBudget, StopRule, WarmupRule
from ascendbench.bench.phases import summarize_phases
from ascendbench.bench.runs import PastRun, runs_interval, runs_verdict, sampling_half_width
from ascendbench.bench.stats import MIN_CI_SAMPLES, LatencyStats, noise_verdict
from ascendbench.progress import Progress, ProgressOptions
from ascendbench.progress import quiet as quiet_calls

log = logging.getLogger(__name__)

HOST_TIMER = "host perf_counter bracketed by device synchronize"
# The timed loop refreshes its progress at most this often (a clock comparison per call otherwise).
TICK_S = 0.5


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
    interval: dict[str, Any] = field(default_factory=dict)
    interleave: dict[str, Any] | None = None

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
            "interval": self.interval,
            "stop": self.stop,
            "warmup": self.warmup,
            "samples_ms": self.samples_ms,
            "event_samples_ms": self.event_samples_ms,
            "timer": self.timer,
            "event_timer": self.event_timer,
        }
        if self.phases:
            section["phases"] = self.phases
        if self.interleave:  # timed in alternating blocks with another variant (ascendbench.bench.interleave)
            section["interleave"] = self.interleave
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
        budget: warm-up rule, iteration and time bounds, precision target.
        noise_threshold: IQR/median above which the record carries a noise warning.
        use_events: also time with device events where the device has them.
        clock: host clock in seconds (a fake one in tests).
        progress: how progress is shown (:class:`~ascendbench.progress.ProgressOptions`; a test injects one).
        history: the workload's earlier runs on this host (:class:`~ascendbench.bench.runs.RunHistory`):
            their medians give the ``between_runs`` interval, and this run's median is added after it; None:
            no history.
    """

    adapter: Any
    budget: BenchBudget
    noise_threshold: float = 0.10
    use_events: bool = True
    clock: Callable[[], float] = time.perf_counter
    progress: ProgressOptions | None = None
    history: Any = None
    _earlier: tuple[Any, ...] = field(default=(), init=False, repr=False)  # the history's runs, read per run

    def run(self, call: Callable[[], Any], phase_timer: Any = None) -> BenchResult:
        """Time ``call``: a cold call, the warm-up, then timed calls until the stop rule says stop.

        Args:
            call: zero-argument callable running one model call on inputs already on the device.
            phase_timer: object with ``reset()`` and ``result()`` (a :class:`PhaseTimer`) for per-phase
                timing; reset before every call, read after every timed one.

        Peak memory covers the timed calls only (reset right before them). The warm-up and the timed
        calls run under :func:`ascendbench.progress.quiet` (no progress hook inside a call); the loop
        reports its own progress between calls, at most every ``TICK_S`` seconds.
        """
        adapter, budget = self.adapter, self.budget
        self._earlier = tuple(self.history.earlier()) if self.history is not None else ()
        events = _event_pair(adapter, self.use_events)
        if phase_timer is not None:
            phase_timer.reset()
        with Progress("cold call", unit="", options=self.progress).ticking():
            first, cold_ms, cold_event_ms = _timed_call(call, adapter, self.clock, events, keep=True)
        cold_phases = phase_timer.result() if phase_timer is not None else None
        adaptive = f" (up to {budget.warmup_max} until calls stop getting faster)" if budget.adaptive_warmup else ""
        log.info("cold call: %.3f ms; warm-up %d call(s)%s, then %s", cold_ms, budget.warmup, adaptive,
                 f"{budget.min_iters}-{budget.max_iters} timed ({budget.min_time_s:.3g}-{budget.max_time_s:.3g} s, "
                 f"precision {budget.precision})")
        warmup = self._warmup(call, cold_ms, phase_timer)
        adapter.synchronize()
        adapter.reset_peak_memory()
        timed = self._timed(call, events, phase_timer)
        memory = adapter.peak_memory_mb()
        result = self._result(first, (cold_ms, cold_event_ms, cold_phases), warmup, timed, memory)
        if self.history is not None and len(timed.samples) >= MIN_CI_SAMPLES:
            own = PastRun(result.latency.median_ms, sampling_half_width(result.interval))
            self.history.add(own, len(timed.samples))
        return result

    def _warmup(self, call: Callable[[], Any], cold_ms: float, phase_timer: Any) -> WarmupRule:
        """Warm-up calls (host-timed, each synchronized) until the :class:`WarmupRule` says they plateaued."""
        rule = WarmupRule(self.budget, cold_ms)
        bar = Progress("warm-up", total=rule.cap or None, unit="calls", options=self.progress)
        with quiet_calls():
            while rule.reason() is None:
                if phase_timer is not None:
                    phase_timer.reset()
                _, ms, _ = _timed_call(call, self.adapter, self.clock, None)
                rule.add(ms)
                bar.update(1, last=f"{ms:.4g} ms")
        bar.close()
        log.info("warm-up: %d call(s), stopped by %s%s", len(rule.times_ms), rule.reason(),
                 f" (ms: {', '.join(f'{t:.4g}' for t in rule.times_ms)})" if rule.times_ms else "")
        return rule

    def _timed(self, call: Callable[[], Any], events: tuple[Any, Any] | None, phase_timer: Any) -> "_Timed":
        """The timed calls; progress is refreshed between calls, never inside the bracket."""
        adapter, clock, rule = self.adapter, self.clock, StopRule(self.budget, self._earlier)
        timed = _Timed(rule)
        bar = Progress("timing", unit="calls", budget_s=self.budget.max_time_s, options=self.progress)
        with quiet_calls():
            start = clock()
            next_tick = start + TICK_S
            while True:
                if phase_timer is not None:
                    phase_timer.reset()
                _, host_ms, event_ms = _timed_call(call, adapter, clock, events)
                timed.samples.append(host_ms)
                rule.add(host_ms)
                if event_ms is not None:
                    timed.event_samples.append(event_ms)
                if phase_timer is not None:
                    timed.phase_runs.append(phase_timer.result())
                now = clock()
                timed.reason = rule.reason(now - start)
                if timed.reason is not None:
                    break
                if rule.disturbed:  # the precision check ran: one untimed call brings the caches back
                    rule.disturbed = False
                    _timed_call(call, adapter, clock, None)
                    timed.rewarm += 1
                if now >= next_tick:
                    next_tick = now + TICK_S
                    bar.update(len(timed.samples) - bar.done, median=_median_text(rule))
            timed.seconds = clock() - start
        bar.close()
        log.info("timed %d call(s) in %.3g s, stopped by %s (median %s)", len(timed.samples), timed.seconds,
                 timed.reason, _median_text(rule))
        return timed

    def _result(self, first: Any, cold: tuple[float, float | None, Any], warmup: WarmupRule, timed: "_Timed",
                memory: dict[str, Any]) -> BenchResult:
        latency, interval = with_interval(timed.samples, self._earlier)
        noise = {**noise_verdict(latency, self.noise_threshold), **drift_verdict(interval), **runs_verdict(interval)}
        # spread within calls, between blocks, or between runs
        noise["noisy"] = bool(noise["noisy"] or noise["drifting"] or noise["runs_warning"])
        for warning in (noise["warning"], noise["drift_warning"], noise["runs_warning"]):
            if warning:
                log.warning(warning)
        events_used = timed.event_samples or None
        return BenchResult(
            cold_ms=cold[0], latency=latency, memory=memory, samples_ms=timed.samples, first_outputs=first,
            cold_event_ms=cold[1], interval=interval,
            event_latency=with_interval(timed.event_samples)[0] if events_used else None,
            event_samples_ms=events_used,
            event_timer=f"{self.adapter.name} events recorded around the call" if events_used else None,
            noise=noise,
            stop=timed.stop_section(self.budget),
            warmup=warmup_section(warmup),
            phases=summarize_phases(timed.phase_runs, latency.median_ms, cold[2]) if timed.phase_runs else None,
        )


@dataclass
class _Timed:
    """What the timed calls left: samples, per-call phases, why they stopped and how long they took."""

    rule: StopRule
    samples: list[float] = field(default_factory=list)
    event_samples: list[float] = field(default_factory=list)
    phase_runs: list[dict[str, list[float]]] = field(default_factory=list)
    reason: str | None = None
    seconds: float = 0.0
    rewarm: int = 0

    def stop_section(self, budget: BenchBudget) -> dict[str, Any]:
        """The record's ``bench.stop``: reason, count, seconds, achieved CI half-width, the budget."""
        chosen = self.rule.interval()
        achieved = None if chosen is None else float(chosen[1].rel_half_width)
        return {"reason": self.reason, "iters": len(self.samples), "timed_s": float(self.seconds),
                "untimed_after_checks": self.rewarm,
                "ci_rel_half_width": achieved, "ci_source": None if chosen is None else chosen[0],
                "precision_met": None if budget.precision is None or achieved is None
                else achieved <= budget.precision,
                **budget.to_dict()}


def with_interval(samples_ms: list[float], earlier: Sequence[PastRun] = ()) -> tuple[LatencyStats, dict[str, Any]]:
    """The latency statistics with the honest interval as their ``median_ci95_*``, and ``bench.interval``
    (with ``between_runs`` from the workload's earlier runs, ``earlier``, where there are enough)."""
    latency = LatencyStats.from_ms(samples_ms)
    section = interval_section(samples_ms, latency.median_ms)
    runs = runs_interval(earlier, latency.median_ms, sampling_half_width(section)) if section["used"] else None
    if runs is not None:
        section = interval_section(samples_ms, latency.median_ms, runs)
        section["between_runs"]["earlier_ms"] = [float(r.median_ms) for r in earlier]
        section["between_runs"]["earlier_rel_half_width"] = [float(r.own_rel_half_width) for r in earlier]
    used = section[section["used"]] if section["used"] else None
    if used is not None:
        latency = replace(latency, median_ci95_low_ms=used["low_ms"], median_ci95_high_ms=used["high_ms"])
    return latency, section


def warmup_section(rule: WarmupRule) -> dict[str, Any]:
    """The record's ``bench.warmup``: every warm-up call's time and why the warm-up ended."""
    b = rule.budget
    return {"calls": len(rule.times_ms), "calls_ms": list(rule.times_ms), "reason": rule.reason(),
            "min": b.warmup, "max": rule.cap, "tolerance": b.warmup_tolerance, "patience": b.warmup_patience}


def _median_text(rule: StopRule) -> str:
    """``31.2 ms +- 0.4 ms (95% CI)`` from the samples so far (the larger side of the CI)."""
    if not len(rule):
        return "n/a"
    median, achieved = rule.median(), rule.ci_rel_half_width()
    ci = f" +- {achieved * median:.4g} ms (95% CI)" if achieved is not None else " (CI from 6 calls)"
    return f"{median:.4g} ms{ci}"


def run_bench(call: Callable[[], Any], adapter: Any, budget: BenchBudget, noise_threshold: float = 0.10,
              use_events: bool = True, phase_timer: Any = None) -> BenchResult:
    """Time ``call`` on ``adapter``'s device with the host clock: ``BenchLoop(...).run(call, phase_timer)``.

    See :class:`BenchLoop` for the arguments (a test with a fake clock builds the loop itself).
    """
    return BenchLoop(adapter, budget, noise_threshold, use_events).run(call, phase_timer)
