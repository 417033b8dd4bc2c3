"""Deterministic inputs drawn on a CPU ``torch.Generator``, their summaries and their placement."""

from __future__ import annotations

import hashlib
import math
from typing import Any, Mapping

import torch

from ascendbench.precision import dtype_name

STATS_CHUNK = 1 << 22  # elements summarised at a time: no full-size float64 copy of a big output


def cpu_randn(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Standard normal float32 tensor from a CPU generator seeded with ``seed``."""
    generator = torch.Generator(device="cpu").manual_seed(int(seed))
    return torch.randn(shape, generator=generator, dtype=torch.float32)


def structured_clip(batch: int, frames: int, height: int, width: int, seed: int) -> torch.Tensor:
    """``[batch, 3, frames, height, width]`` float32 clips in ``[-1, 1]``: a drifting colour
    gradient, a disc and a box moving on straight lines (seeded on the CPU: the same everywhere).
    >>> clip = structured_clip(1, 5, 16, 16, seed=42)
    >>> tuple(clip.shape), bool(clip.min() >= -1) and bool(clip.max() <= 1)
    ((1, 3, 5, 16, 16), True)"""
    generator = torch.Generator(device="cpu").manual_seed(int(seed))
    t = torch.linspace(0.0, 1.0, frames).view(frames, 1, 1)
    y = torch.linspace(-1.0, 1.0, height).view(1, height, 1)
    x = torch.linspace(-1.0, 1.0, width).view(1, 1, width)
    clips = []
    for _ in range(batch):
        angle, phase, start, velocity, colours, radius, half = (
            torch.rand(shape, generator=generator) for shape in ((1,), (3,), (2, 2), (2, 2), (2, 3),
                                                                  (1,), (2,)))
        angle, phase, start = angle * math.pi, phase * 2 * math.pi, start * 1.2 - 0.6
        velocity, colours = velocity * 0.8 - 0.4, colours * 1.8 - 0.9
        radius, half = 0.2 + 0.2 * radius, 0.15 + 0.2 * half
        along = x * torch.cos(angle) + y * torch.sin(angle)
        clip = torch.stack([0.55 * torch.sin(math.pi * along + 2 * math.pi * t + phase[c])
                            for c in range(3)])
        cy, cx = start[0, 0] + velocity[0, 0] * t, start[0, 1] + velocity[0, 1] * t
        disc = ((y - cy) ** 2 + (x - cx) ** 2) < radius**2
        ry, rx = start[1, 0] + velocity[1, 0] * t, start[1, 1] + velocity[1, 1] * t
        box = ((y - ry).abs() < half[0]) & ((x - rx).abs() < half[1])
        for shape, colour in ((box, colours[1]), (disc, colours[0])):
            clip = torch.where(shape.unsqueeze(0), colour.view(3, 1, 1, 1), clip)
        clips.append(clip.clamp(-1.0, 1.0))
    return torch.stack(clips)


def tensor_sha256(tensor: torch.Tensor) -> str:
    """SHA256 of a tensor's bytes (contiguous, on CPU) as ``sha256:<hex>``."""
    data = tensor.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy()
    return "sha256:" + hashlib.sha256(memoryview(data)).hexdigest()


def describe(tensors: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Shape, dtype and SHA256 of each tensor, for the record."""
    return {name: {"shape": list(t.shape), "dtype": dtype_name(t.dtype), "sha256": tensor_sha256(t)}
            for name, t in tensors.items()}


def tensor_stats(tensor: torch.Tensor, preview: int = 5) -> dict[str, Any]:
    """Mean, std, min, max of the finite elements, the non-finite count, first/last values.
    >>> tensor_stats(torch.tensor([1.0, 2.0, float("inf"), 3.0]), preview=2)["first"]
    [1.0, 2.0]"""
    flat = tensor.detach().to("cpu").reshape(-1)
    count, mean, m2, low, high = 0, 0.0, 0.0, math.inf, -math.inf
    for start in range(0, flat.numel(), STATS_CHUNK):
        values = flat[start:start + STATS_CHUNK].double()
        finite = values[torch.isfinite(values)]
        if finite.numel():  # merge the chunk's mean and squares (Chan et al.)
            n, chunk_mean = finite.numel(), float(finite.mean())
            delta, total = chunk_mean - mean, count + n
            m2 += float(((finite - chunk_mean) ** 2).sum()) + delta * delta * count * n / total
            mean, count = mean + delta * n / total, total
            low, high = min(low, float(finite.min())), max(high, float(finite.max()))
    some = count > 0
    return {"mean": mean if some else None, "std": (m2 / count) ** 0.5 if some else None,
            "min": low if some else None, "max": high if some else None,
            "nonfinite": int(flat.numel() - count), "first": flat[:preview].double().tolist(),
            "last": flat[-preview:].double().tolist() if flat.numel() > preview else []}


def summarize(tensors: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Shape, dtype and :func:`tensor_stats` of each tensor (the record's summaries)."""
    return {name: {"shape": list(t.shape), "dtype": dtype_name(t.dtype), **tensor_stats(t)}
            for name, t in tensors.items()}


def place(task: Any, model: Any, device: torch.device | str, dtype: torch.dtype) -> Any:
    """``task.to(model, torch.device(device), dtype)``: the model on ``device`` in ``dtype``."""
    return task.to(model, torch.device(device), dtype)


def move_inputs(inputs: Mapping[str, torch.Tensor], device: torch.device | str,
                dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Tensors on ``device``; floating-point ones cast to ``dtype``, the others (ids) kept."""
    return {k: v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
            for k, v in inputs.items()}
