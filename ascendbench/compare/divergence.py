"""``compare.layers=all``: per-module statistics compared, and the first divergent module.

For each module call (matched between the runs by ``<module>#<call>``), the relative error of a tensor
is the largest, over the chosen statistics (max, min, mean, L2 norm), of

    |dev_stat - ref_stat| / max(|ref_stat|, rms(ref), tiny)

where ``rms(ref) = l2norm / sqrt(numel)``: a statistic near zero (the mean of a normalised activation)
is judged against the tensor's scale, not against itself. A module's input error is the largest over
its tensor inputs, its output error the largest over its outputs. Walking the modules in the order they
finish, the **first divergent module** is the first whose inputs agree (error < ``input_max_rel_err``)
but whose output does not (error > ``output_min_rel_err``) -- msprobe's rule for locating where a port
goes wrong.

NaN and Inf follow the agreement rule of :mod:`ascendbench.metrics.functional.nonfinite`: a different
number of non-finite elements on the two sides (either way) is a mismatch, an infinite error; a
statistic that is the same non-finite value on both sides (NaN and NaN, ``inf`` and ``inf``) agrees
(no error); a statistic non-finite on one side only, or different non-finite values, is an infinite error.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ascendbench.metrics.functional.nonfinite import scalars_agree

_TINY = 1e-30


def stats_rel_err(reference: Mapping[str, float], device: Mapping[str, float], statistics: Sequence[str]) -> float:
    """Relative error of one tensor's statistics (see the module docstring).

    >>> stats_rel_err({"max": 2.0, "l2norm": 4.0, "numel": 4, "nonfinite": 0},
    ...               {"max": 3.0, "l2norm": 4.0, "numel": 4, "nonfinite": 0}, ["max", "l2norm"])
    0.5
    """
    if device.get("nonfinite", 0) != reference.get("nonfinite", 0):
        return math.inf
    rms = reference["l2norm"] / math.sqrt(reference["numel"]) if reference.get("numel") else 0.0
    worst_err = 0.0
    for name in statistics:
        ref, dev = reference[name], device[name]
        agree = scalars_agree(ref, dev)  # None: two finite numbers
        if agree is False:
            return math.inf
        if agree is None:
            worst_err = max(worst_err, abs(dev - ref) / max(abs(ref), rms if math.isfinite(rms) else 0.0, _TINY))
    return worst_err


def tensors_rel_err(reference: Sequence[Mapping[str, float]], device: Sequence[Mapping[str, float]],
                    statistics: Sequence[str]) -> float:
    """Largest error over paired tensors; a different number of tensors is an infinite error."""
    if len(reference) != len(device):
        return math.inf
    return max((stats_rel_err(r, d, statistics) for r, d in zip(reference, device, strict=True)), default=0.0)


def compare_modules(reference: Sequence[Mapping[str, Any]], device: Sequence[Mapping[str, Any]],
                    rule: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Rows for every device module call (completion order) and the first divergent module (or None).

    Args:
        reference: the baseline's module statistics (``{key, type, inputs, outputs}`` each).
        device: the device run's module statistics.
        rule: ``compare.divergence`` (``input_max_rel_err``, ``output_min_rel_err``, ``statistics``).
    """
    by_key = {m["key"]: m for m in reference}
    in_max, out_min = float(rule["input_max_rel_err"]), float(rule["output_min_rel_err"])
    statistics = list(rule["statistics"])
    rows, first = [], None
    for order, module in enumerate(device):
        ref = by_key.get(module["key"])
        row: dict[str, Any] = {"name": module["key"], "kind": "module", "order": order, "type": module["type"]}
        if ref is None:
            row.update(result="unmatched", message="module call not seen in the reference run")
            rows.append(row)
            continue
        in_err = tensors_rel_err(ref["inputs"], module["inputs"], statistics)
        out_err = tensors_rel_err(ref["outputs"], module["outputs"], statistics)
        row.update(input_rel_err=in_err, output_rel_err=out_err, **_output_stats(ref, module))
        diverged = out_err > out_min
        if diverged and in_err < in_max and first is None:
            first = {"module": module["key"], "type": module["type"], "order": order,
                     "input_rel_err": in_err, "output_rel_err": out_err,
                     "rule": f"input rel err < {in_max:g} and output rel err > {out_min:g}"}
            row.update(result="first_divergent", message=f"inputs agree ({in_err:.3g} < {in_max:g}), output "
                                                         f"diverges ({out_err:.3g} > {out_min:g})")
        else:
            row.update(result="diverged" if diverged else "ok",
                       message=f"output rel err {out_err:.3g} > {out_min:g}" if diverged else "")
        rows.append(row)
    return rows, first


def _output_stats(reference: Mapping[str, Any], device: Mapping[str, Any]) -> dict[str, float]:
    ref = reference["outputs"][0] if reference["outputs"] else {}
    dev = device["outputs"][0] if device["outputs"] else {}
    return {f"{side}_{stat}": stats.get(stat) for side, stats in (("ref", ref), ("dev", dev))
            for stat in ("max", "min", "mean", "l2norm")}
