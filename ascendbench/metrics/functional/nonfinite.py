"""Non-finite agreement: the one rule by which every metric, check and verdict treats NaN and Inf.

Position by position, a reference value ``r`` and a device value ``d`` (or two runs of the device) form

* a **finite pair**: both finite. Error statistics (MAE, max abs error, cosine, PSNR, SSIM, LPIPS, the
  determinism check's difference...) are computed over the finite pairs only;
* an **agreeing non-finite pair**: both NaN, both ``+inf`` or both ``-inf``. It adds no error to any
  statistic and is no mismatch: two runs that overflow in the same places agree there;
* a **mismatch**: any other pair (one side finite and the other not, NaN against Inf, ``+inf`` against
  ``-inf``). Mismatches are counted (``nonfinite_mismatch``) and any mismatch fails the job.

A statistic over an empty set of finite pairs takes the value of identical tensors when no position
mismatches (errors 0, cosine 1, PSNR at its cap) and NaN -- a failure under every rule -- when one does.
A single difference (:func:`max_abs_diff`) is infinite when any position mismatches.

Agreement is not validity: a non-finite value is a finding of its own wherever it appears. A reference
with NaN/Inf cannot vouch for a device output (``reference_nonfinite`` fails), and a device output with
NaN/Inf fails the output validation (``output_nonfinite``) with or without a reference
(:mod:`ascendbench.metrics.validate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class NonfiniteCounts:
    """How the positions of two same-shape tensors split under the agreement rule.

    Attributes:
        finite_pairs: positions finite on both sides.
        agreeing: positions non-finite on both sides with the same value (NaN/NaN, +inf/+inf, -inf/-inf).
        mismatch: every other position.
        ref_nonfinite: non-finite positions of the reference (first) tensor.
        dev_nonfinite: non-finite positions of the device (second) tensor.
    """

    finite_pairs: int
    agreeing: int
    mismatch: int
    ref_nonfinite: int
    dev_nonfinite: int


def same_nonfinite(ref: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
    """Mask of the agreeing non-finite pairs: both NaN, or both the same infinity.

    >>> nan, inf = float("nan"), float("inf")
    >>> same_nonfinite(torch.tensor([nan, inf, inf, 1.0]), torch.tensor([nan, inf, -inf, 1.0])).tolist()
    [True, True, False, False]
    """
    both_nan = torch.isnan(ref) & torch.isnan(dev)
    same_inf = torch.isinf(ref) & (ref == dev)
    return both_nan | same_inf


def finite_pairs(ref: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
    """Mask of the positions finite on both sides."""
    return torch.isfinite(ref) & torch.isfinite(dev)


def mismatch_mask(ref: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
    """Mask of the mismatches: neither a finite pair nor an agreeing non-finite pair.

    >>> nan, inf = float("nan"), float("inf")
    >>> mismatch_mask(torch.tensor([nan, 1.0, inf, 2.0]), torch.tensor([nan, nan, -inf, 2.0])).tolist()
    [False, True, True, False]
    """
    return ~(finite_pairs(ref, dev) | same_nonfinite(ref, dev))


def nonfinite_counts(ref: torch.Tensor, dev: torch.Tensor) -> NonfiniteCounts:
    """Count the finite pairs, agreeing non-finite pairs and mismatches of two same-shape tensors.

    >>> nan, inf = float("nan"), float("inf")
    >>> nonfinite_counts(torch.tensor([nan, inf, 1.0, 2.0]), torch.tensor([nan, inf, inf, 2.0]))
    NonfiniteCounts(finite_pairs=1, agreeing=2, mismatch=1, ref_nonfinite=2, dev_nonfinite=3)
    """
    ref_ok, dev_ok = torch.isfinite(ref), torch.isfinite(dev)
    agreeing = same_nonfinite(ref, dev)
    pairs = ref_ok & dev_ok
    return NonfiniteCounts(finite_pairs=int(pairs.sum()), agreeing=int(agreeing.sum()),
                           mismatch=int((~(pairs | agreeing)).sum()), ref_nonfinite=int((~ref_ok).sum()),
                           dev_nonfinite=int((~dev_ok).sum()))


def max_abs_diff(ref: torch.Tensor, dev: torch.Tensor) -> float:
    """The largest ``|dev - ref|`` under the agreement rule: over the finite pairs, ``inf`` on any mismatch.

    Agreeing non-finite pairs add nothing; with no finite pair and no mismatch the difference is 0.

    >>> inf = float("inf")
    >>> max_abs_diff(torch.tensor([inf, 1.0, float("nan")]), torch.tensor([inf, 1.5, float("nan")]))
    0.5
    >>> max_abs_diff(torch.tensor([inf, 1.0]), torch.tensor([-inf, 1.0]))
    inf
    """
    ref = ref.detach().to("cpu", torch.float64).reshape(-1)
    dev = dev.detach().to("cpu", torch.float64).reshape(-1)
    if bool(mismatch_mask(ref, dev).any()):
        return math.inf
    pairs = finite_pairs(ref, dev)
    diff = (dev[pairs] - ref[pairs]).abs()
    return float(diff.max()) if diff.numel() else 0.0


def same_values(ref: torch.Tensor, dev: torch.Tensor) -> bool:
    """Whether two tensors hold the same values under the agreement rule (NaN where the other has NaN).

    Unlike :func:`torch.equal`, two identical outputs holding NaN are the same.

    >>> same_values(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]))
    True
    """
    if tuple(ref.shape) != tuple(dev.shape):
        return False
    return max_abs_diff(ref, dev) == 0.0


def neutralize(ref: torch.Tensor, dev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Float64 CPU copies with every position that is not a finite pair set to 0 on both sides, and the mismatches.

    For statistics that cannot leave positions out (SSIM's windows, LPIPS): a neutralised position is a
    pixel with no error; whether it agreed is judged by the returned mismatch count.

    >>> r, d, bad = neutralize(torch.tensor([float("inf"), 1.0]), torch.tensor([float("inf"), float("nan")]))
    >>> r.tolist(), d.tolist(), bad
    ([0.0, 0.0], [0.0, 0.0], 1)
    """
    ref = ref.detach().to("cpu", torch.float64, copy=True)
    dev = dev.detach().to("cpu", torch.float64, copy=True)
    pairs = finite_pairs(ref, dev)
    if bool(pairs.all()):
        return ref, dev, 0
    mismatch = int((~(pairs | same_nonfinite(ref, dev))).sum())
    ref.masked_fill_(~pairs, 0.0)
    dev.masked_fill_(~pairs, 0.0)
    return ref, dev, mismatch


def scalars_agree(ref: float | None, dev: float | None) -> bool | None:
    """The rule for two numbers: ``True`` for agreeing non-finite values, ``False`` for a mismatch,
    ``None`` for two finite numbers (compare them as numbers). ``None`` inputs count as NaN.

    >>> scalars_agree(float("inf"), float("inf")), scalars_agree(float("nan"), 1.0), scalars_agree(1.0, 2.0)
    (True, False, None)
    """
    ref = math.nan if ref is None else float(ref)
    dev = math.nan if dev is None else float(dev)
    if math.isfinite(ref) and math.isfinite(dev):
        return None
    return (math.isnan(ref) and math.isnan(dev)) or ref == dev


def first_index(mask: torch.Tensor, shape: tuple[int, ...], offset: int = 0) -> list[int] | None:
    """Index in ``shape`` of the first ``True`` of a flat ``mask`` that starts at flat ``offset``; ``None`` if none.

    >>> first_index(torch.tensor([False, False, True]), (2, 3), offset=3)
    [1, 2]
    """
    hits = mask.reshape(-1).nonzero()
    if not hits.numel():
        return None
    flat = offset + int(hits[0, 0])
    return [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))]
