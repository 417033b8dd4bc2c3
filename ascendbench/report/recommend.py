"""The dtype recommendation per model and device, from the records' verdicts and latencies."""

from __future__ import annotations

import math
from pathlib import Path

from ascendbench.report import fmt
from ascendbench.report.performance import latest, point_key
from ascendbench.report.tables import RANDOM_LEGEND, RANDOM_MARK, random_init

RULE = (
    "Rule: for each model and device, a dtype **passes** when every accuracy verdict of its jobs "
    "is PASS or WARN; a single FAIL makes it **not recommended** (the failing metrics are quoted); "
    "a dtype whose jobs carry no verdict (baseline skipped) is **not judged**. The **recommended** "
    "dtype is the passing one with the lowest median latency, compared on the workloads (preset, "
    "batch, size) that every passing dtype measured (geometric mean of the medians). The **most "
    "accurate** is the passing dtype with the lowest worst-case `{metric}` across its jobs."
)


def classify(rows: fmt.Rows) -> str:
    """``pass``, ``fail`` or ``unjudged`` from the jobs' overall verdicts."""
    verdicts = [fmt.get(r, "verdict") for r in rows if fmt.get(r, "verdict")]
    if "FAIL" in verdicts:
        return "fail"
    return "pass" if verdicts else "unjudged"


def speed_scores(by_dtype: dict[str, fmt.Rows]) -> tuple[dict[str, float], int]:
    """Geometric-mean median latency per dtype over the workloads all of them measured."""
    points = [{point_key(r) for r in rows if fmt.latency(r)} for rows in by_dtype.values()]
    common = set.intersection(*points) if points else set()
    scores = {}
    for dtype, rows in by_dtype.items():
        medians = [fmt.latency(latest([r for r in rows if point_key(r) == p and fmt.latency(r)]))
                   for p in common]
        if medians:
            scores[dtype] = math.exp(sum(math.log(m) for m in medians) / len(medians))
    return scores, len(common)


def _links(rows: fmt.Rows, base_dir: Path, limit: int = 6) -> str:
    shown = [fmt.link(str(i + 1), r["record"], base_dir) for i, r in enumerate(rows[:limit])]
    return " ".join(shown) + (f" (+{len(rows) - limit})" if len(rows) > limit else "")


def recommend_device(rows: fmt.Rows, metric: str, base_dir: Path) -> str:
    """The recommendation table for one model on one device."""
    by_dtype = fmt.group(rows, lambda r: str(fmt.get(r, "job.dtype")))
    marked = {d: f"{d} {RANDOM_MARK}" if any(random_init(r) for r in rs) else d
              for d, rs in by_dtype.items()}
    classes = {d: classify(rs) for d, rs in by_dtype.items()}
    passing = {d: by_dtype[d] for d in sorted(by_dtype) if classes[d] == "pass"}
    body = []
    if not passing:
        body.append(["recommended", "none", "no dtype passed its accuracy verdicts on this device",
                     ""])
    scores, n_common = speed_scores(passing) if passing else ({}, 0)
    if scores:
        best = min(scores, key=scores.get)
        others = ", ".join(f"{d} {fmt.num(s)} ms" for d, s in sorted(scores.items()) if d != best)
        why = (f"passes every verdict; median {fmt.num(scores[best])} ms"
               + (f" vs {others}" if others else "")
               + f" (geometric mean over {n_common} common workload(s))")
        choice = ("recommended (passes, fastest)" if len(scores) > 1
                  else "recommended (the only passing dtype)")
        body.append([choice, marked[best], why, _links(passing[best], base_dir)])
    elif passing:
        body.append(["recommended", "none", "the passing dtypes share no measured workload, so "
                     "their speed cannot be compared",
                     _links([r for rs in passing.values() for r in rs], base_dir)])
    errors = {}
    for dtype, rs in passing.items():
        values = [float(v) for r in rs for n, v in fmt.metric_fields(r, layers=True).items()
                  if fmt.metric_matches(n, metric) and isinstance(v, (int, float))]
        if values:
            errors[dtype] = max(values)
    if errors:
        best = min(errors, key=errors.get)
        body.append(["most accurate", marked[best], f"lowest worst-case {metric} "
                     f"{fmt.num(errors[best])} among passing dtypes",
                     _links(passing[best], base_dir)])
    for dtype in sorted(by_dtype):
        if classes[dtype] == "fail":
            failed = [r for r in by_dtype[dtype] if fmt.get(r, "verdict") == "FAIL"]
            said = [f"{rule} ({' '.join(fmt.cells(r, ['job.preset', 'size']))} "
                    f"b{fmt.field(r, 'job.batch_size')})"
                    for r in by_dtype[dtype] for rule in fmt.failed_rules(r)]
            body.append(["not recommended", marked[dtype], "; ".join(said[:3]),
                         _links(failed, base_dir)])
        elif classes[dtype] == "unjudged":
            body.append(["not judged", marked[dtype], "no accuracy verdict in its records "
                         "(baseline skipped or no rule)", _links(by_dtype[dtype], base_dir)])
    return fmt.table(["choice", "dtype", "why (from the records)", "records"], body)


def recommendation_section(rows: fmt.Rows, models: list[str], metric: str, base_dir: Path) -> str:
    """The rule, then one table per model and device (random-init and loaded weights apart)."""
    parts = [RULE.format(metric=metric)]
    for model in models:
        mine = [r for r in rows if fmt.get(r, "job.model") == model]
        for device in sorted({str(fmt.get(r, "job.device")) for r in mine}):
            on_device = [r for r in mine if str(fmt.get(r, "job.device")) == device]
            kinds = fmt.group(on_device, lambda r: "random-init" if random_init(r) else "loaded")
            kinds = sorted(kinds.items(), key=lambda kv: kv[0] != "loaded") if len(kinds) > 1 \
                else [("", on_device)]
            for weights, kind in kinds:
                label = f"### {model} on {device}" + (f", {weights} weights" if weights else "")
                parts.append(f"{label}\n\n" + recommend_device(kind, metric, base_dir))
    if any(random_init(r) for r in rows):
        parts.append(f"- {RANDOM_LEGEND}")
    return "\n\n".join(parts)
