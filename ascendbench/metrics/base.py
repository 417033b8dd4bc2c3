"""The shared shape of every evaluator: pick the outputs it applies to, compute, name and judge.

An evaluator is built by ``_target_`` from ``conf/metric/<option>.yaml`` and called as
``evaluate(reference, device, rules, atol, rtol, **tolerances)``. It returns record entries
``{name: {value, verdict, threshold, rule, source, ...}}`` or ``{name: {skipped: reason}}``.
Names are ``<metric>`` for a job with one output and ``<output>/<metric>`` for several.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import torch

from ascendbench.errors import MetricError
from ascendbench.metrics.verdict import judge, merge_rules


def describe_outputs(outputs: Mapping[str, torch.Tensor]) -> str:
    """``name [shape] dtype`` of each output, for messages."""
    return ", ".join(f"{k} {list(v.shape)} {str(v.dtype).replace('torch.', '')}" for k, v in outputs.items())


def make_entry(metric: str, value: Any, rules: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A record entry for one metric value (a number, a dict with ``value`` and extras, or a skip)."""
    if isinstance(value, Mapping) and "skipped" in value:
        return dict(value)
    entry: dict[str, Any] = dict(value) if isinstance(value, Mapping) else {"value": value}
    entry.setdefault("verdict", None)
    entry.setdefault("threshold", None)
    if metric in rules:
        entry.update(judge(entry["value"], rules[metric]))
    return entry


class Evaluator:
    """Base class: output selection, naming and verdicts; subclasses define ``applies_to`` and ``compute``.

    Evaluators are plain classes, not dataclasses: Hydra builds them nested inside a
    :class:`~ascendbench.metrics.suite.MetricSuite`, and OmegaConf would turn a dataclass instance
    stored there back into a config node. An evaluator with many options takes them as ``**options``
    bound to a small dataclass (:class:`~ascendbench.metrics.regression.RegressionOptions`,
    :class:`~ascendbench.metrics.image.PerImageMetrics`).

    Args:
        name: evaluator name (used for its ``skipped`` entry).
        outputs: output names to evaluate; ``None`` takes every output the evaluator applies to.
        thresholds: rule overrides of this evaluator (highest priority).
    """

    what = "outputs"  # what applies_to accepts, in words (for messages)
    # Rules no configuration can loosen (merged last), e.g. the NaN/Inf agreement rule of each evaluator.
    always_rules: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    def __init__(self, name: str, outputs: list[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.outputs = list(outputs) if outputs else None
        self.thresholds = dict(thresholds or {})

    def set_data_range(self, data_range: float) -> None:
        """Use ``data_range`` as the peak-to-peak range of PSNR/SSIM (``metric.data_range``); a no-op for
        evaluators without one."""

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """Whether this evaluator can compare an output like ``tensor``."""
        raise NotImplementedError

    def compute(self, reference: torch.Tensor, device: torch.Tensor, tolerances: Mapping[str, float]) -> dict[str, Any]:
        """Metric name -> value (number, dict with ``value``, or ``{skipped: reason}``) for one output."""
        raise NotImplementedError

    def select(self, reference: Mapping[str, torch.Tensor]) -> list[str]:
        """The outputs to evaluate; explicit names must exist and fit."""
        if self.outputs is None:
            return [k for k in sorted(reference) if self.applies_to(reference[k])]
        for name in self.outputs:
            if name not in reference:
                raise MetricError(f"metric evaluator {self.name!r}: output {name!r} does not exist; the task "
                                  f"produced: {describe_outputs(reference)}. Fix the evaluator's `outputs`.")
            if not self.applies_to(reference[name]):
                raise MetricError(f"metric evaluator {self.name!r} takes {self.what}; output {name!r} is "
                                  f"{describe_outputs({name: reference[name]})}. Remove it from `outputs`.")
        return list(self.outputs)

    def evaluate(self, reference: Mapping[str, torch.Tensor], device: Mapping[str, torch.Tensor],
                 rules: Mapping[str, Mapping[str, Any]] | None, atol: float, rtol: float,
                 **tolerances: float) -> dict[str, dict[str, Any]]:
        """Record entries for every selected output (see the module docstring).

        Raises:
            MetricError: the runs produced different output names or shapes.
        """
        if set(reference) != set(device):
            raise MetricError(f"outputs differ: reference {sorted(reference)} vs device {sorted(device)}; both "
                              "runs must produce the same named outputs.")
        selected = self.select(reference)
        if not selected:
            return {self.name: {"skipped": f"no {self.what} among the outputs ({describe_outputs(reference)})"}}
        merged = merge_rules(rules, self.thresholds, self.always_rules)
        tolerances = {"atol": float(atol), "rtol": float(rtol), **tolerances}
        prefix = (lambda out: f"{out}/") if len(reference) > 1 else (lambda out: "")
        results: dict[str, dict[str, Any]] = {}
        for output in selected:
            for metric, value in self.compute(reference[output], device[output], tolerances).items():
                results[prefix(output) + metric] = make_entry(metric, value, merged)
        return results
