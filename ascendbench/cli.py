"""The Hydra application behind ``python -m ascendbench`` and the ``ascendbench`` script.

Each job's outcome is collected; the process exits non-zero when any job of the run or sweep did
not finish ``ok`` (the others still run and keep their records).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from ascendbench.callbacks import multirun_statuses, reset_multirun_statuses
from ascendbench.config import hydra_config_path
from ascendbench.config.schemas import register
from ascendbench.job import run_job
from ascendbench.metrics.verdict import ORDER

_STATUSES: list[str] = []
EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT

register()  # the config schemas, also when conf/ is read as a plain directory (a checkout not installed)


@hydra.main(version_base="1.3", config_path=hydra_config_path(), config_name="config")
def _app(cfg: DictConfig) -> str:
    record = run_job(cfg, Path(HydraConfig.get().runtime.output_dir))
    _STATUSES.append(_gate(record, cfg.get("fail_on")))
    return record["status"]


def _gate(record: dict, fail_on: str | None) -> str:
    """The job's status, or ``verdict <V>`` when ``fail_on`` makes its verdict count as a failure."""
    verdict = record.get("verdict")
    if record["status"] == "ok" and fail_on and verdict in ORDER and ORDER[verdict] >= ORDER[fail_on]:
        return f"verdict {verdict}"
    return record["status"]


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def main() -> None:
    """Entry point: run the Hydra app, then exit 1 if any job failed (or failed ``fail_on``), 130 on Ctrl-C.

    Jobs run in this process report through ``_STATUSES``; jobs of a multirun launched in other
    processes (joblib, submitit) are counted from the records the sweep wrote, read at its end by
    :class:`ascendbench.callbacks.SweepSummary`.
    """
    _STATUSES.clear()
    reset_multirun_statuses()
    signal.signal(signal.SIGTERM, _terminated)  # Slurm preemption, `kill`: record `interrupted`, not `running`
    try:
        _app()
    except KeyboardInterrupt:
        print("ascendbench: interrupted; the running job's record says `interrupted`, finished jobs keep "
              "theirs, and re-running the same sweep resumes it.", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    if any(status != "ok" for status in [*_STATUSES, *multirun_statuses()]):
        sys.exit(1)
