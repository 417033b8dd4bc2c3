"""Cross-field rules of the configuration, and the one check a job runs before it does anything.

The schemas (:mod:`ascendbench.config.schemas`) reject wrong types and unknown enum values at compose
time. What a type cannot say is checked here, on the composed config:

* the timing budget as ``bench.*`` reads it: ``max_iters >= min_iters``, ``min_time_s <= max_time_s`` ...;
* sizes of at least 1, tolerances and limits of at least 0, threshold rules with one numeric bound;
* ``compare.layers`` / ``compare.visual`` shapes, ``dtype.by_device``, ``device.order``;
* ``model.weights=required`` without ``model.source``, ``model.patches`` names and options;
* the keys no schema types, against the shipped files (:mod:`ascendbench.config.typecheck`);
* every ``_target_`` imports and its keys bind (:mod:`ascendbench.config.targets`).

:func:`check_config` raises one :class:`~ascendbench.errors.ConfigError` listing every problem; the dry run
and the real job call it, ``python -m ascendbench.validate`` runs :func:`config_problems` on every option.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from omegaconf import DictConfig, ListConfig, OmegaConf

from ascendbench.config.schemas import FRAME_WORDS
from ascendbench.config.targets import bind_problem, one_line, target_nodes
from ascendbench.config.typecheck import type_problems
from ascendbench.errors import AscendBenchError, ConfigError

# (key, lower bound, bound allowed too, what is allowed); a null value is left to the schema.
BOUNDS: tuple[tuple[str, float, bool, str], ...] = (
    ("preset.height", 1, True, "an integer >= 1"),
    ("preset.width", 1, True, "an integer >= 1"),
    ("preset.num_frames", 1, True, "an integer >= 1"),
    ("preset.batch_size", 1, True, "an integer >= 1"),
    ("preset.steps", 1, True, "an integer >= 1"),
    ("dtype.atol", 0, True, "a tolerance >= 0"),
    ("dtype.rtol", 0, True, "a tolerance >= 0"),
    ("dtype.small_value", 0, True, "a magnitude >= 0"),
    ("dtype.small_value_atol", 0, True, "a tolerance >= 0"),
    ("bench.noise_threshold", 0, False, "a ratio > 0 (e.g. 0.10)"),
    ("baseline.lock_timeout_s", 0, False, "seconds > 0"),
    ("compare.max_capture_mb", 0, True, "megabytes >= 0"),
    ("compare.divergence.input_max_rel_err", 0, False, "a relative error > 0"),
    ("compare.divergence.output_min_rel_err", 0, False, "a relative error > 0"),
    ("compare.visual.max_images", 0, True, "an integer >= 0"),
    ("artifacts.max_tensor_mb", 0, True, "megabytes >= 0"),
    ("device.index", 0, True, "a card index >= 0"),
    ("device.threads", 1, True, "a thread count >= 1, or null (torch's default)"),
    ("model.codebook_size", 1, True, "a codebook size >= 1, or null"),
)
# The per-module statistics of compare.layers=all (ascendbench.compare.hooks.tensor_stats).
LAYER_STATISTICS = ("max", "min", "mean", "l2norm")
DEVICE_TYPES = ("cpu", "cuda", "npu")


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) else float(value)


def _show(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value


def _not_allowed(key: str, value: Any, allowed: str) -> str:
    return f"{key}={_show(value)!r} is not allowed: it must be {allowed}"


def bound_problems(cfg: DictConfig) -> list[str]:
    """Sizes, tolerances and limits outside their range (:data:`BOUNDS`)."""
    problems = []
    for key, low, inclusive, allowed in BOUNDS:
        value = _number(OmegaConf.select(cfg, key, default=None))
        if value is not None and (value < low or (value == low and not inclusive)):
            problems.append(_not_allowed(key, OmegaConf.select(cfg, key), allowed))
    return problems


def _source_key(bench: DictConfig, key: str) -> str:
    """``preset.<key>`` when ``bench.<key>`` is the shipped ``${preset.<key>}``, else ``bench.<key>``."""
    raw = bench._get_node(key)._value() if key in bench else None  # the unresolved value
    return f"preset.{key}" if raw == "${preset." + key + "}" else f"bench.{key}"


def budget_problems(cfg: DictConfig) -> list[str]:
    """The timing budget as the bench loop reads it (``bench.*``, by default the preset's values)."""
    bench = cfg.get("bench")
    if not isinstance(bench, DictConfig):
        return []
    keys = ("warmup", "iters", "min_iters", "max_iters", "min_time_s", "max_time_s", "precision")
    value = {key: _number(bench.get(key)) for key in keys}
    name = {key: _source_key(bench, key) for key in keys}
    rules = [("warmup", value["warmup"] is None or value["warmup"] >= 0, "an integer >= 0"),
             ("precision", value["precision"] is None or 0 < value["precision"] < 1,
              "a ratio > 0 and < 1 (e.g. 0.01: the median's 95% CI within 1%), or null to stop as soon as "
              "the minimums are met"),
             ("max_time_s", value["max_time_s"] is None or value["max_time_s"] > 0, "seconds > 0")]
    if value["iters"] is not None:  # iters fixes the count: min/max iters and min_time_s are not used
        rules.append(("iters", value["iters"] >= 1, "an integer >= 1, or null (adaptive)"))
    elif None not in (value["min_iters"], value["max_iters"], value["min_time_s"], value["max_time_s"]):
        rules += [("min_iters", value["min_iters"] >= 1, "an integer >= 1"),
                  ("max_iters", value["max_iters"] >= value["min_iters"],
                   f"an integer >= {name['min_iters']} ({bench.min_iters})"),
                  ("min_time_s", 0 <= value["min_time_s"] <= value["max_time_s"],
                   f"seconds >= 0 and <= {name['max_time_s']} ({bench.max_time_s})")]
    return [_not_allowed(name[key], bench.get(key), allowed) for key, ok, allowed in rules if not ok]


def _rule_tables(cfg: DictConfig) -> Iterator[tuple[str, Any]]:
    """Every ``thresholds`` table of the job: dtype, model, metric, its evaluators, compare."""
    for key in ("dtype.thresholds", "model.thresholds", "metric.thresholds"):
        yield key, OmegaConf.select(cfg, key, default=None)
    evaluators = OmegaConf.select(cfg, "metric.evaluators", default=None)
    for name, evaluator in (evaluators.items() if isinstance(evaluators, DictConfig) else []):
        if isinstance(evaluator, DictConfig):
            yield f"metric.evaluators.{name}.thresholds", evaluator.get("thresholds")
    yield "compare.thresholds", OmegaConf.select(cfg, "compare.thresholds", default=None)


def threshold_problems(cfg: DictConfig) -> list[str]:
    """Verdict rules that are not ``{max|min: number, warn?: number, source?: text}``."""
    from ascendbench.metrics.verdict import check_rule

    problems = []
    for where, table in _rule_tables(cfg):
        if table is None:
            continue
        if not isinstance(table, DictConfig):
            problems.append(_not_allowed(where, table, "a mapping metric name -> rule, e.g. {cosine: {min: 0.99}}"))
            continue
        for metric, rule in table.items():
            if not isinstance(rule, DictConfig):
                problems.append(_not_allowed(f"{where}.{metric}", rule, "a rule such as {max: 0.01, source: ...}"))
                continue
            try:
                check_rule(str(metric), rule)
            except ConfigError as exc:
                problems.append(f"{where}.{metric}: {exc}")
    return problems


def compare_problems(cfg: DictConfig) -> list[str]:
    """``compare.layers``, the divergence statistics, the frames and value range of the pictures."""
    problems = []
    layers = OmegaConf.select(cfg, "compare.layers", default=None)
    if not (layers is None or isinstance(layers, str) or
            (isinstance(layers, ListConfig) and all(isinstance(p, str) for p in layers))):
        problems.append(_not_allowed("compare.layers", layers, "null, all, or a list of module name patterns "
                                     "such as '[decoder.mid_block,decoder.up_blocks.*]'"))
    statistics = OmegaConf.select(cfg, "compare.divergence.statistics", default=None)
    if statistics is not None and (not statistics or set(statistics) - set(LAYER_STATISTICS)):
        problems.append(_not_allowed("compare.divergence.statistics", statistics,
                                     f"a non-empty list of {', '.join(LAYER_STATISTICS)}"))
    frames = OmegaConf.select(cfg, "compare.visual.frames", default=None) or []
    if any(not (f in FRAME_WORDS or (isinstance(f, int) and not isinstance(f, bool))) for f in frames):
        problems.append(_not_allowed("compare.visual.frames", frames,
                                     f"a list of {', '.join(FRAME_WORDS)} and frame indices"))
    value_range = OmegaConf.select(cfg, "compare.visual.value_range", default=None)
    if value_range is not None and (len(value_range) != 2 or not value_range[0] < value_range[1]):
        problems.append(_not_allowed("compare.visual.value_range", value_range, "[low, high] with low < high"))
    return problems


def device_problems(cfg: DictConfig) -> list[str]:
    """``device.order`` of device=auto and ``dtype.by_device`` of dtype=auto."""
    problems = []
    order = OmegaConf.select(cfg, "device.order", default=None)
    if order is not None and (not order or len(set(order)) != len(order)):
        problems.append(_not_allowed("device.order", order, f"a non-empty list of distinct {', '.join(DEVICE_TYPES)}"))
    by_device = OmegaConf.select(cfg, "dtype.by_device", default=None)
    if by_device is not None and ([t for t in DEVICE_TYPES if t not in by_device] or "auto" in by_device.values()):
        problems.append(_not_allowed("dtype.by_device", by_device,
                                     f"a dtype (float32, float16, bfloat16) for each of {', '.join(DEVICE_TYPES)}"))
    return problems


def model_problems(cfg: DictConfig) -> list[str]:
    """``model.weights=required`` without a source, a saved reference in a performance-only run, unknown patches
    or patch options."""
    from ascendbench.patches.registry import build_patch, parse_specs

    problems = []
    if OmegaConf.select(cfg, "model.weights") == "required" and OmegaConf.select(cfg, "model.source") is None:
        problems.append("model.weights=required needs model.source (a local directory, a .safetensors file or a "
                        "hub id), e.g. `model.source=/path/to/weights`; or use model.weights=auto")
    if OmegaConf.select(cfg, "baseline.source") is not None and OmegaConf.select(cfg, "baseline.enabled") is False:
        problems.append("baseline.source is set but baseline.enabled=false: a performance-only run compares "
                        "nothing, so the saved reference would be ignored; drop baseline.enabled=false to judge "
                        "against it, or drop baseline.source")
    try:
        for spec in parse_specs(OmegaConf.select(cfg, "model.patches", default=None)):
            build_patch(spec)
    except AscendBenchError as exc:
        problems.append(str(exc))
    return problems


def key_problems(cfg: DictConfig) -> list[str]:
    """``baseline.key_ignore_preset`` naming keys the preset does not have (a typo would re-key the cache)."""
    ignored = OmegaConf.select(cfg, "baseline.key_ignore_preset", default=None) or []
    preset = cfg.get("preset")
    unknown = [key for key in ignored if isinstance(preset, DictConfig) and key not in preset]
    return [_not_allowed("baseline.key_ignore_preset", ignored, f"preset keys; {unknown} are not")] if unknown else []


AB_AGAINST = ("unpatched",)  # ``bench.ab``: what the device run is timed against, interleaved (ascendbench.job.ab)
AB_FIX = ("set `bench.ab=null` (no A/B), or name the patches to time against none, e.g. "
          "`bench.ab=unpatched model.patches=[flex_attention_dense]`")


def ab_problems(cfg: DictConfig) -> list[str]:
    """``bench.ab`` other than null or unpatched, or unpatched with nothing to time against (no patches, a
    multi-rank run, ``bench.enabled=false``)."""
    value = OmegaConf.select(cfg, "bench.ab", default=None)
    if value is None:
        return []
    if value not in AB_AGAINST:
        return [_not_allowed("bench.ab", value, f"null or {', '.join(AB_AGAINST)} (time the model with its "
                             "model.patches against it without them, interleaved in one run); " + AB_FIX)]
    if not OmegaConf.select(cfg, "model.patches", default=None):
        return [f"bench.ab={value} times the model with its model.patches against it without them, but "
                f"model.patches is empty: there is nothing to compare; {AB_FIX}"]
    if (OmegaConf.select(cfg, "device.world_size", default=1) or 1) > 1:
        return [f"bench.ab={value} runs on one device only, not with device.world_size > 1; {AB_FIX}"]
    if OmegaConf.select(cfg, "bench.enabled", default=True) is False:
        return [f"bench.ab={value} needs the timing loop, but bench.enabled=false; drop bench.enabled=false, or "
                + AB_FIX]
    return []


SEED_KEYS = ("seed", "model.init_seed")
SEED_MAX = 2**63 - 1  # torch, numpy and the generators a task may seed all take a signed 64-bit integer


def seed_problems(cfg: DictConfig) -> list[str]:
    """Seeds outside ``[0, 2**63 - 1]`` (torch would fail with "Overflow when unpacking long long")."""
    problems = []
    for key in SEED_KEYS:
        value = OmegaConf.select(cfg, key, default=None)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= SEED_MAX:
            problems.append(_not_allowed(key, value, f"an integer from 0 to {SEED_MAX} (2**63 - 1), e.g. 42"))
    return problems


RULES: tuple[Callable[[DictConfig], list[str]], ...] = (
    bound_problems, budget_problems, threshold_problems, compare_problems, device_problems, model_problems,
    key_problems, seed_problems, ab_problems,
)


def _job_part(cfg: DictConfig) -> DictConfig:
    """The config without its ``hydra`` node (what a job receives)."""
    return OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]) if "hydra" in cfg else cfg


def _hydra_choices() -> dict[str, Any] | None:
    from hydra.core.hydra_config import HydraConfig

    return OmegaConf.to_container(HydraConfig.get().runtime.choices) if HydraConfig.initialized() else None


def config_problems(cfg: DictConfig, choices: Mapping[str, Any] | None = None, root: Path | None = None) -> list[str]:
    """Every problem the job would reject from this config alone, one clause each (empty: none).

    Args:
        cfg: the composed config (with or without its ``hydra`` node).
        choices: Hydra's ``runtime.choices`` (group -> option) for the check of the untyped keys against
            the shipped files; default: those of the running Hydra job, if any.
        root: the config tree the options come from (default: the shipped one).
    """
    job = _job_part(cfg)
    try:
        OmegaConf.to_container(job, resolve=True)
    except Exception as exc:  # InterpolationResolutionError and friends: nothing else can be read
        return [f"the config does not resolve: {one_line(exc)}"]
    problems = type_problems(job, choices if choices is not None else _hydra_choices(), root)
    for rule in RULES:
        problems += rule(job)
    problems += [problem for path, node in target_nodes(job) if (problem := bind_problem(path, node))]
    return list(dict.fromkeys(problems))


def check_config(cfg: DictConfig, choices: Mapping[str, Any] | None = None) -> None:
    """Raise one :class:`ConfigError` listing every problem of :func:`config_problems` (nothing: return).

    The job calls it first, in the dry run and the real run alike, before anything is loaded.
    """
    problems = config_problems(cfg, choices)
    if not problems:
        return
    example = problems[0].split("=", 1)[0].split(":", 1)[0].split(" ", 1)[0]
    raise ConfigError(
        f"the configuration cannot run, {len(problems)} problem(s): {'; '.join(problems)}. Set each key to an "
        f"allowed value on the command line or in its YAML file (e.g. `{example}=...`); `--cfg job` prints the "
        "composed config and `python -m ascendbench.validate` checks every shipped option."
    )


__all__ = ["BOUNDS", "RULES", "check_config", "config_problems"]
