"""A deterministic synthetic video clip with structure: drifting gradients and moving shapes.

Random noise is the worst input for a video tokenizer (nothing to compress, nothing to reconstruct);
a natural video needs a file. This clip has what a tokenizer is built for -- smooth regions, sharp
edges, motion -- and is reproducible from a seed on any host: every random number comes from a CPU
``torch.Generator``. Values lie in ``[-1, 1]``.
"""

from __future__ import annotations

import math

import torch


def _grids(frames: int, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    t = torch.linspace(0.0, 1.0, frames).view(frames, 1, 1)
    y = torch.linspace(-1.0, 1.0, height).view(1, height, 1)
    x = torch.linspace(-1.0, 1.0, width).view(1, 1, width)
    return t, y, x


def _one_clip(frames: int, height: int, width: int, generator: torch.Generator) -> torch.Tensor:
    rand = lambda *shape: torch.rand(shape, generator=generator)  # noqa: E731
    t, y, x = _grids(frames, height, width)
    angle, phase = rand(1) * math.pi, rand(3) * 2 * math.pi
    along = x * torch.cos(angle) + y * torch.sin(angle)
    clip = torch.stack([0.55 * torch.sin(math.pi * along + 2 * math.pi * t + phase[c]) for c in range(3)])
    start, velocity = rand(2, 2) * 1.2 - 0.6, rand(2, 2) * 0.8 - 0.4
    colours = rand(2, 3) * 1.8 - 0.9
    radius, half = 0.2 + 0.2 * rand(1), 0.15 + 0.2 * rand(2)
    cy, cx = start[0, 0] + velocity[0, 0] * t, start[0, 1] + velocity[0, 1] * t
    disc = ((y - cy) ** 2 + (x - cx) ** 2) < radius**2
    ry, rx = start[1, 0] + velocity[1, 0] * t, start[1, 1] + velocity[1, 1] * t
    box = ((y - ry).abs() < half[0]) & ((x - rx).abs() < half[1])
    for shape, colour in ((box, colours[1]), (disc, colours[0])):
        clip = torch.where(shape.unsqueeze(0), colour.view(3, 1, 1, 1), clip)
    return clip.clamp(-1.0, 1.0)


def structured_clip(batch: int, frames: int, height: int, width: int, seed: int) -> torch.Tensor:
    """``[batch, 3, frames, height, width]`` float32 clips in ``[-1, 1]``, one generator per seed.

    Each clip has a colour gradient drifting across the frame over time, a disc and a box moving on
    straight lines, each with its own colour; positions, speeds, colours and phases come from the
    seeded CPU generator, so the same seed gives the same bytes everywhere.

    >>> clip = structured_clip(1, 5, 16, 16, seed=42)
    >>> tuple(clip.shape), bool(clip.min() >= -1) and bool(clip.max() <= 1)
    ((1, 3, 5, 16, 16), True)
    """
    generator = torch.Generator(device="cpu").manual_seed(int(seed))
    return torch.stack([_one_clip(frames, height, width, generator) for _ in range(batch)])
