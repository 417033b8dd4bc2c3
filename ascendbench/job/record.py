"""``record.json``: the one file a job leaves behind, written atomically at every stage.

The record is written when the job starts (``status: running``) and rewritten as stages finish, so a
job killed mid-way never leaves a record that looks ``ok``. A running record, rewritten a dozen times a
job, is written compact (one line: json's C encoder, about ten times faster than its indenting Python
one); the final record, the one people read, is indented. Fields follow the user-facing contract of
DESIGN.md: status, error, config, env, weights, metrics, verdict, bench, baseline, artifacts.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ascendbench.errors import OutputWriteError
from ascendbench.fileio import write_atomic

RECORD_NAME = "record.json"
SCHEMA_VERSION = 1


def _jsonable(value: Any) -> Any:
    """Plain JSON values: NaN becomes null, infinities the strings "inf"/"-inf"."""
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def write_json_atomic(path: Path, data: Any, indent: int | None = 2) -> None:
    """Write JSON to ``path`` atomically (:func:`ascendbench.fileio.write_atomic`); NaN/inf made plain JSON.
    ``indent=None``: one compact line."""
    write_atomic(path, json.dumps(_jsonable(data), indent=indent, allow_nan=False))


def load_record(path: Path) -> dict[str, Any]:
    """Read a record (a directory containing ``record.json`` or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / RECORD_NAME
    return json.loads(path.read_text())


class RecordWriter:
    """Holds a job's record in memory and rewrites ``<job_dir>/record.json`` on every change."""

    def __init__(self, job_dir: Path, config: dict[str, Any]) -> None:
        self.job_dir = Path(job_dir)
        self.path = self.job_dir / RECORD_NAME
        self._t0 = time.time()
        self.data: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "status": "running",
            "error": None,
            "verdict": None,
            "job": {},
            "config": config,
            "env": {},
            "weights": None,
            "inputs": {},
            "baseline": None,
            "metrics": {},
            "bench": None,
            "artifacts": {},
            "warnings": [],
            "timing": {"started_at": _iso(self._t0), "finished_at": None, "duration_s": None},
        }

    def update(self, **fields: Any) -> None:
        """Set top-level fields and rewrite the file."""
        self.data.update(fields)
        self.write()

    def warn(self, message: str) -> None:
        """Append a warning shown in the summary and the report."""
        self.data["warnings"].append(message)
        self.write()

    def finish(self, status: str, error: BaseException | None = None, reason: str | None = None) -> None:
        """Final status (``ok``, ``failed`` or ``interrupted``) with the error, then write.

        A job that did not end ``ok`` has no verdict: one reached before the failure (e.g. PASS, then the
        disk filled while saving artifacts) is kept as ``error.verdict_before_failure`` only, so that no
        reader counts a failed job as passed. When the final record cannot be written (a full disk), the
        stale ``running`` record is removed to free its space and the write is tried once more; if that fails
        too, :class:`OutputWriteError` is raised and no record claims the job is still running.
        """
        self.data["status"] = status
        if error is not None:
            self.data["error"] = {"type": type(error).__name__, "reason": reason, "message": str(error)}
        if status != "ok" and self.data.get("verdict") is not None:
            if isinstance(self.data.get("error"), dict):
                self.data["error"]["verdict_before_failure"] = self.data["verdict"]
            self.data["verdict"] = None
        now = time.time()
        self.data["timing"].update(finished_at=_iso(now), duration_s=now - self._t0)
        try:
            self.write()
        except OutputWriteError:
            with contextlib.suppress(OSError):  # never leave a record saying `running` for a job that ended
                self.path.unlink(missing_ok=True)
            self.write()

    def write(self) -> None:
        """Rewrite ``record.json`` atomically: compact while the job runs, indented once it has ended."""
        write_json_atomic(self.path, self.data, indent=None if self.data.get("status") == "running" else 2)


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))


def instant(stamp: Any) -> float:
    """Seconds since the epoch of a record's ``timing`` time (``2026-12-01T17:54:36+0800``), ``-inf`` when it is
    absent or not such a time: records from hosts in different time zones order by the moment, never by their
    local-time text (``...T09:00+0000`` is later than ``...T16:00+0800``).

    >>> instant("2026-12-01T09:00:00+0000") > instant("2026-12-01T16:00:00+0800")
    True
    """
    try:  # ISO 8601 as this tool writes it; a time without a zone is read as this host's local time
        return datetime.fromisoformat(str(stamp)).timestamp()
    except (TypeError, ValueError, OverflowError, OSError):
        return float("-inf")
