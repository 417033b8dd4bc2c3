"""Cross-machine comparison: each device's error over a reference device's, and latency ratios."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping

from ascendbench.report import fmt
from ascendbench.report.performance import latest, point_key

IDENTITY = ["job.model", "job.preset", "job.dtype", "size", "job.batch_size", "job.device"]
HEADERS = ["model", "preset", "dtype", "size", "batch", "device"]


def ratio(device: float, reference: float) -> float:
    """``device / reference``; 1 when both are zero, infinite when only the reference is zero."""
    if reference == 0:
        return 1.0 if device == 0 else math.inf
    return device / reference


def _saved(row: fmt.Row) -> bool:
    """True when the row's reference was a saved accelerator run: its metrics are against it."""
    return fmt.get(row, "baseline.source.device") not in (None, "cpu")


def _value(row: fmt.Row, base: str, prefix: str = "metrics.", suffix: str = ".value") -> tuple:
    for key in sorted(row):
        name = key[len(prefix):len(key) - len(suffix)]
        if key.startswith(prefix) and key.endswith(suffix) and fmt.metric_matches(name, base) \
                and isinstance(fmt.get(row, key), (int, float)):
            return name, float(row[key])
    return None, None


def _by_device(rows: fmt.Rows, key: Callable[[fmt.Row], Any], reference: str
               ) -> list[tuple[fmt.Row | None, list[tuple[Any, fmt.Row]]]]:
    """Per ``key`` group: the latest ``reference`` run (or None), (device, latest) of the rest."""
    grouped, found = fmt.group(rows, key), []
    for k in sorted(grouped, key=str):
        runs = sorted(((place, latest(rs)) for place, rs in fmt.group(grouped[k], lambda r: (
            fmt.get(r, "job.device"), fmt.get(r, "env.hostname"))).items()), key=str)
        found.append((latest([r for (dev, _), r in runs if dev == reference]),
                      [(dev, r) for (dev, _), r in runs if dev != reference]))
    return found


def _ratio_row(row: fmt.Row, name: str, errors: tuple[float, float], limit: float, records: str
               ) -> list[str]:
    r = ratio(*errors)
    return [*fmt.cells(row, IDENTITY), name, fmt.num(errors[0]), fmt.num(errors[1]), fmt.num(r, 3),
            fmt.num(limit), "PASS" if r <= float(limit) else "FAIL", records]


def _error_ratios(rows: fmt.Rows, reference: str, limits: Mapping[str, float], base_dir: Path
                  ) -> tuple[list[list[str]], int]:
    body, unmatched = [], 0
    for row in (r for r in rows if _saved(r)):  # judged against a saved run: its benchmark errors
        if fmt.get(row, "baseline.source.device") != reference \
                or fmt.get(row, "baseline.benchmark.cpu_reference") is None:
            unmatched += 1
            continue
        records = (f"{fmt.link('device', row['record'], base_dir)} {reference}: "
                   f"{fmt.field(row, 'baseline.source.record')}")
        for base, limit in limits.items():
            name, mine = _value(row, base, "baseline.benchmark.device.", "")
            theirs = _value(row, base, "baseline.benchmark.reference.", "")[1]
            if mine is not None and theirs is not None:
                body.append(_ratio_row(row, name, (mine, theirs), limit, records))

    def same_inputs(row: fmt.Row) -> tuple:
        weights = (f"random-init:{fmt.get(row, 'weights.init_seed')}"
                   if fmt.get(row, "weights.kind") == "random-init"
                   else fmt.get(row, "weights.digest"))
        return point_key(row) + (fmt.get(row, "job.dtype"), fmt.get(row, "job.seed"),
                                 fmt.get(row, "inputs.digest"), weights)

    for ref, runs in _by_device([r for r in rows if not _saved(r)], same_inputs, reference):
        others = [row for dev, row in runs if dev != "cpu"]
        unmatched += len(others) if ref is None else 0
        for row in others if ref is not None else []:
            records = (f"{fmt.link('device', row['record'], base_dir)} "
                       f"{fmt.link(reference, ref['record'], base_dir)}")
            for base, limit in limits.items():
                name, mine = _value(row, base)
                theirs = _value(ref, base)[1]
                if mine is not None and theirs is not None:
                    body.append(_ratio_row(row, name, (mine, theirs), limit, records))
    return body, unmatched


def _latency_ratios(rows: fmt.Rows, reference: str, base_dir: Path) -> list[list[str]]:
    body = []
    timed = [r for r in rows if fmt.latency(r)]
    key = lambda r: point_key(r) + (fmt.get(r, "job.dtype"),)  # noqa: E731
    for ref, runs in _by_device(timed, key, reference):
        for dev, row in runs if ref is not None else []:
            mine, theirs = fmt.latency(row), fmt.latency(ref)
            body.append([*fmt.cells(row, IDENTITY[:5]), fmt.text(dev), fmt.num(mine),
                         fmt.num(theirs), fmt.num(mine / theirs, 3),
                         f"{fmt.link('device', row['record'], base_dir)} "
                         f"{fmt.link(reference, ref['record'], base_dir)}"])
    return body


def crossdevice_section(rows: fmt.Rows, reference: str, limits: Mapping[str, float],
                        base_dir: Path) -> str:
    """Error ratios and latency ratios against ``reference``, or why there are none."""
    devices = sorted({str(fmt.get(r, "job.device")) for r in rows}  # a saved reference counts
                     | {str(fmt.get(r, "baseline.source.device")) for r in rows if _saved(r)})
    if reference not in devices:
        return (f"No record ran on the reference device `{reference}` (devices in the records: "
                f"{', '.join(devices) or 'none'}); choose one with `--reference-device DEVICE`.")
    errors, unmatched = _error_ratios(rows, reference, limits, base_dir)
    limits_text = ", ".join(f"{k} <= {fmt.num(v)}" for k, v in limits.items())
    parts = [f"Reference device: `{reference}`. Ratio = device error / {reference} error, both "
             f"against their own CPU reference of identical inputs (a job whose reference was a "
             f"saved {reference} run, `baseline.source`: both against that run's CPU reference); "
             f"limits: {limits_text} (conf/report.yaml `cross_device.limits`, msprobe benchmark "
             "method).",
             fmt.table([*HEADERS, "metric", "device error", f"{reference} error", "ratio", "limit",
                        "verdict", "records"], errors) if errors else
             f"No accelerator run other than {reference} shares inputs and weights with a "
             f"{reference} run, so no error ratio can be formed."]
    if unmatched:
        parts.append(f"{unmatched} accelerator run(s) have no {reference} run with the same "
                     "workload, inputs and weights.")
    latency = _latency_ratios(rows, reference, base_dir)
    headers = [*HEADERS, "median ms", f"{reference} median ms", f"latency / {reference}", "records"]
    parts.append("Latency ratios (below 1: faster than the reference device):\n\n"
                 + fmt.table(headers, latency) if latency else
                 f"No other device measured a workload that {reference} measured in the same "
                 "dtype.")
    return "\n\n".join(parts)
