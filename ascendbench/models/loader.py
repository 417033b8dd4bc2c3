"""Loading a model by ``_target_``: weights from ``model.source`` or the real architecture, seeded.

``model.weights``:
  * ``auto``     -- load the weights if they are found, else randomly initialise the architecture;
  * ``required`` -- load the weights or fail with a message saying how to get them;
  * ``random``   -- always the seeded random initialisation (nothing is looked up).
Whatever happens is written into the record as ``weights: {kind: loaded | random-init, ...}``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import ConfigError, WeightsLoadError, WeightsNotFoundError
from ascendbench.models.base import ModelLoader, import_class
from ascendbench.models.sources import NotFound, ResolvedSource, files_digests, resolve_source

log = logging.getLogger(__name__)

WEIGHTS_MODES = ("auto", "required", "random")


@dataclass
class LoadedModel:
    """A model on the CPU in float32, with the provenance of its weights."""

    module: torch.nn.Module
    weights: dict[str, Any]
    load_seconds: float


def count_params(model: Any) -> int:
    """Parameters of a ``torch.nn.Module``, or summed over the module components of a pipeline."""
    if isinstance(model, torch.nn.Module):
        return int(sum(p.numel() for p in model.parameters()))
    components = getattr(model, "components", None) or {}
    return int(sum(count_params(c) for c in components.values() if isinstance(c, torch.nn.Module)))


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value


class DiffusersLoader(ModelLoader):
    """Loads a diffusers/transformers-style model class (``from_pretrained``/``from_config``).

    Args:
        class_path: dotted path of the model class, e.g. ``diffusers.AutoencoderKLFlux2``.
        architecture: constructor config of the real checkpoint (random init and single files).
        subfolder: subfolder of a repository or directory holding ``config.json`` and weights.
        allow_pickle: read pickle checkpoints (``.bin``/``.pt``/``.ckpt``) with
            ``torch.load(weights_only=True)``; refused by default. ``trust_remote_code`` is never passed.
    """

    def __init__(self, class_path: str, architecture: Mapping[str, Any] | None = None,
                 subfolder: str | None = None, allow_pickle: bool = False) -> None:
        self.class_path = class_path
        self.architecture = dict(_plain(architecture) or {})
        self.subfolder = subfolder
        self.allow_pickle = bool(allow_pickle)

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
            found = resolve_source(source, self.subfolder, revision, allow_pickle=self.allow_pickle)
            module, info = self._from_found(cls, found, weights, init_seed, source)
        info["num_params"] = count_params(module)
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
        from ascendbench.models.memory import MemoryEstimate, check_host_memory

        def build() -> torch.nn.Module:
            return cls.from_config(self.architecture) if hasattr(cls, "from_config") else cls(**self.architecture)

        count = meta_count(cls, self.architecture, build)
        estimate = MemoryEstimate(f"random-init {self.class_path}", {"model": count}, "float32")
        check_host_memory(estimate, "Use the tiny twin of this model (`model=tiny_<name>`) or a smaller architecture.",
                          skip_key=None)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            module = build()
        info = {"kind": "random-init", "source": source, "digest": None, "init_seed": int(seed), "reason": why}
        return module, info

    def _load(self, cls: type, found: ResolvedSource) -> torch.nn.Module:
        try:
            if found.kind == "dir":
                _check_class_name(found, self.subfolder, cls, self.class_path)
                module, info = cls.from_pretrained(str(found.path), subfolder=self.subfolder,
                                                   torch_dtype=torch.float32, use_safetensors=not found.pickle,
                                                   local_files_only=True, output_loading_info=True)
                _check_loading_info(info, found, self.class_path)
                return module
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
        state = _read_pickle(found.path) if found.pickle else load_file(str(found.path))
        _check_state_dict(module.state_dict(), state, found, self.class_path)
        module.load_state_dict(state, strict=True)
        return module


_META_COUNTS: dict[tuple[type, str], int] = {}  # (class, architecture as JSON) -> parameters and buffers


def meta_count(cls: type, architecture: Mapping[str, Any], build: Any) -> int:
    """:func:`~ascendbench.models.memory.count_meta_params` of ``build``, counted once per process for a class
    and architecture (a meta-device build costs about 9 ms for a tiny twin, every job of a sweep); an
    architecture that is not plain JSON is counted every time."""
    from ascendbench.models.memory import count_meta_params

    try:
        key = (cls, json.dumps(architecture, sort_keys=True, allow_nan=False))
    except (TypeError, ValueError):
        return count_meta_params(build)
    if key not in _META_COUNTS:
        _META_COUNTS[key] = count_meta_params(build)
    return _META_COUNTS[key]


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


def _read_pickle(path: Any) -> Mapping[str, torch.Tensor]:
    """A state dict from a pickle file the user allowed, through torch's restricted unpickler."""
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):  # Lightning-style .ckpt
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise WeightsLoadError(f"{path} holds a {type(state).__name__}, not a state dict of tensors; save "
                               "the model's state_dict() (preferably as safetensors) and point model.source at it.")
    return state


def _check_class_name(found: ResolvedSource, subfolder: str | None, cls: type, class_path: str) -> None:
    """The directory's config.json must name this class (diffusers would only warn)."""
    root = found.path / subfolder if subfolder else found.path
    try:
        declared = json.loads((root / "config.json").read_text()).get("_class_name")
    except (OSError, ValueError) as exc:
        raise WeightsLoadError(f"{root / 'config.json'} cannot be read as JSON ({exc}); re-download the "
                               "model directory or point model.source at a complete one.") from exc
    if declared and declared != cls.__name__:
        raise WeightsLoadError(
            f"{root} holds a {declared} checkpoint (config.json _class_name) but model.loader.class_path="
            f"{class_path} builds {cls.__name__}: this is a checkpoint of another architecture. Point model.source "
            "at a checkpoint of this model, or choose the model config that matches it (`model=...`)."
        )


def _check_loading_info(info: Mapping[str, Any], found: ResolvedSource, class_path: str) -> None:
    """Strict load for directories: diffusers fills missing weights with random values and only warns."""
    missing, unexpected = sorted(info.get("missing_keys") or []), sorted(info.get("unexpected_keys") or [])
    mismatched = [str(m) for m in info.get("mismatched_keys") or []]
    if missing or unexpected or mismatched:
        raise WeightsLoadError(
            f"{found.path} does not fit {class_path} strictly: {len(missing)} missing keys (first: "
            f"{missing[:5]}), {len(unexpected)} unexpected keys (first: {unexpected[:5]}), {len(mismatched)} "
            f"shape mismatches (first: {mismatched[:3]}). Missing weights would run as random values: point "
            "model.source at the complete checkpoint of this architecture, or run `model.weights=random`."
        )


def _loaded_info(found: ResolvedSource) -> dict[str, Any]:
    digest, sha256sum, sizes = files_digests(found.files)  # one read: the digest and each file's own sha256sum
    return {
        "kind": "loaded",
        "source": str(found.path),
        "origin": found.origin,
        "digest": digest,
        "sha256sum": sha256sum,
        "file_bytes": sizes,
        "format": "pickle" if found.pickle else "safetensors",
        "files": [p.name for p in found.files],
    }


def _not_found_message(source: str | None, found: NotFound) -> str:
    return (
        f"model.weights=required but no weights were found for model.source={source!r}: {found.reason}. "
        "Download them first (e.g. `huggingface-cli download <hub id> --local-dir <dir>`, with "
        "HF_ENDPOINT=<mirror url> where the hub is not reachable) and pass `model.source=<dir>`, or run "
        "`model.weights=auto` / `model.weights=random` to use the real architecture with random weights."
    )
