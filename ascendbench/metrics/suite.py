"""A metric option: the reference checked for NaN/Inf, then evaluators run over the same reference and device
outputs."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.errors import ConfigError, MetricError
from ascendbench.metrics.validate import validate_reference
from ascendbench.metrics.verdict import merge_rules


class MetricSuite:
    """The object behind ``conf/metric/<option>.yaml``: a named set of evaluators.

    Args:
        name: option name (recorded).
        evaluators: evaluator name -> evaluator (built by Hydra from their ``_target_``); ``None``
            entries are switched off (e.g. ``metric.evaluators.image=null``).
        thresholds: rule overrides for every evaluator of the option (above dtype and model rules).
        data_range: ``metric.data_range``: one PSNR/SSIM peak-to-peak range for every evaluator of the
            option (``None``: each evaluator's own, e.g. 2.0 for outputs in [-1, 1]); the FLUX.2 seed used 1.0.
        clip: ``metric.clip`` (``path``, ``frames``, ``min``): the reference-free CLIP score of the job's
            image/video outputs (:mod:`ascendbench.metrics.clip`, run by the evaluate stage).
    """

    def __init__(self, name: str, evaluators: Mapping[str, Any], thresholds: Mapping[str, Any] | None = None,
                 data_range: float | None = None, clip: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.clip = dict(clip or {})
        self.evaluators = {k: v for k, v in evaluators.items() if v is not None}
        for key, evaluator in self.evaluators.items():
            _check_evaluator(key, evaluator)
        self.thresholds = dict(thresholds or {})
        self.data_range = None if data_range is None else float(data_range)
        if self.data_range is not None:
            for evaluator in self.evaluators.values():
                evaluator.set_data_range(self.data_range)

    def evaluate(self, reference: Mapping[str, torch.Tensor], device: Mapping[str, torch.Tensor],
                 rules: Mapping[str, Mapping[str, Any]] | None, atol: float, rtol: float,
                 **tolerances: float) -> dict[str, dict[str, Any]]:
        """``reference_nonfinite`` of each floating-point reference output, then the entries of every
        evaluator, in config order.

        A reference with NaN/Inf fails the job whatever the evaluators find (it cannot vouch for the
        device output; :func:`ascendbench.metrics.validate.validate_reference`); the evaluators still
        run and record what they measure under the agreement rule of
        :mod:`ascendbench.metrics.functional.nonfinite`.

        A name another evaluator already produced is kept under ``<evaluator key>.<name>`` (judged by the
        rules of its plain name), so two evaluators of one YAML option never overwrite each other.

        Raises:
            MetricError: a prefixed name still clashes, or the outputs cannot be compared.
        """
        merged = merge_rules(rules, self.thresholds)
        results: dict[str, dict[str, Any]] = validate_reference(reference)
        for key, evaluator in self.evaluators.items():
            entries = evaluator.evaluate(reference, device, merged, atol, rtol, **tolerances)
            entries = {(f"{key}.{name}" if name in results else name): entry for name, entry in entries.items()}
            clash = sorted(set(entries) & set(results))
            if clash:
                raise MetricError(f"metric option {self.name!r}: evaluator {key!r} produces {clash}, already "
                                  "produced under that name; rename the evaluator key.")
            results.update(entries)
        return results


def _check_evaluator(key: str, evaluator: Any) -> None:
    """An evaluator entry must have built an evaluator: a plain function's result is not one."""
    if callable(getattr(evaluator, "evaluate", None)):
        return
    raise ConfigError(
        f"metric.evaluators.{key} built a {type(evaluator).__name__} ({evaluator!r:.80}), not an evaluator. "
        "A plain function is wrapped by `_target_: ascendbench.metrics.FunctionEvaluator` with "
        f"`name: {key}` and `function: <dotted.path>`; a class must have evaluate(reference, device, rules, "
        "atol, rtol) (subclass ascendbench.metrics.base.Evaluator).")
