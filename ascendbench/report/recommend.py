"""The dtype recommendation per model and device, derived from the records' verdicts and latencies."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import get, judged, link, metric_matches, num, size_label, table, text
from ascendbench.report.performance import latest, median_ms, point_key
from ascendbench.report.tables import RANDOM_LEGEND, RANDOM_MARK, random_init

RULE = (
    "Rule: for each model and device, a dtype **passes** when every accuracy verdict of its jobs is PASS "
    "or WARN; a single FAIL makes it **not recommended** (the failing metrics are quoted); a dtype whose "
    "jobs carry no verdict (baseline skipped) is **not judged**. The **recommended** dtype is the passing "
    "one with the lowest median latency, compared on the workloads (preset, batch, size) that every "
    "passing dtype measured (geometric mean of the medians). The **most accurate** is the passing dtype "
    "with the lowest worst-case `{metric}` across its jobs."
)


def _failures(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    found = []
    for row in rows:
        for key in sorted(row):
            if key.startswith("metrics.") and key.endswith(".verdict") and get(row, key) == "FAIL":
                name = key[len("metrics."):-len(".verdict")]
                value, _, rule = judged(row, f"metrics.{name}", name)
                found.append(f"{name} {value} fails {rule} ({text(get(row, 'job.preset'))} "
                             f"{size_label(row)} b{num(get(row, 'job.batch_size'))})")
    return found


def _worst_error(rows: Sequence[Mapping[str, Any]], metric: str) -> float | None:
    values = [float(get(r, k)) for r in rows for k in r if k.startswith("metrics.") and k.endswith(".value")
              and metric_matches(k[len("metrics."):-len(".value")], metric)
              and isinstance(get(r, k), (int, float))]
    return max(values) if values else None


def classify(rows: Sequence[Mapping[str, Any]]) -> str:
    """``pass``, ``fail`` or ``unjudged`` from the jobs' overall verdicts."""
    verdicts = [get(r, "verdict") for r in rows if get(r, "verdict")]
    if "FAIL" in verdicts:
        return "fail"
    return "pass" if verdicts else "unjudged"


def speed_scores(by_dtype: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[dict[str, float], int]:
    """Geometric-mean median latency per dtype over the workloads all of them measured."""
    points = [{point_key(r) for r in rows if median_ms(r)} for rows in by_dtype.values()]
    common = set.intersection(*points) if points else set()
    scores = {}
    for dtype, rows in by_dtype.items():
        medians = [median_ms(latest([r for r in rows if point_key(r) == p and median_ms(r)])) for p in common]
        if medians:
            scores[dtype] = math.exp(sum(math.log(m) for m in medians) / len(medians))
    return scores, len(common)


def _links(rows: Sequence[Mapping[str, Any]], base_dir: Path, limit: int = 6) -> str:
    shown = [link(str(i + 1), r["record"], base_dir) for i, r in enumerate(rows[:limit])]
    return " ".join(shown) + (f" (+{len(rows) - limit})" if len(rows) > limit else "")


def recommend_device(rows: Sequence[Mapping[str, Any]], metric: str, base_dir: Path) -> str:
    """The recommendation table for one model on one device."""
    by_dtype: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_dtype.setdefault(str(get(row, "job.dtype")), []).append(row)
    mark = lambda d: f"{d} {RANDOM_MARK}" if any(random_init(r) for r in by_dtype[d]) else d  # noqa: E731
    classes = {d: classify(rs) for d, rs in by_dtype.items()}
    passing = {d: by_dtype[d] for d in sorted(by_dtype) if classes[d] == "pass"}
    body = []
    if passing:
        scores, n_common = speed_scores(passing)
        if scores:
            best = min(scores, key=scores.get)
            others = ", ".join(f"{d} {num(s)} ms" for d, s in sorted(scores.items()) if d != best)
            why = (f"passes every verdict; median {num(scores[best])} ms" + (f" vs {others}" if others else "")
                   + f" (geometric mean over {n_common} common workload(s))")
            choice = "recommended (passes, fastest)" if len(scores) > 1 else "recommended (the only passing dtype)"
            body.append([choice, mark(best), why, _links(passing[best], base_dir)])
        else:
            body.append(["recommended", "none", "the passing dtypes share no measured workload, so their "
                         "speed cannot be compared", _links([r for rs in passing.values() for r in rs], base_dir)])
        errors = {d: _worst_error(rs, metric) for d, rs in passing.items()}
        errors = {d: e for d, e in errors.items() if e is not None}
        if errors:
            best = min(errors, key=errors.get)
            body.append(["most accurate", mark(best), f"lowest worst-case {metric} {num(errors[best])} among "
                         "passing dtypes", _links(passing[best], base_dir)])
    else:
        body.append(["recommended", "none", "no dtype passed its accuracy verdicts on this device", ""])
    for dtype in sorted(by_dtype):
        if classes[dtype] == "fail":
            body.append(["not recommended", mark(dtype), "; ".join(_failures(by_dtype[dtype])[:3]),
                         _links([r for r in by_dtype[dtype] if get(r, "verdict") == "FAIL"], base_dir)])
        elif classes[dtype] == "unjudged":
            body.append(["not judged", mark(dtype), "no accuracy verdict in its records (baseline skipped "
                         "or no rule)", _links(by_dtype[dtype], base_dir)])
    return table(["choice", "dtype", "why (from the records)", "records"], body)


def _by_weights(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """``[("", rows)]`` when all rows ran one kind of weights, else one group per kind (loaded first)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault("random-init" if random_init(row) else "loaded", []).append(row)
    if len(groups) == 1:
        return [("", list(rows))]
    return sorted(groups.items(), key=lambda kv: kv[0] != "loaded")


def recommendation_section(rows: Sequence[Mapping[str, Any]], models: Sequence[str], metric: str,
                           base_dir: Path, heading: str = "###") -> str:
    """The rule, then one table per model and device."""
    parts = [RULE.format(metric=metric)]
    for model in models:
        mine = [r for r in rows if get(r, "job.model") == model]
        for device in sorted({str(get(r, "job.device")) for r in mine}):
            on_device = [r for r in mine if str(get(r, "job.device")) == device]
            for weights, kind in _by_weights(on_device):  # random-init and loaded weights are never mixed
                label = f"{heading} {model} on {device}" + (f", {weights} weights" if weights else "")
                parts.append(f"{label}\n\n" + recommend_device(kind, metric, base_dir))
    if any(random_init(r) for r in rows):
        parts.append(f"- {RANDOM_LEGEND}")
    return "\n\n".join(parts)
