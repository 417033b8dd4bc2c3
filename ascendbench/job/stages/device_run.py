"""The device run: the model placed on the device in the job's dtype, timed, its outputs kept; the
``pipeline`` section says which options (VAE slicing/tiling, attention backend) were in force."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from ascendbench.bench.history import run_history
from ascendbench.bench.measure import Workload, attach_phase_timer, measure
from ascendbench.bench.memory import MemoryDelta, tensor_bytes_mb
from ascendbench.graph import compile_model, first_call
from ascendbench.job import ab
from ascendbench.job.distributed import modes
from ascendbench.job.distributed.ranks import run_distributed
from ascendbench.job.job import Job
from ascendbench.job.placement import capture_warnings, placement_check
from ascendbench.job.planning import free_device_bytes, memory_line
from ascendbench.job.profiling import profile_calls
from ascendbench.job.stages.base import Stage
from ascendbench.models.memory import RunMemory, module_components, run_memory
from ascendbench.patches.registry import patches_applied
from ascendbench.tasks.inputs import move_inputs, place, summarize

log = logging.getLogger(__name__)


class DeviceRunStage(Stage):
    """Place, cold call, warm-up, timed calls, FLOPs (:mod:`ascendbench.bench`) with the model's
    patches; then the placement check, pipeline options and any profiled calls."""

    name, label = "device_run", "the device run"

    def plan(self, job: Job) -> dict[str, Any]:
        """Parameters and activation peak of the run (per rank) against the device's free memory."""
        if job.model is None or not job.inputs or job.adapter is None:
            missing = {"unavailable": "no model, inputs or device to size the run with"}
            job.add_plan({"memory": {"device_run": missing}})
            return {}
        job.add_plan({"memory": {"device_run": job.attempt("memory", lambda: _memory_plan(job))}})
        job.attempt("bench.ab", lambda: ab.plan_check(job))  # some patch must apply here
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Run and time the task on the device; the cold call's outputs are kept (on the CPU)."""
        adapter = job.adapter
        if (ranks := modes.parallel_settings(job.cfg.device, adapter.name)).multi:
            return run_distributed(job, ranks)
        patches = job.cfg.model.get("patches")
        with patches_applied(patches, job.model, adapter.name, job.precision.name) as applied:
            ab.check_applied(job, applied)  # bench.ab=unpatched: some patch must apply here
            job.record({"patches": {"device": applied}})
            log.info("device run on %s in %s ...", adapter.torch_device, job.precision.name)
            with MemoryDelta(adapter) as placement, capture_warnings() as messages:
                call, result, bench = _place_and_measure(job)
            job.placement = placement_check(
                job.model, result.first_outputs, adapter.torch_device,
                offloaded=bool(getattr(job.task, "cpu_offload", False)),  # on purpose: no fault
                messages=messages, device_type=adapter.name)
            section = {"patches": {"device": applied}, "placement_check": job.placement,
                       "pipeline": pipeline_options(job.task, job.model, applied)}
            if job.cfg.profile.enabled:  # profile.calls more calls, after the timed loop
                log.info("profiling %d more call(s) ...", job.cfg.profile.calls)
                median = (bench.get("latency") or {}).get("median_ms")
                section["profile"] = profile_calls(call, adapter, job.cfg.profile, job.dir, median)
        bench["placement"] = {**placement.to_dict(), "module_mb": tensor_bytes_mb(job.model)}
        if ab.wanted(job):  # the patches have been restored: the same call, unpatched vs patched
            section["ab"] = ab.run_ab(job, call)
        job.outputs = {k: v.detach().to("cpu") for k, v in result.first_outputs.items()}
        return {**section, "bench": bench, "outputs": summarize(job.outputs)}


def _memory_plan(job: Job) -> dict[str, Any]:
    need = run_memory(job.model, job.task, job.inputs, job.precision.dtype)
    free = free_device_bytes(job.adapter, job.cfg)
    if (ranks := modes.parallel_settings(job.cfg.device, job.adapter.name)).multi:
        modes.check_mode(ranks, job.model, job.adapter.name)
        return _ranks_plan(job, ranks, need, free)
    return memory_line(job, f"device run on {job.adapter.name} in {job.precision.name}", need, free)


def _ranks_plan(job: Job, settings: modes.ParallelSettings, single: RunMemory,
                free: int) -> dict[str, Any]:
    """A multi-card plan: the neediest rank, ``per_rank`` against each card, on CPU ``host``."""
    needs = modes.rank_memory(settings, job.model, single)
    where = f"({settings.mode}) on {job.adapter.name} in {job.precision.name}"
    lines = [memory_line(job, f"rank {r} of {settings.world_size} {where}", need, free)
             for r, need in enumerate(needs)]
    plan = {**max(lines, key=lambda line: line["need_mb"]), **settings.to_dict(), "per_rank": lines}
    if job.adapter.name == "cpu":
        plan["host"] = memory_line(job, f"all {settings.world_size} ranks on the host",
                                   sum(n.total for n in needs), free)
    return plan


def _place_and_measure(job: Job) -> tuple[Any, Any, dict[str, Any]]:
    """The model and inputs on the device in the job's dtype, then :func:`measure`."""
    adapter, bench_cfg = job.adapter, job.cfg.bench
    job.model = place(job.task, job.model, adapter.torch_device, job.precision.dtype)
    moved = move_inputs(job.inputs, adapter.torch_device, job.precision.dtype)
    phases = bench_cfg.enabled and bench_cfg.phases
    timer = attach_phase_timer(job.task, job.model, adapter) if phases else None
    workload = Workload(job.precision.name, job.task.items_per_call(job.inputs), job.task.unit,
                        timer, history=run_history(job.cfg, adapter, job.precision.name))

    def call() -> Any:
        return job.task.run(job.model, moved)

    compiled = compile_model(job.model, adapter.name, job.cfg.device)  # None when eager
    if compiled is not None:  # compilation is its own phase, before the cold call
        compiled["first_call_ms"] = first_call(call, adapter)
    result, bench = measure(call, adapter, bench_cfg, workload)
    if compiled is not None:
        compiled["compile_ms"] = compiled["first_call_ms"] - bench["latency"]["median_ms"]
        bench["compile"] = compiled
    return call, result, bench


def pipeline_options(task: Any, model: Any,
                     patches: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The ``pipeline`` section for the task, the placed model and the patch entries applied."""
    applied = task.applied_options()
    components = getattr(model, "components", None)
    is_vae = hasattr(model, "use_slicing") or hasattr(model, "use_tiling")
    vae = components.get("vae") if isinstance(components, dict) else model if is_vae else None
    return {"cpu_offload": bool(applied.get("cpu_offload", False)),
            "vae_slicing": _switch(vae, "use_slicing"), "vae_tiling": _switch(vae, "use_tiling"),
            "vae_tiling_options": dict((applied.get("vae") or {}).get("tiling") or {}),
            **attention(model),
            "patches_applied": [entry["name"] for entry in patches if "skipped" not in entry]}


def _switch(vae: Any, name: str) -> bool | None:
    value = getattr(vae, name, None) if vae is not None else None
    return None if value is None else bool(value)


def attention(model: Any) -> dict[str, Any]:
    """``attention_backend`` (the dispatcher's backend in force: a name, a sorted list, or ``None``)
    and ``attention_processors`` (the processor classes found, sorted)."""
    # deferred: attention_dispatch imports torch_npu, which must see device.env applied first
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry

    processors = [m.processor for root in module_components(model).values() for m in root.modules()
                  if getattr(m, "processor", None) is not None]
    active = _AttentionBackendRegistry.get_active_backend()[0]  # for a processor without its own
    chosen = [p._attention_backend or active for p in processors
              if hasattr(p, "_attention_backend")]
    backends = sorted({str(getattr(backend, "value", backend)) for backend in chosen})
    backend = None if not backends else backends[0] if len(backends) == 1 else backends
    return {"attention_backend": backend,
            "attention_processors": sorted({type(p).__name__ for p in processors})}

