"""Forward hooks that capture what modules produce, on the baseline and on the device alike.

Patterns mode keeps a CPU copy of every tensor output of the matched modules; ``all`` keeps max,
min, mean and L2 norm of every module's tensor inputs and outputs, in the order modules *finish* (a
child before its parent). Keys are ``<module>#<call>``, plus ``/<index>`` for several outputs.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch

from ascendbench.compare.select import named_modules, select_modules

STAT_NAMES = ("max", "min", "mean", "l2norm")
ROOT = "(root)"  # the name of the model itself in keys


def flatten_tensors(value: Any, depth: int = 0) -> list[torch.Tensor]:
    """Tensors inside nested tuples, lists, dicts and diffusers ``BaseOutput`` objects, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth > 4:
        return []
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif hasattr(value, "to_tuple"):
        items = list(value.to_tuple())
    else:
        return []
    return [t for item in items for t in flatten_tensors(item, depth + 1)]


def tensor_stats(tensor: torch.Tensor) -> dict[str, float]:
    """Max, min, mean and L2 norm of the finite elements (float64 on the CPU, float32 on an
    accelerator, read back in one transfer), plus ``numel`` and ``nonfinite`` counts."""
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
    """Hooks on the named modules (removed by :meth:`close`); what each call leaves behind:
    ``tensors`` (patterns, up to ``max_bytes``, the rest listed in ``dropped``) or ``modules``
    (``all``: ``{key, type, inputs: [stats], outputs: [stats]}``)."""

    def __init__(self, model: Any, names: list[str], stats: bool, max_bytes: int = 0) -> None:
        modules = named_modules(model)
        self.names, self.stats, self.max_bytes = list(names), stats, int(max_bytes)
        self.calls: dict[str, int] = {}
        self.order: list[str] = []
        self.tensors: dict[str, torch.Tensor] = {}
        self.dropped: list[str] = []
        self.modules: list[dict[str, Any]] = []
        self._bytes = 0
        self._handles = [modules[name].register_forward_hook(self._hook(name), with_kwargs=True)
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
            size = tensor.numel() * tensor.element_size()
            if self._bytes + size > self.max_bytes:
                self.dropped.append(name)
                continue
            self._bytes += size
            self.tensors[name] = tensor.detach().to("cpu", copy=True).contiguous()
            self.order.append(name)

    def not_called(self) -> list[str]:
        """Hooked modules whose ``forward`` never ran (called through another method, or not at all)."""
        return [name for name in self.names if (name or ROOT) not in self.calls]

    def close(self) -> None:
        """Remove every hook."""
        for handle in self._handles:
            handle.remove()
        self._handles = []


@contextmanager
def capturing(model: Any, spec: str | list[str] | None,
              max_bytes: int = 4 << 30) -> Iterator[Capture | None]:
    """Hook ``model`` for the duration of the block; yields the capture (``None`` when ``spec`` is off)."""
    if spec is None:
        yield None
        return
    if spec == "all":
        capture = Capture(model, list(named_modules(model)), stats=True)
    else:
        capture = Capture(model, select_modules(model, spec), stats=False, max_bytes=max_bytes)
    try:
        yield capture
    finally:
        capture.close()
