"""The files a job leaves beside its record: compared tensors (up to ``artifacts.max_tensor_mb``),
PNG images, video frames and mp4 (``export_to_video``); a failing encoder is ``media_skipped``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from diffusers.utils import export_to_video
from PIL import Image

from ascendbench.compare.files import save_tensors
from ascendbench.job.failures import log_traceback
from ascendbench.job.job import Job
from ascendbench.job.stages.base import Stage

log = logging.getLogger(__name__)

TENSOR_FILES = {"inputs": "inputs", "device_outputs": "device", "reference_outputs": "reference"}
VIDEO_LAYOUTS = {"BCTHW": (0, 2, 3, 4, 1), "BTCHW": (0, 1, 3, 4, 2)}  # -> [B, T, H, W, C]


def save_images(directory: Path, stem: str, batch: torch.Tensor) -> list[Path]:
    """One PNG per image of a ``[B, 3, H, W]`` batch in [-1, 1]: ``<stem>_<i>.png``."""
    directory.mkdir(parents=True, exist_ok=True)
    pixels = ((batch.detach().to("cpu", torch.float32).clamp(-1, 1) + 1) * 127.5).round()
    paths = []
    for index, image in enumerate(pixels.to(torch.uint8).permute(0, 2, 3, 1).numpy()):
        paths.append(directory / f"{stem}_{index}.png")
        Image.fromarray(image).save(paths[-1])
    return paths


def to_uint8_video(video: torch.Tensor, layout: str = "BCTHW",
                   value_range: tuple[float, float] = (-1.0, 1.0)) -> np.ndarray:
    """A 5-D video in ``layout`` with values in ``value_range`` -> ``[B, T, H, W, 3]`` uint8."""
    low, high = float(value_range[0]), float(value_range[1])
    frames = video.detach().to("cpu", torch.float32).permute(*VIDEO_LAYOUTS[layout])
    pixels = ((frames.clamp(low, high) - low) * (255.0 / (high - low))).round().to(torch.uint8)
    if pixels.shape[-1] == 1:
        pixels = pixels.expand(*pixels.shape[:-1], 3)
    return pixels.numpy()


def frame_indices(count: int, which: Sequence[Any]) -> list[int]:
    """Frame indices from names (``first``, ``middle``, ``last``) and integers (negative from the
    end); out-of-range ones are dropped, repeats kept once."""
    named = {"first": 0, "middle": (count - 1) // 2, "last": count - 1}
    chosen = [named[i] if isinstance(i, str) else int(i) % count for i in which
              if isinstance(i, str) or -count <= int(i) < count]
    return list(dict.fromkeys(chosen))  # in order, each once


def save_video(directory: Path, stem: str, video: torch.Tensor, task: Any) -> dict[str, list[Path]]:
    """The frames ``task.video_frames`` as PNG (``<stem>_<b>_frame_<t>.png``) and each video as
    ``<stem>_<b>.mp4`` at ``task.video_fps``, read in ``task.video_layout`` and ``value_range``."""
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[Path]] = {"png": [], "mp4": []}
    for index, clip in enumerate(to_uint8_video(video, task.video_layout, task.value_range)):
        images = [Image.fromarray(frame) for frame in clip]
        for t in frame_indices(len(images), task.video_frames):
            out["png"].append(directory / f"{stem}_{index}_frame_{t:04d}.png")
            images[t].save(out["png"][-1])
        out["mp4"].append(directory / f"{stem}_{index}.mp4")
        export_to_video(images, str(out["mp4"][-1]), fps=int(task.video_fps))
    return out


def video_artifacts(job_dir: Path, side: str, outputs: Mapping[str, torch.Tensor],
                    task: Any) -> dict[str, list[str]]:
    """PNG frames and mp4 of every 5-D floating output of a video task, relative to ``job_dir``."""
    out: dict[str, list[str]] = {}
    for name, video in outputs.items():
        if video.dim() != 5 or not video.is_floating_point():
            continue
        saved = save_video(job_dir / "videos", f"{name}_{side}", video, task)
        for kind in ("png", "mp4"):
            out[f"{name}_{side}_{kind}"] = [str(p.relative_to(job_dir)) for p in saved[kind]]
    return out


def tensor_budget_problem(tensor_sets: Mapping[str, Mapping[str, torch.Tensor]],
                          settings: Any) -> str | None:
    """Why the compared tensors are not written (off, or over ``artifacts.max_tensor_mb``)."""
    if not settings.get("tensors", True):
        return "artifacts.tensors=false"
    limit = settings.get("max_tensor_mb")
    total_mb = sum(t.numel() * t.element_size() for ts in tensor_sets.values()
                   for t in ts.values()) / 2**20
    if limit is not None and total_mb > float(limit):
        return (f"{total_mb:.0f} MiB of tensors exceed artifacts.max_tensor_mb={float(limit):g}; "
                "raise it to keep them (metrics are in the record either way)")
    return None


class ArtifactsStage(Stage):
    """Tensors, pictures and videos beside the record; paths relative to the job directory."""

    name, label = "artifacts", "saving artifacts"

    def plan(self, job: Job) -> dict[str, Any]:
        """The files the job would write (paths), and the reference's cache entry on a miss."""
        baseline = job.plan.get("baseline") or {}
        files = ["record.json", "ascendbench.log", "tensors/inputs.safetensors",
                 "tensors/device.safetensors"]
        replay = baseline.get("mode") == "replay"
        if replay:  # no whole-model reference outputs: the recorded calls, per-module results
            files += ["replay/calls/<n>.safetensors (a file per recorded call)",
                      "replay/manifest.json", "replay/results.json", "replay_child.log"]
        elif baseline.get("enabled"):
            files.append("tensors/reference.safetensors")
        kind = job.task.output_kind if job.task is not None else None
        if kind in ("image", "video"):
            both = " and reference" * bool(baseline.get("enabled") and not replay)
            files.append(f"{'images' if kind == 'image' else 'videos'}/... (device{both})")
        written = [str(Path(job.dir) / f) for f in files]
        if baseline.get("enabled") and baseline.get("cache_hit") is False and not replay:
            written.append(f"{baseline['path']}/ (the CPU reference, cached for later jobs)")
        job.add_plan({"outputs": written})
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Write the files."""
        settings = job.cfg.get("artifacts") or {}
        saved: dict[str, Any] = {}
        sets = {"inputs": job.inputs, "device_outputs": job.outputs,
                "reference_outputs": job.reference}
        tensor_sets = {k: v for k, v in sets.items() if v is not None}
        if skipped := tensor_budget_problem(tensor_sets, settings):
            saved["tensors_skipped"] = skipped
            log.warning("tensors not saved: %s", skipped)
        else:
            for key, tensors in tensor_sets.items():
                path = job.dir / "tensors" / f"{TENSOR_FILES[key]}.safetensors"
                saved[key] = job.relative(save_tensors(path, tensors))
        if settings.get("media", True):
            try:
                saved.update(_media(job))
            except (OSError, RuntimeError, ValueError, AttributeError, ImportError) as exc:
                log_traceback(exc, job.dir)  # a missing encoder
                saved["media_skipped"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                log.warning("pictures/videos not written (%s); the metrics and tensors are "
                            "unaffected", saved["media_skipped"])
        job.artifacts = {**saved, **job.artifacts}
        return {"artifacts": job.artifacts}


def _media(job: Job) -> dict[str, Any]:
    """PNGs of decoded images; video frames as PNG and each video as mp4 (device and reference)."""
    artifacts: dict[str, Any] = {}
    for side, outputs in {"device": job.outputs, "reference": job.reference}.items():
        if outputs is None:
            continue
        if job.task.output_kind == "image":
            for name, batch in outputs.items():
                paths = save_images(job.dir / "images", f"{name}_{side}", batch)
                artifacts[f"{name}_{side}_png"] = [job.relative(p) for p in paths]
        if job.task.output_kind == "video":
            artifacts.update(video_artifacts(job.dir, side, outputs, job.task))
    return artifacts
