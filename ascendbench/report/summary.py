"""The end-of-sweep summary: ``summary.csv`` and ``summary.md`` in the sweep directory."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ascendbench.bench.summary import stop_cell  # why the timed loop stopped, with the CI reached
from ascendbench.fileio import write_atomic
from ascendbench.report import fmt
from ascendbench.report.gather import CONFIG_COLUMN, records_frame
from ascendbench.report.performance import throughput_cell


def judged_metrics(row: fmt.Row) -> str:
    """``name value VERDICT`` of every judged metric; skipped ones with their reason."""
    parts = []
    for key in sorted(row):
        name, _, field = key[8:].rpartition(".")
        if key.startswith("metrics.") and fmt.get(row, key) and field in ("verdict", "skipped"):
            parts.append(f"{name} {fmt.judged(row, f'metrics.{name}', name)[0]} {row[key]}"
                         if field == "verdict" else f"{name} skipped: {fmt.short(row[key], 80)}")
    return "; ".join(parts) or "none"


def job_labels(job_dirs: list[str]) -> list[str]:
    """Short job names: the ``key=value`` parts of each directory name that not all jobs share."""
    names = [Path(d).name for d in job_dirs]
    common = set.intersection(*(set(n.split(",")) for n in names)) if len(names) > 1 else set()
    return [",".join(p for p in n.split(",") if p not in common) or n or "." for n in names]


def references_line(frame: pd.DataFrame) -> str:
    """`` CPU references: N computed, M from the cache.`` (one per workload), or ``""``."""
    computed, cached = (int((frame[c] == True).sum()) if c in frame else 0  # noqa: E712 (objects)
                        for c in ("baseline.computed", "baseline.cache_hit"))
    if not computed and not cached:
        return ""
    return f" CPU references: {computed} computed, {cached} from the cache."


def summary_markdown(frame: pd.DataFrame, sweep_dir: Path) -> str:
    """The sweep's jobs as one table (links relative to ``sweep_dir``), then the A/B lines."""
    head = f"# Sweep summary: {sweep_dir}\n\n"
    if frame.empty:
        return head + "No records found in this sweep directory (no job wrote a record.json).\n"
    counts = frame["status"].value_counts().sort_index()
    intro = (f"{len(frame)} job record(s): " + ", ".join(f"{n} {s}" for s, n in counts.items())
             + "." + references_line(frame))
    headers = ["job", "status", "model", "device", "dtype", "preset", "size", "batch", "verdict",
               "judged metrics", "median ms", "stop", "throughput", "error"]
    rows = frame.to_dict("records")
    labels = job_labels([r["job_dir"] for r in rows])
    body = []
    for label, row in zip(labels, rows, strict=True):
        error = fmt.get(row, "error.type")
        dry = " (dry run: nothing measured)" if fmt.get(row, "run") == fmt.DRY_RUN else ""
        body.append([fmt.link(label, row["record"], sweep_dir), fmt.field(row, "status") + dry,
                     *fmt.cells(row, ["job.model", "job.device", "job.dtype", "job.preset", "size",
                                      "job.batch_size", "verdict"]),
                     judged_metrics(row), fmt.num(fmt.latency(row)), stop_cell(row),
                     throughput_cell(row),
                     f"{error}: {fmt.short(fmt.get(row, 'error.message'), 200)}" if error
                     else "none"])
    ab = [f"- {fmt.link(label, row['record'], sweep_dir)}: "
          f"{fmt.short(fmt.get(row, 'ab.effect'), 300)}: {fmt.field(row, 'ab.verdict')}"
          for label, row in zip(labels, rows, strict=True)
          if fmt.get(row, "ab.verdict") is not None]
    ab_text = ("Patches against none, interleaved (`bench.ab=unpatched`):\n\n" + "\n".join(ab)
               + "\n\n" if ab else "")
    return (f"{head}{intro}\n\n{fmt.table(headers, body)}\n\n{ab_text}Full report with plots: "
            f"`python -m ascendbench.report {sweep_dir}` (\"missing\": the record does not carry "
            "the value).\n")


def write_summary(sweep_dir: Path) -> tuple[pd.DataFrame, Path, Path]:
    """Read every record under ``sweep_dir``; write summary.csv and summary.md there."""
    sweep_dir = Path(sweep_dir)
    frame = records_frame([sweep_dir], missing_ok=True)
    csv_path, md_path = sweep_dir / "summary.csv", sweep_dir / "summary.md"
    sweep_dir.mkdir(parents=True, exist_ok=True)
    # configs stay in records; each file whole or not at all
    write_atomic(csv_path, frame.drop(columns=[CONFIG_COLUMN], errors="ignore").to_csv(index=False))
    write_atomic(md_path, summary_markdown(frame, sweep_dir))
    return frame, csv_path, md_path
