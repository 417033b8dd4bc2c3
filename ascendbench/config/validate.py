"""``python -m ascendbench.validate`` (``make validate``): the whole config tree, checked without
loading a model.

* every option of every config group composes (with the defaults around it, against the typed
  schemas of :mod:`ascendbench.config.schemas`) and resolves;
* every composition passes the job's own check (:func:`ascendbench.config.rules.config_problems`):
  cross-field rules, the untyped keys, every ``_target_`` imports and its keys bind to the target's
  signature (``inspect.signature(target).bind(**keys)``; nothing is instantiated);
* safety defaults: no shipped config sets ``trust_remote_code`` or ``allow_pickle`` to true
  (those must come from the user's command line).

All problems are collected and listed at once; the exit code is 1 when there is any.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ascendbench.config import config_dir
from ascendbench.config.rules import config_problems
from ascendbench.config.schemas import register
from ascendbench.config.targets import bind_problem, one_line, target_nodes

# Keys that must never be switched on by a shipped config (only by the user, explicitly).
UNSAFE_TRUE_KEYS = ("trust_remote_code", "allow_pickle")
# Model-level switches a loader must receive: ``model.<key>`` -> ``model.loader.<key>: ${model.<key>}``.
WIRED_MODEL_KEYS = ("allow_pickle",)


@dataclass
class Report:
    """What was checked and every problem found."""

    composed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # options of a model's subgroup that no model selects
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


def _check_composed(where: str, cfg: DictConfig, root: Path, report: Report) -> None:
    job = _job_part(cfg)
    try:
        OmegaConf.to_container(job, resolve=True)
    except Exception as exc:  # InterpolationResolutionError and friends
        report.problems.append(f"{where}: does not resolve: {one_line(exc)}")
        return
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    report.problems += [f"{where}: {problem}" for problem in config_problems(job, choices, root)]
    for path, node in [*target_nodes(job), *_hydra_targets(cfg)]:
        report.targets.add(f"{path}: {node['_target_']}")
        if path.startswith("hydra.") and (problem := bind_problem(path, node)):
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
            cause = f" ({one_line(exc.__cause__)})" if exc.__cause__ else ""
            errors.append(f"{where}: does not compose: {one_line(exc)}{cause}")
            continue
        HydraConfig.instance().set_config(cfg)  # `${hydra:...}` resolves as in a run
        return cfg
    report.problems.append(errors[0])
    return None


def _candidates(group: str, option: str, in_tree: set[str], users: dict[str, str]) -> list[Any] | None:
    """Override lists to try for one option; a model's own subgroup (``model/task``) with a model that uses it.

    A task kind binds only with its model's keys (a tokenizer's ``tokens_per_chunk``), so ``model/task=x`` is
    composed with the first model that selects ``x``; a kind that no model selects has nothing to bind with
    (``None``: skipped, and listed as such).
    """
    if not group:
        return [[]]
    if group.startswith("model/"):
        model = users.get(f"{group}={option}")
        return [[f"model={model}", f"{group}={option}"]] if model else None
    return option_overrides(group, option, in_tree)


def _note_users(cfg: DictConfig, group: str, option: str, users: dict[str, str]) -> None:
    """Remember which model option selects each option of the model's own subgroups."""
    if group != "model":
        return
    for choice_group, choice in (OmegaConf.select(cfg, "hydra.runtime.choices") or {}).items():
        if str(choice_group).startswith("model/") and choice is not None:
            users.setdefault(f"{choice_group}={choice}", option)


def validate(root: Path | None = None, config_name: str = "config") -> Report:
    """Compose every option of every group under ``root`` (default: the shipped conf) and check it."""
    root = Path(root or config_dir()).resolve()
    report = Report()
    register()  # a plain directory is read without importing ascendbench.conf, which registers them
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(root), version_base="1.3"):
            defaults = _compose(config_name, [[]], report, "defaults")
            in_tree = set(OmegaConf.select(defaults, "hydra.runtime.choices") or {}) if defaults else set()
            runs = [("", "", "defaults")] + [(group, option, f"{group}={option}")
                                             for group, options in config_groups(root).items() for option in options]
            users: dict[str, str] = {}  # "model/task=x" -> a model that selects it (models compose first)
            for group, option, where in runs[1:] if defaults is None else runs:
                candidates = _candidates(group, option, in_tree, users)
                if candidates is None:
                    report.skipped.append(where)
                    continue
                cfg = _compose(config_name, candidates, report, where)  # one at a time: HydraConfig is this one's
                if cfg is None:
                    continue
                _note_users(cfg, group, option, users)
                report.composed.append(where)
                try:
                    _check_composed(where, cfg, root, report)
                except Exception as exc:  # a check must list the problem, never stop the others
                    report.problems.append(f"{where}: could not be checked: {one_line(exc)}")
    finally:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None  # leave no composition behind as "the running job's" config
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
    for where in report.skipped:
        print(f"SKIP  {where}: no model selects it, so there is nothing to bind its keys with")
    print(f"validate: {len(report.composed)} compositions, {len(report.targets)} _target_ nodes bound, "
          f"{len(report.problems)} problem(s)")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
