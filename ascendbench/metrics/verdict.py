"""Verdict rules: a metric value against a ``max`` or ``min`` bound from config.

A rule is a mapping such as ``{max: 0.01, warn: 0.005, source: "..."}`` (value above ``max`` fails,
above ``warn`` warns) or ``{min: 0.99, warn: 0.999}`` (below ``min`` fails, below ``warn`` warns).
A NaN value always fails a rule. The job verdict is the worst metric verdict.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

ORDER = {"PASS": 0, "WARN": 1, "FAIL": 2}


def judge(value: float, rule: Mapping[str, Any]) -> dict[str, Any]:
    """Verdict of one value under one rule, with the threshold and rule text that decided it.

    >>> judge(0.02, {"max": 0.01})["verdict"], judge(0.995, {"min": 0.99, "warn": 0.999})["verdict"]
    ('FAIL', 'WARN')
    """
    bound_key = "max" if "max" in rule else "min"
    bound = float(rule[bound_key])
    op = "<=" if bound_key == "max" else ">="
    worse = (lambda v, b: v > b) if bound_key == "max" else (lambda v, b: v < b)
    if value is None or (isinstance(value, float) and math.isnan(value)) or worse(value, bound):
        verdict = "FAIL"
    elif "warn" in rule and worse(value, float(rule["warn"])):
        verdict = "WARN"
    else:
        verdict = "PASS"
    return {"verdict": verdict, "threshold": bound, "rule": f"{op} {bound:g}", "source": rule.get("source")}


def worst(verdicts: Iterable[str | None]) -> str:
    """The worst of the given verdicts (``PASS`` when there are none)."""
    present = [v for v in verdicts if v in ORDER]
    return max(present, key=ORDER.__getitem__) if present else "PASS"


def merge_rules(*layers: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Later layers override earlier ones per metric (dtype < model < metric)."""
    merged: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for name, rule in (layer or {}).items():
            merged[name] = dict(rule) if rule is not None else None
    return {k: v for k, v in merged.items() if v}
