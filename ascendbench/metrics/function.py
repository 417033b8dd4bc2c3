"""A metric from a plain function, by YAML alone.

``FunctionEvaluator`` wraps any importable function ``fn(reference, device, **kwargs)`` that returns a number
(or a dict of names to numbers) for one output pair, so a team's own metric needs no Python class::

    # conf/metric/my_suite.yaml
    defaults: [regression, _self_]
    name: my_suite
    evaluators:
      peak_error:
        _target_: ascendbench.metrics.FunctionEvaluator
        name: peak_error
        function: my_metrics.peak_abs_error     # dotted path; imported and checked when the suite is built
        kwargs: {quantile: 0.999}
        thresholds:
          peak_abs_error: {max: 0.05, source: "our porting guide"}

The function is imported and its signature bound to ``(reference, device, **kwargs)`` when the suite is built,
so a wrong path or signature is a problem of the dry run's plan, not of the metrics stage after the model ran.
Tensors are passed as float64 CPU tensors; a metric named like the function unless it returns a dict.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping

import torch
from hydra.utils import get_method

from ascendbench.errors import ConfigError
from ascendbench.metrics.base import Evaluator


def _resolve(path: str, where: str) -> Callable[..., Any]:
    """The function at a dotted ``path``; a ConfigError paragraph when it is not importable or not callable."""
    try:
        function = get_method(path)
    except Exception as exc:  # ImportError, AttributeError, ValueError from hydra's locator
        raise ConfigError(f"{where}.function={path!r} cannot be imported ({exc}). Give the dotted path of a "
                          "function `fn(reference, device, **kwargs)` that is importable on this host "
                          "(a module on PYTHONPATH or an installed package).") from exc
    return function


def _check_signature(function: Callable[..., Any], kwargs: Mapping[str, Any], where: str) -> None:
    """The function must accept ``(reference, device, **kwargs)`` (a builtin without a signature is taken as is)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some C functions publish no signature: their call is the check
        return
    try:
        signature.bind(torch.empty(0), torch.empty(0), **kwargs)
    except TypeError as exc:
        raise ConfigError(f"{where}: {function.__module__}.{function.__qualname__} cannot be called as "
                          f"fn(reference, device, **{dict(kwargs)}): {exc}. A metric function takes the reference "
                          "and device tensors first, then the keys of `kwargs`; fix `function` or `kwargs`.") from exc


class FunctionEvaluator(Evaluator):
    """An evaluator that calls a plain function on every floating-point output pair.

    Args:
        name: evaluator name (its ``skipped`` entry, and the prefix on a name clash).
        function: dotted path of ``fn(reference, device, **kwargs) -> number | {name: number}``.
        kwargs: further keyword arguments of the function.
        metric: the metric name of a number result (default: the function's name).
        outputs: output names to evaluate (``None``: every floating-point output).
        thresholds: verdict rules by metric name.
    """

    what = "floating-point outputs"

    def __init__(self, name: str, function: str, kwargs: Mapping[str, Any] | None = None, metric: str | None = None,
                 outputs: list[str] | None = None, thresholds: Mapping[str, Any] | None = None) -> None:
        super().__init__(name, outputs, thresholds)
        where = f"metric.evaluators.{name}"
        self.kwargs = dict(kwargs or {})
        self.function = _resolve(function, where)
        _check_signature(self.function, self.kwargs, where)
        self.metric = metric or self.function.__name__
        self.path = function

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """Floating-point outputs only."""
        return tensor.is_floating_point()

    def compute(self, reference: torch.Tensor, device: torch.Tensor, tolerances: Mapping[str, float]) -> dict[str, Any]:
        """The function's number(s) for one output pair, each checked to be a real number."""
        value = self.function(reference.detach().double().cpu(), device.detach().double().cpu(), **self.kwargs)
        values = dict(value) if isinstance(value, Mapping) else {self.metric: value}
        return {metric: self._number(metric, number) for metric, number in values.items()}

    def _number(self, metric: str, value: Any) -> float:
        try:
            number = float(value.item() if isinstance(value, torch.Tensor) else value)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ConfigError(f"metric.evaluators.{self.name}: {self.path} returned {type(value).__name__} for "
                              f"{metric!r}, not a number; a metric function returns a number or a dict of "
                              "names to numbers.") from exc
        return number  # NaN stays as measured: the verdict rules judge it
