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

from omegaconf import DictConfig, OmegaConf

from ascendbench.env import environment
from ascendbench.errors import AscendBenchError
from ascendbench.job.failures import (
    classify,
    config_for_record,
    console_paragraph,
    interrupted,
    log_traceback,
    release_memory,
)
from ascendbench.job.job import Job
from ascendbench.job.planning import format_plan, raise_for_problems
from ascendbench.job.record import RecordWriter
from ascendbench.job.resume import finished_record
from ascendbench.job.stages import STAGES
from ascendbench.job.summary import print_summary

log = logging.getLogger(__name__)


class _EmptyKeepInFloat32Filter(logging.Filter):
    """Drop diffusers' warning about modules to keep in float32 when that list is empty."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("There are modules in") or ": []." not in record.getMessage()


logging.getLogger("diffusers.models.modeling_utils").addFilter(_EmptyKeepInFloat32Filter())


def run_job(cfg: DictConfig, job_dir: Path) -> dict[str, Any]:
    """Run one composed job and return its final record (also written to ``job_dir``)."""
    if (previous := finished_record(cfg, job_dir)) is not None:  # resume: ok record, same config
        return previous
    writer = RecordWriter(job_dir, config_for_record(cfg))
    job = Job(cfg=cfg, dir=Path(job_dir), writer=writer, dry_run=bool(cfg.get("dry_run", False)),
              env=environment())
    writer.update(env=job.env)
    try:
        _plan(job) if job.dry_run else _run(job)
    except KeyboardInterrupt as exc:
        writer.finish("interrupted", interrupted(exc, job.stage), reason="interrupted")
        log.error("job interrupted; record (status interrupted): %s", writer.path)
        raise
    except Exception as exc:  # own errors keep their reason, out-of-memory -> oom, anything else 'unexpected'
        _fail(job, *classify(exc, job.adapter.name if job.adapter else None, job.stage))
    if writer.data["status"] == "failed":
        release_memory()  # out of the except block: the traceback no longer holds the job's tensors
    return writer.data


def _run(job: Job) -> None:
    seconds: dict[str, float] = {}
    for index, stage in enumerate(STAGES, start=1):
        job.stage = stage.label
        log.info("[%d/%d] %s ...", index, len(STAGES), stage.label)
        start = time.perf_counter()
        section = stage.run(job)
        seconds[stage.name] = time.perf_counter() - start
        job.record({**section, "timing": {"stages_s": dict(seconds)}})
    job.writer.finish("ok")
    print_summary(job.writer.data, job.writer.path)


def _plan(job: Job) -> None:
    """The same stages, planning: every problem is listed (a stage's own error is one), nothing is loaded
    or downloaded; the plan is printed and kept in the record, and the dry run fails when the job would."""
    cfg = job.cfg  # what was asked for, until the device stage says what was chosen
    job.add_plan({"job": {"model": cfg.model.name, "device": cfg.device.name, "device_name": "not set up",
                          "dtype": cfg.dtype.name, "preset": cfg.preset.name, "seed": int(cfg.seed)}})
    for stage in STAGES:
        job.stage = stage.label
        try:
            job.record(stage.plan(job))
        except AscendBenchError as exc:
            job.problems.append(str(exc))
    job.stage = "the dry run"
    plan = {**job.plan, "problems": job.problems}
    job.record({"plan": plan})
    print(OmegaConf.to_yaml(job.cfg, resolve=True))
    print(format_plan(plan), flush=True)
    raise_for_problems(plan)
    job.writer.finish("ok")


def _fail(job: Job, exc: BaseException, reason: str) -> None:
    writer = job.writer
    log_path = log_traceback(exc, writer.job_dir)
    writer.finish("failed", exc, reason=reason)
    log.error("job failed (%s, reason %s): %s\n  record: %s\n  full log with traceback: %s", type(exc).__name__,
              reason, console_paragraph(exc), writer.path, log_path)
