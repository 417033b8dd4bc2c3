"""The config tree on disk: the package ``ascendbench.conf`` (the repository's ``conf/``)."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

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
    found = importlib.util.find_spec(PACKAGE) is not None
    return f"pkg://{PACKAGE}" if found else str(config_dir())


def plain(value: Any) -> Any:
    """A config node as plain Python containers, resolved (anything else unchanged)."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def group_options(group: str) -> list[str]:
    """Option names of a config group (``conf/<group>/*.yaml``)."""
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


def load_option(group: str, option: str) -> DictConfig:
    """One option file of a group, without its defaults list (a ConfigError for no such option)."""
    path = config_dir() / group / f"{option}.yaml"
    if not path.is_file():
        allowed = group_options(group)
        raise ConfigError(
            f"{group}={option!r} is not an option of the {group} group; allowed: "
            f"{', '.join(allowed)}. Fix the override, e.g. `{group}={allowed[0]}`.")
    content = option_file(path)[1]
    if isinstance(content, dict):
        content = {key: value for key, value in content.items() if key != "defaults"}
    return OmegaConf.create(content)


def option_file(path: Path) -> tuple[bool, Any]:
    """(whether its first line places it with ``@package``, its content as plain containers) of an
    option file, parsed once a version of the file (path, time, size); shared: not to be changed."""
    stat = path.stat()
    return _parsed(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=512)
def _parsed(path: str, mtime_ns: int, size: int) -> tuple[bool, Any]:
    text = Path(path).read_text()
    return "@package" in text.split("\n", 1)[0], OmegaConf.to_container(OmegaConf.create(text))
