"""``_target_`` nodes of a config: whether each would instantiate, checked without building it;
what may be built (:func:`build`: never a loader of pickles, in a dry run only our own classes)."""

from __future__ import annotations

import inspect
import sys
from typing import Any, Iterator

from hydra.errors import InstantiationException
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from ascendbench.errors import AscendBenchError, ConfigError, WouldBuild

# Keys of a `_target_` node that instantiate() consumes itself.
HYDRA_KEYS = {"_target_", "_recursive_", "_convert_", "_partial_", "_args_"}
# Loaders of pickles (unpickling runs the file's code): the argument that makes one safe, or None.
PICKLE_LOADERS = {"torch.load": ("weights_only", True), "numpy.load": ("allow_pickle", False),
                  **dict.fromkeys(["pickle.load", "pickle.loads", "pandas.read_pickle",
                                   "joblib.load", "dill.load", "dill.loads"])}


def target_nodes(node: Any, path: str = "", deep: bool = True) -> Iterator[tuple[str, DictConfig]]:
    """Every ``(dotted path, node)`` carrying a ``_target_``, depth first (``deep=False``: not
    below a ``_recursive_: false`` node, whose class builds those itself)."""
    if isinstance(node, (DictConfig, ListConfig)) and (node._is_none() or node._is_missing()):
        return
    if isinstance(node, DictConfig):
        if "_target_" in node:
            yield path or "<root>", node
            if not deep and node.get("_recursive_", True) is False:
                return
        for key in node:
            child = node._get_node(key)
            child = child if isinstance(child, (DictConfig, ListConfig)) else None
            yield from target_nodes(child, f"{path}.{key}" if path else str(key), deep)
    elif isinstance(node, ListConfig):
        for index, item in enumerate(node):
            yield from target_nodes(item, f"{path}[{index}]", deep)


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


def _target(node: DictConfig) -> Any:
    try:
        return get_object(node["_target_"])
    except Exception:  # cannot be imported: nothing is built (bind_problem says why)
        return None


def unsafe_problem(path: str, node: DictConfig, allow_pickle: bool = False) -> str | None:
    """Why ``node`` must not be built: its target unpickles (a ``model.*`` node may, with
    ``model.allow_pickle=true``); aliases (``torch.serialization.load``) are the same function."""
    obj = _target(node)
    name = next((n for n in PICKLE_LOADERS if obj is not None and obj is getattr(
        sys.modules.get(n.rpartition(".")[0]), n.rpartition(".")[2], None)), None)
    if name is None or (allow_pickle and path.startswith("model.")):
        return None
    flag, safe = PICKLE_LOADERS[name] or (None, None)
    try:  # the flag's value as the call would see it (an argument, positional or not, or default)
        bound = inspect.signature(obj).bind_partial(*node.get("_args_") or [], **{
            str(k): node.get(k) for k in node if k not in HYDRA_KEYS})
        bound.apply_defaults()
    except (TypeError, ValueError):
        bound = None
    if flag and bound is not None and bool(bound.arguments.get(flag)) == safe:
        return None
    alias = f" (it is {name})" * (node["_target_"] != name)
    return (f"{path}._target_={node['_target_']!r} unpickles{alias}, which runs any code the file "
            "holds: refused" + (f"; set {flag}: {str(safe).lower()}" if flag else "")
            + " (or model.allow_pickle=true, for weights you trust)" * (path[:6] == "model."))


def unsafe_problems(node: DictConfig, path: str, allow_pickle: bool) -> list[str]:
    """:func:`unsafe_problem` of every ``_target_`` node in ``node`` (at ``path``)."""
    return [p for at, n in target_nodes(node, path) if (p := unsafe_problem(at, n, allow_pickle))]


def _own(node: DictConfig) -> bool:
    return str(getattr(_target(node), "__module__", "")).startswith("ascendbench.")


def build(node: DictConfig, key: str, **kwargs: Any) -> Any:
    """``instantiate`` a config node; our own errors pass through, others name the config key.
    A loader of pickles is refused anywhere in it; in a dry run (``dry_run`` of its config) only
    ascendbench's own classes are built (:class:`WouldBuild` names the others)."""
    root = node._get_root()
    try:  # interpolations (`${oc.create:...}`) may bring nodes: checked as instantiate sees them
        seen = OmegaConf.create(OmegaConf.to_container(node, resolve=True))
    except Exception:
        seen = node  # instantiate fails the same way
    allow = OmegaConf.select(root, "model.allow_pickle", throw_on_resolution_failure=False) is True
    if refused := unsafe_problems(seen, key, allow):
        raise ConfigError(f"{'; '.join(refused)}. Remove the node from the config.")
    foreign = [f"{path}={n['_target_']}" for path, n in target_nodes(seen, key, deep=False)
               if not _own(n)]
    if foreign and OmegaConf.select(root, "dry_run", default=False) is True:
        raise WouldBuild(f"{', '.join(foreign)} (a dry run builds only ascendbench's own "
                         f"classes; {key} is not planned)")
    try:
        return instantiate(node, **kwargs)
    except InstantiationException as exc:
        if isinstance(exc.__cause__, AscendBenchError):
            raise exc.__cause__ from None
        raise ConfigError(
            f"{key} could not be built from _target_={node.get('_target_')!r}: {exc}. Check the "
            f"keys under {key} against the signature of its _target_ (`--cfg job` prints them)."
        ) from exc
