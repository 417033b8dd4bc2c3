"""Where the time goes: a few extra calls under the profiler, after the timed loop, never inside it.

``profile.enabled=true`` runs ``profile.calls`` more calls of the task under ``torch.profiler`` (CPU
activity everywhere, CUDA activity on cuda), then records the top operators by self time on the device
(self CPU time on the CPU): name, input shapes, calls per task call, total and mean time, and their share
of the operators' total. The Chrome/Perfetto trace is written beside the record (``profile_trace.json``).
On npu, ``torch_npu.profiler`` writes its own files and the table is read from them
(:mod:`ascendbench.job.npu_profile`; the trace is its ``trace_view.json``).

Each profiled call is also timed on the host clock (with a synchronize). The record then says how much of
those very calls the operators explain (``ops_over_profiled_call``: the rest is Python between operators
and the profiler's own cost) and how the operators compare with the timed median (``ops_over_median``);
``profiled_over_median`` tells the two apart: far from 1, the host was busier (or the profiler costlier)
during the profiled calls than during the timed loop, and ``ops_over_median`` moves with it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ascendbench.job.npu_profile import npu_section, profile_npu

TRACE_NAME = "profile_trace.json"


@dataclass(frozen=True)
class ProfileSettings:
    """``profile.*``: how many calls to profile, how many operators to list, whether to write the trace."""

    calls: int = 3
    top: int = 15
    trace: bool = True


def _profiler(device_type: str) -> tuple[Any, list[Any], str]:
    """(profile context factory, activities, which time is 'device' time) for cpu and cuda."""
    from torch.profiler import ProfilerActivity, profile

    if device_type == "cuda":
        return profile, [ProfilerActivity.CPU, ProfilerActivity.CUDA], "device"
    return profile, [ProfilerActivity.CPU], "cpu"


def _self_us(event: Any, clock: str) -> float:
    """Self time of an averaged event in us; ``self_cuda_time_total`` on torch < 2.4 (no ``device`` name)."""
    if clock != "device":
        return float(event.self_cpu_time_total)
    value = getattr(event, "self_device_time_total", None)
    return float(value if value is not None else event.self_cuda_time_total)


def top_operators(averages: Any, clock: str, calls: int, top: int) -> tuple[list[dict[str, Any]], float]:
    """The ``top`` rows by self time and the total self time of one call (ms), from ``key_averages``."""
    rows = [e for e in averages if _self_us(e, clock) > 0]
    total_ms = sum(_self_us(e, clock) for e in rows) / 1000.0 / calls
    rows.sort(key=lambda e: _self_us(e, clock), reverse=True)
    table = []
    for event in rows[:top]:
        per_call_ms = _self_us(event, clock) / 1000.0 / calls
        table.append({"name": event.key, "input_shapes": [list(s) for s in (event.input_shapes or [])][:4],
                      "calls": event.count / calls, "total_ms": per_call_ms,
                      "mean_ms": _self_us(event, clock) / 1000.0 / max(1, event.count),
                      "share": per_call_ms / total_ms if total_ms else None})
    return table, total_ms


@dataclass
class ProfileRun:
    """One profiling run: the call, its device, the settings, where the trace goes, the measured median."""

    call: Callable[[], Any]
    adapter: Any
    settings: ProfileSettings
    out_dir: Path
    median_ms: float | None = None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _timed_calls(run: ProfileRun, calls: int) -> list[float]:
    """``calls`` calls of the task, each timed on the host clock between two synchronizes (ms)."""
    wall_ms = []
    for _ in range(calls):
        run.adapter.synchronize()
        start = time.perf_counter()
        run.call()
        run.adapter.synchronize()
        wall_ms.append((time.perf_counter() - start) * 1000.0)
    return wall_ms


def profile_calls(run: ProfileRun) -> dict[str, Any]:
    """Profile ``settings.calls`` calls; the record's ``profile`` section (table, totals, trace path)."""
    calls = max(1, int(run.settings.calls))
    if run.adapter.name == "npu":
        wall_ms, run_dir = profile_npu(run.out_dir, lambda: _timed_calls(run, calls))
        found, total_ms = npu_section(run_dir, Path(run.out_dir), calls, run.settings.top)
        return {"calls": calls, "clock": "device", **found, **_totals(run, wall_ms, total_ms)}
    factory, activities, clock = _profiler(run.adapter.name)
    with factory(activities=activities, record_shapes=True) as prof:
        wall_ms = _timed_calls(run, calls)
    table, total_ms = top_operators(prof.key_averages(group_by_input_shape=True), clock, calls, run.settings.top)
    section: dict[str, Any] = {"calls": calls, "clock": clock, "top": table, **_totals(run, wall_ms, total_ms)}
    if run.settings.trace:
        path = Path(run.out_dir) / TRACE_NAME
        prof.export_chrome_trace(str(path))
        section["trace"] = TRACE_NAME
    return section


def _totals(run: ProfileRun, wall_ms: list[float], total_ms: float) -> dict[str, Any]:
    """The operators' total against the profiled calls and the timed median."""
    profiled_ms = statistics.fmean(wall_ms)  # a mean, as the operators' total is
    return {
        "ops_total_ms_per_call": total_ms,
        "measured_median_ms": run.median_ms, "ops_over_median": _ratio(total_ms, run.median_ms),
        "profiled_call_ms": profiled_ms, "ops_over_profiled_call": _ratio(total_ms, profiled_ms),
        "profiled_over_median": _ratio(profiled_ms, run.median_ms),
    }
