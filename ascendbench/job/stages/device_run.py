"""The device run: the model placed on the device in the job's dtype, timed, its outputs kept."""

from __future__ import annotations

import logging
from typing import Any

from ascendbench.bench import MemoryDelta, tensor_bytes_mb
from ascendbench.bench.history import run_history
from ascendbench.bench.measure import Workload, attach_phase_timer, measure
from ascendbench.graph import compile_model, first_call
from ascendbench.job import ab
from ascendbench.job.distributed import run as distributed  # the module: its ranks import these stages
from ascendbench.job.distributed.plan import ranks_plan
from ascendbench.job.distributed.settings import parallel_settings
from ascendbench.job.job import Job
from ascendbench.job.pipeline_options import PipelineState, pipeline_options
from ascendbench.job.placement import PlacementInputs, capture_warnings, placement_check
from ascendbench.job.planning import free_device_bytes, memory_line
from ascendbench.job.profiling import ProfileRun, ProfileSettings, profile_calls
from ascendbench.job.resources import run_memory
from ascendbench.job.stages.base import Stage
from ascendbench.patches import patches_applied
from ascendbench.tasks import move_inputs, place
from ascendbench.tasks.inputs import summarize

log = logging.getLogger(__name__)


class DeviceRunStage(Stage):
    """Place, cold call, warm-up, timed calls, FLOPs (:mod:`ascendbench.bench`), with the model's patches."""

    name, label = "device_run", "the device run"

    def plan(self, job: Job) -> dict[str, Any]:
        """Parameters and activation peak of the run against the device's free memory."""
        if job.model is None or not job.inputs or job.adapter is None:
            job.add_plan({"memory": {"device_run": {"unavailable": "no model, inputs or device to size the run with"}}})
            return {}
        job.add_plan({"memory": {"device_run": job.attempt("memory", lambda: self._memory_plan(job))}})
        job.attempt("bench.ab", lambda: ab.plan_check(job))  # bench.ab=unpatched: some patch must apply here
        return {}

    def _memory_plan(self, job: Job) -> dict[str, Any]:
        need = run_memory(job.model, job.task, job.inputs, job.precision.dtype)
        if (ranks := parallel_settings(job.cfg.device, job.adapter.name)).multi:  # memory per rank
            distributed.check_mode(ranks, job.model, job.adapter.name)
            return ranks_plan(job, ranks, need, free_device_bytes(job.adapter, job.cfg))
        return memory_line(job, f"device run on {job.adapter.name} in {job.precision.name}", need,
                           free_device_bytes(job.adapter, job.cfg))

    def run(self, job: Job) -> dict[str, Any]:
        """Run and time the task on the device; the cold call's outputs are kept (on the CPU). Then check that
        the model and its outputs are on the device (and which operators fell back to the CPU), record the
        pipeline options in force (``pipeline``), and, with ``profile.enabled``, profile a few more calls."""
        adapter = job.adapter
        if (ranks := parallel_settings(job.cfg.device, adapter.name)).multi:  # device.world_size > 1
            return distributed.run_distributed(job, ranks)
        with patches_applied(job.cfg.model.get("patches"), job.model, adapter.name, job.precision.name) as applied:
            ab.check_applied(job, applied)  # bench.ab=unpatched: some patch must apply here
            job.record({"patches": {"device": applied}})
            log.info("device run on %s in %s ...", adapter.torch_device, job.precision.name)
            with MemoryDelta(adapter) as placement, capture_warnings() as caught:
                call, result, bench = _place_and_measure(job)
            job.placement = placement_check(PlacementInputs(
                model=job.model, outputs=result.first_outputs, device=adapter.torch_device,
                offloaded=offloaded(job.task), messages=caught.messages, device_type=adapter.name))
            section = {"patches": {"device": applied}, "placement_check": job.placement,
                       "pipeline": pipeline_options(PipelineState(job.task, job.model, applied))}
            if job.cfg.profile.enabled:
                section["profile"] = _profile(job, call, bench)
        bench["placement"] = {**placement.to_dict(), "module_mb": tensor_bytes_mb(job.model)}
        if ab.wanted(job):  # the patches have been restored: the same call, unpatched against patched
            section["ab"] = ab.run_ab(job, call)
        job.outputs = {k: v.detach().to("cpu") for k, v in result.first_outputs.items()}
        return {**section, "bench": bench, "outputs": summarize(job.outputs)}


def _place_and_measure(job: Job) -> tuple[Any, Any, dict[str, Any]]:
    """The model and inputs on the device in the job's dtype, then :func:`measure`: (call, result, bench)."""
    adapter, bench_cfg = job.adapter, job.cfg.bench
    job.model = place(job.task, job.model, adapter.torch_device, job.precision.dtype)
    moved = move_inputs(job.inputs, adapter.torch_device, job.precision.dtype)
    timer = attach_phase_timer(job.task, job.model, adapter) if bench_cfg.enabled and bench_cfg.phases else None
    workload = Workload(job.precision.name, job.task.items_per_call(job.inputs), job.task.unit, timer,
                        history=run_history(job.cfg, adapter, job.precision.name))

    def call() -> Any:
        return job.task.run(job.model, moved)

    compiled = compile_model(job.model, adapter.name, job.cfg.device)  # device.compile: None when eager
    if compiled is not None:  # compilation is its own phase, before the cold call
        compiled["first_call_ms"] = first_call(call, adapter)
    result, bench = measure(call, adapter, bench_cfg, workload)
    if compiled is not None:
        compiled["compile_ms"] = compiled["first_call_ms"] - bench["latency"]["median_ms"]
        bench["compile"] = compiled
    return call, result, bench


def offloaded(task: Any) -> bool:
    """True when the task keeps parameters on the host on purpose (``cpu_offload``): not a placement fault."""
    return bool(getattr(task, "cpu_offload", False))


def _profile(job: Job, call: Any, bench: dict[str, Any]) -> dict[str, Any]:
    """``profile.calls`` more calls under the profiler (after the timed loop): the record's ``profile``."""
    settings = ProfileSettings(int(job.cfg.profile.calls), int(job.cfg.profile.top), bool(job.cfg.profile.trace))
    log.info("profiling %d more call(s) under torch.profiler ...", settings.calls)
    median = ((bench.get("latency") or {}).get("median_ms"))
    return profile_calls(ProfileRun(call, job.adapter, settings, job.dir, median))
