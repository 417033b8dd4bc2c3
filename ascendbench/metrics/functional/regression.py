"""Pure regression metrics between a reference tensor and a device tensor.

All math runs on CPU in float64. Non-finite elements are counted separately and left out of the
error statistics, so a NaN never hides inside a mean; a NaN/Inf in the device output where the
reference is finite is reported as ``nonfinite_mismatch`` (a failure under the default rules).
"""

from __future__ import annotations

import math

import torch

from ascendbench.errors import MetricError


def _as_float64(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to(device="cpu", dtype=torch.float64)


def psnr_db(mse: float, data_range: float, cap_db: float) -> float:
    """Peak signal-to-noise ratio ``10 log10(range^2 / mse)`` in dB, ``cap_db`` when ``mse == 0``.

    >>> round(psnr_db(1e-4, data_range=1.0, cap_db=200.0), 6)
    40.0
    """
    if mse <= 0.0:
        return float(cap_db)
    return min(float(cap_db), 10.0 * math.log10(data_range**2 / mse))


def cosine_similarity(ref: torch.Tensor, dev: torch.Tensor) -> float:
    """Cosine of the angle between the flattened tensors (1.0 when both are all zeros).

    >>> cosine_similarity(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0]))
    0.7071067811865475
    """
    ref, dev = _as_float64(ref).flatten(), _as_float64(dev).flatten()
    norms = ref.norm() * dev.norm()
    if norms == 0:
        return 1.0 if torch.equal(ref, dev) else 0.0
    return float(torch.dot(ref, dev) / norms)


def regression_metrics(reference: torch.Tensor, device: torch.Tensor, *, eps: float = 1e-6,
                       data_range: float = 2.0, psnr_cap_db: float = 200.0,
                       atol: float = 1e-5, rtol: float = 1.3e-6) -> dict[str, float]:
    """MAE, MSE, RMSE, max abs error, mean/max relative error, cosine, PSNR and allclose mismatch.

    Args:
        reference: the CPU reference output.
        device: the device output (any dtype/device; compared in float64 on CPU).
        eps: added to ``|reference|`` in the relative-error denominator.
        data_range: peak-to-peak range of the signal for PSNR.
        psnr_cap_db: PSNR reported for identical tensors.
        atol, rtol: ``allclose`` tolerances for ``allclose_mismatch_ratio``.

    Raises:
        MetricError: the shapes differ.

    >>> m = regression_metrics(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
    >>> m["mae"], m["max_abs_err"], m["mean_rel_err"] < 0.125001
    (0.25, 0.5, True)
    """
    if tuple(reference.shape) != tuple(device.shape):
        raise MetricError(f"shape mismatch: reference {tuple(reference.shape)} vs device {tuple(device.shape)}")
    ref, dev = _as_float64(reference), _as_float64(device)
    ref_ok, dev_ok = torch.isfinite(ref), torch.isfinite(dev)
    both = ref_ok & dev_ok
    ref_f, dev_f = ref[both], dev[both]
    diff = (dev_f - ref_f).abs()
    rel = diff / (ref_f.abs() + eps)
    mse = float((diff**2).mean()) if diff.numel() else float("nan")
    close = torch.isclose(dev, ref, atol=atol, rtol=rtol, equal_nan=True)
    return {
        "mae": float(diff.mean()) if diff.numel() else float("nan"),
        "mse": mse,
        "rmse": math.sqrt(mse) if mse == mse else float("nan"),
        "max_abs_err": float(diff.max()) if diff.numel() else float("nan"),
        "mean_rel_err": float(rel.mean()) if rel.numel() else float("nan"),
        "max_rel_err": float(rel.max()) if rel.numel() else float("nan"),
        "cosine": cosine_similarity(ref_f, dev_f),
        "psnr_db": psnr_db(mse, data_range, psnr_cap_db) if mse == mse else float("nan"),
        "allclose_mismatch_ratio": float((~close).double().mean()),
        "nonfinite_mismatch": float((ref_ok & ~dev_ok).sum()),
        "numel": float(ref.numel()),
    }
