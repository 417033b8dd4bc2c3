"""The LTX VAE layer and VideoFlexTok seeds' layouts in their log words; each task's layouts."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ascendbench.report import fmt, seedlayouts
from ascendbench.report.performance import latency_cell, no_allocator
from ascendbench.report.select import latest_per_workload, timing_rows
from ascendbench.report.tables import random_init
from ascendbench.report.variants import UNSET, settings

LATENCY = (("avg", "mean_ms"), ("min", "min_ms"), ("max", "max_ms"), ("p50", "median_ms"),
           ("p90", "p90_ms"), ("p95", "p95_ms"))
# The gates in the seed's order, each labelled with the seed's own words (words.yaml).
GATES = ("gate/load_missing_keys", "gate/load_unexpected_keys", "gate/config_mismatches",
         "gate/token_shape_match", "gate/token_ids_out_of_range", "gate/token_unique_ratio",
         "gate/rerun_token_agreement", "gate/fixed_latent_token_agreement",
         "gate/recon_psnr_rerun_diff_db", "gate/recon_psnr_db", "gate/recon_mse",
         "gate/control_psnr_db", "gate/control_psnr_gap_db", "gate/recon_out_of_range")
Layout = Callable[[fmt.Rows, str, Path], "str | None"]


def vae_layer(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """Item | Value: inputs, first call, steady latency, memory, determinism, verdict."""
    parts = []
    for row in timing_rows([r for r in rows if fmt.latency(r)]):
        body = []
        for name in sorted({k.split(".")[1] for k in row
                            if k.startswith("inputs.") and k.endswith(".shape")}):
            stats = {s: fmt.field(row, f"inputs.{name}.{s}")
                     for s in ("shape", "dtype", "mean", "std", "min", "max")}
            body.append([f"{fmt.word('input', lang)} {name}",
                         fmt.word("input_stats", lang, **stats)])
        body.append([fmt.word("first_run", lang), f"{fmt.field(row, 'bench.cold_ms')} ms"])
        body += [[f"{fmt.word('steady', lang)} {fmt.word(key, lang) if key in fmt.WORDS else key}",
                  latency_cell(row, lang, stat, " ms")]
                 for key, stat in LATENCY if fmt.latency(row, stat) is not None]
        unit = fmt.field(row, "bench.throughput.unit")
        body.append([f"{fmt.word('thr', lang)} p50",
                     f"{fmt.field(row, 'bench.throughput.value')} {unit}"])
        memory = (("host_rss", "rss"),) if no_allocator(row) else (("allocated", "allocated"),
                                                                     ("reserved", "reserved"))
        body += [[fmt.word(word, lang), f"{fmt.field(row, f'bench.memory.peak_{key}_mb')} MB"]
                 for word, key in memory if fmt.get(row, f"bench.memory.peak_{key}_mb") is not None]
        checks = ((fmt.word("second_run", lang), "determinism/second_run_max_abs_diff"),
                  ("max_abs", "max_abs_err"), ("cosine", "cosine"),
                  ("mean_rel_err", "mean_rel_err"))
        body += [[label, seedlayouts.value_cell(row, name)] for label, name in checks
                 if fmt.get(row, f"metrics.{name}.value") is not None]
        body.append([fmt.word("verdict", lang), fmt.named_verdict(row)])
        device, dtype = fmt.cells(row, ["job.device", "job.dtype"])
        protocol, scope = (fmt.log_text(fmt.get(row, f"bench.{k}")) for k in ("stop.protocol",
                                                                             "memory.scope"))
        notes = [fmt.word("layer_run", lang, device=device, dtype=dtype, scope=scope,
                          warmup=fmt.field(row, "bench.warmup.calls"), protocol=protocol,
                          timed=fmt.num(fmt.latency(row, "count"))),
                 seedlayouts.links_note([row], base_dir, lang)]
        parts.append(fmt.table([fmt.word("item", lang), fmt.word("value", lang)], body, notes))
    return "\n\n".join(parts) or None


def gate_cell(row: fmt.Row, name: str, lang: str) -> str:
    """The gate's value as the seed writes it (``[1, 5, 256]``, ``1275/1280``, ``+13.8 dB``)."""
    key = f"metrics.{name}"
    value, verdict, _ = fmt.judged(row, key, name)
    if value == fmt.MISSING:
        return fmt.word("p_skipped", lang) if fmt.get(row, f"{key}.skipped") else "-"
    detail = {k: fmt.get(row, f"{key}.details.{k}")
              for k in ("actual", "equal", "unique", "total", "psnr_db", "rerun_psnr_db")}
    if detail["actual"] is not None:
        value = fmt.text(detail["actual"])
    elif detail["total"] is not None and (count := detail["equal"] or detail["unique"]):
        value = f"{fmt.num(count)}/{fmt.num(detail['total'])} ({value})"
    elif detail["rerun_psnr_db"] is not None:
        value += f" dB ({fmt.num(detail['psnr_db'])} / {fmt.num(detail['rerun_psnr_db'])} dB)"
    elif name.endswith("_db"):
        value = ("+" if name.endswith("gap_db") and fmt.get(row, f"{key}.value") >= 0 else "") \
            + f"{value} dB"
    if not_judged := fmt.get(row, f"{key}.not_judged"):
        why = fmt.word("random", lang) if random_init(row) else fmt.text(not_judged)
        return f"{value} ({fmt.word('not_judged', lang, why=why)})"
    return f"{value} {verdict}" if verdict else value


def gate_threshold(rows: fmt.Rows, name: str) -> str:
    """The jobs' rules of a gate (the token shape: ``= <the expected shape>``), once each."""
    found = [f"= {fmt.text(shape)}" if (shape := fmt.get(r, f"metrics.{name}.details.expected"))
             else fmt.judged(r, f"metrics.{name}", name)[2] for r in rows]
    return " / ".join(dict.fromkeys(f for f in found if f != fmt.MISSING)) or "-"


def job_labels(jobs: fmt.Rows, lang: str) -> list[str]:
    """``cpu float32 loaded mini @ 32x32x9``; jobs alike so far add the settings they differ in."""
    labels = [" ".join(fmt.cells(r, ["job.device", "job.dtype"]) + [fmt.value_word(fmt.get(
        r, "weights.kind"), lang), fmt.workload_label(r)]) for r in jobs]
    for members in fmt.group(range(len(jobs)), labels.__getitem__).values():
        found = [settings(jobs[i]) for i in members]
        keys = sorted({k for s in found for k in s if len({o.get(k) for o in found}) > 1})[:3]
        for n, (i, mine) in enumerate(zip(members, found, strict=True), 1):
            said = ", ".join(f"{k}={fmt.value_word(mine.get(k, UNSET), lang)}" for k in keys)
            labels[i] += f" ({said or f'#{n}'})" if len(members) > 1 else ""
    return labels


def perf_line(label: str, row: fmt.Row, lang: str) -> str:
    """The seed's ``PERF`` line: avg, min, max, p50 (flagged when noisy), p90, p95, throughput."""
    stats = {key: latency_cell(row, lang) if key == "p50" else fmt.num(fmt.latency(row, stat))
             for key, stat in LATENCY}
    peak, kind = seedlayouts.memory_of(row)
    memory = f" {fmt.word(kind, lang)}={fmt.num(peak)} MB" if peak is not None else ""
    return fmt.word("perf_line", lang, label=label, memory=memory, **stats,
                    thr=fmt.field(row, "bench.throughput.value"),
                    unit=fmt.field(row, "bench.throughput.unit"))


def videoflextok_gates(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """Gate | threshold | a column of value and verdict per job; then a PERF line per job."""
    jobs = latest_per_workload(rows)
    if not jobs:
        return None
    labels = job_labels(jobs, lang)
    body = [[fmt.word(name, lang), gate_threshold(jobs, name)]
            + [gate_cell(r, name, lang) for r in jobs] for name in GATES
            if any(fmt.get(r, f"metrics.{name}.value") is not None for r in jobs)]
    body.append([fmt.word("verdict", lang), ""] + [fmt.named_verdict(r) for r in jobs])
    perf = [perf_line(label, r, lang) for label, r in zip(labels, jobs, strict=True)
            if fmt.latency(r)]
    skipped = sorted({f"{name}: {fmt.log_text(fmt.get(r, f'metrics.{name}.skipped'))}"
                      for r in jobs for name in GATES if fmt.get(r, f"metrics.{name}.skipped")})
    headers = [fmt.word("gate", lang), fmt.word("threshold", lang), *labels]
    skipped_note = f"{fmt.word('p_skipped', lang)}: " + "; ".join(skipped) if skipped else None
    return fmt.table(headers, body, [*perf, skipped_note,
                                     seedlayouts.links_note(jobs, base_dir, lang)])


# task class -> the seed's layouts, in the seed's order: (name, title en, title zh, layout)
PROFILES: dict[str, tuple[tuple[str, str, str, Layout], ...]] = {
    "VaeDecodeTask": (
        ("flux2_accuracy", "Accuracy (metrics x dtypes)", "精度评测",
         seedlayouts.flux2_accuracy),
        ("flux2_performance", "Performance (batch x resolution)", "性能测试",
         seedlayouts.flux2_performance),
        ("flux2_speedup", "Speed-up over the CPU", "加速比", seedlayouts.flux2_speedup),
        ("flux2_dtype", "dtype recommendation", "数据类型选择", seedlayouts.flux2_dtype)),
    "TextToVideoTask": (
        ("sulphur2_accuracy", "Accuracy per resolution", "精度对比结果",
         seedlayouts.sulphur2_accuracy),
        ("sulphur2_performance", "Performance reference", "性能参考",
         seedlayouts.sulphur2_performance)),
    "LayerForwardTask": (("vae_layer", "Layer: consistency and performance", "一致性与性能",
                          vae_layer),),
    "VideoTokenizerTask": (("videoflextok_gates", "Gates", "精度评测（Gate）",
                            videoflextok_gates),),
}
PROFILES["VideoDecodeTask"] = PROFILES["VaeDecodeTask"]
PROFILES["ImageToVideoTask"] = PROFILES["TextToVideoTask"]
PROFILE_SECTIONS = tuple(dict.fromkeys(name for layouts in PROFILES.values()
                                       for name, *_ in layouts))


def task_of(row: fmt.Row) -> str:
    """The short task class name of a row (``TextToVideoTask``)."""
    return str(fmt.get(row, "job.task") or "").rsplit(".", 1)[-1]


def layout(name: str, rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """One named layout over the rows of the tasks that have it (None when no row has it)."""
    for task, layouts in PROFILES.items():
        mine = [r for r in rows if task_of(r) == task]
        for entry in layouts:
            if entry[0] == name and mine:
                return entry[3](mine, lang, base_dir)
    return None


def seed_layouts_section(rows: fmt.Rows, models: list[str], lang: str, base_dir: Path) -> str:
    """Per model, the layouts of its task's seed in the seed's order (empty ones left out)."""
    parts = []
    for model in models:
        mine = [r for r in rows if fmt.get(r, "job.model") == model]
        for _, en, zh, render in PROFILES.get(task_of(mine[0]), ()) if mine else ():
            if body := render(mine, lang, base_dir):
                parts.append(f"### {model}: {zh if lang == 'zh' else en}\n\n{body}")
    return "\n\n".join(parts) or fmt.word("no_layout", lang)
