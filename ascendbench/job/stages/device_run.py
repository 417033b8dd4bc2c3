"""The device run: the model placed on the device in the job's dtype, timed, its outputs kept."""

from __future__ import annotations

import logging
from typing import Any

from ascendbench.bench import MemoryDelta, tensor_bytes_mb
from ascendbench.bench.measure import Workload, attach_phase_timer, measure
from ascendbench.job.job import Job
from ascendbench.job.planning import free_device_bytes, memory_line
from ascendbench.job.resources import run_memory
from ascendbench.job.stages.base import Stage
from ascendbench.patches import patches_applied
from ascendbench.tasks import move_inputs, place

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
        return {}

    def _memory_plan(self, job: Job) -> dict[str, Any]:
        need = run_memory(job.model, job.task, job.inputs, job.precision.dtype)
        return memory_line(job, f"device run on {job.adapter.name} in {job.precision.name}", need,
                           free_device_bytes(job.adapter))

    def run(self, job: Job) -> dict[str, Any]:
        """Run and time the task on the device; the cold call's outputs are kept (on the CPU)."""
        adapter, dtype = job.adapter, job.precision.dtype
        with patches_applied(job.cfg.model.get("patches"), job.model, adapter.name) as applied:
            job.record({"patches": {"device": applied}})
            log.info("device run on %s in %s ...", adapter.torch_device, job.precision.name)
            with MemoryDelta(adapter) as placement:
                job.model = place(job.task, job.model, adapter.torch_device, dtype)
            moved = move_inputs(job.inputs, adapter.torch_device, dtype)
            bench_cfg = job.cfg.bench
            timer = attach_phase_timer(job.task, job.model, adapter) if bench_cfg.enabled and bench_cfg.phases else None
            workload = Workload(job.precision.name, job.task.items_per_call(job.inputs), job.task.unit, timer)
            result, bench = measure(lambda: job.task.run(job.model, moved), adapter, bench_cfg, workload)
        bench["placement"] = {**placement.to_dict(), "module_mb": tensor_bytes_mb(job.model)}
        job.outputs = {k: v.detach().to("cpu") for k, v in result.first_outputs.items()}
        return {"patches": {"device": applied}, "bench": bench}
