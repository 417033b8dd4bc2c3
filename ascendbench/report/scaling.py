"""Multi-card scaling (one workload on 1, 2, ... ranks) and graph-mode compile cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ascendbench.report import fmt
from ascendbench.report.fmt import MISSING, Row, Rows, get, group, num, record_link, table, text
from ascendbench.report.performance import latest
from ascendbench.report.plots import pyplot, safe_name, save_png
from ascendbench.report.tables import verdict_cell
from ascendbench.report.variants import workload, workload_title


def world_size(row: Row) -> int:
    """The job's ranks (1 without a ``distributed`` section: a one-card job)."""
    value = get(row, "distributed.world_size")
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 1


def rank_peaks(row: Row) -> list[float]:
    """Per-rank peak allocated MiB, or the job's one peak."""
    peaks = [float(v) for k, v in sorted(row.items()) if isinstance(v, (int, float))
             and str(k).startswith("distributed.peak_allocated_mb_by_rank.")]
    single = get(row, "bench.memory.peak_allocated_mb")
    return peaks or ([float(single)] if isinstance(single, (int, float)) else [])


def mode(row: Row) -> str:
    """The job's parallel mode (``none`` for a one-card job)."""
    return str(get(row, "distributed.mode") or "none")


def _workloads(rows: Rows, keep: Callable[[list[Row]], bool]) -> list[list[Row]]:
    return [members for members in group(rows, workload).values() if keep(members)]


def _scaling(rows: Rows) -> list[list[tuple[int, Row]]]:
    found = []
    for members in _workloads(rows, lambda members: len({world_size(r) for r in members}) > 1):
        by_world = group(members, lambda r: (world_size(r), mode(r)))
        found.append([(n, latest(by_world[n, m])) for n, m in sorted(by_world)])
    return found


def scaling_section(rows: Rows, base_dir: Path) -> str:
    """One table per workload measured on several world sizes, or why there is none."""
    workloads = _scaling(rows)
    if not workloads:
        return ("No scaling: no workload was run on more than one world size. Run it on one card "
                "and on several, e.g. `-m device.world_size=1,2` with `device.parallel=cfg` for "
                "the 2-rank job.")
    headers = ["world size", "mode", "backend", "median ms", "speed-up over 1 rank",
               "peak MB, largest rank", "peak MB, smallest rank", "verdict", "record"]
    parts = []
    for by_world in workloads:
        one = fmt.latency(by_world[0][1]) if by_world[0][0] == 1 else None
        body = []
        for n, row in by_world:
            mine, peaks = fmt.latency(row), rank_peaks(row)
            body.append([str(n), mode(row), text(get(row, "distributed.backend") or "none"),
                         num(mine), num(one / mine) + "x" if one and mine else MISSING,
                         num(max(peaks)) if peaks else MISSING,
                         num(min(peaks)) if peaks else MISSING,
                         verdict_cell(row), record_link(row, base_dir)])
        parts.append(f"### {workload_title(by_world[0][1])}\n\n" + table(headers, body))
    return "\n\n".join(parts) + (
        "\n\n- median ms: barrier-synchronized across ranks (each call from a common start to the "
        "slowest rank's end).\n- peak MB: per rank, the device allocator's peak (the host "
        "process's peak RSS on the CPU).")


def scaling_plots(rows: Rows, out_dir: Path) -> list[Path]:
    """One PNG per scaling workload: median latency and per-rank peak memory against world size."""
    paths = []
    for index, by_world in enumerate(_scaling(rows)):
        figure, (left, right) = pyplot().subplots(1, 2, figsize=(9, 3.5))
        sizes = sorted({n for n, _ in by_world})
        one = [(n, r) for n, r in by_world if n == 1]
        for name in sorted({mode(r) for _, r in by_world if world_size(r) > 1}):  # a line per mode
            line = one + [(n, r) for n, r in by_world if n > 1 and mode(r) == name]
            xs = [n for n, _ in line]
            left.plot(xs, [fmt.latency(r) or float("nan") for _, r in line], marker="o", label=name)
            right.plot(xs, [max(rank_peaks(r) or [float("nan")]) for _, r in line], marker="o",
                       label=f"{name}, largest rank")
        left.set(xlabel="world size (ranks)", ylabel="median latency (ms)", xticks=sizes)
        right.set(xlabel="world size (ranks)", ylabel="peak memory per rank (MB)", xticks=sizes)
        left.legend(fontsize=8)
        right.legend(fontsize=8)
        model = get(by_world[0][1], "job.model")
        figure.suptitle(f"scaling: {model} on {get(by_world[0][1], 'job.device')}", fontsize=10)
        paths.append(save_png(figure, Path(out_dir) / f"scaling_{safe_name(model)}_{index}.png"))
    return paths


def _graph_row(row: Row, base_dir: Path) -> list[Any]:
    keys = ("variant", "backend", "targets", "compile_ms", "first_call_ms")
    compiled = [text(get(row, f"bench.compile.{k}")) for k in keys]
    eager = ["none (eager)", "-", "-", "-", "-"]
    return [*(compiled if get(row, "bench.compile.variant") else eager),
            num(get(row, "bench.cold_ms")), num(fmt.latency(row)), verdict_cell(row),
            record_link(row, base_dir)]


def graph_section(rows: Rows, base_dir: Path) -> str:
    """The graph-mode jobs beside their workload's eager job: compile cost and latency."""
    workloads = _workloads(rows, lambda members: any(get(r, "bench.compile.variant")
                                                     for r in members))
    if not workloads:
        return ("No graph-mode job: no record has device.compile set. Compare one with eager, e.g. "
                "`-m device.compile=none,inductor`.")
    headers = ["device.compile", "backend", "compiled", "compile ms", "first call ms", "cold ms",
               "median ms", "verdict", "record"]
    parts = [f"### {workload_title(members[0])}\n\n"
             + table(headers, [_graph_row(r, base_dir) for r in members]) for members in workloads]
    return "\n\n".join(parts) + (
        "\n\n- compile ms: the first call under torch.compile (where compilation happens, before "
        "the cold call) less the median call.")
