"""A/B variants side by side: jobs of one workload that differ only in settings.

A **workload** is what the regression gate lines up (:data:`ascendbench.report.compare.KEY`: model, device,
dtype, preset, batch, size, frames, steps, seed) plus the task, the weights (digest, or the seed of a random
init), the inputs' SHA256, the machine and every setting that is not a declared variant key. Jobs of one
workload whose resolved configs differ only in declared variant keys (:data:`VARIANT_KEYS`: ``model.patches``,
an attention backend, ``device.allow_hf32``, ``device.jit_compile``, CPU offload, VAE slicing/tiling) are
**variants**; a perf-only run (``baseline.enabled=false``) and an accuracy run are not, nor are two jobs
differing in ``baseline.reference`` or ``model.expect_digest``. The report shows them in one table under that workload
with a ``variant`` column naming the differing keys and values, their accuracy, and the ratio of each
variant's median latency to the first variant's (the baseline: the variant whose job started first, so the
first value of a sweep). Keys that say where or how a job was kept (cache and output paths, resume, card index,
artifacts, profiling) or that the workload already covers are never variants (:data:`IGNORED`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ascendbench.report.columns import rules_notes
from ascendbench.report.compare import KEY, latency_of, measured
from ascendbench.report.fmt import MISSING, get, metric_matches, num, size_label, table, text, times
from ascendbench.report.gather import CONFIG_COLUMN
from ascendbench.report.hidden import hidden_metrics
from ascendbench.report.performance import latest, median_cell, median_ms, started_key
from ascendbench.report.significance import LatencyRule, decide
from ascendbench.report.tables import (
    RANDOM_LEGEND,
    hidden_columns,
    metric_cell,
    metric_names,
    random_init,
    record_link,
    verdict_cell,
    weights_label,
)

WORKLOAD = KEY + ("job.task", "weights.digest", "weights.init_seed", "inputs.digest", "env.hostname")
# Config keys (and everything under them) that never make a variant: the workload keys' own config
# (model, task, device, dtype, preset sizes, seed, weights source) and where/how a job was kept.
IGNORED = ("seed", "dry_run", "fail_on", "objective", "resume", "artifacts", "profile", "model.name", "model.source",
           "model.weights", "model.revision", "model.init_seed", "model.task._target_", "device.name",
           "device.index", "device.record_env", "device.peak", "dtype", "preset.name", "preset.height",
           "preset.width", "preset.num_frames", "preset.batch_size", "preset.steps", "baseline.cache",
           "baseline.cache_dir", "baseline.lock_timeout_s")
# The declared variant keys: settings that change how the same workload runs on the device (an attention
# backend or any other patch, CPU offload, VAE slicing/tiling, HF32, JIT/graph compile). Only jobs differing
# in these are variants of each other; jobs differing in any other setting (baseline.enabled: a perf-only run,
# baseline.reference, model.expect_digest, metric options ...) are not A/B-compared at all.
VARIANT_KEYS = ("model.patches", "model.task.cpu_offload", "model.task.vae", "model.task.attention_backend",
                "model.compile", "device.allow_hf32", "device.jit_compile", "device.compile", "device.env",
                "device.world_size", "device.parallel", "device.dist")  # ranks: one workload over 1..N cards
# Settings that neither split a workload nor make a variant: the timing budget and what is drawn or written.
NEUTRAL = ("bench", "preset.warmup", "preset.iters", "preset.min_iters", "preset.max_iters", "preset.min_time_s",
           "preset.max_time_s", "preset.stability", "compare.visual", "compare.csv", "tracking")
# (mirror, source): a mirror key (``bench.iters: ${preset.iters}``) is left out of the variant label when
# its source differs with the same values.
MIRRORS = (("bench.", "preset."), ("compare.layers", "model.compare_layers"))
UNSET = "unset"


def settings(row: Mapping[str, Any]) -> dict[str, str]:
    """The row's resolved config as ``{dotted key: value text}``, without the :data:`IGNORED` keys."""
    try:
        config = json.loads(row.get(CONFIG_COLUMN) or "{}")
    except (TypeError, json.JSONDecodeError):
        return {}
    flat = _flatten(config, "") if isinstance(config, Mapping) else {}
    return {k: v for k, v in flat.items() if not ignored(k)}


def ignored(key: str) -> bool:
    """True when ``key`` is, or sits under, one of :data:`IGNORED`."""
    return any(key == name or key.startswith(name + ".") for name in IGNORED)


def _flatten(value: Any, prefix: str) -> dict[str, str]:
    """Mappings and lists of mappings by dotted key and index (``model.patches.0.backend``); other values as JSON."""
    items: Iterable[tuple[Any, Any]] = ()
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        items = enumerate(value)
    else:
        return {prefix: value if isinstance(value, str) else json.dumps(value)}
    flat: dict[str, str] = {}
    for key, sub in items:
        flat.update(_flatten(sub, f"{prefix}.{key}" if prefix else str(key)))
    return flat


@dataclass
class Variant:
    """One variant of a workload: its latest record and the values of the keys that tell it apart."""

    row: Mapping[str, Any]
    values: dict[str, str]

    def label(self, keys: Sequence[str]) -> str:
        """``key=value, ...`` for the differing ``keys`` (``unset`` where the config lacks the key)."""
        return ", ".join(f"{k}={self.values.get(k, UNSET)}" for k in keys)


@dataclass
class VariantGroup:
    """The variants of one workload, baseline first, and the config keys in which they differ."""

    variants: list[Variant]
    keys: list[str]

    @property
    def baseline(self) -> Variant:
        """The first variant: every latency ratio is against it."""
        return self.variants[0]

    def ratio(self, variant: Variant) -> float | None:
        """``variant``'s median latency over the baseline's (None when either is missing)."""
        mine, base = median_ms(variant.row), median_ms(self.baseline.row)
        return mine / base if mine is not None and base else None


def _under(key: str, names: Sequence[str]) -> bool:
    return any(key == name or key.startswith(name + ".") for name in names)


def variant_settings(row: Mapping[str, Any]) -> dict[str, str]:
    """The row's settings under a declared variant key (:data:`VARIANT_KEYS`)."""
    return {k: v for k, v in settings(row).items() if _under(k, VARIANT_KEYS)}


def workload(row: Mapping[str, Any]) -> tuple:
    """The workload identity of a row (:data:`WORKLOAD`) plus every setting that is neither a declared variant
    key nor neutral (:data:`NEUTRAL`): two jobs are A/B-compared only when nothing else tells them apart."""
    other = tuple(sorted((k, v) for k, v in settings(row).items() if not _under(k, VARIANT_KEYS + NEUTRAL)))
    return tuple(get(row, k) for k in WORKLOAD) + other


def variant_groups(rows: Iterable[Mapping[str, Any]]) -> list[VariantGroup]:
    """Workloads measured in two or more variants, in row order; repeats of one variant keep the latest record."""
    by_workload: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        if measured(row) and get(row, "job.model") is not None:
            by_workload.setdefault(workload(row), []).append(row)
    groups = [_group(members) for members in by_workload.values()]
    return [g for g in groups if len(g.variants) > 1]


def _group(rows: Sequence[Mapping[str, Any]]) -> VariantGroup:
    """Collapse ``rows`` (one workload) into variants by their settings, first started first."""
    by_settings: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_settings.setdefault(tuple(sorted(variant_settings(row).items())), []).append(row)
    order = {id(r): i for i, r in enumerate(rows)}
    started = {key: min((started_key(r), order[id(r)]) for r in members)
               for key, members in by_settings.items()}
    variants = [Variant(latest(members), dict(key)) for key, members in
                sorted(by_settings.items(), key=lambda item: started[item[0]])]
    return VariantGroup(variants, differing_keys(variants))


def differing_keys(variants: Sequence[Variant]) -> list[str]:
    """Sorted config keys whose value is not the same in every variant, mirrors (:data:`MIRRORS`) left out."""
    keys = sorted({k for v in variants for k in v.values})
    column = {k: tuple(v.values.get(k, UNSET) for v in variants) for k in keys}
    differing = [k for k in keys if len(set(column[k])) > 1]
    return [k for k in differing if not _mirrored(k, column, differing)]


def _mirrored(key: str, column: Mapping[str, tuple], differing: Sequence[str]) -> bool:
    for mirror, source in MIRRORS:
        if key.startswith(mirror):
            origin = source + key[len(mirror):]
            if origin in differing and column[origin] == column[key]:
                return True
    return False


def workload_title(row: Mapping[str, Any]) -> str:
    """``model task on device dtype, preset HxWxF, N steps, batch B, seed S, weights W, inputs I, machine M``."""
    steps = get(row, "job.steps")
    return (f"{text(get(row, 'job.model'))} ({str(get(row, 'job.task') or MISSING).rsplit('.', 1)[-1]}) on "
            f"{text(get(row, 'job.device'))} {text(get(row, 'job.dtype'))}, {text(get(row, 'job.preset'))} "
            f"{size_label(row)}" + (f", {num(steps)} steps" if steps is not None else "")
            + f", batch {num(get(row, 'job.batch_size'))}, seed {num(get(row, 'job.seed'))}, weights "
            f"{weights_label(row)}, inputs {text(get(row, 'inputs.digest'))}, machine {text(get(row, 'env.hostname'))}")


def patches_cell(row: Mapping[str, Any]) -> str:
    """What the record says each patch did on the device run: ``name backend=x applied`` or ``name skipped: why``."""
    try:
        entries = json.loads(row.get("patches") or "{}").get("device") or []
    except (AttributeError, TypeError, json.JSONDecodeError):
        return MISSING
    cells = []
    for entry in (e for e in entries if isinstance(e, Mapping)):
        options = " ".join(f"{k}={v}" for k, v in sorted((entry.get("options") or {}).items()) if k != "devices")
        done = f"skipped: {entry['skipped']}" if entry.get("skipped") else "applied"
        cells.append(" ".join(part for part in (str(entry.get("name")), options, done, _kernels(entry)) if part))
    return "; ".join(cells) if cells else "none"


def _kernels(entry: Mapping[str, Any]) -> str:
    """``ran: kernel xN, ...``: which attention kernel the patch saw each call take (``kernels`` in the record)."""
    kernels = entry.get("kernels")
    if not isinstance(kernels, Mapping) or not kernels:
        return ""
    return "ran: " + ", ".join(f"{name} x{count}" for name, count in sorted(kernels.items()))


def ratio_cell(group: VariantGroup, variant: Variant, rule: LatencyRule | None = None) -> str:
    """``1x (baseline)``; ``1.23x slower`` / ``0.81x faster`` with the gate's evidence when the shift is
    significant (the regression gate's rule, :mod:`ascendbench.report.significance`);
    ``no significant difference`` otherwise: host noise is never sold as a speed-up."""
    if variant is group.baseline:
        return "1x (baseline)" if median_ms(variant.row) else "baseline (no latency)"
    ratio, base, mine = group.ratio(variant), latency_of(group.baseline.row), latency_of(variant.row)
    if ratio is None or base is None or mine is None:
        return MISSING
    rule = rule or LatencyRule()
    slower, faster = decide(base, mine, rule), decide(mine, base, rule)
    if slower.method == "medians only":  # no samples or CIs: nothing can say the shift is more than noise
        return f"{times(ratio)} (untested: {slower.why.split('; ', 1)[-1]})"
    if slower.regressed:
        return f"{times(ratio)} slower ({slower.effect})"
    if faster.regressed:
        return f"{times(ratio)} faster ({faster.effect})"
    return f"no significant difference ({times(ratio)}; {slower.effect})"


def group_table(group: VariantGroup, show: Sequence[str], base_dir: Path, rule: LatencyRule | None = None) -> str:
    """One workload's variants: variant, accuracy (``show`` metrics, hidden states), verdict, latency, ratio."""
    rows = [v.row for v in group.variants]
    names = [n for n in metric_names(rows, show) if any(metric_matches(n, w) for w in show)]
    hid_headers, hid_cells = hidden_columns(rows)
    headers = ["variant", "device patches"] + names + hid_headers + ["verdict", "median ms", "latency / baseline",
                                                                      "record"]
    body = [[v.label(group.keys), patches_cell(v.row)] + [metric_cell(v.row, n) for n in names] + hid_cells(v.row)
            + [verdict_cell(v.row, names), median_cell(v.row), ratio_cell(group, v, rule), record_link(v.row, base_dir)]
            for v in group.variants]
    rules = rules_notes(rows, names) + [n.replace("rule ", "rule hidden ", 1)
                                        for n in rules_notes(rows, hidden_metrics(rows), "hidden")]
    return table(headers, body) + ("\n\n" + "\n".join(f"- {n}" for n in rules) if rules else "")


def variants_section(rows: Sequence[Mapping[str, Any]], show: Sequence[str], base_dir: Path,
                     heading: str = "###", rule: LatencyRule | None = None) -> str:
    """The report section: one table per workload measured in several variants, or why there is none."""
    groups = variant_groups(rows)
    if not groups:
        return ("No A/B variants: no two jobs of one workload (model, task, device, dtype, preset sizes, batch, "
                "seed, weights, inputs, machine) differ in a setting. Sweep one, e.g. `+sweep=attention_backends`.")
    parts = [f"{heading} {workload_title(g.baseline.row)}\n\nVariants differ in: "
             + ", ".join(f"`{k}`" for k in g.keys) + "\n\n" + group_table(g, show, base_dir, rule) for g in groups]
    notes = ["latency / baseline: the variant's median latency over the first variant's, with the regression "
             "gate's evidence (report.yaml `compare`); \"no significant difference\" when the shift is within the "
             "noise or the minimum effect.",
             "device patches: what each patch of `model.patches` did on the device run, as the record says (a patch "
             "skipped on this device leaves the variants running the same code); `ran:` names the attention kernel "
             "the calls took (on Ascend910B1 and newer torch_npu's own SDPA runs npu_fusion_attention when no or a "
             "boolean mask is passed, so `native` and `_native_npu` can be the same kernel).",
             "A variant is the latest record of its settings; each row links to it."]
    if any(random_init(v.row) for g in groups for v in g.variants):
        notes.append(RANDOM_LEGEND)
    return "\n\n".join(parts) + "\n\n" + "\n".join(f"- {n}" for n in notes)
