"""The hand type check of the keys no schema types (``model.loader.*``, ``model.task.*``, ``metric.*`` ...).

A value must have the type of the value the shipped option file gives for the same key: an integer
where the file has ``2``, a list where it has ``[2, 2]``; null and strings accept anything. Keys a
schema types (:mod:`ascendbench.config.schemas`) are left to Hydra, which rejects them at compose time.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

from omegaconf import DictConfig, ListConfig, OmegaConf

from ascendbench.config import config_dir

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


def shipped_values(choices: Mapping[str, Any], root: Path, config_name: str) -> Iterator[tuple[str, Any, str]]:
    """(dotted key, shipped value, file) for the primary config and every chosen option file."""
    files = [("", root / f"{config_name}.yaml")]
    files += [(group.replace("/", "."), root / group / f"{option}.yaml")
              for group, option in choices.items() if option and not group.startswith("hydra/")]
    for package, path in files:
        if not path.is_file():
            continue
        content = _file_content(str(path), path.stat().st_mtime_ns)
        if content is None:
            continue  # plugin options, and files that place themselves elsewhere (e.g. _global_ sweeps)
        where = path.relative_to(root.parent).as_posix()
        for key, value in _shipped_leaves({k: v for k, v in content.items() if k != "hydra"}, package):
            yield key, value, where


@lru_cache(maxsize=512)
def _file_content(path: str, mtime_ns: int) -> dict[str, Any] | None:
    """An option file's content (cached by path and modification time); ``None`` for ``@package`` files."""
    text = Path(path).read_text()
    return None if "@package" in text.split("\n", 1)[0] else OmegaConf.to_container(OmegaConf.create(text))


def is_typed(cfg: DictConfig, key: str, parents: dict[str, Any] | None = None) -> bool:
    """Whether a schema types ``key`` (its node has a declared type), so that Hydra checks it.

    ``parents``: a memo of parent nodes by dotted key, for many keys of one config (a walk per key otherwise).
    """
    parent_key, _, leaf = key.rpartition(".")
    if parents is None or parent_key not in parents:
        parent = OmegaConf.select(cfg, parent_key, default=None) if parent_key else cfg
        if parents is not None:
            parents[parent_key] = parent
    parent = parents[parent_key] if parents is not None else parent
    if not isinstance(parent, DictConfig):
        return False
    node = parent._get_node(leaf, validate_access=False)  # OmegaConf has no public accessor
    return node is not None and node._metadata.ref_type is not Any


def type_problems(cfg: DictConfig, choices: Mapping[str, Any] | None = None, root: Path | None = None,
                  config_name: str = "config") -> list[str]:
    """Values of untyped keys whose type differs from the shipped file's (e.g. ``model.task.channels=abc``).

    ``choices`` are Hydra's ``runtime.choices`` (group -> option); without them nothing is checked.
    A shipped ``${other.key}`` asks for the type of that key's value; null and strings accept anything.
    """
    problems, parents = [], {}
    for key, shipped, where in shipped_values(dict(choices or {}), Path(root or config_dir()), config_name):
        if is_typed(cfg, key, parents):
            continue
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
