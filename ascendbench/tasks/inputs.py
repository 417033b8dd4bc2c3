"""Deterministic inputs: drawn on a CPU ``torch.Generator`` so every device sees the same numbers."""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

import torch

from ascendbench.precision import dtype_name


def cpu_randn(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Standard normal float32 tensor from a CPU generator seeded with ``seed``."""
    generator = torch.Generator(device="cpu").manual_seed(int(seed))
    return torch.randn(shape, generator=generator, dtype=torch.float32)


def tensor_sha256(tensor: torch.Tensor) -> str:
    """SHA256 of a tensor's bytes (contiguous, on CPU) as ``sha256:<hex>``."""
    data = tensor.detach().to("cpu").contiguous()
    return "sha256:" + hashlib.sha256(memoryview(data.reshape(-1).view(torch.uint8).numpy())).hexdigest()  # no copy


def describe(tensors: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Shape, dtype and SHA256 of each tensor, for the record."""
    return {
        name: {"shape": list(t.shape), "dtype": dtype_name(t.dtype), "sha256": tensor_sha256(t)}
        for name, t in tensors.items()
    }


PREVIEW = 5  # values shown from each end of a flattened tensor
STATS_CHUNK = 1 << 22  # elements summarised at a time


def tensor_stats(tensor: torch.Tensor, preview: int = PREVIEW) -> dict[str, Any]:
    """Mean, std, min, max, the count of non-finite values and the first/last ``preview`` values.

    The LTX-VAE seed's main evidence for "the same input went in and a sane output came out": computed in
    float64 over the finite elements (``None`` where there are none); integer tensors (token ids) too.

    >>> tensor_stats(torch.tensor([1.0, 2.0, float("inf"), 3.0]), preview=2)["first"]
    [1.0, 2.0]
    """
    flat = tensor.detach().to("cpu").reshape(-1)
    count, mean, m2, low, high = 0, 0.0, 0.0, None, None
    for start in range(0, flat.numel(), STATS_CHUNK):  # float64 a chunk at a time: no full-size copies
        values = flat[start:start + STATS_CHUNK].double()
        finite = values[torch.isfinite(values)]
        n = finite.numel()
        if n == 0:
            continue
        chunk_mean = float(finite.mean())
        chunk_m2 = float(((finite - chunk_mean) ** 2).sum())
        delta, total = chunk_mean - mean, count + n
        mean, m2 = mean + delta * n / total, m2 + chunk_m2 + delta * delta * count * n / total  # Chan et al.
        count = total
        low = float(finite.min()) if low is None else min(low, float(finite.min()))
        high = float(finite.max()) if high is None else max(high, float(finite.max()))
    some = count > 0
    return {
        "mean": mean if some else None,
        "std": (m2 / count) ** 0.5 if some else None,
        "min": low,
        "max": high,
        "nonfinite": int(flat.numel() - count),
        "first": [float(v) for v in flat[:preview].double()],
        "last": [float(v) for v in flat[-preview:].double()] if flat.numel() > preview else [],
    }


def summarize(tensors: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Shape, dtype and :func:`tensor_stats` of each tensor (the record's input/output summaries)."""
    return {name: {"shape": list(t.shape), "dtype": dtype_name(t.dtype), **tensor_stats(t)}
            for name, t in tensors.items()}
