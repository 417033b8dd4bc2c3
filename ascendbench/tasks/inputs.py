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
    return "sha256:" + hashlib.sha256(data.view(torch.uint8).numpy().tobytes()).hexdigest()


def describe(tensors: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """Shape, dtype and SHA256 of each tensor, for the record."""
    return {
        name: {"shape": list(t.shape), "dtype": dtype_name(t.dtype), "sha256": tensor_sha256(t)}
        for name, t in tensors.items()
    }
