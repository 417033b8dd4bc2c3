"""A/B variants side by side: one workload's jobs differing in declared variant keys only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ascendbench.report import fmt, tables
from ascendbench.report.fmt import group, measured
from ascendbench.report.gather import CONFIG_COLUMN, KEY, flatten
from ascendbench.report.performance import latency_cell, latest, started_key
from ascendbench.report.significance import MEDIANS, LatencyRule, decide, latency_of

WORKLOAD = KEY + ("job.task", "weights.digest", "weights.init_seed", "inputs.digest",
                  "env.hostname")
# Config keys (and everything under them) that never make a variant: the workload's own config and
# where or how a job was kept.
IGNORED = ("seed", "dry_run", "fail_on", "objective", "resume", "artifacts", "profile",
           "model.name", "model.source", "model.weights", "model.revision", "model.init_seed",
           "model.task._target_", "device.name", "device.index", "device.record_env", "device.peak",
           "dtype", "preset.name", "preset.height", "preset.width", "preset.num_frames",
           "preset.batch_size", "preset.steps", "baseline.cache", "baseline.cache_dir",
           "baseline.lock_timeout_s")
# Settings that change how the same workload runs on the device: only jobs differing in these are
# variants of each other; any other differing setting makes another workload.
VARIANT_KEYS = ("model.patches", "model.task.cpu_offload", "model.task.vae",
                "model.task.attention_backend", "model.compile", "device.allow_hf32",
                "device.jit_compile", "device.compile", "device.env", "device.world_size",
                "device.parallel", "device.dist")
# Settings that neither split a workload nor make a variant: the timing budget, what is written.
NEUTRAL = ("bench", "preset.warmup", "preset.iters", "preset.min_iters", "preset.max_iters",
           "preset.min_time_s", "preset.max_time_s", "preset.stability", "compare.visual",
           "compare.csv", "tracking")
# (mirror, source): a mirror (``bench.iters: ${preset.iters}``) is not named when its source differs
# with the same values.
MIRRORS = (("bench.", "preset."), ("compare.layers", "model.compare_layers"))
UNSET = "unset"
NOT_APPLIED = "not applied"
SAME = "no significant difference"


def _under(key: str, names: Sequence[str]) -> bool:
    return any(key == name or key.startswith(name + ".") for name in names)


def settings(row: fmt.Row) -> dict[str, str]:
    """The row's resolved config as ``{dotted key: value text}``, but the :data:`IGNORED` keys."""
    flat = flatten(fmt.json_of(row.get(CONFIG_COLUMN), dict), "", lists=True)
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in flat.items()
            if not _under(k, IGNORED)}


def variant_settings(row: fmt.Row) -> dict[str, str]:
    """The row's settings under a declared variant key (:data:`VARIANT_KEYS`)."""
    return {k: v for k, v in settings(row).items() if _under(k, VARIANT_KEYS)}


def in_force(row: fmt.Row) -> dict[str, str]:
    """:func:`variant_settings` as they ran (a skipped patch: ``not applied``)."""
    found = variant_settings(row)
    entries = fmt.json_of(row.get("patches"), dict).get("device") or []
    skipped = [f"model.patches.{i}" for i, entry in enumerate(entries)
               if isinstance(entry, Mapping) and entry.get("skipped")]
    found = {k: NOT_APPLIED if _under(k, skipped) else v for k, v in found.items()}
    offload = fmt.get(row, "pipeline.cpu_offload")
    if offload is not None and "model.task.cpu_offload" in found:
        found["model.task.cpu_offload"] = json.dumps(bool(offload))
    return found


def workload(row: fmt.Row) -> tuple:
    """A row's workload: :data:`WORKLOAD` and every setting neither variant nor neutral."""
    other = tuple(sorted((k, v) for k, v in settings(row).items()
                         if not _under(k, VARIANT_KEYS + NEUTRAL)))
    return tuple(fmt.get(row, k) for k in WORKLOAD) + other


@dataclass
class Variant:
    """One variant of a workload: its latest record and the values of the keys telling it apart."""

    row: fmt.Row
    values: dict[str, str]

    def label(self, keys: Sequence[str]) -> str:
        """``key=value, ...`` for the differing ``keys`` (``unset`` where the config lacks one)."""
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


def _group(rows: fmt.Rows) -> VariantGroup:
    order = {id(r): i for i, r in enumerate(rows)}
    by_settings = group(rows, lambda r: tuple(sorted(variant_settings(r).items())))
    started = sorted(by_settings.items(),
                     key=lambda item: min((started_key(r), order[id(r)]) for r in item[1]))
    variants = [Variant(latest(members), dict(key)) for key, members in started]
    keys = sorted({k for v in variants for k in v.values})
    column = {k: tuple(v.values.get(k, UNSET) for v in variants) for k in keys}
    differing = [k for k in keys if len(set(column[k])) > 1]
    origins = {k: source + k[len(mirror):] for k in differing for mirror, source in MIRRORS
               if k.startswith(mirror)}
    mirrored = {k for k, origin in origins.items()
                if origin in differing and column[origin] == column[k]}
    return VariantGroup(variants, [k for k in differing if k not in mirrored])


def variant_groups(rows: Iterable[fmt.Row]) -> list[VariantGroup]:
    """Workloads measured in two or more variants, in row order (a repeat keeps its latest)."""
    by_workload = group((r for r in rows if measured(r) and fmt.get(r, "job.model") is not None),
                        workload)
    groups = [_group(members) for members in by_workload.values()]
    return [g for g in groups if len(g.variants) > 1]


def workload_title(row: fmt.Row) -> str:
    """``model (task) on device dtype, preset size, steps, batch, seed, weights ...``."""
    steps = fmt.get(row, "job.steps")
    task = str(fmt.get(row, "job.task") or fmt.MISSING).rsplit(".", 1)[-1]
    model, device, dtype, preset, size, batch, seed, inputs, host = fmt.cells(row, [
        "job.model", "job.device", "job.dtype", "job.preset", "size", "job.batch_size", "job.seed",
        "inputs.digest", "env.hostname"])
    return (f"{model} ({task}) on {device} {dtype}, {preset} {size}"
            + (f", {fmt.num(steps)} steps" if steps is not None else "")
            + f", batch {batch}, seed {seed}, weights {tables.weights_label(row)}, "
            f"inputs {inputs}, machine {host}")


def patches_cell(row: fmt.Row) -> str:
    """What each patch did on the device run (applied, skipped: why; kernels that ran)."""
    try:
        entries = json.loads(row.get("patches") or "{}").get("device") or []
    except (AttributeError, TypeError, json.JSONDecodeError):
        return fmt.MISSING
    found = []
    for entry in (e for e in entries if isinstance(e, Mapping)):
        options = " ".join(f"{k}={v}" for k, v in sorted((entry.get("options") or {}).items())
                           if k != "devices")
        done = f"skipped: {entry['skipped']}" if entry.get("skipped") else "applied"
        kernels = entry.get("kernels")
        ran = ("ran: " + ", ".join(f"{name} x{count}" for name, count in sorted(kernels.items()))
               if isinstance(kernels, Mapping) and kernels else "")
        found.append(" ".join(p for p in (str(entry.get("name")), options, done, ran) if p))
    return "; ".join(found) if found else "none"


def shift(base: fmt.Row, row: fmt.Row, rule: LatencyRule | None = None
          ) -> tuple[float, str, str] | None:
    """(ratio, answer, evidence) of ``row``'s median latency over ``base``'s by the gate's rule."""
    old, new = latency_of(base), latency_of(row)
    if old is None or new is None or not old.median_ms:
        return None
    rule = rule or LatencyRule()
    slower, faster = decide(old, new, rule), decide(new, old, rule)
    ratio = new.median_ms / old.median_ms
    if slower.method == MEDIANS:
        return ratio, "untested", slower.why.split("; ", 1)[-1]
    if faster.regressed:
        return ratio, "faster", faster.effect
    return ratio, "slower" if slower.regressed else SAME, slower.effect


def shift_cell(base: fmt.Row, row: fmt.Row, rule: LatencyRule | None = None,
               lang: str = "en") -> str:
    """:func:`shift` in ``lang``: ``2.41x slower (`evidence`)``, ``no significant difference``."""
    if (found := shift(base, row, rule)) is None:
        return fmt.MISSING
    ratio, answer, evidence = found
    return fmt.word(f"shift_{answer.replace(' ', '_')}", lang, ratio=fmt.times(ratio),
                    evidence=fmt.log_text(evidence))


def ratio_cell(group: VariantGroup, variant: Variant, rule: LatencyRule | None = None) -> str:
    """The latency ratio to the baseline with the gate's answer (:func:`shift_cell`)."""
    if variant is group.baseline:
        return "1x (baseline)" if fmt.latency(variant.row) else "baseline (no latency)"
    return shift_cell(group.baseline.row, variant.row, rule)


def variants_section(rows: fmt.Rows, show: Sequence[str], base_dir: Path,
                     rule: LatencyRule | None = None) -> str:
    """One table per workload measured in several variants, or why there is none."""
    groups = variant_groups(rows)
    if not groups:
        return ("No A/B variants: no two jobs of one workload (model, task, device, dtype, "
                "preset sizes, batch, seed, weights, inputs, machine) differ in a setting. Sweep "
                "one, e.g. `+sweep=attention_backends`.")
    parts = []
    for g in groups:
        members = [v.row for v in g.variants]
        names = tables.metric_names(members, show)
        hid_headers, hid_cells = tables.hidden_columns(members)
        headers = ["variant", "device patches", *names, *hid_headers, "verdict", "median ms",
                   "latency / baseline", "record"]
        body = [[v.label(g.keys), patches_cell(v.row),
                 *(tables.metric_cell(v.row, n) for n in names), *hid_cells(v.row),
                 tables.verdict_cell(v.row), latency_cell(v.row), ratio_cell(g, v, rule),
                 fmt.record_link(v.row, base_dir)] for v in g.variants]
        differ = ", ".join(f"`{k}`" for k in g.keys)
        parts.append(f"### {workload_title(members[0])}\n\nVariants differ in: {differ}\n\n"
                     + fmt.table(headers, body, tables.rules_notes(members, names)))
    notes = [*(fmt.word(k, "en") for k in ("ab_ratio_note", "ab_patches_note", "ab_latest_note")),
             tables.RANDOM_LEGEND if any(tables.random_init(v.row) for g in groups
                                         for v in g.variants) else None]
    return "\n\n".join(parts) + "\n\n" + fmt.bullets(notes)
