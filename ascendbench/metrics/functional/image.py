"""Per-image PSNR and SSIM (scikit-image) in float64, their aggregate, and video frames."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from skimage.metrics import structural_similarity

from ascendbench.errors import MetricError
from ascendbench.metrics.functional.regression import psnr_db

SSIM_SIGMA = 1.5
# With gaussian_weights=True scikit-image uses a window of 2 * int(3.5 * sigma + 0.5) + 1 pixels.
SSIM_MIN_SIDE = 2 * int(3.5 * SSIM_SIGMA + 0.5) + 1


def psnr_per_image(reference: torch.Tensor, device: torch.Tensor, data_range: float,
                   cap_db: float) -> list[float]:
    """PSNR of each image of two ``[N, C, H, W]`` batches (MSE over the image in float64)."""
    diff = device.to(torch.float64) - reference.to(torch.float64)
    return [psnr_db(float(m), data_range, cap_db) for m in diff.square_().flatten(1).mean(dim=1)]


def _ssim(reference: np.ndarray, device: np.ndarray, data_range: float) -> float:
    if not (np.isfinite(reference).all() and np.isfinite(device).all()):
        return float("nan")
    options = {"data_range": data_range, "gaussian_weights": True, "sigma": SSIM_SIGMA,
               "use_sample_covariance": False}
    if reference.shape[0] == 1:
        return float(structural_similarity(reference[0], device[0], **options))
    return float(structural_similarity(np.moveaxis(reference, 0, -1), np.moveaxis(device, 0, -1),
                                       channel_axis=-1, **options))


def ssim_per_image(reference: torch.Tensor, device: torch.Tensor, data_range: float) -> list[float]:
    """SSIM of each image of two ``[N, C, H, W]`` batches (sides of at least SSIM_MIN_SIDE)."""
    ref, dev = reference.to(torch.float64).numpy(), device.to(torch.float64).numpy()
    return [_ssim(ref[i], dev[i], data_range) for i in range(ref.shape[0])]


def to_lpips_range(batch: torch.Tensor, value_range: Sequence[float]) -> torch.Tensor:
    """Map values from ``value_range`` to LPIPS's expected ``[-1, 1]`` (float32)."""
    low, high = float(value_range[0]), float(value_range[1])
    return (batch.to(torch.float32, copy=True) - low).mul_(2.0 / (high - low)).sub_(1.0)


def aggregate(values: Sequence[float], higher_is_better: bool) -> dict[str, float | int]:
    """Mean, population std and the worst value with its index (NaN counts as the worst)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return {"mean": math.nan, "std": math.nan, "worst": math.nan, "worst_index": -1}
    nan_at = np.flatnonzero(np.isnan(array))
    worst = np.argmin if higher_is_better else np.argmax
    index = int(nan_at[0]) if nan_at.size else int(worst(array))
    return {"mean": float(array.mean()), "std": float(array.std()), "worst": float(array[index]),
            "worst_index": index}


LAYOUTS = ("BCTHW", "BTCHW")


def resolve_layout(shape: tuple[int, ...], layout: str) -> str:
    """``layout`` itself, or for ``auto`` the axis (1 or 2) that holds 1 or 3 channels."""
    if len(shape) != 5:
        raise MetricError(f"a video output must be 5-D [B, C, T, H, W] or [B, T, C, H, W]; got "
                          f"shape {tuple(shape)}")
    if layout in LAYOUTS:
        return layout
    if layout != "auto":
        raise MetricError(f"video layout={layout!r} is not allowed; use auto, BCTHW or BTCHW.")
    if shape[1] in (1, 3):
        return "BCTHW"
    if shape[2] in (1, 3):
        return "BTCHW"
    raise MetricError(f"cannot tell the channel axis of video shape {tuple(shape)} (neither axis 1 "
                      "nor 2 has 1 or 3 channels); set the evaluator's layout to BCTHW or BTCHW.")


def frames(video: torch.Tensor, batch: int, layout: str) -> torch.Tensor:
    """The frames of video ``batch`` as an ``[T, C, H, W]`` view (no copy)."""
    return video[batch].transpose(0, 1) if layout == "BCTHW" else video[batch]
