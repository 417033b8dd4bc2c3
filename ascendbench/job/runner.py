"""One job: the list of stages, run (or planned, ``dry_run=true``) in order.

    config -> device -> load -> inputs -> reference -> device run -> evaluate -> compare -> artifacts

Each stage's record section is written as soon as the stage returns, so a job killed mid-way never leaves
a record that looks ``ok``; a failure anywhere writes a ``failed`` record naming the stage.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ascendbench import progress
from ascendbench.env import environment
from ascendbench.errors import AscendBenchError, OutputWriteError
from ascendbench.job.claim import check_job_dir, claim, release
from ascendbench.job.failures import (
    classify,
    config_for_record,
    console_paragraph,
    interrupted,
    log_traceback,
    release_memory,
)
from ascendbench.job.job import Job
from ascendbench.job.planning import declared_target, format_plan, raise_for_problems
from ascendbench.job.record import RecordWriter
from ascendbench.job.resume import files_stat, finished_record, weights_files
from ascendbench.job.stages import STAGES
from ascendbench.job.summary import print_summary
from ascendbench.models.memory import declared_host_memory

log = logging.getLogger(__name__)


class _EmptyKeepInFloat32Filter(logging.Filter):
    """Drop diffusers' warning about modules to keep in float32 when that list is empty."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("There are modules in") or ": []." not in record.getMessage()


logging.getLogger("diffusers.models.modeling_utils").addFilter(_EmptyKeepInFloat32Filter())


def run_job(cfg: DictConfig, job_dir: Path) -> dict[str, Any]:
    """Run one composed job and return its final record (also written to ``job_dir``).

    The directory is checked and claimed first (:mod:`ascendbench.job.claim`), for the job's whole life.

    Raises:
        JobDirError: ``job_dir`` cannot hold a record (read-only, a file, full...); nothing was written.
        JobDirBusyError: another process holds ``job_dir``; its files were left as they are.
    """
    job_dir = Path(job_dir)
    progress.job_name(progress.job_label(cfg))  # every progress line of this job carries its name
    check_job_dir(job_dir)
    claim(job_dir)
    try:
        return _run_claimed(cfg, job_dir)
    finally:
        release(job_dir)


def _run_claimed(cfg: DictConfig, job_dir: Path) -> dict[str, Any]:
    """The job in a directory this process holds: resume check, stages, and the record whatever happens."""
    writer = RecordWriter(job_dir, config_for_record(cfg))
    job = Job(cfg=cfg, dir=job_dir, writer=writer, dry_run=bool(cfg.get("dry_run", False)))
    try:
        if (previous := finished_record(cfg, job_dir)) is not None:  # resume: ok record, same config and weights
            return previous
        job.env = environment()
        writer.update(env=job.env)
        _plan(job) if job.dry_run else _run(job)
    except KeyboardInterrupt as exc:
        where = _finish_quietly(writer, "interrupted", interrupted(exc, job.stage))
        log.error("job interrupted; record (status interrupted): %s", where)
        raise
    except Exception as exc:  # own errors keep their reason, out-of-memory -> oom, anything else 'unexpected'
        _fail(job, *classify(exc, job.adapter.name if job.adapter else None, job.stage))
    if writer.data["status"] == "failed":
        release_memory()  # out of the except block: the traceback no longer holds the job's tensors
    return writer.data


def _finish_quietly(writer: RecordWriter, status: str, error: BaseException, reason: str | None = None) -> str:
    """Finish the record; where it cannot be written (full or read-only disk) say so instead of raising.

    Returns where the record is, or why there is none, for the console line."""
    try:
        writer.finish(status, error, reason=reason or status)
    except OutputWriteError as exc:
        return f"none: the {status} record could not be written either ({exc})"
    return str(writer.path)


def _run(job: Job) -> None:
    seconds: dict[str, float] = {}
    for index, stage in enumerate(STAGES, start=1):
        job.stage = stage.label
        log.info("[%d/%d] %s ...", index, len(STAGES), stage.label)
        start = time.perf_counter()
        section = stage.run(job)
        seconds[stage.name] = time.perf_counter() - start
        job.record({**section, "timing": {"stages_s": dict(seconds)}})
    _note_weights_files(job)
    job.writer.finish("ok")
    print_summary(job.writer.data, job.writer.path)


def _note_weights_files(job: Job) -> None:
    """Size and modification time of the loaded weight files, the cheap first check of a later resume."""
    if (job.weights or {}).get("kind") != "loaded":
        return
    try:
        stats = files_stat(weights_files(job.cfg))
    except Exception as exc:  # the resume check then compares digests instead
        log.debug("weights files not noted for resume: %s", exc)
        return
    job.record({"weights": {"files_stat": stats}})


def _plan(job: Job) -> None:
    """The same stages, planning: every problem is listed (a stage's own error is one), nothing is loaded
    or downloaded; the plan is printed and kept in the record, and the dry run fails when the job would."""
    cfg = job.cfg  # what was asked for, until the device stage says what was chosen
    job.add_plan({"job": {"model": cfg.model.name, "device": cfg.device.name, "device_name": "not set up",
                          "dtype": cfg.dtype.name, "preset": cfg.preset.name, "seed": int(cfg.seed)}})
    by_stage: dict[str, int] = {}
    try:
        declared = declared_target(cfg)
    except AscendBenchError as exc:
        job.problems.append(str(exc))
        declared = {"host": None, "device": None}
    if any(v is not None for v in declared.values()):
        job.add_plan({"target": {f"{k}_memory_gb": v / 1e9 for k, v in declared.items() if v is not None}})
    with declared_host_memory(declared["host"]):
        for stage in STAGES:
            job.stage, before = stage.label, len(job.problems)
            try:
                job.record(stage.plan(job))
            except AscendBenchError as exc:
                job.problems.append(str(exc))
            by_stage[stage.name] = len(job.problems) - before
    job.stage = "the dry run"
    plan = {**job.plan, "problems": job.problems, "problems_by_stage": by_stage}
    job.record({"plan": plan})
    # one line instead of the ~330-line composed config per job (a 6-job sweep printed ~2,000 lines)
    print(f"config    resolved config in {job.writer.path} (`config`); `--cfg job` prints it", flush=True)
    print(format_plan(plan), flush=True)
    raise_for_problems(plan)
    job.writer.finish("ok")


def _fail(job: Job, exc: BaseException, reason: str) -> None:
    writer = job.writer
    try:
        log_path: Path | str = log_traceback(exc, writer.job_dir)
    except OSError as log_exc:  # the disk that failed the job may not take the traceback either
        log_path = f"not written ({type(log_exc).__name__}: {log_exc})"
    where = _finish_quietly(writer, "failed", exc, reason)
    log.error("job failed (%s, reason %s): %s\n  %s", type(exc).__name__, reason, console_paragraph(exc),
              f"record: {where}\n  full log with traceback: {log_path}")
