"""The type check of the keys no schema types (``model.loader.*``, ``model.task.*``, ``metric.*``):
a value must have the type the option file gives the key (an integer where it has ``2``); null and
strings accept anything."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

from omegaconf import DictConfig, ListConfig, OmegaConf

_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", list: "a list",
               dict: "a mapping"}
_PURE_REFERENCE = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


def _expected_type(value: Any) -> type | None:
    """The type a shipped value asks for (``None``: anything goes, e.g. null or a string)."""
    for kind in (bool, int, float, list, dict):
        if isinstance(value, kind):
            return kind
    return None


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


@lru_cache(maxsize=512)
def _file_content(path: str, mtime_ns: int) -> dict[str, Any] | None:
    """An option file's content (cached by path and time); ``None`` for ``@package`` files."""
    text = Path(path).read_text()
    if "@package" in text.split("\n", 1)[0]:
        return None
    return OmegaConf.to_container(OmegaConf.create(text))


def shipped_values(choices: Mapping[str, Any], roots: list[Path],
                   config_name: str = "config") -> Iterator[tuple[str, Any, str]]:
    """(dotted key, shipped value, file) of the primary config and every chosen option file, read
    from the first of ``roots`` that has it."""
    files = [("", f"{config_name}.yaml")] + [
        (group.replace("/", "."), f"{group}/{option}.yaml")
        for group, option in choices.items() if option and not group.startswith("hydra/")]
    for package, name in files:
        root = next((root for root in roots if (root / name).is_file()), None)
        path = root / name if root else None
        content = _file_content(str(path), path.stat().st_mtime_ns) if path else None
        if content is None:
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


def type_problems(cfg: DictConfig, choices: Mapping[str, Any] | None,
                  roots: list[Path]) -> list[str]:
    """Values of untyped keys whose type differs from the option file's (``model.task.x=abc``);
    ``choices``: Hydra's ``runtime.choices`` (none: nothing is checked); ``roots``: the config
    folders in search order. A shipped ``${other.key}`` asks for the type of that key's value."""
    problems = []
    for key, shipped, where in shipped_values(dict(choices or {}), roots):
        if is_typed(cfg, key):
            continue
        if isinstance(shipped, str) and (match := _PURE_REFERENCE.match(shipped)):
            shipped = OmegaConf.select(cfg, match.group(1), default=None)
        kind = _expected_type(shipped)
        if kind is None:
            continue
        value = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        if value is not None and not _fits(value, kind):
            if isinstance(value, (DictConfig, ListConfig)):
                value = OmegaConf.to_container(value)
            problems.append(f"{key}={value!r} must be {_TYPE_NAMES[kind]} "
                            f"({where} has {shipped!r})")
    return problems
