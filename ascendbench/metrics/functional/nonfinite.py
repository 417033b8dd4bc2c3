"""The NaN/Inf rule of every metric: both NaN or one infinity agree; anything else mismatches."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class NonfiniteCounts:
    """How the positions of two same-shape tensors split under the agreement rule."""

    finite_pairs: int
    agreeing: int
    mismatch: int
    ref_nonfinite: int
    dev_nonfinite: int


def same_nonfinite(ref: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
    """Mask of the agreeing non-finite pairs: both NaN, or both the same infinity."""
    return (torch.isnan(ref) & torch.isnan(dev)) | (torch.isinf(ref) & (ref == dev))


def finite_pairs(ref: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
    """Mask of the positions finite on both sides."""
    return torch.isfinite(ref) & torch.isfinite(dev)


def mismatch_mask(ref: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
    """Mask of the mismatches: neither a finite pair nor an agreeing non-finite pair."""
    return ~(finite_pairs(ref, dev) | same_nonfinite(ref, dev))


def nonfinite_counts(ref: torch.Tensor, dev: torch.Tensor) -> NonfiniteCounts:
    """Finite pairs, agreeing non-finite pairs and mismatches of two same-shape tensors."""
    ref_ok, dev_ok = torch.isfinite(ref), torch.isfinite(dev)
    pairs, agreeing = ref_ok & dev_ok, same_nonfinite(ref, dev)
    return NonfiniteCounts(finite_pairs=int(pairs.sum()), agreeing=int(agreeing.sum()),
                           mismatch=int((~(pairs | agreeing)).sum()),
                           ref_nonfinite=int((~ref_ok).sum()), dev_nonfinite=int((~dev_ok).sum()))


def max_abs_diff(ref: torch.Tensor, dev: torch.Tensor) -> float:
    """The largest ``|dev - ref|`` of the finite pairs; ``inf`` on any mismatch, 0 with no pair."""
    ref, dev = (t.detach().to("cpu", torch.float64).reshape(-1) for t in (ref, dev))
    if bool(mismatch_mask(ref, dev).any()):
        return math.inf
    pairs = finite_pairs(ref, dev)
    diff = (dev[pairs] - ref[pairs]).abs()
    return float(diff.max()) if diff.numel() else 0.0


def neutralize(ref: torch.Tensor, dev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Float64 copies with non-finite pairs zeroed (SSIM, LPIPS cannot skip any), and the count."""
    ref, dev = (t.detach().to("cpu", torch.float64, copy=True) for t in (ref, dev))
    pairs = finite_pairs(ref, dev)
    if bool(pairs.all()):
        return ref, dev, 0
    mismatch = int((~(pairs | same_nonfinite(ref, dev))).sum())
    ref.masked_fill_(~pairs, 0.0)
    dev.masked_fill_(~pairs, 0.0)
    return ref, dev, mismatch


def scalars_agree(ref: float | None, dev: float | None) -> bool | None:
    """Two numbers: True agreeing non-finite, False a mismatch, None both finite (None is NaN)."""
    ref = math.nan if ref is None else float(ref)
    dev = math.nan if dev is None else float(dev)
    if math.isfinite(ref) and math.isfinite(dev):
        return None
    return (math.isnan(ref) and math.isnan(dev)) or ref == dev


def first_index(mask: torch.Tensor, shape: tuple[int, ...], offset: int = 0) -> list[int] | None:
    """Index in ``shape`` of the first ``True`` of a flat ``mask`` starting at flat ``offset``."""
    hits = mask.reshape(-1).nonzero()
    if not hits.numel():
        return None
    flat = offset + int(hits[0, 0])
    return [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))]
