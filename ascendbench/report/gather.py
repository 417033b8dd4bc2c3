"""Records -> rows -> one pandas DataFrame (one row per ``record.json``, dotted column names).

A record that cannot be read becomes a row with ``status: broken`` and the reason, so that nothing
found on disk silently disappears from a summary or a report.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ascendbench.errors import ReportError
from ascendbench.job.record import RECORD_NAME

# Row order of every table: the job's identity first, then the record path as a tie-breaker.
SORT_KEYS = ("job.model", "job.device", "job.dtype", "job.preset", "job.batch_size", "job.height",
             "job.width", "job.num_frames", "record")
# Record fields whose numbers may arrive as the strings "inf"/"-inf" (see record._jsonable).
_NUMERIC_PREFIXES = ("metrics.", "bench.")
_SKIPPED_LISTS = ("samples_ms",)


def find_records(paths: Iterable[Path | str], missing_ok: bool = False) -> list[Path]:
    """Every ``record.json`` under the given directories (or the given files), sorted, no duplicates.

    Args:
        paths: directories searched recursively, or record files.
        missing_ok: skip paths that do not exist (the defaults ``outputs/``, ``multirun/``).

    Raises:
        ReportError: a path does not exist and ``missing_ok`` is false.
    """
    found: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.add(path.resolve())
        elif path.is_dir():
            found.update(p.resolve() for p in path.rglob(RECORD_NAME))
        elif not missing_ok:
            raise ReportError(
                f"report path {str(path)!r} does not exist. Pass directories that hold job outputs "
                "(e.g. `outputs multirun`) or record.json files: `python -m ascendbench.report PATH...`."
            )
    return sorted(found)


def load_row(path: Path) -> dict[str, Any]:
    """One row for the record at ``path``; an unreadable record gives a ``broken`` row saying why."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _broken(path, f"{type(exc).__name__}: {exc}")
    if not isinstance(record, dict) or "status" not in record:
        return _broken(path, "not an ascendbench record (no top-level 'status')")
    return record_row(record, path)


def _broken(path: Path, reason: str) -> dict[str, Any]:
    return {"record": str(path), "job_dir": str(path.parent), "status": "broken",
            "error.type": "UnreadableRecord", "error.message": reason}


def record_row(record: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """Flatten one record into a row of scalars with dotted keys (``bench.latency.median_ms``)."""
    row: dict[str, Any] = {"record": str(path), "job_dir": str(Path(path).parent),
                           "status": record.get("status"), "verdict": record.get("verdict")}
    for section in ("error", "job", "weights", "baseline", "bench", "env", "timing"):
        value = record.get(section)
        if isinstance(value, Mapping):
            flat = flatten(value, section)
            if section == "env":  # an explicit null in env means "not present on that host"
                flat = {k: "none" if v is None else v for k, v in flat.items()}
            row.update(flat)
    for name, entry in (record.get("metrics") or {}).items():
        if isinstance(entry, Mapping):
            row.update(flatten(entry, f"metrics.{name}"))
    row["inputs.digest"] = inputs_digest(record.get("inputs"))
    row["warnings"] = " | ".join(str(w) for w in record.get("warnings") or [])
    row["artifacts"] = json.dumps(record.get("artifacts") or {}, sort_keys=True)
    return {key: _number(key, value) for key, value in row.items()}


def flatten(mapping: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Nested mapping -> ``{prefix.key.sub: scalar}``; lists of scalars become JSON text."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}.{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name))
        elif isinstance(value, (list, tuple)):
            if key not in _SKIPPED_LISTS and all(not isinstance(v, (dict, list)) for v in value):
                flat[name] = json.dumps(list(value))
        else:
            flat[name] = value
    return flat


def _number(key: str, value: Any) -> Any:
    if isinstance(value, str) and key.startswith(_NUMERIC_PREFIXES) and value in ("inf", "-inf"):
        return math.inf if value == "inf" else -math.inf
    return value


def inputs_digest(inputs: Any) -> str | None:
    """One digest over the inputs' SHA256s: equal digests mean the jobs saw identical inputs."""
    if not isinstance(inputs, Mapping) or not inputs:
        return None
    parts = [f"{name}:{entry.get('sha256')}" for name, entry in sorted(inputs.items()) if isinstance(entry, Mapping)]
    return "sha256:" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def records_frame(paths: Iterable[Path | str], missing_ok: bool = False) -> pd.DataFrame:
    """All records under ``paths`` as one DataFrame, rows in a stable order (empty frame if none)."""
    rows = [load_row(p) for p in find_records(paths, missing_ok=missing_ok)]
    return rows_frame(rows)


def rows_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows -> DataFrame sorted by :data:`SORT_KEYS`; missing values are ``None``/``NaN``."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=["record", "job_dir", "status"])
    keys = [k for k in SORT_KEYS if k in frame.columns]
    frame = frame.sort_values(keys, key=lambda col: col.map(_sort_key), kind="stable").reset_index(drop=True)
    return frame


def _sort_key(value: Any) -> tuple:
    """Numbers before text, missing last; mixed column types never fail the sort."""
    if present(value) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1 if present(value) else 2, 0.0, str(value))


def present(value: Any) -> bool:
    """True when a cell holds a value (not ``None``/``NaN``/absent)."""
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return not (value is pd.NA or value is pd.NaT)
