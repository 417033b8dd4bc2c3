"""Captured layers against the reference's: per-output metrics, or per-module stats (``all``);
msprobe dumps judged the same way."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import torch

from ascendbench.compare.csvfile import judged_row
from ascendbench.compare.msprobe import read_dump
from ascendbench.metrics.evaluators import ALWAYS_RULES
from ascendbench.metrics.functional.nonfinite import scalars_agree
from ascendbench.metrics.functional.regression import ErrorTolerances, regression_metrics
from ascendbench.metrics.suite import make_entry
from ascendbench.metrics.verdict import merge_rules

HEADLINE = ("max_abs_err", "cosine")  # the seeds' numbers, kept in the record judged or not
ROW_METRICS = ("max_abs_err", "mean_rel_err", "cosine", "mae", "rmse", "allclose_mismatch_ratio",
               "nonfinite_mismatch")  # columns of a layer row in compare.csv


def hidden_rules(compare: Any, precision: Any) -> dict[str, dict[str, Any]]:
    """``compare.thresholds``, ``thresholds_by_dtype.<dtype>`` over them for a finer reference."""
    by_dtype = compare.get("thresholds_by_dtype") or {}
    reference = getattr(precision, "reference", None)
    finer = reference is not None and reference.itemsize > precision.dtype.itemsize
    return merge_rules(compare.get("thresholds"), by_dtype.get(precision.name) if finer else None)


def compare_layer(name: str, reference: torch.Tensor, device: torch.Tensor,
                  rules: Mapping[str, Any], tolerances: Mapping[str, float]) -> dict[str, Any]:
    """One compared layer output: its compare.csv row, with the judged ``entries``."""
    if tuple(reference.shape) != tuple(device.shape):
        return {"name": name, "kind": "layer", "shape": list(reference.shape), "result": "FAIL",
                "entries": {}, "message": f"shape differs: reference {list(reference.shape)} vs "
                f"device {list(device.shape)}"}
    finite = reference[torch.isfinite(reference)]
    data_range = float(finite.max() - finite.min()) if finite.numel() else 1.0
    values = regression_metrics(reference, device, ErrorTolerances.from_mapping(tolerances),
                                data_range=data_range or 1.0)
    entries = {metric: make_entry(metric, value, rules) for metric, value in values.items()}
    row = judged_row(name, "layer", reference, device, entries, columns=ROW_METRICS)
    judged = {m: e for m, e in entries.items() if e.get("verdict")}
    return {**row, "entries": {**{m: entries[m] for m in HEADLINE}, **judged}}


def compare_layers(reference: Mapping[str, Any], device: Any, thresholds: Mapping[str, Any] | None,
                   tolerances: Mapping[str, float]) -> list[dict[str, Any]]:
    """Rows for every layer tensor captured on either side, in the device's order, judged."""
    rules = merge_rules(thresholds, ALWAYS_RULES)
    ref_tensors = reference["tensors"]
    rows = []
    for name in device.order + [n for n in reference["order"] if n not in device.tensors]:
        if name in device.tensors and name in ref_tensors:
            ref, dev = ref_tensors[name], device.tensors[name]
            rows.append(compare_layer(name, ref, dev, rules, tolerances))
            continue
        side = "reference" if name not in ref_tensors else "device"
        rows.append({"name": name, "kind": "layer", "result": "", "entries": {}, "message":
                     f"not captured on the {side} side (module not called there, or over "
                     "compare.max_capture_mb)"})
    return rows


def stats_rel_err(reference: Mapping[str, float], device: Mapping[str, float],
                  statistics: Sequence[str]) -> float:
    """Largest ``|dev - ref| / max(|ref|, rms(ref))``; a NaN/Inf difference is infinite."""
    if device.get("nonfinite", 0) != reference.get("nonfinite", 0):
        return math.inf
    rms = reference["l2norm"] / math.sqrt(reference["numel"]) if reference.get("numel") else 0.0
    scale = rms if math.isfinite(rms) else 0.0
    worst_err = 0.0
    for name in statistics:
        ref, dev = reference[name], device[name]
        agree = scalars_agree(ref, dev)  # None: two finite numbers
        if agree is False:
            return math.inf
        if agree is None:
            worst_err = max(worst_err, abs(dev - ref) / max(abs(ref), scale, 1e-30))
    return worst_err


def _tensors_rel_err(reference: Sequence[Mapping[str, float]],
                     device: Sequence[Mapping[str, float]], statistics: Sequence[str]) -> float:
    if len(reference) != len(device):
        return math.inf
    return max((stats_rel_err(r, d, statistics) for r, d in zip(reference, device, strict=True)),
               default=0.0)


def _module_row(order: int, module: Mapping[str, Any], ref: Mapping[str, Any] | None,
                statistics: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"name": module["key"], "kind": "module", "order": order,
                           "type": module["type"]}
    if ref is None:
        return {**row, "result": "unmatched",
                "message": "module call not seen in the reference run"}
    row["input_rel_err"] = _tensors_rel_err(ref["inputs"], module["inputs"], statistics)
    row["output_rel_err"] = _tensors_rel_err(ref["outputs"], module["outputs"], statistics)
    for side, stats in (("ref", ref), ("dev", module)):
        first = stats["outputs"][0] if stats["outputs"] else {}
        row.update({f"{side}_{stat}": first.get(stat) for stat in ("max", "min", "mean", "l2norm")})
    return row


def compare_modules(reference: Sequence[Mapping[str, Any]], device: Sequence[Mapping[str, Any]],
                    rule: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Rows of every device module call and the first divergent module (``compare.divergence``)."""
    by_key = {m["key"]: m for m in reference}
    in_max, out_min = float(rule["input_max_rel_err"]), float(rule["output_min_rel_err"])
    rows, first = [], None
    for order, module in enumerate(device):
        row = _module_row(order, module, by_key.get(module["key"]), list(rule["statistics"]))
        rows.append(row)
        if row.get("result") == "unmatched":
            continue
        in_err, out_err = row["input_rel_err"], row["output_rel_err"]
        diverged = out_err > out_min
        if diverged and in_err < in_max and first is None:
            first = {"module": module["key"], "type": module["type"], "order": order,
                     "input_rel_err": in_err, "output_rel_err": out_err,
                     "rule": f"input rel err < {in_max:g} and output rel err > {out_min:g}"}
            row.update(result="first_divergent", message=f"inputs agree ({in_err:.3g} < "
                       f"{in_max:g}), output diverges ({out_err:.3g} > {out_min:g})")
        else:
            row.update(result="diverged" if diverged else "ok",
                       message=f"output rel err {out_err:.3g} > {out_min:g}" if diverged else "")
    return rows, first


def judge_dumps(golden: Path, target: Path, rules: Mapping[str, Any],
                tolerances: Mapping[str, float]) -> tuple[list[dict[str, Any]], str | None]:
    """compare.csv rows of every floating output both dumps hold (target's order) and the first
    that FAILs its rules (``None``: none fails)."""
    reference, device = read_dump(golden), read_dump(target)
    floats = {n: t for n, t in device.items() if t.is_floating_point()
              and n in reference and reference[n].is_floating_point()}
    rows = compare_layers({"tensors": reference, "order": [n for n in reference if n in floats]},
                          SimpleNamespace(order=list(floats), tensors=floats), rules, tolerances)
    return rows, next((r["name"] for r in rows if r["result"] == "FAIL"), None)
