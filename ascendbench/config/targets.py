"""``_target_`` nodes of a config: whether each would instantiate, checked without building it."""

from __future__ import annotations

import contextlib
import inspect
import sys
from typing import Any, Iterator

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import InstantiationException
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from ascendbench.config import config_dir
from ascendbench.errors import AscendBenchError, ConfigError, WouldBuild

# Keys of a `_target_` node that instantiate() consumes itself.
HYDRA_KEYS = {"_target_", "_recursive_", "_convert_", "_partial_", "_args_"}
# Loaders of pickles (unpickling runs the file's code) -> (the argument making one safe, its value).
PICKLE_LOADERS = {"torch.load": ("weights_only", True), "numpy.load": ("allow_pickle", False),
                  **dict.fromkeys(["pickle.load", "pickle.loads", "pandas.read_pickle",
                                   "joblib.load", "dill.load", "dill.loads"], (None, None))}


def target_nodes(node: Any, path: str = "", deep: bool = True) -> Iterator[tuple[str, DictConfig]]:
    """Every ``(dotted path, node)`` with a ``_target_``, depth first (``deep``: below too), in a
    config or in its plain containers."""
    if isinstance(node, (DictConfig, ListConfig)) and (node._is_none() or node._is_missing()):
        return
    if isinstance(node, (DictConfig, dict)):
        if "_target_" in node:
            yield path or "<root>", node
            if not deep and node.get("_recursive_", True) is False:
                return
        for key in node:
            child = node._get_node(key) if isinstance(node, DictConfig) else node[key]
            child = child if isinstance(child, (DictConfig, ListConfig, dict, list)) else None
            yield from target_nodes(child, f"{path}.{key}" if path else str(key), deep)
    elif isinstance(node, (ListConfig, list)):
        for index, item in enumerate(node):
            yield from target_nodes(item, f"{path}[{index}]", deep)


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line."""
    return f"{type(exc).__name__}: " + " ".join(str(exc).split())


def _target(node: DictConfig) -> Any:  # what `_target_` names, or why it cannot be imported
    try:
        return get_object(node["_target_"])
    except Exception as exc:
        return exc


def bind_problem(path: str, node: DictConfig) -> str | None:
    """Why ``node`` would not instantiate (its target does not import, or its keys do not bind)."""
    target, obj = node["_target_"], _target(node)
    if isinstance(obj, Exception):  # ImportError, AttributeError...
        return f"{path}._target_={target!r} cannot be imported: {one_line(obj)}"
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


def target_problems(node: DictConfig, path: str = "",
                    resolved: Any = None) -> tuple[list[str], list[str]]:
    """Nodes that unpickle (unless ``model.allow_pickle`` for ``model.``), and foreign ones
    (``resolved``: the node's containers, resolved, where the caller has them)."""
    root, refused = node._get_root(), []
    allow = OmegaConf.select(root, "model.allow_pickle", throw_on_resolution_failure=False) is True
    with contextlib.suppress(Exception):  # else as it is: instantiate fails the same way
        node = resolved if resolved is not None else OmegaConf.to_container(node, resolve=True)
    loaders = {id(f): n for n in PICKLE_LOADERS if (f := getattr(  # aliases: the same function
        sys.modules.get(n.rpartition(".")[0]), n.rpartition(".")[2], None)) is not None}
    for at, sub in target_nodes(node, path):
        name = loaders.get(id(_target(sub)))
        flag, safe = PICKLE_LOADERS.get(name, ("", None))
        if name and not (allow and at.startswith("model.")) and (  # `_args_` are not read: refused
                not flag or "_args_" in sub or bool(sub.get(flag)) != safe):
            fix = f"set {flag}: {str(safe).lower()}" if flag else "remove it"
            refused.append(f"{at}._target_={sub['_target_']!r} unpickles ({name}: it runs the "
                           f"file's code): refused; {fix}"
                           + " (or model.allow_pickle=true)" * at.startswith("model."))
    return refused, [f"{at}={n['_target_']}" for at, n in target_nodes(node, path, deep=False)
                     if not str(getattr(_target(n), "__module__", "")).startswith("ascendbench.")]


def build(node: DictConfig, key: str, **kwargs: Any) -> Any:
    """``instantiate`` a node, never a pickle loader; in a dry run only ours (WouldBuild)."""
    refused, foreign = target_problems(node, key)
    if refused:
        raise ConfigError(f"{'; '.join(refused)}. Remove the node from the config.")
    if foreign and OmegaConf.select(node._get_root(), "dry_run", default=False) is True:
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


def callback_problems(argv: list[str]) -> list[str]:
    """Unpickling (in a dry run: foreign) ``hydra.callbacks`` nodes that the command line or a
    folder it adds would put there: Hydra builds them before the app, so they are composed here
    first, with Hydra's public compose; ``[]`` when the command line adds neither."""
    folders = [b for a, b in zip(argv, argv[1:], strict=False) if a in ("-cd", "--config-dir")]
    folders += [a.split("=", 1)[1] for a in argv if a.startswith("--config-dir=")]
    lines = [a for a in argv if "=" in a and not a.startswith("-")]
    if not folders and not any("hydra.searchpath" in a or "hydra.callbacks" in a for a in lines):
        return []
    GlobalHydra.instance().clear()
    try:  # sweep values go: Hydra builds the callbacks once, from the sweep's own config
        parsed = OverridesParser.create().parse_overrides(lines)
        keep = [o.input_line for o in parsed if not o.is_sweep_override()
                and o.key_or_group != "hydra.searchpath"]
        paths = [f"file://{f}" for f in folders] + [str(p) for o in parsed  # Hydra's order
                 if o.key_or_group == "hydra.searchpath" for p in o.value()]
        keep += [f"hydra.searchpath=[{','.join(paths)}]"] if paths else []
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            cfg = compose("config", overrides=keep, return_hydra_config=True)
    except Exception:  # Hydra says what is wrong with the command line when it runs
        return []
    finally:
        GlobalHydra.instance().clear()
    refused, foreign = target_problems(cfg.hydra.callbacks, "hydra.callbacks")
    return refused + [f"{f}: a dry run builds only ascendbench's own classes" for f in foreign
                      if cfg.get("dry_run") is True]
