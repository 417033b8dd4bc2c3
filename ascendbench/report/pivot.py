"""The latency pivot: per model and device, one row per workload (preset, size, batch) and one column per dtype.

In the spirit of ``torch.utils.benchmark.Compare``: the same numbers as the performance table, laid out so
that a dtype's effect on one workload reads across a row. A cell is the median latency in ms with the 95%
confidence interval of the median that the bench recorded (``bench.latency.median_ci95_{low,high}_ms``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import MISSING, get, num, size_label, table, text
from ascendbench.report.gather import ORDER
from ascendbench.report.performance import latest, median_ms
from ascendbench.report.plots import CI_KEYS
from ascendbench.report.tables import machines, record_link

NOTE = ("- Cells: median latency in ms over the timed iterations, then [low, high] of its 95% confidence "
        "interval as the record states it (none: fewer timed iterations than a CI needs); \"missing\": no ok "
        "run of that dtype for the workload. The latest run counts when a workload ran more than once.")


def workload(row: Mapping[str, Any]) -> tuple[str, ...]:
    """The row label of a pivot: preset, size, batch (and steps when the task uses them), as text."""
    steps = get(row, "job.steps")
    return (text(get(row, "job.preset")), size_label(row), num(get(row, "job.batch_size"))) + \
        ((num(steps),) if steps is not None else ())


def dtypes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The rows' dtypes: float32, float16, bfloat16 first (the sweep order), then others alphabetically."""
    found = {text(get(r, "job.dtype")) for r in rows}
    known = ORDER["job.dtype"]
    return [d for d in known if d in found] + sorted(found - set(known))


def latency_ci_cell(row: Mapping[str, Any] | None, base_dir: Path) -> str:
    """``25.6 [25.3, 26.1]`` (median and its 95% CI in ms) linked to the record; ``missing`` without a run."""
    if row is None or median_ms(row) is None:
        return MISSING
    low, high = (get(row, k) for k in CI_KEYS)
    ci = f" [{num(low)}, {num(high)}]" if low is not None and high is not None else ""
    return f"{num(median_ms(row))}{ci} ({record_link(row, base_dir)})"


def pivot_table(rows: Sequence[Mapping[str, Any]], base_dir: Path) -> str:
    """One device's pivot: workloads down, dtypes across, median [95% CI] ms in each cell."""
    columns = dtypes(rows)
    groups: dict[tuple[str, ...], dict[str, list]] = {}
    for row in rows:
        groups.setdefault(workload(row), {}).setdefault(text(get(row, "job.dtype")), []).append(row)
    steps = any(len(key) == 4 for key in groups)
    headers = ["preset", "size", "batch"] + (["steps"] if steps else []) + [f"{d} ms [95% CI]" for d in columns]
    body = [list(key) + (["-"] if steps and len(key) == 3 else [])
            + [latency_ci_cell(latest(cells.get(d, [])), base_dir) for d in columns] for key, cells in groups.items()]
    return table(headers, body)


def places(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Rows by device (``npu``), or by device and host (``npu (host-a)``) when they come from several hosts."""
    many_hosts = len(machines(rows)) > 1
    found: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        host = f" ({text(get(row, 'env.hostname'))})" if many_hosts else ""
        found.setdefault(text(get(row, "job.device")) + host, []).append(row)
    return dict(sorted(found.items()))


def pivot_section(rows: Sequence[Mapping[str, Any]], models: Sequence[str], base_dir: Path, heading: str) -> str:
    """Per model and device (and host), the pivot of the rows that carry a median latency, then the cell note."""
    timed = [r for r in rows if median_ms(r) is not None]
    parts = []
    for model in models:
        for place, mine in places([r for r in timed if get(r, "job.model") == model]).items():
            parts.append(f"{heading} {model} on {place}\n\n" + pivot_table(mine, base_dir))
    if not parts:
        return "No ok record carries a median latency, so there is no pivot to show."
    return "\n\n".join(parts) + "\n\n" + NOTE
