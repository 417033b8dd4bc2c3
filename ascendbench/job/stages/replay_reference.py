"""The replay reference inside the job stages: chosen at the reference stage, run at the compare stage.

``baseline.reference_mode=replay`` always replays; ``auto`` (the default) replays when the whole-model
reference would be refused for host memory, with that refusal as the record's reason. See
:mod:`ascendbench.baseline.replay`.
"""

from __future__ import annotations

from typing import Any

from ascendbench.baseline.replay import prepare_replay, run_replay
from ascendbench.baseline.replay_modules import replay_patterns
from ascendbench.compare.csvfile import write_compare_csv
from ascendbench.errors import ConfigError, InsufficientMemoryError
from ascendbench.metrics.verdict import worst
from ascendbench.models.memory import DEFAULT_HEADROOM

WANTED = "baseline.reference_mode=replay"


def reference_mode(job: Any) -> str:
    """``baseline.reference_mode`` (``auto`` when not set)."""
    return str(job.cfg.baseline.get("reference_mode") or "auto")


def falls_back(job: Any) -> bool:
    """``auto`` replays what does not fit whole only when the reference precision is left to ascendbench too
    (``baseline.reference=auto``): a forced float32/float64 whole-model reference is refused as it was."""
    return reference_mode(job) == "auto" and str(job.cfg.baseline.get("reference", "auto")) == "auto"


def replay_reference(job: Any, reason: str) -> dict[str, Any]:
    """Prepare the replay (modules, weights) instead of a whole-model reference; the reference stage's section."""
    job.replay = prepare_replay(job, reason)
    job.reference = None
    precision = job.replay.settings["precision"]
    return {"baseline": {**job.replay.summary(), "precision": precision},
            "job": {"reference_dtype": f"{precision} (replay)"}}


def fall_back(job: Any, refusal: Exception) -> dict[str, Any]:
    """``auto``: the replay in place of a whole-model reference that does not fit (the refusal is the reason).

    Raises:
        InsufficientMemoryError: the refusal, when the replay has no modules to re-run either (said why).
    """
    try:
        replay_patterns(job.cfg)
    except ConfigError as none:
        raise InsufficientMemoryError(f"{refusal} (baseline.reference_mode=auto found no replay reference either: "
                                      f"{none})") from refusal
    return replay_reference(job, f"auto: the whole-model reference does not fit, so each module is replayed "
                                 f"alone -- {refusal}")


def compare_replay(job: Any) -> dict[str, Any]:
    """The compare stage of a replay job: record, replay, judge, compare.csv."""
    done = run_replay(job, job.replay)
    if job.cfg.compare.get("verdict", True):
        job.metrics = {**job.metrics, **done["entries"]}
    job.verdict = worst(m.get("verdict") for m in job.metrics.values() if isinstance(m, dict))
    job.artifacts.update(done["artifacts"])
    if job.cfg.compare.get("csv", True):
        job.artifacts["compare_csv"] = job.relative(write_compare_csv(job.dir / "compare.csv", done["rows"]))
    return {"compare": done["info"], "metrics": job.metrics, "verdict": job.verdict, "artifacts": job.artifacts,
            "job": {"reference_dtype": f"{done['info']['precision']} (replay)"}}


def _held_by_job(job: Any) -> int:
    """Host bytes the job itself holds while the replay process runs: its model's parameters in the device dtype
    when the device is the CPU (on an accelerator they are on the card)."""
    if job.adapter is None or job.adapter.name != "cpu" or job.model is None:
        return 0
    from ascendbench.models.memory import tensor_count

    return tensor_count(job.model) * job.precision.dtype.itemsize


def _this_host(plan: dict[str, Any]) -> dict[str, Any]:
    """Where the plan is for a declared machine (``dry_run_target``): whether the replay would fit this host too."""
    from ascendbench.models.memory import measured_host_bytes

    here, held = measured_host_bytes(), int(plan.get("job_holds_mb", 0) * 1e6)
    here -= held if held <= DEFAULT_HEADROOM * here else 0  # a model this host cannot hold: the process alone
    return {"this_host_available_mb": here / 1e6,
            "fits_this_host": plan["reference_process_mb"] * 1e6 <= plan["headroom"] * here}


def plan_section(job: Any, estimate: dict[str, Any] | None) -> bool:
    """The dry run: whether the job would replay (``replay``, or ``auto`` with a whole-model reference that does
    not fit) and, if so, the replay's memory plan (a plan that does not fit is a problem). ``True``: replay."""
    from ascendbench.baseline.replay_plan import plan_replay
    from ascendbench.job.planning import free_host_bytes

    mode = reference_mode(job)
    if mode == "whole" or (mode == "auto" and (not falls_back(job) or not estimate or estimate.get("fits", True))):
        return False
    if mode == "auto":
        need, free = estimate.get("host_need_mb", 0) / 1e3, estimate.get("host_available_mb", 0) / 1e3
        reason = (f"auto: the whole-model {estimate.get('dtype')} reference needs about {need:.1f} GB of the "
                  f"{free:.1f} GB available, so each module is replayed alone")
    else:
        reason = WANTED
    held, host = _held_by_job(job), free_host_bytes()
    alone = held > DEFAULT_HEADROOM * host  # the device run's own line already says the model does not fit
    plan = job.attempt("replay reference", lambda: plan_replay(job.model, job.task, job.inputs or {}, job.cfg,
                                                               dtype=job.precision.dtype,
                                                               available=host - (0 if alone else held)))
    if plan and "unavailable" not in plan and held and not alone:
        plan["job_holds_mb"] = held / 1e6
    elif plan and "unavailable" not in plan and alone:
        plan["planned_alone"] = (f"the job's own model ({held / 1e9:.1f} GB on the CPU) does not fit here (the device "
                                 "run's line), so the replay process is planned on its own")
    if not plan or "unavailable" in plan:
        job.add_plan({"memory": {"replay_reference": plan or {"unavailable": "see the problems"}}})
        return mode == "replay"
    if job.plan.get("target"):
        plan.update(_this_host(plan))
    job.add_plan({"baseline": {"mode": "replay", "reason": reason, "precision": plan["precision"]},
                  "memory": {"replay_reference": plan}})
    if not plan["fits"]:
        job.problems.append(f"the replay reference needs about {plan['reference_process_mb'] / 1e3:.1f} GB (largest "
                            f"module {plan['largest_module']['name']}), more than {plan['headroom']:.0%} of the "
                            f"{plan['host_available_mb'] / 1e3:.1f} GB available: baseline.replay.precision=auto "
                            "or float32 (half the tensors), smaller modules in baseline.replay.layers, or lower "
                            "preset sizes")
    return True
