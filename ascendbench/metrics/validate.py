"""Validation of one side's tensors on their own: NaN/Inf and the value range, with or without a reference.

As Polygraphy's ``--validate`` does, every job checks its device outputs whatever else it does, and the
metric suite checks the reference before judging anything against it. Entries (named ``<metric>`` for a
job with one output and ``<output>/<metric>`` for several, as the evaluators' entries):

* ``output_nonfinite``: NaN/Inf elements of a floating-point device output, with their ``fraction`` and
  ``first_index``. Any one fails (built in, not configurable): a performance figure of a run that
  produced NaN/Inf measures a broken run.
* ``output_out_of_range_ratio``: the share of the finite elements of an output outside the range its task
  declares (images and videos: :meth:`ascendbench.tasks.base.Task.output_range`), with the range and
  the finite ``min``/``max``. Decoders overshoot their range slightly (the outputs are clamped when
  shown or saved), so by default it warns above 5 % and fails above 50 % -- then most of the output is
  not in the range at all (a [0, 1] or [0, 255] output where [-1, 1] is declared, or garbage). The rule
  is an ordinary one: ``model.thresholds.output_out_of_range_ratio={max: ..., warn: ...}`` overrides it.
* ``reference_nonfinite``: NaN/Inf elements of a floating-point reference output. Any one fails (built
  in): a reference with NaN/Inf cannot vouch for the device output, whatever the device produced there
  (see the agreement rule of :mod:`ascendbench.metrics.functional.nonfinite`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from ascendbench.metrics.functional.nonfinite import first_index
from ascendbench.metrics.verdict import judge

DEFAULT_CHUNK = 1 << 22
NONFINITE_RULES = {
    "output_nonfinite": {"max": 0, "source": "built in: a device output with NaN/Inf always fails (output "
                                             "validation, with or without a reference)"},
    "reference_nonfinite": {"max": 0, "source": "built in: a reference with NaN/Inf cannot vouch for the device "
                                                "output; check the reference run (baseline.reference, the "
                                                "model's CPU path) before judging the device"},
}
RANGE_RULE = {"output_out_of_range_ratio": {
    "max": 0.5, "warn": 0.05, "source": "built in: decoders overshoot their value range a little (clamped when "
                                        "saved); more than half of the elements outside it is a scale or offset "
                                        "error. Override with model.thresholds.output_out_of_range_ratio"}}


@dataclass
class TensorFindings:
    """What one tensor holds that a valid output must not (filled chunk by chunk by :func:`inspect`).

    Attributes:
        numel: elements.
        nonfinite: NaN/Inf elements.
        first_nonfinite: index of the first of them (``None``: none).
        out_of_range: finite elements outside the value range (0 without a range).
        low, high: the smallest and largest finite values (``None``: no finite element).
    """

    numel: int = 0
    nonfinite: int = 0
    first_nonfinite: list[int] | None = None
    out_of_range: int = 0
    low: float | None = None
    high: float | None = None

    def add(self, chunk: torch.Tensor, offset: int, shape: tuple[int, ...],
            value_range: Sequence[float] | None) -> None:
        """Fold in one flat chunk that starts at flat ``offset`` of a tensor of ``shape``."""
        finite = torch.isfinite(chunk)
        bad = int(chunk.numel() - int(finite.sum()))
        if bad and self.first_nonfinite is None:
            self.first_nonfinite = first_index(~finite, shape, offset)
        self.numel, self.nonfinite = self.numel + chunk.numel(), self.nonfinite + bad
        kept = chunk[finite] if bad else chunk
        if not kept.numel():
            return
        low, high = float(kept.min()), float(kept.max())
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)
        if value_range is not None:
            self.out_of_range += int(((kept < value_range[0]) | (kept > value_range[1])).sum())


def inspect(tensor: torch.Tensor, value_range: Sequence[float] | None = None,
            chunk_elements: int = DEFAULT_CHUNK) -> TensorFindings:
    """NaN/Inf, range and extremes of a floating-point tensor, ``chunk_elements`` at a time.

    >>> found = inspect(torch.tensor([[0.5, float("nan")], [2.0, -1.0]]), value_range=(-1.0, 1.0))
    >>> found.nonfinite, found.first_nonfinite, found.out_of_range, found.low, found.high
    (1, [0, 1], 1, -1.0, 2.0)
    """
    flat = tensor.detach().reshape(-1)
    found = TensorFindings()
    shape = tuple(tensor.shape)
    for start in range(0, flat.numel(), int(chunk_elements)):
        found.add(flat[start:start + int(chunk_elements)], start, shape, value_range)
    return found


def _entry(value: float, rule: Mapping[str, Any] | None, **details: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"value": float(value), "verdict": None, "threshold": None, **details}
    if rule:
        entry.update(judge(value, rule))
    return entry


def _nonfinite_entry(metric: str, found: TensorFindings) -> dict[str, Any]:
    fraction = found.nonfinite / found.numel if found.numel else 0.0
    return _entry(found.nonfinite, NONFINITE_RULES[metric], fraction=fraction, first_index=found.first_nonfinite,
                  numel=found.numel)


def _names(outputs: Mapping[str, torch.Tensor]) -> Callable[[str, str], str]:
    return (lambda out, metric: f"{out}/{metric}") if len(outputs) > 1 else (lambda out, metric: metric)


def validate_reference(reference: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """``reference_nonfinite`` of every floating-point reference output (see the module docstring).

    >>> validate_reference({"x": torch.tensor([1.0, float("inf")])})["reference_nonfinite"]["verdict"]
    'FAIL'
    """
    name = _names(reference)
    return {name(out, "reference_nonfinite"): _nonfinite_entry("reference_nonfinite", inspect(tensor))
            for out, tensor in sorted(reference.items()) if tensor.is_floating_point()}


def validate_outputs(outputs: Mapping[str, torch.Tensor],
                     value_range: Callable[[str, torch.Tensor], Sequence[float] | None],
                     rules: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """``output_nonfinite`` and ``output_out_of_range_ratio`` of every floating-point device output.

    Args:
        outputs: the device outputs.
        value_range: ``(name, tensor) -> (low, high)`` or ``None`` (no declared range: no range entry).
        rules: the job's rules; ``output_out_of_range_ratio`` there replaces the built-in :data:`RANGE_RULE`.

    >>> found = validate_outputs({"x": torch.tensor([0.0, 3.0])}, lambda name, t: (-1.0, 1.0))
    >>> found["output_out_of_range_ratio"]["value"], found["output_out_of_range_ratio"]["verdict"]
    (0.5, 'WARN')
    """
    name = _names(outputs)
    range_rule = (rules or {}).get("output_out_of_range_ratio") or RANGE_RULE["output_out_of_range_ratio"]
    entries: dict[str, dict[str, Any]] = {}
    for out, tensor in sorted(outputs.items()):
        if not tensor.is_floating_point():
            continue
        bounds = value_range(out, tensor)
        bounds = None if bounds is None else (float(bounds[0]), float(bounds[1]))
        found = inspect(tensor, bounds)
        entries[name(out, "output_nonfinite")] = _nonfinite_entry("output_nonfinite", found)
        if bounds is not None:
            finite = found.numel - found.nonfinite
            entries[name(out, "output_out_of_range_ratio")] = _entry(
                found.out_of_range / finite if finite else 0.0, range_rule, count=found.out_of_range,
                value_range=list(bounds), min=found.low, max=found.high)
    return entries


IDENTICAL_RULE = {"max": 0, "source": "built in: a reference in a higher precision than the device run cannot "
                                      "equal its output bit for bit; one that does was not computed independently "
                                      "(a replaced cache entry or saved run): delete it and run again"}
_RANK = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2, torch.float64: 3}
MIN_IDENTICAL_NUMEL = 16  # a handful of elements (or a constant) may legitimately agree exactly


def _identical(ref: torch.Tensor, out: torch.Tensor, device_rank: int) -> bool:
    if not (ref.is_floating_point() and out.is_floating_point()) or ref.shape != out.shape:
        return False
    if _RANK.get(ref.dtype, 0) <= device_rank or out.numel() < MIN_IDENTICAL_NUMEL:
        return False
    flat = out.reshape(-1)
    return bool((flat != flat[0]).any()) and torch.equal(ref.double(), out.double())


def identical_reference(reference: Mapping[str, torch.Tensor], outputs: Mapping[str, torch.Tensor],
                        device_dtype: torch.dtype) -> dict[str, dict[str, Any]]:
    """``reference_identical`` where a reference of a higher precision than ``device_dtype`` equals every
    floating-point device output exactly (built in: FAIL); ``{}`` otherwise.

    >>> out = torch.linspace(0, 1, 32, dtype=torch.bfloat16)
    >>> identical_reference({"x": out.double()}, {"x": out}, torch.bfloat16)["reference_identical"]["verdict"]
    'FAIL'
    """
    rank = _RANK.get(device_dtype, 0)
    pairs = [(name, reference[name], out) for name, out in sorted(outputs.items())
             if name in reference and out.is_floating_point()]
    if not pairs or not all(_identical(ref, out, rank) for _, ref, out in pairs):
        return {}
    return {"reference_identical": _entry(1, IDENTICAL_RULE, outputs=[name for name, _, _ in pairs])}
