"""The FLUX.2 and Sulphur-2 seeds' own tables from records (rules and record links as notes)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ascendbench.metrics.verdict import ORDER
from ascendbench.report import fmt
from ascendbench.report.fmt import primary_output, section_metric
from ascendbench.report.gather import TASK_PRESET_FIELDS
from ascendbench.report.hidden import is_replay, replay_hidden_cell
from ascendbench.report.performance import latency_cell, no_allocator
from ascendbench.report.select import accuracy_rows, timing_rows
from ascendbench.report.tables import RANDOM_LEGEND, random_init, verdict_cell
from ascendbench.report.variants import SAME, UNSET, in_force, shift, shift_cell, variant_settings

FLUX_METRICS = (("MAE", "mae"), ("MSE", "mse"), ("RMSE", "rmse"), ("Max Abs Error", "max_abs_err"),
                ("Mean Rel Error", "mean_rel_err"), ("PSNR", "psnr_db"),
                ("Cosine Similarity", "cosine"))
COLUMNS = ("res", "frames", "steps", "hidden_max", "hidden_cos", "psnr", "ssim", "verdict")
_VARYING = (("model", "job.model"), ("device", "job.device"), ("dtype", "job.dtype"),
            ("batch", "job.batch_size"))


def metric_name(row: fmt.Row, base: str) -> str | None:
    """The record's name of metric ``base`` of the primary output (``image/mae`` or ``mae``)."""
    output = primary_output(row)
    names = ([f"{output}/{base}"] if output else []) + [base]
    return next((n for n in names if fmt.get(row, f"metrics.{n}.value") is not None), None)


def value_cell(row: fmt.Row, name: str | None, unit: str = "") -> str:
    """The metric's value with the digits its rule needs (% where the seeds use %), or missing."""
    if name is None or fmt.get(row, f"metrics.{name}.value") is None:
        return fmt.MISSING
    return fmt.judged(row, f"metrics.{name}", name)[0] + unit


def _judged(row: fmt.Row, prefix: str, metric: str, verdicts: bool) -> str:
    value, verdict, _ = fmt.judged(row, prefix, metric)
    return f"{value} {verdict}" if verdicts and verdict and value != fmt.MISSING else value


def hidden_value(row: fmt.Row, check: str, verdicts: bool = False) -> str:
    """The worst hidden value of ``check`` (with its verdict), a replay's worst, or not hooked."""
    replayed = replay_hidden_cell(row, check)
    if replayed is not None:
        return replayed
    if verdicts and fmt.get(row, "hidden.first_divergent") is None \
            and fmt.get(row, f"hidden.{check}.value") is None:
        return "not hooked (compare.layers off)"
    return _judged(row, f"hidden.{check}", check, verdicts)


def section_value(row: fmt.Row, section: str, wanted: Sequence[str], verdicts: bool = False) -> str:
    """The value of the metric answering ``section`` (``psnr``, ``ssim``); ``-`` for replay."""
    name = section_metric(row, section, wanted)
    if name is None:
        return "-" if is_replay(row) else fmt.MISSING
    return _judged(row, f"metrics.{name}", name, verdicts)


def links_note(rows: fmt.Rows, base_dir: Path, lang: str) -> str:
    """``records: [1](...), [2](...)``: the record behind each row or column, in order."""
    return f"{fmt.word('records', lang)}: " + ", ".join(fmt.link(str(i), r["record"], base_dir)
                                                        for i, r in enumerate(rows, 1))


def rules_note(rows: fmt.Rows, names: Sequence[str], lang: str) -> str | None:
    """The rule (and its source) of each judged metric, once."""
    seen: dict[str, str] = {}
    for row in rows:
        for name in names:
            rule, source = (fmt.get(row, f"metrics.{name}.{k}") for k in ("rule", "source"))
            if rule is not None and name not in seen:
                source = f" ({fmt.log_text(source)})" if source else ""
                seen[name] = f"{fmt.text(name)} {fmt.text(rule)}{source}"
    return f"{fmt.word('rules', lang)}: " + "; ".join(seen.values()) if seen else None


def variants_note(rows: fmt.Rows, lang: str, ratios: bool = False) -> list[str | None]:
    """Rows alike but for declared variants (:func:`in_force`), numbered, with ``ratios``."""
    numbered = [(n, row, variant_settings(row), in_force(row)) for n, row in enumerate(rows, 1)]
    parts, same = [], set()
    for members in fmt.group(numbered, lambda m: (fmt.get(m[1], "job.preset"), fmt.size_label(m[1]),
                                                  fmt.get(m[1], "job.dtype"))).values():
        asked = {k for m in members for k in m[2] if len({o[2].get(k) for o in members}) > 1}
        ran = sorted(k for k in asked if len({m[3].get(k, UNSET) for m in members}) > 1)
        same |= {f"{k}={fmt.value_word(m[3].get(k, UNSET), lang)}" for m in members
                 for k in asked - set(ran)}
        first = members[0][1]
        parts += [f"{n} " + ", ".join(f"{k}={fmt.value_word(force.get(k, UNSET), lang)}"
                                      for k in ran)
                  + (f": {shift_cell(first, row, None, lang)}" if ratios and row is not first
                     else "")
                  for n, row, _, force in members if ran]
    return [f"{fmt.word('variants', lang)}: " + "; ".join(parts) if parts else None,
            fmt.word("no_op", lang, keys=", ".join(sorted(same))) if same else None]


def _accelerators(rows: fmt.Rows) -> list[fmt.Row]:
    return [r for r in rows if fmt.get(r, "job.device") != "cpu"] or list(rows)


def _device(row: fmt.Row) -> str:
    return fmt.md_escape(str(fmt.get(row, "job.device") or fmt.MISSING).upper())


def memory_of(row: fmt.Row) -> tuple[float | None, str]:
    """Peak MB and its word: the allocator's peak, else the host's RSS (the CPU has none)."""
    allocated = None if no_allocator(row) else fmt.get(row, "bench.memory.peak_allocated_mb")
    if allocated is not None:
        return allocated, "allocated"
    return fmt.get(row, "bench.memory.peak_rss_mb"), "host_rss"


def flux2_accuracy(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """Metrics x dtypes (``指标 | NPU float32 vs CPU | ...``), a result row, rules in notes."""
    judged_rows = _accelerators(accuracy_rows(rows))
    if not judged_rows:
        return None
    many = len({fmt.size_label(r) for r in judged_rows}) > 1
    headers = [fmt.word("metric", lang)] + [
        fmt.word("vs_cpu", lang, device=_device(r), dtype=fmt.field(r, "job.dtype"))
        + (f" {fmt.size_label(r)}" if many else "") for r in judged_rows]
    body, names = [], []
    for label, base in FLUX_METRICS:
        found = [value_cell(r, metric_name(r, base), " dB" if base == "psnr_db" else "")
                 for r in judged_rows]
        if any(c != fmt.MISSING for c in found):
            body.append([label] + found)
            names += [n for r in judged_rows if (n := metric_name(r, base))]
    body.append([fmt.word("result", lang)] + [fmt.named_verdict(r) for r in judged_rows])
    ran = ", ".join(dict.fromkeys(map(fmt.workload_label, judged_rows)))
    ran = f"{fmt.word('workload', lang)}: {ran}"
    return fmt.table(headers, body, [ran, rules_note(judged_rows, sorted(set(names)), lang),
                                     links_note(judged_rows, base_dir, lang)])


def throughput_at_mean(row: fmt.Row) -> float | None:
    """The record's throughput (items over the median) over the mean instead."""
    value, median, mean = (fmt.get(row, "bench.throughput.value"), fmt.latency(row),
                           fmt.latency(row, "mean_ms"))
    return value * median / mean if isinstance(value, (int, float)) and median and mean else None


def flux2_performance(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """Batch | Resolution | Dtype | Mean (ms) | P90 (ms) | Throughput | Mem (MB), per workload."""
    timed = sorted((r for r in _accelerators(timing_rows(rows)) if fmt.latency(r)),
                   key=lambda r: (str(fmt.get(r, "job.device")), fmt.get(r, "job.batch_size") or 0,
                                  fmt.get(r, "job.height") or 0, str(fmt.get(r, "job.dtype"))))
    if not timed:
        return None
    devices = {str(fmt.get(r, "job.device")) for r in timed}
    many = len(devices) > 1
    keys = ("batch", "resolution", "dtype", "mean_ms", "p90_ms", "throughput", "mem_mb")
    headers = ([fmt.word("device", lang)] if many else []) + [fmt.word(k, lang) for k in keys]
    body = [([_device(r)] if many else [])
            + fmt.cells(r, ["job.batch_size", "size", "job.dtype"])
            + [latency_cell(r, lang, "mean_ms"), fmt.num(fmt.latency(r, "p90_ms")),
               fmt.num(throughput_at_mean(r)), fmt.num(memory_of(r)[0])] for r in timed]
    kinds = sorted({fmt.word(memory_of(r)[1], lang) for r in timed})
    scope = fmt.get(timed[0], "bench.memory.scope")
    memory = (f"{fmt.word('device', lang)}: "
              f"{', '.join(sorted(fmt.md_escape(d.upper()) for d in devices))}"
              f"; Mem: {', '.join(kinds)}" + (f" ({fmt.log_text(scope)})" if scope else ""))
    return fmt.table(headers, body, [memory, fmt.word("throughput_mean", lang),
                                     links_note(timed, base_dir, lang)])


def speedup_cell(base: fmt.Row, row: fmt.Row, lang: str) -> str:
    """``base``'s median over ``row``'s, with the gate's answer where it cannot tell them apart."""
    speedup = fmt.times(fmt.latency(base) / fmt.latency(row))
    found = None if row is base else shift(base, row)
    if found is None or found[1] in ("slower", "faster"):
        return speedup
    if found[1] == SAME:
        return f"{fmt.word('no_difference', lang)} ({speedup})"
    return f"{speedup} ({fmt.word('untested', lang)})"


def flux2_speedup(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """Device | Dtype | <size> time | Speed-up over the CPU float32 run of that size and batch."""
    timed = [r for r in timing_rows(rows) if fmt.latency(r)]
    cpu = [r for r in timed if fmt.cells(r, ["job.device", "job.dtype"]) == ["cpu", "float32"]]
    if not cpu:
        return None
    base = max(cpu, key=lambda r: (fmt.get(r, "job.height") or 0) * (fmt.get(r, "job.width") or 0))
    same = [r for r in timed if fmt.get(r, "job.device") != "cpu"
            and fmt.size_label(r) == fmt.size_label(base)
            and fmt.get(r, "job.batch_size") == fmt.get(base, "job.batch_size")]
    if not same:
        return None
    headers = [fmt.word("device", lang), fmt.word("data_type", lang),
               fmt.word("time_at", lang, size=fmt.size_label(base)), fmt.word("speedup", lang)]
    body = [[_device(r), fmt.field(r, "job.dtype"), latency_cell(r, lang, unit=" ms"),
             speedup_cell(base, r, lang)] for r in [base, *same]]
    return fmt.table(headers, body, [links_note([base, *same], base_dir, lang)])


def flux2_dtype(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """Scenario | Recommended dtype | Why: fastest passing, most accurate, failing."""
    judged_rows = accuracy_rows(rows)
    by_dtype = fmt.group(judged_rows, lambda r: str(fmt.get(r, "job.dtype")))

    def err(dtype: str) -> tuple[float, str]:
        found = [(fmt.get(r, f"metrics.{n}.value"), value_cell(r, n)) for r in by_dtype[dtype]
                 if (n := section_metric(r, "error", ["mean_rel_err"]))]
        return max(found, key=lambda c: c[0]) if found else (float("inf"), fmt.MISSING)

    passing = [d for d, rs in by_dtype.items() if all(fmt.get(r, "verdict") == "PASS" for r in rs)]
    body = []
    if passing:
        fastest = min(passing, key=lambda d: min(fmt.latency(r) or float("inf")
                                                 for r in by_dtype[d]))
        precise = min(passing, key=lambda d: err(d)[0])
        body += [[fmt.word("production", lang), f"`{fastest}`",
                  fmt.word("passes_fastest", lang, err=err(fastest)[1])],
                 [fmt.word("precise", lang), f"`{precise}`",
                  fmt.word("most_accurate", lang, err=err(precise)[1])]]
    body += [[fmt.word("avoid", lang), f"`{d}`", fmt.word("fails", lang, err=err(d)[1])]
             for d, rs in by_dtype.items() if any(fmt.get(r, "verdict") == "FAIL" for r in rs)]
    if not body:
        return None
    headers = [fmt.word("scenario", lang), fmt.word("recommended", lang), fmt.word("why", lang)]
    return fmt.table(headers, body, [links_note(judged_rows, base_dir, lang)])


SULPHUR_HIDDEN = {"max_abs_err": "<= 0.001", "cosine": ">= 0.9999"}  # the seed's 6.1 rules


def seed_verdict(row: fmt.Row, prefixes: Sequence[str]) -> str:
    """The verdict of the seed's own rules (at ``prefixes``), else the record's (a replay)."""
    judged = [v for p in prefixes if (v := fmt.get(row, f"{p}.verdict")) in ORDER]
    if not judged:
        return fmt.named_verdict(row)
    verdict = max(judged, key=ORDER.__getitem__)
    names = {p.removeprefix("metrics.") for p in prefixes}
    failed = [said for said in fmt.failed_rules(row) if said.split(" ", 1)[0] in names]
    return f"FAIL ({', '.join(failed)})" if verdict == "FAIL" and failed else verdict


def _replaced_rules(row: fmt.Row, lang: str) -> list[str]:
    """Where a hidden-state rule in force is not the seed's, which and why."""
    said = []
    for (check, seed_rule), word in zip(SULPHUR_HIDDEN.items(), ("hidden_max", "hidden_cos"),
                                           strict=True):
        rule = fmt.get(row, f"hidden.{check}.rule")
        if fmt.get(row, f"hidden.{check}.value") is None or rule == seed_rule:
            continue
        source = fmt.get(row, f"hidden.{check}.source")
        why = fmt.log_text(source) if source else fmt.word(
            "not_judged_for", lang, dtype=fmt.field(row, "job.dtype"),
            reference=fmt.field(row, "job.reference_dtype"))
        said.append(fmt.word("replaced", lang, check=fmt.word(word, lang), seed=seed_rule,
                             rule=rule or fmt.word("no_rule", lang), why=why))
    return said


def sulphur2_accuracy(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """The seed's table: 分辨率 | 帧数 | Steps | 中间张量 MaxDiff/CosSim |
    视频 PSNR/SSIM | 判定."""
    judged_rows = accuracy_rows(rows)
    if not judged_rows:
        return None
    body = [[f"{fmt.field(r, 'job.height')}x{fmt.field(r, 'job.width')}",
             *fmt.cells(r, ["job.num_frames", "job.steps"]), hidden_value(r, "max_abs_err"),
             hidden_value(r, "cosine"),
             *(["-", "-"] if is_replay(r) else [section_value(r, "psnr", ["psnr_db_mean"]),
                                                section_value(r, "ssim", ["ssim_mean"])]),
             seed_verdict(r, [f"hidden.{c}" for c in SULPHUR_HIDDEN] + [
                 f"metrics.{section_metric(r, s, [w])}" for s, w in
                 (("psnr", "psnr_db_mean"), ("ssim", "ssim_mean"))])] for r in judged_rows]
    own = [f"[{i}] {fmt.named_verdict(r)}" for i, (r, cells) in enumerate(
        zip(judged_rows, body, strict=True), 1)
        if fmt.field(r, "verdict") != cells[-1].split(" ", 1)[0]]
    replaced = list(dict.fromkeys(x for r in judged_rows for x in _replaced_rules(r, lang)))
    notes = [fmt.word("seed_rules", lang), *replaced,
             f"{fmt.word('own_rules', lang)}: {'; '.join(own)}" if own else None,
             fmt.word("replay_note", lang) if any(is_replay(r) for r in judged_rows) else None,
             *variants_note(judged_rows, lang), links_note(judged_rows, base_dir, lang)]
    return fmt.table([fmt.word(k, lang) for k in COLUMNS], body, notes)


def sulphur2_performance(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """指标 | 预估/实测数值 | 说明: load time, first call, time per resolution, memory."""
    timed = [r for r in timing_rows(rows) if fmt.latency(r)]
    if not timed:
        return None
    body = []
    load = [s for r in timed if (s := fmt.get(r, "weights.load_seconds")) is not None]
    if load:
        body.append([fmt.word("load_time", lang), f"{fmt.num(max(load))} s",
                     fmt.field(timed[0], "job.device")])
    body += [[fmt.word("first_call", lang), f"{fmt.field(r, 'bench.cold_ms')} ms",
              fmt.size_label(r)]
             for r in timed if fmt.get(r, "bench.cold_ms") is not None]
    body += [[fmt.word("gen_time", lang, size=fmt.size_label(r)), latency_cell(r, lang, unit=" ms"),
              fmt.word("steps_dtype", lang, steps=fmt.field(r, "job.steps"),
                       dtype=fmt.field(r, "job.dtype"))]
             for r in timed]
    memory = [(*memory_of(r), r) for r in timed if memory_of(r)[0] is not None]
    if memory:
        peak, kind, row = max(memory, key=lambda item: item[0])
        body.append([fmt.word("peak_mem" if kind == "allocated" else kind, lang),
                     f"{fmt.num(peak)} MB", fmt.size_label(row)])
    headers = [fmt.word("metric", lang), fmt.word("measured", lang), fmt.word("note", lang)]
    return fmt.table(headers, body, [*variants_note(timed, lang, ratios=True),
                                     links_note(timed, base_dir, lang)])


def _used(row: fmt.Row, key: str) -> str:
    value = fmt.get(row, f"job.{key}")
    if value is not None:
        return fmt.num(value)
    task = str(fmt.get(row, "job.task") or "").rsplit(".", 1)[-1]
    return fmt.MISSING if key in TASK_PRESET_FIELDS.get(task, ()) else "-"


def resolution_table(rows: fmt.Rows, psnr: Sequence[str], ssim: Sequence[str],
                     base_dir: Path) -> str:
    """The Sulphur-2 seed's table with verdicts and records (the ``per_resolution`` section)."""
    if not rows:
        return ("No job finished ok, so there is no per-resolution accuracy to show (see the "
                "failed jobs).")
    varying = [(h, k) for h, k in _VARYING if len({fmt.field(r, k) for r in rows}) > 1]
    body = [fmt.cells(row, [k for _, k in varying])
            + [f"{fmt.field(row, 'job.height')}x{fmt.field(row, 'job.width')}",
               _used(row, "num_frames"), _used(row, "steps"),
               hidden_value(row, "max_abs_err", True), hidden_value(row, "cosine", True),
               section_value(row, "psnr", psnr, True), section_value(row, "ssim", ssim, True),
               verdict_cell(row), fmt.record_link(row, base_dir)]
            for row in rows]
    shared = [f"{h} {fmt.field(rows[0], k)}" for h, k in _VARYING if (h, k) not in varying]
    notes = ["hidden MaxDiff / CosSim: the worst over every hooked layer and call; PSNR / SSIM: "
             f"the task's declared metric (else {list(psnr)} / {list(ssim)}); \"-\": not used by "
             "the task.", "every row: " + ", ".join(shared),
             RANDOM_LEGEND if any(random_init(r) for r in rows) else None,
             fmt.word("replay_note", "en") if any(is_replay(r) for r in rows) else None]
    headers = [h for h, _ in varying] + [fmt.word(k, "en") for k in (*COLUMNS, "p_record")]
    return fmt.table(headers, body, notes)
