"""Pure element-wise regression metrics between a reference tensor and a device tensor.

The tensors are walked in flat chunks of ``chunk_elements``; each chunk is converted to float64 on the
CPU, reduced to a few partial sums (:func:`chunk_sums`), and the sums are merged
(:func:`merge_sums`) and turned into metrics (:func:`finalize`). A pair of large videos therefore never
needs float64 copies of the whole tensors, and the result does not depend on the chunk size beyond
float64 rounding of the sums.

Conventions (after Ascend msprobe's accuracy checker):

* NaN and Inf follow the agreement rule of :mod:`ascendbench.metrics.functional.nonfinite`: the error
  statistics are computed over the finite pairs; agreeing non-finite pairs (NaN/NaN, the same infinity)
  add no error; every other pair is counted by ``nonfinite_mismatch`` (any such element fails the job).
  Over an empty set of finite pairs the statistics are those of identical tensors when nothing
  mismatches, and NaN when something does. ``ref_nonfinite`` and ``dev_nonfinite`` count each side's
  NaN/Inf (a non-finite reference is judged by the metric suite: ``reference_nonfinite``).
* Relative error is ``|dev - ref| / (|ref| + eps)`` over the elements with ``|ref| >= small_value``;
  the "small-value" elements below that are judged by an absolute tolerance instead
  (``small_value_err_ratio``: share of them with ``|dev - ref| > small_value_atol``). With no element
  above ``small_value`` the relative metrics are vacuous: errors 0, ratios 1.
* ``error_balance`` is ``|#(dev > ref) - #(dev < ref)| / n``: 0 for unbiased errors, 1 when every
  element errs in the same direction (msprobe's 误差均衡性).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Iterator, Mapping

import torch

from ascendbench.errors import MetricError
from ascendbench.metrics.functional.nonfinite import finite_pairs, first_index, mismatch_mask, nonfinite_counts

# Partial sums merged by addition and by maximum.
SUM_KEYS = ("numel", "n_finite", "sum_abs", "sum_sq", "n_big", "sum_rel", "n_rel_1e3", "n_rel_5e3",
            "n_small", "n_small_err", "dot", "ref_sq", "dev_sq", "sign_sum", "n_not_close",
            "nonfinite_mismatch", "ref_nonfinite", "dev_nonfinite")
MAX_KEYS = ("max_abs", "max_rel")
DEFAULT_CHUNK = 1 << 20


@dataclass(frozen=True)
class ErrorTolerances:
    """How element-wise errors are judged (see the module docstring for the conventions).

    Attributes:
        eps: added to ``|reference|`` in the relative-error denominator.
        atol, rtol: ``allclose`` tolerances for ``allclose_mismatch_ratio``.
        small_value: reference magnitudes below this are judged by ``small_value_atol``, not relatively.
        small_value_atol: absolute tolerance of the small-value elements.
    """

    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1.3e-6
    small_value: float = 1e-6
    small_value_atol: float = 1e-9

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], **given: float) -> "ErrorTolerances":
        """Tolerances named in ``values`` (other keys and ``None`` skipped), then ``given``; the rest default.

        >>> ErrorTolerances.from_mapping({"atol": 1e-3, "rtol": 0.0, "fail_on": "any"}, eps=0.0).atol
        0.001
        """
        names = {f.name for f in fields(cls)}
        chosen = {k: float(v) for k, v in values.items() if k in names and v is not None}
        return cls(**{**chosen, **{k: float(v) for k, v in given.items()}})


def _as_float64(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to(device="cpu", dtype=torch.float64)


def psnr_db(mse: float, data_range: float, cap_db: float) -> float:
    """Peak signal-to-noise ratio ``10 log10(range^2 / mse)`` in dB, ``cap_db`` when ``mse == 0``.

    >>> round(psnr_db(1e-4, data_range=1.0, cap_db=200.0), 6)
    40.0
    >>> psnr_db(0.0, data_range=2.0, cap_db=200.0)
    200.0
    """
    if math.isnan(mse):
        return float("nan")
    if mse <= 0.0:
        return float(cap_db)
    return min(float(cap_db), 10.0 * math.log10(data_range**2 / mse))


def cosine_from_sums(dot: float, ref_sq: float, dev_sq: float) -> float:
    """Cosine similarity from ``<ref, dev>``, ``|ref|^2`` and ``|dev|^2``; 1.0 when both are all zeros.

    >>> cosine_from_sums(1.0, 1.0, 2.0)
    0.7071067811865475
    """
    if ref_sq == 0.0 and dev_sq == 0.0:
        return 1.0
    if ref_sq == 0.0 or dev_sq == 0.0:
        return 0.0
    return max(-1.0, min(1.0, dot / math.sqrt(ref_sq * dev_sq)))


def cosine_similarity(ref: torch.Tensor, dev: torch.Tensor) -> float:
    """Cosine of the angle between the flattened tensors (1.0 when both are all zeros).

    >>> cosine_similarity(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0]))
    0.7071067811865475
    """
    ref, dev = _as_float64(ref).flatten(), _as_float64(dev).flatten()
    return cosine_from_sums(float(torch.dot(ref, dev)), float(torch.dot(ref, ref)), float(torch.dot(dev, dev)))




def chunk_sums(ref: torch.Tensor, dev: torch.Tensor, tolerances: ErrorTolerances) -> dict[str, float]:
    """Partial sums of one chunk (any shape, any dtype; reduced in float64 on the CPU).

    The common all-finite case is detected with one sum per tensor and then needs no masks; the
    temporaries are the two float64 copies plus about three chunk-sized arrays.
    """
    eps, small_value = tolerances.eps, tolerances.small_value
    ref, dev = _as_float64(ref).reshape(-1), _as_float64(dev).reshape(-1)
    numel = ref.numel()
    mismatch = ref_bad = dev_bad = 0
    if not bool(torch.isfinite(ref.sum() + dev.sum())):
        counts = nonfinite_counts(ref, dev)
        mismatch, ref_bad, dev_bad = counts.mismatch, counts.ref_nonfinite, counts.dev_nonfinite
        both = finite_pairs(ref, dev)
        ref, dev = ref[both], dev[both]
    diff = dev - ref
    sign_sum = float(torch.sign(diff).sum())
    abs_diff = diff.abs_()
    magnitude = ref.abs()
    n_not_close = int((abs_diff > magnitude * tolerances.rtol + tolerances.atol).sum())
    all_big = ref.numel() == 0 or float(magnitude.min()) >= small_value
    big = None if all_big else magnitude >= small_value
    n_big = ref.numel() if all_big else int(big.sum())
    n_small_err = 0 if all_big else int(((abs_diff > tolerances.small_value_atol) & ~big).sum())
    rel = torch.div(abs_diff, magnitude.add_(eps), out=magnitude)
    if eps == 0.0:
        rel.nan_to_num_(nan=0.0)  # 0 / 0 where the reference and the error are both zero
    if big is not None:
        rel.masked_fill_(~big, 0.0)  # small values are judged by small_value_atol instead
    n_rel_1e3, n_rel_5e3 = int((rel < 1e-3).sum()), int((rel < 5e-3).sum())
    if big is not None:  # the masked small values counted as "below" above; take them out again
        n_rel_1e3, n_rel_5e3 = n_rel_1e3 - (ref.numel() - n_big), n_rel_5e3 - (ref.numel() - n_big)
    return {
        "numel": numel, "n_finite": ref.numel(),
        "sum_abs": float(abs_diff.sum()), "sum_sq": float(torch.dot(abs_diff, abs_diff)),
        "max_abs": float(abs_diff.max()) if ref.numel() else 0.0,
        "n_big": n_big, "sum_rel": float(rel.sum()), "max_rel": float(rel.max()) if n_big else 0.0,
        "n_rel_1e3": n_rel_1e3, "n_rel_5e3": n_rel_5e3,
        "n_small": ref.numel() - n_big, "n_small_err": n_small_err,
        "dot": float(torch.dot(ref, dev)), "ref_sq": float(torch.dot(ref, ref)), "dev_sq": float(torch.dot(dev, dev)),
        "sign_sum": sign_sum, "n_not_close": n_not_close + mismatch,
        "nonfinite_mismatch": mismatch, "ref_nonfinite": ref_bad, "dev_nonfinite": dev_bad,
    }


def merge_sums(a: dict[str, float] | None, b: dict[str, float]) -> dict[str, float]:
    """Combine the partial sums of two chunks."""
    if a is None:
        return dict(b)
    merged = {k: a[k] + b[k] for k in SUM_KEYS}
    merged.update({k: max(a[k], b[k]) for k in MAX_KEYS})
    return merged


def _ratio(num: float, den: float, empty: float) -> float:
    return num / den if den else empty


def finalize(sums: dict[str, float], *, data_range: float, psnr_cap_db: float) -> dict[str, float]:
    """Metrics from merged partial sums (see the module docstring for the conventions).

    >>> finalize(chunk_sums(torch.full((2,), float("inf")), torch.full((2,), float("inf")), ErrorTolerances()),
    ...          data_range=2.0, psnr_cap_db=200.0)["max_abs_err"]
    0.0
    """
    n = sums["n_finite"]
    # Empty set of finite pairs: the statistics of identical tensors if every position agrees, else NaN.
    empty = float("nan") if sums["nonfinite_mismatch"] else 0.0
    mse = sums["sum_sq"] / n if n else empty
    return {
        "mae": sums["sum_abs"] / n if n else empty,
        "mse": mse,
        "rmse": math.sqrt(mse),
        "max_abs_err": sums["max_abs"] if n else empty,
        "mean_rel_err": _ratio(sums["sum_rel"], sums["n_big"], 0.0),
        "max_rel_err": sums["max_rel"],
        "one_thousandth_err_ratio": _ratio(sums["n_rel_1e3"], sums["n_big"], 1.0),
        "five_thousandths_err_ratio": _ratio(sums["n_rel_5e3"], sums["n_big"], 1.0),
        "small_value_err_ratio": _ratio(sums["n_small_err"], sums["n_small"], 0.0),
        "cosine": cosine_from_sums(sums["dot"], sums["ref_sq"], sums["dev_sq"]) if n else 1.0 + empty,
        "psnr_db": psnr_db(mse, data_range, psnr_cap_db),
        "allclose_mismatch_ratio": _ratio(sums["n_not_close"], sums["numel"], 0.0),
        "error_balance": _ratio(abs(sums["sign_sum"]), n, 0.0),
        "nonfinite_mismatch": float(sums["nonfinite_mismatch"]),
        "ref_nonfinite": float(sums["ref_nonfinite"]),
        "dev_nonfinite": float(sums["dev_nonfinite"]),
        "numel": float(sums["numel"]),
    }


def flat_chunks(reference: torch.Tensor, device: torch.Tensor,
                chunk: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Matching flat slices of two same-shape tensors (views where the tensors are contiguous)."""
    ref, dev = reference.detach().reshape(-1), device.detach().reshape(-1)
    for start in range(0, max(ref.numel(), 1), chunk):
        yield ref[start:start + chunk], dev[start:start + chunk]


def first_nonfinite_mismatch(reference: torch.Tensor, device: torch.Tensor,
                             chunk_elements: int = DEFAULT_CHUNK) -> list[int] | None:
    """Index (in the tensors' shape) of the first element ``nonfinite_mismatch`` counts, or ``None``.

    >>> first_nonfinite_mismatch(torch.zeros(2, 3), torch.tensor([[0.0, 0, 0], [0, float("nan"), 0]]))
    [1, 1]
    """
    offset = 0
    for ref, dev in flat_chunks(reference, device, int(chunk_elements)):
        found = first_index(mismatch_mask(_as_float64(ref), _as_float64(dev)), tuple(reference.shape), offset)
        if found is not None:
            return found
        offset += ref.numel()
    return None


def check_same_shape(reference: torch.Tensor, device: torch.Tensor, what: str = "output") -> None:
    """Raise :class:`MetricError` when the shapes differ."""
    if tuple(reference.shape) != tuple(device.shape):
        raise MetricError(
            f"{what}: shape mismatch, reference {tuple(reference.shape)} vs device {tuple(device.shape)}. "
            "Reference and device must run the same task on the same inputs; check the preset and the "
            "model's task for device-specific branches."
        )


def regression_metrics(reference: torch.Tensor, device: torch.Tensor, tolerances: ErrorTolerances | None = None, *,
                       data_range: float = 2.0, psnr_cap_db: float = 200.0,
                       chunk_elements: int = DEFAULT_CHUNK) -> dict[str, float]:
    """MAE, MSE, RMSE, max abs error, relative errors, cosine, PSNR, allclose and NaN/Inf checks.

    Args:
        reference: the CPU reference output.
        device: the device output (any dtype/device; compared in float64 on CPU, chunk by chunk).
        tolerances: ``eps``, ``atol``/``rtol`` and the small-value rule (:class:`ErrorTolerances`;
            ``None``: its defaults).
        data_range: peak-to-peak range of the signal for PSNR.
        psnr_cap_db: PSNR reported for identical tensors.
        chunk_elements: elements converted to float64 at a time.

    Raises:
        MetricError: the shapes differ.

    >>> m = regression_metrics(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
    >>> m["mae"], m["max_abs_err"], round(m["mean_rel_err"], 6), m["error_balance"]
    (0.25, 0.5, 0.125, 0.5)
    """
    check_same_shape(reference, device)
    tolerances = tolerances or ErrorTolerances()
    sums = None
    for ref_chunk, dev_chunk in flat_chunks(reference, device, int(chunk_elements)):
        sums = merge_sums(sums, chunk_sums(ref_chunk, dev_chunk, tolerances))
    return finalize(sums, data_range=data_range, psnr_cap_db=psnr_cap_db)
