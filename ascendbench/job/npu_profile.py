"""The profiler view on an Ascend NPU: torch_npu's own output files, read back into the record.

``torch_npu.profiler.profile`` has no ``key_averages`` (its methods: start, stop, step, export_chrome_trace,
export_stacks, export_memory_timeline). With ``on_trace_ready=tensorboard_trace_handler(dir)`` it writes
``dir/<host>_<pid>_<time>_ascend_pt/ASCEND_PROFILER_OUTPUT/`` when it stops: ``operator_details.csv`` (one row
per PyTorch operator call: Name, Input Shapes, Device Self Duration(us), ...), ``kernel_details.csv`` (one row
per device kernel), ``op_statistic.csv`` (per kernel type) and ``trace_view.json``. The top-operator table
is built from ``operator_details.csv`` by device self time, grouped by name and input shapes as
``key_averages(group_by_input_shape=True)`` groups them; the kernel types come from ``op_statistic.csv``.
The whole ``*_ascend_pt`` directory stays in the job dir for MindStudio Insight.
"""

from __future__ import annotations

import csv
import importlib
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

PROFILE_DIR = "profile_npu"  # inside the job dir: the *_ascend_pt run directories
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
# Columns read (torch_npu/profiler/analysis/prof_view/_operator_view_parser.py, prof_bean/_op_statistic_bean.py).
NAME, SHAPES, DEVICE_SELF = "Name", "Input Shapes", "Device Self Duration(us)"
OP_TYPE, COUNT, TOTAL_US = "OP Type", "Count", "Total Time(us)"


def profile_npu(out_dir: Path, timed_calls: Callable[[], list[float]]) -> tuple[list[float], Path | None]:
    """Run ``timed_calls`` under ``torch_npu.profiler.profile``; (its wall times, the ``*_ascend_pt`` dir)."""
    npu_profiler = importlib.import_module("torch_npu.profiler")
    root = Path(out_dir) / PROFILE_DIR
    root.mkdir(parents=True, exist_ok=True)
    before = set(root.glob("*_ascend_pt"))
    activities = [npu_profiler.ProfilerActivity.CPU, npu_profiler.ProfilerActivity.NPU]
    handler = npu_profiler.tensorboard_trace_handler(str(root))
    with npu_profiler.profile(activities=activities, record_shapes=True, on_trace_ready=handler):
        wall_ms = timed_calls()
    made = sorted(set(root.glob("*_ascend_pt")) - before)
    return wall_ms, (made[-1] if made else None)


def _rows(path: Path) -> list[dict[str, str]]:
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
    """``[1, 16, 8, 8];\r\n[16];\r\n[]`` (torch_npu joins the inputs with ``;`` and a line break,
    prof_bean/_torch_op_bean.py) -> ``[[1, 16, 8, 8], [16], []]``, the first four inputs as the CPU table has."""
    parts = [part.strip() for part in (text or "").split(";") if part.strip()]
    return [[int(d) for d in re.findall(r"-?\d+", part)] for part in parts][:4]


def operator_table(run_dir: Path, calls: int, top: int) -> tuple[list[dict[str, Any]], float]:
    """The ``top`` operators by device self time and the operators' device total of one call (ms)."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in _rows(run_dir / OUTPUT_DIR / "operator_details.csv"):
        groups[(row.get(NAME, ""), row.get(SHAPES, ""))].append(_number(row.get(DEVICE_SELF)))
    totals = {key: sum(values) for key, values in groups.items() if sum(values) > 0}
    total_ms = sum(totals.values()) / 1000.0 / calls
    table = []
    for (name, text), self_us in sorted(totals.items(), key=lambda item: item[1], reverse=True)[:top]:
        per_call_ms = self_us / 1000.0 / calls
        table.append({"name": name, "input_shapes": shapes(text), "calls": len(groups[(name, text)]) / calls,
                      "total_ms": per_call_ms, "mean_ms": self_us / 1000.0 / len(groups[(name, text)]),
                      "share": per_call_ms / total_ms if total_ms else None})
    return table, total_ms


def kernel_types(run_dir: Path, calls: int, top: int) -> list[dict[str, Any]]:
    """The ``top`` kernel types of ``op_statistic.csv`` by total time: calls and ms per task call."""
    rows = [{"type": r.get(OP_TYPE, ""), "calls": _number(r.get(COUNT)) / calls,
             "total_ms": _number(r.get(TOTAL_US)) / 1000.0 / calls}
            for r in _rows(run_dir / OUTPUT_DIR / "op_statistic.csv")]
    return sorted(rows, key=lambda r: r["total_ms"], reverse=True)[:top]


def npu_section(run_dir: Path | None, job_dir: Path, calls: int, top: int) -> tuple[dict[str, Any], float]:
    """The NPU part of the record's ``profile`` section and the operators' total per call (ms)."""
    if run_dir is None or not (run_dir / OUTPUT_DIR / "operator_details.csv").is_file():
        where = run_dir or Path(job_dir) / PROFILE_DIR
        return {"top": [], "missing": f"torch_npu's profiler wrote no {OUTPUT_DIR}/operator_details.csv under "
                f"{where} (its analysis failed: see the plog and the job log)"}, 0.0
    table, total_ms = operator_table(run_dir, calls, top)
    output = run_dir / OUTPUT_DIR
    section = {"top": table, "kernel_types": kernel_types(run_dir, calls, top),
               "ascend_pt": str(run_dir.relative_to(job_dir)),
               "csv": {name: str((output / name).relative_to(job_dir))
                       for name in ("operator_details.csv", "kernel_details.csv", "op_statistic.csv")
                       if (output / name).is_file()}}
    if (output / "trace_view.json").is_file():
        section["trace"] = str((output / "trace_view.json").relative_to(job_dir))
    return section, total_ms
