"""The reference: a saved run (``baseline.source``), the CPU reference (cache or clean child
process; ``baseline.reference=auto`` takes float64 wherever it fits), or the replay reference's
modules (``baseline.reference_mode``: ``replay``, or ``auto`` where the whole model cannot fit)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from omegaconf import OmegaConf

from ascendbench.baseline import memory
from ascendbench.baseline.key import reference_patches
from ascendbench.baseline.replay import prepare_replay
from ascendbench.baseline.replay_modules import replay_patterns
from ascendbench.baseline.service import ReferenceQuery, get_or_compute
from ascendbench.baseline.source import plan_source, reference_from_source, weights_identity
from ascendbench.errors import ConfigError, InsufficientMemoryError
from ascendbench.job import planning
from ascendbench.job.job import Job
from ascendbench.job.stages.base import Stage
from ascendbench.patches.registry import patches_applied
from ascendbench.precision import dtype_name

PERFORMANCE_ONLY = "baseline.enabled=false (performance-only run)"
UNPATCHED = [{"skipped": "the CPU reference runs the model's own (upstream) code; model.patches "
                         "apply to the device run only (an entry declared `reference: true` would "
                         "apply to the reference too)"}]
WANTED = "baseline.reference_mode=replay"


def _query(job: Job, weights: dict[str, Any]) -> ReferenceQuery:
    return ReferenceQuery(cfg=job.cfg, task=job.task, inputs=job.inputs or {},
                          precision=job.precision.reference, weights=weights,
                          inputs_info=job.inputs_info, module=job.model, log_dir=job.dir)


def _setting(job: Job, key: str, default: str) -> str:
    return str(job.cfg.baseline.get(key) or default)


def _source(job: Job) -> str | None:
    """``baseline.source`` when a reference is wanted at all (``baseline.enabled``)."""
    source = job.cfg.baseline.get("source")
    return str(source) if source and job.cfg.baseline.enabled else None


def _falls_back(job: Job) -> bool:
    """``auto`` replays what does not fit whole only when the precision is left to ascendbench
    too: a forced float32/float64 whole-model reference is refused as it was."""
    return _setting(job, "reference_mode", "auto") == _setting(job, "reference", "auto") == "auto"


def _workload(job: Job, weights: dict[str, Any] | None) -> dict[str, Any]:
    """This job's workload fields for the check of a saved reference (``None``: not known)."""
    cfg = job.cfg
    return {"model": str(cfg.model.name), "task": OmegaConf.select(cfg, "model.task._target_"),
            "sizes": job.task.sizes(cfg.preset) if job.task is not None else None,
            "seed": int(cfg.seed),
            "inputs_sha256": {k: v.get("sha256") for k, v in job.inputs_info.items()} or None,
            "weights_digest": weights_identity(weights)}


def _allow(job: Job) -> list[str]:
    return [str(name) for name in job.cfg.baseline.get("source_allow") or []]


def _replay(job: Job, reason: str) -> dict[str, Any]:
    """The replay (modules chosen, weights exported) in place of a whole-model reference."""
    job.replay, job.reference = prepare_replay(job, reason), None
    precision = job.replay.settings["precision"]
    return {"baseline": {**job.replay.summary(), "precision": precision},
            "job": {"reference_dtype": f"{precision} (replay)"}}


def _replay_reason(job: Job, estimate: dict[str, Any] | None) -> str | None:
    """Why the job would replay (``None``: it would not)."""
    if _setting(job, "reference_mode", "auto") == "replay":
        return WANTED
    if not _falls_back(job) or not estimate or estimate.get("fits", True):
        return None
    need, free = estimate.get("host_need_mb", 0) / 1e3, estimate.get("host_available_mb", 0) / 1e3
    return (f"auto: the whole-model {estimate.get('dtype')} reference needs about {need:.1f} GB "
            f"of the {free:.1f} GB available, so each module is replayed alone")


class ReferenceStage(Stage):
    """The outputs the device run is judged against (``baseline.*``); a reference that would not
    fit in host memory is refused before anything is allocated."""

    name, label = "reference", "the CPU reference"

    def plan(self, job: Job) -> dict[str, Any]:
        """Reference precision, cache key and hit, the memory it needs, or the replay's reason."""
        if job.precision is None or job.precision.reference is None:
            reason = (PERFORMANCE_ONLY if job.precision is not None
                      else "not planned: the device could not be set up")
            job.add_plan({"baseline": {"enabled": False, "reason": reason}})
            return {}
        if _source(job):
            weights = job.plan.get("weights") or {}
            known = weights if weights.get("action") in ("load", "random-init") else None
            unusable = {"enabled": True, "source": {"given": _source(job)}, "cache_hit": None,
                        "reason": "the saved reference cannot be used (see the problems)"}
            found = job.attempt("baseline.source", lambda: plan_source(
                _source(job), _workload(job, known), _allow(job)), unusable)
            job.add_plan({"baseline": found or unusable})
            return {}
        estimate = None
        if job.model is not None and job.inputs:
            estimate = job.attempt("memory", lambda: self._estimate_plan(job))
        baseline = job.attempt("baseline", lambda: self._cache_plan(job), {}) or {}
        job.add_plan({"baseline": baseline})
        reason = _replay_reason(job, estimate)
        if reason:  # the replay stage plans its memory
            job.add_plan({"baseline": {"mode": "replay", "reason": reason}})
        elif baseline.get("enabled") and baseline.get("cache_hit") is not True and estimate:
            need, free = (int(estimate[k] * 1e6) for k in ("host_need_mb", "host_available_mb"))
            entry = planning.memory_line(job, f"CPU reference in {estimate['dtype']}", need, free)
            job.add_plan({"memory": {"cpu_reference": {**estimate, **entry}}})
        return {}

    def _estimate_plan(self, job: Job) -> dict[str, Any]:
        """The estimate before loading (float32 copy counted); ``auto`` picks the precision here."""
        cfg, model, task, inputs = job.cfg, job.model, job.task, job.inputs
        budget = memory.HostBudget(child_process=_setting(job, "process", "child") == "child",
                                   available=planning.available_host_bytes(),
                                   what=f"{cfg.model.name} at preset {cfg.preset.name}")
        if _setting(job, "reference", "auto") != "auto":
            return memory.estimate_reference(model, task, inputs, job.precision.reference, budget)
        try:
            precision, info = memory.choose_auto_reference(model, task, inputs, budget)
        except InsufficientMemoryError:  # neither fits: the float64 line says so, as a problem
            precision = torch.float64
            info = memory.estimate_reference(model, task, inputs, precision, budget)
        job.precision = replace(job.precision, reference=precision)
        return info

    def _cache_plan(self, job: Job) -> dict[str, Any]:
        weights = job.plan.get("weights") or {}
        plan: dict[str, Any] = {"enabled": True, "precision": dtype_name(job.precision.reference),
                                "process": _setting(job, "process", "child")}
        if weights.get("action") == "download":
            return {**plan, "cache_hit": None,
                    "reason": "the weights are not here yet, so the cache key is unknown"}
        identity = {"kind": "random-init", "init_seed": weights.get("init_seed")}
        if weights.get("action") == "load":
            identity = {"kind": "loaded", "digest": weights.get("digest"),
                        "source": weights.get("path")}
        query = _query(job, identity)
        return {**plan, "cache_key": query.key, "path": str(query.store.entry(query.key)),
                "cache_hit": query.cached()}

    def _guard(self, job: Job) -> tuple[ReferenceQuery, dict[str, Any]]:
        """The memory check before the reference; ``auto`` also picks the precision (and query)."""
        query = _query(job, job.weights)
        if _setting(job, "reference", "auto") != "auto":
            return query, memory.guard_reference_memory(query)
        skipped = memory.memory_check_skipped(query)
        if skipped:
            return query, {"skipped": skipped, "choice": f"auto: {dtype_name(query.precision)}"}
        precision, info = memory.choose_auto_reference(query.module, query.task, query.inputs,
                                                       memory.job_budget(query))
        job.precision = replace(job.precision, reference=precision)
        return (query if precision == query.precision else _query(job, job.weights)), info

    def _fall_back(self, job: Job, refusal: InsufficientMemoryError) -> dict[str, Any]:
        """``auto``: the replay in place of a whole-model reference that does not fit."""
        try:
            replay_patterns(job.cfg)
        except ConfigError as none:
            raise InsufficientMemoryError(f"{refusal} (baseline.reference_mode=auto found no "
                                          f"replay reference either: {none})") from refusal
        return _replay(job, f"auto: the whole-model reference does not fit, so each module is "
                            f"replayed alone -- {refusal}")

    def run(self, job: Job) -> dict[str, Any]:
        """Get the reference (saved run, cache or child process), or prepare the replay; only
        patches declared ``reference: true`` apply to a computed one."""
        if _source(job):
            job.reference = reference_from_source(_source(job), _workload(job, job.weights),
                                                  _allow(job))
            precision = job.reference.info["precision"]
            return {"baseline": job.reference.info, "job": {"reference_dtype": precision}}
        if job.cfg.baseline.enabled and _setting(job, "reference_mode", "auto") == "replay":
            return _replay(job, WANTED)
        child = _setting(job, "process", "child") == "child"
        patches = job.cfg.model.get("patches")
        declared = reference_patches(patches)
        with patches_applied(None if child else declared, job.model, "cpu") as applied:
            where = "in the reference process (declared reference: true)"
            if child:
                applied = [{"name": spec["name"], "applied": where} for spec in declared]
            ran = (applied or UNPATCHED) if patches else applied
            section: dict[str, Any] = {"patches": {"reference": ran}}
            job.record(section)  # on the record before the (possibly long) computation
            if not job.cfg.baseline.enabled:
                job.metrics["accuracy"] = {"skipped": "no CPU reference (baseline.enabled=false): "
                                                      "performance-only run"}
                return {**section, "baseline": {"skipped": PERFORMANCE_ONLY},
                        "metrics": dict(job.metrics)}
            try:
                query, checked = self._guard(job)  # refuse before a host OOM kill
            except InsufficientMemoryError as refusal:
                if not _falls_back(job):
                    raise
                return {**section, **self._fall_back(job, refusal)}
            job.record({"resources": {"reference": checked}})
            job.reference = get_or_compute(query)
        return {**section, "resources": {"reference": checked}, "baseline": job.reference.info,
                "job": {"reference_dtype": job.reference.info["precision"]}}
