"""The replay reference (``baseline.reference_mode=replay``): each hooked module re-run alone on the CPU in
float64 on the inputs the device gave it, for models whose whole-model reference does not fit.

msprobe's ``run_ut`` re-runs each dumped *API* on the CPU with its captured inputs; this re-runs each chosen
*module* (a transformer block, a VAE up-block) of a whole model. In a job:

1. reference stage (:func:`prepare_replay`): the modules are chosen (:func:`replay_patterns`) and, for those
   the checkpoint cannot serve, their float32 tensors are exported before the device run casts them;
2. compare stage (:func:`run_replay`): one extra hooked run on the device records the inputs and outputs of a
   bounded sample of calls (:class:`ascendbench.compare.capture.CallRecorder`), then a clean process
   (``python -m ascendbench.baseline.replay_process``, request over a pipe) rebuilds one module at a time and
   reports each call's **local error** (``||dev - ref|| / ||ref||`` given the device's own inputs);
3. each local error is judged by ``baseline.replay.margin`` x the unit roundoff of the device dtype, and the
   **first divergent module** is the first call, in the order the calls finished, whose local error breaks it.

Memory is bounded by the largest module plus one call's tensors: the calls go to disk one file each as they
finish, and the process reads one at a time (:mod:`ascendbench.baseline.replay_memory` plans it, chooses float64
or float32, and checks the measured peak; :mod:`ascendbench.baseline.replay_plan` is the dry run's plan).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendbench.baseline.replay_modules import ModuleSpec, module_specs, prepare_weights, replay_patterns
from ascendbench.compare.capture import CallRecorder
from ascendbench.compare.select import named_modules
from ascendbench.errors import BaselineError, ConfigError
from ascendbench.fileio import atomic_path
from ascendbench.metrics.verdict import judge, worst
from ascendbench.models.memory import DEFAULT_HEADROOM
from ascendbench.patches.registry import patches_applied
from ascendbench.precision import dtype_name
from ascendbench.tasks.inputs import move_inputs, place

log = logging.getLogger(__name__)

UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float64": 2.0 ** -53}
RULE_SOURCE = ("unit roundoff u of the device dtype x baseline.replay.margin: the rounding error of a length-n inner "
               "product grows like sqrt(n) u in practice (Higham & Mary 2019, SIAM J. Sci. Comput. 41(5)); a "
               "margin of 32 = sqrt(1024) per module")
LOG_NAME = "replay_child.log"


@dataclass
class ReplayPlan:
    """What the reference stage decided: the modules, where their weights come from, and why a replay at all."""

    reason: str
    patterns: list[str]
    specs: list[ModuleSpec]
    folder: Path
    settings: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The record's ``baseline`` section of a replay reference."""
        return {"mode": "replay", "reason": self.reason, "patterns": self.patterns,
                "modules": [{"name": s.name, "num_params": s.num_params, "weights": s.weights, "why": s.why}
                            for s in self.specs], **self.settings}


def replay_settings(cfg: Any) -> dict[str, Any]:
    """``baseline.replay`` with its defaults: ``calls``, ``max_capture_mb``, ``margin``."""
    replay = cfg.baseline.get("replay") or {}
    precision = str(replay.get("precision") or "auto")
    if precision not in ("auto", "float64", "float32"):
        raise ConfigError(f"baseline.replay.precision={precision!r} is not allowed; use auto (default: float64 where "
                          "the largest module with its recorded call fits in host memory, else float32), float64 or "
                          "float32 (half the memory)")
    return {"calls": list(replay.get("calls") or ["first", "last"]),
            "max_capture_mb": float(replay.get("max_capture_mb") or 8192),
            "margin": float(replay.get("margin") or 32), "precision": precision}


def prepare_replay(job: Any, reason: str) -> ReplayPlan:
    """Choose the modules and export what the checkpoint cannot serve (the job's float32 model, on the CPU)."""
    patterns = replay_patterns(job.cfg)
    specs = module_specs(job.model, patterns)
    folder = job.dir / "replay"
    prepare_weights(job.model, specs, job.weights, folder / "weights")
    return ReplayPlan(reason, patterns, specs, folder, replay_settings(job.cfg))


def record_calls(job: Any, plan: ReplayPlan) -> CallRecorder:
    """One extra run of the task on the device (untimed, with the device patches) recording the sampled calls."""
    adapter, task = job.adapter, job.task
    module = place(task, job.model, adapter.torch_device, job.precision.dtype)
    moved = move_inputs(job.inputs, adapter.torch_device, job.precision.dtype)
    named = named_modules(module)
    log.info("replay capture run on %s (%d modules, calls %s) ...", adapter.torch_device, len(plan.specs),
             plan.settings["calls"])
    with patches_applied(job.cfg.model.get("patches"), module, adapter.name, job.precision.name):
        # hooked after the patches, so that what a patch changes in a module's output is what is recorded
        recorder = CallRecorder({s.name: named[s.name] for s in plan.specs}, plan.settings["calls"],
                                int(plan.settings["max_capture_mb"] * (1 << 20)), spill=plan.folder / "calls")
        try:
            task.run(module, moved)
            adapter.synchronize()
        finally:
            recorder.close()
    return recorder


def run_child(request: dict[str, Any], log_path: Path) -> dict[str, Any]:
    """Start the replay process, send ``request`` over its standard input, wait (with its progress)."""
    from ascendbench.baseline.process import PARENT_PID_ENV, wait_with_progress

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PYTHONUNBUFFERED": "1",
           PARENT_PID_ENV: str(os.getpid())}
    start = time.perf_counter()
    with open(log_path, "w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "ascendbench.baseline.replay_process"], stdin=subprocess.PIPE,
                                stdout=handle, stderr=subprocess.STDOUT, env=env)
        try:
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it died at once: its exit status and log say why
        ended = wait_with_progress(proc, log_path, f"replay reference (cpu {request['precision']})")
    if ended.code != 0:
        tail = log_path.read_text(errors="replace")[-1500:] if log_path.exists() else ""
        raise BaselineError(f"the replay reference process exited with status {ended.code}; its log is {log_path}. "
                            f"Last lines:\n{tail}")
    return {"wall_s": time.perf_counter() - start, "log": str(log_path),
            "peak_rss_mb": None if ended.peak_rss_bytes is None else ended.peak_rss_bytes / 1e6}


def read_results(path: Path) -> list[dict[str, Any]]:
    """The process's results, checked for shape (they are data)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BaselineError(f"the replay results {path} cannot be read ({exc}); run the job again") from exc
    modules = data.get("modules") if isinstance(data, dict) else None
    if not isinstance(modules, list) or not all(isinstance(m, dict) and isinstance(m.get("module"), str)
                                                for m in modules):
        raise BaselineError(f"the replay results {path} are not a list of modules; run the job again")
    return modules


def measured_peak(path: Path, check: dict[str, Any]) -> float | None:
    """The replay process's peak RSS: the largest of its per-module peaks and its imports' (``VmHWM``). The process
    resets its peak between modules, so the exit's ``ru_maxrss`` no longer holds it (it keeps the job's size at
    the fork)."""
    imports = json.loads(path.read_text()).get("imports_peak_rss_mb")
    peaks = [r["measured_peak_rss_mb"] for r in check.get("modules", [])]
    peaks += [float(imports)] if isinstance(imports, (int, float)) and not isinstance(imports, bool) else []
    return max(peaks) if peaks else None


def local_rule(plan: ReplayPlan, device_dtype: Any) -> dict[str, Any]:
    """The local-error rule of the device dtype."""
    name = dtype_name(device_dtype)
    bound = plan.settings["margin"] * UNIT_ROUNDOFF[name]
    return {"max": bound, "source": f"{RULE_SOURCE}; {name}: u = {UNIT_ROUNDOFF[name]:.3g}"}


def judge_rows(results: list[dict[str, Any]], order: list[str], rule: dict[str, Any]) -> tuple[list[dict], Any]:
    """Rows in the device's completion order, each judged; the first divergent one (or ``None``)."""
    rows = []
    for module in results:
        if "error" in module:
            rows.append({"name": module["module"], "kind": "replay", "result": "", "message": module["error"]})
        for row in module.get("rows", []):
            entry = {"name": row["output"], "kind": "replay", "module": module["module"], "key": row.get("key")}
            if "error" in row:
                rows.append({**entry, "result": "", "message": row["error"]})
                continue
            decided = judge(row["local_rel_err"], rule)
            rows.append({**entry, **{k: row[k] for k in ("local_rel_err", "max_abs_err", "cosine", "shape")},
                         "result": decided["verdict"], "threshold": decided["threshold"], "rule": decided["rule"],
                         "message": "" if decided["verdict"] == "PASS" else
                         f"local rel err {row['local_rel_err']:.3g} {decided['rule']} broken"})
    position = {key: i for i, key in enumerate(order)}
    rows.sort(key=lambda r: (position.get(r.get("key"), len(order)), str(r["name"])))
    first = next((r for r in rows if r.get("result") == "FAIL"), None)
    return rows, first and {"module": first["module"], "call": first["key"], "output": first["name"],
                            "local_rel_err": first["local_rel_err"], "rule": first["rule"]}


def process_memory(plan: ReplayPlan, manifest: dict[str, Any]) -> dict[str, Any]:
    """The replay process's plan on the recorded shapes, its precision chosen (``auto``); refused before the
    process starts where it does not fit in host memory (:mod:`ascendbench.baseline.replay_memory`)."""
    from ascendbench.baseline.replay_child import meta_module
    from ascendbench.baseline.replay_memory import choose_precision, header_tensors, process_plan
    from ascendbench.errors import InsufficientMemoryError
    from ascendbench.models.memory import available_host_bytes

    calls_dir = str(plan.folder / "calls")
    tensors = header_tensors(calls_dir, manifest["calls"])
    builders = {s.name: (lambda spec=s: meta_module(spec.to_dict())) for s in plan.specs}
    available = available_host_bytes()
    memory = choose_precision(plan.settings["precision"],
                              lambda precision: process_plan(builders, manifest["calls"], tensors, precision),
                              available)
    memory["host_available_mb"] = available / 1e6
    if not memory["fits"]:
        raise InsufficientMemoryError(
            f"the replay reference process needs about {memory['reference_process_mb'] / 1e3:.1f} GB in "
            f"{memory['precision']} (largest module {memory['largest_module']['name']} with its recorded call, plus "
            f"imports), more than {DEFAULT_HEADROOM:.0%} of the {available / 1e9:.1f} GB available "
            f"({memory['choice']}). "
            "Nothing was started. Replay smaller modules (baseline.replay.layers, e.g. a block's resnets), lower "
            "the preset sizes, or free host memory.")
    return memory


def run_replay(job: Any, plan: ReplayPlan) -> dict[str, Any]:
    """Record, replay, judge: the compare stage's section (``compare``, ``metrics``, ``verdict``, ``artifacts``)."""
    from ascendbench.baseline.replay_memory import memory_check

    recorder = record_calls(job, plan)  # each call on disk as soon as it finished (plan.folder / "calls")
    manifest = recorder.manifest()
    manifest_path = plan.folder / "manifest.json"
    with atomic_path(manifest_path) as tmp:
        tmp.write_text(json.dumps(manifest))
    memory = process_memory(plan, manifest)
    results_path = plan.folder / "results.json"
    request = {"modules": [s.to_dict() for s in plan.specs], "manifest": manifest,
               "calls_dir": str(plan.folder / "calls"), "results": str(results_path), "precision": memory["precision"]}
    ran = run_child(request, job.dir / LOG_NAME)
    results = read_results(results_path)
    check = memory_check(memory, results)
    ran["peak_rss_mb"] = measured_peak(results_path, check)
    if check["under_estimated"]:
        job.warn(f"replay reference: the measured peak of {', '.join(check['under_estimated'])} is above "
                 f"{check['rule']} (compare.memory.check): the plan under-estimates, so a larger preset may not fit")
    rule = local_rule(plan, job.precision.dtype)
    rows, first = judge_rows(results, [c["key"] for c in manifest["calls"]], rule)
    entries = {f"replay/{r['name']}/local_rel_err": {"value": r["local_rel_err"], "verdict": r["result"],
                                                      "threshold": r["threshold"], "rule": r["rule"],
                                                      "source": rule["source"], "max_abs_err": r["max_abs_err"],
                                                      "cosine": r["cosine"]}
               for r in rows if "local_rel_err" in r}
    info = {"mode": "replay", "reason": plan.reason, "modules": len(plan.specs), "calls": len(manifest["calls"]),
            "precision": memory["precision"], "precision_choice": memory["choice"],
            "first_divergent": first, "rule": rule, "verdict": worst(r.get("result") or None for r in rows),
            "dropped": manifest["dropped"], "unreplayable": manifest["unreplayable"],
            "recorded_mb": sum(c["nbytes"] for c in manifest["calls"]) / 1e6,
            "job_held_call_mb": recorder.peak_call_bytes / 1e6, "process": ran,
            "memory": {**{k: v for k, v in memory.items() if k != "per_module"}, "per_module": memory["per_module"],
                       "check": check},
            "results": {r["name"]: {k: r.get(k) for k in ("module", "local_rel_err", "max_abs_err", "cosine",
                                                           "result", "message")} for r in rows}}
    return {"rows": rows, "info": info, "entries": entries,
            "artifacts": {"replay_calls": job.relative(plan.folder / "calls"),
                          "replay_results": job.relative(results_path), "replay_manifest": job.relative(manifest_path)}}
