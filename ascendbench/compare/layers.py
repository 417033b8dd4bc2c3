"""Pattern mode: regression metrics of each captured layer output, judged by ``compare.thresholds``."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.metrics.base import make_entry
from ascendbench.metrics.functional.regression import ErrorTolerances, regression_metrics
from ascendbench.metrics.regression import ALWAYS_RULES
from ascendbench.metrics.verdict import merge_rules, worst
from ascendbench.precision import dtype_name

# Columns of a layer row in compare.csv (the full metric set stays in the record).
# Kept in the record for every layer even where no rule judges them (the Sulphur-2 seed's MaxDiff / CosSim).
HEADLINE = ("max_abs_err", "cosine")
ROW_METRICS = ("max_abs_err", "mean_rel_err", "cosine", "mae", "rmse", "allclose_mismatch_ratio", "nonfinite_mismatch")


def _data_range(reference: torch.Tensor) -> float:
    finite = reference[torch.isfinite(reference)]
    return float(finite.max() - finite.min()) if finite.numel() else 1.0


def compare_layer(name: str, reference: torch.Tensor, device: torch.Tensor, rules: Mapping[str, Any],
                  tolerances: Mapping[str, float]) -> dict[str, Any]:
    """One compared layer output: its metrics, verdicts and the compare.csv row fields."""
    if tuple(reference.shape) != tuple(device.shape):
        return {"name": name, "kind": "layer", "shape": list(reference.shape), "result": "FAIL",
                "message": f"shape differs: reference {list(reference.shape)} vs device {list(device.shape)}",
                "entries": {}}
    values = regression_metrics(reference, device, ErrorTolerances.from_mapping(tolerances),
                                data_range=_data_range(reference) or 1.0)
    entries = {metric: make_entry(metric, value, rules) for metric, value in values.items()}
    judged = {m: e for m, e in entries.items() if e.get("verdict")}
    kept = {**{m: entries[m] for m in HEADLINE if m in entries}, **judged}  # the seeds' columns, judged or not
    bad = [f"{m} {e['value']:.4g} {e['verdict']} ({e['rule']})" for m, e in judged.items() if e["verdict"] != "PASS"]
    row = {"name": name, "kind": "layer", "shape": list(reference.shape),
           "ref_dtype": dtype_name(reference.dtype),
           "dev_dtype": dtype_name(device.dtype)}
    row.update({m: values[m] for m in ROW_METRICS})
    row.update(result=worst(e["verdict"] for e in judged.values()) or "", message="; ".join(bad), entries=kept)
    return row


def compare_layers(reference: Mapping[str, Any], device: Any, thresholds: Mapping[str, Any] | None,
                   tolerances: Mapping[str, float]) -> list[dict[str, Any]]:
    """Rows for every layer tensor captured on either side, in the device's capture order.

    Args:
        reference: the cached capture, ``{tensors, order, dropped}``.
        device: the device :class:`ascendbench.compare.hooks.TensorCapture`.
        thresholds: ``compare.thresholds`` rules.
        tolerances: the dtype's ``atol``, ``rtol``, ``small_value``, ``small_value_atol``.
    """
    rules = merge_rules(thresholds, ALWAYS_RULES)
    ref_tensors = reference["tensors"]
    rows = []
    for name in device.order + [n for n in reference["order"] if n not in device.tensors]:
        if name in device.tensors and name in ref_tensors:
            rows.append(compare_layer(name, ref_tensors[name], device.tensors[name], rules, tolerances))
        else:
            side = "reference" if name not in ref_tensors else "device"
            rows.append({"name": name, "kind": "layer", "result": "",
                         "message": f"not captured on the {side} side (module not called there, or over "
                                    "compare.max_capture_mb)", "entries": {}})
    return rows
