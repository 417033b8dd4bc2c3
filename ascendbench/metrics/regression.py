"""The ``regression`` evaluator: element-wise metrics of every output tensor, with verdicts."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.errors import MetricError
from ascendbench.metrics.functional import regression_metrics
from ascendbench.metrics.verdict import judge, merge_rules


class RegressionEvaluator:
    """Compare each output tensor of the device run with the reference.

    Args:
        name: evaluator name (recorded).
        eps: relative-error denominator padding.
        data_range: PSNR range of the outputs.
        psnr_cap_db: PSNR of identical tensors.
        thresholds: per-metric rule overrides (highest priority).
    """

    higher_is_better = {"cosine": True, "psnr_db": True}

    def __init__(self, name: str = "regression", eps: float = 1e-6, data_range: float = 2.0,
                 psnr_cap_db: float = 200.0, thresholds: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.eps = float(eps)
        self.data_range = float(data_range)
        self.psnr_cap_db = float(psnr_cap_db)
        self.thresholds = dict(thresholds or {})

    def evaluate(self, reference: Mapping[str, torch.Tensor], device: Mapping[str, torch.Tensor],
                 rules: Mapping[str, Mapping[str, Any]], atol: float, rtol: float) -> dict[str, dict[str, Any]]:
        """Metrics for every output: ``{name: {value, verdict, threshold, rule, source}}``.

        Names are ``<metric>`` for a single output and ``<output>/<metric>`` for several.

        Raises:
            MetricError: the two runs produced different output names.
        """
        if set(reference) != set(device):
            raise MetricError(f"outputs differ: reference {sorted(reference)} vs device {sorted(device)}")
        rules = merge_rules(rules, self.thresholds)
        results: dict[str, dict[str, Any]] = {}
        for output in sorted(reference):
            values = regression_metrics(reference[output], device[output], eps=self.eps,
                                        data_range=self.data_range, psnr_cap_db=self.psnr_cap_db,
                                        atol=atol, rtol=rtol)
            prefix = "" if len(reference) == 1 else f"{output}/"
            for metric, value in values.items():
                results[prefix + metric] = self._entry(metric, value, rules)
        return results

    @staticmethod
    def _entry(metric: str, value: float, rules: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        entry: dict[str, Any] = {"value": value, "verdict": None, "threshold": None}
        if metric in rules:
            entry.update(judge(value, rules[metric]))
        return entry
