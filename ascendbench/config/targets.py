"""``_target_`` nodes of a config: whether each would instantiate, checked without building it."""

from __future__ import annotations

import inspect
from typing import Any, Iterator

from hydra.errors import InstantiationException
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, ListConfig

from ascendbench.errors import AscendBenchError, ConfigError

# Keys of a `_target_` node that instantiate() consumes itself.
HYDRA_KEYS = {"_target_", "_recursive_", "_convert_", "_partial_", "_args_"}


def target_nodes(node: Any, path: str = "") -> Iterator[tuple[str, DictConfig]]:
    """Every ``(dotted path, node)`` carrying a ``_target_``, depth first."""
    if isinstance(node, (DictConfig, ListConfig)) and (node._is_none() or node._is_missing()):
        return
    if isinstance(node, DictConfig):
        if "_target_" in node:
            yield path or "<root>", node
        for key in node:
            child = node._get_node(key)
            child = child if isinstance(child, (DictConfig, ListConfig)) else None
            yield from target_nodes(child, f"{path}.{key}" if path else str(key))
    elif isinstance(node, ListConfig):
        for index, item in enumerate(node):
            yield from target_nodes(item, f"{path}[{index}]")


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line."""
    return f"{type(exc).__name__}: " + " ".join(str(exc).split())


def bind_problem(path: str, node: DictConfig) -> str | None:
    """Why ``node`` would not instantiate (its target does not import, or its keys do not bind)."""
    target = node["_target_"]
    try:
        obj = get_object(target)
    except Exception as exc:  # ImportError, AttributeError...
        return f"{path}._target_={target!r} cannot be imported: {one_line(exc)}"
    kwargs = {str(k): None for k in node if k not in HYDRA_KEYS}
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None  # builtins without a signature: nothing to check
    binder = signature.bind_partial if node.get("_partial_", False) else signature.bind
    try:
        binder(*list(node.get("_args_") or []), **kwargs)
    except TypeError as exc:
        return (f"{path}: keys {sorted(kwargs)} do not bind to {target}{signature}: {exc}. "
                "Rename or remove the key in the config, or add the parameter to the target.")
    return None


def build(node: DictConfig, key: str, **kwargs: Any) -> Any:
    """``instantiate`` a config node; our own errors pass through, others name the config key."""
    try:
        return instantiate(node, **kwargs)
    except InstantiationException as exc:
        if isinstance(exc.__cause__, AscendBenchError):
            raise exc.__cause__ from None
        raise ConfigError(
            f"{key} could not be built from _target_={node.get('_target_')!r}: {exc}. Check the "
            f"keys under {key} against the signature of its _target_ (`--cfg job` prints them)."
        ) from exc
