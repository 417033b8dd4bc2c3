"""Pure video helpers: the frame axis of a 5-D tensor and frame-chunked iteration.

Videos arrive as ``[B, C, T, H, W]`` (diffusers VAE decoders) or ``[B, T, C, H, W]`` (pipelines with
``output_type="pt"``). :func:`frame_chunks` yields ``[n, C, H, W]`` float64 copies of at most ``chunk``
frames at a time, so per-frame metrics never need a float64 copy of a whole video.
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch

from ascendbench.errors import MetricError

LAYOUTS = ("BCTHW", "BTCHW")


def resolve_layout(shape: tuple[int, ...], layout: str) -> str:
    """The layout of a 5-D shape: ``layout`` itself, or for ``auto`` the axis (1 or 2) holding 1 or 3 channels.

    >>> resolve_layout((1, 3, 9, 32, 32), "auto"), resolve_layout((1, 9, 3, 32, 32), "auto")
    ('BCTHW', 'BTCHW')
    """
    if len(shape) != 5:
        raise MetricError(f"a video output must be 5-D [B, C, T, H, W] or [B, T, C, H, W]; got shape {tuple(shape)}")
    if layout in LAYOUTS:
        return layout
    if layout != "auto":
        raise MetricError(f"video layout={layout!r} is not allowed; use auto, {' or '.join(LAYOUTS)}.")
    if shape[1] in (1, 3):
        return "BCTHW"
    if shape[2] in (1, 3):
        return "BTCHW"
    raise MetricError(
        f"cannot tell the channel axis of video shape {tuple(shape)} (neither axis 1 nor 2 has 1 or 3 "
        "channels); set the evaluator's layout to BCTHW or BTCHW."
    )


def frame_count(shape: tuple[int, ...], layout: str) -> int:
    """Frames per video of a 5-D shape in ``layout``."""
    return int(shape[2] if layout == "BCTHW" else shape[1])


def frames(video: torch.Tensor, batch: int, start: int, stop: int, layout: str) -> torch.Tensor:
    """Frames ``start:stop`` of video ``batch`` as an ``[n, C, H, W]`` view (no copy)."""
    if layout == "BCTHW":
        return video[batch, :, start:stop].transpose(0, 1)
    return video[batch, start:stop]


def frame_chunks(
    reference: torch.Tensor, device: torch.Tensor, layout: str, chunk: int,
    convert: Callable[[torch.Tensor], torch.Tensor],
) -> Iterator[tuple[int, int, torch.Tensor, torch.Tensor]]:
    """``(batch, first_frame, ref_frames, dev_frames)`` for every chunk of at most ``chunk`` frames.

    ``convert`` turns an ``[n, C, H, W]`` view into the compared copy (e.g. clamp to float64).
    """
    total = frame_count(tuple(reference.shape), layout)
    for batch in range(int(reference.shape[0])):
        for start in range(0, total, max(1, int(chunk))):
            stop = min(total, start + int(chunk))
            yield (batch, start, convert(frames(reference, batch, start, stop, layout)),
                   convert(frames(device, batch, start, stop, layout)))
