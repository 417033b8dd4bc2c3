"""Hidden states (``compare.layers``), the replay's per-module errors, the output checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ascendbench.metrics.verdict import ORDER
from ascendbench.report import fmt

LAYER = "layer/"
REPLAY_LABEL = "replay (per-module)"
OUTPUT_CHECKS = (("output_flat_frames", "flat frames"),
                 ("output_black_white_frames", "black/white frames"),
                 ("output_spectral_exponent", "spectral exponent"),
                 ("output_frozen_pairs", "frozen pairs"), ("output_flicker", "flicker"))


def split_layer_metric(name: str) -> tuple[str, str] | None:
    """``layer/<layer>/<metric>`` -> (layer, metric); None for any other metric name."""
    if not name.startswith(LAYER) or "/" not in name[len(LAYER):]:
        return None
    return tuple(name[len(LAYER):].rsplit("/", 1))


def lower_is_worse(metric: str, rule: Any) -> bool:
    """True when a smaller value is worse (rule ``>= x``, or a similarity: cosine, PSNR, SSIM)."""
    rule = str(rule or "").strip()
    return rule.startswith(">") if rule else any(p in metric for p in ("cosine", "psnr", "ssim"))


def _numeric(value: Any) -> float | None:
    if value in ("inf", "-inf"):
        return float(value)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _worse(candidate: float, current: float, low_bad: bool) -> bool:
    if candidate != candidate:  # NaN is the worst of all
        return current == current
    return candidate < current if low_bad else candidate > current


def first_divergent(metrics: Mapping[str, Any], compare: Any) -> str | None:
    """The first module (capture order) whose hidden state failed its check, or ``all`` mode's."""
    compare = compare if isinstance(compare, Mapping) else {}
    if compare.get("mode") == "all":
        found = compare.get("first_divergent")
        if not found:
            return "none"
        return str(found.get("name", found) if isinstance(found, Mapping) else found)
    results = compare.get("results")
    if isinstance(results, Mapping):
        failed = [n for n, r in results.items()
                  if isinstance(r, Mapping) and r.get("result") == "FAIL"]
    else:
        failed = [parts[0] for name, e in metrics.items() if (parts := split_layer_metric(name))
                  and isinstance(e, Mapping) and e.get("verdict") == "FAIL"]
    if failed:
        return failed[0]
    return "none" if any(split_layer_metric(n) for n in metrics) else None


def hidden_fields(metrics: Mapping[str, Any], compare: Any) -> dict[str, Any]:
    """``hidden.<check>.{value,verdict,rule,at,layers}`` (the worst entry), first divergent."""
    folded: dict[str, dict[str, Any]] = {}
    for name, entry in metrics.items():
        parts = split_layer_metric(name)
        value = _numeric(entry.get("value")) if parts and isinstance(entry, Mapping) else None
        if value is None:
            continue
        layer, metric = parts
        low = lower_is_worse(metric, entry.get("rule"))
        agg = folded.setdefault(metric, {"layers": 0, "low": low})
        agg["layers"] += 1
        if "value" not in agg or _worse(value, agg["value"], agg["low"]):
            agg.update(value=value, at=layer)
        verdict = entry.get("verdict")
        if verdict in ORDER and ORDER[verdict] >= ORDER.get(agg.get("verdict"), -1):
            agg.update(verdict=verdict, rule=entry.get("rule") or entry.get("threshold"),
                       source=entry.get("source"))
    fields = {f"hidden.{metric}.{key}": agg[key] for metric, agg in folded.items()
              for key in ("value", "verdict", "rule", "source", "at", "layers") if key in agg}
    divergent = first_divergent(metrics, compare)
    if divergent is not None:
        fields["hidden.first_divergent"] = divergent
    dumps = compare.get("msprobe") if isinstance(compare, Mapping) else None
    if isinstance(dumps, Mapping) and "skipped" not in dumps:
        flagged = dumps.get("first_flagged") or {}
        fields["msprobe.first_flagged"] = (f"{flagged.get('name')} {flagged.get('err_message')}"
                                           if flagged else "none")
        fields["msprobe.first_divergent"] = dumps.get("first_divergent") or "none"
    return fields


def hidden_metrics(rows: Iterable[fmt.Row]) -> list[str]:
    """The hidden-state checks some row aggregates, ``max_abs_err`` and ``cosine`` first."""
    names = {k[7:-6] for r in rows for k in r
             if k.startswith("hidden.") and k.endswith(".value") and fmt.get(r, k) is not None}
    first = ("max_abs_err", "cosine")
    return sorted(names, key=lambda n: (first.index(n) if n in first else len(first), n))


def hidden_cell(row: fmt.Row, metric: str) -> str:
    """``worst VERDICT at <layer>`` of one check; ``missing`` when the job hooked nothing."""
    if fmt.get(row, f"hidden.{metric}.value") is None:
        return "no baseline" if fmt.get(row, "baseline.skipped") is not None else fmt.MISSING
    value, verdict, _ = fmt.judged(row, f"hidden.{metric}", metric)
    at = fmt.short(fmt.get(row, f"hidden.{metric}.at"), 60)
    return f"{value} {verdict} at {at}" if verdict else f"{value} at {at}"


def layer_rows(row: fmt.Row) -> list[dict[str, Any]]:
    """One dict per ``<module>#<call>/<output>`` entry: values, verdicts, ``result``."""
    layers: dict[str, dict[str, Any]] = {}
    for key in row:
        is_value = key.startswith("metrics.") and key.endswith(".value")
        parts = is_value and split_layer_metric(key[8:-6])
        if not parts or fmt.get(row, key) is None:
            continue
        layer, metric = parts
        module, _, rest = layer.partition("#")
        call, _, output = rest.partition("/")
        entry = layers.setdefault(layer, {"layer": layer, "module": module, "call": call or None,
                                          "output": output or None})
        entry[metric] = fmt.get(row, key)
        verdict = fmt.get(row, key[:-6] + ".verdict")
        if verdict in ORDER:
            entry[f"{metric}_verdict"] = verdict
            if ORDER[verdict] >= ORDER.get(entry.get("result"), -1):
                entry["result"] = verdict
    return list(layers.values())


def module_rows(row: fmt.Row) -> list[dict[str, Any]]:
    """Per hooked module: entries (calls x outputs), worst value per check, failures, first one."""
    checks = {m: lower_is_worse(m, fmt.get(row, f"hidden.{m}.rule")) for m in hidden_metrics([row])}
    modules: dict[str, dict[str, Any]] = {}
    for entry in layer_rows(row):
        agg = modules.setdefault(entry["module"], {"module": entry["module"], "entries": 0,
                                                   "failed": 0, "first_failure": None})
        agg["entries"] += 1
        if entry.get("result") == "FAIL":
            agg["failed"] += 1
            agg["first_failure"] = agg["first_failure"] or entry["layer"]
        for metric, low in checks.items():
            value = _numeric(entry.get(metric))
            if value is not None and (metric not in agg or _worse(value, agg[metric], low)):
                agg[metric] = value
    return list(modules.values())


def layer_detail_table(rows: fmt.Rows, base_dir: Path) -> str:
    """One table over the rows' hooked modules: job identity, module, worst per check, failures."""
    checks = hidden_metrics(rows)
    headers = ["device", "dtype", "preset", "size", "steps", "module", "entries (calls x outputs)",
               *(f"worst {m}" for m in checks), "failed entries", "first failed entry", "record"]
    keys = ["job.device", "job.dtype", "job.preset", "size", "job.steps"]
    body = [fmt.cells(r, keys) + [fmt.text(agg["module"]), fmt.num(agg["entries"])]
            + [fmt.num(agg.get(m)) for m in checks]
            + [fmt.num(agg["failed"]), fmt.text(agg["first_failure"] or "none"),
               fmt.record_link(r, base_dir)]
            for r in rows for agg in module_rows(r)]
    return fmt.table(headers, body)


def layers_frame(rows: fmt.Rows) -> pd.DataFrame:
    """Every hidden-state entry of every row (layer#call/output) with the job's identity."""
    keys = ("record", "job.model", "job.device", "job.dtype", "job.preset", "job.batch_size",
            "job.height", "job.width", "job.num_frames", "job.steps")
    return pd.DataFrame([{**{k: row.get(k) for k in keys}, **entry}
                         for row in rows for entry in layer_rows(row)])


def is_replay(row: fmt.Row) -> bool:
    """Whether the row's job used the replay reference (no whole-model reference outputs)."""
    return fmt.get(row, "baseline.mode") == "replay"


def replay_entries(row: fmt.Row) -> list[dict[str, Any]]:
    """The replay entries of one row, in the record's (completion) order."""
    head, tail = "metrics.replay/", "/local_rel_err.value"
    return [{"name": key[len(head):-len(tail)], "value": row[key],
             **{k: fmt.get(row, f"{key[:-6]}.{k}") for k in ("rule", "verdict", "max_abs_err",
                                                              "cosine")}}
            for key in row if key.startswith(head) and key.endswith(tail)
            and fmt.get(row, key) is not None]


def replay_hidden_cell(row: fmt.Row, metric: str) -> str | None:
    """The worst replayed ``max_abs_err`` / ``cosine``, labelled; None without a replay."""
    if not is_replay(row):
        return None
    values = [e[metric] for e in replay_entries(row) if isinstance(e.get(metric), (int, float))]
    if not values:
        return f"missing {REPLAY_LABEL}"
    return f"{fmt.num(max(values) if metric == 'max_abs_err' else min(values))} {REPLAY_LABEL}"


def _replay_job(row: fmt.Row, base_dir: Path) -> str:
    entries = replay_entries(row)
    first = next((e for e in entries if e["verdict"] == "FAIL"), None)
    job = " ".join(fmt.cells(row, ["job.model", "job.device", "job.dtype", "size"]))
    title = f"### {job} ({fmt.record_link(row, base_dir)})"
    verdict = (f"First divergent module: **{first['name']}** (local rel err "
               f"{fmt.num(first['value'])}, rule {fmt.text(first['rule'])})." if first
               else "No module breaks its local-error rule.")
    headers = ("module call / output", "local rel err", "rule", "max abs err", "cosine", "verdict")
    body = fmt.table(headers, [(e["name"], fmt.num(e["value"]), fmt.text(e["rule"]),
                                fmt.num(e["max_abs_err"]), fmt.num(e["cosine"]),
                                fmt.text(e["verdict"])) for e in entries])
    body = body if entries else "No replayed call was recorded."
    precision = fmt.get(row, "compare.precision_choice")
    why = fmt.short(fmt.get(row, "baseline.reason"), 300)
    why += f" Precision: {fmt.short(precision, 200)}." if precision else ""
    return f"{title}\n\nWhy a replay: {why}\n\n{verdict}\n\n{body}"


def replay_section(rows: fmt.Rows, base_dir: Path) -> str:
    """Per job with a replay reference: why, the first divergent module, each call's local error."""
    jobs = [r for r in rows if is_replay(r)]
    if not jobs:
        return ("No job used the replay reference (baseline.reference_mode=replay, or auto where "
                "the whole-model reference does not fit), so there are no per-module local errors.")
    return ("Each module re-run alone on the CPU in float64 (float32 where float64 does not fit in "
            "host memory) on the inputs the device gave it: its local error (||dev - ref|| / "
            "||ref||, the error it adds itself), judged by the device dtype's unit roundoff times "
            "baseline.replay.margin. End-to-end errors of whole-model references are in the "
            "accuracy table.\n\n" + "\n\n".join(_replay_job(r, base_dir) for r in jobs))


def _check_cell(row: fmt.Row, check: str) -> str | None:
    found = []
    for key in row:
        ends = key.startswith("metrics.") and key.endswith(f"{check}.value")
        if ends and fmt.get(row, key) is not None:
            base = key[:-6]
            output = base[8:-len(check)].rstrip("/")
            verdict = fmt.get(row, f"{base}.verdict")
            said = (fmt.text(verdict) if verdict
                    else f"would be {fmt.field(row, f'{base}.would_be')}, not judged")
            found.append(f"{output + ': ' if output else ''}{fmt.field(row, key)} {said}")
    return "; ".join(found) or None


def output_checks_section(rows: fmt.Rows, base_dir: Path) -> str:
    """Every job's reference-free checks (a check no job ran is no column)."""
    found = [(row, [_check_cell(row, check) for check, _ in OUTPUT_CHECKS]) for row in rows]
    found = [(row, checks) for row, checks in found if any(checks)]
    if not found:
        return "No job wrote image or video outputs, so no reference-free check ran."
    used = [i for i in range(len(OUTPUT_CHECKS)) if any(checks[i] for _, checks in found)]
    keys = ["job.model", "job.device", "job.dtype", "size", "weights.kind"]
    body = [fmt.cells(row, keys) + [checks[i] or "not run" for i in used]
            + [fmt.record_link(row, base_dir)] for row, checks in found]
    headers = ["model", "device", "dtype", "size", "weights", *(OUTPUT_CHECKS[i][1] for i in used),
               "record"]
    return ("Checks of the outputs themselves, with or without a reference (rules and sources in "
            "each record): flat, black or white frames, noise-like spectra (natural images: "
            "exponent ~2), frozen and flickering video. Judged for natural input and loaded "
            "weights; else (random latents or weights) reported only.\n\n"
            + fmt.table(headers, body))
