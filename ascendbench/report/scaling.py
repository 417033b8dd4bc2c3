"""Multi-card scaling and graph-mode compile cost, from the records' ``distributed`` and ``bench.compile``.

* **Scaling**: for one workload (model, device type, dtype, sizes, seed, weights, inputs, machine) the jobs
  run on 1, 2, ... ranks (``device.world_size``, any ``device.parallel`` mode), one row each: the synchronized
  median latency, the speed-up over the 1-rank job, the largest and smallest per-rank peak memory; and a PNG
  plot of latency and per-rank peak memory against the world size. A job without a ``distributed`` section
  ran on one card.
* **Graph mode**: every job with ``device.compile`` set, beside the eager job of its workload: compile time (the
  first call less the median), first call, cold call and median.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import MISSING, get, num, table, text
from ascendbench.report.performance import latest, median_ms
from ascendbench.report.plots import _pyplot, safe_name
from ascendbench.report.tables import record_link, verdict_cell
from ascendbench.report.variants import workload, workload_title


def world_size(row: Mapping[str, Any]) -> int:
    """The job's ranks (1 when the record has no ``distributed`` section: a one-card job)."""
    value = get(row, "distributed.world_size")
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 1


def rank_peaks(row: Mapping[str, Any]) -> list[float]:
    """Per-rank peak allocated MiB (``distributed.peak_allocated_mb_by_rank.<r>``), or the job's one peak."""
    peaks = [float(v) for k, v in sorted(row.items()) if str(k).startswith("distributed.peak_allocated_mb_by_rank.")
             and isinstance(v, (int, float))]
    single = get(row, "bench.memory.peak_allocated_mb")
    return peaks or ([float(single)] if isinstance(single, (int, float)) else [])


def _groups(rows: Sequence[Mapping[str, Any]], key: Any) -> dict[tuple, list[Mapping[str, Any]]]:
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(workload(row), []).append(row)
    return {k: v for k, v in groups.items() if key(v)}


def mode(row: Mapping[str, Any]) -> str:
    """The job's parallel mode (``none`` for a one-card job)."""
    return str(get(row, "distributed.mode") or "none")


def _by_world(members: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The latest job of each (world size, mode), fewest ranks first."""
    keys = sorted({(world_size(r), mode(r)) for r in members})
    return [(n, latest([r for r in members if (world_size(r), mode(r)) == (n, m)])) for n, m in keys]


def scaling_section(rows: Sequence[Mapping[str, Any]], base_dir: Path, heading: str = "###") -> str:
    """One table per workload measured on several world sizes, or why there is none."""
    groups = _groups(rows, lambda members: len({world_size(r) for r in members}) > 1)
    if not groups:
        return ("No scaling: no workload was run on more than one world size. Run it on one card and on several, "
                "e.g. `-m device.world_size=1,2` with `device.parallel=cfg` for the 2-rank job.")
    parts = []
    for members in groups.values():
        by_world = _by_world(members)
        one = median_ms(by_world[0][1]) if by_world[0][0] == 1 else None
        body = []
        for n, row in by_world:
            mine, peaks = median_ms(row), rank_peaks(row)
            speedup = num(one / mine) + "x" if one and mine else MISSING
            body.append([str(n), mode(row), text(get(row, "distributed.backend") or "none"),
                         num(mine), speedup, num(max(peaks)) if peaks else MISSING,
                         num(min(peaks)) if peaks else MISSING, verdict_cell(row), record_link(row, base_dir)])
        headers = ["world size", "mode", "backend", "median ms", "speed-up over 1 rank", "peak MB, largest rank",
                   "peak MB, smallest rank", "verdict", "record"]
        parts.append(f"{heading} {workload_title(by_world[0][1])}\n\n" + table(headers, body))
    notes = ["median ms: barrier-synchronized across ranks (each call from a common start to the slowest rank's end).",
             "peak MB: per rank, the device allocator's peak (the host process's peak RSS on the CPU)."]
    return "\n\n".join(parts) + "\n\n" + "\n".join(f"- {n}" for n in notes)


def scaling_plots(rows: Sequence[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per scaling workload: median latency and per-rank peak memory against the world size."""
    paths = []
    groups = _groups(rows, lambda members: len({world_size(r) for r in members}) > 1)
    for index, members in enumerate(groups.values()):
        by_world = _by_world(members)
        plt = _pyplot()
        figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
        sizes = sorted({n for n, _ in by_world})
        one = [(n, r) for n, r in by_world if n == 1]
        for name in sorted({mode(r) for _, r in by_world if world_size(r) > 1}):  # one line per mode, from 1 rank
            line = one + [(n, r) for n, r in by_world if n > 1 and mode(r) == name]
            left.plot([n for n, _ in line], [median_ms(r) or float("nan") for _, r in line], marker="o", label=name)
            right.plot([n for n, _ in line], [max(rank_peaks(r) or [float("nan")]) for _, r in line], marker="o",
                       label=f"{name}, largest rank")
        left.set(xlabel="world size (ranks)", ylabel="median latency (ms)", xticks=sizes)
        right.set(xlabel="world size (ranks)", ylabel="peak memory per rank (MB)", xticks=sizes)
        left.legend(fontsize=8)
        right.legend(fontsize=8)
        model = get(by_world[0][1], "job.model")
        figure.suptitle(f"scaling: {model} on {get(by_world[0][1], 'job.device')}", fontsize=10)
        figure.tight_layout()
        path = Path(out_dir) / f"scaling_{safe_name(model)}_{index}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        paths.append(path)
    return paths


def graph_section(rows: Sequence[Mapping[str, Any]], base_dir: Path, heading: str = "###") -> str:
    """The graph-mode jobs beside their workload's eager job: compile ms, first call, cold, median, verdict."""
    groups = _groups(rows, lambda members: any(get(r, "bench.compile.variant") for r in members))
    if not groups:
        return ("No graph-mode job: no record has device.compile set. Compare one with eager, e.g. "
                "`-m device.compile=none,inductor`.")
    parts = []
    headers = ["device.compile", "backend", "compiled", "compile ms", "first call ms", "cold ms", "median ms",
               "verdict", "record"]
    for members in groups.values():
        body = [_graph_row(r, base_dir) for r in members]
        parts.append(f"{heading} {workload_title(members[0])}\n\n" + table(headers, body))
    note = ("- compile ms: the first call under torch.compile (where compilation happens, before the cold call) "
            "less the median call.")
    return "\n\n".join(parts) + "\n\n" + note


def _graph_row(row: Mapping[str, Any], base_dir: Path) -> list[str]:
    compiled = bool(get(row, "bench.compile.variant"))
    graph = [text(get(row, "bench.compile.variant")), text(get(row, "bench.compile.backend")),
             text(get(row, "bench.compile.targets")), num(get(row, "bench.compile.compile_ms")),
             num(get(row, "bench.compile.first_call_ms"))] if compiled else ["none (eager)", "-", "-", "-", "-"]
    return graph + [num(get(row, "bench.cold_ms")), num(median_ms(row)), verdict_cell(row), record_link(row, base_dir)]
