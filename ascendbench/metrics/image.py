"""The ``image`` evaluator: PSNR, SSIM and LPIPS of every image of ``[N, C, H, W]`` outputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from ascendbench.metrics import lpips_net as lpips_backbone
from ascendbench.metrics.base import Evaluator
from ascendbench.metrics.functional.image import (
    SSIM_MIN_SIDE,
    aggregate,
    clamp_to_range,
    psnr_per_image,
    ssim_per_image,
    to_lpips_range,
)
from ascendbench.metrics.functional.regression import check_same_shape

# metric -> True when a higher value is better (decides which image is the worst).
HIGHER_IS_BETTER = {"psnr_db": True, "ssim": True, "lpips": False}


@dataclass
class PerImageMetrics:
    """PSNR / SSIM / LPIPS lists for batches of images; shared by the image and video evaluators.

    Its fields are the per-image options of the ``image`` and ``video`` evaluators' config entries.

    Attributes:
        value_range: the range images are clamped to; its width is the ``data_range``.
        psnr_cap_db: PSNR of identical images.
        ssim: compute SSIM.
        lpips: compute LPIPS (skipped with the reason when its weights are not available offline).
        lpips_net: LPIPS backbone (``alex``, as in LPIPS v0.1's default).
        lpips_version: LPIPS calibration version.
        lpips_verify_hash: check the backbone file's SHA256 against the prefix in its name.
        data_range: the width of ``value_range`` (derived).
    """

    value_range: Sequence[float] = (-1.0, 1.0)
    psnr_cap_db: float = 200.0
    ssim: bool = True
    lpips: bool = True
    lpips_net: str = "alex"
    lpips_version: str = "0.1"
    lpips_verify_hash: bool = True
    data_range: float = field(init=False)

    def __post_init__(self) -> None:
        self.value_range = (float(self.value_range[0]), float(self.value_range[1]))
        self.data_range = self.value_range[1] - self.value_range[0]
        self.psnr_cap_db = float(self.psnr_cap_db)
        self.ssim, self.lpips = bool(self.ssim), bool(self.lpips)
        self.lpips_net, self.lpips_version = str(self.lpips_net), str(self.lpips_version)
        self.lpips_verify_hash = bool(self.lpips_verify_hash)

    def skips(self, height: int, width: int) -> dict[str, str]:
        """Metric -> reason for the metrics that cannot be computed on ``height x width`` images."""
        reasons: dict[str, str] = {}
        if self.ssim and min(height, width) < SSIM_MIN_SIDE:
            reasons["ssim"] = (f"images of {height}x{width} px are smaller than the {SSIM_MIN_SIDE} px Gaussian "
                               "SSIM window (sigma 1.5); use a preset with larger height and width")
        if self.lpips:
            problem = lpips_backbone.backbone_problem(self.lpips_net, self.lpips_version, self.lpips_verify_hash)
            need = lpips_backbone.min_side(self.lpips_net)
            if problem is None and need is not None and min(height, width) < need:
                problem = f"images of {height}x{width} px are smaller than the {need} px LPIPS {self.lpips_net} accepts"
            if problem:
                reasons["lpips"] = problem
        return reasons

    def names(self) -> list[str]:
        """The metrics switched on."""
        return ["psnr_db"] + (["ssim"] if self.ssim else []) + (["lpips"] if self.lpips else [])

    def clamp(self, batch: torch.Tensor) -> torch.Tensor:
        """Float64 copy clamped to the value range."""
        return clamp_to_range(batch, self.value_range)

    def compute(self, reference: torch.Tensor, device: torch.Tensor, skip: Mapping[str, str]) -> dict[str, list[float]]:
        """Per-image values of every metric not in ``skip``, for clamped float64 ``[N, C, H, W]`` batches."""
        values = {"psnr_db": psnr_per_image(reference, device, self.data_range, self.psnr_cap_db)}
        if self.ssim and "ssim" not in skip:
            values["ssim"] = ssim_per_image(reference, device, self.data_range)
        if self.lpips and "lpips" not in skip:
            model = lpips_backbone.load_lpips(self.lpips_net, self.lpips_version, torch.hub.get_dir())
            values["lpips"] = lpips_backbone.lpips_per_image(model, to_lpips_range(reference, self.value_range),
                                                             to_lpips_range(device, self.value_range))
        return values


class ImageEvaluator(Evaluator):
    """Per-image PSNR, SSIM and LPIPS of ``[N, C, H, W]`` outputs with 1 or 3 channels.

    Records ``image_psnr_db``, ``image_ssim`` and ``image_lpips``: the mean over the batch, with
    ``per_image`` values, the ``worst`` value and its ``worst_index``.

    Args:
        name: evaluator name.
        images_per_chunk: images compared at a time (bounds LPIPS and SSIM memory).
        outputs: output names to compare (``None``: every 4-D floating-point output with 1 or 3 channels).
        thresholds: per-metric rule overrides (highest priority).
        **per_image: the options of :class:`PerImageMetrics`.
    """

    what = "[N, C, H, W] image outputs with 1 or 3 channels"
    prefix = "image_"

    def __init__(self, name: str = "image", images_per_chunk: int = 8, outputs: list[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None, **per_image: Any) -> None:
        super().__init__(name, outputs, thresholds)
        self.images_per_chunk = int(images_per_chunk)
        self.metrics = PerImageMetrics(**per_image)

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """4-D floating-point tensors with 1 or 3 channels."""
        return tensor.is_floating_point() and tensor.dim() == 4 and tensor.shape[1] in (1, 3)

    def compute(self, reference: torch.Tensor, device: torch.Tensor, tolerances: Mapping[str, float]) -> dict[str, Any]:
        """Mean / worst of each per-image metric over the batch."""
        check_same_shape(reference, device)
        skip = self.metrics.skips(int(reference.shape[-2]), int(reference.shape[-1]))
        lists: dict[str, list[float]] = {}
        for start in range(0, int(reference.shape[0]), self.images_per_chunk):
            stop = start + self.images_per_chunk
            chunk = self.metrics.compute(self.metrics.clamp(reference[start:stop]),
                                         self.metrics.clamp(device[start:stop]), skip)
            for metric, values in chunk.items():
                lists.setdefault(metric, []).extend(values)
        results: dict[str, Any] = {self.prefix + m: {"skipped": reason} for m, reason in skip.items()}
        for metric, values in lists.items():
            stats = aggregate(values, HIGHER_IS_BETTER[metric])
            results[self.prefix + metric] = {"value": stats["mean"], "worst": stats["worst"],
                                             "worst_index": stats["worst_index"], "per_image": values}
        return results
