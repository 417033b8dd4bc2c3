"""Which records feed which table (``--select``) and which metric answers a section."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from ascendbench.errors import ReportError
from ascendbench.job.record import instant
from ascendbench.report.fmt import Row, Rows, get, group, text
from ascendbench.report.performance import latest
from ascendbench.report.variants import variant_settings, workload

ALIASES = {"model": "job.model", "preset": "job.preset", "dtype": "job.dtype",
           "device": "job.device"}
SWEEP = "sweep"
RUNS = "report.runs"  # how many records of the row's workload and settings the report saw
# Settings that change what is judged, never what the device times (one row of a performance table).
NOT_TIMED = ("baseline.", "metric.")
CLOCK_SKEW_S = 600.0  # a record finished later than now by more is from the future

log = logging.getLogger(__name__)


def parse_selection(items: Iterable[str]) -> dict[str, list[str]]:
    """``["model=a,b", "dtype=bf16"]`` -> ``{"job.model": ["a", "b"], "job.dtype": ["bf16"]}``."""
    selection: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = str(item).partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ReportError(
                f"--select {item!r} is not KEY=VALUE: use e.g. `--select sweep=flux2_accuracy`, "
                "`--select model=tiny_flux2_decoder --select dtype=float16,bfloat16` (keys: "
                f"{SWEEP}, {', '.join(ALIASES)}, or a record column such as job.batch_size).")
        key = ALIASES.get(key.strip(), key.strip())
        selection.setdefault(key, []).extend(v.strip() for v in values.split(",") if v.strip())
    return selection


def _matches(row: Row, key: str, values: Sequence[str]) -> bool:
    if key == SWEEP:
        return any(v in Path(str(row.get("record"))).parent.parts for v in values)
    return text(get(row, key)) in values


def select_frame(frame: pd.DataFrame, selection: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """The records of ``frame`` matching every ``selection`` entry (all without a selection)."""
    if frame.empty or not selection:
        return frame
    if unknown := [k for k in selection if k != SWEEP and k not in frame.columns]:
        raise ReportError(f"--select names {', '.join(unknown)}, which no record carries; use "
                          f"{SWEEP}, {', '.join(ALIASES)} or a column of records.csv.")
    keep = [all(_matches(row, k, v) for k, v in selection.items())
            for row in frame.to_dict("records")]
    return frame[keep].reset_index(drop=True)


def perf_only(row: Row) -> bool:
    """True for a run without a CPU reference (``baseline.enabled=false``): no accuracy to show."""
    return get(row, "baseline.skipped") is not None


def from_the_future(row: Row) -> bool:
    """True when the record finished after now + :data:`CLOCK_SKEW_S` (a wrong clock, an edit)."""
    return instant(get(row, "timing.finished_at")) > time.time() + CLOCK_SKEW_S


def latest_per_workload(rows: Iterable[Row], timing: bool = False) -> list[dict[str, Any]]:
    """The latest record per workload and settings (``report.runs`` counts them)."""
    def key(row: Row) -> tuple:
        found = workload(row) + tuple(sorted(variant_settings(row).items()))
        return tuple(k for k in found if not (timing and isinstance(k, tuple)
                                              and str(k[0]).startswith(NOT_TIMED)))

    rows = list(rows)
    for row in filter(from_the_future, rows):
        log.warning("%s finished %s, in the future (a wrong clock or an edited record): not "
                    "taken as its workload's latest", text(row.get("record")),
                    text(get(row, "timing.finished_at")))
    return [{**latest([r for r in members if not from_the_future(r)] or members),
             RUNS: len(members)} for members in group(rows, key).values()]


def timing_rows(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """The rows of a performance table: one per timed workload, the latest."""
    return latest_per_workload(rows, timing=True)


def accuracy_rows(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """The rows of an accuracy table: judged runs only, one per workload, the latest."""
    return latest_per_workload(r for r in rows if not perf_only(r))


def repeats_note(rows: Rows) -> str:
    """``\n- N rows stand for M records ...`` (a table's last note), or "" without repeats."""
    total = sum(int(get(r, RUNS) or 1) for r in rows)
    if total == len(rows):
        return ""
    repeated = sum(1 for r in rows if int(get(r, RUNS) or 1) > 1)
    return (f"\n- {len(rows)} row(s) stand for {total} records: {repeated} workload(s) ran more "
            "than once and show their latest record.")

