"""The replay reference (``reference_mode=replay``): each chosen module re-run alone on the CPU."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ascendbench.baseline import replay_modules
from ascendbench.baseline.process import run_child
from ascendbench.baseline.replay_memory import memory_check, recorded_plan
from ascendbench.compare.capture import CallRecorder
from ascendbench.compare.select import named_modules
from ascendbench.errors import BaselineError
from ascendbench.fileio import write_atomic
from ascendbench.metrics.verdict import judge, worst
from ascendbench.patches.registry import patches_applied
from ascendbench.precision import dtype_name
from ascendbench.tasks.inputs import move_inputs, place

log = logging.getLogger(__name__)

UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8,
                 "float64": 2.0 ** -53}
RULE_SOURCE = ("unit roundoff u of the device dtype x baseline.replay.margin: the rounding error "
               "of a length-n inner product grows like sqrt(n) u in practice (Higham & Mary 2019, "
               "SIAM J. Sci. Comput. 41(5)); a margin of 32 = sqrt(1024) per module")
LOG_NAME = "replay_child.log"
ERRORS = ("local_rel_err", "max_abs_err", "cosine")


@dataclass
class ReplayPlan:
    """What the reference stage decided (modules, weights, why), and the replay stage's rows."""

    reason: str
    patterns: list[str]
    specs: list[replay_modules.ModuleSpec]
    folder: Path
    settings: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The record's ``baseline`` section of a replay reference."""
        modules = [{"name": s.name, "num_params": s.num_params, "weights": s.weights, "why": s.why}
                   for s in self.specs]
        return {"mode": "replay", "reason": self.reason, "patterns": self.patterns,
                "modules": modules, **self.settings}


def prepare_replay(job: Any, reason: str) -> ReplayPlan:
    """Choose the modules and export what the checkpoint cannot serve (the job's float32 model)."""
    patterns = replay_modules.replay_patterns(job.cfg)
    specs = replay_modules.module_specs(job.model, patterns)
    folder = job.dir / "replay"
    replay_modules.prepare_weights(job.model, specs, job.weights, folder / "weights")
    return ReplayPlan(reason, patterns, specs, folder, replay_modules.replay_settings(job.cfg))


def record_calls(job: Any, plan: ReplayPlan) -> CallRecorder:
    """One more run on the device (untimed, device patches on) recording the sampled calls."""
    adapter, task, settings = job.adapter, job.task, plan.settings
    module = place(task, job.model, adapter.torch_device, job.precision.dtype)
    moved = move_inputs(job.inputs, adapter.torch_device, job.precision.dtype)
    named = named_modules(module)
    log.info("replay capture run on %s (%d modules, calls %s) ...", adapter.torch_device,
             len(plan.specs), settings["calls"])
    with patches_applied(job.cfg.model.get("patches"), module, adapter.name, job.precision.name):
        # hooked after the patches: what a patch changes in a module's output is recorded
        hooked = {s.name: named[s.name] for s in plan.specs}
        cap = int(settings["max_capture_mb"] * (1 << 20))
        recorder = CallRecorder(hooked, settings["calls"], cap, spill=plan.folder / "calls")
        try:
            task.run(module, moved)
            adapter.synchronize()
        finally:
            recorder.close()
    return recorder


def _results(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BaselineError(f"the replay results {path} cannot be read ({exc}); run the job "
                            "again") from exc
    modules = data.get("modules") if isinstance(data, dict) else None
    if not isinstance(modules, list) or not all(
            isinstance(m, dict) and isinstance(m.get("module"), str) for m in modules):
        raise BaselineError(f"the replay results {path} are not a list of modules; run the job "
                            "again")
    return data


def judge_rows(results: list[dict[str, Any]], order: list[str],
               rule: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    """Rows in the device's completion order, each judged; the first divergent one (or ``None``)."""
    rows = []
    for module in results:
        name = module["module"]
        if "error" in module:
            rows.append({"name": name, "kind": "replay", "result": "", "message": module["error"]})
        for row in module.get("rows", []):
            entry = {"name": row["output"], "kind": "replay", "module": name, "key": row.get("key")}
            if "error" in row:
                rows.append({**entry, "result": "", "message": row["error"]})
                continue
            decided = judge(row["local_rel_err"], rule)
            broken = f"local rel err {row['local_rel_err']:.3g} {decided['rule']} broken"
            rows.append({**entry, **{k: row[k] for k in (*ERRORS, "shape")},
                         "result": decided["verdict"], "threshold": decided["threshold"],
                         "rule": decided["rule"],
                         "message": "" if decided["verdict"] == "PASS" else broken})
    position = {key: i for i, key in enumerate(order)}
    rows.sort(key=lambda r: (position.get(r.get("key"), len(order)), str(r["name"])))
    first = next((r for r in rows if r.get("result") == "FAIL"), None)
    return rows, first and {"module": first["module"], "call": first["key"],
                            "output": first["name"], "local_rel_err": first["local_rel_err"],
                            "rule": first["rule"]}


def _replay_process(job: Any, plan: ReplayPlan,
                    manifest: dict[str, Any]) -> tuple[dict, dict, list]:
    calls_dir, results_path = plan.folder / "calls", plan.folder / "results.json"
    setting = plan.settings["precision"]
    memory = recorded_plan(plan.specs, str(calls_dir), manifest["calls"], setting)
    request = {"modules": [asdict(s) for s in plan.specs], "manifest": manifest,
               "calls_dir": str(calls_dir), "results": str(results_path),
               "precision": memory["precision"]}
    label = f"replay reference (cpu {memory['precision']})"
    ran = run_child("replay", request, job.dir / LOG_NAME, label)
    results = _results(results_path)
    check = memory_check(memory, results["modules"])
    imports = results.get("imports_peak_rss_mb")  # the process resets its peak per module
    peaks = [r["measured_peak_rss_mb"] for r in check.get("modules", [])]
    if isinstance(imports, (int, float)) and not isinstance(imports, bool):
        peaks.append(float(imports))
    ran["peak_rss_mb"] = max(peaks) if peaks else None
    if check["under_estimated"]:
        job.warn(f"replay reference: the measured peak of {', '.join(check['under_estimated'])} "
                 f"is above {check['rule']} (compare.memory.check): the plan under-estimates, so a "
                 "larger preset may not fit")
    return {**memory, "check": check}, ran, results["modules"]


def run_replay(job: Any, plan: ReplayPlan) -> dict[str, Any]:
    """Record, replay, judge (the rows kept on ``plan``); the replay stage's record section."""
    recorder = record_calls(job, plan)  # each call on disk as soon as it finished
    manifest = recorder.manifest()
    calls = manifest["calls"]
    write_atomic(plan.folder / "manifest.json", json.dumps(manifest))
    memory, ran, results = _replay_process(job, plan, manifest)
    device = dtype_name(job.precision.dtype)
    rule = {"max": plan.settings["margin"] * UNIT_ROUNDOFF[device],
            "source": f"{RULE_SOURCE}; {device}: u = {UNIT_ROUNDOFF[device]:.3g}"}
    plan.rows, first = judge_rows(results, [c["key"] for c in calls], rule)
    info = {"mode": "replay", "reason": plan.reason, "modules": len(plan.specs),
            "calls": len(calls), "precision": memory["precision"],
            "precision_choice": memory["choice"], "first_divergent": first, "rule": rule,
            "verdict": worst(r.get("result") or None for r in plan.rows),
            "dropped": manifest["dropped"], "unreplayable": manifest["unreplayable"],
            "recorded_mb": sum(c["nbytes"] for c in calls) / 1e6,
            "job_held_call_mb": recorder.peak_call_bytes / 1e6, "process": ran, "memory": memory,
            "results": {r["name"]: {k: r.get(k) for k in ("module", *ERRORS, "result", "message")}
                        for r in plan.rows}}
    if job.cfg.compare.get("verdict", True):
        entries = {f"replay/{r['name']}/local_rel_err": {
            "value": r["local_rel_err"], "verdict": r["result"], "threshold": r["threshold"],
            "rule": r["rule"], "source": rule["source"], "max_abs_err": r["max_abs_err"],
            "cosine": r["cosine"]} for r in plan.rows if "local_rel_err" in r}
        job.metrics = {**job.metrics, **entries}
    job.verdict = worst(m.get("verdict") for m in job.metrics.values() if isinstance(m, dict))
    job.artifacts.update(replay_calls=job.relative(plan.folder / "calls"),
                         replay_results=job.relative(plan.folder / "results.json"),
                         replay_manifest=job.relative(plan.folder / "manifest.json"))
    return {"compare": info, "metrics": job.metrics, "verdict": job.verdict,
            "artifacts": job.artifacts,
            "job": {"reference_dtype": f"{memory['precision']} (replay)"}}
