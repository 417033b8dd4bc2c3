"""The files a job leaves beside its record: compared tensors (bounded), pictures and videos."""

from __future__ import annotations

import logging
from typing import Any, Mapping

import torch

from ascendbench.job.artifacts import save_images, save_tensors, video_artifacts
from ascendbench.job.failures import log_traceback
from ascendbench.job.job import Job
from ascendbench.job.planning import outputs_plan
from ascendbench.job.stages.base import Stage

log = logging.getLogger(__name__)

TENSOR_FILES = {"inputs": "inputs", "device_outputs": "device", "reference_outputs": "reference"}


class ArtifactsStage(Stage):
    """Tensors as safetensors (``artifacts.max_tensor_mb``), images as PNG, videos as PNG frames and mp4;
    a failing picture/video encoder is recorded as ``media_skipped`` instead of failing the job."""

    name, label = "artifacts", "saving artifacts"

    def plan(self, job: Job) -> dict[str, Any]:
        """The files the job would write."""
        job.add_plan({"outputs": outputs_plan(job)})
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Write the files; paths relative to the job directory."""
        settings = job.cfg.get("artifacts") or {}
        saved: dict[str, Any] = {}
        tensor_sets = {k: v for k, v in {"inputs": job.inputs, "device_outputs": job.outputs,
                                         "reference_outputs": job.reference}.items() if v is not None}
        skipped = tensor_budget_problem(tensor_sets, settings)
        if skipped:
            saved["tensors_skipped"] = skipped
            log.warning("tensors not saved: %s", skipped)
        else:
            for key, tensors in tensor_sets.items():
                path = job.dir / "tensors" / f"{TENSOR_FILES[key]}.safetensors"
                saved[key] = job.relative(save_tensors(path, tensors))
        if settings.get("media", True):
            saved.update(_media_or_reason(job))
        job.artifacts = {**saved, **job.artifacts}
        return {"artifacts": job.artifacts}


def _media_or_reason(job: Job) -> dict[str, Any]:
    try:
        return _media(job)
    except (OSError, RuntimeError, ValueError, AttributeError, ImportError) as exc:  # a missing encoder
        log_traceback(exc, job.dir)
        reason = f"{type(exc).__name__}: {str(exc)[:300]}"
        log.warning("pictures/videos not written (%s); the metrics and tensors are unaffected", reason)
        return {"media_skipped": reason}


def _media(job: Job) -> dict[str, Any]:
    """PNGs of decoded images; chosen video frames as PNG and each video as mp4 (device and reference)."""
    artifacts: dict[str, Any] = {}
    sides = {"device": job.outputs, "reference": job.reference}
    for side, outputs in sides.items():
        if outputs is None:
            continue
        if job.task.output_kind == "image":
            for name, batch in outputs.items():
                paths = save_images(job.dir / "images", f"{name}_{side}", batch)
                artifacts[f"{name}_{side}_png"] = [job.relative(p) for p in paths]
        if job.task.output_kind == "video":
            artifacts.update(video_artifacts(job.dir, side, outputs, job.task))
    return artifacts


def tensor_budget_problem(tensor_sets: Mapping[str, Mapping[str, torch.Tensor]], settings: Any) -> str | None:
    """Why the compared tensors are not written (switched off, or over ``artifacts.max_tensor_mb``), else None."""
    if not settings.get("tensors", True):
        return "artifacts.tensors=false"
    limit = settings.get("max_tensor_mb")
    total_mb = sum(t.numel() * t.element_size() for ts in tensor_sets.values() for t in ts.values()) / 2**20
    if limit is not None and total_mb > float(limit):
        return (f"{total_mb:.0f} MiB of tensors exceed artifacts.max_tensor_mb={float(limit):g}; raise it to keep "
                "them (metrics are in the record either way)")
    return None
