"""One job: the stages run (or planned with ``dry_run=true``) in order, each section written."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig

from ascendbench import progress
from ascendbench.baseline.replay_memory import plan_lines
from ascendbench.env import environment
from ascendbench.errors import AscendBenchError, DryRunError, OutputWriteError, WouldBuild
from ascendbench.job import failures
from ascendbench.job.claim import check_job_dir, claim, release
from ascendbench.job.job import Job
from ascendbench.job.planning import declared_target
from ascendbench.job.record import RecordWriter
from ascendbench.job.resume import files_stat, finished_record, weights_files
from ascendbench.job.stages import STAGES
from ascendbench.job.summary import print_summary
from ascendbench.models.memory import declared_host_memory

log = logging.getLogger(__name__)


# diffusers warns of the modules to keep in float32 even when that list is empty: drop those
logging.getLogger("diffusers.models.modeling_utils").addFilter(
    lambda record: ": []." not in record.getMessage()
    or not record.getMessage().startswith("There are modules in"))


def run_job(cfg: DictConfig, job_dir: Path) -> dict[str, Any]:
    """Run one composed job in ``job_dir`` (checked and claimed for its whole life); its record."""
    job_dir = Path(job_dir)
    progress.job_name(progress.job_label(cfg))  # every progress line of this job carries its name
    check_job_dir(job_dir)
    claim(job_dir)
    try:
        return _run_claimed(cfg, job_dir)
    finally:
        release(job_dir)


def _run_claimed(cfg: DictConfig, job_dir: Path) -> dict[str, Any]:
    writer = RecordWriter(job_dir, failures.config_for_record(cfg))
    job = Job(cfg=cfg, dir=job_dir, writer=writer, dry_run=bool(cfg.get("dry_run", False)))
    try:
        if (previous := finished_record(cfg, job_dir)) is not None:  # resume: same config, weights
            return previous
        job.env = environment()
        writer.update(env=job.env)
        _plan(job) if job.dry_run else _run(job)
    except KeyboardInterrupt as exc:
        where = _finish_quietly(writer, "interrupted", failures.interrupted(exc, job.stage))
        log.error("job interrupted; record (status interrupted): %s", where)
        raise
    except Exception as exc:  # own errors keep their reason, out-of-memory: oom, else 'unexpected'
        _fail(job, *failures.classify(exc, job.adapter.name if job.adapter else None, job.stage))
    if writer.data["status"] == "failed":
        # out of the except block: the traceback no longer holds the tensors
        failures.release_memory()
    return writer.data


def _finish_quietly(writer: RecordWriter, status: str, error: BaseException,
                    reason: str | None = None) -> str:
    """Finish the record; where it cannot be written say so: where it is, or why there is none."""
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
    if (job.weights or {}).get("kind") == "loaded":  # the cheap first check of a later resume
        try:
            job.record({"weights": {"files_stat": files_stat(weights_files(job.cfg))}})
        except Exception as exc:  # the resume check then compares digests instead
            log.debug("weights files not noted for resume: %s", exc)
    job.writer.finish("ok")
    print_summary(job.writer.data, job.writer.path)


def _fail(job: Job, exc: BaseException, reason: str) -> None:
    try:
        log_path: Path | str = failures.log_traceback(exc, job.writer.job_dir)
    except OSError as log_exc:  # the disk that failed the job may not take the traceback either
        log_path = f"not written ({type(log_exc).__name__}: {log_exc})"
    where = _finish_quietly(job.writer, "failed", exc, reason)
    log.error("job failed (%s, reason %s): %s\n  %s", type(exc).__name__, reason,
              failures.console_paragraph(exc),
              f"record: {where}\n  full log with traceback: {log_path}")


def _plan(job: Job) -> None:
    """The same stages, planning only: every problem listed, nothing loaded; plan printed, kept."""
    cfg = job.cfg  # what was asked for, until the device stage says what was chosen
    job.add_plan({"job": {"model": cfg.model.name, "device": cfg.device.name,
                          "device_name": "not set up", "dtype": cfg.dtype.name,
                          "preset": cfg.preset.name, "seed": int(cfg.seed)}})
    by_stage: dict[str, int] = {}
    declared: dict[str, int | None] = {"host": None, "device": None}
    try:
        declared = declared_target(cfg)
    except AscendBenchError as exc:
        job.problems.append(str(exc))
    if target := {f"{k}_memory_gb": v / 1e9 for k, v in declared.items() if v is not None}:
        job.add_plan({"target": target})
    with declared_host_memory(declared["host"]):
        for stage in STAGES:
            job.stage, before = stage.label, len(job.problems)
            try:
                job.record(stage.plan(job))
            except WouldBuild as exc:  # not ascendbench's: named, not built
                job.plan["would_build"] = [*job.plan.get("would_build", []), str(exc)]
            except AscendBenchError as exc:
                job.problems.append(str(exc))
            by_stage[stage.name] = len(job.problems) - before
            if stage.name == "config" and by_stage["config"]:  # nothing built from a refused config
                break
    job.stage = "the dry run"
    plan = {**job.plan, "problems": job.problems, "problems_by_stage": by_stage}
    job.record({"plan": plan})
    # one line instead of the ~330-line composed config per job
    print(f"config    resolved config in {job.writer.path} (`config`); `--cfg job` prints it",
          flush=True)
    print(format_plan(plan), flush=True)
    if plan["problems"]:
        raise DryRunError(f"dry run: the job would fail ({len(plan['problems'])} problem(s)): "
                          + " | ".join(plan["problems"]))
    job.writer.finish("ok")


def _gb(mb: float | None) -> str:
    return "?" if mb is None else f"{mb / 1e3:.2f} GB"


def _memory_text(entry: Mapping[str, Any]) -> str:
    parts = (f"parameters {_gb(entry.get('parameters_mb'))} + activations "
             f"{_gb(entry.get('activations_mb'))}")
    if entry.get("activations_mb") is None:
        parts += f" ({entry.get('activation_note')})"
    if entry.get("reference_process_mb") is not None:  # a child process beside the job's copy
        parts += " + the reference process's imports and the job's float32 copy"
    return (f"{entry['what']}: {parts} -> {_gb(entry['need_mb'])} of {_gb(entry['free_mb'])} "
            f"free: {'fits' if entry['fits'] else 'DOES NOT FIT'}")


def _memory_lines(memory: Mapping[str, Any]) -> list[str]:
    lines = []
    if "num_params" in memory:
        lines.append(f"  memory    {memory['num_params']:,} parameters and buffers "
                     f"({memory['basis']})")
    if parts := memory.get("components"):  # in the device run's dtype
        lines.append(" " * 12 + ", ".join(f"{name} {p['num_params'] / 1e9:.3f}B ({p['gb']} GB)"
                                          for name, p in parts.items()))
    if "unavailable" in memory:
        lines.append(f"  memory    not estimated: {memory['unavailable']}")
    for key in ("device_run", "cpu_reference"):
        entry = memory.get(key) or {}
        if "unavailable" in entry:
            what = key.replace("_", " ")
            lines.append(f"            {what} not estimated: {entry['unavailable']}")
        elif entry:  # a multi-card job: one line per rank (and the host's, on the CPU)
            ranks = [*entry.get("per_rank", []), *([entry["host"]] if entry.get("host") else [])]
            lines.extend(f"            {_memory_text(e)}" for e in ranks or [entry])
    lines += plan_lines(memory.get("replay_reference"))
    return lines or ["  memory    not estimated"]


def _weights_text(weights: Mapping[str, Any]) -> str:
    if not weights:
        return "not planned (see the problems)"
    seed = f"seed {weights.get('init_seed')}"
    where = weights.get("path") or weights.get("endpoint") or (
        seed if weights.get("action") == "random-init" else weights.get("source"))
    detail = weights.get("origin") or weights.get("reason") or ""
    files = (f", {len(weights['files'])} file(s), {weights['size_mb']:.1f} MB"
             if weights.get("files") else "")
    return f"{weights.get('action')}: {where} ({detail}){files}"


def _baseline_text(baseline: Mapping[str, Any]) -> str:
    source = baseline.get("source")
    if source and not source.get("kind"):
        return f"saved run {source.get('given')}: not usable (see the problems)"
    if source and source["kind"] == "tensors":
        return (f"saved outputs {source['tensors']} (no CPU reference computed; "
                f"{source['limitation']})")
    if source:
        return (f"saved run of {source.get('device')} {source.get('dtype')} on "
                f"{source.get('host')}: {source['tensors']} (no CPU reference computed; record "
                f"{source.get('record')}, checked: {', '.join(source['checked'])})")
    if baseline.get("mode") == "replay":
        return (f"replay reference (per module, {baseline.get('precision')}): "
                f"{baseline.get('reason')}")
    if baseline.get("enabled"):
        state = {True: "cache hit (reused)", False: "cache miss (computed once, then cached)",
                 None: "unknown"}[baseline.get("cache_hit")]
        where = f": {baseline['path']}" if baseline.get("path") else f" ({baseline.get('reason')})"
        return f"{baseline['precision']} reference, {state}{where}"
    return str(baseline.get("reason") or baseline.get("unavailable", "n/a"))


def _count(problems: int) -> str:
    return "ok" if not problems else f"{problems} problem{'s' * (problems > 1)}"


def format_plan(plan: Mapping[str, Any]) -> str:
    """The plan as a few aligned lines (parts a failed stage could not plan are said missing)."""
    job = plan.get("job") or {}
    inputs = "; ".join(f"{k} {v['shape']} {v['dtype']}"
                       for k, v in (plan.get("inputs") or {}).items())
    lines = [f"dry run: {job.get('model')} on {job.get('device')} ({job.get('device_name')}) in "
             f"{job.get('dtype')}, preset {job.get('preset')}, seed {job.get('seed')} -- nothing "
             "loaded, nothing downloaded",
             f"  weights   {_weights_text(plan.get('weights') or {})}",
             f"  inputs    {inputs or 'not built'}"]
    if plan.get("target"):
        free = ", ".join(f"{k.removesuffix('_memory_gb')} {v:.1f} GB free"
                         for k, v in plan["target"].items())
        lines.append(f"  target    planned for the machine declared in dry_run_target ({free}), "
                     "not this host's measured memory")
    lines += _memory_lines(plan.get("memory") or {})
    lines.append(f"  baseline  {_baseline_text(plan.get('baseline') or {})}")
    outputs = plan.get("outputs") or ["not planned"]
    lines += ["  outputs   " + outputs[0]] + [f"            {o}" for o in outputs[1:]]
    if by_stage := plan.get("problems_by_stage"):  # the device side and the reference told apart
        lines.append("  stages    " + ", ".join(f"{k} {_count(n)}" for k, n in by_stage.items()))
    lines += [f"  would build {w}" for w in plan.get("would_build", [])]
    lines += [f"  PROBLEM   {p}" for p in plan.get("problems", [])] or ["  problems  none"]
    return "\n".join(lines)
