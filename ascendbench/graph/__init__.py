"""Graph-mode variants (``device.compile``), each a ``torch.compile`` backend (:data:`VARIANTS`)."""

from __future__ import annotations

import importlib
import logging
import shutil
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from torch import nn

from ascendbench.errors import ConfigError, MissingPackageError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraphVariant:
    """One ``device.compile`` value: device types, dynamo backend (or ``torchair:<mode>``), help."""

    devices: tuple[str, ...]
    backend: str
    about: str


VARIANTS: dict[str, GraphVariant] = {
    "inductor": GraphVariant(("cpu", "cuda"), "inductor", "TorchInductor: generated C++/OpenMP "
                             "(CPU) or Triton (CUDA) kernels; on the CPU it needs a C++ compiler "
                             "(g++)"),
    "aot_eager": GraphVariant(("cpu", "cuda", "npu"), "aot_eager", "graph capture (dynamo + "
                              "AOTAutograd), kernels run eagerly: no compiler needed; shows graph "
                              "breaks and capture cost"),
    "cudagraphs": GraphVariant(("cuda",), "cudagraphs", "CUDA graphs replayed per call"),
    "torchair": GraphVariant(("npu",), "torchair:max-autotune", "torchair GE graph mode "
                             "(CompilerConfig mode max-autotune): the graph compiled by the Ascend "
                             "graph engine"),
    "aclgraph": GraphVariant(("npu",), "torchair:reduce-overhead", "torchair ACL graph "
                             "(CompilerConfig mode reduce-overhead): captured NPU task graphs "
                             "replayed per call"),
    "npugraph_ex": GraphVariant(("npu",), "npugraph_ex", "torch_npu >= 2.9's npugraph_ex dynamo "
                                "backend (torchair reduce-overhead with its own passes)"),
}
TARGET_ATTRIBUTES = ("transformer", "unet", "decoder")


def variant_of(device_cfg: Mapping[str, Any], device_type: str) -> GraphVariant | None:
    """The variant ``device.compile`` asks for on ``device_type`` (None: eager) or ConfigError."""
    name = str(device_cfg.get("compile") or "none")
    if name == "none":
        return None
    if name not in VARIANTS:
        raise ConfigError(f"device.compile={name!r} is not a graph-mode variant; allowed: none, "
                          f"{', '.join(VARIANTS)}. Fix the override, e.g. "
                          "`device.compile=inductor` (CPU/CUDA) or `device.compile=torchair`.")
    variant = VARIANTS[name]
    if device_type not in variant.devices:
        here = ", ".join(n for n, v in VARIANTS.items() if device_type in v.devices)
        raise ConfigError(f"device.compile={name} runs on {', '.join(variant.devices)}, not on "
                          f"{device_type}. Choose one for {device_type}: {here} (or none).")
    if variant.backend == "inductor" and device_type == "cpu" and shutil.which("g++") is None:
        raise ConfigError("device.compile=inductor on the CPU needs a C++ compiler and none is on "
                          "PATH (g++). Install one (`apt-get install -y g++`), or use "
                          "`device.compile=aot_eager`.")
    return variant


def backend_of(variant: GraphVariant) -> Any:
    """The ``torch.compile`` backend: a dynamo backend name, or torchair's backend with its mode."""
    if not variant.backend.startswith("torchair:"):
        return variant.backend
    try:
        torchair = importlib.import_module("torchair")  # torch_npu puts a lazy torchair there
    except ImportError as exc:
        raise MissingPackageError(
            "device.compile=torchair/aclgraph needs torchair, which torch_npu (built with "
            "torchair) provides once imported; install torch_npu matching CANN, or use "
            "`device.compile=aot_eager`.") from exc
    config = torchair.CompilerConfig()
    config.mode = variant.backend.split(":", 1)[1]
    return torchair.get_npu_backend(compiler_config=config)


def targets(model: Any, options: Mapping[str, Any]) -> dict[str, nn.Module]:
    """The modules to compile: ``options.targets``, else the denoiser / decoder / the model."""
    paths = list(options.get("targets") or []) or [next(
        (a for a in TARGET_ATTRIBUTES if isinstance(getattr(model, a, None), nn.Module)), "")]
    found = {}
    for path in paths:
        module = model
        for part in (p for p in path.split(".") if p):
            module = getattr(module, part, None)
        if not isinstance(module, nn.Module):
            raise ConfigError(f"device.compile_options.targets: {path!r} is not a module of "
                              f"{type(model).__name__}; name attributes of the model, e.g. "
                              "`[transformer]` or `[decoder]`.")
        found[path or "model"] = module
    return found


def compile_model(model: Any, device_type: str,
                  device_cfg: Mapping[str, Any]) -> dict[str, Any] | None:
    """Compile the targets in place (at their first call); ``bench.compile``'s head or None."""
    variant = variant_of(device_cfg, device_type)
    if variant is None:
        return None
    options = dict(device_cfg.get("compile_options") or {})
    kwargs = {k: options[k] for k in ("mode", "fullgraph", "dynamic") if options.get(k) is not None}
    backend = backend_of(variant)
    chosen = targets(model, options)
    for module in chosen.values():
        module.compile(backend=backend, **kwargs)
    name = str(device_cfg.get("compile"))
    log.info("graph mode %s (%s): compiling %s at the first call", name, variant.backend,
             ", ".join(chosen))
    return {"variant": name, "backend": variant.backend, "about": variant.about,
            "targets": list(chosen), "options": kwargs}


def first_call(call: Callable[[], Any], adapter: Any) -> float:
    """One call in ms, device-synchronized on both sides (the first: where compilation happens)."""
    adapter.synchronize()
    start = time.perf_counter()
    call()
    adapter.synchronize()
    return (time.perf_counter() - start) * 1e3
