"""A metric option: one or more evaluators run over the same reference and device outputs."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.errors import MetricError
from ascendbench.metrics.verdict import merge_rules


class MetricSuite:
    """The object behind ``conf/metric/<option>.yaml``: a named set of evaluators.

    Args:
        name: option name (recorded).
        evaluators: evaluator name -> evaluator (built by Hydra from their ``_target_``); ``None``
            entries are switched off (e.g. ``metric.evaluators.image=null``).
        thresholds: rule overrides for every evaluator of the option (above dtype and model rules).
    """

    def __init__(self, name: str, evaluators: Mapping[str, Any], thresholds: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.evaluators = {k: v for k, v in evaluators.items() if v is not None}
        self.thresholds = dict(thresholds or {})

    def evaluate(self, reference: Mapping[str, torch.Tensor], device: Mapping[str, torch.Tensor],
                 rules: Mapping[str, Mapping[str, Any]] | None, atol: float, rtol: float,
                 **tolerances: float) -> dict[str, dict[str, Any]]:
        """The entries of every evaluator, in config order.

        Raises:
            MetricError: two evaluators produced the same metric name, or the outputs cannot be compared.
        """
        merged = merge_rules(rules, self.thresholds)
        results: dict[str, dict[str, Any]] = {}
        for key, evaluator in self.evaluators.items():
            entries = evaluator.evaluate(reference, device, merged, atol, rtol, **tolerances)
            clash = sorted(set(entries) & set(results))
            if clash:
                raise MetricError(f"metric option {self.name!r}: evaluator {key!r} produces {clash}, already "
                                  "produced by another evaluator; give the evaluators distinct names.")
            results.update(entries)
        return results
