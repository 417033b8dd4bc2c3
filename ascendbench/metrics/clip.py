"""The CLIP score of a prompt and the image or video a job made from it, where the user has CLIP weights on disk.

``metric.clip.path`` names a directory holding a transformers ``CLIPModel`` and its ``CLIPProcessor`` (tokenizer
and image processor), as written by ``save_pretrained``; nothing is downloaded. The score is torchmetrics'
``CLIPScore`` (Hessel et al. 2021, "CLIPScore", EMNLP): ``100 x max(cos(image embedding, text embedding), 0)``,
here per frame of ``metric.clip.frames`` frames spread over the clip, reported as the mean (``value``) and the
lowest frame (``min``); a prompt longer than the text encoder's positions (77 tokens for CLIP) is cut there, as
CLIP itself was trained. It needs no reference: a blank, noisy or off-prompt output scores low. Where a reference
output exists its score is recorded beside it (``reference_value``).

It is judged only where ``metric.clip.min`` is set (no single threshold suits every CLIP model), and never for
random-init weights (the output is not meant to show the prompt). Without ``metric.clip.path``, or for a task
with no prompt, the entry is ``skipped`` with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch

from ascendbench.errors import ConfigError
from ascendbench.metrics.verdict import judge

NAME = "clip_score"
SOURCE = ("CLIPScore (Hessel et al. 2021, EMNLP; torchmetrics.multimodal.CLIPScore): 100 x max(cos(image, text), 0) "
          "of CLIP embeddings")
NO_PATH = ("metric.clip.path is not set: the CLIP score needs a transformers CLIPModel and CLIPProcessor saved with "
           "save_pretrained in a local directory (e.g. metric.clip.path=/models/clip-vit-base-patch32)")
NOT_JUDGED = "random-init weights: the output is not meant to show the prompt"


def frames_of(tensor: torch.Tensor, layout: str, count: int) -> torch.Tensor:
    """``count`` frames spread evenly over the first sample of an image batch ``[N, C, H, W]`` (its images) or a
    video ``[B, C, T, H, W]`` / ``[B, T, C, H, W]`` (``layout``), as ``[count', C, H, W]``."""
    if tensor.dim() == 4:
        frames = tensor
    else:
        frames = tensor[0].transpose(0, 1) if layout == "BCTHW" else tensor[0]
    index = torch.linspace(0, frames.shape[0] - 1, min(count, frames.shape[0])).round().long()
    return frames[index]


def check_clip_path(path: str) -> Path:
    """The folder of ``metric.clip.path``.

    Raises:
        ConfigError: it is not a directory holding a ``config.json``.
    """
    folder = Path(path).expanduser()
    if not (folder / "config.json").is_file():
        raise ConfigError(f"metric.clip.path={path!r} is not a directory with a config.json: point it at a "
                          "transformers CLIPModel saved with save_pretrained (model and processor in one folder), "
                          "or set metric.clip.path=null to skip the CLIP score")
    return folder


def load_clip(path: str) -> tuple[Any, Any]:
    """``(CLIPModel, CLIPProcessor)`` from a local directory (safetensors weights only; offline).

    Raises:
        ConfigError: the directory is missing or holds no loadable CLIP model.
    """
    from transformers import CLIPModel, CLIPProcessor

    folder = check_clip_path(path)
    try:
        model = CLIPModel.from_pretrained(str(folder), local_files_only=True, use_safetensors=True).eval()
        processor = CLIPProcessor.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"metric.clip.path={path!r}: no CLIP model and processor could be loaded from it "
                          f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); save both there with "
                          "CLIPModel.save_pretrained and CLIPProcessor.save_pretrained (safetensors weights)") from exc
    return model, processor


def clip_scores(model: Any, processor: Any, prompt: str, frames: torch.Tensor) -> torch.Tensor:
    """CLIPScore of ``prompt`` against each frame (``[n, C, H, W]`` in [0, 1]): ``100 x max(cos, 0)`` per frame."""
    pixels = frames.detach().float().clamp(0, 1).cpu()
    if pixels.shape[1] == 1:
        pixels = pixels.expand(-1, 3, -1, -1)
    limit = int(model.config.text_config.max_position_embeddings)  # CLIP reads 77 tokens; longer prompts are cut
    batch = processor(text=[prompt], images=list(pixels), return_tensors="pt", padding=True, do_rescale=False,
                      truncation=True, max_length=limit)
    with torch.no_grad():
        image = model.get_image_features(pixel_values=batch["pixel_values"])
        text = model.get_text_features(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    image = getattr(image, "pooler_output", image)
    text = getattr(text, "pooler_output", text)
    cosine = torch.nn.functional.cosine_similarity(image.double(), text.double().expand_as(image), dim=-1)
    return 100 * cosine.clamp(min=0)


def _unit(tensor: torch.Tensor, bounds: tuple[float, float]) -> torch.Tensor:
    low, high = bounds
    return (tensor.detach().double() - low) / (high - low)


def clip_entries(settings: Mapping[str, Any] | None, job: Any) -> dict[str, dict[str, Any]]:
    """The ``clip_score`` entries of a job's image/video outputs (``job``: ``outputs``, ``task``, ``weights``,
    ``reference``); ``{}`` when it has none, a ``skipped`` entry without weights or a prompt."""
    task, outputs = job.task, job.outputs or {}
    visual = {n: t for n, t in sorted(outputs.items())
              if t.dim() in (4, 5) and task.output_range(n, t) is not None}
    if not visual:
        return {}
    settings = settings or {}
    prefix = len(outputs) > 1
    names = {n: f"{n}/{NAME}" if prefix else NAME for n in visual}
    prompt = getattr(task, "prompt", None)
    reason = (NO_PATH if not settings.get("path") else
              None if isinstance(prompt, str) and prompt else
              f"{type(task).__name__} has no prompt: the CLIP score compares a prompt with the output")
    if reason:
        return {names[n]: {"skipped": reason} for n in visual}
    model, processor = load_clip(str(settings["path"]))
    count = int(settings.get("frames") or 4)
    random_init = (job.weights or {}).get("kind") == "random-init"
    entries = {}
    for name, tensor in visual.items():
        bounds = tuple(float(b) for b in task.output_range(name, tensor))
        per_frame = clip_scores(model, processor, prompt, _unit(frames_of(tensor, task.video_layout, count), bounds))
        entry = {"value": float(per_frame.mean()), "min": float(per_frame.min()), "frames": int(per_frame.numel()),
                 "prompt": prompt, "clip_model": str(settings["path"]), "source": SOURCE}
        reference = (job.reference or {}).get(name)
        if reference is not None and tuple(reference.shape) == tuple(tensor.shape):
            ref = clip_scores(model, processor, prompt, _unit(frames_of(reference, task.video_layout, count), bounds))
            entry["reference_value"] = float(ref.mean())
        if settings.get("min") is not None:
            decided = judge(entry["value"], {"min": float(settings["min"]), "source": SOURCE})
            entry.update(decided if not random_init else {"verdict": None, "would_be": decided["verdict"],
                                                         "threshold": decided.get("threshold"),
                                                         "not_judged": NOT_JUDGED})
        entries[names[name]] = entry
    return entries
