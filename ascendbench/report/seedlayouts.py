"""The seed reports' own tables as report profiles, filled from records, in English or Chinese.

One layout per kind of workload, chosen by the record's task (:data:`PROFILES`):

* image/video VAE decode (the FLUX.2 seed): metrics x dtypes with the verdict once per column, batch x
  resolution performance (Batch | Resolution | Dtype | Mean (ms) | P90 (ms) | Throughput | Mem (MB)), the
  speed-up over the CPU and the dtype recommendation;
* text-to-video (the Sulphur-2 seed): resolution | frames | steps | hidden MaxDiff | hidden CosSim | PSNR |
  SSIM | verdict, and its performance reference table;
* one layer forward (the LTX VAE layer seed): input statistics, first call vs steady latency (mean, min,
  max, p50, p90, p95), throughput, memory allocated/reserved, determinism (:mod:`ascendbench.report.seedlayer`);
* video tokenizer (the VideoFlexTok seed): the gates with their values (:mod:`ascendbench.report.seedlayer`).

Tables are compact (at most 10 columns); each cell holds a value, verdicts sit in their own column or row,
rule texts and record links in the notes under the table. Every value is read from a record: a row or
column the records do not carry is left out, never filled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ascendbench.digits import judged_value
from ascendbench.report.fmt import (
    MISSING,
    entry_of,
    get,
    link,
    md_escape,
    num,
    size_label,
    table,
    text,
    times,
    workload_label,
)
from ascendbench.report.meaning import primary_output, section_metric
from ascendbench.report.performance import median_ms
from ascendbench.report.replay import REPLAY_NOTE, is_replay, replay_hidden_cell
from ascendbench.report.select import accuracy_rows, timing_rows
from ascendbench.report.variants import UNSET, variant_settings
from ascendbench.report.words import word

Rows = Sequence[Mapping[str, Any]]
FLUX_METRICS = (("MAE", "mae"), ("MSE", "mse"), ("RMSE", "rmse"), ("Max Abs Error", "max_abs_err"),
                ("Mean Rel Error", "mean_rel_err"), ("PSNR", "psnr_db"), ("Cosine Similarity", "cosine"))


def metric_name(row: Mapping[str, Any], base: str) -> str | None:
    """The record's name of metric ``base`` of the primary output (``image/mae`` or ``mae``), if present."""
    output = primary_output(row)
    for name in ([f"{output}/{base}"] if output else []) + [base]:
        if get(row, f"metrics.{name}.value") is not None:
            return name
    return None


def value_cell(row: Mapping[str, Any], name: str | None, unit: str = "") -> str:
    """The metric's value with the digits its rule needs (in % where the seeds use %), ``missing`` when absent."""
    if name is None or get(row, f"metrics.{name}.value") is None:
        return MISSING
    return judged_value(name, entry_of(row, f"metrics.{name}")) + unit


def links_note(rows: Rows, base_dir: Path, lang: str) -> str:
    """``records: [1](...), [2](...)``: the record behind each row or column, in order."""
    return f"{word('records', lang)}: " + ", ".join(link(str(i), r["record"], base_dir) for i, r in enumerate(rows, 1))


def rules_note(rows: Rows, names: Sequence[str], lang: str) -> str | None:
    """The rule (and its source) of each judged metric, once."""
    seen: dict[str, str] = {}
    for row in rows:
        for name in names:
            rule = get(row, f"metrics.{name}.rule")
            if rule is not None and name not in seen:
                source = get(row, f"metrics.{name}.source")
                seen[name] = f"{text(name)} {text(rule)}" + (f" ({text(source)})" if source else "")
    return f"{word('rules', lang)}: " + "; ".join(seen.values()) if seen else None


def variants_note(rows: Rows, lang: str) -> str | None:
    """``variants: 1 model.patches.0.backend=_native_npu; 2 model.patches.0.backend=native``: rows whose cells
    read alike (one preset, size and dtype) but that ran different declared variants (attention backend, CPU
    offload), numbered as the records note numbers them; None when no two rows look alike."""
    alike: dict[tuple, list[tuple[int, dict[str, str]]]] = {}
    for number, row in enumerate(rows, 1):
        key = (get(row, "job.preset"), size_label(row), get(row, "job.dtype"))
        alike.setdefault(key, []).append((number, variant_settings(row)))
    parts = []
    for members in alike.values():
        keys = sorted({k for _, found in members for k in found if len({m.get(k) for _, m in members}) > 1})
        if len(members) > 1 and keys:
            parts += [f"{n} " + ", ".join(f"{k}={text(found.get(k, UNSET))}" for k in keys) for n, found in members]
    return f"{word('variants', lang)}: " + "; ".join(parts) if parts else None


def _accelerator_first(rows: Rows) -> list[Mapping[str, Any]]:
    """The rows of devices other than the CPU where there are any (the seeds' columns are NPU runs; the CPU
    run is the reference and the speed-up's base), else the CPU rows."""
    others = [r for r in rows if get(r, "job.device") != "cpu"]
    return others or list(rows)


def _device(row: Mapping[str, Any]) -> str:
    return md_escape(str(get(row, "job.device") or MISSING).upper())


# -- FLUX.2 seed ---------------------------------------------------------------------------------------------

def flux2_accuracy(rows: Rows, lang: str, base_dir: Path) -> str | None:
    """Metrics x dtypes (the seed's ``指标 | NPU float32 vs CPU | ...``), a result row, rules in the notes."""
    judged = _accelerator_first(accuracy_rows(rows))
    if not judged:
        return None
    sizes = {size_label(r) for r in judged}
    headers = [word("metric", lang)] + [word("vs_cpu", lang, device=_device(r), dtype=text(get(r, "job.dtype")))
                                        + (f" {size_label(r)}" if len(sizes) > 1 else "") for r in judged]
    body, names = [], []
    for label, base in FLUX_METRICS:
        cells = [value_cell(r, metric_name(r, base), " dB" if base == "psnr_db" else "") for r in judged]
        if any(c != MISSING for c in cells):
            body.append([label] + cells)
            names += [n for r in judged if (n := metric_name(r, base))]
    body.append([word("result", lang)] + [text(get(r, "verdict")) for r in judged])
    ran = f"{word('workload', lang)}: " + ", ".join(dict.fromkeys(workload_label(r) for r in judged))
    notes = [n for n in (ran, rules_note(judged, sorted(set(names)), lang), links_note(judged, base_dir, lang)) if n]
    return table(headers, body) + "\n\n" + "\n".join(f"- {n}" for n in notes)


def _memory_mb(row: Mapping[str, Any]) -> Any:
    return get(row, "bench.memory.peak_allocated_mb") or get(row, "bench.memory.peak_rss_mb")


def flux2_performance(rows: Rows, lang: str, base_dir: Path) -> str | None:
    """Batch | Resolution | Dtype | Mean (ms) | P90 (ms) | Throughput (samples/s) | Mem (MB), one row per workload."""
    timed = sorted((r for r in _accelerator_first(timing_rows(rows)) if median_ms(r)),
                   key=lambda r: (str(get(r, "job.device")), get(r, "job.batch_size") or 0, get(r, "job.height") or 0,
                                  str(get(r, "job.dtype"))))
    if not timed:
        return None
    keys = ("batch", "resolution", "dtype", "mean_ms", "p90_ms", "throughput", "mem_mb")
    devices = {str(get(r, "job.device")) for r in timed}
    headers = ([word("device", lang)] if len(devices) > 1 else []) + [word(k, lang) for k in keys]
    body = [([_device(r)] if len(devices) > 1 else []) +
            [num(get(r, "job.batch_size")), size_label(r), text(get(r, "job.dtype")),
             num(get(r, "bench.latency.mean_ms")), num(get(r, "bench.latency.p90_ms")),
             num(get(r, "bench.throughput.value")), num(_memory_mb(r))]
            for r in timed]
    notes = [f"{word('device', lang)}: {', '.join(sorted(md_escape(d.upper()) for d in devices))}; Mem: "
             + ("peak_allocated_mb" if any(get(r, "bench.memory.peak_allocated_mb") for r in timed) else "peak_rss_mb")
             + (f" ({text(get(timed[0], 'bench.memory.scope'))})" if get(timed[0], "bench.memory.scope") else ""),
             links_note(timed, base_dir, lang)]
    return table(headers, body) + "\n\n" + "\n".join(f"- {n}" for n in notes)


def flux2_speedup(rows: Rows, lang: str, base_dir: Path) -> str | None:
    """Device | Dtype | <size> time | Speed-up over the CPU float32 run of the same size, batch and seed."""
    timed = [r for r in timing_rows(rows) if median_ms(r)]
    cpu = [r for r in timed if get(r, "job.device") == "cpu" and get(r, "job.dtype") == "float32"]
    others = [r for r in timed if get(r, "job.device") != "cpu"]
    if not cpu or not others:
        return None
    base = max(cpu, key=lambda r: (get(r, "job.height") or 0) * (get(r, "job.width") or 0))
    same = [r for r in others
            if size_label(r) == size_label(base) and get(r, "job.batch_size") == get(base, "job.batch_size")]
    if not same:
        return None
    headers = [word("device", lang), word("data_type", lang), word("time_at", lang, size=size_label(base)),
               word("speedup", lang)]
    body = [[_device(r), text(get(r, "job.dtype")), f"{num(median_ms(r))} ms", times(median_ms(base) / median_ms(r))]
            for r in [base, *same]]
    return table(headers, body) + "\n\n- " + links_note([base, *same], base_dir, lang)


def flux2_dtype(rows: Rows, lang: str, base_dir: Path) -> str | None:
    """Scenario | Recommended dtype | Why: fastest passing, most accurate, failing (from the judged records)."""
    judged = accuracy_rows(rows)
    by_dtype: dict[str, list[Mapping[str, Any]]] = {}
    for row in judged:
        by_dtype.setdefault(str(get(row, "job.dtype")), []).append(row)
    if not by_dtype:
        return None

    def err(dtype: str) -> tuple[float, str]:
        cells = [(get(r, f"metrics.{n}.value"), value_cell(r, n)) for r in by_dtype[dtype]
                 if (n := section_metric(r, "error", ["mean_rel_err"]))]
        return max(cells, key=lambda c: c[0]) if cells else (float("inf"), MISSING)

    passing = [d for d, rs in by_dtype.items() if all(get(r, "verdict") == "PASS" for r in rs)]
    failing = [d for d, rs in by_dtype.items() if any(get(r, "verdict") == "FAIL" for r in rs)]
    body = []
    if passing:
        fastest = min(passing, key=lambda d: min(median_ms(r) or float("inf") for r in by_dtype[d]))
        body.append([word("production", lang), f"`{fastest}`", word("passes_fastest", lang, err=err(fastest)[1])])
        precise = min(passing, key=lambda d: err(d)[0])
        body.append([word("precise", lang), f"`{precise}`", word("most_accurate", lang, err=err(precise)[1])])
    body += [[word("avoid", lang), f"`{d}`", word("fails", lang, err=err(d)[1])] for d in failing]
    if not body:
        return None
    headers = [word("scenario", lang), word("recommended", lang), word("why", lang)]
    return table(headers, body) + "\n\n- " + links_note(judged, base_dir, lang)


# -- Sulphur-2 seed ------------------------------------------------------------------------------------------

def _judged_hidden(row: Mapping[str, Any], check: str) -> str:
    if (replayed := replay_hidden_cell(row, check)) is not None:  # no whole-model reference: the replay's worst
        return replayed
    value = get(row, f"hidden.{check}.value")
    return MISSING if value is None else judged_value(check, entry_of(row, f"hidden.{check}"))


def sulphur2_accuracy(rows: Rows, lang: str, base_dir: Path) -> str | None:
    """分辨率 | 帧数 | Steps | 中间张量 MaxDiff | 中间张量 CosSim | 视频 PSNR(mean) | 视频 SSIM(mean) | 判定."""
    judged = accuracy_rows(rows)
    if not judged:
        return None
    headers = [word(k, lang) for k in ("res", "frames", "steps", "hidden_max", "hidden_cos", "psnr", "ssim", "verdict")]
    body = [[f"{num(get(r, 'job.height'))}x{num(get(r, 'job.width'))}", num(get(r, "job.num_frames")),
             num(get(r, "job.steps")), _judged_hidden(r, "max_abs_err"), _judged_hidden(r, "cosine"),
             *(["-", "-"] if is_replay(r) else [value_cell(r, section_metric(r, "psnr", ["psnr_db_mean"])),
                                                value_cell(r, section_metric(r, "ssim", ["ssim_mean"]))]),
             text(get(r, "verdict"))] for r in judged]
    rules = [f"{c}: {text(get(judged[0], f'hidden.{c}.rule'))}" for c in ("max_abs_err", "cosine")
             if get(judged[0], f"hidden.{c}.rule") is not None]
    notes = [f"{word('rules', lang)}: hidden " + "; ".join(rules)] if rules else []
    notes += [REPLAY_NOTE] if any(is_replay(r) for r in judged) else []
    notes += [n for n in (variants_note(judged, lang), links_note(judged, base_dir, lang)) if n]
    return table(headers, body) + "\n\n" + "\n".join(f"- {n}" for n in notes)


def sulphur2_performance(rows: Rows, lang: str, base_dir: Path) -> str | None:
    """指标 | 预估/实测数值 | 说明: load time, first-call time, time per resolution, peak memory (as recorded)."""
    timed = [r for r in timing_rows(rows) if median_ms(r)]
    if not timed:
        return None
    body = []
    load = [get(r, "weights.load_seconds") for r in timed if get(r, "weights.load_seconds") is not None]
    if load:
        body.append([word("load_time", lang), f"{num(max(load))} s", text(get(timed[0], "job.device"))])
    body += [[word("first_call", lang), f"{num(get(r, 'bench.cold_ms'))} ms", size_label(r)] for r in timed
             if get(r, "bench.cold_ms") is not None]
    body += [[word("gen_time", lang, size=size_label(r)), f"{num(median_ms(r))} ms",
              f"{num(get(r, 'job.steps'))} steps, {text(get(r, 'job.dtype'))}"] for r in timed]
    memory = [(m, r) for r in timed if (m := _memory_mb(r)) is not None]
    if memory:
        peak, row = max(memory, key=lambda item: item[0])
        body.append([word("peak_mem", lang), f"{num(peak)} MB", size_label(row)])
    headers = [word("metric", lang), word("measured", lang), word("note", lang)]
    notes = [n for n in (variants_note(timed, lang), links_note(timed, base_dir, lang)) if n]
    return table(headers, body) + "\n\n" + "\n".join(f"- {n}" for n in notes)


Layout = Callable[[Rows, str, Path], "str | None"]
