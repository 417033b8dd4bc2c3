"""``python -m ascendbench.validate``: every option of the config tree composes and checks."""

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
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from ascendbench.compat import missing_extra
from ascendbench.config import config_dir
from ascendbench.config.rules import config_problems, job_part
from ascendbench.config.schemas import register
from ascendbench.config.targets import bind_problem, one_line, target_nodes

UNSAFE_TRUE_KEYS = ("trust_remote_code", "allow_pickle")  # only ever set by the user
# Model switches a loader must receive: ``model.<key>`` -> ``model.loader.<key>: ${model.<key>}``.
WIRED_MODEL_KEYS = ("allow_pickle",)


@dataclass
class Report:
    """What was checked and every problem found."""

    composed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "group=option: why", never composed
    targets: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def config_groups(root: Path) -> dict[str, list[str]]:
    """``group -> options`` for every directory of ``root`` holding ``*.yaml`` files."""
    folders = sorted(p for p in root.rglob("*") if p.is_dir())
    return {folder.relative_to(root).as_posix(): options for folder in folders
            if (options := sorted(p.stem for p in folder.glob("*.yaml")))}


def unsafe_problems(where: str, node: Any, path: str = "") -> list[str]:
    """Options that switch on trust_remote_code / allow_pickle."""
    if isinstance(node, DictConfig):
        node = OmegaConf.to_container(node, resolve=False)
    if isinstance(node, list):
        items = [(f"{path}[{index}]", index, value) for index, value in enumerate(node)]
    elif isinstance(node, dict):
        items = [(f"{path}.{key}" if path else str(key), key, value) for key, value in node.items()]
    else:
        return []
    problems = []
    for dotted, key, value in items:
        if key in UNSAFE_TRUE_KEYS and value is True:
            problems.append(f"{where}: {dotted}=true is set by a shipped config; it must only be "
                            "set explicitly by the user on the command line")
        problems += unsafe_problems(where, value, dotted)
    return problems


def wiring_problems(where: str, job: DictConfig) -> list[str]:
    """A model switch (``model.allow_pickle=true``) that its loader would never see."""
    loader = OmegaConf.select(job, "model.loader")
    if not isinstance(loader, DictConfig) or "_target_" not in loader:
        return []
    try:
        parameters = inspect.signature(get_object(loader["_target_"])).parameters
    except Exception:  # an unimportable target is reported by bind_problem
        return []
    problems = []
    for key in WIRED_MODEL_KEYS:
        wired = "${model." + key + "}"
        if key in job.model and key in parameters and (
                key not in loader or loader._get_node(key)._value() != wired):
            problems.append(f"{where}: model.{key} is set but model.loader does not receive it; "
                            f"add `{key}: {wired}` under model.loader so that `model.{key}=...` "
                            "takes effect")
    return problems


def _hydra_targets(cfg: DictConfig) -> Iterator[tuple[str, DictConfig]]:
    for key in ("launcher", "sweeper", "callbacks"):
        node = OmegaConf.select(cfg, f"hydra.{key}")
        if isinstance(node, DictConfig):
            yield from target_nodes(node, f"hydra.{key}")


def _check(where: str, cfg: DictConfig, folders: list[Path], report: Report) -> None:
    report.composed.append(where)
    job = job_part(cfg)
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    try:
        report.problems += [f"{where}: {p}" for p in config_problems(job, choices, folders)]
        for path, node in [*target_nodes(job), *_hydra_targets(cfg)]:
            report.targets.add(f"{path}: {node['_target_']}")
            if path.startswith("hydra.") and (problem := bind_problem(path, node)):
                report.problems.append(f"{where}: {problem}")
        report.problems += unsafe_problems(where, job) + wiring_problems(where, job)
    except Exception as exc:  # one broken check must not stop the others
        report.problems.append(f"{where}: could not be checked: {one_line(exc)}")


def _compose(candidates: list[list[str]], report: Report, where: str) -> DictConfig | None:
    """The first candidate override list that composes, or ``None`` (the first error recorded)."""
    errors = []
    for overrides in candidates:
        try:
            cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
        except Exception as exc:  # ConfigCompositionException, MissingConfigException...
            cause = f" ({one_line(exc.__cause__)})" if exc.__cause__ else ""
            errors.append(f"{where}: does not compose: {one_line(exc)}{cause}")
            continue
        HydraConfig.instance().set_config(cfg)  # `${hydra:...}` resolves as in a run
        return cfg
    report.problems.append(errors[0])
    return None


def _candidates(group: str, option: str, in_tree: set[str],
                users: dict[str, str]) -> list[list[str]] | None:
    """Override lists that may select an option, likeliest first (``None``: nothing to try)."""
    if group.startswith("model/"):
        model = users.get(f"{group}={option}")
        return [[f"model={model}", f"{group}={option}"]] if model else None
    plain, append = [f"{group}={option}"], [f"+{group}={option}"]
    return [plain, append] if group in in_tree or group.startswith("hydra/") else [append, plain]


def _note_users(cfg: DictConfig, group: str, option: str, users: dict[str, str]) -> None:
    for chosen, choice in cfg.hydra.runtime.choices.items() if group == "model" else ():
        if str(chosen).startswith("model/") and choice is not None:
            users.setdefault(f"{chosen}={choice}", option)


def _shadowed(folder: Path | None, groups: dict[str, list[str]]) -> list[str]:
    """Options of ``folder`` that a shipped option of the same name hides (Hydra finds it first)."""
    shipped = config_dir()
    return [f"{group}={option}: {folder / group / option}.yaml is never used: the shipped "
            f"{group}/{option}.yaml is found first; give yours another name"
            for group, options in groups.items() for option in options
            if folder and (shipped / group / f"{option}.yaml").is_file()]


def validate(folder: Path | None = None) -> Report:
    """Compose every option of the shipped tree, or of ``folder`` added to its search path."""
    folder = Path(folder).resolve() if folder else None
    searchpath = [f"hydra.searchpath=[file://{folder}]"] if folder else []
    groups = config_groups(folder or config_dir())
    report = Report(problems=_shadowed(folder, groups))
    register()  # a plain directory is read without importing ascendbench.conf, which registers
    GlobalHydra.instance().clear()
    folders = [folder] if folder else []
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            defaults = _compose([searchpath], report, "defaults")
            in_tree: set[str] = set()
            if defaults is not None:
                in_tree = set(defaults.hydra.runtime.choices)
                _check("defaults", defaults, folders, report)
            users: dict[str, str] = {}  # "model/task=x" -> a model that selects it
            for group, options in groups.items():  # "model" before "model/task"
                for option in options:
                    where = f"{group}={option}"
                    candidates = _candidates(group, option, in_tree, users)
                    if hint := missing_extra(group):
                        report.skipped.append(f"{where}: its extra is not installed (`{hint}`)")
                        continue
                    if candidates is None:
                        report.skipped.append(f"{where}: no model selects it, so there is "
                                              "nothing to bind its keys with")
                        continue
                    cfg = _compose([searchpath + c for c in candidates], report, where)
                    if cfg is not None:
                        _note_users(cfg, group, option, users)
                        _check(where, cfg, folders, report)
    finally:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None  # leave no composition behind as a running job's
    report.problems = list(dict.fromkeys(report.problems))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Print every problem (or the all-clear); return 1 when there is any."""
    parser = argparse.ArgumentParser(prog="python -m ascendbench.validate", description=(
        "Compose and check every option of the config tree, or of a folder of your own."))
    parser.add_argument("--config-dir", type=Path, default=None,
                        help="a folder of your own options, added to the config search path "
                             "as `python -m ascendbench --config-dir` adds it; its options are "
                             "checked")
    args = parser.parse_args(argv)
    if args.config_dir is not None and not args.config_dir.is_dir():
        parser.error(f"--config-dir {args.config_dir}: not a directory")
    report = validate(args.config_dir)
    for problem in report.problems:
        print(f"FAIL  {problem}")
    for where in report.skipped:
        print(f"SKIP  {where}")
    print(f"validate: {len(report.composed)} compositions, {len(report.targets)} _target_ nodes "
          f"bound, {len(report.problems)} problem(s)")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
