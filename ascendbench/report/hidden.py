"""Hidden-state checks (``compare.layers``) folded into one worst value per check, plus their per-layer detail.

A record of a job with ``compare.layers`` holds one metric entry per hooked layer, call and output,
named ``layer/<module>#<call>/<output>/<metric>`` (about 1,800 for the 2-block, 2-step LTX-2 twin at
50 steps). The accuracy table shows one aggregate per check instead: the worst value over every layer
and call (the largest ``max_abs_err``, the smallest ``cosine``: the direction is read from the rule),
the worst verdict, where the worst value sits, and the first divergent module. The detail keeps its
own report section and ``layers.csv``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ascendbench.report.fmt import MISSING, get, judged, num, short, text

LAYER_PREFIX = "layer/"
HIDDEN = "hidden"  # row keys: hidden.<metric>.value|verdict|rule|at|layers, hidden.first_divergent
_VERDICT_RANK = {"PASS": 0, "WARN": 1, "FAIL": 2}
_HIGHER_IS_BETTER = ("cosine", "psnr", "ssim")


def split_layer_metric(name: str) -> tuple[str, str] | None:
    """``layer/<layer>/<metric>`` -> (layer, metric); None for any other metric name."""
    if not name.startswith(LAYER_PREFIX) or "/" not in name[len(LAYER_PREFIX):]:
        return None
    layer, metric = name[len(LAYER_PREFIX):].rsplit("/", 1)
    return layer, metric


def lower_is_worse(metric: str, entry: Mapping[str, Any]) -> bool:
    """True when a smaller value is worse (rule ``>= x``, or a similarity such as cosine/PSNR/SSIM)."""
    rule = str(entry.get("rule") or "").strip()
    if rule:
        return rule.startswith(">")
    return any(part in metric for part in _HIGHER_IS_BETTER)


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if value in ("inf", "-inf"):
            return float(value)
        return None
    return float(value)


def _worse(candidate: float, current: float, low_bad: bool) -> bool:
    if candidate != candidate:  # NaN is the worst of all
        return current == current
    return candidate < current if low_bad else candidate > current


def _fold(entries: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per metric: worst value, where it sits, worst verdict, its rule and how many layer entries."""
    folded: dict[str, dict[str, Any]] = {}
    for layer, metric, entry in entries:
        value = _numeric(entry.get("value"))
        if value is None:
            continue
        agg = folded.setdefault(metric, {"layers": 0, "low_bad": lower_is_worse(metric, entry)})
        agg["layers"] += 1
        if "value" not in agg or _worse(value, agg["value"], agg["low_bad"]):
            agg.update(value=value, at=layer)
        verdict = entry.get("verdict")
        if verdict in _VERDICT_RANK and _VERDICT_RANK[verdict] >= _VERDICT_RANK.get(agg.get("verdict"), -1):
            agg.update(verdict=verdict, rule=entry.get("rule") or entry.get("threshold"))
    return folded


def first_divergent(metrics: Mapping[str, Any], compare: Any) -> str | None:
    """The first module (in capture order) whose hidden state failed its check, or ``all`` mode's answer."""
    if isinstance(compare, Mapping) and compare.get("mode") == "all":
        found = compare.get("first_divergent")
        return str(found.get("name", found) if isinstance(found, Mapping) else found) if found else "none"
    results = compare.get("results") if isinstance(compare, Mapping) else None
    if isinstance(results, Mapping):
        ordered = [name for name, r in results.items() if isinstance(r, Mapping) and r.get("result") == "FAIL"]
    else:
        ordered = [parts[0] for name, e in metrics.items()
                   if (parts := split_layer_metric(name)) and isinstance(e, Mapping) and e.get("verdict") == "FAIL"]
    if ordered:
        return ordered[0]
    return "none" if any(split_layer_metric(n) for n in metrics) else None


def hidden_fields(metrics: Mapping[str, Any], compare: Any) -> dict[str, Any]:
    """Row fields ``hidden.<metric>.{value,verdict,rule,at,layers}`` and ``hidden.first_divergent``."""
    entries = [(*parts, e) for name, e in metrics.items()
               if (parts := split_layer_metric(name)) and isinstance(e, Mapping)]
    fields: dict[str, Any] = {}
    for metric, agg in _fold(entries).items():
        for key in ("value", "verdict", "rule", "at", "layers"):
            if key in agg:
                fields[f"{HIDDEN}.{metric}.{key}"] = agg[key]
    divergent = first_divergent(metrics, compare)
    if divergent is not None:
        fields[f"{HIDDEN}.first_divergent"] = divergent
    return fields


def hidden_metrics(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The hidden-state checks some row aggregates, judged ones first (``max_abs_err``, ``cosine``...)."""
    names = {k[len(HIDDEN) + 1:-len(".value")] for r in rows for k in r
             if k.startswith(f"{HIDDEN}.") and k.endswith(".value") and get(r, k) is not None}
    first = ("max_abs_err", "cosine")
    return sorted(names, key=lambda n: (first.index(n) if n in first else len(first), n))


def hidden_cell(row: Mapping[str, Any], metric: str) -> str:
    """``worst value VERDICT at <layer>`` for one check (the rule is a note under the table); ``missing`` when
    the job hooked nothing."""
    value = get(row, f"{HIDDEN}.{metric}.value")
    if value is None:
        return "no baseline" if get(row, "baseline.skipped") is not None else MISSING
    cell, verdict, _ = judged(row, f"{HIDDEN}.{metric}", metric)
    if verdict:
        cell += f" {verdict}"
    return f"{cell} at {short(get(row, f'{HIDDEN}.{metric}.at'), 60)}"


def layer_rows(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The per-layer detail of one report row: one dict per ``<module>#<call>/<output>`` entry.

    Keys: ``layer``, ``module``, ``call``, ``output``, each metric's value, ``<metric>_verdict`` and the
    worst verdict as ``result``; in the record's (capture) order.
    """
    layers: dict[str, dict[str, Any]] = {}
    for key in row:
        if not (key.startswith("metrics." + LAYER_PREFIX) and key.endswith(".value")):
            continue
        parts = split_layer_metric(key[len("metrics."):-len(".value")])
        value = get(row, key)
        if parts is None or value is None:
            continue
        layer, metric = parts
        entry = layers.setdefault(layer, _layer_entry(layer))
        entry[metric] = value
        verdict = get(row, key[:-len(".value")] + ".verdict")
        if verdict in _VERDICT_RANK:
            entry[f"{metric}_verdict"] = verdict
            if _VERDICT_RANK[verdict] >= _VERDICT_RANK.get(entry.get("result"), -1):
                entry["result"] = verdict
    return list(layers.values())


def _layer_entry(layer: str) -> dict[str, Any]:
    module, _, rest = layer.partition("#")
    call, _, output = rest.partition("/")
    return {"layer": layer, "module": module, "call": call or None, "output": output or None}


def module_rows(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per hooked module of one row: entries (calls x outputs), worst value per check, failures, first failure."""
    checks = {m: str(get(row, f"{HIDDEN}.{m}.rule") or "").startswith(">") or
              (get(row, f"{HIDDEN}.{m}.rule") is None and lower_is_worse(m, {})) for m in hidden_metrics([row])}
    modules: dict[str, dict[str, Any]] = {}
    for entry in layer_rows(row):
        agg = modules.setdefault(entry["module"], {"module": entry["module"], "entries": 0, "failed": 0,
                                                   "first_failure": None})
        agg["entries"] += 1
        if entry.get("result") == "FAIL":
            agg["failed"] += 1
            agg["first_failure"] = agg["first_failure"] or entry["layer"]
        for metric, low_bad in checks.items():
            value = _numeric(entry.get(metric))
            if value is not None and (metric not in agg or _worse(value, agg[metric], low_bad)):
                agg[metric] = value
    return list(modules.values())


def detail_cells(agg: Mapping[str, Any], checks: list[str]) -> list[str]:
    """Cells of one :func:`module_rows` entry: module, entries, worst per check, failed entries, first failure."""
    return ([text(agg["module"]), num(agg["entries"])] + [num(agg.get(m)) for m in checks]
            + [num(agg["failed"]), text(agg["first_failure"] or "none")])


def detail_headers(checks: list[str]) -> list[str]:
    """Headers matching :func:`detail_cells`."""
    return ["module", "entries (calls x outputs)"] + [f"worst {m}" for m in checks] + ["failed entries",
                                                                                       "first failed entry"]
