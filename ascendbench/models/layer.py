"""One layer read out of a safetensors checkpoint by tensor-name prefix; no model is built."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

import torch
from hydra.utils import instantiate
from safetensors import safe_open

from ascendbench.config import plain
from ascendbench.errors import ConfigError, WeightsLoadError
from ascendbench.models import memory
from ascendbench.models.base import ModelLoader
from ascendbench.models.loader import strict_mismatch
from ascendbench.models.sources import ResolvedSource
from ascendbench.precision import dtype_name


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
    """Builds ``module`` (a ``_target_`` node), filled strictly with the tensors under prefix."""

    def __init__(self, module: Mapping[str, Any], prefix: str, filename: str | None = None,
                 subfolder: str | None = None, memory_check: bool = True) -> None:
        self.module_spec = plain(module)
        if not isinstance(self.module_spec, Mapping) or not self.module_spec.get("_target_"):
            raise ConfigError("model.loader.module needs a `_target_` naming a torch.nn module "
                              "class (e.g. torch.nn.Conv3d) and its constructor arguments.")
        self.prefix, self.filename, self.subfolder = prefix, filename, subfolder
        self.memory_check = bool(memory_check)

    def random_init(self, seed: int, source: str | None, revision: str | None) -> tuple[Any, dict]:
        """The module with its default initialisation drawn from ``torch.manual_seed(seed)``."""
        target = self.module_spec["_target_"]
        if self.memory_check:
            numel = memory.count_meta_params(lambda: instantiate(self.module_spec))
            estimate = memory.MemoryEstimate(f"module {target}", {"module": numel}, "float32")
            memory.check_host_memory(estimate, "Use a smaller module configuration.")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = instantiate(self.module_spec)
        if not isinstance(module, torch.nn.Module):
            raise ConfigError(f"model.loader.module._target_={target!r} built a "
                              f"{type(module).__name__}, not a torch.nn.Module.")
        return module.to(torch.float32), {}

    def from_weights(self, found: ResolvedSource, seed: int) -> tuple[Any, dict]:
        """The module filled strictly with the tensors under ``prefix`` of the checkpoint file."""
        module, _ = self.random_init(seed, None, None)
        path = self.pick_file(found)
        with safe_open(str(path), framework="pt") as handle:
            state = {name[len(self.prefix):]: handle.get_tensor(name) for name in handle.keys()
                     if name.startswith(self.prefix)}
        wrong = strict_mismatch(module.state_dict(), state)
        if wrong or not state:
            spec = ", ".join(f"{k}={v}" for k, v in self.module_spec.items() if k != "_target_")
            raise WeightsLoadError(
                f"the tensors under prefix {self.prefix!r} in {path} do not fit "
                f"{self.module_spec['_target_']} ({spec}): {len(state)} found, {wrong}. Fix "
                "model.loader.prefix or the module's arguments.")
        module.load_state_dict(state, strict=True)
        return module, {"source": str(path), "origin": "safetensors tensors by prefix",
                        "prefix": self.prefix, "digest": tensors_digest(state),
                        "files": [path.name],
                        "tensors": {self.prefix + n: _stats(t) for n, t in sorted(state.items())}}

    def loaded_info(self, found: ResolvedSource) -> dict[str, Any]:
        """Only the tensors read are described (:meth:`from_weights`), not the whole files."""
        return {"kind": "loaded"}

    def pick_file(self, found: ResolvedSource) -> Path:
        """The checkpoint: the source when a file, else ``filename``, else the one under prefix."""
        if found.kind == "file":
            return found.path
        files = [f for f in found.files if (f.name == self.filename if self.filename
                                            else memory.safetensors_numel([f], self.prefix) > 0)]
        if len(files) != 1:
            raise WeightsLoadError(
                f"model.loader.prefix={self.prefix!r}: expected one checkpoint file under "
                f"{found.path} holding it, found {len(files)} among "
                f"{[f.name for f in found.files]}. Set model.loader.filename to the right file.")
        return files[0]
