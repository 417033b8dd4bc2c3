"""The ``video`` evaluator: the image metrics frame by frame, then mean / worst / std over the frames.

Frames are compared in chunks of ``frames_per_chunk``: only that many frames of each video are ever
held as float64 copies, so a 161x3x480x704 pair needs a few hundred megabytes beyond itself.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.metrics.base import Evaluator
from ascendbench.metrics.functional.image import aggregate
from ascendbench.metrics.functional.regression import check_same_shape
from ascendbench.metrics.functional.video import frame_chunks, resolve_layout
from ascendbench.metrics.image import HIGHER_IS_BETTER, PerImageMetrics, mismatch_rule


class VideoEvaluator(Evaluator):
    """Per-frame PSNR, SSIM and LPIPS of 5-D video outputs, aggregated over all frames of all videos.

    Records ``video_<metric>_mean`` (with ``per_frame`` values), ``video_<metric>_std`` and the worst
    frame: ``video_psnr_db_min``, ``video_ssim_min``, ``video_lpips_max`` (with ``worst_frame``); and
    ``video_nonfinite_mismatch``, the pixels where the two disagree about NaN/Inf (any one fails).

    Args:
        name: evaluator name.
        layout: ``BCTHW``, ``BTCHW`` or ``auto`` (the axis with 1 or 3 channels).
        frames_per_chunk: frames converted to float64 and compared at a time.
        outputs: output names to compare (``None``: every 5-D floating-point output).
        thresholds: per-metric rule overrides (highest priority).
        **per_image: the options of :class:`ascendbench.metrics.image.PerImageMetrics`.
    """

    what = "5-D video outputs ([B, C, T, H, W] or [B, T, C, H, W])"
    prefix = "video_"
    always_rules = mismatch_rule(prefix)

    def __init__(self, name: str = "video", layout: str = "auto", frames_per_chunk: int = 8,
                 outputs: list[str] | None = None, thresholds: Mapping[str, Any] | None = None,
                 **per_image: Any) -> None:
        super().__init__(name, outputs, thresholds)
        self.layout = layout
        self.frames_per_chunk = int(frames_per_chunk)
        self.metrics = PerImageMetrics(**per_image)

    def set_data_range(self, data_range: float) -> None:
        """PSNR/SSIM's peak-to-peak range (``metric.data_range``); frames are still clamped to ``value_range``."""
        self.metrics.data_range = float(data_range)

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """5-D floating-point tensors."""
        return tensor.is_floating_point() and tensor.dim() == 5

    def per_frame(self, reference: torch.Tensor, device: torch.Tensor,
                  skip: Mapping[str, str]) -> tuple[dict[str, list[float]], list[tuple[int, int]], int]:
        """Per-frame values of each metric, the ``(batch, frame)`` of every value and the NaN/Inf mismatches.

        Each chunk goes through :meth:`PerImageMetrics.prepare` (the agreement rule of
        :mod:`ascendbench.metrics.functional.nonfinite`).
        """
        layout = resolve_layout(tuple(reference.shape), self.layout)
        lists: dict[str, list[float]] = {}
        where: list[tuple[int, int]] = []
        mismatch = 0
        chunks = frame_chunks(reference, device, layout, self.frames_per_chunk, lambda frames: frames)
        for batch, start, ref_view, dev_view in chunks:
            ref, dev, bad = self.metrics.prepare(ref_view, dev_view)  # float64 copies of this chunk only
            mismatch += bad
            for metric, values in self.metrics.compute(ref, dev, skip).items():
                lists.setdefault(metric, []).extend(values)
            where.extend((batch, start + i) for i in range(int(ref.shape[0])))
            del ref, dev
        return lists, where, mismatch

    def compute(self, reference: torch.Tensor, device: torch.Tensor, tolerances: Mapping[str, float]) -> dict[str, Any]:
        """Mean, std and worst frame of each per-frame metric."""
        check_same_shape(reference, device)
        skip = self.metrics.skips(int(reference.shape[-2]), int(reference.shape[-1]))
        lists, where, mismatch = self.per_frame(reference, device, skip)
        results: dict[str, Any] = {f"{self.prefix}nonfinite_mismatch": float(mismatch)}
        for metric, reason in skip.items():
            worst = "min" if HIGHER_IS_BETTER[metric] else "max"
            for suffix in ("mean", worst, "std"):
                results[f"{self.prefix}{metric}_{suffix}"] = {"skipped": reason}
        for metric, values in lists.items():
            stats = aggregate(values, HIGHER_IS_BETTER[metric])
            batch, frame = where[stats["worst_index"]] if values else (-1, -1)
            worst = "min" if HIGHER_IS_BETTER[metric] else "max"
            results[f"{self.prefix}{metric}_mean"] = {"value": stats["mean"], "frames": len(values),
                                                      "per_frame": values}
            results[f"{self.prefix}{metric}_{worst}"] = {"value": stats["worst"],
                                                         "worst_frame": {"batch": batch, "frame": frame}}
            results[f"{self.prefix}{metric}_std"] = {"value": stats["std"]}
        return results
