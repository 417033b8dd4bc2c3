"""Performance tables (latency, throughput, memory, FLOPs/MFU, speed-up) and the latency pivot."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Sequence

from ascendbench.errors import ReportError
from ascendbench.job.record import instant
from ascendbench.report import fmt

# performance.show names -> headers
PERF_VALUES = {"median_ms": "median ms", "min_ms": "min ms", "p90_ms": "p90 ms", "p95_ms": "p95 ms",
               "max_ms": "max ms", "mean_ms": "mean ms", "std_ms": "std ms", "timed": "timed",
               "cold_ms": "cold ms", "throughput": "throughput", "memory": "peak memory MB",
               "load_s": "load s", "flops": "FLOPs / MFU", "speedup": "speed-up vs CPU"}
FLOPS = (("TFLOP/call", "bench.flops.per_call_tflop"),
         ("achieved TFLOP/s", "bench.flops.achieved_tflops"), ("MFU", "bench.flops.mfu"))
PIVOT_NOTE = ("Cells: median latency in ms over the timed iterations, then [low, high] of its "
              "95% confidence interval as the record states it (none: fewer timed iterations than "
              "a CI needs); \"missing\": no ok run of that dtype for the workload. The latest run "
              "counts when a workload ran more than once.")


def point_key(row: fmt.Row) -> tuple:
    """What two runs of one workload share: model, preset, batch, size, frames, steps."""
    return tuple(fmt.get(row, k)
                 for k in ("job.model", "job.preset", "job.batch_size", "job.height",
                                       "job.width", "job.num_frames", "job.steps"))


def started_key(row: fmt.Row) -> tuple[bool, float]:
    """Sort key by when the job started (the moment, time zones included); unknown starts last."""
    moment = instant(fmt.get(row, "timing.started_at"))
    return (moment == float("-inf"), moment)


def latest(rows: Sequence[fmt.Row]) -> fmt.Row | None:
    """The most recently finished of ``rows`` (by ``timing.finished_at``, then record path)."""
    return max(rows, key=lambda r: (instant(fmt.get(r, "timing.finished_at")), str(r["record"])),
               default=None)


def perf_show(show: Iterable[Any]) -> list[str]:
    """The ``performance.show`` names in order (``all``: every column); ReportError if unknown."""
    names = [str(n) for n in show]
    if "all" in names:
        return list(PERF_VALUES)
    unknown = [n for n in names if n not in PERF_VALUES]
    if unknown or not names:
        raise ReportError(
            f"report option performance.show={names!r} names {', '.join(unknown) or 'no column'}: "
            f"give a list of {', '.join(PERF_VALUES)} (or [all]), e.g. "
            "`--set 'performance.show=[median_ms,p90_ms,throughput,memory]'`.")
    return list(dict.fromkeys(names))


def memory_cell(row: fmt.Row) -> str:
    """Peak memory the record holds (allocated/reserved on accelerators, RSS on CPU), in MB."""
    head = "bench.memory.peak_"
    parts = [f"{k[len(head):-3]} {fmt.num(row[k])}" for k in sorted(row)
             if k.startswith(head) and k.endswith("_mb") and fmt.get(row, k) is not None]
    if no_allocator(row):  # device figures repeat RSS
        parts = [p for p in parts if p.startswith("rss ")] or parts
    return ", ".join(parts) if parts else fmt.MISSING


def no_allocator(row: fmt.Row) -> bool:
    """True for a device without an allocator (the CPU): its memory figures are the host's RSS."""
    scope = fmt.field(row, "bench.memory.scope")
    return scope.startswith("cpu") or (scope == fmt.MISSING and fmt.get(row, "job.device") == "cpu")


def throughput_cell(row: fmt.Row) -> str:
    """Throughput with its unit."""
    value = fmt.get(row, "bench.throughput.value")
    return (fmt.MISSING if value is None
            else f"{fmt.num(value)} {fmt.field(row, 'bench.throughput.unit')}")


def latency_cell(row: fmt.Row, lang: str = "en", stat: str = "median_ms", unit: str = "") -> str:
    """A latency statistic, flagged where the bench judged the timings noisy (bench.noise)."""
    cell = fmt.num(fmt.latency(row, stat)) + unit
    return f"{cell} ({fmt.word('noisy', lang)})" if fmt.get(row, "bench.noise.noisy") is True \
        else cell


def _value_cell(row: fmt.Row, name: str) -> str:
    cells = {"median_ms": latency_cell, "throughput": throughput_cell, "memory": memory_cell,
             "cold_ms": lambda r: fmt.field(r, "bench.cold_ms")}
    if name in cells:
        return cells[name](row)
    if name == "load_s":  # the load stage's wall time, else the loader's own figure
        seconds = [fmt.get(row, k) for k in ("weights.load.seconds", "weights.load_seconds")]
        return fmt.num(next((s for s in seconds if isinstance(s, (int, float))), None))
    return fmt.num(fmt.latency(row, "count" if name == "timed" else name))


def _flops_cell(row: fmt.Row, key: str) -> str:
    value = fmt.get(row, key)
    if value is None and key.endswith("mfu") and fmt.get(row, "bench.flops.peak_missing"):
        return "missing (no peak TFLOP/s for this device in device.peak)"
    return fmt.num(value)


def _flops_columns(rows: fmt.Rows) -> list[tuple[str, str]]:
    keys = {k for r in rows for k in r if k.startswith("bench.")}
    known = [(h, k) for h, k in FLOPS if k in keys]
    others = sorted(k for k in keys - {k for _, k in known}
                    if re.search("mfu", k.split(".")[-1], re.IGNORECASE))
    return known + [(k[len("bench."):], k) for k in others]


def speedup_cell(row: fmt.Row, cpu_rows: fmt.Rows, cpu_dtype: str, base_dir: Path) -> str:
    """``123x`` over the CPU run of this workload (in ``cpu_dtype`` when measured), or why not."""
    if fmt.get(row, "job.device") == "cpu":
        return "cpu run"
    same = [c for c in cpu_rows if point_key(c) == point_key(row) and fmt.latency(c)]
    cpu = None
    for dtype in (cpu_dtype, fmt.get(row, "job.dtype")):
        matches = [c for c in same if fmt.get(c, "job.dtype") == dtype]
        local = [c for c in matches if fmt.get(c, "env.hostname") == fmt.get(row, "env.hostname")]
        cpu = cpu or latest(local or matches)
    if cpu is None:
        return "no CPU run of this workload"
    if not fmt.latency(row):
        return fmt.MISSING
    return (f"{fmt.times(fmt.latency(cpu) / fmt.latency(row))} vs cpu "
            f"{fmt.field(cpu, 'job.dtype')} "
            f"{fmt.num(fmt.latency(cpu))} ms ({fmt.link('cpu', cpu['record'], base_dir)})")


def _number_first(value: str) -> bool:
    try:
        float(value.split()[0])
    except (ValueError, IndexError):
        return False
    return True


def performance_table(rows: fmt.Rows, cpu_rows: fmt.Rows, cpu_dtype: str, base_dir: Path,
                      show: Sequence[str] = ("median_ms", "p90_ms", "throughput", "memory",
                                             "speedup")) -> str:
    """One model's performance table: device x dtype x workload x batch, the ``show`` columns."""
    values: list[tuple[str, Any]] = []
    for name in perf_show(show):
        if name == "flops":
            values += [(h, partial(_flops_cell, key=k)) for h, k in _flops_columns(rows)]
        elif name == "speedup":
            values.append((PERF_VALUES[name], partial(speedup_cell, cpu_rows=cpu_rows,
                                                      cpu_dtype=cpu_dtype, base_dir=base_dir)))
        else:
            values.append((PERF_VALUES[name], partial(_value_cell, name=name)))
    id_headers, keys = fmt.identity(rows, ["machine", "device", "dtype", "workload", "batch",
                                           "steps"])
    headers = [*id_headers, *(h for h, _ in values), "record"]
    body = [fmt.cells(row, keys) + [fn(row) for _, fn in values] + [fmt.record_link(row, base_dir)]
            for row in rows]
    foldable = [h for h, _ in _flops_columns(rows)] + ["speed-up vs CPU"]
    folded = {h: body[0][i] for i, h in enumerate(headers) if h in foldable and body
              and len({r[i] for r in body}) == 1 and not _number_first(body[0][i])}
    kept = [i for i, h in enumerate(headers) if h not in folded]
    headers, body = [headers[i] for i in kept], [[r[i] for i in kept] for r in body]
    headers, body, same = fmt.fold_same(headers, body, ("device", "steps"))
    notes = [f"{h}: {v} in every row." for h, v in folded.items()] + [f"{n}." for n in same]
    notes.append(
        f"Speed-up vs CPU = median latency of the CPU run of the same model, preset, batch and "
        f"size (in {cpu_dtype} when measured, else in the device's dtype; same host preferred, "
        "then the latest) / this row's median latency.\n- Latency statistics are over the timed "
        "iterations; \"cold ms\" is the first call, timed apart; \"load s\" is the model load "
        f"(weights.load.seconds). Columns: report.yaml performance.show ({', '.join(PERF_VALUES)} "
        "or all). \"missing\": not in the record.")
    return fmt.table(headers, body, notes)


def _ci_cell(row: fmt.Row | None, base_dir: Path) -> str:
    if row is None or fmt.latency(row) is None:
        return fmt.MISSING
    low, high = fmt.latency(row, "median_ci95_low_ms"), fmt.latency(row, "median_ci95_high_ms")
    ci = f" [{fmt.num(low)}, {fmt.num(high)}]" if low is not None and high is not None else ""
    return f"{fmt.num(fmt.latency(row))}{ci} ({fmt.record_link(row, base_dir)})"


def _pivot(rows: fmt.Rows, base_dir: Path) -> str:
    found = {fmt.field(r, "job.dtype") for r in rows}
    ranked = fmt.ORDER["job.dtype"]
    dtypes = [d for d in ranked if d in found] + sorted(found - set(ranked))
    groups = fmt.group(rows, lambda r: tuple(fmt.cells(r, ["job.preset", "size", "job.batch_size"]))
                       + ((fmt.field(r, "job.steps"),) if fmt.get(r, "job.steps") is not None
                      else ()))
    steps = any(len(key) == 4 for key in groups)
    headers = ["preset", "size", "batch"] + (["steps"] if steps else [])
    body = [list(key) + (["-"] if steps and len(key) == 3 else [])
            + [_ci_cell(latest([r for r in members if fmt.field(r, "job.dtype") == d]), base_dir)
               for d in dtypes] for key, members in groups.items()]
    return fmt.table(headers + [f"{d} ms [95% CI]" for d in dtypes], body)


def pivot_section(rows: fmt.Rows, models: Sequence[str], base_dir: Path) -> str:
    """Per model and device (and host), workloads down, dtypes across, median [95% CI] ms."""
    parts = []
    for model in models:
        mine = [r for r in rows if fmt.latency(r) is not None and fmt.get(r, "job.model") == model]
        many = len(fmt.machines(mine)) > 1
        places: dict[str, list[fmt.Row]] = {}
        for row in mine:
            host = f" ({fmt.field(row, 'env.hostname')})" if many else ""
            places.setdefault(fmt.field(row, "job.device") + host, []).append(row)
        parts += [f"### {model} on {place}\n\n" + _pivot(places[place], base_dir)
                  for place in sorted(places)]
    if not parts:
        return "No ok record carries a median latency, so there is no pivot to show."
    return "\n\n".join(parts) + "\n\n- " + PIVOT_NOTE
