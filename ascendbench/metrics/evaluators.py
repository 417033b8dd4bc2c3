"""Per-output evaluators: ``regression``, ``tokens``, a YAML-named function (docs/extending.md)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from hydra.utils import get_method

from ascendbench.errors import ConfigError
from ascendbench.metrics.functional import regression
from ascendbench.metrics.suite import Evaluator

# Not configurable: a position where reference and device disagree about NaN/Inf always fails.
ALWAYS_RULES = {"nonfinite_mismatch": {
    "max": 0, "source": "built in: a NaN/Inf in the device output where the reference has a finite "
                        "value (or another non-finite value, or the reverse) always fails"}}


@dataclass
class RegressionOptions:
    """The options of ``metric.evaluators.regression`` (``None`` small values: the dtype's)."""

    eps: float = 1e-6
    data_range: float = 2.0
    psnr_cap_db: float = 200.0
    small_value: float | None = None
    small_value_atol: float | None = None
    chunk_elements: int = regression.DEFAULT_CHUNK

    def __post_init__(self) -> None:
        self.eps, self.data_range = float(self.eps), float(self.data_range)
        self.psnr_cap_db, self.chunk_elements = float(self.psnr_cap_db), int(self.chunk_elements)

    def tolerances(self, given: Mapping[str, float]) -> regression.ErrorTolerances:
        """``given`` (the dtype's tolerances) with these options' own values first."""
        own = {"small_value": self.small_value, "small_value_atol": self.small_value_atol}
        own = {k: v for k, v in own.items() if v is not None}
        return regression.ErrorTolerances.from_mapping(given, eps=self.eps, **own)


class RegressionEvaluator(Evaluator):
    """Element-wise metrics of each floating-point output (``**options``: RegressionOptions)."""

    always_rules = ALWAYS_RULES

    def __init__(self, name: str = "regression", outputs: list[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None, **options: Any) -> None:
        super().__init__(name, outputs, thresholds)
        self.options = RegressionOptions(**options)

    def set_data_range(self, data_range: float) -> None:
        """PSNR's peak-to-peak range (``metric.data_range``)."""
        self.options.data_range = float(data_range)

    def compute(self, reference: torch.Tensor, device: torch.Tensor,
                tolerances: Mapping[str, float]) -> dict[str, Any]:
        """All regression metrics of one output; ``nonfinite_mismatch`` with its first index."""
        options = self.options
        metrics: dict[str, Any] = regression.regression_metrics(
            reference, device, options.tolerances(tolerances), data_range=options.data_range,
            psnr_cap_db=options.psnr_cap_db, chunk_elements=options.chunk_elements)
        mismatch = metrics["nonfinite_mismatch"]
        if mismatch > 0:  # where the first NaN/Inf is, to start debugging there
            first = regression.first_nonfinite_mismatch(reference, device, options.chunk_elements)
            metrics["nonfinite_mismatch"] = {"value": mismatch, "first_index": first}
        return metrics


class FunctionEvaluator(Evaluator):
    """``function``: a dotted ``fn(reference, device, **kwargs) -> number | dict``, in float64."""

    def __init__(self, name: str, function: str, kwargs: Mapping[str, Any] | None = None,
                 metric: str | None = None, outputs: list[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None) -> None:
        super().__init__(name, outputs, thresholds)
        self.kwargs, self.path = dict(kwargs or {}), function
        try:
            self.function = get_method(function)
        except Exception as exc:  # ImportError, AttributeError, ValueError from hydra's locator
            raise ConfigError(
                f"metric.evaluators.{name}.function={function!r} cannot be imported ({exc}). "
                "Give the dotted path of a function `fn(reference, device, **kwargs)` that is "
                "importable on this host (a module on PYTHONPATH or an installed package)."
            ) from exc
        self._check_signature()
        self.metric = metric or self.function.__name__

    def _check_signature(self) -> None:
        try:
            signature = inspect.signature(self.function)
        except (TypeError, ValueError):  # some C functions publish no signature: the call checks
            return
        try:
            signature.bind(torch.empty(0), torch.empty(0), **self.kwargs)
        except TypeError as exc:
            raise ConfigError(
                f"metric.evaluators.{self.name}: {self.path} cannot be called as fn(reference, "
                f"device, **{self.kwargs}): {exc}. A metric function takes the reference and "
                "device tensors first, then the keys of `kwargs`; fix `function` or `kwargs`."
            ) from exc

    def compute(self, reference: torch.Tensor, device: torch.Tensor,
                tolerances: Mapping[str, float]) -> dict[str, Any]:
        """The function's number(s) for one output pair, each checked to be a real number."""
        value = self.function(reference.detach().double().cpu(), device.detach().double().cpu(),
                              **self.kwargs)
        values = dict(value) if isinstance(value, Mapping) else {self.metric: value}
        return {metric: self._number(metric, number) for metric, number in values.items()}

    def _number(self, metric: str, value: Any) -> float:
        try:
            return float(value.item() if isinstance(value, torch.Tensor) else value)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ConfigError(
                f"metric.evaluators.{self.name}: {self.path} returned {type(value).__name__} for "
                f"{metric!r}, not a number; a metric function returns a number or a dict of names "
                "to numbers.") from exc


class TokenEvaluator(Evaluator):
    """Agreement, ids outside ``[0, codebook_size)`` and diversity of integer token outputs."""

    what = "integer (token id) outputs"

    def __init__(self, name: str = "tokens", codebook_size: int | None = None,
                 outputs: list[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None) -> None:
        super().__init__(name, outputs, thresholds)
        self.codebook_size = None if codebook_size is None else int(codebook_size)

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """Integer tensors (not bool, not floating point or complex)."""
        return not (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool)

    def compute(self, reference: torch.Tensor, device: torch.Tensor,
                tolerances: Mapping[str, float]) -> dict[str, Any]:
        """Share of equal ids, device ids outside the codebook, distinct ids on each side, ids."""
        values: dict[str, Any] = token_metrics(reference, device, self.codebook_size)
        values.setdefault("tokens_out_of_range", {
            "skipped": "codebook_size is not set; set it in the metric config "
                       "(metric.evaluators.tokens.codebook_size=<n>)"})
        return values


def token_metrics(reference: torch.Tensor, device: torch.Tensor,
                  codebook_size: int | None) -> dict[str, float]:
    """Share of equal ids, distinct ids on each side, ids, and (with a codebook) ids outside it.
    >>> token_metrics(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 3, 9]), 8)["token_agreement"]
    0.75"""
    ref, dev = reference.detach().cpu().reshape(-1), device.detach().cpu().reshape(-1)
    values = {"token_agreement": float((ref == dev).double().mean()) if ref.numel() else 1.0,
              "tokens_unique": float(torch.unique(dev).numel()),
              "tokens_unique_reference": float(torch.unique(ref).numel()),
              "tokens_numel": float(ref.numel())}
    if codebook_size is not None:
        values["tokens_out_of_range"] = float(((dev < 0) | (dev >= int(codebook_size))).sum())
    return values
