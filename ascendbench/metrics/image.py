"""The ``image`` evaluator: PSNR, SSIM and LPIPS of every image of ``[N, C, H, W]`` outputs."""

from __future__ import annotations

from dataclasses import dataclass
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
from ascendbench.metrics.functional.nonfinite import neutralize
from ascendbench.metrics.functional.regression import check_same_shape

# metric -> True when a higher value is better (decides which image is the worst).
HIGHER_IS_BETTER = {"psnr_db": True, "ssim": True, "lpips": False}


def mismatch_rule(prefix: str) -> dict[str, dict[str, Any]]:
    """The built-in rule of ``<prefix>nonfinite_mismatch``: any NaN/Inf disagreement fails (not configurable)."""
    return {f"{prefix}nonfinite_mismatch": {
        "max": 0, "source": "built in: pixels where reference and device disagree about NaN/Inf (left out of "
                            "PSNR/SSIM/LPIPS by the agreement rule) always fail"}}


@dataclass
class PerImageMetrics:
    """PSNR / SSIM / LPIPS lists for batches of images; shared by the image and video evaluators.

    Its fields are the per-image options of the ``image`` and ``video`` evaluators' config entries.

    Attributes:
        value_range: the range images are clamped to; its width is the ``data_range`` unless one is given.
        psnr_cap_db: PSNR of identical images.
        ssim: compute SSIM.
        lpips: compute LPIPS (skipped with the reason when its weights are not available offline).
        lpips_net: LPIPS backbone (``alex``, as in LPIPS v0.1's default).
        lpips_version: LPIPS calibration version.
        lpips_verify_hash: check the backbone file's SHA256 against the prefix in its name.
        data_range: PSNR/SSIM peak-to-peak range; ``None``: the width of ``value_range``.
    """

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

    def prepare(self, reference: torch.Tensor, device: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Float64 copies ready for :meth:`compute`, and the NaN/Inf mismatches of the pair.

        The agreement rule (:mod:`ascendbench.metrics.functional.nonfinite`): positions that are not
        finite on both sides become pixels with no error (0 on both sides) before clamping, so PSNR, SSIM
        and LPIPS measure the finite pairs; the mismatches among them are returned, to be judged apart.
        """
        ref, dev, mismatch = neutralize(reference, device)
        low, high = self.value_range
        return ref.clamp_(low, high), dev.clamp_(low, high), mismatch

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
    ``per_image`` values, the ``worst`` value and its ``worst_index``; and ``image_nonfinite_mismatch``,
    the pixels where the two disagree about NaN/Inf (left out of the other metrics; any one fails).

    Args:
        name: evaluator name.
        images_per_chunk: images compared at a time (bounds LPIPS and SSIM memory).
        outputs: output names to compare (``None``: every 4-D floating-point output with 1 or 3 channels).
        thresholds: per-metric rule overrides (highest priority).
        **per_image: the options of :class:`PerImageMetrics`.
    """

    what = "[N, C, H, W] image outputs with 1 or 3 channels"
    prefix = "image_"
    always_rules = mismatch_rule(prefix)

    def __init__(self, name: str = "image", images_per_chunk: int = 8, outputs: list[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None, **per_image: Any) -> None:
        super().__init__(name, outputs, thresholds)
        self.images_per_chunk = int(images_per_chunk)
        self.metrics = PerImageMetrics(**per_image)

    def set_data_range(self, data_range: float) -> None:
        """PSNR/SSIM's peak-to-peak range (``metric.data_range``); images are still clamped to ``value_range``."""
        self.metrics.data_range = float(data_range)

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """4-D floating-point tensors with 1 or 3 channels."""
        return tensor.is_floating_point() and tensor.dim() == 4 and tensor.shape[1] in (1, 3)

    def compute(self, reference: torch.Tensor, device: torch.Tensor, tolerances: Mapping[str, float]) -> dict[str, Any]:
        """Mean / worst of each per-image metric over the batch."""
        check_same_shape(reference, device)
        skip = self.metrics.skips(int(reference.shape[-2]), int(reference.shape[-1]))
        lists: dict[str, list[float]] = {}
        mismatch = 0
        for start in range(0, int(reference.shape[0]), self.images_per_chunk):
            stop = start + self.images_per_chunk
            ref, dev, bad = self.metrics.prepare(reference[start:stop], device[start:stop])
            mismatch += bad
            for metric, values in self.metrics.compute(ref, dev, skip).items():
                lists.setdefault(metric, []).extend(values)
        results: dict[str, Any] = {self.prefix + m: {"skipped": reason} for m, reason in skip.items()}
        results[self.prefix + "nonfinite_mismatch"] = float(mismatch)
        for metric, values in lists.items():
            stats = aggregate(values, HIGHER_IS_BETTER[metric])
            results[self.prefix + metric] = {"value": stats["mean"], "worst": stats["worst"],
                                             "worst_index": stats["worst_index"], "per_image": values}
        return results
