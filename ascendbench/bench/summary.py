"""The performance lines of the end-of-job summary, built only from the record's ``bench``."""

from __future__ import annotations

import math
from typing import Any, Mapping

from ascendbench.digits import figure
from ascendbench.metrics.verdict import as_number


def stop_text(reason: Any, achieved: Any = None, target: Any = None) -> str:
    """Why the timed loop stopped and how precise its median is.
    >>> stop_text("max_time_s", 0.034, 0.01)
    'max_time_s, CI +-3.4% (target 1%)'"""
    if reason is None or (isinstance(reason, float) and math.isnan(reason)):
        return "n/a"
    achieved, target = as_number(achieved), as_number(target)
    text = str(reason) + (f", CI +-{achieved:.1%}" if achieved is not None else "")
    return text + (f" (target {target * 100:.3g}%)" if target is not None else "")


def stop_cell(row: Mapping[str, Any]) -> str:
    """:func:`stop_text` of a flat record row (``bench.stop.*`` of the sweep summary / report)."""
    return stop_text(row.get("bench.stop.reason"), row.get("bench.stop.ci_rel_half_width"),
                     row.get("bench.stop.precision"))


def warmup_line(bench: Mapping[str, Any]) -> str | None:
    """Every warm-up call's time and why the warm-up ended (``None`` without warm-up calls)."""
    warmup = bench.get("warmup") or {}
    times = warmup.get("calls_ms") or []
    if not times:
        return None
    shown = ", ".join(figure(t) for t in times[:12]) + (" ..." if len(times) > 12 else "")
    return f"warm-up   {len(times)} call(s), {warmup.get('reason')}: {shown} ms"


def interval_text(bench: Mapping[str, Any]) -> str:
    """Where the interval's error came from: ``, from 8 blocks`` or ``, with 9 earlier runs (...)``.
    >>> interval_text({"interval": {"used": "runs", "own_rel_half_width": 0.004,
    ...                              "runs": {"earlier_ms": [1.0] * 9}}})
    ", with 9 earlier runs (this run's calls +-0.4%)"
    """
    interval = bench.get("interval") or {}
    if interval.get("used") == "runs":
        earlier = len((interval.get("runs") or {}).get("earlier_ms") or [])
        own = interval["own_rel_half_width"]
        return f", with {earlier} earlier runs (this run's calls +-{own:.1%})"
    calls = (interval.get("blocks") or {}).get("calls")
    return f", from {len(calls)} blocks" if calls else ""


def latency_line(bench: Mapping[str, Any]) -> str:
    """Median with its 95% CI, tail, spread, cold call, count and why the loop stopped."""
    lat, stop = bench["latency"], bench.get("stop") or {}
    ci = p99 = spread = ""
    if lat.get("median_ci95_low_ms") is not None:
        low, high = figure(lat["median_ci95_low_ms"]), figure(lat["median_ci95_high_ms"])
        ci = f" [95% CI {low}-{high}{interval_text(bench)}]"
    if "p99_ms" in lat:
        p99 = f"  p99 {figure(lat['p99_ms'])}"
    if lat.get("iqr_ms") is not None:
        spread = f"  IQR {figure(lat['iqr_ms'])} ms ({lat['iqr_over_median']:.1%})"
    why = stop_text(stop.get("reason"), stop.get("ci_rel_half_width"), stop.get("precision"))
    timed = f"{lat['count']} timed" + (f", stop: {why}" if stop.get("reason") else "")
    cold = figure(bench["cold_ms"])
    return (f"latency   median {figure(lat['median_ms'])} ms{ci}  p90 "
            f"{figure(lat['p90_ms'])}{p99} ms{spread}  cold {cold} ms  ({timed})")


def compute_line(bench: Mapping[str, Any]) -> str:
    """Throughput, device-event median, FLOPs per call, TFLOP/s and MFU (or why it is missing)."""
    thr = bench["throughput"]
    parts = [f"throughput {figure(thr['value'])} {thr['unit']}"]
    events = bench.get("event_latency")
    if events:
        parts.append(f"events median {figure(events['median_ms'])} ms")
    flops = bench.get("flops") or {}
    if flops.get("per_call") is not None:
        gflop, tflops = figure(flops["per_call"] / 1e9), figure(flops["achieved_tflops"])
        parts.append(f"{gflop} GFLOP/call  {tflops} TFLOP/s")
        bound = "" if flops.get("complete", True) else ">= "
        missing = flops.get("peak_missing") or "no peak TFLOP/s for this device/dtype"
        if flops.get("mfu") is not None:
            parts.append(f"MFU {bound}{flops['mfu']:.1%} of {figure(flops['peak_tflops'])} "
                         f"({flops.get('peak_entry')})")
        else:
            parts.append(f"MFU n/a ({missing})")
        if flops.get("uncounted_ops"):
            parts.append("not counted: " + ", ".join(sorted(flops["uncounted_ops"])))
    elif flops.get("skipped"):
        parts.append(f"FLOPs skipped ({flops['skipped']})")
    return "compute   " + "  ".join(parts)


def memory_line(bench: Mapping[str, Any]) -> str:
    """Peak device and host memory with the scope they were measured in."""
    memory = bench["memory"]
    mem = {k: v for k, v in memory.items() if k.endswith("_mb")}
    if str(memory.get("scope", "")).startswith("cpu"):  # the device figures repeat the host's RSS
        mem = {"peak_rss_mb": memory.get("peak_rss_mb")}
    figures = "  ".join(f"{k} {figure(v)}" for k, v in mem.items())
    return f"memory    {figures}  ({memory.get('scope')})"


def phases_line(bench: Mapping[str, Any]) -> str | None:
    """Per-phase medians (per call) when the task reported phases."""
    phases = bench.get("phases")
    if not phases:
        return None
    parts = []
    for name, entry in phases.items():
        count = entry["per_call"]
        each = f" ({figure(count)} x {figure(entry['median_ms'])} ms)" if count > 1 else ""
        share = f" {entry['share']:.0%}" if entry.get("share") is not None else ""
        parts.append(f"{name} {figure(entry['total_median_ms'])} ms{share}{each}")
    return "phases    " + "  ".join(parts)


def bench_lines(bench: Mapping[str, Any]) -> list[str]:
    """All performance lines of the summary, with the noise warning last."""
    lines = [latency_line(bench), compute_line(bench)]
    lines += [memory_line(bench)] if bench.get("memory") else []
    lines += [line for line in (warmup_line(bench), phases_line(bench)) if line]
    noise = bench.get("noise") or {}
    if noise.get("noisy"):
        lines += [f"warning   {noise[k]}" for k in ("warning", "runs_warning") if noise.get(k)]
    return lines
