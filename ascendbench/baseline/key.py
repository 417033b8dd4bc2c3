"""The content hash naming a cached reference: what changes its outputs (not device or dtype)."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ascendbench.baseline.store import file_digest
from ascendbench.compat import library_versions
from ascendbench.config import plain
from ascendbench.precision import dtype_name

FORMAT = 1  # bump when the cached files change meaning
VERSIONED = ("torch", "diffusers", "transformers", "ascendbench")
REFERENCE_PATCH_KEY = "reference"


def reference_patches(specs: Any) -> list[Any]:
    """The ``model.patches`` entries declared ``reference: true`` (that key removed)."""
    return [{k: v for k, v in entry.items() if k != REFERENCE_PATCH_KEY}
            for entry in plain(specs) or []
            if isinstance(entry, Mapping) and entry.get(REFERENCE_PATCH_KEY) is True]


def source_digest(dotted_paths: list[str | None]) -> dict[str, str | None]:
    """SHA256 of the file defining each class (editing an editable install re-keys too)."""
    digests: dict[str, str | None] = {}
    for path in filter(None, dotted_paths):
        module, _, attr = path.rpartition(".")
        try:
            source = inspect.getsourcefile(getattr(importlib.import_module(module), attr))
            digests[path] = file_digest(source)["sha256"] if source else None
        except Exception:  # not importable here, a builtin, or no file
            digests[path] = None
    return digests


def weights_identity(weights: Mapping[str, Any], subfolder: str | None = None) -> dict[str, Any]:
    """What identifies the weights: digest (+ config.json) when loaded, else the init seed."""
    if weights.get("kind") != "loaded":
        return {"kind": "random-init", "init_seed": weights.get("init_seed")}
    source = weights.get("source")
    config = Path(source) / (subfolder or "") / "config.json" if source else None
    found = config is not None and config.is_file()
    identity = {"kind": "loaded", "digest": weights.get("digest"),
                "config_json": file_digest(config)["sha256"] if found else None}
    if not identity["digest"]:  # a loader without a content digest: at least tell sources apart
        identity["source"] = source
    return identity


def key_material(cfg: DictConfig, weights: Mapping[str, Any], inputs: Mapping[str, Any],
                 precision: torch.dtype) -> dict[str, Any]:
    """What the cache key hashes (kept in ``meta.json``; ``weights``, ``inputs``: the record's)."""
    ignore = set(cfg.baseline.get("key_ignore_preset") or ())
    loader = plain(cfg.model.loader)
    spec = loader or {}
    return {
        "format": FORMAT, "loader": loader, "task": plain(cfg.model.task),
        "patches": reference_patches(cfg.model.get("patches")),
        "weights": weights_identity(weights, spec.get("subfolder")),
        "preset": {k: v for k, v in plain(cfg.preset).items() if k not in ignore},
        "seed": int(cfg.seed), "inputs": {k: dict(v) for k, v in sorted(inputs.items())},
        "precision": dtype_name(precision), "versions": library_versions(VERSIONED),
        "sources": source_digest([spec.get("_target_"), spec.get("class_path"),
                                  OmegaConf.select(cfg, "model.task._target_")]),
    }


def cache_key(material: Mapping[str, Any]) -> str:
    """SHA256 (first 32 hex digits) of the canonical JSON of ``material``."""
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]
