"""The LTX VAE layer seed's and the VideoFlexTok seed's layouts, and the section that picks a layout per task.

Neither seed has a table: the layer seed reports log lines (input statistics, "首轮编译 105.24 ms", "稳定推理
... 平均 0.14，最小 0.13，最大 0.16，p50 0.13，p90 0.16，p95 0.16 ms", "吞吐", "已分配 7.79 MB，已预留 80.00
MB", "第二轮 ... 最大差异 0.0"), the tokenizer seed its gates ("[Gate1] strict load ... missing=0
unexpected=0", "GATE 3 (a) reconstruction", "PERF ... p50 p90 p95 throughput peak_HBM"). Here each is an
item | value table whose labels are those words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import get, num, table, text, workload_label
from ascendbench.report.performance import median_ms
from ascendbench.report.seedlayouts import (
    Layout,
    flux2_accuracy,
    flux2_dtype,
    flux2_performance,
    flux2_speedup,
    links_note,
    sulphur2_accuracy,
    sulphur2_performance,
    value_cell,
)
from ascendbench.report.select import accuracy_rows, latest_per_workload, timing_rows
from ascendbench.report.words import word

Rows = Sequence[Mapping[str, Any]]
STATS = ("mean", "std", "min", "max")
LATENCY = (("avg", "mean_ms"), ("min", "min_ms"), ("max", "max_ms"), (None, "median_ms"), (None, "p90_ms"),
           (None, "p95_ms"))
GATES = (("[Gate1] strict load: missing", "gate/load_missing_keys"),
         ("[Gate1] strict load: unexpected", "gate/load_unexpected_keys"),
         ("[Gate2] config: not OK", "gate/config_mismatches"),
         ("token shape", "gate/token_shape_match"),
         ("token id range: not in valid codebook", "gate/token_ids_out_of_range"),
         ("token dist: unique ids / total", "gate/token_unique_ratio"),
         ("[Gate3-b] stability: agreement", "gate/rerun_token_agreement"),
         ("[Gate3-b] encoder+FSQ deterministic (fixed VAE latents): agreement", "gate/fixed_latent_token_agreement"),
         ("reconstruction: PSNR (dB)", "gate/recon_psnr_db"), ("reconstruction: MSE", "gate/recon_mse"),
         ("RANDOM-INIT: PSNR (dB)", "gate/control_psnr_db"), ("PSNR gap (dB)", "gate/control_psnr_gap_db"),
         ("recon in [-1,1]: not in range", "gate/recon_out_of_range"))


def _input_rows(row: Mapping[str, Any], lang: str) -> list[list[str]]:
    names = sorted({k.split(".")[1] for k in row if k.startswith("inputs.") and k.endswith(".shape")})
    out = []
    for name in names:
        stats = ", ".join(f"{s} {num(get(row, f'inputs.{name}.{s}'))}" for s in STATS
                          if get(row, f"inputs.{name}.{s}") is not None)
        out.append([f"{word('input', lang)} {name}", f"shape {text(get(row, f'inputs.{name}.shape'))} "
                    f"{text(get(row, f'inputs.{name}.dtype'))}" + (f"; {stats}" if stats else "")])
    return out


def vae_layer(rows: Rows, lang: str, base_dir: Path) -> str | None:
    """Item | Value: inputs, first call vs steady latency (mean/min/max/p50/p90/p95), throughput, memory,
    determinism, the regression metrics and the verdict of the latest job of each workload."""
    parts = []
    for row in timing_rows([r for r in rows if median_ms(r)]):
        body = _input_rows(row, lang)
        body.append([word("first_run", lang), f"{num(get(row, 'bench.cold_ms'))} ms"])
        body += [[f"{word('steady', lang)} {word(key, lang) if key else field.split('_')[0].replace('median', 'p50')}",
                  f"{num(get(row, f'bench.latency.{field}'))} ms"] for key, field in LATENCY
                 if get(row, f"bench.latency.{field}") is not None]
        unit = text(get(row, "bench.throughput.unit"))
        body.append([word("thr", lang), f"{num(get(row, 'bench.throughput.value'))} {unit}"])
        body += [[word(key, lang), f"{num(get(row, f'bench.memory.peak_{key}_mb'))} MB"]
                 for key in ("allocated", "reserved") if get(row, f"bench.memory.peak_{key}_mb") is not None]
        for label, name in ((word("second_run", lang), "determinism/second_run_max_abs_diff"),
                            ("max_abs", "max_abs_err"), ("cosine", "cosine"), ("mean_rel_err", "mean_rel_err")):
            if get(row, f"metrics.{name}.value") is not None:
                body.append([label, value_cell(row, name)])
        body.append([word("verdict", lang), text(get(row, "verdict"))])
        notes = [f"{text(get(row, 'job.device'))} {text(get(row, 'job.dtype'))}; warm-up "
                 f"{num(get(row, 'bench.warmup.calls'))}, timed {num(get(row, 'bench.latency.count'))} "
                 f"({text(get(row, 'bench.stop.protocol'))}); memory: {text(get(row, 'bench.memory.scope'))}",
                 links_note([row], base_dir, lang)]
        parts.append(table([word("item", lang), word("value", lang)], body) + "\n\n"
                     + "\n".join(f"- {n}" for n in notes))
    return "\n\n".join(parts) or None


def videoflextok_gates(rows: Rows, lang: str, base_dir: Path) -> str | None:
    """Gate | one column per job (device dtype, weights): each gate's value, the verdict last; then the perf line."""
    jobs = latest_per_workload(rows)
    if not jobs:
        return None
    # Several workloads (the recipe's preset sweep): each column and perf line also names its preset and size.
    which = {id(r): f" {workload_label(r)}" if len(jobs) > 1 else "" for r in jobs}
    headers = [word("gate", lang)] + [f"{text(get(r, 'job.device'))} {text(get(r, 'job.dtype'))} "
                                      f"{text(get(r, 'weights.kind'))}{which[id(r)]}" for r in jobs]
    body = [[label] + [value_cell(r, name) if get(r, f"metrics.{name}.value") is not None
                       else ("skipped" if get(r, f"metrics.{name}.skipped") else "-") for r in jobs]
            for label, name in GATES if any(get(r, f"metrics.{name}.value") is not None for r in jobs)]
    body.append([word("verdict", lang)] + [text(get(r, "verdict")) for r in jobs])
    perf = [f"PERF {text(get(r, 'job.device'))}{which[id(r)]}: avg={num(get(r, 'bench.latency.mean_ms'))}ms "
            f"p50={num(get(r, 'bench.latency.median_ms'))} p90={num(get(r, 'bench.latency.p90_ms'))} "
            f"p95={num(get(r, 'bench.latency.p95_ms'))} throughput={num(get(r, 'bench.throughput.value'))} "
            f"{text(get(r, 'bench.throughput.unit'))} peak={num(get(r, 'bench.memory.peak_allocated_mb'))} MB"
            for r in jobs if median_ms(r)]
    skipped = sorted({f"{name}: {get(r, f'metrics.{name}.skipped')}" for r in jobs for _, name in GATES
                      if get(r, f"metrics.{name}.skipped")})
    notes = perf + (["skipped: " + "; ".join(skipped)] if skipped else []) + [links_note(jobs, base_dir, lang)]
    return table(headers, body) + "\n\n" + "\n".join(f"- {n}" for n in notes)


# task class -> the seed's layouts, in the seed's order: (name, title en, title zh, layout)
PROFILES: dict[str, tuple[tuple[str, str, str, Layout], ...]] = {
    "VaeDecodeTask": (("flux2_accuracy", "Accuracy (metrics x dtypes)", "精度评测", flux2_accuracy),
                      ("flux2_performance", "Performance (batch x resolution)", "性能测试", flux2_performance),
                      ("flux2_speedup", "Speed-up over the CPU", "加速比", flux2_speedup),
                      ("flux2_dtype", "dtype recommendation", "数据类型选择", flux2_dtype)),
    "TextToVideoTask": (("sulphur2_accuracy", "Accuracy per resolution", "精度对比结果", sulphur2_accuracy),
                        ("sulphur2_performance", "Performance reference", "性能参考", sulphur2_performance)),
    "LayerForwardTask": (("vae_layer", "Layer: consistency and performance", "一致性与性能", vae_layer),),
    "VideoTokenizerTask": (("videoflextok_gates", "Gates", "精度评测（Gate）", videoflextok_gates),),
}
PROFILES["VideoDecodeTask"] = PROFILES["VaeDecodeTask"]
PROFILES["ImageToVideoTask"] = PROFILES["TextToVideoTask"]
PROFILE_SECTIONS = tuple(dict.fromkeys(name for layouts in PROFILES.values() for name, *_ in layouts))


def task_of(row: Mapping[str, Any]) -> str:
    """The short task class name of a row (``TextToVideoTask``)."""
    return str(get(row, "job.task") or "").rsplit(".", 1)[-1]


def layout(name: str, rows: Rows, lang: str, base_dir: Path) -> str | None:
    """One named layout over the rows of the tasks that have it (None when no row has it)."""
    for task, layouts in PROFILES.items():
        for entry in layouts:
            mine = [r for r in rows if task_of(r) == task]
            if entry[0] == name and mine:
                return entry[3](mine, lang, base_dir)
    return None


def seed_layouts_section(rows: Rows, models: Sequence[str], lang: str, base_dir: Path, heading: str = "###") -> str:
    """Per model, the layouts of its task's seed, in the seed's order (layouts with nothing to show left out)."""
    parts = []
    for model in models:
        mine = [r for r in rows if get(r, "job.model") == model]
        layouts = PROFILES.get(task_of(mine[0]), ()) if mine else ()
        for _, en, zh, render in layouts:
            body = render(mine, lang, base_dir)
            if body:
                parts.append(f"{heading} {model}: {zh if lang == 'zh' else en}\n\n{body}")
    return "\n\n".join(parts) or "No record of a task with a seed layout (VAE decode, text-to-video, layer, tokenizer)."


__all__ = ["PROFILES", "PROFILE_SECTIONS", "layout", "seed_layouts_section", "vae_layer", "videoflextok_gates",
           "accuracy_rows"]
