"""One layer read straight out of a safetensors checkpoint by tensor-name prefix; no model is built.

``model.loader.module`` names the ``torch.nn`` module by ``_target_`` (with its constructor
arguments); ``model.loader.prefix`` selects the tensors (``decoder.conv_in.conv.`` ->
``decoder.conv_in.conv.weight`` and ``.bias`` of the LTX-Video VAE). The tensors are read from the
file one by one (``safe_open``), stripped of the prefix and loaded strictly: every missing,
unexpected or mis-shaped tensor is listed. The loader node sets ``_recursive_: false`` so that Hydra
hands the module spec over instead of building the module early.

The record's ``weights`` carries the file, the tensors read (shape, stored dtype, mean, std) and a
digest of exactly those bytes.
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path
from typing import Any, Mapping

import torch
from hydra.utils import instantiate

from ascendbench.errors import ConfigError, WeightsLoadError, WeightsNotFoundError
from ascendbench.models.base import ModelLoader
from ascendbench.models.components import plain
from ascendbench.models.loader import WEIGHTS_MODES, LoadedModel, count_params
from ascendbench.models.memory import MemoryEstimate, check_host_memory, count_meta_params, safetensors_numel
from ascendbench.models.sources import ResolvedSource, resolve_source
from ascendbench.precision import dtype_name

log = logging.getLogger(__name__)


def read_prefixed(path: Path, prefix: str) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors file whose names start with ``prefix``, keyed by the rest of the name."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        return {name[len(prefix):]: handle.get_tensor(name) for name in handle.keys() if name.startswith(prefix)}


def tensors_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA256 over the names and stored bytes of tensors (sorted by name), as ``sha256:<hex>``."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].contiguous().view(torch.uint8).numpy().tobytes())
    return "sha256:" + digest.hexdigest()


def _stats(tensor: torch.Tensor) -> dict[str, Any]:
    wide = tensor.to(torch.float64)
    return {"shape": list(tensor.shape), "dtype": dtype_name(tensor.dtype),
            "mean": float(wide.mean()), "std": float(wide.std()) if wide.numel() > 1 else 0.0}


class SafetensorsLayerLoader(ModelLoader):
    """Builds ``module`` (by ``_target_``) and fills it with the tensors under ``prefix``.

    Args:
        module: the module's config: ``_target_`` (e.g. ``torch.nn.Conv3d``) and constructor arguments.
        prefix: tensor-name prefix in the checkpoint, ending with a dot (``decoder.conv_in.conv.``).
        filename: the file to read when the source resolves to a directory with several.
        subfolder: subfolder of the directory or hub repository (``vae``).
        memory_check: refuse before allocating when the module would not fit in host memory.
    """

    def __init__(self, module: Mapping[str, Any], prefix: str, filename: str | None = None,
                 subfolder: str | None = None, memory_check: bool = True) -> None:
        self.module_spec = plain(module)
        if not isinstance(self.module_spec, Mapping) or not self.module_spec.get("_target_"):
            raise ConfigError(
                "model.loader.module needs a `_target_` naming a torch.nn module class (e.g. torch.nn.Conv3d) "
                "and its constructor arguments."
            )
        self.prefix = prefix
        self.filename = filename
        self.subfolder = subfolder
        self.memory_check = bool(memory_check)

    def build(self, seed: int) -> torch.nn.Module:
        """The module with its default initialisation drawn from ``torch.manual_seed(seed)``."""
        if self.memory_check:
            numel = count_meta_params(lambda: instantiate(self.module_spec))
            check_host_memory(MemoryEstimate(f"module {self.module_spec['_target_']}", {"module": numel}, "float32"),
                              "Use a smaller module configuration.")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            module = instantiate(self.module_spec)
        if not isinstance(module, torch.nn.Module):
            raise ConfigError(f"model.loader.module._target_={self.module_spec['_target_']!r} built a "
                              f"{type(module).__name__}, not a torch.nn.Module.")
        return module.to(torch.float32).eval()

    def load(self, source: str | None, weights: str = "auto", init_seed: int = 42,
             revision: str | None = None) -> LoadedModel:
        """Load per ``model.weights``; ``auto`` falls back to the seeded initialisation."""
        if weights not in WEIGHTS_MODES:
            raise ConfigError(f"model.weights={weights!r} is not allowed; use one of {', '.join(WEIGHTS_MODES)}.")
        start = time.perf_counter()
        module = self.build(init_seed)
        found = None if weights == "random" else resolve_source(source, self.subfolder, revision)
        if isinstance(found, ResolvedSource):
            info = self._fill(module, self.pick_file(found))
        elif weights == "required":
            raise WeightsNotFoundError(
                f"model.weights=required but no checkpoint was found for model.source={source!r}: {found.reason}. "
                "Download it (e.g. `huggingface-cli download <hub id> --include '<subfolder>/*' --local-dir <dir>`) "
                "and pass `model.source=<file or dir>`, or run `model.weights=random`."
            )
        else:
            why = "model.weights=random" if found is None else found.reason
            if found is not None:
                log.warning("no weights for model.source=%s (%s); the layer keeps its seeded initialisation",
                            source, why)
            info = {"kind": "random-init", "source": source, "digest": None, "init_seed": int(init_seed), "reason": why}
        info["num_params"] = count_params(module)
        return LoadedModel(module, info, time.perf_counter() - start)

    def pick_file(self, found: ResolvedSource) -> Path:
        """The checkpoint file: ``model.source`` itself when it is a file (whatever ``filename`` says), else
        ``filename`` if set, else the one file holding tensors under ``prefix``."""
        if found.kind == "file":
            return found.path
        files = list(found.files)
        if self.filename:
            files = [f for f in files if f.name == self.filename]
        else:
            files = [f for f in files if safetensors_numel([f], self.prefix) > 0]
        if len(files) != 1:
            names = [f.name for f in found.files]
            raise WeightsLoadError(
                f"model.loader.prefix={self.prefix!r}: expected one checkpoint file under {found.path} holding it, "
                f"found {len(files)} among {names}. Set model.loader.filename to the right file."
            )
        return files[0]

    def _fill(self, module: torch.nn.Module, path: Path) -> dict[str, Any]:
        state = read_prefixed(path, self.prefix)
        expected = module.state_dict()
        missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
        shapes = [f"{k} {tuple(state[k].shape)} vs {tuple(expected[k].shape)}"
                  for k in sorted(set(state) & set(expected)) if state[k].shape != expected[k].shape]
        if missing or unexpected or shapes or not state:
            raise WeightsLoadError(
                f"the tensors under prefix {self.prefix!r} in {path} do not fit {self.module_spec['_target_']} "
                f"({_args(self.module_spec)}): {len(state)} found, missing {missing[:5]}, unexpected {unexpected[:5]}, "
                f"shape mismatches {shapes[:3]}. Fix model.loader.prefix or the module's arguments."
            )
        module.load_state_dict(state, strict=True)
        return {"kind": "loaded", "source": str(path), "origin": "safetensors tensors by prefix", "prefix": self.prefix,
                "digest": tensors_digest(state), "files": [path.name],
                "tensors": {self.prefix + name: _stats(t) for name, t in sorted(state.items())}}


def _args(spec: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in spec.items() if k != "_target_")
