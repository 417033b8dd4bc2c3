"""Forward hooks capturing what modules produce (tensors or stats), keyed ``<module>#<call>``."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch
from safetensors.torch import load_file

from ascendbench.compare.select import named_modules, select_modules
from ascendbench.fileio import write_atomic

STAT_NAMES = ("max", "min", "mean", "l2norm")
ROOT = "(root)"  # the name of the model itself in keys
META, TENSORS = "layers_device_meta", "layers_device"  # artifacts keys of a kept device capture


def flatten_tensors(value: Any, depth: int = 0) -> list[torch.Tensor]:
    """Tensors inside nested tuples, lists, dicts and diffusers ``BaseOutput`` objects, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    elif hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if depth > 4 or not isinstance(value, (list, tuple)):
        return []
    return [t for item in value for t in flatten_tensors(item, depth + 1)]


def tensor_stats(tensor: torch.Tensor) -> dict[str, float]:
    """Max, min, mean and L2 norm of the finite elements, ``numel`` and ``nonfinite``."""
    work = torch.float64 if tensor.device.type == "cpu" else torch.float32
    x = tensor.detach().to(work).reshape(-1)
    finite = torch.isfinite(x)
    kept = x if bool(finite.all()) else x[finite]
    if kept.numel() == 0:
        values = [float("nan")] * 4
    else:
        norm = torch.linalg.vector_norm(kept)
        values = torch.stack([kept.max(), kept.min(), kept.mean(), norm]).tolist()
    return {**dict(zip(STAT_NAMES, values, strict=True)), "numel": int(x.numel()),
            "nonfinite": int(x.numel() - kept.numel())}


class Capture:
    """Hooks keeping what calls leave: ``tensors`` (up to ``max_bytes``) or ``stats`` per module."""

    def __init__(self, model: Any, names: list[str], stats: bool, max_bytes: int = 0) -> None:
        modules = named_modules(model)
        self.names, self.stats, self.max_bytes = list(names), stats, int(max_bytes)
        self.calls: dict[str, int] = {}
        self.order: list[str] = []
        self.tensors: dict[str, torch.Tensor] = {}
        self.dropped: list[str] = []
        self.modules: list[dict[str, Any]] = []  # with stats
        self.handles = [modules[name].register_forward_hook(self._hook(name), with_kwargs=True)
                        for name in names]

    def _hook(self, name: str):
        label = name or ROOT

        def hook(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            call = self.calls.get(label, 0)
            self.calls[label] = call + 1
            self._record(f"{label}#{call}", module, list(args) + list(kwargs.values()), output)
        return hook

    def _record(self, key: str, module: torch.nn.Module, inputs: list, output: Any) -> None:
        outputs = flatten_tensors(output)
        if self.stats:
            self.modules.append({"key": key, "type": type(module).__name__,
                                 "inputs": [tensor_stats(t) for t in flatten_tensors(inputs)],
                                 "outputs": [tensor_stats(t) for t in outputs]})
            self.order.append(key)
            return
        for index, tensor in enumerate(outputs):
            name = key if len(outputs) == 1 else f"{key}/{index}"
            kept = sum(t.numel() * t.element_size() for t in self.tensors.values())
            if kept + tensor.numel() * tensor.element_size() > self.max_bytes:
                self.dropped.append(name)
                continue
            self.tensors[name] = tensor.detach().to("cpu", copy=True).contiguous()
            self.order.append(name)

    def not_called(self) -> list[str]:
        """Hooked modules whose ``forward`` never ran (called through another method, or never)."""
        return [name for name in self.names if (name or ROOT) not in self.calls]


@contextmanager
def capturing(model: Any, spec: str | list[str] | None,
              max_bytes: int = 4 << 30) -> Iterator[Capture | None]:
    """Hook ``model`` for the duration of the block; the capture (``None`` when ``spec`` is off)."""
    if spec is None:
        yield None
        return
    capture = (Capture(model, list(named_modules(model)), stats=True) if spec == "all" else
               Capture(model, select_modules(model, spec), stats=False, max_bytes=max_bytes))
    try:
        yield capture
    finally:
        for handle in capture.handles:
            handle.remove()


def save_device_layers(job: Any, spec: Any, capture: Any) -> dict[str, str]:
    """Write the device capture's description (``all``: with statistics); its artifacts entry."""
    meta = ({"mode": "all", "order": capture.order, "modules": capture.modules} if spec == "all"
            else {"mode": "patterns", "order": capture.order, "dropped": capture.dropped})
    path = write_atomic(job.dir / "tensors" / "layers_device.json", json.dumps(meta))
    return {META: job.relative(path)}


def _inside(root: Path, relative: Any) -> Path | None:
    if not isinstance(relative, str):
        return None
    path = (root / relative).resolve()
    return path if path.is_relative_to(root.resolve()) and path.is_file() else None


def saved_layers(run: Any, spec: Any) -> tuple[Any, str | None]:
    """A saved run's layer capture for ``spec`` (data; paths kept inside it), or ``(None, why)``."""
    if run.record_path is None:
        return None, "the reference is a bare tensors file: no layer captures"
    root = run.record_path.parent
    artifacts = run.record.get("artifacts")
    artifacts = artifacts if isinstance(artifacts, dict) else {}
    meta_path = _inside(root, artifacts.get(META))
    if meta_path is None:
        return None, ("the saved run kept no layer captures (it ran without compare.layers, or "
                      "with an ascendbench that did not keep them): run it again with "
                      "compare.layers set")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"{meta_path} cannot be read ({exc})"
    mode = "all" if spec == "all" else "patterns"
    saved = meta.get("mode") if isinstance(meta, dict) else "?"
    if saved != mode:
        return None, (f"the saved run captured layers in mode {saved}, this job asks for {mode}: "
                      "run both with the same compare.layers")
    if mode == "all":
        modules = meta.get("modules")
        ok = isinstance(modules, list) and all(isinstance(m, dict) and all(
            isinstance(m.get(k), t) for k, t in (("key", str), ("inputs", list), ("outputs", list)))
            for m in modules)
        return (modules, None) if ok else (None, f"{meta_path}: bad modules")
    tensors_path = _inside(root, artifacts.get(TENSORS))
    order, dropped = meta.get("order"), meta.get("dropped", [])
    if tensors_path is None or not isinstance(order, list) or not isinstance(dropped, list):
        return None, (f"{meta_path}: the saved layer tensors are missing or their description is "
                      "damaged")
    try:
        tensors = load_file(str(tensors_path))
    except Exception as exc:  # safetensors raises its own error type for a damaged file
        return None, f"{tensors_path} cannot be read ({type(exc).__name__}: {exc})"
    order = [name for name in order if isinstance(name, str) and name in tensors]
    return {"tensors": tensors, "order": order, "dropped": [str(d) for d in dropped]}, None
