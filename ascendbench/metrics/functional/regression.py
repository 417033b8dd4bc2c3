"""Element-wise regression metrics from float64 partial sums of flat chunks (no whole copy)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Iterator, Mapping

import torch

from ascendbench.errors import MetricError
from ascendbench.metrics.functional import nonfinite

MAX_KEYS = ("max_abs", "max_rel")  # partial sums merged by maximum; the others by addition
DEFAULT_CHUNK = 1 << 20


@dataclass(frozen=True)
class ErrorTolerances:
    """``eps`` pads ``|ref|``; ``atol``/``rtol``: allclose's; below ``small_value``: absolute."""

    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1.3e-6
    small_value: float = 1e-6
    small_value_atol: float = 1e-9
    small_value_bound: float = 2.0**-11

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], **given: float) -> ErrorTolerances:
        """Tolerances named in ``values`` (other keys and ``None`` skipped), then ``given``."""
        names = {f.name for f in fields(cls)}
        chosen = {k: float(v) for k, v in values.items() if k in names and v is not None}
        return cls(**{**chosen, **{k: float(v) for k, v in given.items()}})


def _as_float64(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to(device="cpu", dtype=torch.float64)


def psnr_db(mse: float, data_range: float, cap_db: float) -> float:
    """``10 log10(range^2 / mse)`` in dB, ``cap_db`` for ``mse == 0``, NaN for a NaN ``mse``."""
    if math.isnan(mse):
        return float("nan")
    if mse <= 0.0:
        return float(cap_db)
    return min(float(cap_db), 10.0 * math.log10(data_range**2 / mse))


def _cosine(dot: float, ref_sq: float, dev_sq: float) -> float:
    if ref_sq == 0.0 or dev_sq == 0.0:
        return 1.0 if ref_sq == dev_sq else 0.0
    return max(-1.0, min(1.0, dot / math.sqrt(ref_sq * dev_sq)))


def chunk_sums(ref: torch.Tensor, dev: torch.Tensor, tol: ErrorTolerances) -> dict[str, float]:
    """Partial sums of one chunk (any shape and dtype), reduced in float64 on the CPU."""
    ref, dev = _as_float64(ref).reshape(-1), _as_float64(dev).reshape(-1)
    numel = ref.numel()
    mismatch = ref_bad = dev_bad = 0
    if not bool(torch.isfinite(ref.sum() + dev.sum())):  # the common all-finite case needs no masks
        counts = nonfinite.nonfinite_counts(ref, dev)
        mismatch, ref_bad, dev_bad = counts.mismatch, counts.ref_nonfinite, counts.dev_nonfinite
        both = nonfinite.finite_pairs(ref, dev)
        ref, dev = ref[both], dev[both]
    diff = dev - ref
    sign_sum = float(torch.sign(diff).sum())
    abs_diff = diff.abs_()
    magnitude = ref.abs()
    n_not_close = int((abs_diff > magnitude * tol.rtol + tol.atol).sum())
    small = magnitude < tol.small_value
    n_small = int(small.sum())
    n_small_err = int(((abs_diff > tol.small_value_atol) & small).sum()) if n_small else 0
    n_small_far = int(((abs_diff > tol.small_value_bound) & small).sum()) if n_small else 0
    rel = torch.div(abs_diff, magnitude.add_(tol.eps), out=magnitude)
    if tol.eps == 0.0:
        rel.nan_to_num_(nan=0.0)  # 0 / 0 where the reference and the error are both zero
    big = rel[~small] if n_small else rel  # small values are judged by small_value_atol instead
    return {
        "numel": numel, "n_finite": ref.numel(), "sum_abs": float(abs_diff.sum()),
        "sum_sq": float(torch.dot(abs_diff, abs_diff)),
        "max_abs": float(abs_diff.max()) if ref.numel() else 0.0, "n_big": big.numel(),
        "sum_rel": float(big.sum()), "max_rel": float(big.max()) if big.numel() else 0.0,
        "n_rel_1e3": int((big < 1e-3).sum()), "n_rel_5e3": int((big < 5e-3).sum()),
        "n_small": n_small, "n_small_err": n_small_err, "n_small_far": n_small_far,
        "dot": float(torch.dot(ref, dev)), "ref_sq": float(torch.dot(ref, ref)),
        "dev_sq": float(torch.dot(dev, dev)), "sign_sum": sign_sum,
        "n_not_close": n_not_close + mismatch, "nonfinite_mismatch": mismatch,
        "ref_nonfinite": ref_bad, "dev_nonfinite": dev_bad}


def _ratio(num: float, den: float, empty: float) -> float:
    return num / den if den else empty


def finalize(sums: dict[str, float], *, data_range: float, psnr_cap_db: float) -> dict[str, float]:
    """Metrics from merged partial sums."""
    n = sums["n_finite"]
    # No finite pair: the statistics of identical tensors if every position agrees, else NaN.
    empty = float("nan") if sums["nonfinite_mismatch"] else 0.0
    mse = sums["sum_sq"] / n if n else empty
    return {
        "mae": sums["sum_abs"] / n if n else empty, "mse": mse, "rmse": math.sqrt(mse),
        "max_abs_err": sums["max_abs"] if n else empty,
        "mean_rel_err": _ratio(sums["sum_rel"], sums["n_big"], 0.0), "max_rel_err": sums["max_rel"],
        "one_thousandth_err_ratio": _ratio(sums["n_rel_1e3"], sums["n_big"], 1.0),
        "five_thousandths_err_ratio": _ratio(sums["n_rel_5e3"], sums["n_big"], 1.0),
        "small_value_err_ratio": _ratio(sums["n_small_err"], sums["n_small"], 0.0),
        "small_value_abs_err_ratio": _ratio(sums["n_small_far"], sums["n_small"], 0.0),
        "cosine": _cosine(sums["dot"], sums["ref_sq"], sums["dev_sq"]) if n else 1.0 + empty,
        "psnr_db": psnr_db(mse, data_range, psnr_cap_db),
        "allclose_mismatch_ratio": _ratio(sums["n_not_close"], sums["numel"], 0.0),
        "error_balance": _ratio(abs(sums["sign_sum"]), n, 0.0),
        "nonfinite_mismatch": float(sums["nonfinite_mismatch"]),
        "ref_nonfinite": float(sums["ref_nonfinite"]),
        "dev_nonfinite": float(sums["dev_nonfinite"]), "numel": float(sums["numel"])}


def _flat_chunks(reference: torch.Tensor, device: torch.Tensor,
                 chunk: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    ref, dev = reference.detach().reshape(-1), device.detach().reshape(-1)
    for start in range(0, max(ref.numel(), 1), chunk):
        yield ref[start:start + chunk], dev[start:start + chunk]


def first_nonfinite_mismatch(reference: torch.Tensor, device: torch.Tensor,
                             chunk_elements: int = DEFAULT_CHUNK) -> list[int] | None:
    """Index (in the tensors' shape) of the first element ``nonfinite_mismatch`` counts."""
    offset = 0
    for ref, dev in _flat_chunks(reference, device, int(chunk_elements)):
        mask = nonfinite.mismatch_mask(_as_float64(ref), _as_float64(dev))
        found = nonfinite.first_index(mask, tuple(reference.shape), offset)
        if found is not None:
            return found
        offset += ref.numel()
    return None


def check_same_shape(reference: torch.Tensor, device: torch.Tensor) -> None:
    """Raise :class:`MetricError` when the shapes differ."""
    if tuple(reference.shape) != tuple(device.shape):
        raise MetricError(
            f"output: shape mismatch, reference {tuple(reference.shape)} vs device "
            f"{tuple(device.shape)}. Reference and device must run the same task on the same "
            "inputs; check the preset and the model's task for device-specific branches.")


def regression_metrics(reference: torch.Tensor, device: torch.Tensor,
                       tolerances: ErrorTolerances | None = None, *, data_range: float = 2.0,
                       psnr_cap_db: float = 200.0,
                       chunk_elements: int = DEFAULT_CHUNK) -> dict[str, Any]:
    """MAE, MSE, max abs/rel errors, cosine (unjudged below ``small_value``), PSNR, allclose."""
    check_same_shape(reference, device)
    tolerances = tolerances or ErrorTolerances()
    sums: dict[str, float] = {}
    for ref_chunk, dev_chunk in _flat_chunks(reference, device, int(chunk_elements)):
        part = chunk_sums(ref_chunk, dev_chunk, tolerances)
        sums = {k: max(sums[k], v) if k in MAX_KEYS else sums[k] + v
                for k, v in part.items()} if sums else part
    metrics: dict[str, Any] = finalize(sums, data_range=data_range, psnr_cap_db=psnr_cap_db)
    floor = sums["n_finite"] * tolerances.small_value**2
    if sums["ref_sq"] < floor and sums["dev_sq"] < floor:
        metrics["cosine"] = {"value": metrics["cosine"], "not_judged": "both norms below what the "
                             f"dtype resolves (RMS < small_value {tolerances.small_value:g})"}
    return metrics
