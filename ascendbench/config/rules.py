"""What a schema type cannot say, checked on the composed config before a job, all at once."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, ListConfig, OmegaConf

from ascendbench.config import config_dir, option_file, plain
from ascendbench.config.schemas import FRAME_WORDS
from ascendbench.config.targets import bind_problem, one_line, target_nodes, target_problems
from ascendbench.digits import number
from ascendbench.errors import AscendBenchError, ConfigError
from ascendbench.metrics.verdict import check_rule
from ascendbench.patches.registry import build_patch, parse_specs

# (key, lower bound, bound allowed too, what is allowed); a null value is left to the schema.
BOUNDS: tuple[tuple[str, float, bool, str], ...] = (
    *((f"preset.{key}", 1, True, "an integer >= 1")
      for key in ("height", "width", "num_frames", "batch_size", "steps")),
    *((f"dtype.{key}", 0, True, "a tolerance >= 0")
      for key in ("atol", "rtol", "small_value_atol", "small_value_bound")),
    ("dtype.small_value", 0, True, "a magnitude >= 0"),
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
LAYER_STATISTICS = ("max", "min", "mean", "l2norm")  # of compare.layers=all (compare.hooks)
DEVICE_TYPES = ("cpu", "cuda", "npu")
AB_FIX = ("set `bench.ab=null` (no A/B), or name the patches to time against none, e.g. "
          "`bench.ab=unpatched model.patches=[flex_attention_dense]`")
SEED_MAX = 2**63 - 1  # torch, numpy and the task generators take a signed 64-bit seed


def _select(cfg: DictConfig, key: str) -> Any:
    return OmegaConf.select(cfg, key, default=None)


def _not_allowed(key: str, value: Any, allowed: str) -> str:
    return f"{key}={plain(value)!r} is not allowed: it must be {allowed}"


def bound_problems(cfg: DictConfig) -> list[str]:
    """Sizes, tolerances and limits outside their range (:data:`BOUNDS`)."""
    return [_not_allowed(key, _select(cfg, key), allowed)
            for key, low, inclusive, allowed in BOUNDS
            if (value := number(_select(cfg, key))) is not None
            and (value < low or (value == low and not inclusive))]


def budget_problems(cfg: DictConfig) -> list[str]:
    """The timing budget as the bench loop reads it (``bench.*``, by default the preset's)."""
    bench = cfg.get("bench")
    if not isinstance(bench, DictConfig):
        return []
    keys = ("warmup", "iters", "min_iters", "max_iters", "min_time_s", "max_time_s", "precision")
    value = {key: number(bench.get(key)) for key in keys}
    raw = {key: bench._get_node(key)._value() if key in bench else None for key in keys}
    # ``preset.<key>`` while ``bench.<key>`` is the shipped (unresolved) ``${preset.<key>}``
    name = {key: f"preset.{key}" if raw[key] == "${preset." + key + "}" else f"bench.{key}"
            for key in keys}
    rules = [("warmup", value["warmup"] is None or value["warmup"] >= 0, "an integer >= 0"),
             ("precision", value["precision"] is None or 0 < value["precision"] < 1,
              "a ratio > 0 and < 1 (e.g. 0.01: the median's 95% CI within 1%), or null to stop "
              "as soon as the minimums are met"),
             ("max_time_s", value["max_time_s"] is None or value["max_time_s"] > 0, "seconds > 0")]
    if value["iters"] is not None:  # iters fixes the count: min/max iters, min_time_s unused
        rules.append(("iters", value["iters"] >= 1, "an integer >= 1, or null (adaptive)"))
    elif None not in (value["min_iters"], value["max_iters"], value["min_time_s"],
                      value["max_time_s"]):
        rules += [("min_iters", value["min_iters"] >= 1, "an integer >= 1"),
                  ("max_iters", value["max_iters"] >= value["min_iters"],
                   f"an integer >= {name['min_iters']} ({bench.min_iters})"),
                  ("min_time_s", 0 <= value["min_time_s"] <= value["max_time_s"],
                   f"seconds >= 0 and <= {name['max_time_s']} ({bench.max_time_s})")]
    return [_not_allowed(name[key], bench.get(key), allowed)
            for key, ok, allowed in rules if not ok]


def _rule_tables(cfg: DictConfig) -> Iterator[tuple[str, Any]]:
    for key in ("dtype.thresholds", "model.thresholds", "metric.thresholds"):
        yield key, _select(cfg, key)
    evaluators = _select(cfg, "metric.evaluators")
    for name, evaluator in (evaluators.items() if isinstance(evaluators, DictConfig) else []):
        if isinstance(evaluator, DictConfig):
            yield f"metric.evaluators.{name}.thresholds", evaluator.get("thresholds")
    yield "compare.thresholds", _select(cfg, "compare.thresholds")


def threshold_problems(cfg: DictConfig) -> list[str]:
    """Verdict rules that are not ``{max|min: number, warn?: number, source?: text}``."""
    problems = []
    for where, table in _rule_tables(cfg):
        if table is not None and not isinstance(table, DictConfig):
            problems.append(_not_allowed(where, table, "a mapping metric name -> rule, e.g. "
                                         "{cosine: {min: 0.99}}"))
        for metric, rule in table.items() if isinstance(table, DictConfig) else ():
            if not isinstance(rule, DictConfig):
                problems.append(_not_allowed(f"{where}.{metric}", rule,
                                             "a rule such as {max: 0.01, source: ...}"))
                continue
            try:
                check_rule(str(metric), rule)
            except ConfigError as exc:
                problems.append(f"{where}.{metric}: {exc}")
    return problems


def compare_problems(cfg: DictConfig) -> list[str]:
    """``compare.layers``, the divergence statistics, the frames and value range of the pictures."""
    problems = []
    layers = _select(cfg, "compare.layers")
    if not (layers is None or isinstance(layers, str) or (
            isinstance(layers, ListConfig) and all(isinstance(p, str) for p in layers))):
        problems.append(_not_allowed("compare.layers", layers, "null, all, or a list of module "
                                     "name patterns such as '[decoder.mid_block,decoder.*]'"))
    statistics = _select(cfg, "compare.divergence.statistics")
    if statistics is not None and (not statistics or set(statistics) - set(LAYER_STATISTICS)):
        problems.append(_not_allowed("compare.divergence.statistics", statistics,
                                     f"a non-empty list of {', '.join(LAYER_STATISTICS)}"))
    frames = _select(cfg, "compare.visual.frames") or []
    if any(not (f in FRAME_WORDS or (isinstance(f, int) and not isinstance(f, bool)))
           for f in frames):
        problems.append(_not_allowed("compare.visual.frames", frames,
                                     f"a list of {', '.join(FRAME_WORDS)} and frame indices"))
    value_range = _select(cfg, "compare.visual.value_range")
    if value_range is not None and (len(value_range) != 2 or not value_range[0] < value_range[1]):
        problems.append(_not_allowed("compare.visual.value_range", value_range,
                                     "[low, high] with low < high"))
    return problems


def device_problems(cfg: DictConfig) -> list[str]:
    """``device.order`` of device=auto, ``dtype.by_device`` of dtype=auto, ranks without a mode."""
    problems = []
    order = _select(cfg, "device.order")
    if order is not None and (not order or len(set(order)) != len(order)):
        problems.append(_not_allowed("device.order", order,
                                     f"a non-empty list of distinct {', '.join(DEVICE_TYPES)}"))
    by_device = _select(cfg, "dtype.by_device")
    if by_device is not None and ([t for t in DEVICE_TYPES if t not in by_device]
                                  or "auto" in by_device.values()):
        problems.append(_not_allowed("dtype.by_device", by_device, "a dtype (float32, float16, "
                                     f"bfloat16) for each of {', '.join(DEVICE_TYPES)}"))
    world = _select(cfg, "device.world_size")
    if isinstance(world, int) and world > 1 and _select(cfg, "device.parallel") in (None, "none"):
        problems.append(f"device.world_size={world} needs a parallel mode saying what the ranks "
                        "share (device.parallel: cfg, device_map or context), e.g. "
                        "`device.parallel=cfg`")
    return problems


def model_problems(cfg: DictConfig) -> list[str]:
    """Model weights, ``baseline.source``, patches and ``baseline.key_ignore_preset``."""
    problems = []
    if _select(cfg, "model.weights") == "required" and _select(cfg, "model.source") is None:
        problems.append("model.weights=required needs model.source (a local directory, a "
                        ".safetensors file or a hub id), e.g. `model.source=/path/to/weights`; or "
                        "use model.weights=auto")
    if _select(cfg, "baseline.source") is not None and _select(cfg, "baseline.enabled") is False:
        problems.append("baseline.source is set but baseline.enabled=false: a performance-only "
                        "run compares nothing, so the saved reference would be ignored; drop "
                        "baseline.enabled=false to judge against it, or drop baseline.source")
    try:
        for spec in parse_specs(_select(cfg, "model.patches")):
            build_patch(spec)
    except AscendBenchError as exc:
        problems.append(str(exc))
    ignored = _select(cfg, "baseline.key_ignore_preset") or []
    preset = cfg.get("preset")
    unknown = [key for key in ignored if isinstance(preset, DictConfig) and key not in preset]
    if unknown:  # a typo would re-key the reference cache
        problems.append(_not_allowed("baseline.key_ignore_preset", ignored,
                                     f"preset keys; {unknown} are not"))
    return problems


def ab_problems(cfg: DictConfig) -> list[str]:
    """``bench.ab`` other than null or unpatched, or unpatched with nothing to time against."""
    value = _select(cfg, "bench.ab")
    if value is None:
        return []
    if value != "unpatched":
        return [_not_allowed("bench.ab", value, "null or unpatched (time the model with its "
                             "model.patches against it without them, interleaved in one run); "
                             + AB_FIX)]
    if not _select(cfg, "model.patches"):
        return [f"bench.ab={value} times the model with its model.patches against it without "
                f"them, but model.patches is empty: there is nothing to compare; {AB_FIX}"]
    if (_select(cfg, "device.world_size") or 1) > 1:
        return [f"bench.ab={value} runs on one device only, not with device.world_size > 1; "
                + AB_FIX]
    if _select(cfg, "bench.enabled") is False:
        return [f"bench.ab={value} needs the timing loop, but bench.enabled=false; drop "
                "bench.enabled=false, or " + AB_FIX]
    return []


def seed_problems(cfg: DictConfig) -> list[str]:
    """Seeds outside ``[0, 2**63 - 1]`` (torch: "Overflow when unpacking long long")."""
    seeds = {key: _select(cfg, key) for key in ("seed", "model.init_seed")}
    return [_not_allowed(key, seed, f"an integer from 0 to {SEED_MAX} (2**63 - 1), e.g. 42")
            for key, seed in seeds.items()
            if isinstance(seed, int) and not isinstance(seed, bool) and not 0 <= seed <= SEED_MAX]


_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", list: "a list",
               dict: "a mapping"}
_PURE_REFERENCE = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


def _fits(value: Any, kind: type) -> bool:
    if kind in (int, float) and isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, {list: (list, ListConfig), dict: (dict, DictConfig)}.get(kind, kind))


def _leaves(node: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for key, value in node.items() if isinstance(node, dict) else ():
        if key != "defaults":
            dotted = f"{prefix}.{key}" if prefix else str(key)
            yield dotted, value
            yield from _leaves(value, dotted)


def shipped_values(choices: Mapping[str, Any], roots: list[Path],
                   config_name: str = "config") -> Iterator[tuple[str, Any, str]]:
    """(dotted key, shipped value, file) of the primary config and each chosen option file."""
    files = [("", f"{config_name}.yaml")] + [
        (group.replace("/", "."), f"{group}/{option}.yaml")
        for group, option in choices.items() if option and not group.startswith("hydra/")]
    for package, name in files:
        root = next((root for root in roots if (root / name).is_file()), None)
        path = root / name if root else None
        placed, content = option_file(path) if path else (False, None)
        if placed or not isinstance(content, dict):
            continue  # plugin options, and files that place themselves elsewhere (_global_)
        content = {k: v for k, v in content.items() if k != "hydra"}
        for key, value in _leaves(content, package):
            yield key, value, f"{root.name}/{name}"


def is_typed(cfg: DictConfig, key: str) -> bool:
    """Whether a schema types ``key`` (its node has a declared type), so that Hydra checks it."""
    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key, default=None) if parent_key else cfg
    if not isinstance(parent, DictConfig):
        return False
    node = parent._get_node(leaf, validate_access=False)  # OmegaConf has no public accessor
    return node is not None and node._metadata.ref_type is not Any


def _plain(resolved: Any, key: str) -> Any:  # a dotted key of resolved containers, else None
    for part in key.split("."):
        resolved = resolved.get(part) if isinstance(resolved, dict) else None
    return None if resolved == "???" else resolved  # MISSING: not set, as OmegaConf.select says


def type_problems(cfg: DictConfig, choices: Mapping[str, Any] | None,
                  roots: list[Path], resolved: Any = None) -> list[str]:
    """Untyped keys whose value's type differs from the option file's (``model.task.x=abc``);
    values read from ``resolved`` (the config's containers, resolved once) where given."""
    problems = []
    select = (partial(_plain, resolved) if resolved is not None else partial(
        OmegaConf.select, cfg, default=None, throw_on_resolution_failure=False))
    for key, shipped, where in shipped_values(dict(choices or {}), roots):
        if isinstance(shipped, str) and (match := _PURE_REFERENCE.match(shipped)):
            shipped = select(match.group(1))
        kind = next((k for k in (bool, int, float, list, dict) if isinstance(shipped, k)), None)
        if kind is None:  # anything goes (null, a string)
            continue
        value = select(key)  # a typed key is Hydra's to check (asked last: it is the slow part)
        if value is not None and not _fits(value, kind) and not is_typed(cfg, key):
            if isinstance(value, (DictConfig, ListConfig)):
                value = OmegaConf.to_container(value)
            problems.append(f"{key}={value!r} must be {_TYPE_NAMES[kind]} "
                            f"({where} has {shipped!r})")
    return problems


RULES: tuple[Callable[[DictConfig], list[str]], ...] = (
    bound_problems, budget_problems, threshold_problems, compare_problems, device_problems,
    model_problems, seed_problems, ab_problems)


def job_part(cfg: DictConfig) -> DictConfig:
    """The config without its ``hydra`` node (what a job receives)."""
    return OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]) if "hydra" in cfg else cfg


def config_problems(cfg: DictConfig, choices: Mapping[str, Any] | None = None,
                    folders: list[Path] | None = None) -> list[str]:
    """Every problem the job would reject from this config alone (defaults: the running job's)."""
    job = job_part(cfg)
    try:  # once: every check below reads the resolved values
        resolved, unresolved = OmegaConf.to_container(job, resolve=True), None
    except Exception as exc:  # InterpolationResolutionError and friends: nothing else can be read
        resolved, unresolved = None, exc
    problems = target_problems(job, resolved=resolved)[0]  # loaders of pickles: refused anywhere
    if unresolved is not None:
        return [*problems, f"the config does not resolve: {one_line(unresolved)}"]
    running, running_folders = None, []  # the running Hydra job's choices and folders, if any
    if choices is None and HydraConfig.initialized():
        hydra_run = HydraConfig.get().runtime
        running = OmegaConf.to_container(hydra_run.choices)
        running_folders = [Path(s.path) for s in hydra_run.config_sources if s.schema == "file"]
    roots = [config_dir(), *(running_folders if folders is None else folders)]
    problems += type_problems(job, choices if choices is not None else running, roots, resolved)
    problems += [problem for rule in RULES for problem in rule(job)]
    problems += [p for path, node in target_nodes(resolved) if (p := bind_problem(path, node))]
    return list(dict.fromkeys(problems))


def check_config(cfg: DictConfig, choices: Mapping[str, Any] | None = None) -> None:
    """One :class:`ConfigError` listing every problem of :func:`config_problems`."""
    problems = config_problems(cfg, choices)
    if not problems:
        return
    keys = [m.group(1) for p in problems if (m := re.match(r"([\w/]+(?:\.[\w/]+)+)[=: ]", p))]
    example = f" (e.g. `{keys[0]}=...`)" if keys else ""
    raise ConfigError(
        f"the configuration cannot run, {len(problems)} problem(s): {'; '.join(problems)}. Set "
        f"each key to an allowed value on the command line or in its YAML file{example}; `--cfg "
        "job` prints the composed config and `python -m ascendbench.validate` checks every "
        "shipped option.")
