"""The LTX VAE layer and VideoFlexTok seeds' layouts (item | value tables labelled with the seeds'
own log words), and the section picking each model's seed layouts by its task."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ascendbench.report import fmt
from ascendbench.report.performance import latency_cell, no_allocator
from ascendbench.report.seedlayouts import (
    flux2_accuracy,
    flux2_dtype,
    flux2_performance,
    flux2_speedup,
    links_note,
    memory_of,
    sulphur2_accuracy,
    sulphur2_performance,
    value_cell,
)
from ascendbench.report.select import latest_per_workload, timing_rows

LATENCY = (("avg", "mean_ms"), ("min", "min_ms"), ("max", "max_ms"), (None, "median_ms"),
           (None, "p90_ms"), (None, "p95_ms"))
GATES = (("[Gate1] strict load: missing", "gate/load_missing_keys"),
         ("[Gate1] strict load: unexpected", "gate/load_unexpected_keys"),
         ("[Gate2] config: not OK", "gate/config_mismatches"),
         ("token shape", "gate/token_shape_match"),
         ("token id range: not in valid codebook", "gate/token_ids_out_of_range"),
         ("token dist: unique ids / total", "gate/token_unique_ratio"),
         ("[Gate3-b] stability: agreement", "gate/rerun_token_agreement"),
         ("[Gate3-b] encoder+FSQ deterministic (fixed VAE latents): agreement",
          "gate/fixed_latent_token_agreement"),
         ("reconstruction: PSNR (dB)", "gate/recon_psnr_db"),
         ("reconstruction: MSE", "gate/recon_mse"),
         ("RANDOM-INIT: PSNR (dB)", "gate/control_psnr_db"),
         ("PSNR gap (dB)", "gate/control_psnr_gap_db"),
         ("recon in [-1,1]: not in range", "gate/recon_out_of_range"))
Layout = Callable[[fmt.Rows, str, Path], "str | None"]


def vae_layer(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """Item | Value: inputs, first call, steady latency, memory, determinism, verdict."""
    parts = []
    for row in timing_rows([r for r in rows if fmt.latency(r)]):
        body = []
        for name in sorted({k.split(".")[1] for k in row
                            if k.startswith("inputs.") and k.endswith(".shape")}):
            stats = ", ".join(f"{s} {fmt.field(row, f'inputs.{name}.{s}')}"
                              for s in ("mean", "std", "min", "max")
                              if fmt.get(row, f"inputs.{name}.{s}") is not None)
            shape, dtype = fmt.cells(row, [f"inputs.{name}.shape", f"inputs.{name}.dtype"])
            body.append([f"{fmt.word('input', lang)} {name}",
                         f"shape {shape} {dtype}" + (f"; {stats}" if stats else "")])
        body.append([fmt.word("first_run", lang), f"{fmt.field(row, 'bench.cold_ms')} ms"])
        body += [[f"{fmt.word('steady', lang)} "
                  + (fmt.word(key, lang) if key else stat.split("_")[0].replace("median", "p50")),
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
        body += [[label, value_cell(row, name)] for label, name in checks
                 if fmt.get(row, f"metrics.{name}.value") is not None]
        body.append([fmt.word("verdict", lang), fmt.named_verdict(row)])
        keys = ["job.device", "job.dtype", "bench.stop.protocol", "bench.memory.scope"]
        device, dtype, protocol, scope = fmt.cells(row, keys)
        notes = [f"{device} {dtype}; warm-up {fmt.field(row, 'bench.warmup.calls')}, timed "
                 f"{fmt.num(fmt.latency(row, 'count'))} ({protocol}); memory: {scope}",
                 links_note([row], base_dir, lang)]
        parts.append(fmt.table([fmt.word("item", lang), fmt.word("value", lang)], body, notes))
    return "\n\n".join(parts) or None


def videoflextok_gates(rows: fmt.Rows, lang: str, base_dir: Path) -> str | None:
    """Gate | a column per job, the verdict last; then a perf line per job."""
    jobs = latest_per_workload(rows)
    if not jobs:
        return None
    # Several workloads (the recipe's preset sweep): each column and line names its preset and size.
    which = {id(r): f" {fmt.workload_label(r)}" if len(jobs) > 1 else "" for r in jobs}
    headers = [fmt.word("gate", lang)] + [" ".join(fmt.cells(r, ["job.device", "job.dtype",
                                                                 "weights.kind"])) + which[id(r)]
                                          for r in jobs]
    body = [[label] + [value_cell(r, name) if fmt.get(r, f"metrics.{name}.value") is not None
                       else ("skipped" if fmt.get(r, f"metrics.{name}.skipped") else "-")
                       for r in jobs]
            for label, name in GATES
            if any(fmt.get(r, f"metrics.{name}.value") is not None for r in jobs)]
    body.append([fmt.word("verdict", lang)] + [fmt.named_verdict(r) for r in jobs])
    perf = [f"PERF {fmt.field(r, 'job.device')}{which[id(r)]}: "
            f"avg={fmt.num(fmt.latency(r, 'mean_ms'))}ms "
            f"p50={latency_cell(r, lang)} p90={fmt.num(fmt.latency(r, 'p90_ms'))} "
            f"p95={fmt.num(fmt.latency(r, 'p95_ms'))} "
            f"throughput={fmt.field(r, 'bench.throughput.value')} "
            f"{fmt.field(r, 'bench.throughput.unit')} "
            f"{fmt.word(memory_of(r)[1], lang)}={fmt.num(memory_of(r)[0])} MB"
            for r in jobs if fmt.latency(r)]
    skipped = sorted({f"{name}: {fmt.get(r, f'metrics.{name}.skipped')}"
                      for r in jobs for _, name in GATES if fmt.get(r, f"metrics.{name}.skipped")})
    return fmt.table(headers, body, [*perf, "skipped: " + "; ".join(skipped) if skipped else None,
                                     links_note(jobs, base_dir, lang)])


# task class -> the seed's layouts, in the seed's order: (name, title en, title zh, layout)
PROFILES: dict[str, tuple[tuple[str, str, str, Layout], ...]] = {
    "VaeDecodeTask": (
        ("flux2_accuracy", "Accuracy (metrics x dtypes)", "精度评测", flux2_accuracy),
        ("flux2_performance", "Performance (batch x resolution)", "性能测试",
         flux2_performance),
        ("flux2_speedup", "Speed-up over the CPU", "加速比", flux2_speedup),
        ("flux2_dtype", "dtype recommendation", "数据类型选择", flux2_dtype)),
    "TextToVideoTask": (
        ("sulphur2_accuracy", "Accuracy per resolution", "精度对比结果", sulphur2_accuracy),
        ("sulphur2_performance", "Performance reference", "性能参考", sulphur2_performance)),
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


def seed_layouts_section(rows: fmt.Rows, models: list[str], lang: str, base_dir: Path,
                         heading: str = "###") -> str:
    """Per model, the layouts of its task's seed in the seed's order (empty ones left out)."""
    parts = []
    for model in models:
        mine = [r for r in rows if fmt.get(r, "job.model") == model]
        for _, en, zh, render in PROFILES.get(task_of(mine[0]), ()) if mine else ():
            body = render(mine, lang, base_dir)
            if body:
                parts.append(f"{heading} {model}: {zh if lang == 'zh' else en}\n\n{body}")
    return "\n\n".join(parts) or ("No record of a task with a seed layout (VAE decode, "
                                  "text-to-video, layer, tokenizer).")
