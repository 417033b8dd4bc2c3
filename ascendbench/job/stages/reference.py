"""The CPU reference: from the baseline cache, or computed once in a clean child process; or, with
``baseline.source``, a saved run's outputs (:mod:`ascendbench.baseline.source`), and then nothing is computed.

``baseline.reference=auto`` picks float64 whatever the device dtype (so a dtype sweep shares one reference)
whenever the bounded float64 reference fits in host memory, and float32 only when it does not; the record's
``resources.reference`` holds the reason and both estimates. The reference runs the model's own code:
``model.patches`` apply to the device run only, except entries declared ``reference: true``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from omegaconf import OmegaConf

from ascendbench.baseline import ReferenceQuery, get_or_compute
from ascendbench.baseline.child import reference_patches
from ascendbench.baseline.memory import (
    HostBudget,
    choose_auto_reference,
    estimate_reference,
    guard_reference_memory,
    job_budget,
    memory_check_skipped,
)
from ascendbench.baseline.source import JobWorkload, plan_source, reference_from_source, weights_identity
from ascendbench.errors import InsufficientMemoryError
from ascendbench.job.job import Job
from ascendbench.job.planning import free_host_bytes, memory_line
from ascendbench.job.stages.base import Stage
from ascendbench.job.stages.replay_reference import (
    WANTED,
    fall_back,
    falls_back,
    plan_section,
    reference_mode,
    replay_reference,
)
from ascendbench.patches.registry import patches_applied
from ascendbench.precision import dtype_name

PERFORMANCE_ONLY = "baseline.enabled=false (performance-only run)"
UNPATCHED = [{"skipped": "the CPU reference runs the model's own (upstream) code; model.patches apply to the device "
                         "run only (an entry declared `reference: true` would apply to the reference too)"}]


def _query(job: Job, weights: dict[str, Any]) -> ReferenceQuery:
    return ReferenceQuery(cfg=job.cfg, task=job.task, inputs=job.inputs or {}, precision=job.precision.reference,
                          weights=weights, inputs_info=job.inputs_info, module=job.model, log_dir=job.dir)


def _auto(job: Job) -> bool:
    return str(job.cfg.baseline.get("reference", "auto")) == "auto"


def _child(job: Job) -> bool:
    return str(job.cfg.baseline.get("process", "child")) == "child"


def _source(job: Job) -> str | None:
    """``baseline.source`` when a reference is wanted at all (``baseline.enabled``), else ``None``."""
    source = job.cfg.baseline.get("source")
    return str(source) if source and job.cfg.baseline.enabled else None


def _workload(job: Job, weights: dict[str, Any] | None) -> dict[str, Any]:
    """This job's workload fields for the check of a saved reference (``None`` where not known yet)."""
    cfg = job.cfg
    sizes = job.task.sizes(cfg.preset) if job.task is not None else None
    inputs = {name: info.get("sha256") for name, info in job.inputs_info.items()} or None
    return JobWorkload(model=str(cfg.model.name), task=OmegaConf.select(cfg, "model.task._target_"), sizes=sizes,
                       seed=int(cfg.seed), inputs_sha256=inputs, weights_digest=weights_identity(weights)).fields()


def _allow(job: Job) -> list[str]:
    return [str(name) for name in job.cfg.baseline.get("source_allow") or []]


def _use(job: Job, precision: torch.dtype) -> None:
    if precision != job.precision.reference:
        job.precision = replace(job.precision, reference=precision)


class ReferenceStage(Stage):
    """The outputs the device run is judged against (``baseline.*``); a reference that would not fit in host
    memory is refused before anything is allocated."""

    name, label = "reference", "the CPU reference"

    def plan(self, job: Job) -> dict[str, Any]:
        """Reference precision, cache key and hit, and the host memory a computation would need."""
        if job.precision is None:
            job.add_plan({"baseline": {"enabled": False, "reason": "not planned: the device could not be set up"}})
            return {}
        if job.precision.reference is None:
            job.add_plan({"baseline": {"enabled": False, "reason": PERFORMANCE_ONLY}})
            return {}
        if _source(job):
            self._source_plan(job)
            return {}
        estimate = None
        if job.model is not None and job.inputs:
            estimate = job.attempt("memory", lambda: self._estimate_plan(job))
        baseline = job.attempt("baseline", lambda: self._cache_plan(job), {}) or {}
        job.add_plan({"baseline": baseline})
        if plan_section(job, estimate):  # the replay reference: its own memory line
            return {}
        if baseline.get("enabled") and baseline.get("cache_hit") is not True and estimate:
            need, free = int(estimate["host_need_mb"] * 1e6), int(estimate["host_available_mb"] * 1e6)
            entry = memory_line(job, f"CPU reference in {estimate['dtype']}", need, free)
            job.add_plan({"memory": {"cpu_reference": {**estimate, **entry}}})
        return {}

    def _source_plan(self, job: Job) -> None:
        """Where the saved reference comes from and its workload check (a mismatch is a problem of the plan)."""
        weights = job.plan.get("weights") or {}
        known = weights if weights.get("action") in ("load", "random-init") else None
        unusable = {"enabled": True, "source": {"given": _source(job)}, "cache_hit": None,
                    "reason": "the saved reference cannot be used (see the problems)"}
        job.add_plan({"baseline": job.attempt("baseline.source", lambda: plan_source(
            _source(job), _workload(job, known), _allow(job)), unusable) or unusable})

    def _estimate_plan(self, job: Job) -> dict[str, Any]:
        """The reference's estimate before anything is loaded (the job's own float32 copy counted); under
        ``auto`` the precision is chosen here, as the real job will."""
        budget = HostBudget(child_process=_child(job), available=free_host_bytes(),
                            what=f"{job.cfg.model.name} at preset {job.cfg.preset.name}")
        if not _auto(job):
            return estimate_reference(job.model, job.task, job.inputs, job.precision.reference, budget)
        try:
            precision, info = choose_auto_reference(job.model, job.task, job.inputs, budget)
        except InsufficientMemoryError:  # neither fits: the float64 line says so, as a problem of the plan
            precision, info = torch.float64, estimate_reference(job.model, job.task, job.inputs, torch.float64, budget)
        _use(job, precision)
        return info

    def _cache_plan(self, job: Job) -> dict[str, Any]:
        precision = job.precision.reference
        weights = job.plan.get("weights") or {}
        plan: dict[str, Any] = {"enabled": True, "precision": dtype_name(precision),
                                "process": str(job.cfg.baseline.get("process", "child"))}
        if weights.get("action") == "download":
            return {**plan, "cache_hit": None, "reason": "the weights are not here yet, so the cache key is unknown"}
        loaded = weights.get("action") == "load"
        identity = ({"kind": "loaded", "digest": weights.get("digest"), "source": weights.get("path")} if loaded
                    else {"kind": "random-init", "init_seed": weights.get("init_seed")})
        query = _query(job, identity)
        return {**plan, "cache_key": query.key, "path": str(query.store.entry(query.key)), "cache_hit": query.cached()}

    def _guard(self, job: Job, query: ReferenceQuery) -> tuple[ReferenceQuery, dict[str, Any]]:
        """The memory check before the reference (refuses what does not fit); under ``auto`` it also chooses
        the precision, which may give another query."""
        if not _auto(job):
            return query, guard_reference_memory(query)
        skipped = memory_check_skipped(query)
        if skipped:
            return query, {"skipped": skipped, "choice": f"auto: {dtype_name(query.precision)}"}
        precision, info = choose_auto_reference(query.module, query.task, query.inputs, job_budget(query))
        if precision == query.precision:
            return query, info
        _use(job, precision)
        return _query(job, job.weights), info

    def _patches(self, job: Job) -> list[Any]:
        declared = reference_patches(job.cfg.model.get("patches"))
        if not _child(job) or not declared:
            return declared
        return [{"name": spec["name"], "applied": "in the reference process (declared reference: true)"}
                for spec in declared]

    def run(self, job: Job) -> dict[str, Any]:
        """Get the reference (saved run, cache or child process); only patches declared ``reference: true``
        apply to a computed one."""
        if _source(job):
            job.reference = reference_from_source(_source(job), _workload(job, job.weights), _allow(job))
            return {"baseline": job.reference.info, "job": {"reference_dtype": job.reference.info["precision"]}}
        if job.cfg.baseline.enabled and reference_mode(job) == "replay":
            return replay_reference(job, WANTED)
        patches = job.cfg.model.get("patches")
        declared = reference_patches(patches) if not _child(job) else None
        with patches_applied(declared, job.model, "cpu") as applied:
            ran = applied if not _child(job) else self._patches(job)
            section: dict[str, Any] = {"patches": {"reference": (ran or UNPATCHED) if patches else ran}}
            job.record(section)  # on the record before the (possibly long) computation
            if not job.cfg.baseline.enabled:
                job.metrics["accuracy"] = {"skipped": "no CPU reference (baseline.enabled=false): performance-only run"}
                return {**section, "baseline": {"skipped": PERFORMANCE_ONLY}, "metrics": dict(job.metrics)}
            try:
                query, checked = self._guard(job, _query(job, job.weights))  # refuse before a host OOM kill
            except InsufficientMemoryError as refusal:
                if not falls_back(job):
                    raise
                return {**section, **fall_back(job, refusal)}
            resources = {"reference": checked}
            job.record({"resources": resources})
            job.reference = get_or_compute(query)
        return {**section, "resources": resources, "baseline": job.reference.info,
                "job": {"reference_dtype": job.reference.info["precision"]}}
