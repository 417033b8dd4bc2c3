"""The replay reference after the device run (:mod:`ascendbench.baseline.replay`): each recorded
module call re-run alone in a clean CPU process, its local error judged."""

from __future__ import annotations

from typing import Any

from ascendbench.baseline.replay import run_replay
from ascendbench.baseline.replay_memory import plan_replay
from ascendbench.job import planning
from ascendbench.job.job import Job
from ascendbench.job.stages.base import Stage
from ascendbench.models import memory
from ascendbench.models.memory import DEFAULT_HEADROOM, tensor_count


class ReplayReferenceStage(Stage):
    """Record, replay and judge the modules the reference stage chose (nothing otherwise)."""

    name, label = "replay_reference", "the replay reference"

    def plan(self, job: Job) -> dict[str, Any]:
        """The replay process's memory (largest module, recorded calls, imports); a plan that does
        not fit is a problem."""
        if (job.plan.get("baseline") or {}).get("mode") != "replay":
            return {}
        on_cpu = job.adapter is not None and job.adapter.name == "cpu" and job.model is not None
        held = tensor_count(job.model) * job.precision.dtype.itemsize if on_cpu else 0
        host = planning.available_host_bytes()
        alone = held > DEFAULT_HEADROOM * host  # the device run's line says it does not fit
        plan = job.attempt("replay reference", lambda: plan_replay(
            job.model, job.task, job.inputs or {}, job.cfg, dtype=job.precision.dtype,
            available=host - (0 if alone else held)))
        if not plan or "unavailable" in plan:
            entry = plan or {"unavailable": "see the problems"}
            job.add_plan({"memory": {"replay_reference": entry}})
            return {}
        if alone:
            plan["planned_alone"] = (f"the job's own model ({held / 1e9:.1f} GB on the CPU) does "
                                     "not fit here (the device run's line), so the replay process "
                                     "is planned on its own")
        elif held:  # its model stays beside the replay process
            plan["job_holds_mb"] = held / 1e6
        if job.plan.get("target"):  # planned for a declared machine: would it fit this host too?
            here = memory.measured_host_bytes()
            here -= held if held <= DEFAULT_HEADROOM * here else 0  # too big here: process alone
            fits_here = plan["reference_process_mb"] * 1e6 <= plan["headroom"] * here
            plan.update(this_host_available_mb=here / 1e6, fits_this_host=fits_here)
        job.add_plan({"baseline": {"precision": plan["precision"]},
                      "memory": {"replay_reference": plan}})
        if not plan["fits"]:
            job.problems.append(
                f"the replay reference needs about {plan['reference_process_mb'] / 1e3:.1f} GB "
                f"(largest module {plan['largest_module']['name']}), more than "
                f"{plan['headroom']:.0%} of the {plan['host_available_mb'] / 1e3:.1f} GB "
                "available: baseline.replay.precision=auto or float32 (half the tensors), smaller "
                "modules in baseline.replay.layers, or lower preset sizes")
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """The ``compare`` section (local errors, first divergent module), metrics and verdict."""
        return run_replay(job, job.replay) if job.replay is not None else {}
