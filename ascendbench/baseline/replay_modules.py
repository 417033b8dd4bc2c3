"""The modules the replay re-runs, rebuilt on ``meta`` with checkpoint or exported tensors."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch
from hydra.utils import get_class
from safetensors import safe_open

from ascendbench.compare.files import save_tensors
from ascendbench.compare.select import named_modules, normalize_spec, select_modules
from ascendbench.errors import ConfigError

log = logging.getLogger(__name__)

# The packages whose classes the replay process may build (the request is data).
ALLOWED_PACKAGES = ("diffusers", "transformers", "torch", "ascendbench")


def replay_settings(cfg: Any) -> dict[str, Any]:
    """``baseline.replay`` with its defaults."""
    replay = cfg.baseline.get("replay") or {}
    precision = str(replay.get("precision") or "auto")
    if precision not in ("auto", "float64", "float32"):
        raise ConfigError(f"baseline.replay.precision={precision!r} is not allowed; use auto "
                          "(default: float64 where the largest module with its recorded call fits "
                          "in host memory, else float32), float64 or float32 (half the memory)")
    return {"calls": list(replay.get("calls") or ["first", "last"]),
            "max_capture_mb": float(replay.get("max_capture_mb") or 8192),
            "margin": float(replay.get("margin") or 32), "precision": precision}


def replay_patterns(cfg: Any) -> list[str]:
    """``baseline.replay.layers``, else ``compare.layers``, else the model's ``replay_layers``."""
    replay = cfg.baseline.get("replay") or {}
    for where, value in (("baseline.replay.layers", replay.get("layers")),
                         ("compare.layers", cfg.compare.get("layers")),
                         ("model.replay_layers", cfg.model.get("replay_layers"))):
        spec = normalize_spec(value)
        if isinstance(spec, list):
            return spec
        if spec == "all" and where == "baseline.replay.layers":
            raise ConfigError("baseline.replay.layers=all is not allowed: the replay re-runs "
                              "chosen modules one at a time; name them, e.g. "
                              "baseline.replay.layers='[decoder.up_blocks.*]'.")
    raise ConfigError(
        f"the replay reference of {cfg.model.name} has no modules to re-run: set "
        "baseline.replay.layers (or compare.layers) to module name patterns, e.g. "
        "'[transformer.transformer_blocks.*]' or '[decoder.mid_block,decoder.up_blocks.*]', or "
        "give the model a replay_layers list.")


@dataclass
class ModuleSpec:
    """How the replay process rebuilds a module (JSON): component, class, config, path, tensors."""

    name: str
    component: str
    path: str
    class_path: str
    config: dict[str, Any]
    num_params: int
    weights: str = "exported"
    why: str = ""
    files: list[dict[str, Any]] = field(default_factory=list)
    exported: str | None = None


def _component(model: Any, name: str) -> tuple[str, torch.nn.Module, str]:
    if isinstance(model, torch.nn.Module):
        return "", model, name
    component, _, inner = name.partition(".")
    module = (getattr(model, "components", None) or {}).get(component)
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"replayed module {name!r}: {component!r} is not a module component of "
                          "the pipeline")
    return component, module, inner


def module_specs(model: Any, patterns: list[str]) -> list[ModuleSpec]:
    """A :class:`ModuleSpec` of every module ``patterns`` select (in ``named_modules()`` order)."""
    specs, modules = [], named_modules(model)
    for name in select_modules(model, patterns):
        component, module, path = _component(model, name)
        config = getattr(module, "config", None)
        if config is None:
            raise ConfigError(f"{type(module).__name__} has no config: the replay can rebuild "
                              "diffusers/transformers modules only")
        plain = dict(config.to_dict() if hasattr(config, "to_dict") else config)
        kept = {k: v for k, v in plain.items() if not k.startswith("_")}
        count = sum(t.numel() for t in [*modules[name].parameters(), *modules[name].buffers()])
        cls = type(module)
        specs.append(ModuleSpec(name=name, component=component, path=path, config=kept,
                                class_path=f"{cls.__module__}.{cls.__qualname__}",
                                num_params=int(count)))
    return specs


def _checkpoint_files(weights: Mapping[str, Any] | None, component: str) -> list[Path]:
    weights = weights or {}
    if weights.get("kind") != "loaded" or weights.get("format", "safetensors") != "safetensors":
        return []
    source = Path(str(weights.get("source")))
    if source.is_file():
        return [source] if source.suffix == ".safetensors" else []
    folder = source / component if component and (source / component).is_dir() else source
    return sorted(folder.glob("*.safetensors"))


def _match_original(spec: ModuleSpec, module: torch.nn.Module, files: list[Path]) -> str | None:
    """Point ``spec`` at the checkpoint's own tensors; why it cannot be, or ``None`` when it is."""
    if not files:
        return "no safetensors checkpoint (random-init weights, or a pickle checkpoint)"
    index: dict[str, tuple[Path, tuple[int, ...]]] = {}
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            for key in handle.keys():
                index.setdefault(key, (path, tuple(handle.get_slice(key).get_shape())))
    prefix, keys = f"{spec.path}." if spec.path else "", {}
    for key, tensor in module.state_dict(keep_vars=True).items():
        found = index.get(prefix + key)
        if found is None or found[1] != tuple(tensor.shape):
            return (f"the checkpoint has no tensor {prefix + key!r} of shape "
                    f"{list(tensor.shape)} (its keys are converted on load)")
        keys.setdefault(found[0], {})[key] = prefix + key
    spec.files = [{"file": str(path), "keys": mapping} for path, mapping in keys.items()]
    return None


def prepare_weights(model: Any, specs: list[ModuleSpec], weights: Mapping[str, Any] | None,
                    folder: Path) -> None:
    """Choose ``original`` or ``exported`` per spec; write the exported float32 tensors."""
    modules = named_modules(model)
    for index, spec in enumerate(specs):  # save_tensors creates ``folder``
        module = modules[spec.name]
        why = _match_original(spec, module, _checkpoint_files(weights, spec.component))
        spec.weights, spec.why = ("exported", why) if why else (
            "original", "every tensor found in the checkpoint")
        persistent = module.state_dict(keep_vars=True)
        tensors = {f"buffer:{k}": v for k, v in module.named_buffers() if k not in persistent}
        if why:
            tensors.update({f"param:{k}": v for k, v in persistent.items()})
        spec.exported = str(folder / f"{index}.safetensors")
        save_tensors(Path(spec.exported), {  # cloned: safetensors refuses shared memory
            k: v.detach().to("cpu", torch.float32 if v.is_floating_point() else v.dtype).clone()
            for k, v in tensors.items()})
        log.info("replay module %s: weights %s (%s)", spec.name, spec.weights, spec.why)


def meta_module(spec: Mapping[str, Any]) -> torch.nn.Module:
    """The module of ``spec`` on ``meta``; only classes of :data:`ALLOWED_PACKAGES` are built."""
    if spec["class_path"].split(".", 1)[0] not in ALLOWED_PACKAGES:
        raise ConfigError(f"the replay request names class {spec['class_path']!r}; only classes of "
                          f"{', '.join(ALLOWED_PACKAGES)} are built by the reference process")
    cls = get_class(spec["class_path"])
    with torch.device("meta"):
        config = spec["config"]
        component = cls.from_config(config) if hasattr(cls, "from_config") else cls(**config)
    return component.get_submodule(spec["path"]) if spec["path"] else component
