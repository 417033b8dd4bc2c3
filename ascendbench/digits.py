"""Judged values with the digits a rule needs (0.99989 is no 0.9999); no pandas (job summary)."""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping

PERCENT_METRICS = ("mean_rel_err",)
_RULE = re.compile(r"^\s*(?P<op><=|>=|<|>)\s*(?P<bound>[-+0-9.eE]+|inf|-inf)\s*$")
_MAX_DIGITS = 17
# C0 controls but tab and newline, DEL, C1, bidirectional marks, overrides and isolates
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with control characters escaped: record text cannot drive a terminal."""
    return _CONTROL.sub(lambda match: ascii(match.group())[1:-1], text)


def figure(value: Any, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits, large floats in plain digits; None: ``n/a``."""
    if isinstance(value, float):
        text = f"{value:.{digits}g}"
        return f"{value:.0f}" if "e+" in text and abs(value) < 1e12 else text
    return "n/a" if value is None else str(value)


def number(value: Any) -> float | None:
    """``value`` as a float when it is a number (not a bool, not NaN), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def _side(value: float, bound: float) -> int:
    return (value > bound) - (value < bound)


def bounds_of(entry: Mapping[str, Any]) -> list[float]:
    """The bounds a metric entry was judged by: ``threshold``, the rule text's number, ``warn``.
    >>> bounds_of({"threshold": 0.9999, "rule": ">= 0.9999"}), bounds_of({"rule": "<= 0.001"})
    ([0.9999], [0.001])"""
    match = _RULE.match(str(entry["rule"])) if entry.get("rule") is not None else None
    rule = float(match.group("bound")) if match else None
    values = (number(candidate) for candidate in (entry.get("threshold"), rule, entry.get("warn")))
    return list(dict.fromkeys(value for value in values if value is not None))


def honest(value: float, bounds: Iterable[float] = (), digits: int = 4) -> str:
    """``value`` with at least ``digits`` significant digits, more where fewer would cross a bound.
    >>> honest(0.99989, [0.9999]), honest(0.99989, [0.99]), honest(0.0010004, [0.001])
    ('0.99989', '0.9999', '0.0010004')"""
    bounds = [b for b in bounds if b is not None and math.isfinite(b)]
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    for width in range(digits, _MAX_DIGITS + 1):
        shown = f"{value:.{width}g}"
        if all(_side(float(shown), b) == _side(value, b) for b in bounds):
            return shown
    return repr(value)


def is_percent(metric: str) -> bool:
    """True when ``metric`` (maybe namespaced: ``video/mean_rel_err``) prints as a percentage."""
    base = metric.rsplit("/", 1)[-1]
    return any(base == name or base.endswith("_" + name) for name in PERCENT_METRICS)


def percent_rule(rule: Any) -> str:
    """``<= 0.01`` -> ``<= 1%`` (any other text unchanged).
    >>> percent_rule("<= 0.01")
    '<= 1%'"""
    match = _RULE.match(str(rule)) if rule is not None else None
    if not match:
        return str(rule)
    return f"{match.group('op')} {float(match.group('bound')) * 100:g}%"


def judged_value(metric: str, entry: Mapping[str, Any], digits: int = 4) -> str:
    """A metric entry's value as text: honest digits against its bounds, in % for percent metrics.
    >>> judged_value("video/mean_rel_err", {"value": 0.0733, "rule": "<= 0.01"})
    '7.33%'"""
    value = number(entry.get("value"))
    if value is None:
        return str(entry.get("value"))
    if is_percent(metric):
        return honest(value * 100, [b * 100 for b in bounds_of(entry)], digits) + "%"
    if isinstance(entry.get("value"), int):
        return str(entry["value"])
    return honest(value, bounds_of(entry), digits)


def judged_rule(metric: str, entry: Mapping[str, Any]) -> str:
    """The entry's rule text (``<= 1%`` for percent metrics); its threshold where it has no rule."""
    rule = entry.get("rule")
    if rule is None and entry.get("threshold") is not None:
        threshold = entry["threshold"]
        rule = f"bound {threshold:g}" if number(threshold) is not None else threshold
    return percent_rule(rule) if is_percent(metric) else str(rule)
