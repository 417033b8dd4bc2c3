"""``record.json``: the one file a job leaves, rewritten atomically as each stage finishes."""

from __future__ import annotations

import contextlib
import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import ascendbench
from ascendbench.errors import OutputWriteError
from ascendbench.fileio import write_atomic

RECORD_NAME = "record.json"
SCHEMA_VERSION = ascendbench.SCHEMA_VERSION


def _jsonable(value: Any) -> Any:
    """Plain JSON values: NaN becomes null, infinities the strings "inf"/"-inf"."""
    if isinstance(value, float):
        return None if math.isnan(value) else str(value) if math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def write_json_atomic(path: Path, data: Any, indent: int | None = 2) -> None:
    """Write JSON to ``path`` atomically, NaN/inf made plain JSON; ``indent=None``: one line."""
    write_atomic(path, json.dumps(_jsonable(data), indent=indent, allow_nan=False))


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))


class RecordWriter:
    """Holds a job's record in memory and rewrites ``<job_dir>/record.json`` on every change."""

    def __init__(self, job_dir: Path, config: dict[str, Any]) -> None:
        self.job_dir = Path(job_dir)
        self.path = self.job_dir / RECORD_NAME
        self._t0 = time.time()
        timing = {"started_at": _iso(self._t0), "finished_at": None, "duration_s": None}
        self.data: dict[str, Any] = {
            "schema": SCHEMA_VERSION, "status": "running", "error": None, "verdict": None,
            "job": {}, "config": config, "env": {}, "weights": None, "inputs": {}, "baseline": None,
            "metrics": {}, "bench": None, "artifacts": {}, "warnings": [], "timing": timing}

    def update(self, **fields: Any) -> None:
        """Set top-level fields and rewrite the file."""
        self.data.update(fields)
        self.write()

    def finish(self, status: str, error: BaseException | None = None,
               reason: str | None = None) -> None:
        """Final status (``ok``, ``failed``, ``interrupted``) with the error, then write."""
        self.data["status"] = status
        if error is not None:
            self.data["error"] = {"type": type(error).__name__, "reason": reason,
                                  "message": str(error)}
        if status != "ok" and self.data.get("verdict") is not None:
            if isinstance(self.data.get("error"), dict):
                self.data["error"]["verdict_before_failure"] = self.data["verdict"]
            self.data["verdict"] = None
        now = time.time()
        self.data["timing"].update(finished_at=_iso(now), duration_s=now - self._t0)
        try:
            self.write()
        except OutputWriteError:
            with contextlib.suppress(OSError):  # never leave `running` for a job that ended
                self.path.unlink(missing_ok=True)
            self.write()

    def write(self) -> None:
        """Rewrite ``record.json`` atomically: compact while the job runs, indented after."""
        running = self.data.get("status") == "running"
        write_json_atomic(self.path, self.data, indent=None if running else 2)


def instant(stamp: Any) -> float:
    """Seconds since the epoch of a record's ``timing`` time (``-inf`` when it is not one).
    >>> instant("2026-12-01T09:00:00+0000") > instant("2026-12-01T16:00:00+0800")
    True"""
    try:  # a time without a zone is read as this host's local time
        return datetime.fromisoformat(str(stamp)).timestamp()
    except (TypeError, ValueError, OverflowError, OSError):
        return float("-inf")
