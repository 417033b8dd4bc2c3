"""The content hash that names a cached reference (the reference precision: :mod:`ascendbench.precision`).

The key covers everything that changes the reference outputs and nothing else:

* the model: loader config (class path, architecture), task config, and the weights -- their SHA256
  digest plus the ``config.json`` beside them, or the random-init seed;
* the inputs: preset keys (minus ``baseline.key_ignore_preset``), the seed, and the shape, dtype and
  SHA256 of every input tensor the task built;
* the reference precision, the library versions (torch, diffusers, transformers, ascendbench) and the
  SHA256 of the source files defining the task, the loader and the model class.

The device, the device dtype, the bench, metric and compare settings and the model's name stay out, so
a sweep over devices or half dtypes reuses one reference.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ascendbench.baseline.child import reference_patches
from ascendbench.compat import library_versions
from ascendbench.precision import dtype_name

FORMAT = 1  # bump when the cached files change meaning
VERSIONED = ("torch", "diffusers", "transformers", "ascendbench")


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def source_digest(dotted_paths: list[str | None]) -> dict[str, str | None]:
    """SHA256 of the source file defining each class (task, loader, model class): code edits re-key.

    Library versions alone miss edits of an editable install; a class whose file cannot be found
    maps to ``None``.
    """
    digests: dict[str, str | None] = {}
    for path in filter(None, dotted_paths):
        module, _, attr = path.rpartition(".")
        try:
            source = inspect.getsourcefile(getattr(importlib.import_module(module), attr))
            digests[path] = "sha256:" + hashlib.sha256(Path(source).read_bytes()).hexdigest() if source else None
        except Exception:  # not importable here, a builtin, or no file: the versions still cover it
            digests[path] = None
    return digests


def _config_json_digest(weights: Mapping[str, Any], subfolder: str | None) -> str | None:
    source = weights.get("source")
    if weights.get("kind") != "loaded" or not source:
        return None
    root = Path(source) / subfolder if subfolder else Path(source)
    path = root / "config.json" if root.is_dir() else None
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest() if path and path.is_file() else None


def weights_identity(weights: Mapping[str, Any], subfolder: str | None = None) -> dict[str, Any]:
    """What identifies the weights: digest (+ config.json) when loaded, the seed when random-init."""
    if weights.get("kind") == "loaded":
        identity = {"kind": "loaded", "digest": weights.get("digest"),
                    "config_json": _config_json_digest(weights, subfolder)}
        if not identity["digest"]:  # a loader without a content digest: at least tell sources apart
            identity["source"] = weights.get("source")
        return identity
    return {"kind": "random-init", "init_seed": weights.get("init_seed")}


def key_material(cfg: DictConfig, weights: Mapping[str, Any], inputs: Mapping[str, Any],
                 precision: torch.dtype) -> dict[str, Any]:
    """Everything the cache key is the hash of (recorded beside the cached files).

    Args:
        cfg: the job config.
        weights: the record's ``weights`` entry.
        inputs: the record's ``inputs`` entry (shape, dtype, sha256 of each input tensor).
        precision: the reference dtype.
    """
    ignore = set(cfg.baseline.get("key_ignore_preset") or ())
    preset = {k: v for k, v in _plain(cfg.preset).items() if k not in ignore}
    loader = _plain(cfg.model.loader)
    return {
        "format": FORMAT,
        "loader": loader,
        "task": _plain(cfg.model.task),
        # only the patches the reference applies (``reference: true``); the device run's patches (an attention
        # backend, a dense-mask flex_attention) never reach it, so an A/B sweep over them shares one reference
        "patches": reference_patches(cfg.model.get("patches")),
        "weights": weights_identity(weights, (loader or {}).get("subfolder")),
        "preset": preset,
        "seed": int(cfg.seed),
        "inputs": {k: dict(v) for k, v in sorted(inputs.items())},
        "precision": dtype_name(precision),
        "versions": library_versions(VERSIONED),
        "sources": source_digest([(loader or {}).get("_target_"), (loader or {}).get("class_path"),
                                  OmegaConf.select(cfg, "model.task._target_")]),
    }


def cache_key(material: Mapping[str, Any]) -> str:
    """SHA256 (first 32 hex digits) of the canonical JSON of ``material``."""
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]
