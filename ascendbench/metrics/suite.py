"""A metric option: a :class:`MetricSuite` of evaluators (``<output>/<metric>`` entries)."""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import torch

from ascendbench.errors import ConfigError, MetricError
from ascendbench.metrics.functional.regression import check_same_shape
from ascendbench.metrics.output_checks import validate_reference
from ascendbench.metrics.verdict import judge, merge_rules, unjudged


def describe_outputs(outputs: Mapping[str, torch.Tensor]) -> str:
    """``name [shape] dtype`` of each output, for messages."""
    return ", ".join(f"{k} {list(v.shape)} {str(v.dtype).replace('torch.', '')}"
                     for k, v in outputs.items())


def make_entry(metric: str, value: Any, rules: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The record entry of a value (number, dict, skip); ``not_judged``: verdict as ``would_be``."""
    if isinstance(value, Mapping) and "skipped" in value:
        return dict(value)
    entry: dict[str, Any] = dict(value) if isinstance(value, Mapping) else {"value": value}
    entry.update(verdict=entry.get("verdict"), threshold=entry.get("threshold"))
    if metric in rules:
        decided = judge(entry["value"], rules[metric])
        entry.update(unjudged(decided, entry["not_judged"]) if "not_judged" in entry else decided)
    return entry


def judged_output(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """The output as evaluators see it: uint8 pictures as pixels in ``[-1, 1]``; complex refused."""
    if tensor.is_complex():
        raise MetricError(
            f"output {name!r} is {describe_outputs({name: tensor})}: complex outputs are not "
            "compared (whether parts or magnitude and phase must agree depends on their meaning). "
            "Return real tensors from the task: torch.view_as_real(x), or x.abs() and x.angle().")
    if tensor.dtype == torch.uint8 and tensor.dim() in (4, 5) and tensor.shape[1] in (1, 3):
        return tensor.float() / 127.5 - 1.0
    return tensor


class Evaluator:
    """Output selection, naming and verdicts (not a dataclass: OmegaConf would make it a node)."""

    what = "floating-point outputs"  # what applies_to accepts, in words (for messages)
    # Rules no configuration can loosen (merged last), e.g. the NaN/Inf agreement rule.
    always_rules: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    def __init__(self, name: str, outputs: list[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.outputs = list(outputs) if outputs else None
        self.thresholds = dict(thresholds or {})

    def set_data_range(self, data_range: float) -> None:
        """The PSNR/SSIM peak-to-peak range (``metric.data_range``); a no-op without one."""

    def applies_to(self, tensor: torch.Tensor) -> bool:
        """Whether this evaluator can compare an output like ``tensor``."""
        return tensor.is_floating_point()

    def compute(self, reference: torch.Tensor, device: torch.Tensor,
                tolerances: Mapping[str, float]) -> dict[str, Any]:
        """Metric -> value (number, dict with ``value``, or ``{skipped: reason}``) of one output."""
        raise NotImplementedError

    def select(self, reference: Mapping[str, torch.Tensor]) -> list[str]:
        """The outputs to evaluate; explicit names must exist and fit."""
        if self.outputs is None:
            return [k for k in sorted(reference) if self.applies_to(reference[k])]
        for name in self.outputs:
            if name not in reference:
                raise MetricError(
                    f"metric evaluator {self.name!r}: output {name!r} does not exist; the task "
                    f"produced: {', '.join(f'{k} {list(v.shape)}' for k, v in reference.items())}"
                    " (the CPU reference's names and shapes). Fix the evaluator's `outputs`.")
            if not self.applies_to(reference[name]):
                raise MetricError(
                    f"metric evaluator {self.name!r} takes {self.what}; output {name!r} is "
                    f"{describe_outputs({name: reference[name]})}. Remove it from `outputs`.")
        return list(self.outputs)

    def evaluate(self, reference: Mapping[str, torch.Tensor], device: Mapping[str, torch.Tensor],
                 rules: Mapping[str, Mapping[str, Any]] | None, atol: float, rtol: float,
                 **tolerances: float) -> dict[str, dict[str, Any]]:
        """Record entries of every selected output; a MetricError for different names or shapes."""
        if set(reference) != set(device):
            raise MetricError(f"outputs differ: reference {sorted(reference)} vs device "
                              f"{sorted(device)}; both runs must produce the same named outputs.")
        selected = self.select(reference)
        if not selected:
            return {self.name: {"skipped": f"no {self.what} among the outputs "
                                           f"({describe_outputs(reference)})"}}
        merged = merge_rules(rules, self.thresholds, self.always_rules)
        tolerances = {"atol": float(atol), "rtol": float(rtol), **tolerances}
        results: dict[str, dict[str, Any]] = {}
        for output in selected:
            check_same_shape(reference[output], device[output])
            prefix = f"{output}/" if len(reference) > 1 else ""
            values = self.compute(reference[output], device[output], tolerances)
            for metric, value in values.items():
                results[prefix + metric] = make_entry(metric, value, merged)
        return results


class MetricSuite:
    """Evaluators by key (None: off), shared ``thresholds``, ``data_range`` and ``clip``."""

    def __init__(self, name: str, evaluators: Mapping[str, Any],
                 thresholds: Mapping[str, Any] | None = None, data_range: float | None = None,
                 clip: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.clip = dict(clip or {})
        self.evaluators = {k: v for k, v in evaluators.items() if v is not None}
        for key, evaluator in self.evaluators.items():
            if not callable(getattr(evaluator, "evaluate", None)):
                raise ConfigError(
                    f"metric.evaluators.{key} built a {type(evaluator).__name__} "
                    f"({evaluator!r:.80}), not an evaluator. A plain function is wrapped by "
                    "`_target_: ascendbench.metrics.evaluators.FunctionEvaluator` with "
                    f"`name: {key}` and `function: <dotted.path>`; a class must have "
                    "evaluate(reference, device, rules, atol, rtol) (subclass "
                    "ascendbench.metrics.suite.Evaluator).")
            if data_range is not None:
                evaluator.set_data_range(float(data_range))
        self.thresholds = dict(thresholds or {})

    def evaluate(self, reference: Mapping[str, torch.Tensor], device: Mapping[str, torch.Tensor],
                 rules: Mapping[str, Mapping[str, Any]] | None, atol: float, rtol: float,
                 **tolerances: float) -> dict[str, dict[str, Any]]:
        """``reference_nonfinite``, then each evaluator's entries (clashes: ``<key>.<name>``)."""
        merged = merge_rules(rules, self.thresholds)
        reference = {k: judged_output(k, v) for k, v in reference.items()}
        device = {k: judged_output(k, v) for k, v in device.items()}
        results: dict[str, dict[str, Any]] = validate_reference(reference)
        for key, evaluator in self.evaluators.items():
            entries = evaluator.evaluate(reference, device, merged, atol, rtol, **tolerances)
            entries = {(f"{key}.{name}" if name in results else name): entry
                       for name, entry in entries.items()}
            clash = sorted(set(entries) & set(results))
            if clash:
                raise MetricError(f"metric option {self.name!r}: evaluator {key!r} produces "
                                  f"{clash}, already produced under that name; rename the "
                                  "evaluator key.")
            results.update(entries)
        return results
