"""Which modules the replay reference re-runs, how the reference process rebuilds each, and from which weights.

A replayed module is named as ``compare.layers`` names modules (``transformer.transformer_blocks.3``,
``decoder.up_blocks.0``). The reference process rebuilds it without the rest of the model: the module's
*component* (the model itself, or a pipeline component such as ``transformer``) is built from its class and
config on the ``meta`` device, which allocates nothing, the submodule is taken out and its tensors are
assigned from a safetensors file read one key at a time (``safe_open``):

* ``original`` -- the checkpoint file itself, when every tensor of the module is there under the module's
  name with the same shape (a diffusers directory);
* ``exported`` -- otherwise (random-init weights, a single-file checkpoint whose keys are converted on load),
  the job writes the module's own float32 tensors, before the device run casts them, to
  ``replay/weights/<n>.safetensors`` in the job directory, one file per module.

Non-persistent buffers (rotary tables...) are in no checkpoint; they are always exported with the module.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch

from ascendbench.compare.select import named_modules, normalize_spec, select_modules
from ascendbench.errors import ConfigError
from ascendbench.fileio import atomic_path

log = logging.getLogger(__name__)

# The packages whose classes the reference process may build (the request names classes; nothing else is
# imported from it).
ALLOWED_PACKAGES = ("diffusers", "transformers", "torch", "ascendbench")


def replay_patterns(cfg: Any) -> list[str]:
    """``baseline.replay.layers``, else ``compare.layers`` (a pattern list), else the model's ``replay_layers``."""
    replay = cfg.baseline.get("replay") or {}
    for where, value in (("baseline.replay.layers", replay.get("layers")),
                         ("compare.layers", cfg.compare.get("layers")),
                         ("model.replay_layers", cfg.model.get("replay_layers"))):
        spec = normalize_spec(value)
        if isinstance(spec, list):
            return spec
        if spec == "all" and where == "baseline.replay.layers":
            raise ConfigError("baseline.replay.layers=all is not allowed: the replay re-runs chosen modules one "
                              "at a time; name them, e.g. baseline.replay.layers='[decoder.up_blocks.*]'.")
    raise ConfigError(
        f"the replay reference of {cfg.model.name} has no modules to re-run: set baseline.replay.layers (or "
        "compare.layers) to module name patterns, e.g. '[transformer.transformer_blocks.*]' or "
        "'[decoder.mid_block,decoder.up_blocks.*]', or give the model a replay_layers list.")


def component_of(model: Any, name: str) -> tuple[str, torch.nn.Module, str]:
    """``(component name, component module, path inside it)`` of a module name (``""``: the model itself)."""
    if isinstance(model, torch.nn.Module):
        return "", model, name
    component, _, inner = name.partition(".")
    module = (getattr(model, "components", None) or {}).get(component)
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"replayed module {name!r}: {component!r} is not a module component of the pipeline")
    return component, module, inner


@dataclass
class ModuleSpec:
    """How the reference process rebuilds one module (plain data: it travels as JSON).

    Attributes:
        name: the module's name in the job (as ``compare.layers`` names it).
        component: the pipeline component holding it (``""``: the model).
        path: its path inside the component (``""``: the whole component).
        class_path: the component's class.
        config: the component's constructor config.
        num_params: tensors of the module (parameters and buffers, elements).
        weights: ``original`` or ``exported`` (see the module docstring), with ``why``.
        files: safetensors files and the keys to read: ``[{file, keys: {module key: file key}}]``.
        exported: the job's file with the module's exported tensors (non-persistent buffers at least).
    """

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

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the request."""
        return asdict(self)


def _config(component: torch.nn.Module) -> dict[str, Any]:
    config = getattr(component, "config", None)
    if config is None:
        raise ConfigError(f"{type(component).__name__} has no config: the replay can rebuild diffusers/transformers "
                          "modules only")
    plain = dict(config.to_dict() if hasattr(config, "to_dict") else config)
    return {k: v for k, v in plain.items() if not k.startswith("_")}


def module_specs(model: Any, patterns: list[str]) -> list[ModuleSpec]:
    """A :class:`ModuleSpec` of every module ``patterns`` select (in ``named_modules()`` order)."""
    specs = []
    modules = named_modules(model)
    for name in select_modules(model, patterns):
        component, module, path = component_of(model, name)
        cls = type(module)
        class_path = f"{cls.__module__}.{cls.__qualname__}"
        sub = modules[name]
        count = sum(t.numel() for t in [*sub.parameters(), *sub.buffers()])
        specs.append(ModuleSpec(name=name, component=component, path=path, class_path=class_path,
                                config=_config(module), num_params=int(count)))
    return specs


def _persistent(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return dict(module.state_dict(keep_vars=True))


def _non_persistent(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    kept = set(module.state_dict(keep_vars=True))
    return {name: buf for name, buf in module.named_buffers() if name not in kept}


def _shape_index(files: list[Path]) -> dict[str, tuple[Path, tuple[int, ...]]]:
    from safetensors import safe_open

    index: dict[str, tuple[Path, tuple[int, ...]]] = {}
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            for key in handle.keys():
                index.setdefault(key, (path, tuple(handle.get_slice(key).get_shape())))
    return index


def checkpoint_files(weights: Mapping[str, Any] | None, component: str) -> list[Path]:
    """The safetensors files of loaded weights that may hold ``component``'s tensors (its subfolder first)."""
    if not weights or weights.get("kind") != "loaded" or weights.get("format", "safetensors") != "safetensors":
        return []
    source = Path(str(weights.get("source")))
    if source.is_file():
        return [source] if source.suffix == ".safetensors" else []
    folder = source / component if component and (source / component).is_dir() else source
    return sorted(folder.glob("*.safetensors"))


def match_original(spec: ModuleSpec, module: torch.nn.Module, files: list[Path]) -> str | None:
    """Point ``spec`` at the checkpoint's own tensors; the reason it cannot be, or ``None`` when it is."""
    if not files:
        return "no safetensors checkpoint (random-init weights, or a pickle checkpoint)"
    index = _shape_index(files)
    prefix = f"{spec.path}." if spec.path else ""
    keys: dict[Path, dict[str, str]] = {}
    for key, tensor in _persistent(module).items():
        found = index.get(prefix + key)
        if found is None or found[1] != tuple(tensor.shape):
            return (f"the checkpoint has no tensor {prefix + key!r} of shape {list(tensor.shape)} (its keys are "
                    "converted on load)")
        keys.setdefault(found[0], {})[key] = prefix + key
    spec.files = [{"file": str(path), "keys": mapping} for path, mapping in keys.items()]
    return None


def export_weights(spec: ModuleSpec, module: torch.nn.Module, path: Path, everything: bool) -> None:
    """Write the module's non-persistent buffers (and, with ``everything``, all its tensors) as float32."""
    tensors = {f"buffer:{k}": v for k, v in _non_persistent(module).items()}
    if everything:
        tensors.update({f"param:{k}": v for k, v in _persistent(module).items()})
    plain = {k: v.detach().to("cpu", torch.float32 if v.is_floating_point() else v.dtype).clone()
             for k, v in tensors.items()}
    from safetensors.torch import save_file

    with atomic_path(path) as tmp:
        save_file(plain, str(tmp))
    spec.exported = str(path)


def prepare_weights(model: Any, specs: list[ModuleSpec], weights: Mapping[str, Any] | None, folder: Path) -> None:
    """Decide ``original`` or ``exported`` for every spec and write the exported files (before the device run)."""
    modules = named_modules(model)
    folder.mkdir(parents=True, exist_ok=True)
    for index, spec in enumerate(specs):
        module = modules[spec.name]
        why = match_original(spec, module, checkpoint_files(weights, spec.component))
        spec.weights, spec.why = ("exported", why) if why else ("original", "every tensor found in the checkpoint")
        export_weights(spec, module, folder / f"{index}.safetensors", everything=why is not None)
        log.info("replay module %s: weights %s (%s)", spec.name, spec.weights, spec.why)


def check_class_path(class_path: str) -> None:
    """Refuse to build a class outside :data:`ALLOWED_PACKAGES` (the request is data)."""
    if class_path.split(".", 1)[0] not in ALLOWED_PACKAGES:
        raise ConfigError(f"the replay request names class {class_path!r}; only classes of "
                          f"{', '.join(ALLOWED_PACKAGES)} are built by the reference process")
