"""The frame axis of a 5-D video: ``[B, C, T, H, W]`` (VAE decoders) or ``[B, T, C, H, W]`` (pipelines)."""

from __future__ import annotations

from typing import Iterator

import torch

from ascendbench.errors import MetricError

LAYOUTS = ("BCTHW", "BTCHW")


def resolve_layout(shape: tuple[int, ...], layout: str) -> str:
    """``layout`` itself, or for ``auto`` the axis (1 or 2) that holds 1 or 3 channels."""
    if len(shape) != 5:
        raise MetricError(f"a video output must be 5-D [B, C, T, H, W] or [B, T, C, H, W]; got "
                          f"shape {tuple(shape)}")
    if layout in LAYOUTS:
        return layout
    if layout != "auto":
        raise MetricError(f"video layout={layout!r} is not allowed; use auto, {' or '.join(LAYOUTS)}.")
    if shape[1] in (1, 3):
        return "BCTHW"
    if shape[2] in (1, 3):
        return "BTCHW"
    raise MetricError(f"cannot tell the channel axis of video shape {tuple(shape)} (neither axis 1 "
                      "nor 2 has 1 or 3 channels); set the evaluator's layout to BCTHW or BTCHW.")


def frame_count(shape: tuple[int, ...], layout: str) -> int:
    """Frames per video of a 5-D shape in ``layout``."""
    return int(shape[2] if layout == "BCTHW" else shape[1])


def frames(video: torch.Tensor, batch: int, layout: str, start: int = 0,
           stop: int | None = None) -> torch.Tensor:
    """Frames ``start:stop`` of video ``batch`` as an ``[n, C, H, W]`` view (no copy)."""
    if layout == "BCTHW":
        return video[batch, :, start:stop].transpose(0, 1)
    return video[batch, start:stop]


def frame_chunks(reference: torch.Tensor, device: torch.Tensor, layout: str,
                 chunk: int) -> Iterator[tuple[int, int, torch.Tensor, torch.Tensor]]:
    """``(batch, first frame, reference views, device views)`` of at most ``chunk`` frames each."""
    total = frame_count(tuple(reference.shape), layout)
    step = max(1, int(chunk))
    for batch in range(int(reference.shape[0])):
        for start in range(0, total, step):
            yield (batch, start, frames(reference, batch, layout, start, start + step),
                   frames(device, batch, layout, start, start + step))
