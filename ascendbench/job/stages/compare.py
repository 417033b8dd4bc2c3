"""The layer comparison, ``compare.csv`` and side-by-side pictures. With ``compare.layers`` the
model runs once more on the device, hooked (untimed, device patches on); the captures are judged
against the reference's (patterns) or the first divergent module is located (``all``)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import torch
from omegaconf import OmegaConf

from ascendbench.baseline.process import run_child
from ascendbench.compare import msprobe
from ascendbench.compare.csvfile import output_rows, write_compare_csv
from ascendbench.compare.files import save_tensors
from ascendbench.compare.hooks import capturing, save_device_layers, saved_layers
from ascendbench.compare.layers import compare_layers, compare_modules, hidden_rules, judge_dumps
from ascendbench.compare.select import normalize_spec, select_modules
from ascendbench.job.job import Job
from ascendbench.job.stages.base import Stage
from ascendbench.metrics.verdict import worst
from ascendbench.patches.registry import get_patch, parse_specs, patches_applied
from ascendbench.precision import dtype_name
from ascendbench.tasks.inputs import move_inputs, place

log = logging.getLogger(__name__)
Sections = tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], dict[str, Any]]


def capture_on_device(job: Job, spec: Any) -> Any:
    """One extra hooked run of the task on the device (untimed), with the model's device patches."""
    adapter, task, cfg = job.adapter, job.task, job.cfg
    device = adapter.torch_device
    module = place(task, job.model, device, job.precision.dtype)  # task.to(): pipelines, VAEs
    moved = move_inputs(job.inputs, device, job.precision.dtype)
    max_bytes = int(float(cfg.compare.get("max_capture_mb", 4096)) * (1 << 20))
    log.info("layer capture run on %s (compare.layers=%s) ...", device,
             spec if spec == "all" else len(spec))
    with patches_applied(cfg.model.get("patches"), module, adapter.name, job.precision.name):
        with capturing(module, spec, max_bytes) as capture:
            task.run(module, moved)
            adapter.synchronize()
    return capture


def _device_tensors(job: Job, capture: Any) -> str:
    path = job.dir / "tensors" / "layers_device.safetensors"
    return job.relative(save_tensors(path, capture.tensors))


def _layers(job: Job, spec: Any, capture: Any) -> Sections:
    """(csv rows, record ``compare`` section, metric entries, artifacts) of the comparison."""
    cfg, reference = job.cfg, job.reference
    if spec == "all":
        rule = OmegaConf.to_container(cfg.compare.divergence, resolve=True)
        rows, first = compare_modules(reference.layers, capture.modules, rule)
        info = {"mode": "all", "modules": len(rows), "first_divergent": first, "rule": rule,
                "diverged": sum(r["result"] in ("diverged", "first_divergent") for r in rows)}
        return rows, info, {}, save_device_layers(job, spec, capture)
    thresholds = hidden_rules(cfg.compare, job.precision)  # the seed's limits, or the dtype's
    rows = compare_layers(reference.layers, capture, thresholds, job.precision.allclose())
    entries = {f"layer/{row['name']}/{m}": e for row in rows for m, e in row["entries"].items()}
    info = {"mode": "patterns", "patterns": list(spec), "layers": len(rows),
            "not_called": capture.not_called(),
            "dropped": sorted(set(capture.dropped) | set(reference.layers["dropped"])),
            "verdict": worst(r.get("result") or None for r in rows),
            "in_job_verdict": bool(cfg.compare.verdict),
            "results": {r["name"]: {"result": r["result"], "message": r["message"]} for r in rows}}
    saved = save_tensors(job.dir / "tensors" / "layers_reference.safetensors",
                         reference.layers["tensors"])
    artifacts = {"layers_reference": job.relative(saved),
                 "layers_device": _device_tensors(job, capture),
                 **save_device_layers(job, spec, capture)}
    return rows, info, (entries if cfg.compare.verdict else {}), artifacts


def _keep_only(job: Job, spec: Any) -> dict[str, Any]:
    """No reference: keep the device's capture, for this run to be another's ``baseline.source``."""
    capture = capture_on_device(job, spec)
    kept = save_device_layers(job, spec, capture)
    if spec != "all":
        kept["layers_device"] = _device_tensors(job, capture)
    job.artifacts.update(kept)
    why = ("no CPU reference (baseline.enabled=false); the device's layer capture is kept for a "
           "later baseline.source comparison")
    return {"compare": {"skipped": why, "kept": sorted(kept)}, "artifacts": job.artifacts}


def _pictures(job: Job) -> dict[str, list[str]]:
    from ascendbench.compare.visual import render_output  # deferred: matplotlib is heavy

    options = OmegaConf.to_container(job.cfg.compare.visual, resolve=True)
    pictures = {}
    for name in sorted(job.reference):
        paths = render_output(name, job.reference[name], job.outputs[name], job.dir / "visual",
                              options)
        if paths:
            pictures[f"{name}_compare_png"] = [job.relative(p) for p in paths]
    return pictures


def _msprobe_request(job: Job, side: str, root: Any) -> dict[str, Any]:
    """What a msprobe child needs: the model, preset, seed, its device and dtype, the modules
    that registered the job's patches (and torch_npu, which the child does not autoload)."""
    cfg, reference = job.cfg, side == "reference"
    imports = {get_patch(s.name).__module__ for s in parse_specs(cfg.model.get("patches"))}
    imports |= {"torch_npu"} if not reference and job.adapter.name == "npu" else set()
    return {"config": {"model": OmegaConf.to_container(cfg.model, resolve=True),
                       "preset": OmegaConf.to_container(cfg.preset, resolve=True),
                       "seed": int(cfg.seed)},
            "weights_kind": (job.weights or {}).get("kind"), "side": side, "root": str(root),
            "device": "cpu" if reference else str(job.adapter.torch_device),
            "adapter": "cpu" if reference else job.adapter.name, "imports": sorted(imports),
            "path": sys.path,
            "precision": dtype_name(job.precision.reference if reference else job.precision.dtype),
            "level": str(job.cfg.compare.get("msprobe_level", "mix"))}


def run_msprobe(job: Job) -> dict[str, Any]:
    """Both sides dumped by msprobe's own PrecisionDebugger (each in a clean child: its hooks
    patch torch process-wide), msprobe's compare of them, ascendbench's judgement of the same
    dumps; the record's ``compare.msprobe``."""
    msprobe.require()
    if job.precision.reference is None:
        return {"skipped": "no CPU reference (baseline.enabled=false): nothing to compare with"}
    root = job.dir / "msprobe"
    for side, mode in msprobe.SIDES.items():
        log.info("msprobe dump of the %s side (log: %s) ...", side, root / f"{side}.log")
        run_child(mode, _msprobe_request(job, side, root), root / f"{side}.log", f"msprobe {side}")
    steps = [msprobe.dump_dir(root / side / "step0") for side in msprobe.SIDES]
    rules = hidden_rules(job.cfg.compare, job.precision)
    rows, first = judge_dumps(*steps, rules, job.precision.allclose())
    info = {"reference": job.relative(steps[0]), "device": job.relative(steps[1]),
            "size_mb": round(msprobe.folder_mb(root), 1), "entries": len(rows),
            "first_divergent": first, **msprobe.msprobe_flags(root / "compare"),
            "command": f"msprobe compare -tp {root / 'device' / 'step0'} -gp "
                       f"{root / 'reference' / 'step0'} -o {root / 'compare'}"}
    if info["result_csv"]:
        info["result_csv"] = job.relative(info["result_csv"])
    log.info("msprobe: %s", msprobe.describe(info))
    return info


class CompareStage(Stage):
    """Layer comparison (``compare.layers``: hooked modules judged, or the first divergent
    module), ``compare.csv`` and side-by-side pictures of the outputs."""

    name, label = "compare", "the layer comparison"

    def plan(self, job: Job) -> dict[str, Any]:
        """A pattern that matches no module of the (meta) model is a problem."""
        spec = normalize_spec(job.cfg.compare.get("layers"))
        if isinstance(spec, list) and isinstance(job.model, torch.nn.Module):
            select_modules(job.model, spec)
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Compare; the section carries ``compare``, the metrics and verdict, and the artifacts."""
        section = self._compare(job)
        if job.cfg.compare.get("msprobe"):
            section["compare"] = {**section.get("compare", {}), "msprobe": run_msprobe(job)}
        return section

    def _compare(self, job: Job) -> dict[str, Any]:
        spec = normalize_spec(job.cfg.compare.get("layers"))
        write_csv = job.cfg.compare.get("csv", True)
        if job.replay is not None:  # the replay stage judged the modules: their rows
            if write_csv:
                csv = write_compare_csv(job.dir / "compare.csv", job.replay.rows)
                job.artifacts["compare_csv"] = job.relative(csv)
            return {"artifacts": job.artifacts}
        if job.reference is None:
            return _keep_only(job, spec) if spec is not None else {}
        rows = output_rows(job.reference, job.outputs, job.metrics)
        section: dict[str, Any] = {}
        why = "no layer captures"
        if spec is not None and job.reference.layers is None and hasattr(job.reference, "run"):
            job.reference.layers, why = saved_layers(job.reference.run, spec)  # baseline.source's
        if spec is not None and job.reference.layers is None:  # a saved run's outputs alone
            job.warn(f"compare.layers skipped: the saved reference (baseline.source) has no usable "
                     f"layer captures: {why}")
            section["compare"] = {"skipped": f"the reference is a saved run (baseline.source): "
                                             f"{why}"}
            spec = None
        if spec is not None:
            capture = capture_on_device(job, spec)
            layer_rows, info, entries, layer_files = _layers(job, spec, capture)
            if info.get("not_called"):
                job.warn(f"compare.layers: {len(info['not_called'])} matched module(s) never ran "
                         f"forward() (first: {info['not_called'][:5]}), so nothing was captured "
                         "for them; forward hooks see module(...) calls only -- pick modules the "
                         "task calls, e.g. their children")
            rows += layer_rows
            job.metrics = {**job.metrics, **entries}
            job.verdict = worst(m.get("verdict") for m in job.metrics.values())
            job.artifacts.update(layer_files)
            section.update(compare=info, metrics=job.metrics, verdict=job.verdict)
        if write_csv:
            csv = write_compare_csv(job.dir / "compare.csv", rows)
            job.artifacts["compare_csv"] = job.relative(csv)
        if job.cfg.compare.visual.get("enabled", True):
            job.artifacts.update(_pictures(job))
        return {**section, "artifacts": job.artifacts}
