"""A workload's earlier run medians on this host (``bench.history``): the between-runs term of the interval.

The file is data (docs/performance.md "Between runs"): its name is the workload key's digest, never a path from
the data; a link, FIFO, oversized, unparsable or foreign file is set aside with a warning; entries that are not
finite positive numbers are dropped, entries stamped in the future ignored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ascendbench.fileio import read_regular, write_atomic

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 1 << 20  # a history file larger than this is not read (a run adds ~60 bytes)
FORMAT = 2


def workload_key(material: Mapping[str, Any]) -> str:
    """The digest naming a workload's history file: sha256 of ``material`` as sorted JSON (32 hex digits)."""
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _finite(value: Any) -> bool:
    """True for a finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class RunHistory:
    """The medians of one workload's earlier runs on this host, in ``folder/<key>.json``.

    Attributes:
        folder: where history files live (``bench.history.dir``).
        material: what identifies the workload; its digest names the file and is checked on read.
        keep: runs kept at most (this run's included).
        max_age_s: earlier runs older than this are not used.
    """

    folder: Path
    material: Mapping[str, Any]
    keep: int = 10
    max_age_s: float = 7 * 24 * 3600.0

    @property
    def key(self) -> str:
        """The workload's digest."""
        return workload_key(self.material)

    @property
    def path(self) -> Path:
        """The history file: ``folder/<key>.json``."""
        return Path(self.folder) / f"{self.key}.json"

    def earlier(self, now: float | None = None) -> list[float]:
        """The medians (ms) of the earlier runs still in use, oldest first (up to ``keep - 1``)."""
        now = time.time() if now is None else now
        runs = [r["median_ms"] for r in self._read() if now - self.max_age_s <= r["at"] <= now + 60.0]
        return runs[-(self.keep - 1):] if self.keep > 1 else []

    def add(self, median_ms: float, now: float | None = None) -> None:
        """Append this run (keeping the last ``keep``); a write that fails is logged, not raised."""
        if not _finite(median_ms) or median_ms <= 0:
            return
        entry = {"at": time.time() if now is None else now, "median_ms": float(median_ms)}
        body = {"format": FORMAT, "key": self.key, "material": self.material,
                "runs": [*self._read(), entry][-self.keep:]}
        try:
            write_atomic(self.path, json.dumps(body, default=str))
        except OSError as exc:
            log.warning("timing history not written to %s (%s): the next run of this workload gets no "
                        "between-runs term from this one; check bench.history.dir", self.path, exc)

    def _read(self) -> list[dict[str, float]]:
        """The valid entries of the file, oldest first; [] when it is missing or not usable (warned)."""
        try:
            raw = read_regular(self.path, follow=False)
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("timing history %s not read (%s): no between-runs term this run", self.path, exc)
            return []
        try:
            body = json.loads(raw) if len(raw) <= MAX_FILE_BYTES else None
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict) or body.get("key") != self.key or not isinstance(body.get("runs"), list):
            log.warning("timing history %s set aside: not a history of this workload (not JSON, too large, or "
                        "another key); it is replaced by this run's", self.path)
            return []
        return [{"at": float(e["at"]), "median_ms": float(e["median_ms"])} for e in body["runs"]
                if isinstance(e, dict) and _finite(e.get("at")) and _finite(e.get("median_ms"))
                and e["median_ms"] > 0]
