"""The configuration: where the tree lives, its typed schemas, its cross-field rules and its validation.

* this module: the config tree on disk -- the package ``ascendbench.conf`` (the repository's ``conf/``);
* :mod:`ascendbench.config.schemas`: the dataclass schemas registered in Hydra's ConfigStore, so that a
  wrong type or an unknown enum value fails at compose time;
* :mod:`ascendbench.config.rules`: what the schemas cannot express (``max_iters >= min_iters``, positive
  sizes, threshold rules, keys of the untyped groups); :func:`~ascendbench.config.rules.check_config`
  is what a job calls before it does anything;
* :mod:`ascendbench.config.validate`: ``python -m ascendbench.validate`` -- every option of every group.
"""

from __future__ import annotations

import copy
import importlib.util
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import ConfigError

PACKAGE = "ascendbench.conf"


def config_dir() -> Path:
    """Directory of the config tree, installed (package data) or in a source checkout."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(__file__).resolve().parents[2] / "conf"


def hydra_config_path() -> str:
    """``pkg://ascendbench.conf`` when the package is importable, else the checkout's ``conf/``."""
    return f"pkg://{PACKAGE}" if importlib.util.find_spec(PACKAGE) is not None else str(config_dir())


def group_options(group: str) -> list[str]:
    """Option names of a config group (``conf/<group>/*.yaml``)."""
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


def load_option(group: str, option: str) -> DictConfig:
    """Load one option file of a group as plain config: its own keys, without its defaults list.

    Raises:
        ConfigError: ``option`` is not an option of ``group``.
    """
    path = config_dir() / group / f"{option}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"{group}={option!r} is not an option of the {group} group; allowed: "
            f"{', '.join(group_options(group))}. Fix the override, e.g. `{group}={group_options(group)[0]}`."
        )
    stat = path.stat()
    return copy.deepcopy(_parsed_option(str(path), stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=128)
def _parsed_option(path: str, mtime_ns: int, size: int) -> DictConfig:
    """An option file parsed (about 7 ms; once per process and version of the file), without its defaults
    list; callers get copies."""
    loaded = OmegaConf.load(path)
    if isinstance(loaded, DictConfig) and "defaults" in loaded:
        loaded = OmegaConf.masked_copy(loaded, [key for key in loaded if key != "defaults"])
    return loaded


# The job's check, importable from here (it reads config_dir above, so it is imported after it).
from ascendbench.config.rules import check_config, config_problems  # noqa: E402

__all__ = ["check_config", "config_dir", "config_problems", "group_options", "hydra_config_path", "load_option"]
