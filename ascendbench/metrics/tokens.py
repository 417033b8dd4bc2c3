"""The ``tokens`` evaluator: agreement, codebook range and diversity of integer token outputs."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.metrics.base import Evaluator
from ascendbench.metrics.functional.regression import check_same_shape
from ascendbench.metrics.functional.tokens import token_metrics


class TokenEvaluator(Evaluator):
    """Compare integer token tensors (e.g. FSQ ids of a video tokenizer).

    Integer ids are always finite, so the NaN/Inf agreement rule has nothing to judge here; the suite's
    ``reference_nonfinite`` check and the ``regression`` evaluator cover the floating-point outputs.

    Args:
        name: evaluator name.
        codebook_size: valid ids are ``0 .. codebook_size - 1``; ``None`` records the range check as skipped.
        outputs: output names to compare (``None``: every integer output).
        thresholds: per-metric rule overrides (highest priority).
    """

    what = "integer (token id) outputs"

    def __init__(self, name: str = "tokens", codebook_size: int | None = None, outputs: list[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None) -> None:
        super().__init__(name, outputs, thresholds)
        self.codebook_size = None if codebook_size is None else int(codebook_size)

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """Integer tensors (not bool, not floating point)."""
        return not tensor.is_floating_point() and not tensor.is_complex() and tensor.dtype != torch.bool

    def compute(self, reference: torch.Tensor, device: torch.Tensor, tolerances: Mapping[str, float]) -> dict[str, Any]:
        """Token metrics of one output; the range check is skipped without a codebook size."""
        check_same_shape(reference, device)
        values: dict[str, Any] = dict(token_metrics(reference, device, self.codebook_size))
        if self.codebook_size is None:
            values["tokens_out_of_range"] = {"skipped": "codebook_size is not set; set it in the metric config "
                                                        "(metric.evaluators.tokens.codebook_size=<n>)"}
        return values
