"""The Hydra application behind ``python -m ascendbench`` and the ``ascendbench`` script.

Each job's outcome is collected; the process exits non-zero when any job of the run or sweep did
not finish ``ok`` (the others still run and keep their records).
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from ascendbench.callbacks import multirun_statuses
from ascendbench.confdir import hydra_config_path
from ascendbench.runner import run_job

_STATUSES: list[str] = []


@hydra.main(version_base="1.3", config_path=hydra_config_path(), config_name="config")
def _app(cfg: DictConfig) -> str:
    record = run_job(cfg, Path(HydraConfig.get().runtime.output_dir))
    _STATUSES.append(record["status"])
    return record["status"]


def main() -> None:
    """Entry point: run the Hydra app, then exit 1 if any job failed.

    Jobs run in this process report through ``_STATUSES``; jobs of a multirun launched in other
    processes (joblib, submitit) are counted from the records the sweep wrote, read at its end by
    :class:`ascendbench.callbacks.SweepSummary`.
    """
    _STATUSES.clear()
    _app()
    if any(status != "ok" for status in [*_STATUSES, *multirun_statuses()]):
        sys.exit(1)
