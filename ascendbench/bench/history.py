"""A workload's earlier run medians on this host (``bench.history``); a bad file is set aside."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

import ascendbench
from ascendbench.compat import installed_version
from ascendbench.fileio import read_regular, write_atomic

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 1 << 20  # a history file larger than this is not read (a run adds ~60 bytes)
FORMAT = 2
# preset keys that set the timing budget, not the workload
BUDGET_KEYS = ("warmup", "iters", "min_iters", "max_iters", "min_time_s", "max_time_s", "stability")


def workload_key(material: Mapping[str, Any]) -> str:
    """The digest naming a workload's file: sha256 of ``material`` as sorted JSON (32 hex)."""
    text = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _positive(value: Any) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class RunHistory:
    """``folder/<key>.json``: the last ``keep`` medians, used while younger than ``max_age_s``."""

    folder: Path
    material: Mapping[str, Any]
    keep: int = 10
    max_age_s: float = 7 * 24 * 3600.0

    @property
    def key(self) -> str:
        """The workload's digest (checked on read)."""
        return workload_key(self.material)

    @property
    def path(self) -> Path:
        """The history file: ``folder/<key>.json``."""
        return Path(self.folder) / f"{self.key}.json"

    def earlier(self, now: float | None = None) -> list[float]:
        """The earlier medians (ms) in use, oldest first, ``keep - 1`` at most, none from later."""
        now = time.time() if now is None else now
        runs = [r["median_ms"] for r in self._read() if now - self.max_age_s <= r["at"] <= now + 60]
        return runs[-(self.keep - 1):] if self.keep > 1 else []

    def add(self, median_ms: float, now: float | None = None) -> None:
        """Append this run (keeping the last ``keep``); a write that fails is logged, not raised."""
        if not _positive(median_ms):
            return
        entry = {"at": time.time() if now is None else now, "median_ms": float(median_ms)}
        body = {"format": FORMAT, "key": self.key, "material": self.material,
                "runs": [*self._read(), entry][-self.keep:]}
        try:
            write_atomic(self.path, json.dumps(body, default=str))
        except OSError as exc:
            log.warning("timing history not written to %s (%s): the next run of this workload gets "
                        "no between-runs term from it; check bench.history.dir", self.path, exc)

    def _read(self) -> list[dict[str, float]]:
        try:
            raw = read_regular(self.path, follow=False)
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("timing history %s not read (%s): no between-runs term", self.path, exc)
            return []
        try:
            body = json.loads(raw) if len(raw) <= MAX_FILE_BYTES else None
        except (ValueError, RecursionError):
            body = None
        runs = body.get("runs") if isinstance(body, dict) and body.get("key") == self.key else None
        if not isinstance(runs, list):
            log.warning("timing history %s set aside: not a history of this workload (not JSON, "
                        "too large, or another key); it is replaced by this run's", self.path)
            return []
        return [{"at": float(e["at"]), "median_ms": float(e["median_ms"])} for e in runs
                if isinstance(e, dict) and _positive(e.get("at")) and _positive(e.get("median_ms"))]


def workload_material(cfg: DictConfig, adapter: Any, dtype: str) -> dict[str, Any]:
    """The model, device and preset config (no budget), dtype, host, device and library versions."""
    plain = {key: OmegaConf.to_container(cfg[key], resolve=True)
             for key in ("model", "device", "preset")}
    plain["preset"] = {k: v for k, v in plain["preset"].items() if k not in BUDGET_KEYS}
    return {**plain, "dtype": dtype, "host": platform.node(), "device_name": adapter.device_name(),
            "torch": torch.__version__, "torch_npu": installed_version("torch_npu"),
            "ascendbench": ascendbench.__version__}


def run_history(cfg: DictConfig, adapter: Any, dtype: str) -> RunHistory | None:
    """The workload's :class:`RunHistory` from ``bench.history``, or None when it is off."""
    node = cfg.bench.get("history")
    if not cfg.bench.get("enabled", True) or node is None or not node.get("enabled", False):
        return None
    return RunHistory(Path(str(node.dir)).expanduser(), workload_material(cfg, adapter, dtype),
                      keep=int(node.keep), max_age_s=float(node.max_age_h) * 3600.0)
