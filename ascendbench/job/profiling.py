"""Where the time goes: ``profile.calls`` more calls under the profiler after the timed loop."""

from __future__ import annotations

import csv
import importlib
import multiprocessing
import os
import re
import shutil
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from torch.profiler import ProfilerActivity, profile

from ascendbench.errors import ConfigError
from ascendbench.graph import first_call

TRACE_NAME = "profile_trace.json"
PROFILE_DIR = "profile_npu"  # inside the job dir: the *_ascend_pt run directories
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
# torch_npu's columns (profiler/analysis/prof_view/_operator_view_parser.py, _op_statistic_bean.py)
NAME, SHAPES, DEVICE_SELF = "Name", "Input Shapes", "Device Self Duration(us)"
OP_TYPE, COUNT, TOTAL_US = "OP Type", "Count", "Total Time(us)"
NPU_FILES = ("operator_details.csv", "kernel_details.csv", "op_statistic.csv")
# The paths torch_npu's profiler takes (torch_npu/utils/_path_manager.py _input_path_common_check;
# 2.1.0.post17..2.9.0 raise on others, 2.14.0 warns): no "=" or "," of a sweep job's directory.
ACCEPTED_PATH = re.compile(r"(\.|/|_|-|\s|[~0-9a-zA-Z]|[\u4e00-\u9fa5])+")


def _self_us(event: Any, clock: str) -> float:
    """Self time of an averaged event in us (``self_cuda_time_total`` on torch < 2.4)."""
    if clock != "device":
        return float(event.self_cpu_time_total)
    value = getattr(event, "self_device_time_total", None)
    return float(value if value is not None else event.self_cuda_time_total)


def _row(name: str, shapes: list[list[int]], counts: tuple[float, int], calls: int,
         total_ms: float) -> dict[str, Any]:
    self_us, count = counts
    per_call_ms = self_us / 1000.0 / calls
    return {"name": name, "input_shapes": shapes, "calls": count / calls, "total_ms": per_call_ms,
            "mean_ms": self_us / 1000.0 / max(1, count),
            "share": per_call_ms / total_ms if total_ms else None}


def top_operators(averages: Any, clock: str, calls: int,
                  top: int) -> tuple[list[dict[str, Any]], float]:
    """The ``top`` rows by self time and the self time of one call (ms), from ``key_averages``."""
    rows = sorted((e for e in averages if _self_us(e, clock) > 0),
                  key=lambda e: -_self_us(e, clock))
    total_ms = sum(_self_us(e, clock) for e in rows) / 1000.0 / calls
    return [_row(e.key, [list(s) for s in (e.input_shapes or [])][:4],
                 (_self_us(e, clock), e.count), calls, total_ms) for e in rows[:top]], total_ms


def _csv_rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _number(value: str | None) -> float:
    try:
        return float(value or 0.0)
    except ValueError:
        return 0.0


def shapes(text: str) -> list[list[int]]:
    """``[1, 16, 8, 8];\\r\\n[16]`` -> ``[[1, 16, 8, 8], [16]]``, the first four inputs."""
    parts = [part.strip() for part in (text or "").split(";") if part.strip()]
    return [[int(d) for d in re.findall(r"-?\d+", part)] for part in parts][:4]


def npu_section(run_dir: Path | None, job_dir: Path, calls: int,
                top: int) -> tuple[dict[str, Any], float]:
    """The NPU part of the ``profile`` section and the operators' total per call (ms)."""
    output = run_dir / OUTPUT_DIR if run_dir is not None else None
    if output is None or not (output / "operator_details.csv").is_file():
        where = run_dir or Path(job_dir) / PROFILE_DIR
        return {"top": [], "missing": f"torch_npu's profiler wrote no {OUTPUT_DIR}/operator_"
                f"details.csv under {where} (its analysis failed: see the plog and the job "
                "log)"}, 0.0
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in _csv_rows(output / "operator_details.csv"):
        groups[(row.get(NAME, ""), row.get(SHAPES, ""))].append(_number(row.get(DEVICE_SELF)))
    totals = {key: sum(values) for key, values in groups.items() if sum(values) > 0}
    total_ms = sum(totals.values()) / 1000.0 / calls
    ranked = sorted(totals.items(), key=lambda item: item[1], reverse=True)[:top]
    table = [_row(name, shapes(text), (self_us, len(groups[(name, text)])), calls, total_ms)
             for (name, text), self_us in ranked]
    kernels = sorted(({"type": r.get(OP_TYPE, ""), "calls": _number(r.get(COUNT)) / calls,
                       "total_ms": _number(r.get(TOTAL_US)) / 1000.0 / calls}
                      for r in _csv_rows(output / "op_statistic.csv")),
                     key=lambda r: r["total_ms"], reverse=True)[:top]
    section = {"top": table, "kernel_types": kernels,
               "ascend_pt": str(run_dir.relative_to(job_dir)),
               "csv": {name: str((output / name).relative_to(job_dir)) for name in NPU_FILES
                       if (output / name).is_file()}}
    if (output / "trace_view.json").is_file():
        section["trace"] = str((output / "trace_view.json").relative_to(job_dir))
    return section, total_ms


def _profile_npu(out_dir: Path, call: Callable[[], Any], adapter: Any,
                 calls: int) -> tuple[list[float], Path | None]:
    """``calls`` calls under torch_npu's profiler: (wall times, the ``profile_npu`` run dir)."""
    npu_profiler = importlib.import_module("torch_npu.profiler")  # only on an NPU host
    if multiprocessing.current_process().daemon:
        raise ConfigError("torch_npu's profiler cannot analyse its data in a daemon process: use "
                          "a launcher whose workers are not daemons, or profile.enabled=false.")
    root = Path(out_dir) / PROFILE_DIR
    root.mkdir(parents=True, exist_ok=True)
    where = root if ACCEPTED_PATH.fullmatch(os.path.realpath(root)) else Path(
        tempfile.mkdtemp(prefix="ascendbench_profile_"))
    if not ACCEPTED_PATH.fullmatch(os.path.realpath(where)):
        raise ConfigError(f"torch_npu's profiler takes only paths of letters, digits, spaces and "
                          f". / _ - ~; neither {root} nor {where} is one: set TMPDIR to one.")
    before, method = set(where.glob("*_ascend_pt")), multiprocessing.get_start_method(True)
    activities = [npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU]
    try:
        handler = npu_profiler.tensorboard_trace_handler(str(where))
        with npu_profiler.profile(activities=activities, record_shapes=True,
                                  on_trace_ready=handler):
            wall_ms = [first_call(call, adapter) for _ in range(calls)]
    finally:
        multiprocessing.set_start_method(method, force=True)  # its analysis sets "fork"
        made = [shutil.move(run, root / run.name) if where != root else run
                for run in sorted(set(where.glob("*_ascend_pt")) - before)]
        if where != root:
            shutil.rmtree(where, ignore_errors=True)
    return wall_ms, (Path(made[-1]) if made else None)


def profile_calls(call: Callable[[], Any], adapter: Any, settings: Any, out_dir: Path,
                  median_ms: float | None = None) -> dict[str, Any]:
    """Profile ``settings.calls`` calls; the record's ``profile`` section, against ``median_ms``."""
    calls, top = max(1, int(settings.calls)), int(settings.top)
    if adapter.name == "npu":
        wall_ms, run_dir = _profile_npu(out_dir, call, adapter, calls)
        found, total_ms = npu_section(run_dir, Path(out_dir), calls, top)
        section = {"calls": calls, "clock": "device", **found}
    else:
        clock = "device" if adapter.name == "cuda" else "cpu"
        activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if clock == "device" else [])]
        with profile(activities=activities, record_shapes=True) as prof:
            wall_ms = [first_call(call, adapter) for _ in range(calls)]
        averages = prof.key_averages(group_by_input_shape=True)
        table, total_ms = top_operators(averages, clock, calls, top)
        section = {"calls": calls, "clock": clock, "top": table}
        if settings.trace:
            prof.export_chrome_trace(str(Path(out_dir) / TRACE_NAME))
            section["trace"] = TRACE_NAME
    profiled_ms = statistics.fmean(wall_ms)  # a mean, as the operators' total is
    section.update(ops_total_ms_per_call=total_ms, measured_median_ms=median_ms,
                   ops_over_median=_ratio(total_ms, median_ms), profiled_call_ms=profiled_ms,
                   ops_over_profiled_call=_ratio(total_ms, profiled_ms),
                   profiled_over_median=_ratio(profiled_ms, median_ms))
    return section


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None
