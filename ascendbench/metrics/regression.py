"""The ``regression`` evaluator: element-wise metrics of every floating-point output, with verdicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ascendbench.metrics.base import Evaluator
from ascendbench.metrics.functional.regression import (
    DEFAULT_CHUNK,
    ErrorTolerances,
    check_same_shape,
    first_nonfinite_mismatch,
    regression_metrics,
)

# Not configurable: a position where reference and device disagree about NaN/Inf always fails
# (the agreement rule of ascendbench.metrics.functional.nonfinite).
ALWAYS_RULES = {
    "nonfinite_mismatch": {"max": 0, "source": "built in: a NaN/Inf in the device output where the reference "
                                                "has a finite value (or another non-finite value, or the reverse) "
                                                "always fails"},
}


@dataclass
class RegressionOptions:
    """The options of :class:`RegressionEvaluator` (keys of ``metric.evaluators.regression``).

    Attributes:
        eps: relative-error denominator padding (``|ref| + eps``).
        data_range: PSNR peak-to-peak range of the outputs.
        psnr_cap_db: PSNR of identical tensors.
        small_value: reference magnitudes below it are judged absolutely; ``None`` takes the dtype's.
        small_value_atol: absolute tolerance of those small values; ``None`` takes the dtype's.
        chunk_elements: elements converted to float64 at a time.
    """

    eps: float = 1e-6
    data_range: float = 2.0
    psnr_cap_db: float = 200.0
    small_value: float | None = None
    small_value_atol: float | None = None
    chunk_elements: int = DEFAULT_CHUNK

    def __post_init__(self) -> None:
        self.eps, self.data_range, self.psnr_cap_db = float(self.eps), float(self.data_range), float(self.psnr_cap_db)
        self.chunk_elements = int(self.chunk_elements)

    def tolerances(self, given: Mapping[str, float]) -> ErrorTolerances:
        """The tolerances of one comparison: ``given`` (the dtype's), with these options' own values first."""
        own = {"small_value": self.small_value, "small_value_atol": self.small_value_atol}
        return ErrorTolerances.from_mapping(given, eps=self.eps, **{k: v for k, v in own.items() if v is not None})


class RegressionEvaluator(Evaluator):
    """Compare each floating-point output tensor of the device run with the reference.

    Args:
        name: evaluator name (recorded).
        outputs: output names to compare (``None``: every floating-point output).
        thresholds: per-metric rule overrides (highest priority).
        **options: the fields of :class:`RegressionOptions` (``eps``, ``data_range``, ``psnr_cap_db``,
            ``small_value``, ``small_value_atol``, ``chunk_elements``); an unknown key is a ``TypeError``.
    """

    higher_is_better = {"cosine": True, "psnr_db": True, "one_thousandth_err_ratio": True,
                        "five_thousandths_err_ratio": True}
    what = "floating-point outputs"
    always_rules = ALWAYS_RULES

    def __init__(self, name: str = "regression", outputs: list[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None, **options: Any) -> None:
        super().__init__(name, outputs, thresholds)
        self.options = RegressionOptions(**options)

    def set_data_range(self, data_range: float) -> None:
        """PSNR's peak-to-peak range (``metric.data_range``)."""
        self.options.data_range = float(data_range)

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """Floating-point tensors of any shape."""
        return tensor.is_floating_point()

    def compute(self, reference: torch.Tensor, device: torch.Tensor, tolerances: Mapping[str, float]) -> dict[str, Any]:
        """All regression metrics of one output (see :func:`regression_metrics`)."""
        check_same_shape(reference, device)
        options = self.options
        metrics: dict[str, Any] = regression_metrics(
            reference, device, options.tolerances(tolerances), data_range=options.data_range,
            psnr_cap_db=options.psnr_cap_db, chunk_elements=options.chunk_elements)
        if metrics["nonfinite_mismatch"] > 0:  # where the first NaN/Inf is, to start debugging there
            first = first_nonfinite_mismatch(reference, device, options.chunk_elements)
            metrics["nonfinite_mismatch"] = {"value": metrics["nonfinite_mismatch"], "first_index": first}
        return metrics
