"""The CLIP score of the prompt and the image/video outputs (``metric.clip``; Hessel 2021)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch

from ascendbench.errors import ConfigError
from ascendbench.metrics.functional.image import frames
from ascendbench.metrics.verdict import judge, unjudged

NAME = "clip_score"
SOURCE = ("CLIPScore (Hessel et al. 2021, EMNLP; torchmetrics.multimodal.CLIPScore): "
          "100 x max(cos(image, text), 0) of CLIP embeddings")
NO_PATH = ("metric.clip.path is not set: the CLIP score needs a transformers CLIPModel and "
           "CLIPProcessor saved with save_pretrained in a local directory (e.g. "
           "metric.clip.path=/models/clip-vit-base-patch32)")
NOT_JUDGED = "random-init weights: the output is not meant to show the prompt"


def frames_of(tensor: torch.Tensor, layout: str, count: int) -> torch.Tensor:
    """``count`` frames spread over an image batch or the first video in ``layout``."""
    clip = tensor if tensor.dim() == 4 else frames(tensor, 0, layout)
    return clip[torch.linspace(0, clip.shape[0] - 1, min(count, clip.shape[0])).round().long()]


def check_clip_path(path: str) -> Path:
    """The folder of ``metric.clip.path``; a ConfigError unless it holds a ``config.json``."""
    folder = Path(path).expanduser()
    if not (folder / "config.json").is_file():
        raise ConfigError(f"metric.clip.path={path!r} is not a directory with a config.json: point "
                          "it at a transformers CLIPModel saved with save_pretrained (model and "
                          "processor in one folder), or set metric.clip.path=null to skip the CLIP "
                          "score")
    return folder


def load_clip(path: str) -> tuple[Any, Any]:
    """``(CLIPModel, CLIPProcessor)`` from a local directory (safetensors weights only; offline)."""
    from transformers import CLIPModel, CLIPProcessor  # deferred: transformers is heavy

    folder = str(check_clip_path(path))
    try:
        model = CLIPModel.from_pretrained(folder, local_files_only=True, use_safetensors=True)
        processor = CLIPProcessor.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, TypeError) as exc:
        cause = " ".join(str(exc).split())[:200]
        raise ConfigError(
            f"metric.clip.path={path!r}: no CLIP model and processor could be loaded from it "
            f"({type(exc).__name__}: {cause}); save both there with CLIPModel.save_pretrained and "
            "CLIPProcessor.save_pretrained (safetensors weights)") from exc
    return model.eval(), processor


def clip_scores(model: Any, processor: Any, prompt: str, pixels: torch.Tensor) -> torch.Tensor:
    """The CLIPScore of ``prompt`` against each frame of ``[n, C, H, W]`` in [0, 1]."""
    pixels = pixels.detach().float().clamp(0, 1).cpu()
    if pixels.shape[1] == 1:
        pixels = pixels.expand(-1, 3, -1, -1)
    limit = int(model.config.text_config.max_position_embeddings)  # CLIP reads 77 tokens
    batch = processor(text=[prompt], images=list(pixels), return_tensors="pt", padding=True,
                      do_rescale=False, truncation=True, max_length=limit)
    with torch.no_grad():
        image = model.get_image_features(pixel_values=batch["pixel_values"])
        text = model.get_text_features(input_ids=batch["input_ids"],
                                       attention_mask=batch["attention_mask"])
    image = getattr(image, "pooler_output", image)
    text = getattr(text, "pooler_output", text).double().expand_as(image)
    return 100 * torch.nn.functional.cosine_similarity(image.double(), text, dim=-1).clamp(min=0)


def clip_entries(settings: Mapping[str, Any] | None, job: Any) -> dict[str, dict[str, Any]]:
    """``clip_score`` entries of a job's image/video outputs (``skipped``: no weights/prompt)."""
    task, outputs, settings = job.task, job.outputs or {}, settings or {}
    visual = {n: t for n, t in sorted(outputs.items())
              if t.dim() in (4, 5) and task.output_range(n, t) is not None}
    names = {n: f"{n}/{NAME}" if len(outputs) > 1 else NAME for n in visual}
    prompt = getattr(task, "prompt", None)
    if not visual:
        return {}
    if not settings.get("path") or not (isinstance(prompt, str) and prompt):
        reason = NO_PATH if isinstance(prompt, str) and prompt else (  # no path helps then
            f"{type(task).__name__} has no prompt: the CLIP score compares a prompt with an output")
        return {names[n]: {"skipped": reason} for n in visual}
    model, processor = load_clip(str(settings["path"]))
    count = int(settings.get("frames") or 4)

    def score(tensor: torch.Tensor, bounds: tuple[float, float]) -> torch.Tensor:
        pixels = frames_of(tensor, task.video_layout, count).double() - bounds[0]
        return clip_scores(model, processor, prompt, pixels / (bounds[1] - bounds[0]))

    entries = {}
    for name, tensor in visual.items():
        bounds = tuple(float(b) for b in task.output_range(name, tensor))
        per_frame = score(tensor, bounds)
        entry = {"value": float(per_frame.mean()), "min": float(per_frame.min()),
                 "frames": int(per_frame.numel()), "prompt": prompt,
                 "clip_model": str(settings["path"]), "source": SOURCE}
        reference = (job.reference or {}).get(name)
        if reference is not None and tuple(reference.shape) == tuple(tensor.shape):
            entry["reference_value"] = float(score(reference, bounds).mean())
        if settings.get("min") is not None:
            decided = judge(entry["value"], {"min": float(settings["min"]), "source": SOURCE})
            random_init = (job.weights or {}).get("kind") == "random-init"
            entry.update(unjudged(decided, NOT_JUDGED) if random_init else decided)
        entries[names[name]] = entry
    return entries
