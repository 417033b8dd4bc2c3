"""Gates a task computes on its own outputs (``task.checks(ctx)``), recorded as metric entries."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch

from ascendbench.metrics.functional.nonfinite import max_abs_diff, nonfinite_counts
from ascendbench.metrics.verdict import judge
from ascendbench.tasks.inputs import move_inputs


@dataclass
class CheckContext:
    """What a task's checks may use: device model, inputs, outputs, weights, rules, control."""

    module: torch.nn.Module
    device: torch.device
    dtype: torch.dtype
    inputs: Mapping[str, torch.Tensor]
    outputs: Mapping[str, torch.Tensor]
    weights: Mapping[str, Any]
    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    control: Callable[[], AbstractContextManager[torch.nn.Module]] | None = None

    def to_device(self, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Tensors on the run's device; floating ones in the run's dtype."""
        return move_inputs(tensors, self.device, self.dtype)


def gate(name: str, value: float, rules: Mapping[str, Mapping[str, Any]],
         details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A metric entry for ``<group>/<metric>``, judged by the rule of ``<metric>`` if any.
    >>> gate("gate/x", 0.0, {"x": {"max": 0}})["verdict"]
    'PASS'
    >>> gate("gate/y", 3.0, {})["verdict"] is None
    True"""
    entry: dict[str, Any] = {"value": float(value), "verdict": None, "threshold": None}
    rule = rules.get(name.rsplit("/", 1)[-1])
    if rule:
        entry.update(judge(float(value), rule))
    if details:
        entry["details"] = dict(details)
    return entry


def compare_runs(first: torch.Tensor, second: torch.Tensor) -> tuple[float, dict[str, Any]]:
    """Two runs of one output: the largest difference, ``identical`` and ``nonfinite_mismatch``.
    >>> inf = float("inf")
    >>> compare_runs(torch.tensor([inf, 1.0]), torch.tensor([inf, 1.0]))
    (0.0, {'identical': True, 'nonfinite_mismatch': 0})"""
    counts = nonfinite_counts(first.detach().cpu(), second.detach().cpu())
    diff = max_abs_diff(first, second)
    return diff, {"identical": diff == 0.0, "nonfinite_mismatch": counts.mismatch}
