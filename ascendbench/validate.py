"""``python -m ascendbench.validate`` (``make validate``): the whole config tree, checked without
loading a model.

* every option of every config group composes (with the defaults around it) and resolves;
* every ``_target_`` imports and its keys bind to the target's signature
  (``inspect.signature(target).bind(**keys)``; nothing is instantiated);
* safety defaults: no shipped config sets ``trust_remote_code`` or ``allow_pickle`` to true
  (those must come from the user's command line).

All problems are collected and listed at once; the exit code is 1 when there is any.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, ListConfig, OmegaConf

from ascendbench.confdir import config_dir

# Keys of a `_target_` node that instantiate() consumes itself.
HYDRA_KEYS = {"_target_", "_recursive_", "_convert_", "_partial_", "_args_"}
# Keys that must never be switched on by a shipped config (only by the user, explicitly).
UNSAFE_TRUE_KEYS = ("trust_remote_code", "allow_pickle")


@dataclass
class Report:
    """What was checked and every problem found."""

    composed: list[str] = field(default_factory=list)
    targets: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def config_groups(root: Path) -> dict[str, list[str]]:
    """``group -> options`` for every directory of ``root`` holding ``*.yaml`` files (nested: ``hydra/help``)."""
    groups = {}
    for directory in sorted(p for p in root.rglob("*") if p.is_dir()):
        options = sorted(p.stem for p in directory.glob("*.yaml"))
        if options:
            groups[directory.relative_to(root).as_posix()] = options
    return groups


def option_overrides(group: str, option: str, in_tree: set[str]) -> list[str]:
    """Overrides that may select ``option`` of ``group``, the likeliest first.

    A group already in the defaults tree (``hydra.runtime.choices``, nested ones such as
    ``device/peak`` included) is overridden plainly; any other is appended with ``+``.
    """
    plain, append = f"{group}={option}", f"+{group}={option}"
    return [plain, append] if group in in_tree or group.startswith("hydra/") else [append, plain]


def target_nodes(node: Any, path: str = "") -> Iterator[tuple[str, DictConfig]]:
    """Every ``(dotted path, node)`` carrying a ``_target_``, depth first."""
    if isinstance(node, (DictConfig, ListConfig)) and (node._is_none() or node._is_missing()):
        return
    if isinstance(node, DictConfig):
        if "_target_" in node:
            yield path or "<root>", node
        for key in node:
            child = node._get_node(key)
            yield from target_nodes(child if isinstance(child, (DictConfig, ListConfig)) else None,
                                    f"{path}.{key}" if path else str(key))
    elif isinstance(node, ListConfig):
        for index, item in enumerate(node):
            yield from target_nodes(item, f"{path}[{index}]")


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: " + " ".join(str(exc).split())


def bind_problem(path: str, node: DictConfig) -> str | None:
    """Why ``node`` would not instantiate (import or signature), or ``None``."""
    from hydra._internal.utils import _locate  # what instantiate() uses, without its error logging

    target = node["_target_"]
    try:
        obj = _locate(target)
    except Exception as exc:  # ImportError, AttributeError...
        return f"{path}._target_={target!r} cannot be imported: {_one_line(exc)}"
    kwargs = {str(k): None for k in node if k not in HYDRA_KEYS}
    args = list(node.get("_args_") or [])
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None  # builtins without a signature: nothing to check
    binder = signature.bind_partial if node.get("_partial_", False) else signature.bind
    try:
        binder(*args, **kwargs)
    except TypeError as exc:
        return (f"{path}: keys {sorted(kwargs)} do not bind to {target}{signature}: {exc}. "
                "Rename or remove the key in the config, or add the parameter to the target.")
    return None


def unsafe_problems(where: str, cfg: DictConfig) -> list[str]:
    """Shipped configs that switch on trust_remote_code / allow_pickle."""
    problems = []
    container = OmegaConf.to_container(cfg, resolve=False)

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                dotted = f"{path}.{key}" if path else str(key)
                if key in UNSAFE_TRUE_KEYS and value is True:
                    problems.append(f"{where}: {dotted}=true is set by a shipped config; it must only "
                                    "be set explicitly by the user on the command line")
                walk(value, dotted)
        elif isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{path}[{index}]")

    walk(container, "")
    return problems


# Model-level switches a loader must receive: ``model.<key>`` -> ``model.loader.<key>: ${model.<key>}``.
WIRED_MODEL_KEYS = ("allow_pickle",)


def wiring_problems(where: str, job: DictConfig) -> list[str]:
    """A model switch the user sets (``model.allow_pickle=true``) that its loader would never see."""
    from hydra._internal.utils import _locate

    loader = OmegaConf.select(job, "model.loader")
    if not isinstance(loader, DictConfig) or "_target_" not in loader:
        return []
    try:
        parameters = inspect.signature(_locate(loader["_target_"])).parameters
    except Exception:  # unimportable targets are reported by bind_problem
        return []
    problems = []
    for key in WIRED_MODEL_KEYS:
        if key not in job.model or key not in parameters:
            continue
        wired = "${model." + key + "}"
        node = loader._get_node(key) if key in loader else None
        if node is None or node._value() != wired:
            problems.append(f"{where}: model.{key} is set but model.loader does not receive it; add "
                            f"`{key}: {wired}` under model.loader so that `model.{key}=...` takes effect")
    return problems


def _job_part(cfg: DictConfig) -> DictConfig:
    """The composed config without its ``hydra`` node (what a job receives)."""
    return OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])


def _hydra_targets(cfg: DictConfig) -> Iterator[tuple[str, DictConfig]]:
    """``_target_`` nodes Hydra itself instantiates: launcher, sweeper, callbacks."""
    for key in ("launcher", "sweeper", "callbacks"):
        node = OmegaConf.select(cfg, f"hydra.{key}")
        if isinstance(node, DictConfig):
            yield from target_nodes(node, f"hydra.{key}")


def _check_composed(where: str, cfg: DictConfig, report: Report) -> None:
    job = _job_part(cfg)
    try:
        OmegaConf.to_container(job, resolve=True)
    except Exception as exc:  # InterpolationResolutionError and friends
        report.problems.append(f"{where}: does not resolve: {_one_line(exc)}")
        return
    for path, node in [*target_nodes(job), *_hydra_targets(cfg)]:
        report.targets.add(f"{path}: {node['_target_']}")
        if problem := bind_problem(path, node):
            report.problems.append(f"{where}: {problem}")
    report.problems += unsafe_problems(where, job) + wiring_problems(where, job)


def _compose(config_name: str, candidates: list[Any], report: Report, where: str) -> DictConfig | None:
    """The first candidate override list that composes, or ``None`` with the first error recorded."""
    errors = []
    for overrides in candidates:
        overrides = [overrides] if isinstance(overrides, str) else overrides
        try:
            cfg = compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
        except Exception as exc:  # Hydra's ConfigCompositionException, MissingConfigException...
            cause = f" ({_one_line(exc.__cause__)})" if exc.__cause__ else ""
            errors.append(f"{where}: does not compose: {_one_line(exc)}{cause}")
            continue
        HydraConfig.instance().set_config(cfg)  # `${hydra:...}` resolves as in a run
        return cfg
    report.problems.append(errors[0])
    return None


_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", list: "a list", dict: "a mapping"}
_PURE_REFERENCE = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


def _expected_type(value: Any) -> type | None:
    """The type a shipped value asks for (``None``: anything goes, e.g. null or a string)."""
    for kind in (bool, int, float):
        if isinstance(value, kind):
            return kind
    return list if isinstance(value, list) else dict if isinstance(value, dict) else None


def _fits(value: Any, kind: type) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, (list, ListConfig)) if kind is list else isinstance(value, (dict, DictConfig))


def _shipped_leaves(node: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key != "defaults":
                yield f"{prefix}.{key}" if prefix else str(key), value
                yield from _shipped_leaves(value, f"{prefix}.{key}" if prefix else str(key))


def _shipped_values(choices: dict[str, Any], root: Path, config_name: str) -> Iterator[tuple[str, Any, str]]:
    """(dotted key, shipped value, file) for the primary config and every chosen option file."""
    files = [("", root / f"{config_name}.yaml")]
    files += [(group.replace("/", "."), root / group / f"{option}.yaml")
              for group, option in choices.items() if option and not group.startswith("hydra/")]
    for package, path in files:
        if not path.is_file() or "@package" in path.read_text().split("\n", 1)[0]:
            continue  # plugin options, and files that place themselves elsewhere (e.g. _global_ sweeps)
        content = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        for key, value in _shipped_leaves({k: v for k, v in content.items() if k != "hydra"}, package):
            yield key, value, path.relative_to(root.parent).as_posix()


def type_problems(cfg: DictConfig, choices: dict[str, Any] | None = None, root: Path | None = None,
                  config_name: str = "config") -> list[str]:
    """Values whose type differs from what the shipped config files give (e.g. ``preset.height=abc``).

    ``choices`` are Hydra's ``runtime.choices`` (group -> option); without them nothing is checked.
    A shipped ``${other.key}`` asks for the type of that key's value; null and strings accept anything.
    """
    problems = []
    for key, shipped, where in _shipped_values(dict(choices or {}), Path(root or config_dir()), config_name):
        if isinstance(shipped, str) and (match := _PURE_REFERENCE.match(shipped)):
            shipped = OmegaConf.select(cfg, match.group(1), default=None)
        kind = _expected_type(shipped)
        if kind is None:
            continue
        value = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        if value is not None and not _fits(value, kind):
            shown = OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value
            problems.append(f"{key}={shown!r} must be {_TYPE_NAMES[kind]} ({where} has {shipped!r})")
    return problems


def check_types(cfg: DictConfig) -> None:
    """Raise one :class:`ConfigError` listing every value of the wrong type (run at the start of a job)."""
    from hydra.core.hydra_config import HydraConfig as _HC

    from ascendbench.errors import ConfigError

    choices = OmegaConf.to_container(_HC.get().runtime.choices) if _HC.initialized() else None
    problems = type_problems(cfg, choices)
    if problems:
        raise ConfigError(
            f"wrong value type: {'; '.join(problems)}. Fix the override on the command line "
            "(`--cfg job` prints the composed config with every key's current value)."
        )


def validate(root: Path | None = None, config_name: str = "config") -> Report:
    """Compose every option of every group under ``root`` (default: the shipped conf) and check it."""
    root = Path(root or config_dir()).resolve()
    report = Report()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(root), version_base="1.3"):
            defaults = _compose(config_name, [[]], report, "defaults")
            in_tree = set(OmegaConf.select(defaults, "hydra.runtime.choices") or {}) if defaults else set()
            runs = [([[]], "defaults")] + [(option_overrides(group, option, in_tree), f"{group}={option}")
                                           for group, options in config_groups(root).items() for option in options]
            for candidates, where in runs[1:] if defaults is None else runs:
                cfg = _compose(config_name, candidates, report, where)  # one at a time: HydraConfig is this one's
                if cfg is None:
                    continue
                report.composed.append(where)
                try:
                    _check_composed(where, cfg, report)
                except Exception as exc:  # a check must list the problem, never stop the others
                    report.problems.append(f"{where}: could not be checked: {_one_line(exc)}")
    finally:
        GlobalHydra.instance().clear()
    report.problems = list(dict.fromkeys(report.problems))  # one line per problem, first seen first
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Print every problem (or the all-clear); return 1 when there is any."""
    parser = argparse.ArgumentParser(prog="python -m ascendbench.validate", description=__doc__.split("\n")[0])
    parser.add_argument("--config-dir", type=Path, default=None, help="config tree to check (default: the shipped one)")
    args = parser.parse_args(argv)
    report = validate(args.config_dir)
    for problem in report.problems:
        print(f"FAIL  {problem}")
    print(f"validate: {len(report.composed)} compositions, {len(report.targets)} _target_ nodes bound, "
          f"{len(report.problems)} problem(s)")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
