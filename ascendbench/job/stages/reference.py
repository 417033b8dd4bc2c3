"""The CPU reference: from the baseline cache, or computed once in a clean child process."""

from __future__ import annotations

from typing import Any

from ascendbench.baseline import ReferenceQuery, get_or_compute
from ascendbench.job.job import Job
from ascendbench.job.planning import free_host_bytes, memory_line
from ascendbench.job.resources import baseline_host_bytes, guard_reference_memory, run_memory
from ascendbench.job.stages.base import Stage
from ascendbench.patches import patches_applied
from ascendbench.precision import dtype_name

PERFORMANCE_ONLY = "baseline.enabled=false (performance-only run)"
UNPATCHED_CHILD = [{"skipped": "the CPU reference runs the model's own (upstream) code in a clean child "
                               "process; model.patches apply to the device run only"}]


def _query(job: Job, weights: dict[str, Any]) -> ReferenceQuery:
    return ReferenceQuery(job.cfg, job.task, job.inputs or {}, job.precision.reference, weights, job.inputs_info,
                          module=job.model, log_dir=job.dir)


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
        baseline = job.attempt("baseline", lambda: self._cache_plan(job), {}) or {}
        job.add_plan({"baseline": baseline})
        if baseline.get("enabled") and baseline.get("cache_hit") is not True and job.model is not None and job.inputs:
            entry = job.attempt("memory", lambda: self._memory_plan(job))
            job.add_plan({"memory": {"cpu_reference": entry}})
        return {}

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

    def _memory_plan(self, job: Job) -> dict[str, Any]:
        precision = job.precision.reference
        reference = run_memory(job.model, job.task, job.inputs, precision)
        child = str(job.cfg.baseline.get("process", "child")) == "child"
        entry = memory_line(job, f"CPU reference in {dtype_name(precision)}", baseline_host_bytes(reference, child),
                            free_host_bytes())
        return {**entry, **reference.to_dict()}

    def run(self, job: Job) -> dict[str, Any]:
        """Get the reference (cache or child process) with the in-process reference's patches applied."""
        patches = job.cfg.model.get("patches")  # the child process rebuilds the model: no patches there
        in_process = job.cfg.baseline.get("process") == "in-process"
        with patches_applied(patches if in_process else None, job.model, "cpu") as applied:
            section: dict[str, Any] = {"patches": {"reference": (applied or UNPATCHED_CHILD) if patches else applied}}
            job.record(section)  # on the record before the (possibly long) computation
            if not job.cfg.baseline.enabled:
                job.metrics["accuracy"] = {"skipped": "no CPU reference (baseline.enabled=false): performance-only run"}
                return {**section, "baseline": {"skipped": PERFORMANCE_ONLY}, "metrics": dict(job.metrics)}
            query = _query(job, job.weights)
            resources = {"reference": guard_reference_memory(query)}  # refuse before a host OOM kill
            job.record({"resources": resources})
            job.reference = get_or_compute(query)
        return {**section, "resources": resources, "baseline": job.reference.info,
                "job": {"reference_dtype": job.reference.info["precision"]}}
