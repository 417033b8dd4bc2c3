"""Verdict rules: a value against a ``max`` or ``min`` bound, an optional ``warn``; NaN fails."""

from __future__ import annotations

import math
import operator
from typing import Any, Iterable, Mapping

from ascendbench.errors import ConfigError

ORDER = {"PASS": 0, "WARN": 1, "FAIL": 2}


def as_number(value: Any) -> float | None:
    """A float, or ``None`` for a missing value (``None``, NaN, not a number)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def judge(value: Any, rule: Mapping[str, Any]) -> dict[str, Any]:
    """Verdict of one value under one rule, with the threshold and rule text that decided it."""
    key = "max" if "max" in rule else "min"
    bound, op = float(rule[key]), "<=" if key == "max" else ">="
    worse = operator.gt if key == "max" else operator.lt
    number = as_number(value)
    if number is None or worse(number, bound):
        verdict = "FAIL"
    elif rule.get("warn") is not None and worse(number, float(rule["warn"])):
        verdict = "WARN"
    else:
        verdict = "PASS"
    return {"verdict": verdict, "threshold": bound, "rule": f"{op} {bound:g}",
            "source": rule.get("source")}


def unjudged(decided: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """A decided entry reported, not judged: ``would_be`` the rule's verdict, ``not_judged`` why."""
    return {**decided, "verdict": None, "would_be": decided["verdict"], "not_judged": reason}


def worst(verdicts: Iterable[str | None]) -> str | None:
    """The worst of the given verdicts; ``None`` when no metric was judged."""
    present = [v for v in verdicts if v in ORDER]
    return max(present, key=ORDER.__getitem__) if present else None


def check_rule(metric: str, rule: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` unless ``rule`` has exactly one numeric ``max``/``min`` bound."""
    bounds = [k for k in ("max", "min") if k in rule]
    numbers = bounds + (["warn"] if rule.get("warn") is not None else [])
    if len(bounds) != 1 or any(as_number(rule[k]) is None for k in numbers):
        raise ConfigError(
            f"threshold rule for metric {metric!r} is {dict(rule)!r}; a rule has exactly one "
            "numeric bound, `max` (fail above) or `min` (fail below), an optional numeric `warn` "
            "and a `source`, e.g. `{max: 0.01, warn: 0.005, source: \"where the number comes "
            "from\"}`. Fix it in conf/dtype, the model's or the metric's `thresholds`.")


def merge_rules(*layers: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Later layers override earlier ones per metric; a ``None`` rule removes the metric's rule."""
    merged: dict[str, dict[str, Any] | None] = {}
    for layer in layers:
        for name, rule in (layer or {}).items():
            if rule is not None:
                check_rule(name, rule)
            merged[name] = dict(rule) if rule is not None else None
    return {k: v for k, v in merged.items() if v}
