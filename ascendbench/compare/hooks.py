"""Forward hooks that capture what modules produce, on the baseline and on the device alike.

Two modes, chosen by ``compare.layers``:

* patterns -- :class:`TensorCapture` keeps a CPU copy of every tensor output of the matched modules;
* ``all``  -- :class:`StatsCapture` keeps max / min / mean / L2 norm of every module's tensor inputs and
  outputs, in the order the modules *finish* (a child finishes before its parent, so the first module
  to go wrong is the innermost one).

Entries are keyed ``<module>#<call>`` (a module called twice gives ``#0`` and ``#1``); a module with
several tensor outputs adds ``/<index>``. Statistics are computed where the tensor lives (float64 on
the CPU, float32 on an accelerator, which has no float64) and read back in one transfer.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch

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
    """Max, min, mean and L2 norm of the finite elements, plus ``numel`` and ``nonfinite`` counts."""
    work = torch.float64 if tensor.device.type == "cpu" else torch.float32
    x = tensor.detach().to(work).reshape(-1)
    finite = torch.isfinite(x)
    kept = x[finite] if not bool(finite.all()) else x
    if kept.numel() == 0:
        values = [float("nan")] * 4
    else:
        values = torch.stack([kept.max(), kept.min(), kept.mean(), torch.linalg.vector_norm(kept)]).tolist()
    return {**dict(zip(STAT_NAMES, values, strict=True)), "numel": int(x.numel()),
            "nonfinite": int(x.numel() - kept.numel())}


class _Capture:
    """Registers hooks, counts calls per module, removes the hooks on :meth:`close`."""

    def __init__(self, model: Any, names: list[str]) -> None:
        from ascendbench.compare.select import named_modules

        modules = named_modules(model)
        self.names = list(names)
        self.calls: dict[str, int] = {}
        self.order: list[str] = []
        self._handles = [modules[name].register_forward_hook(self._hook(name), with_kwargs=True) for name in names]

    def _hook(self, name: str):
        label = name or ROOT

        def hook(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            call = self.calls.get(label, 0)
            self.calls[label] = call + 1
            self.record(f"{label}#{call}", module, args, kwargs, output)
        return hook

    def record(self, key: str, module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        raise NotImplementedError

    def not_called(self) -> list[str]:
        """Hooked modules whose ``forward`` never ran (called through another method, or not at all)."""
        return [name for name in self.names if (name or ROOT) not in self.calls]

    def close(self) -> None:
        """Remove every hook."""
        for handle in self._handles:
            handle.remove()
        self._handles = []


class TensorCapture(_Capture):
    """CPU copies of the tensor outputs of chosen modules (pattern mode).

    Args:
        model: the model to hook.
        names: module names (from :func:`ascendbench.compare.select.select_modules`).
        max_bytes: stop keeping tensors beyond this many bytes; later ones are listed in ``dropped``.
    """

    def __init__(self, model: Any, names: list[str], max_bytes: int) -> None:
        super().__init__(model, names)
        self.tensors: dict[str, torch.Tensor] = {}
        self.dropped: list[str] = []
        self.max_bytes = int(max_bytes)
        self._bytes = 0

    def record(self, key: str, module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        """Keep a detached CPU copy of every tensor output."""
        outputs = flatten_tensors(output)
        for index, tensor in enumerate(outputs):
            name = key if len(outputs) == 1 else f"{key}/{index}"
            size = tensor.numel() * tensor.element_size()
            if self._bytes + size > self.max_bytes:
                self.dropped.append(name)
                continue
            self._bytes += size
            self.tensors[name] = tensor.detach().to("cpu", copy=True).contiguous()
            self.order.append(name)


class StatsCapture(_Capture):
    """Statistics of every hooked module's tensor inputs and outputs (``all`` mode)."""

    def __init__(self, model: Any, names: list[str]) -> None:
        super().__init__(model, names)
        self.modules: list[dict[str, Any]] = []

    def record(self, key: str, module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        """Append ``{key, type, inputs: [stats], outputs: [stats]}``."""
        inputs = flatten_tensors(list(args) + list(kwargs.values()))
        self.modules.append({"key": key, "type": type(module).__name__,
                             "inputs": [tensor_stats(t) for t in inputs],
                             "outputs": [tensor_stats(t) for t in flatten_tensors(output)]})
        self.order.append(key)


@contextmanager
def capturing(model: Any, spec: str | list[str] | None, max_bytes: int = 4 << 30) -> Iterator[Any]:
    """Hook ``model`` for the duration of the block; yields the capture (``None`` when ``spec`` is off)."""
    from ascendbench.compare.select import named_modules, select_modules

    if spec is None:
        yield None
        return
    if spec == "all":
        capture: _Capture = StatsCapture(model, list(named_modules(model)))
    else:
        capture = TensorCapture(model, select_modules(model, spec), max_bytes)
    try:
        yield capture
    finally:
        capture.close()
