"""Cross-machine comparison: each device's error next to a reference device's error, and their ratio.

Records copied from several machines into one directory line up when model, preset, dtype, batch,
size, seed, input digest and weights are the same. Both errors are measured against each machine's own
CPU reference of identical inputs, so their ratio says how much worse (or better) the device is than
the reference device (msprobe's benchmark method, e.g. NPU error / GPU error, with per-metric limits).
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


def _metric_value(row: Mapping[str, Any], base: str) -> tuple[str | None, float | None]:
    for key in sorted(row):
        if key.startswith("metrics.") and key.endswith(".value"):
            name = key[len("metrics."):-len(".value")]
            if metric_matches(name, base) and isinstance(get(row, key), (int, float)):
                return name, float(row[key])
    return None, None


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


def error_ratio_table(rows: Sequence[Mapping[str, Any]], reference: str, limits: Mapping[str, float],
                      base_dir: Path) -> tuple[str | None, int]:
    """The error-ratio table and the number of device runs without a matching reference run."""
    body, unmatched = [], 0
    for _, runs in sorted(_by_device(rows, accuracy_key).items(), key=lambda kv: str(kv[0])):
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
                r = ratio(mine, theirs)
                body.append([text(get(row, "job.model")), text(get(row, "job.preset")), text(get(row, "job.dtype")),
                             size_label(row), num(get(row, "job.batch_size")), text(get(row, "job.device")), name,
                             num(mine), num(theirs), num(r, 3), num(limit), "PASS" if r <= float(limit) else "FAIL",
                             f"{link('device', row['record'], base_dir)} {link(reference, ref['record'], base_dir)}"])
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
    devices = sorted({str(get(r, "job.device")) for r in rows})
    if reference not in devices:
        return (f"No record ran on the reference device `{reference}` (devices in the records: "
                f"{', '.join(devices) or 'none'}); choose one with `--reference-device DEVICE`.")
    errors, unmatched = error_ratio_table(rows, reference, limits, base_dir)
    limits_text = ", ".join(f"{k} <= {num(v)}" for k, v in limits.items())
    parts = [f"Reference device: `{reference}`. Ratio = device error / {reference} error, both against their "
             f"own CPU reference of identical inputs; limits: {limits_text} (conf/report.yaml "
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
