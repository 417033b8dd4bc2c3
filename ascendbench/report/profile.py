"""Where the time goes: the records' ``profile`` sections as tables (per job, across dtypes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascendbench.report import fmt

COMPARED_OPS = 15  # operators in a dtype comparison (the slowest first)
_CLOCKS = {"device": "self device time", "cpu": "self CPU time"}


def top_rows(row: fmt.Row) -> list[dict[str, Any]]:
    """The record's top-operator rows (empty when not profiled or not a list)."""
    return [r for r in fmt.json_of(fmt.get(row, "profile.top"), list) if isinstance(r, dict)]


def shapes_label(shapes: Any) -> str:
    """``1x16x8x8, 16x16x3x3, 16``; ``[]`` for an argument without a shape."""
    if not isinstance(shapes, list) or not shapes:
        return "none recorded"
    return ", ".join("x".join(str(d) for d in s) if isinstance(s, list) and s else "[]"
                     for s in shapes)


def _job(row: fmt.Row, base_dir: Path) -> str:
    model, device, dtype, preset, size, batch = fmt.cells(
        row, ["job.model", "job.device", "job.dtype", "job.preset", "size", "job.batch_size"])
    clock = _CLOCKS.get(str(fmt.get(row, "profile.clock")), fmt.field(row, "profile.clock"))
    total = fmt.field(row, "profile.ops_total_ms_per_call")
    sentence = (f"{fmt.field(row, 'profile.calls')} profiled call(s) after the timed loop "
                f"({clock}); the operators add up to {total} ms per call: "
                f"{fmt.num(fmt.get(row, 'profile.ops_over_median'), 3)} of the timed median "
                f"{fmt.num(fmt.latency(row))} ms (`ops_over_median`)")
    if fmt.get(row, "profile.profiled_call_ms") is not None:
        share = fmt.num(fmt.get(row, "profile.ops_over_profiled_call"), 3)
        sentence += (f", {share} of the profiled calls' own "
                     f"{fmt.field(row, 'profile.profiled_call_ms')} ms (`ops_over_profiled_call`)")
    if trace := fmt.get(row, "profile.trace"):
        path = Path(row["job_dir"]) / str(trace)
        sentence += ". Trace: " + (fmt.link(str(trace), path, base_dir) if path.is_file()
                                   else f"{trace} (listed in the record, file not found)")
    body = [[fmt.text(r.get("name")), shapes_label(r.get("input_shapes")), fmt.num(r.get("calls")),
             fmt.num(r.get("total_ms")), fmt.num(r.get("mean_ms")),
             f"{100 * r['share']:.1f} %" if isinstance(r.get("share"), (int, float))
             else fmt.MISSING]
            for r in top_rows(row)]
    headers = ["operator", "input shapes", "calls per call", "ms per call", "mean ms", "share"]
    return (f"### {model} {device} {dtype}, {preset} {size}, batch {batch}\n\n{sentence}.\n\n"
            + fmt.table(headers, body))


def dtype_comparison(rows: fmt.Rows) -> str:
    """Operators as rows, the rows' dtypes as columns, ms per task call; the slowest first."""
    columns = []  # per row: ms per operator name
    for row in rows:
        timed = [e for e in top_rows(row) if isinstance(e.get("total_ms"), (int, float))]
        columns.append({name: sum(float(e["total_ms"]) for e in same)
                        for name, same in fmt.group(timed, lambda e: str(e.get("name"))).items()})
    ops = sorted({op for c in columns for op in c},
                 key=lambda op: -max(c.get(op, 0.0) for c in columns))
    body = [[op] + [fmt.num(c[op]) if op in c else f"not in top {len(top_rows(r))}"
                    for c, r in zip(columns, rows, strict=True)] for op in ops[:COMPARED_OPS]]
    body.append(["all operators"] + [fmt.field(r, "profile.ops_total_ms_per_call") for r in rows])
    body.append(["timed median"] + [fmt.num(fmt.latency(r)) for r in rows])
    return fmt.table(["operator"] + [f"{fmt.field(r, 'job.dtype')} ms" for r in rows], body)


def profile_section(rows: fmt.Rows, base_dir: Path) -> str:
    """The dtype comparisons (a workload profiled in two or more dtypes), then each job's top."""
    profiled = [r for r in rows if top_rows(r)]
    if not profiled:
        return "No job ran with `profile.enabled=true`, so there is no operator profile to show."
    keys = ["job.model", "job.device", "job.preset", "job.batch_size", "job.steps", "size"]
    workloads = fmt.group(profiled, lambda r: tuple(fmt.cells(r, keys)))
    parts = ["Operators by self time over the profiled calls, per task call (`profile.*` of each "
             "record; docs/performance.md). In a comparison, an operator's shapes are summed; "
             "\"not in top N\": the record lists only its N slowest operators."]
    for members in workloads.values():
        if len({fmt.get(r, "job.dtype") for r in members}) > 1:
            model, device, preset, size = fmt.cells(members[0], ["job.model", "job.device",
                                                                 "job.preset", "size"])
            parts.append(f"### {model} on {device}, {preset} {size}: operators across "
                         f"dtypes\n\n{dtype_comparison(members)}")
    return "\n\n".join(parts + [_job(r, base_dir) for r in profiled])
