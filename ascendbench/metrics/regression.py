"""The ``regression`` evaluator: element-wise metrics of every floating-point output, with verdicts."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.metrics.base import Evaluator
from ascendbench.metrics.functional.regression import (DEFAULT_CHUNK, check_same_shape, first_nonfinite_mismatch,
                                                     regression_metrics)
from ascendbench.metrics.verdict import merge_rules

# Not configurable: a NaN/Inf that the reference does not have is always a failure.
ALWAYS_RULES = {
    "nonfinite_mismatch": {"max": 0, "source": "built in: a NaN/Inf in the device output where the reference "
                                                "has a finite value (or another non-finite value) always fails"},
}


class RegressionEvaluator(Evaluator):
    """Compare each floating-point output tensor of the device run with the reference.

    Args:
        name: evaluator name (recorded).
        eps: relative-error denominator padding (``|ref| + eps``).
        data_range: PSNR peak-to-peak range of the outputs.
        psnr_cap_db: PSNR of identical tensors.
        small_value: reference magnitudes below it are judged absolutely; ``None`` takes the dtype's.
        small_value_atol: absolute tolerance of those small values; ``None`` takes the dtype's.
        chunk_elements: elements converted to float64 at a time.
        outputs: output names to compare (``None``: every floating-point output).
        thresholds: per-metric rule overrides (highest priority).
    """

    higher_is_better = {"cosine": True, "psnr_db": True, "one_thousandth_err_ratio": True,
                        "five_thousandths_err_ratio": True}
    what = "floating-point outputs"

    def __init__(self, name: str = "regression", eps: float = 1e-6, data_range: float = 2.0,
                 psnr_cap_db: float = 200.0, small_value: float | None = None,
                 small_value_atol: float | None = None, chunk_elements: int = DEFAULT_CHUNK,
                 outputs: list[str] | None = None, thresholds: Mapping[str, Any] | None = None) -> None:
        super().__init__(name, outputs, thresholds)
        self.eps = float(eps)
        self.data_range = float(data_range)
        self.psnr_cap_db = float(psnr_cap_db)
        self.small_value = small_value
        self.small_value_atol = small_value_atol
        self.chunk_elements = int(chunk_elements)

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """Floating-point tensors of any shape."""
        return tensor.is_floating_point()

    def compute(self, reference: torch.Tensor, device: torch.Tensor, tolerances: Mapping[str, float]) -> dict[str, Any]:
        """All regression metrics of one output (see :func:`regression_metrics`)."""
        check_same_shape(reference, device)
        pick = lambda own, key, default: float(own) if own is not None else float(tolerances.get(key, default))  # noqa: E731
        metrics: dict[str, Any] = regression_metrics(
            reference, device, eps=self.eps, data_range=self.data_range, psnr_cap_db=self.psnr_cap_db,
            atol=tolerances["atol"], rtol=tolerances["rtol"],
            small_value=pick(self.small_value, "small_value", 1e-6),
            small_value_atol=pick(self.small_value_atol, "small_value_atol", 1e-9),
            chunk_elements=self.chunk_elements)
        if metrics["nonfinite_mismatch"] > 0:  # where the first NaN/Inf is, to start debugging there
            metrics["nonfinite_mismatch"] = {"value": metrics["nonfinite_mismatch"],
                                             "first_index": first_nonfinite_mismatch(reference, device, self.chunk_elements)}
        return metrics

    def evaluate(self, reference: Mapping[str, torch.Tensor], device: Mapping[str, torch.Tensor],
                 rules: Mapping[str, Mapping[str, Any]] | None, atol: float, rtol: float,
                 **tolerances: float) -> dict[str, dict[str, Any]]:
        """As :meth:`Evaluator.evaluate`, with the NaN/Inf rule always in force."""
        self.thresholds = merge_rules(self.thresholds, ALWAYS_RULES)
        return super().evaluate(reference, device, rules, atol, rtol, **tolerances)
