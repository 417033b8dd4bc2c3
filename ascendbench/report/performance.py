"""Performance tables: latency stats, throughput, memory, FLOPs/MFU when recorded, speed-up over CPU."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.job.record import instant
from ascendbench.report.columns import PERF_VALUES, fold_same, perf_show
from ascendbench.report.fmt import MISSING, get, link, num, table, text, times, workload_label
from ascendbench.report.tables import machines, record_link

PERF_DEFAULT = ("median_ms", "p90_ms", "throughput", "memory", "speedup")  # the seed's Mean | P90 | Throughput | Mem
# Model load time: the load stage's wall time (weights.load.seconds), else the loader's own figure.
LOAD_KEYS = ("weights.load.seconds", "weights.load_seconds")
# FLOPs and MFU as the bench records them; any other ``bench.*mfu*`` field is shown as well.
FLOPS = (("TFLOP/call", "bench.flops.per_call_tflop"), ("achieved TFLOP/s", "bench.flops.achieved_tflops"),
         ("MFU", "bench.flops.mfu"))
_MFU = re.compile(r"mfu", re.IGNORECASE)


def point_key(row: Mapping[str, Any]) -> tuple:
    """What must match for two runs to be the same workload: model, preset, batch, size, frames, steps."""
    return tuple(get(row, k) for k in ("job.model", "job.preset", "job.batch_size", "job.height",
                                       "job.width", "job.num_frames", "job.steps"))


def median_ms(row: Mapping[str, Any]) -> float | None:
    """The row's median latency in ms, when recorded."""
    value = get(row, "bench.latency.median_ms")
    return float(value) if isinstance(value, (int, float)) else None


def started_key(row: Mapping[str, Any]) -> tuple[bool, float]:
    """Sort key of a row by when its job started (the moment, time zones included); rows without a readable
    start time sort last."""
    moment = instant(get(row, "timing.started_at"))
    return (moment == float("-inf"), moment)


def latest(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most recently finished of ``rows`` (by ``timing.finished_at``, then record path)."""
    if not rows:
        return None
    return max(rows, key=lambda r: (instant(get(r, "timing.finished_at")), str(r["record"])))


def cpu_counterpart(row: Mapping[str, Any], cpu_rows: Sequence[Mapping[str, Any]],
                    cpu_dtype: str) -> Mapping[str, Any] | None:
    """The CPU run of the same workload: in ``cpu_dtype`` if measured, else in the row's dtype.

    Among several candidates, one from the same host is preferred, then the latest.
    """
    same = [c for c in cpu_rows if point_key(c) == point_key(row) and median_ms(c)]
    for dtype in (cpu_dtype, get(row, "job.dtype")):
        matches = [c for c in same if get(c, "job.dtype") == dtype]
        local = [c for c in matches if get(c, "env.hostname") == get(row, "env.hostname")]
        if local or matches:
            return latest(local or matches)
    return None


def speedup_cell(row: Mapping[str, Any], cpu_rows: Sequence[Mapping[str, Any]], cpu_dtype: str,
                 base_dir: Path) -> str:
    """``123x`` over the matching CPU run with its dtype, latency and record; why not, otherwise."""
    if get(row, "job.device") == "cpu":
        return "cpu run"
    mine = median_ms(row)
    cpu = cpu_counterpart(row, cpu_rows, cpu_dtype)
    if cpu is None:
        return "no CPU run of this workload"
    if not mine:
        return MISSING
    ratio = median_ms(cpu) / mine
    return (f"{times(ratio)} vs cpu {text(get(cpu, 'job.dtype'))} {num(median_ms(cpu))} ms "
            f"({link('cpu', cpu['record'], base_dir)})")


def memory_cell(row: Mapping[str, Any]) -> str:
    """Peak memory values the record holds (allocated/reserved on accelerators, RSS on CPU), in MB."""
    parts = [f"{k[len('bench.memory.peak_'):-len('_mb')]} {num(row[k])}" for k in sorted(row)
             if k.startswith("bench.memory.peak_") and k.endswith("_mb") and get(row, k) is not None]
    if str(get(row, "bench.memory.scope") or "").startswith("cpu"):  # CPU: the device figures repeat the RSS
        parts = [p for p in parts if p.startswith("rss ")] or parts
    return ", ".join(parts) if parts else MISSING


def throughput_cell(row: Mapping[str, Any]) -> str:
    """Throughput with its unit."""
    value = get(row, "bench.throughput.value")
    return MISSING if value is None else f"{num(value)} {text(get(row, 'bench.throughput.unit'))}"


def extra_columns(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(header, key) of the FLOPs / MFU fields some record of these rows carries under ``bench``."""
    keys = {k for r in rows for k in r if k.startswith("bench.")}
    known = [(h, k) for h, k in FLOPS if k in keys]
    seen = {k for _, k in known}
    others = sorted(k for k in keys if k not in seen and _MFU.search(k.split(".")[-1]))
    return known + [(k[len("bench."):], k) for k in others]


def extra_cell(row: Mapping[str, Any], key: str) -> str:
    """A FLOPs / MFU value; an absent MFU says why when the record explains it."""
    value = get(row, key)
    if value is None and key.endswith("mfu") and get(row, "bench.flops.peak_missing"):
        return "missing (no peak TFLOP/s for this device in device.peak)"
    return num(value)


def load_cell(row: Mapping[str, Any]) -> str:
    """Seconds the job spent loading the model (``weights.load.seconds``), ``missing`` when not recorded."""
    for key in LOAD_KEYS:
        value = get(row, key)
        if isinstance(value, (int, float)):
            return num(value)
    return MISSING


def median_cell(row: Mapping[str, Any]) -> str:
    """The median latency, flagged when the bench judged the timings noisy."""
    cell = num(get(row, "bench.latency.median_ms"))
    return f"{cell} (noisy)" if get(row, "bench.noise.noisy") is True else cell


def fold_constant(headers: list[str], body: list[list[str]], foldable: Sequence[str]
                  ) -> tuple[list[str], list[list[str]], list[tuple[str, str]]]:
    """Drop the ``foldable`` columns whose cells are one and the same text that is no number (``missing (no peak
    TFLOP/s ...)``, ``cpu run``): the note says it once instead of every row."""
    drop = []
    for index, header in enumerate(headers):
        values = {row[index] for row in body}
        if header in foldable and len(values) == 1 and body:
            value = next(iter(values))
            try:
                float(value.split()[0])
            except (ValueError, IndexError):
                drop.append((index, header, value))
    keep = [i for i in range(len(headers)) if i not in {d[0] for d in drop}]
    return ([headers[i] for i in keep], [[row[i] for i in keep] for row in body],
            [(header, value) for _, header, value in drop])


def value_columns(rows: Sequence[Mapping[str, Any]], show: Sequence[str], speedup) -> list[tuple[str, Any]]:
    """(header, row -> cell) of the ``show`` value columns (``performance.show`` names, see
    :data:`~ascendbench.report.columns.PERF_VALUES`); ``flops`` expands to the FLOPs / MFU fields recorded."""
    built = {"median_ms": median_cell, "throughput": throughput_cell, "memory": memory_cell, "load_s": load_cell,
             "speedup": speedup}
    out: list[tuple[str, Any]] = []
    for name in show:
        header, key = PERF_VALUES[name]
        if name == "flops":
            out += [(h, lambda row, k=k: extra_cell(row, k)) for h, k in extra_columns(rows)]
        else:
            out.append((header, built.get(name) or (lambda row, k=key: num(get(row, k)))))
    return out


def performance_table(rows: Sequence[Mapping[str, Any]], cpu_rows: Sequence[Mapping[str, Any]],
                      cpu_dtype: str, base_dir: Path, show: Sequence[str] = PERF_DEFAULT) -> str:
    """The performance table of one model: device x dtype x workload x batch, the ``show`` value columns.

    ``workload`` is the preset with the size that ran (``mini @ 1024x1024``); ``steps`` the same in every
    row, and the FLOPs / speed-up columns saying one non-number in every row, fold into notes.
    """
    many_hosts = len(machines(rows)) > 1
    steps = any(get(r, "job.steps") is not None for r in rows)
    values = value_columns(rows, perf_show(show), lambda row: speedup_cell(row, cpu_rows, cpu_dtype, base_dir))
    headers = (["machine"] if many_hosts else []) + ["device", "dtype", "workload", "batch"]
    headers += (["steps"] if steps else []) + [h for h, _ in values] + ["record"]
    body = []
    for row in rows:
        cells = [text(get(row, "env.hostname"))] if many_hosts else []
        cells += [text(get(row, "job.device")), text(get(row, "job.dtype")), workload_label(row),
                  num(get(row, "job.batch_size"))] + ([num(get(row, "job.steps"))] if steps else [])
        body.append(cells + [fn(row) for _, fn in values] + [record_link(row, base_dir)])
    headers, body, folded = fold_constant(headers, body, [h for h, _ in extra_columns(rows)] + ["speed-up vs CPU"])
    headers, body, same = fold_same(headers, body, ("device", "steps"))
    rule = "".join(f"- {h}: {v} in every row.\n" for h, v in folded) + "".join(f"- {n}.\n" for n in same)
    rule += (f"- Speed-up vs CPU = median latency of the CPU run of the same model, preset, batch and size "
            f"(in {cpu_dtype} when measured, else in the device's dtype; same host preferred, then the "
            f"latest) / this row's median latency.\n- Latency statistics are over the timed iterations; "
            f"\"cold ms\" is the first call, timed apart; \"load s\" is the model load (weights.load.seconds). "
            f"Columns: report.yaml performance.show ({', '.join(PERF_VALUES)} or all). \"missing\": not in "
            "the record.")
    return table(headers, body) + "\n\n" + rule
