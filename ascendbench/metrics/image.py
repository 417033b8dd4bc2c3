"""The ``image`` and ``video`` evaluators: PSNR, SSIM, LPIPS per image or frame, chunk by chunk."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from ascendbench.metrics import lpips_net
from ascendbench.metrics.functional import image
from ascendbench.metrics.functional.nonfinite import neutralize
from ascendbench.metrics.suite import Evaluator

HIGHER_IS_BETTER = {"psnr_db": True, "ssim": True, "lpips": False}  # decides the worst image


def _mismatch_rule(prefix: str) -> dict[str, dict[str, Any]]:
    return {f"{prefix}nonfinite_mismatch": {
        "max": 0, "source": "built in: pixels where reference and device disagree about NaN/Inf "
                            "(left out of PSNR/SSIM/LPIPS by the agreement rule) always fail"}}


@dataclass
class PerImageMetrics:
    """The per-image options of both evaluators (``data_range`` None: ``value_range``'s width)."""

    value_range: Sequence[float] = (-1.0, 1.0)
    psnr_cap_db: float = 200.0
    ssim: bool = True
    lpips: bool = True
    lpips_net: str = "alex"
    lpips_version: str = "0.1"
    lpips_verify_hash: bool = True
    data_range: float | None = None

    def __post_init__(self) -> None:
        self.value_range = (float(self.value_range[0]), float(self.value_range[1]))
        width = self.value_range[1] - self.value_range[0]
        self.data_range = width if self.data_range is None else float(self.data_range)
        self.psnr_cap_db, self.lpips_version = float(self.psnr_cap_db), str(self.lpips_version)

    def skips(self, height: int, width: int) -> dict[str, str]:
        """Metric -> reason for the metrics that cannot be computed on ``height x width`` images."""
        reasons: dict[str, str] = {}
        if self.ssim and min(height, width) < image.SSIM_MIN_SIDE:
            reasons["ssim"] = (f"images of {height}x{width} px are smaller than the "
                               f"{image.SSIM_MIN_SIDE} px Gaussian SSIM window (sigma 1.5); use a "
                               "preset with larger height and width")
        if self.lpips:
            net, need = self.lpips_net, lpips_net.MIN_SIDE.get(self.lpips_net, 0)
            problem = lpips_net.backbone_problem(net, self.lpips_version, self.lpips_verify_hash)
            if problem is None and min(height, width) < need:
                problem = (f"images of {height}x{width} px are smaller than the {need} px LPIPS "
                           f"{net} accepts")
            if problem:
                reasons["lpips"] = problem
        return reasons

    def compute(self, reference: torch.Tensor, device: torch.Tensor, skip: Mapping[str, str],
                chunk: int) -> tuple[dict[str, list[float]], int]:
        """Per-image values and NaN/Inf mismatches of two image batches, ``chunk`` at a time."""
        lists: dict[str, list[float]] = {}
        mismatch, (low, high) = 0, self.value_range
        for start in range(0, int(reference.shape[0]), chunk):
            ref, dev, bad = neutralize(reference[start:start + chunk], device[start:start + chunk])
            ref, dev = ref.clamp_(low, high), dev.clamp_(low, high)
            mismatch += bad
            values = {"psnr_db": image.psnr_per_image(ref, dev, self.data_range, self.psnr_cap_db)}
            if self.ssim and "ssim" not in skip:
                values["ssim"] = image.ssim_per_image(ref, dev, self.data_range)
            if self.lpips and "lpips" not in skip:
                values["lpips"] = lpips_net.lpips_per_image(
                    lpips_net.load_lpips(self.lpips_net, self.lpips_version, torch.hub.get_dir()),
                    *(image.to_lpips_range(t, (low, high)) for t in (ref, dev)))
            for metric, per_image in values.items():
                lists.setdefault(metric, []).extend(per_image)
        return lists, mismatch


class ImageEvaluator(Evaluator):
    """PSNR, SSIM, LPIPS of ``[N, 1|3, H, W]`` outputs; NaN/Inf mismatches counted apart."""

    what = "[N, C, H, W] image outputs with 1 or 3 channels"
    always_rules = _mismatch_rule("image_")

    def __init__(self, name: str = "image", images_per_chunk: int = 8,
                 outputs: list[str] | None = None, thresholds: Mapping[str, Any] | None = None,
                 **per_image: Any) -> None:
        super().__init__(name, outputs, thresholds)
        self.chunk = int(images_per_chunk)
        self.metrics = PerImageMetrics(**per_image)

    def set_data_range(self, data_range: float) -> None:
        """PSNR/SSIM's range (``metric.data_range``); images stay clamped to ``value_range``."""
        self.metrics.data_range = float(data_range)

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """4-D floating-point tensors with 1 or 3 channels."""
        return tensor.is_floating_point() and tensor.dim() == 4 and tensor.shape[1] in (1, 3)

    def compute(self, reference: torch.Tensor, device: torch.Tensor,
                tolerances: Mapping[str, float]) -> dict[str, Any]:
        """Mean and worst of each per-image metric over the batch."""
        skip = self.metrics.skips(int(reference.shape[-2]), int(reference.shape[-1]))
        lists, mismatch = self.metrics.compute(reference, device, skip, self.chunk)
        results: dict[str, Any] = {f"image_{m}": {"skipped": reason} for m, reason in skip.items()}
        results["image_nonfinite_mismatch"] = float(mismatch)
        for metric, values in lists.items():
            stats = image.aggregate(values, HIGHER_IS_BETTER[metric])
            results[f"image_{metric}"] = {"value": stats["mean"], "worst": stats["worst"],
                                          "worst_index": stats["worst_index"], "per_image": values}
        return results


class VideoEvaluator(ImageEvaluator):
    """The image metrics per frame of 5-D outputs (``layout``): mean, std and worst frame."""

    what = "5-D video outputs ([B, C, T, H, W] or [B, T, C, H, W])"
    always_rules = _mismatch_rule("video_")

    def __init__(self, name: str = "video", layout: str = "auto", frames_per_chunk: int = 8,
                 outputs: list[str] | None = None, thresholds: Mapping[str, Any] | None = None,
                 **per_image: Any) -> None:
        super().__init__(name, frames_per_chunk, outputs, thresholds, **per_image)
        self.layout = layout

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """5-D floating-point tensors."""
        return tensor.is_floating_point() and tensor.dim() == 5

    def compute(self, reference: torch.Tensor, device: torch.Tensor,
                tolerances: Mapping[str, float]) -> dict[str, Any]:
        """Mean, std and worst frame of each per-frame metric."""
        skip = self.metrics.skips(int(reference.shape[-2]), int(reference.shape[-1]))
        layout = image.resolve_layout(tuple(reference.shape), self.layout)
        lists: dict[str, list[float]] = {}
        where: list[tuple[int, int]] = []  # (batch, frame) of every value
        mismatch = 0
        for batch in range(int(reference.shape[0])):
            ref, dev = image.frames(reference, batch, layout), image.frames(device, batch, layout)
            values, bad = self.metrics.compute(ref, dev, skip, self.chunk)
            mismatch += bad
            for metric, per_frame in values.items():
                lists.setdefault(metric, []).extend(per_frame)
            where.extend((batch, frame) for frame in range(int(ref.shape[0])))
        results: dict[str, Any] = {"video_nonfinite_mismatch": float(mismatch)}
        for metric in [*skip, *lists]:
            worst = "min" if HIGHER_IS_BETTER[metric] else "max"
            if metric in skip:
                results.update({f"video_{metric}_{s}": {"skipped": skip[metric]}
                                for s in ("mean", worst, "std")})
                continue
            values = lists[metric]
            stats = image.aggregate(values, HIGHER_IS_BETTER[metric])
            batch, frame = where[stats["worst_index"]] if values else (-1, -1)
            results[f"video_{metric}_mean"] = {"value": stats["mean"], "frames": len(values),
                                               "per_frame": values}
            results[f"video_{metric}_{worst}"] = {"value": stats["worst"],
                                                  "worst_frame": {"batch": batch, "frame": frame}}
            results[f"video_{metric}_std"] = {"value": stats["std"]}
        return results
