"""The math of every metric, as pure functions of tensors (no config, no state)."""

from ascendbench.metrics.functional.image import (
    aggregate,
    clamp_to_range,
    psnr_per_image,
    ssim_per_image,
    to_lpips_range,
)
from ascendbench.metrics.functional.regression import (
    ErrorTolerances,
    chunk_sums,
    cosine_similarity,
    finalize,
    merge_sums,
    psnr_db,
    regression_metrics,
)
from ascendbench.metrics.functional.tokens import token_metrics
from ascendbench.metrics.functional.video import frame_chunks, frame_count, resolve_layout

__all__ = [
    "ErrorTolerances", "aggregate", "chunk_sums", "clamp_to_range", "cosine_similarity", "finalize", "frame_chunks",
    "frame_count", "merge_sums", "psnr_db", "psnr_per_image", "regression_metrics", "resolve_layout",
    "ssim_per_image", "to_lpips_range", "token_metrics",
]
