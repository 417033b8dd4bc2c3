"""The device run's measurement in one place: the bench loop, FLOPs and MFU, per-phase timing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.flops import DEFAULT_HEAVY_OPS, count_flops, flops_section
from ascendbench.bench.loop import BenchLoop, BenchResult
from ascendbench.bench.peak import peak_tflops
from ascendbench.bench.phases import PhaseTimer

log = logging.getLogger(__name__)

# bench.enabled=false: one cold call plus one timed call (the outputs come from the cold one).
SINGLE_CALL = BenchBudget(warmup=0, min_iters=1, max_iters=1, min_time_s=0.0)


def attach_phase_timer(task: Any, module: Any, adapter: Any) -> PhaseTimer | None:
    """A :class:`PhaseTimer` on device events, if ``task.attach_phase_timer`` takes it."""
    timer = PhaseTimer.for_adapter(adapter)
    return timer if task.attach_phase_timer(module, timer) else None


@dataclass(frozen=True)
class Workload:
    """One timed call: dtype (peak table), items per call and unit, phase timer, run history."""

    dtype: str
    items_per_call: int = 1
    unit: str = "items"
    phase_timer: Any = None
    history: Any = None


def measure(call: Callable[[], Any], adapter: Any, bench_cfg: Mapping[str, Any],
            workload: Workload) -> tuple[BenchResult, dict[str, Any]]:
    """Time ``call`` (inputs already on the device), count its FLOPs: (result, ``bench``)."""
    enabled = bool(bench_cfg.get("enabled", True))
    budget = BenchBudget.from_config(bench_cfg) if enabled else SINGLE_CALL
    timer = workload.phase_timer if enabled and bench_cfg.get("phases", True) else None
    loop = BenchLoop(adapter, budget, float(bench_cfg.get("noise_threshold", 0.10)),
                     use_events=bool(bench_cfg.get("events", True)),
                     history=workload.history if enabled else None)
    try:
        result = loop.run(call, timer)
    finally:  # the task's modules unwrapped: the FLOP count and the later stages call them plain
        if workload.phase_timer is not None:
            workload.phase_timer.remove_hooks()
    section = result.to_dict(workload.items_per_call, workload.unit)
    section["flops"] = _flops(call, adapter, bench_cfg, result.latency.median_ms,
                              dtype=workload.dtype, enabled=enabled)
    return result, section


def _flops(call: Callable[[], Any], adapter: Any, bench_cfg: Mapping[str, Any], median_ms: float,
           dtype: str, enabled: bool) -> dict[str, Any]:
    peak = peak_tflops(getattr(adapter, "peak", None), adapter.device_name(), dtype,
                       reduced_fp32=bool(getattr(adapter, "allow_hf32", False)),
                       chip=getattr(adapter, "chip_options", None))
    flops_cfg = bench_cfg.get("flops") or {}
    if not enabled or not flops_cfg.get("enabled", True):
        why = "bench.enabled=false" if not enabled else "bench.flops.enabled=false"
        return flops_section(None, median_ms, peak, dtype, error=why)
    try:
        count = count_flops(call, flops_cfg.get("heavy_ops") or DEFAULT_HEAVY_OPS)
    except Exception as exc:  # an exotic op's formula must not fail a finished measurement
        log.warning("FLOP counting failed (%s: %s); the record says so and carries no MFU",
                    type(exc).__name__, exc)
        log.debug("FLOP counting traceback", exc_info=True)
        error = f"FlopCounterMode failed: {type(exc).__name__}: {str(exc)[:200]}"
        return flops_section(None, median_ms, peak, dtype, error=error)
    adapter.synchronize()
    return flops_section(count, median_ms, peak, dtype)
