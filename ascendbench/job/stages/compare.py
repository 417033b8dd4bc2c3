"""The job stage after the metrics: layer comparison, compare.csv and side-by-side pictures.

:func:`accuracy_artifacts` is called once by the runner after the outputs are compared. With
``compare.layers`` set it runs the model once more on the device with forward hooks (outside the timed
loop, with the same device patches), compares the captures with the baseline's, adds the judged layer
metrics to the record (pattern mode, ``compare.verdict``) or locates the first divergent module
(``all``), and writes ``compare.csv``, the layer tensors as safetensors and the PNGs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ascendbench.compare.csvfile import output_rows, write_compare_csv
from ascendbench.compare.divergence import compare_modules
from ascendbench.compare.hooks import capturing
from ascendbench.compare.layers import compare_layers
from ascendbench.compare.select import normalize_spec
from ascendbench.metrics.verdict import worst

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def capture_on_device(cfg: DictConfig, module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                      adapter: Any, dtype: torch.dtype, spec: Any) -> Any:
    """One extra hooked run of the task on the device (untimed), with the model's device patches."""
    from ascendbench.patches import patches_applied

    from ascendbench.tasks.placement import move_inputs, place

    device = adapter.torch_device
    module = place(task, module, device, dtype)  # task.to() where the task defines it (pipelines, VAE options)
    moved = move_inputs(inputs, device, dtype)
    max_bytes = int(float(cfg.compare.get("max_capture_mb", 4096)) * (1 << 20))
    log.info("layer capture run on %s (compare.layers=%s) ...", device, spec if spec == "all" else len(spec))
    with patches_applied(cfg.model.get("patches"), module, adapter.name):
        with capturing(module, spec, max_bytes) as capture:
            task.run(module, moved)
            adapter.synchronize()
    return capture


def _layers(cfg: DictConfig, job_dir: Path, spec: Any, reference: Any, capture: Any,
            tolerances: Mapping[str, float]) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(csv rows, record ``compare`` section, metric entries, artifacts) of the layer comparison."""
    from ascendbench.artifacts import save_tensors

    if spec == "all":
        rule = OmegaConf.to_container(cfg.compare.divergence, resolve=True)
        rows, first = compare_modules(reference.layers, capture.modules, rule)
        info = {"mode": "all", "modules": len(rows), "first_divergent": first, "rule": rule,
                "diverged": sum(r["result"] in ("diverged", "first_divergent") for r in rows)}
        return rows, info, {}, {}
    thresholds = OmegaConf.to_container(cfg.compare.thresholds, resolve=True)
    rows = compare_layers(reference.layers, capture, thresholds, tolerances)
    entries = {f"layer/{row['name']}/{m}": e for row in rows for m, e in row["entries"].items()}
    info = {"mode": "patterns", "patterns": list(spec), "layers": len(rows), "not_called": capture.not_called(),
            "dropped": sorted(set(capture.dropped) | set(reference.layers["dropped"])),
            "verdict": worst(r.get("result") or None for r in rows), "in_job_verdict": bool(cfg.compare.verdict),
            "results": {r["name"]: {"result": r["result"], "message": r["message"]} for r in rows}}
    rel = lambda p: str(Path(p).relative_to(job_dir))  # noqa: E731
    artifacts = {"layers_reference": rel(save_tensors(job_dir / "tensors" / "layers_reference.safetensors",
                                                      reference.layers["tensors"])),
                 "layers_device": rel(save_tensors(job_dir / "tensors" / "layers_device.safetensors", capture.tensors))}
    return rows, info, (entries if cfg.compare.verdict else {}), artifacts


def _pictures(cfg: DictConfig, job_dir: Path, reference: Mapping[str, torch.Tensor],
              device_outputs: Mapping[str, torch.Tensor]) -> dict[str, list[str]]:
    from ascendbench.visual import render_output

    options = OmegaConf.to_container(cfg.compare.visual, resolve=True)
    pictures = {}
    for name in sorted(reference):
        paths = render_output(name, reference[name], device_outputs[name], job_dir / "visual", options)
        if paths:
            pictures[f"{name}_compare_png"] = [str(Path(p).relative_to(job_dir)) for p in paths]
    return pictures


def accuracy_artifacts(cfg: DictConfig, job_dir: Path, writer: Any, module: torch.nn.Module, task: Any,
                       inputs: Mapping[str, torch.Tensor], adapter: Any, dtype_cfg: DictConfig,
                       reference: Any, device_outputs: Mapping[str, torch.Tensor]) -> None:
    """Layer comparison, compare.csv and pictures of one job; results go into ``writer``'s record.

    Args:
        cfg: the job config (``compare``, ``model.patches``).
        job_dir: the job directory (artifacts are written below it, recorded relative to it).
        writer: the job's :class:`ascendbench.record.RecordWriter` (metrics, verdict, artifacts, compare).
        module: the model, already run on the device.
        task: the job's task.
        inputs: the job's CPU inputs.
        adapter: the device adapter.
        dtype_cfg: the resolved dtype option (tolerances).
        reference: the :class:`ascendbench.baseline.Baseline` (``None`` for a performance-only run).
        device_outputs: the device outputs on CPU.
    """
    job_dir = Path(job_dir)
    spec = normalize_spec(cfg.compare.get("layers"))
    if reference is None:
        if spec is not None:
            writer.update(compare={"skipped": "no CPU reference (baseline.enabled=false)"})
        return
    metrics = dict(writer.data.get("metrics") or {})
    rows = output_rows(reference, device_outputs, metrics)
    artifacts: dict[str, Any] = {}
    if spec is not None:
        capture = capture_on_device(cfg, module, task, inputs, adapter, DTYPES[dtype_cfg.name], spec)
        tolerances = {k: float(dtype_cfg[k]) for k in ("atol", "rtol", "small_value", "small_value_atol")
                      if dtype_cfg.get(k) is not None}
        layer_rows, info, entries, layer_files = _layers(cfg, job_dir, spec, reference, capture, tolerances)
        if info.get("not_called"):
            writer.warn(f"compare.layers: {len(info['not_called'])} matched module(s) never ran forward() "
                        f"(first: {info['not_called'][:5]}), so nothing was captured for them; forward hooks see "
                        "module(...) calls only -- pick modules the task calls, e.g. their children")
        rows += layer_rows
        metrics.update(entries)
        artifacts.update(layer_files)
        writer.update(compare=info, metrics=metrics, verdict=worst(m.get("verdict") for m in metrics.values()))
    if cfg.compare.get("csv", True):
        artifacts["compare_csv"] = str(write_compare_csv(job_dir / "compare.csv", rows).relative_to(job_dir))
    if cfg.compare.visual.get("enabled", True):
        artifacts.update(_pictures(cfg, job_dir, reference, device_outputs))
    writer.update(artifacts={**(writer.data.get("artifacts") or {}), **artifacts})
