"""Where the time goes: the records' ``profile`` sections (``profile.enabled=true``) as report tables.

Per job, the top operators by self time (device time on an accelerator, CPU time on the CPU) with their
input shapes, calls and milliseconds per task call and share, under one sentence saying how much of the
measured call they explain. Per workload swept over dtypes, one table compares the operators: operators
as rows (their shapes summed), dtypes as columns, milliseconds per task call. Every number is the record's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import MISSING, get, link, num, size_label, table, text

COMPARED_OPS = 15  # operators in a dtype comparison (the slowest first)
_TOP = "profile.top"
_CLOCKS = {"device": "self device time", "cpu": "self CPU time"}


def profile_fields(section: Any) -> dict[str, Any]:
    """The row fields of a record's ``profile``: its numbers as ``profile.<key>``, the table as JSON text."""
    if not isinstance(section, Mapping):
        return {}
    fields = {f"profile.{k}": v for k, v in section.items()
              if isinstance(v, (str, int, float, bool)) or v is None}
    top = section.get("top")
    if isinstance(top, list):
        fields[_TOP] = json.dumps([r for r in top if isinstance(r, Mapping)])
    return fields


def top_rows(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's top-operator rows (empty when the job was not profiled or the text is not a list)."""
    raw = get(row, _TOP)
    try:
        rows = json.loads(raw) if isinstance(raw, str) else []
    except json.JSONDecodeError:
        return []
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def shapes_label(shapes: Any) -> str:
    """``1x16x8x8, 16x16x3x3, 16``; ``[]`` for an argument without a shape (a scalar, a list)."""
    if not isinstance(shapes, list) or not shapes:
        return "none recorded"
    return ", ".join("x".join(str(d) for d in s) if isinstance(s, list) and s else "[]" for s in shapes)


def job_label(row: Mapping[str, Any]) -> str:
    """``flux2_small_decoder cuda bfloat16, quality 1024x1024, batch 1``."""
    return (f"{text(get(row, 'job.model'))} {text(get(row, 'job.device'))} {text(get(row, 'job.dtype'))}, "
            f"{text(get(row, 'job.preset'))} {size_label(row)}, batch {num(get(row, 'job.batch_size'))}")


def _share(value: Any) -> str:
    return f"{100 * value:.1f} %" if isinstance(value, (int, float)) else MISSING


def coverage_sentence(row: Mapping[str, Any], base_dir: Path) -> str:
    """How many calls were profiled, on which clock, and how much of the call the operators explain."""
    clock = _CLOCKS.get(str(get(row, "profile.clock")), text(get(row, "profile.clock")))
    sentence = (f"{num(get(row, 'profile.calls'))} profiled call(s) after the timed loop ({clock}); the operators "
                f"add up to {num(get(row, 'profile.ops_total_ms_per_call'))} ms per call: "
                f"{num(get(row, 'profile.ops_over_median'), 3)} of the timed median "
                f"{num(get(row, 'bench.latency.median_ms'))} ms (`ops_over_median`)")
    if get(row, "profile.profiled_call_ms") is not None:
        sentence += (f", {num(get(row, 'profile.ops_over_profiled_call'), 3)} of the profiled calls' own "
                     f"{num(get(row, 'profile.profiled_call_ms'))} ms (`ops_over_profiled_call`)")
    trace = get(row, "profile.trace")
    if trace:
        path = Path(row["job_dir"]) / str(trace)
        sentence += ". Trace: " + (link(str(trace), path, base_dir) if path.is_file()
                                   else f"{trace} (listed in the record, file not found)")
    return sentence + "."


def job_table(row: Mapping[str, Any], base_dir: Path) -> str:
    """The coverage sentence and the top-operator table of one profiled job."""
    headers = ["operator", "input shapes", "calls per call", "ms per call", "mean ms", "share"]
    body = [[text(r.get("name")), shapes_label(r.get("input_shapes")), num(r.get("calls")), num(r.get("total_ms")),
             num(r.get("mean_ms")), _share(r.get("share"))] for r in top_rows(row)]
    return coverage_sentence(row, base_dir) + "\n\n" + table(headers, body)


def per_operator_ms(row: Mapping[str, Any]) -> dict[str, float]:
    """Milliseconds per task call by operator name, its input shapes summed (the record's top rows only)."""
    totals: dict[str, float] = {}
    for entry in top_rows(row):
        value = entry.get("total_ms")
        if isinstance(value, (int, float)):
            totals[str(entry.get("name"))] = totals.get(str(entry.get("name")), 0.0) + float(value)
    return totals


def workload_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    """What must be equal for two profiled jobs to be compared: everything but the dtype."""
    return tuple(text(get(row, k)) for k in ("job.model", "job.device", "job.preset", "job.batch_size",
                                             "job.steps")) + (size_label(row),)


def dtype_comparison(rows: Sequence[Mapping[str, Any]]) -> str:
    """Operators as rows, the rows' dtypes as columns, ms per task call; the slowest operators first."""
    columns = [per_operator_ms(r) for r in rows]
    ops = sorted({op for c in columns for op in c}, key=lambda op: -max(c.get(op, 0.0) for c in columns))
    headers = ["operator"] + [f"{text(get(r, 'job.dtype'))} ms" for r in rows]
    body = [[op] + [num(c[op]) if op in c else f"not in top {len(top_rows(r))}" for c, r in zip(columns, rows,
                                                                                               strict=True)]
            for op in ops[:COMPARED_OPS]]
    body.append(["all operators"] + [num(get(r, "profile.ops_total_ms_per_call")) for r in rows])
    body.append(["timed median"] + [num(get(r, "bench.latency.median_ms")) for r in rows])
    return table(headers, body)


def comparisons(rows: Sequence[Mapping[str, Any]], heading: str) -> list[str]:
    """One dtype comparison per workload profiled in two or more dtypes."""
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(workload_key(row), []).append(row)
    parts = []
    for members in groups.values():
        if len({get(r, "job.dtype") for r in members}) > 1:
            first = members[0]
            title = (f"{heading} {text(get(first, 'job.model'))} on {text(get(first, 'job.device'))}, "
                     f"{text(get(first, 'job.preset'))} {size_label(first)}: operators across dtypes")
            parts.append(f"{title}\n\n{dtype_comparison(members)}")
    return parts


def profile_section(rows: Sequence[Mapping[str, Any]], base_dir: Path, heading: str) -> str:
    """The report section: the dtype comparisons, then each profiled job's top operators."""
    profiled = [r for r in rows if top_rows(r)]
    if not profiled:
        return "No job ran with `profile.enabled=true`, so there is no operator profile to show."
    jobs = [f"{heading} {job_label(r)}\n\n{job_table(r, base_dir)}" for r in profiled]
    note = ("Operators by self time over the profiled calls, per task call (`profile.*` of each record; "
            "docs/performance.md). In a comparison, an operator's shapes are summed; \"not in top N\": the "
            "record lists only its N slowest operators.")
    return "\n\n".join([note, *comparisons(profiled, heading), *jobs])
