"""Loading a model by ``_target_``: weights from ``model.source`` or the real architecture, seeded.

``model.weights``:
  * ``auto``     -- load the weights if they are found, else randomly initialise the architecture;
  * ``required`` -- load the weights or fail with a message saying how to get them;
  * ``random``   -- always the seeded random initialisation (nothing is looked up).
Whatever happens is written into the record as ``weights: {kind: loaded | random-init, ...}``.
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import ConfigError, WeightsLoadError, WeightsNotFoundError
from ascendbench.models.sources import NotFound, ResolvedSource, files_digest, resolve_source

log = logging.getLogger(__name__)

WEIGHTS_MODES = ("auto", "required", "random")


@dataclass
class LoadedModel:
    """A model on the CPU in float32, with the provenance of its weights."""

    module: torch.nn.Module
    weights: dict[str, Any]
    load_seconds: float


def import_class(class_path: str) -> type:
    """``package.module.Class`` -> the class, or a :class:`ConfigError` naming the path."""
    module_name, _, attr = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f"model.loader.class_path={class_path!r} cannot be imported ({exc}). Give a full dotted "
            "path to a class of an installed package, e.g. diffusers.AutoencoderKLFlux2."
        ) from exc


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value


class DiffusersLoader:
    """Loads a diffusers/transformers-style model class (``from_pretrained``/``from_config``).

    Args:
        class_path: dotted path of the model class, e.g. ``diffusers.AutoencoderKLFlux2``.
        architecture: constructor config of the real checkpoint (random init and single files).
        subfolder: subfolder of a repository or directory holding ``config.json`` and weights.
    """

    def __init__(self, class_path: str, architecture: Mapping[str, Any] | None = None,
                 subfolder: str | None = None) -> None:
        self.class_path = class_path
        self.architecture = dict(_plain(architecture) or {})
        self.subfolder = subfolder

    def load(self, source: str | None, weights: str = "auto", init_seed: int = 42,
             revision: str | None = None) -> LoadedModel:
        """Load per the ``weights`` mode; see the module docstring."""
        if weights not in WEIGHTS_MODES:
            raise ConfigError(
                f"model.weights={weights!r} is not allowed; use one of {', '.join(WEIGHTS_MODES)} "
                "(e.g. `model.weights=random` to run the architecture with random weights)."
            )
        cls = import_class(self.class_path)
        start = time.perf_counter()
        if weights == "random":
            module, info = self._random(cls, init_seed, source, "model.weights=random")
        else:
            found = resolve_source(source, self.subfolder, revision)
            module, info = self._from_found(cls, found, weights, init_seed, source)
        info["num_params"] = sum(p.numel() for p in module.parameters())
        return LoadedModel(module.eval(), info, time.perf_counter() - start)

    def _from_found(self, cls: type, found: Any, weights: str, init_seed: int, source: str | None):
        if isinstance(found, ResolvedSource):
            return self._load(cls, found), _loaded_info(found)
        if weights == "required":
            raise WeightsNotFoundError(_not_found_message(source, found))
        log.warning("no weights for model.source=%s (%s); using a seeded random initialisation "
                    "of the real architecture (model.weights=auto)", source, found.reason)
        return self._random(cls, init_seed, source, found.reason)

    def _random(self, cls: type, seed: int, source: str | None, why: str):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            module = cls.from_config(self.architecture) if hasattr(cls, "from_config") else cls(**self.architecture)
        info = {"kind": "random-init", "source": source, "digest": None, "init_seed": int(seed), "reason": why}
        return module, info

    def _load(self, cls: type, found: ResolvedSource) -> torch.nn.Module:
        try:
            if found.kind == "dir":
                return cls.from_pretrained(str(found.path), subfolder=self.subfolder, torch_dtype=torch.float32,
                                           use_safetensors=True, local_files_only=True)
            return self._load_single_file(cls, found)
        except (WeightsLoadError, ConfigError):
            raise
        except Exception as exc:  # diffusers/safetensors raise OSError, ValueError, SafetensorError...
            raise WeightsLoadError(
                f"the weights at {found.path} could not be loaded into {self.class_path}: "
                f"{type(exc).__name__}: {str(exc)[:400]}. Check that the files are complete (re-download "
                "them) and belong to this architecture, or run `model.weights=random`."
            ) from exc

    def _load_single_file(self, cls: type, found: ResolvedSource) -> torch.nn.Module:
        from safetensors.torch import load_file

        module = cls.from_config(self.architecture)
        state = load_file(str(found.path))
        _check_state_dict(module.state_dict(), state, found, self.class_path)
        module.load_state_dict(state, strict=True)
        return module


def _check_state_dict(expected: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor],
                      found: ResolvedSource, class_path: str) -> None:
    """Strict-load check listing missing, unexpected and mis-shaped tensors all at once."""
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [f"{k} {tuple(state[k].shape)} vs {tuple(expected[k].shape)}"
              for k in sorted(set(state) & set(expected)) if state[k].shape != expected[k].shape]
    if missing or unexpected or shapes:
        raise WeightsLoadError(
            f"{found.path} does not fit {class_path} with model.loader.architecture: "
            f"{len(missing)} missing keys (first: {missing[:5]}), {len(unexpected)} unexpected keys "
            f"(first: {unexpected[:5]}), {len(shapes)} shape mismatches (first: {shapes[:3]}). Point "
            "model.source at the matching checkpoint or fix the architecture in the model config."
        )


def _loaded_info(found: ResolvedSource) -> dict[str, Any]:
    return {
        "kind": "loaded",
        "source": str(found.path),
        "origin": found.origin,
        "digest": files_digest(found.files),
        "files": [p.name for p in found.files],
    }


def _not_found_message(source: str | None, found: NotFound) -> str:
    return (
        f"model.weights=required but no weights were found for model.source={source!r}: {found.reason}. "
        "Download them first (e.g. `huggingface-cli download <hub id> --local-dir <dir>`, with "
        "HF_ENDPOINT=<mirror url> where the hub is not reachable) and pass `model.source=<dir>`, or run "
        "`model.weights=auto` / `model.weights=random` to use the real architecture with random weights."
    )
