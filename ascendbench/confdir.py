"""Where the configuration lives: the package ``ascendbench.conf`` (the repository's ``conf/``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import ConfigError

PACKAGE = "ascendbench.conf"


def config_dir() -> Path:
    """Directory of the config tree, installed (package data) or in a source checkout."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(__file__).resolve().parent.parent / "conf"


def hydra_config_path() -> str:
    """``pkg://ascendbench.conf`` when the package is importable, else the checkout's ``conf/``."""
    return f"pkg://{PACKAGE}" if importlib.util.find_spec(PACKAGE) is not None else str(config_dir())


def group_options(group: str) -> list[str]:
    """Option names of a config group (``conf/<group>/*.yaml``)."""
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


def load_option(group: str, option: str) -> DictConfig:
    """Load one option file of a group as plain config (no defaults list processing)."""
    path = config_dir() / group / f"{option}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"{group}={option!r} is not an option of the {group} group; allowed: "
            f"{', '.join(group_options(group))}. Fix the override, e.g. `{group}={group_options(group)[0]}`."
        )
    return OmegaConf.load(path)
