"""The job's timing history: which earlier runs count as runs of the same workload on this host.

The same workload: the same model, device, dtype and preset sizes (the timing budget is left out: it changes how
long a run lasts, not what it times), on the same host and device, with the same torch, torch_npu, ascendbench.
"""

from __future__ import annotations

import importlib.metadata
import platform
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

import ascendbench
from ascendbench.bench.history import RunHistory

# preset keys that set the timing budget, not the workload
BUDGET_KEYS = ("warmup", "iters", "min_iters", "max_iters", "min_time_s", "max_time_s", "stability")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def workload_material(cfg: DictConfig, adapter: Any, dtype: str) -> dict[str, Any]:
    """What identifies the timed workload (plain JSON values); ``dtype`` is the one the run resolved to."""
    plain = {key: OmegaConf.to_container(cfg[key], resolve=True) for key in ("model", "device", "preset")}
    plain["preset"] = {k: v for k, v in plain["preset"].items() if k not in BUDGET_KEYS}
    return {**plain, "dtype": dtype, "host": platform.node(), "device_name": adapter.device_name(),
            "torch": torch.__version__, "torch_npu": _version("torch_npu"), "ascendbench": ascendbench.__version__}


def run_history(cfg: DictConfig, adapter: Any, dtype: str) -> RunHistory | None:
    """The workload's :class:`RunHistory` from ``bench.history``, or None when it (or timing) is off."""
    node = cfg.bench.get("history")
    if not cfg.bench.get("enabled", True) or node is None or not node.get("enabled", False):
        return None
    return RunHistory(Path(str(node.dir)).expanduser(), workload_material(cfg, adapter, dtype),
                      keep=int(node.keep), max_age_s=float(node.max_age_h) * 3600.0)
