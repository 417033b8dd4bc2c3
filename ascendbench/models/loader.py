"""Loading a diffusers/transformers-style model: a checkpoint directory, a file, or random init."""

from __future__ import annotations

import json
from typing import Any, Mapping

import torch
from safetensors.torch import load_file

from ascendbench.config import plain
from ascendbench.errors import ConfigError, WeightsLoadError
from ascendbench.models.base import ModelLoader, import_class
from ascendbench.models.memory import MemoryEstimate, check_host_memory, count_meta_params
from ascendbench.models.sources import ResolvedSource


def mismatch_text(missing: Any, unexpected: Any, shapes: list[str]) -> str | None:
    """The keys that keep a state dict from loading strictly, in words (``None``: it fits)."""
    missing, unexpected = sorted(missing), sorted(unexpected)
    if not (missing or unexpected or shapes):
        return None
    return (f"{len(missing)} missing keys (first: {missing[:5]}), {len(unexpected)} unexpected "
            f"keys (first: {unexpected[:5]}), {len(shapes)} shape mismatches (first: {shapes[:3]})")


def strict_mismatch(expected: Mapping[str, Any], state: Mapping[str, Any]) -> str | None:
    """:func:`mismatch_text` of ``state`` loaded into a module whose state dict is ``expected``."""
    shapes = [f"{k} {tuple(state[k].shape)} vs {tuple(expected[k].shape)}"
              for k in sorted(set(state) & set(expected)) if state[k].shape != expected[k].shape]
    return mismatch_text(set(expected) - set(state), set(state) - set(expected), shapes)


class DiffusersLoader(ModelLoader):
    """Loads ``class_path`` from a directory, or ``architecture`` filled from a state dict."""

    def __init__(self, class_path: str, architecture: Mapping[str, Any] | None = None,
                 subfolder: str | None = None, allow_pickle: bool = False) -> None:
        self.class_path = class_path
        self.architecture = dict(plain(architecture) or {})
        self.subfolder = subfolder
        self.allow_pickle = bool(allow_pickle)

    def _build(self, cls: Any) -> torch.nn.Module:
        if hasattr(cls, "from_config"):
            return cls.from_config(self.architecture)
        return cls(**self.architecture)

    def random_init(self, seed: int, source: str | None, revision: str | None) -> tuple[Any, dict]:
        """The architecture built from ``architecture`` after the memory check."""
        cls = import_class(self.class_path)
        count = count_meta_params(lambda: self._build(cls))
        estimate = MemoryEstimate(f"random-init {self.class_path}", {"model": count}, "float32")
        check_host_memory(estimate, "Use the tiny twin of this model (`model=tiny_<name>`) or a "
                          "smaller architecture.", skip_key=None)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self._build(cls), {}

    def from_weights(self, found: ResolvedSource, seed: int) -> tuple[Any, dict]:
        """``from_pretrained`` of a directory, strictly; a single file into the architecture."""
        cls = import_class(self.class_path)
        try:
            if found.kind == "dir":
                self._check_class_name(found, cls)
                module, info = cls.from_pretrained(
                    str(found.path), subfolder=self.subfolder, torch_dtype=torch.float32,
                    use_safetensors=not found.pickle, local_files_only=True,
                    output_loading_info=True)
                wrong = mismatch_text(info.get("missing_keys") or [], info.get("unexpected_keys")
                                      or [], [str(m) for m in info.get("mismatched_keys") or []])
                if wrong:  # diffusers fills missing weights with random values and only warns
                    raise WeightsLoadError(
                        f"{found.path} does not fit {self.class_path} strictly: {wrong}. Missing "
                        "weights would run as random values: point model.source at the complete "
                        "checkpoint of this architecture, or run `model.weights=random`.")
                return module, {}
            return self._single_file(cls, found), {}
        except (WeightsLoadError, ConfigError):
            raise
        except Exception as exc:  # diffusers/safetensors raise OSError, ValueError, ...
            raise WeightsLoadError(
                f"the weights at {found.path} could not be loaded into {self.class_path}: "
                f"{type(exc).__name__}: {str(exc)[:400]}. Check that the files are complete "
                "(re-download them) and belong to this architecture, or run `model.weights=random`."
            ) from exc

    def _single_file(self, cls: Any, found: ResolvedSource) -> torch.nn.Module:
        module = cls.from_config(self.architecture)
        state = _read_pickle(found.path) if found.pickle else load_file(str(found.path))
        wrong = strict_mismatch(module.state_dict(), state)
        if wrong:
            raise WeightsLoadError(
                f"{found.path} does not fit {self.class_path} with model.loader.architecture: "
                f"{wrong}. Point model.source at the matching checkpoint or fix the architecture "
                "in the model config.")
        module.load_state_dict(state, strict=True)
        return module

    def _check_class_name(self, found: ResolvedSource, cls: Any) -> None:
        """The directory's config.json must name this class (diffusers would only warn)."""
        root = found.path / self.subfolder if self.subfolder else found.path
        try:
            declared = json.loads((root / "config.json").read_text()).get("_class_name")
        except (OSError, ValueError) as exc:
            raise WeightsLoadError(f"{root / 'config.json'} cannot be read as JSON ({exc}); "
                                   "re-download the model directory or point model.source at a "
                                   "complete one.") from exc
        if declared and declared != cls.__name__:
            raise WeightsLoadError(
                f"{root} holds a {declared} checkpoint (config.json _class_name) but "
                f"model.loader.class_path={self.class_path} builds {cls.__name__}: this is a "
                "checkpoint of another architecture. Point model.source at a checkpoint of this "
                "model, or choose the model config that matches it (`model=...`).")


def _read_pickle(path: Any) -> Mapping[str, torch.Tensor]:
    """A state dict from a pickle file the user allowed, through torch's restricted unpickler."""
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):  # Lightning
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise WeightsLoadError(f"{path} holds a {type(state).__name__}, not a state dict of "
                               "tensors; save the model's state_dict() (preferably as safetensors) "
                               "and point model.source at it.")
    return state
