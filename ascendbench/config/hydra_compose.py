"""Hydra composes a sweep job's config once, from YAML files parsed once per process.

A composition of ascendbench's config costs about 0.3 s, and Hydra 1.3 pays it twice per sweep job, reading
every file again each time:

* A sweeper checks a batch before launching it (``Sweeper.validate_batch_is_legal``: every job's config is
  composed, so that a bad override fails before any job runs) and throws the configs away; the basic
  launcher then composes each job's config again, in the same process, from the same master config and
  overrides (``ConfigLoaderImpl.load_sweep_config``). :func:`reuse_checked_compositions` keeps the configs
  the check composed and hands each to the first later request for the same composition (same loader,
  same master config object, same overrides, working directory and values of ``hydra.job.env_copy``'s
  variables) -- once: the launcher sets the job's number in it, Hydra's ``run_job`` works on copies. A
  request that finds none (a launcher composing in worker processes, joblib or Slurm) composes as before.
  What changes: a job's config is the one composed when its batch was checked, before the batch's first
  job ran (as its ``multirun.yaml`` was), so a YAML file edited while the sweep runs no longer changes
  the later jobs of that batch.
* Each composition parses each YAML file it reads (``ImportlibResourcesConfigSource`` and
  ``FileConfigSource.load_config``), about 10 ms a file: :func:`parse_files_once` keeps what a file
  parsed to, keyed by the file's path, size, modification time and inode, and hands out deep copies
  (Hydra changes what it loads while composing). A file that changed is parsed again; a file that cannot
  be stat-ed (inside a zip) is read as before.
* While a batch is checked, the jobs that choose the same config groups (``model=...``, ``+dtype=...``,
  ``~metric``: every override whose key names a config group, Hydra's own test) share the two costly
  steps of a composition, about 0.1 s a job: the defaults list (which files, in which order) and the
  merge of those files (:func:`share_group_compositions`). Neither depends on the other overrides, the
  config values (``bench.warmup=3``), which Hydra applies to the merged config afterwards, as before:
  a job's own are split off its overrides by Hydra's rule and handed to it with a copy of the shared
  merge. The key also holds the primary config's name and the config search path (which
  ``hydra.searchpath=...`` changes); what is shared lives as long as the check of one batch.

Installed only on the Hydra versions this was written against (:data:`SUPPORTED_HYDRA`), where the wrapped
methods exist; elsewhere Hydra runs unchanged.
"""

from __future__ import annotations

import copy
import functools
import os
from importlib import resources
from pathlib import Path
from typing import Any

import hydra
from hydra._internal import config_loader_impl
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.defaults_list import DefaultsList
from hydra._internal.sources_registry import SourcesRegistry
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf

SUPPORTED_HYDRA = "1.3."
YAML_SOURCES = {"file": "FileConfigSource", "pkg": "ImportlibResourcesConfigSource"}  # scheme -> Hydra's class
MARK = "_ascendbench_compose"  # set on every wrapper, so that installing twice wraps once
_CHECKED: dict[tuple, list[tuple[Any, Any]]] = {}  # composition key -> [(master config, composed config)]
_STATE = {"checking": 0, "shared": 0}  # > 0 while a sweeper checks a batch; compositions that shared a merge
_PARSED: dict[tuple, Any] = {}  # (source type, source path, file, stat) -> the ConfigResult it parsed to
_SHARED: dict[tuple, dict[str, Any]] = {}  # group key -> {"defaults": DefaultsList, "config": merged or None}


def supported() -> bool:
    """Whether this Hydra is one the wrappers were written against, with the wrapped methods present."""
    owners = ((ConfigLoaderImpl, "load_sweep_config"), (Sweeper, "validate_batch_is_legal"),
              (ConfigLoaderImpl, "_compose_config_from_defaults_list"), (config_loader_impl, "create_defaults_list"))
    return hydra.__version__.startswith(SUPPORTED_HYDRA) and all(hasattr(o, name) for o, name in owners)


def yaml_source_classes() -> list[type]:
    """The classes Hydra reads YAML config files with (``file://`` and ``pkg://``), as its plugin scan
    registered them: the scan loads its own copy of Hydra's core plugin modules, so the classes a plain
    import gives are not the ones that read the files. A scheme served by another class is left out."""
    Plugins.instance()  # the scan that registers the config sources (Hydra runs it anyway, once)
    registry = SourcesRegistry.instance()
    found = [registry.types.get(scheme) for scheme in YAML_SOURCES]
    return [cls for cls, name in zip(found, YAML_SOURCES.values(), strict=True)
            if cls is not None and cls.__name__ == name and hasattr(cls, "load_config")]


def faster_composition() -> bool:
    """Install :func:`reuse_checked_compositions`, :func:`parse_files_once` and
    :func:`share_group_compositions`; False on another Hydra."""
    return supported() and reuse_checked_compositions() and parse_files_once() and share_group_compositions()


def _key(loader: Any, master: Any, overrides: list[str]) -> tuple:
    copied = OmegaConf.select(master, "hydra.job.env_copy") or []
    env = tuple((name, os.environ.get(str(name))) for name in copied)
    return id(loader), id(master), tuple(str(o) for o in overrides), os.getcwd(), env


def checked_compositions() -> int:
    """How many configs composed by a batch check are waiting for their launch."""
    return sum(len(entries) for entries in _CHECKED.values())


def forget() -> None:
    """Drop the kept compositions, parsed files and shared merges (the next request composes afresh)."""
    _CHECKED.clear()
    _PARSED.clear()
    _SHARED.clear()
    _STATE["shared"] = 0


def reuse_checked_compositions() -> bool:
    """Wrap the batch check and the sweep composition as the module docstring says (idempotent)."""
    if not supported():
        return False
    original_check, original_load = Sweeper.validate_batch_is_legal, ConfigLoaderImpl.load_sweep_config
    if getattr(original_load, MARK, False):
        return True

    @functools.wraps(original_check)
    def validate_batch_is_legal(self: Any, batch: Any) -> None:
        _CHECKED.clear()  # a new batch: an earlier batch's configs are not handed out
        _SHARED.clear()
        _STATE["checking"] += 1
        try:
            original_check(self, batch)
        finally:
            _STATE["checking"] -= 1
            _SHARED.clear()

    @functools.wraps(original_load)
    def load_sweep_config(self: Any, master_config: Any, sweep_overrides: list[str]) -> Any:
        key = _key(self, master_config, sweep_overrides)
        if _STATE["checking"]:
            composed = original_load(self, master_config, sweep_overrides)
            _CHECKED.setdefault(key, []).append((master_config, composed))
            return composed
        entries = _CHECKED.get(key) or []
        while entries:
            master, composed = entries.pop(0)
            if master is master_config:  # the very master config, not one that reuses a freed id
                return composed
        return original_load(self, master_config, sweep_overrides)

    for wrapper in (validate_batch_is_legal, load_sweep_config):
        setattr(wrapper, MARK, True)
    Sweeper.validate_batch_is_legal = validate_batch_is_legal
    ConfigLoaderImpl.load_sweep_config = load_sweep_config
    return True


def _file_of(source: Any, config_path: str) -> Path | None:
    """The file ``source`` would read for ``config_path``, or None when it is not a plain file."""
    name = source._normalize_file_name(config_path)
    if source.scheme() == "file":
        return Path(os.path.realpath(os.path.join(source.path, name)))
    try:
        found = resources.files(source.path).joinpath(name)
    except (ModuleNotFoundError, TypeError, ValueError):
        return None
    return found if isinstance(found, Path) else None


def _parse_once(original: Any) -> Any:
    @functools.wraps(original)
    def load_config(self: Any, config_path: str) -> Any:
        path = _file_of(self, config_path)
        try:
            stat = os.stat(path) if path is not None else None
        except OSError:  # missing: the source says so in its own words
            stat = None
        if stat is None:
            return original(self, config_path)
        key = (type(self), self.path, str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)
        if key not in _PARSED:
            _PARSED[key] = original(self, config_path)
        return copy.deepcopy(_PARSED[key])

    setattr(load_config, MARK, True)
    return load_config


def parse_files_once() -> bool:
    """Wrap the YAML config sources' ``load_config`` as the module docstring says (idempotent)."""
    if not supported():
        return False
    for source in yaml_source_classes():
        if not getattr(source.load_config, MARK, False):
            source.load_config = _parse_once(source.load_config)
    return True


def _split(repo: Any, overrides: list[Any]) -> tuple[tuple[str, ...] | None, list[Any]]:
    """The input lines of the overrides that choose config groups (None when one has no line), and the
    config-value overrides, split by the rule of Hydra's ``defaults_list.Overrides``."""
    groups: list[str] | None = []
    values = []
    for override in overrides:
        if override.is_sweep_override():
            continue
        if isinstance(override.value(), dict) or not repo.group_exists(override.key_or_group):
            values.append(override)
        elif override.input_line is None or groups is None:
            groups = None
        else:
            groups.append(override.input_line)
    return (tuple(groups) if groups is not None else None), values


def shared_compositions() -> int:
    """How many compositions took their defaults list and merge from an earlier job of their batch."""
    return _STATE["shared"]


def _shared_defaults_list(original: Any) -> Any:
    @functools.wraps(original)
    def create_defaults_list(repo: Any, config_name: Any, overrides_list: list[Any], prepend_hydra: bool,
                             skip_missing: bool) -> Any:
        if not _STATE["checking"]:
            return original(repo, config_name, overrides_list, prepend_hydra, skip_missing)
        groups, values = _split(repo, overrides_list)
        sources = tuple((s.provider, s.scheme(), s.path) for s in repo.get_sources())
        key = (config_name, prepend_hydra, skip_missing, sources, groups)
        if groups is None or key not in _SHARED:
            made = original(repo, config_name, overrides_list, prepend_hydra, skip_missing)
            if groups is not None:
                _SHARED[key] = {"defaults": made, "config": None}
            return made
        made = _SHARED[key]["defaults"]
        choices = copy.copy(made.overrides)  # the choices Hydra made, with this job's own config values
        choices.config_overrides = values
        _STATE["shared"] += 1
        return DefaultsList(defaults=list(made.defaults), config_overrides=values, defaults_tree=made.defaults_tree,
                            overrides=choices)

    setattr(create_defaults_list, MARK, True)
    return create_defaults_list


def _entry_of(defaults: list[Any]) -> dict[str, Any] | None:
    """The shared entry whose defaults list ``defaults`` is (the very elements), during a batch check."""
    if not _STATE["checking"]:
        return None
    for entry in _SHARED.values():
        kept = entry["defaults"].defaults
        if len(kept) == len(defaults) and all(a is b for a, b in zip(kept, defaults, strict=True)):
            return entry
    return None


def _shared_merge(original: Any) -> Any:
    @functools.wraps(original)
    def _compose_config_from_defaults_list(self: Any, defaults: list[Any], repo: Any) -> Any:
        entry = _entry_of(defaults)
        if entry is None:  # not during a batch check, or a defaults list of Hydra's own making
            return original(self, defaults, repo)
        if entry["config"] is None:  # the first job of these choices: merged now, kept unchanged
            merged = original(self, defaults, repo)
            entry["config"] = copy.deepcopy(merged)
            return merged
        return copy.deepcopy(entry["config"])  # Hydra applies the job's overrides to it

    setattr(_compose_config_from_defaults_list, MARK, True)
    return _compose_config_from_defaults_list


def share_group_compositions() -> bool:
    """Wrap Hydra's defaults list and merge as the module docstring says (idempotent)."""
    if not supported():
        return False
    if not getattr(config_loader_impl.create_defaults_list, MARK, False):
        config_loader_impl.create_defaults_list = _shared_defaults_list(config_loader_impl.create_defaults_list)
    if not getattr(ConfigLoaderImpl._compose_config_from_defaults_list, MARK, False):
        ConfigLoaderImpl._compose_config_from_defaults_list = _shared_merge(
            ConfigLoaderImpl._compose_config_from_defaults_list)
    return True
