"""The end-of-sweep summary: ``summary.csv`` (every record, flat) and ``summary.md`` in the sweep dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ascendbench.bench.summary import stop_cell  # why the timed loop stopped, with the CI reached
from ascendbench.fileio import write_atomic
from ascendbench.report.fmt import get, judged, link, num, short, size_label, table, text
from ascendbench.report.gather import CONFIG_COLUMN, DRY_RUN, records_frame
from ascendbench.report.performance import median_ms, throughput_cell

SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"


def judged_metrics(row: Mapping[str, Any]) -> str:
    """``name value VERDICT`` for every metric with a verdict; skipped metrics with their reason."""
    parts = []
    for key in sorted(row):
        if key.startswith("metrics.") and key.endswith(".verdict") and get(row, key):
            name = key[len("metrics."):-len(".verdict")]
            parts.append(f"{name} {judged(row, f'metrics.{name}', name)[0]} {row[key]}")
        elif key.startswith("metrics.") and key.endswith(".skipped") and get(row, key):
            parts.append(f"{key[len('metrics.'):-len('.skipped')]} skipped: {short(row[key], 80)}")
    return "; ".join(parts) or "none"


def job_labels(job_dirs: list[str]) -> list[str]:
    """Short job names: the ``key=value`` parts of each directory name that not all jobs share."""
    names = [Path(d).name for d in job_dirs]
    common = set.intersection(*(set(n.split(",")) for n in names)) if len(names) > 1 else set()
    return [",".join(p for p in n.split(",") if p not in common) or n or "." for n in names]


def references_line(frame: pd.DataFrame) -> str:
    """`` CPU references: N computed, M from the cache.`` (the counter of "one reference per workload"), or ``""``.

    >>> references_line(pd.DataFrame({"baseline.computed": [True, False, False],
    ...                               "baseline.cache_hit": [False, True, True]}))
    ' CPU references: 1 computed, 2 from the cache.'
    """
    def count(column: str) -> int:
        return int((frame[column] == True).sum()) if column in frame else 0  # noqa: E712 (object column)

    computed, cached = count("baseline.computed"), count("baseline.cache_hit")
    return f" CPU references: {computed} computed, {cached} from the cache." if computed or cached else ""


def summary_markdown(frame: pd.DataFrame, sweep_dir: Path) -> str:
    """The sweep's jobs as one table, links relative to ``sweep_dir``."""
    head = f"# Sweep summary: {sweep_dir}\n\n"
    if frame.empty:
        return head + "No records found in this sweep directory (no job wrote a record.json).\n"
    counts = frame["status"].value_counts().sort_index()
    intro = f"{len(frame)} job record(s): " + ", ".join(f"{n} {s}" for s, n in counts.items()) + "."
    intro += references_line(frame)
    headers = ["job", "status", "model", "device", "dtype", "preset", "size", "batch", "verdict",
               "judged metrics", "median ms", "stop", "throughput", "error"]
    body = []
    rows = frame.to_dict("records")
    for label, row in zip(job_labels([r["job_dir"] for r in rows]), rows, strict=True):
        error = get(row, "error.type")
        status = text(get(row, "status")) + (" (dry run: nothing measured)" if get(row, "run") == DRY_RUN else "")
        body.append([link(label, row["record"], sweep_dir), status,
                     text(get(row, "job.model")), text(get(row, "job.device")), text(get(row, "job.dtype")),
                     text(get(row, "job.preset")), size_label(row), num(get(row, "job.batch_size")),
                     text(get(row, "verdict")), judged_metrics(row), num(median_ms(row)), stop_cell(row),
                     throughput_cell(row), f"{error}: {short(get(row, 'error.message'), 200)}" if error else "none"])
    tail = (f"Full report with plots: `python -m ascendbench.report {sweep_dir}` "
            "(\"missing\": the record does not carry the value).")
    return f"{head}{intro}\n\n{table(headers, body)}\n\n{ab_lines(rows, sweep_dir)}{tail}\n"


def ab_lines(rows: list[Mapping[str, Any]], sweep_dir: Path) -> str:
    """The jobs' A/B of their patches against none (``bench.ab=unpatched``), one line each; ``""`` without any."""
    lines = [f"- {link(label, row['record'], sweep_dir)}: {short(get(row, 'ab.effect'), 300)}: "
             f"{text(get(row, 'ab.verdict'))}"
             for label, row in zip(job_labels([r["job_dir"] for r in rows]), rows, strict=True)
             if get(row, "ab.verdict") is not None]
    return "Patches against none, interleaved (`bench.ab=unpatched`):\n\n" + "\n".join(lines) + "\n\n" if lines else ""


def write_summary(sweep_dir: Path) -> tuple[pd.DataFrame, Path, Path]:
    """Read every record under ``sweep_dir``; write summary.csv and summary.md there."""
    sweep_dir = Path(sweep_dir)
    frame = records_frame([sweep_dir], missing_ok=True)
    csv_path, md_path = sweep_dir / SUMMARY_CSV, sweep_dir / SUMMARY_MD
    sweep_dir.mkdir(parents=True, exist_ok=True)
    # configs stay in records; each file whole or not at all
    write_atomic(csv_path, frame.drop(columns=[CONFIG_COLUMN], errors="ignore").to_csv(index=False))
    write_atomic(md_path, summary_markdown(frame, sweep_dir))
    return frame, csv_path, md_path
