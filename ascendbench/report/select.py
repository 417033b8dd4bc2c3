"""Which records feed which table: a selection the user states, then one row per workload.

``--select KEY=VALUE[,VALUE...]`` (repeatable, all must hold) keeps the records whose ``KEY`` is one of the
values. Keys: ``sweep`` (a directory name on the record's path: the sweep or run directory), ``model``,
``preset``, ``dtype``, ``device``, ``status``, or any flat record column (``job.batch_size``,
``weights.kind``). A README recipe's smoke, perf and accuracy runs land in one ``multirun/``; a report
over ``--select sweep=flux2_accuracy`` shows that sweep alone.

Accuracy tables take :func:`accuracy_rows`: never a perf-only run (``baseline.enabled=false``: nothing to
judge), one row per workload and settings (the latest record), its repeats counted in ``report.runs``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from ascendbench.errors import ReportError
from ascendbench.report.fmt import get, text
from ascendbench.report.performance import latest
from ascendbench.report.variants import variant_settings, workload

ALIASES = {"model": "job.model", "preset": "job.preset", "dtype": "job.dtype", "device": "job.device"}
SWEEP = "sweep"
RUNS = "report.runs"  # how many records of the row's workload and settings the report saw


def parse_selection(items: Iterable[str]) -> dict[str, list[str]]:
    """``["model=a,b", "dtype=bfloat16"]`` -> ``{"job.model": ["a", "b"], "job.dtype": ["bfloat16"]}``.

    >>> parse_selection(["model=tiny_flux2_decoder", "sweep=flux2_perf"])
    {'job.model': ['tiny_flux2_decoder'], 'sweep': ['flux2_perf']}
    """
    selection: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = str(item).partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ReportError(
                f"--select {item!r} is not KEY=VALUE: use e.g. `--select sweep=flux2_accuracy`, "
                f"`--select model=tiny_flux2_decoder --select dtype=float16,bfloat16` (keys: {SWEEP}, "
                f"{', '.join(ALIASES)}, or a record column such as job.batch_size).")
        key = ALIASES.get(key.strip(), key.strip())
        selection.setdefault(key, []).extend(v.strip() for v in values.split(",") if v.strip())
    return selection


def _matches(row: Mapping[str, Any], key: str, values: Sequence[str]) -> bool:
    if key == SWEEP:
        parts = set(Path(str(row.get("record"))).parent.parts)
        return any(v in parts for v in values)
    return text(get(row, key)) in values


def select_frame(frame: pd.DataFrame, selection: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """The records of ``frame`` matching every ``selection`` entry (all of them when there is none)."""
    if frame.empty or not selection:
        return frame
    unknown = [k for k in selection if k != SWEEP and k not in frame.columns]
    if unknown:
        raise ReportError(f"--select names {', '.join(unknown)}, which no record carries; use {SWEEP}, "
                          f"{', '.join(ALIASES)} or a column of records.csv.")
    keep = [all(_matches(row, k, v) for k, v in selection.items()) for row in frame.to_dict("records")]
    return frame[keep].reset_index(drop=True)


def perf_only(row: Mapping[str, Any]) -> bool:
    """True for a run without a CPU reference (``baseline.enabled=false``): it has no accuracy to show."""
    return get(row, "baseline.skipped") is not None


# Settings that change what is judged, never what the device times: a perf-only run and an accuracy run of one
# workload are one row of a performance table (the latest).
NOT_TIMED = ("baseline.", "metric.")


def latest_per_workload(rows: Iterable[Mapping[str, Any]], timing: bool = False) -> list[dict[str, Any]]:
    """One row per workload and settings: the latest record, with ``report.runs`` = how many there were.

    With ``timing`` the settings of :data:`NOT_TIMED` do not split a workload (the rows of a performance
    table). Rows keep the order of each workload's first record.
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        key = workload(row) + tuple(sorted(variant_settings(row).items()))
        if timing:
            key = tuple(k for k in key if not (isinstance(k, tuple) and str(k[0]).startswith(NOT_TIMED)))
        groups.setdefault(key, []).append(row)
    return [{**latest(members), RUNS: len(members)} for members in groups.values()]


def timing_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows of a performance table: one per timed workload (an accuracy and a perf-only run of it are one),
    the latest, its repeats counted in ``report.runs``."""
    return latest_per_workload(rows, timing=True)


def accuracy_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows of an accuracy table: judged runs only (no perf-only run), one per workload, the latest."""
    return latest_per_workload(r for r in rows if not perf_only(r))


def repeats_note(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """``N rows stand for M records (the latest of each repeated workload)``, or None without repeats."""
    total = sum(int(get(r, RUNS) or 1) for r in rows)
    if total == len(rows):
        return None
    repeated = sum(1 for r in rows if int(get(r, RUNS) or 1) > 1)
    return (f"{len(rows)} row(s) stand for {total} records: {repeated} workload(s) ran more than once and show "
            "their latest record.")
