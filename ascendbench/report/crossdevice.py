"""Cross-machine comparison: each device's error next to a reference device's error, and their ratio.

Records copied from several machines into one directory line up when model, preset, dtype, batch,
size, seed, input digest and weights are the same. Both errors are measured against each machine's own
CPU reference of identical inputs, so their ratio says how much worse (or better) the device is than
the reference device (msprobe's benchmark method, e.g. NPU error / GPU error, with per-metric limits).

A job whose reference was a saved accelerator run (``baseline.source``) judged device against device; its
record carries both errors against that run's own CPU reference (``baseline.benchmark``), and those form its
ratio instead.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import get, link, metric_matches, num, size_label, table, text
from ascendbench.report.performance import latest, median_ms, point_key


def weights_identity(row: Mapping[str, Any]) -> str | None:
    """The weights digest, or ``random-init:<seed>`` (the same seed gives the same weights)."""
    if get(row, "weights.kind") == "random-init":
        return f"random-init:{get(row, 'weights.init_seed')}"
    return get(row, "weights.digest")


def accuracy_key(row: Mapping[str, Any]) -> tuple:
    """Rows with equal keys ran the same workload on the same inputs and weights."""
    return point_key(row) + (get(row, "job.dtype"), get(row, "job.seed"), get(row, "inputs.digest"),
                             weights_identity(row))


def _metric_value(row: Mapping[str, Any], base: str, prefix: str = "metrics.",
                  suffix: str = ".value") -> tuple[str | None, float | None]:
    for key in sorted(row):
        if key.startswith(prefix) and key.endswith(suffix):
            name = key[len(prefix):len(key) - len(suffix)]
            if metric_matches(name, base) and isinstance(get(row, key), (int, float)):
                return name, float(row[key])
    return None, None


def against_saved_device(row: Mapping[str, Any]) -> bool:
    """True when the row's reference was a saved accelerator run (``baseline.source``): its metrics are errors
    against that device, not against a CPU reference."""
    return get(row, "baseline.source.device") not in (None, "cpu")


def ratio(device: float, reference: float) -> float:
    """``device / reference``; 1 when both are zero, infinite when only the reference is zero."""
    if reference == 0:
        return 1.0 if device == 0 else math.inf
    return device / reference


def _by_device(rows: Sequence[Mapping[str, Any]], key) -> dict[tuple, dict[tuple, Mapping[str, Any]]]:
    """key -> (device, host) -> the latest row."""
    grouped: dict[tuple, dict[tuple, list]] = {}
    for row in rows:
        grouped.setdefault(key(row), {}).setdefault((get(row, "job.device"), get(row, "env.hostname")), []).append(row)
    return {k: {d: latest(rs) for d, rs in devs.items()} for k, devs in grouped.items()}


def _ratio_cells(row: Mapping[str, Any], values: tuple[str, float, float, float], records: str) -> list[str]:
    """One table row: identity, metric, both errors, ratio, limit, verdict, records (``values``: name, device
    error, reference-device error, limit)."""
    name, mine, theirs, limit = values
    r = ratio(mine, theirs)
    return [text(get(row, "job.model")), text(get(row, "job.preset")), text(get(row, "job.dtype")), size_label(row),
            num(get(row, "job.batch_size")), text(get(row, "job.device")), name, num(mine), num(theirs), num(r, 3),
            num(limit), "PASS" if r <= float(limit) else "FAIL", records]


def saved_reference_rows(rows: Sequence[Mapping[str, Any]], reference: str, limits: Mapping[str, float],
                         base_dir: Path) -> tuple[list[list[str]], int]:
    """Rows of the jobs judged against a saved ``reference`` run, from both errors against that run's CPU
    reference (``baseline.benchmark``); and how many such jobs have no ratio (other device, no CPU reference)."""
    body, unmatched = [], 0
    for row in (r for r in rows if against_saved_device(r)):
        if get(row, "baseline.source.device") != reference or get(row, "baseline.benchmark.cpu_reference") is None:
            unmatched += 1
            continue
        records = f"{link('device', row['record'], base_dir)} {reference}: {text(get(row, 'baseline.source.record'))}"
        for base, limit in limits.items():
            name, mine = _metric_value(row, base, "baseline.benchmark.device.", "")
            _, theirs = _metric_value(row, base, "baseline.benchmark.reference.", "")
            if mine is not None and theirs is not None:
                body.append(_ratio_cells(row, (name, mine, theirs, limit), records))
    return body, unmatched


def error_ratio_table(rows: Sequence[Mapping[str, Any]], reference: str, limits: Mapping[str, float],
                      base_dir: Path) -> tuple[str | None, int]:
    """The error-ratio table and the number of device runs without a matching reference run."""
    body, unmatched = saved_reference_rows(rows, reference, limits, base_dir)
    judged_on_cpu = [r for r in rows if not against_saved_device(r)]
    for _, runs in sorted(_by_device(judged_on_cpu, accuracy_key).items(), key=lambda kv: str(kv[0])):
        refs = [r for (dev, _), r in runs.items() if dev == reference]
        others = [r for (dev, _), r in sorted(runs.items(), key=str) if dev not in (reference, "cpu")]
        if not refs:
            unmatched += len(others)
            continue
        ref = latest(refs)
        for row in others:
            for base, limit in limits.items():
                name, mine = _metric_value(row, base)
                _, theirs = _metric_value(ref, base)
                if mine is None or theirs is None:
                    continue
                records = f"{link('device', row['record'], base_dir)} {link(reference, ref['record'], base_dir)}"
                body.append(_ratio_cells(row, (name, mine, theirs, limit), records))
    headers = ["model", "preset", "dtype", "size", "batch", "device", "metric", "device error",
               f"{reference} error", "ratio", "limit", "verdict", "records"]
    return (table(headers, body) if body else None), unmatched


def latency_ratio_table(rows: Sequence[Mapping[str, Any]], reference: str, base_dir: Path) -> str | None:
    """Median latency of each device over the reference device's for the same workload and dtype."""
    body = []
    key = lambda r: point_key(r) + (get(r, "job.dtype"),)  # noqa: E731
    for _, runs in sorted(_by_device([r for r in rows if median_ms(r)], key).items(), key=lambda kv: str(kv[0])):
        refs = [r for (dev, _), r in runs.items() if dev == reference]
        if not refs:
            continue
        ref = latest(refs)
        for (dev, _), row in sorted(runs.items(), key=str):
            if dev == reference:
                continue
            body.append([text(get(row, "job.model")), text(get(row, "job.preset")), text(get(row, "job.dtype")),
                         size_label(row), num(get(row, "job.batch_size")), text(dev), num(median_ms(row)),
                         num(median_ms(ref)), num(median_ms(row) / median_ms(ref), 3),
                         f"{link('device', row['record'], base_dir)} {link(reference, ref['record'], base_dir)}"])
    headers = ["model", "preset", "dtype", "size", "batch", "device", "median ms", f"{reference} median ms",
               f"latency / {reference}", "records"]
    return table(headers, body) if body else None


def crossdevice_section(rows: Sequence[Mapping[str, Any]], reference: str, limits: Mapping[str, float],
                        base_dir: Path) -> str:
    """Error ratios and latency ratios against ``reference``, or why there are none."""
    devices = sorted({str(get(r, "job.device")) for r in rows}  # a saved reference run counts as one
                     | {str(get(r, "baseline.source.device")) for r in rows if against_saved_device(r)})
    if reference not in devices:
        return (f"No record ran on the reference device `{reference}` (devices in the records: "
                f"{', '.join(devices) or 'none'}); choose one with `--reference-device DEVICE`.")
    errors, unmatched = error_ratio_table(rows, reference, limits, base_dir)
    limits_text = ", ".join(f"{k} <= {num(v)}" for k, v in limits.items())
    parts = [f"Reference device: `{reference}`. Ratio = device error / {reference} error, both against their "
             f"own CPU reference of identical inputs (a job whose reference was a saved {reference} run, "
             f"`baseline.source`: both against that run's CPU reference); limits: {limits_text} (conf/report.yaml "
             "`cross_device.limits`, msprobe benchmark method)."]
    parts.append(errors or f"No accelerator run other than {reference} shares inputs and weights with a "
                 f"{reference} run, so no error ratio can be formed.")
    if unmatched:
        parts.append(f"{unmatched} accelerator run(s) have no {reference} run with the same workload, inputs "
                     "and weights.")
    latency = latency_ratio_table(rows, reference, base_dir)
    parts.append("Latency ratios (below 1: faster than the reference device):\n\n" + latency if latency
                 else f"No other device measured a workload that {reference} measured in the same dtype.")
    return "\n\n".join(parts)
