"""The Hydra application behind ``python -m ascendbench`` and the ``ascendbench`` script.

Each job's outcome is collected; the process exits non-zero when any job of the run or sweep did
not finish ``ok`` (the others still run and keep their records), including a job skipped because another
process holds its directory. Jobs run in other processes (joblib, Slurm) report through outcome files of
this launch only (:mod:`ascendbench.job.launch`), so another sweep's failures never set this exit status.

With ``objective`` set (an optimisation sweep, ``+search=...``), each job returns a number instead of its status
and the exit status follows :func:`ascendbench.job.objective.search_exit_status`: 0 when some trial passed and
every job finished, whatever verdicts the other trials had.
"""

from __future__ import annotations

import logging
import math
import signal
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

import ascendbench
from ascendbench import job as job_package  # run_job loads the stages on first use
from ascendbench.compat import exit_if_unsupported, library_versions
from ascendbench.config import hydra_config_path
from ascendbench.config.schemas import register
from ascendbench.errors import JobDirBusyError, JobDirError
from ascendbench.job.launch import RefusedDirectory, launch_outcomes, note_outcome, register_resolvers, reset_outcomes
from ascendbench.job.objective import job_outcome, search_exit_status
from ascendbench.metrics.verdict import ORDER

_JOBS: list[dict[str, Any]] = []  # this process's jobs: {"status": gated status[, "objective": value]}
EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT

log = logging.getLogger(__name__)

register()  # the config schemas, also when conf/ is read as a plain directory (a checkout not installed)
register_resolvers()  # sweep job dir names and the launch token (also in worker processes, which import this)


@hydra.main(version_base="1.3", config_path=hydra_config_path(), config_name="config")
def _app(cfg: DictConfig) -> str | float:
    job_dir = Path(HydraConfig.get().runtime.output_dir)
    record: dict = {"status": "not run"}
    try:
        record = job_package.run_job(cfg, job_dir)
        status = _gate(record, cfg.get("fail_on"))
    except (JobDirBusyError, JobDirError) as exc:  # nothing of the job was written: say so, count it
        log.error("job not run (%s): %s", exc.reason, exc)
        status = exc.reason
    outcome = job_outcome(status, record, cfg.get("objective"), cfg.get("fail_on"))
    _JOBS.append(outcome)
    note_outcome(job_dir=job_dir, **outcome)
    if "objective" in outcome:  # an optimisation sweep: the sampler reads a number
        value = outcome["objective"]
        log.info("objective %s: %s", cfg.objective, f"{value:.4g} ms" if math.isfinite(value) else "inf (did not pass)")
    return outcome.get("objective", status)


def _gate(record: dict, fail_on: str | None) -> str:
    """The job's status, or ``verdict <V>`` when ``fail_on`` makes its verdict count as a failure."""
    verdict = record.get("verdict")
    if record["status"] == "ok" and fail_on and verdict in ORDER and ORDER[verdict] >= ORDER[fail_on]:
        return f"verdict {verdict}"
    return record["status"]


VERSION_FLAG = "--version"
VERSION_LIBRARIES = ("torch", "torch_npu", "diffusers", "hydra-core")


def version_text() -> str:
    """``ascendbench <version>`` and the versions of the libraries a run depends on, one per line.

    Read from the installed distributions' metadata (nothing is imported); a missing one reads
    ``not installed``.
    """
    lines = [f"ascendbench {ascendbench.__version__}"]
    for name, version in library_versions(VERSION_LIBRARIES).items():
        lines.append(f"{name} {version or 'not installed'}")
    return "\n".join(lines)


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def main() -> None:
    """Entry point: run the Hydra app, then exit with :func:`_exit_status` (1 if any job failed or failed
    ``fail_on``; with an ``objective``, 1 if a job failed or no trial passed), 130 on Ctrl-C.

    ``--version`` prints :func:`version_text` and exits 0 without composing a job.
    torch or diffusers older than the supported floor (:mod:`ascendbench.compat`) exits 2 with one paragraph.

    Jobs run in this process report through ``_JOBS``; every job of a multirun, in whichever process it
    ran (joblib, submitit), also leaves its gated status (and objective value) for this launch
    (:func:`ascendbench.job.launch.launch_outcomes`).
    """
    if VERSION_FLAG in sys.argv[1:]:  # before Hydra, whose own --version prints only Hydra's
        print(version_text())
        return
    exit_if_unsupported()  # torch/diffusers below the supported floor: one paragraph, exit 2
    _JOBS.clear()
    reset_outcomes()
    signal.signal(signal.SIGTERM, _terminated)  # Slurm preemption, `kill`: record `interrupted`, not `running`
    try:
        _app()
    except RefusedDirectory as exc:  # before Hydra wrote anything into the directory: one paragraph, exit 1
        print(exc.code, file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt as exc:
        cause = str(exc) if str(exc).startswith("signal ") else "Ctrl-C / SIGINT"
        print(f"ascendbench: interrupted ({cause}); a job still running then has a record saying `interrupted`, "
              "finished jobs keep theirs, and re-running the same sweep resumes it.", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    if code := _exit_status():
        sys.exit(code)


def _exit_status() -> int:
    """1 when a job did not finish ``ok`` (or failed ``fail_on``); with an objective, :func:`search_exit_status`.

    Jobs run in this process and every job of a multirun (:func:`ascendbench.job.launch.launch_outcomes`,
    in whichever process it ran) are counted; a job seen twice changes nothing.
    """
    outcomes = [*_JOBS, *launch_outcomes()]
    if any("objective" in outcome for outcome in outcomes):
        return search_exit_status(outcomes)
    return 1 if any(outcome.get("status") != "ok" for outcome in outcomes) else 0
