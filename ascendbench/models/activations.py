"""Memory a model run will need, estimated without allocating it: parameters and the activation peak.

Parameters come from :mod:`ascendbench.models.memory` (the model built on the ``meta`` device).
Activations come from running the task itself on ``meta`` tensors under :class:`LiveTensorBytes`, a
dispatch mode that adds up the storage of every tensor an op creates and drops it when the tensor
dies, keeping the peak. Convolutions also hold a transient workspace the op outputs do not show: on
CPU, float64 convolutions unfold their input (im2col: ``C_in/groups x kernel x output positions``),
other dtypes go through oneDNN with about one output-sized buffer. Measured against the peak RSS of a
real FLUX.2-small-decoder decode on this 2-core host: 256 px float32 180 MB estimated vs 293 MB real
(the rest is fixed process overhead), 1024 px float32 2882 vs 2920 MB, 512 px float64 4513 vs 4545 MB.
The CPU reference's own estimate and refusal build on this: :mod:`ascendbench.baseline.memory`.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ascendbench.models.memory import tensor_count
from ascendbench.precision import dtype_name
from ascendbench.progress import quiet

_CONV_OPS = {"conv1d": 6, "conv2d": 6, "conv3d": 6, "convolution": 8}  # op name -> index of `groups`


class LiveTensorBytes(TorchDispatchMode):
    """Peak bytes of the tensors created by the ops run under this mode (plus convolution workspaces).

    Views share their base's storage and are counted once; a storage is released when the last tensor
    seen using it is garbage collected.
    """

    def __init__(self) -> None:
        super().__init__()
        self._live: dict[int, list[int]] = {}  # storage id -> [bytes, tensors alive]
        self.current = 0
        self.peak = 0

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] == 0:
                self.current -= entry[0]
                del self._live[key]

    def _track(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = storage._cdata
        entry = self._live.get(key)
        if entry is None:
            entry = self._live[key] = [storage.nbytes(), 0]
            self.current += entry[0]
            self.peak = max(self.peak, self.current)
        entry[1] += 1
        weakref.finalize(tensor, self._release, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in _CONV_OPS and isinstance(out, torch.Tensor):
            self.peak = max(self.peak, self.current + _conv_workspace(args, out, _CONV_OPS[name]))
        for item in tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor):
                self._track(item)
        return out


def _conv_workspace(args: tuple, out: torch.Tensor, groups_at: int) -> int:
    """Transient bytes of one CPU convolution (see the module docstring), its output included."""
    x, weight = args[0], args[1]
    groups = int(args[groups_at]) if len(args) > groups_at else 1
    if x.dtype == torch.float64:
        unfolded = (x.shape[1] // groups) * math.prod(weight.shape[2:]) * math.prod(out.shape[2:]) * x.shape[0]
        return unfolded * x.element_size() + out.untyped_storage().nbytes()
    return 2 * out.untyped_storage().nbytes()


def meta_like(tensors: Mapping[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Floating-point tensors as meta tensors of the same shapes in ``dtype``; the others (seeds, token ids:
    small, and read by value) kept as they are."""
    return {k: torch.empty(v.shape, device="meta", dtype=dtype) if v.is_floating_point() else v
            for k, v in tensors.items()}


def module_components(model: Any) -> dict[str, torch.nn.Module]:
    """The modules whose tensors a run uses: ``model`` itself, or a pipeline's module components."""
    if isinstance(model, torch.nn.Module):
        return {"model": model}
    components = getattr(model, "components", None) or {}
    return {name: c for name, c in components.items() if isinstance(c, torch.nn.Module)}


class _TaskCall(torch.nn.Module):
    """``task.run(model, inputs)`` as a module's forward, so that :func:`torch.func.functional_call` can
    swap the parameters and buffers of the model (or of a pipeline's module components, held here as
    submodules) for meta tensors during any call the task makes."""

    def __init__(self, model: Any, task: Any) -> None:
        super().__init__()
        self.parts = torch.nn.ModuleDict(module_components(model))
        self._call = (model, task)  # a tuple: not registered as a submodule a second time

    def forward(self, inputs: Mapping[str, torch.Tensor]) -> Any:
        model, task = self._call
        return task.run(model, inputs)


def activation_bytes(module: Any, task: Any, inputs: Mapping[str, torch.Tensor], dtype: torch.dtype) -> int:
    """Peak bytes of ``task.run`` in ``dtype`` beyond the parameters, run on the meta device.

    ``module`` (a module, or a pipeline whose module components are used) is not touched: real modules
    are called with meta tensors in place of their parameters and buffers
    (:func:`torch.func.functional_call`), modules already on ``meta`` are cast (which allocates nothing).

    Raises:
        Exception: whatever the task raises on meta tensors (data-dependent code such as ``.item()``).
    """
    meta_inputs = meta_like(inputs, dtype)
    parts = module_components(module)
    if all(p.is_meta for part in parts.values() for p in part.parameters()):
        for part in parts.values():
            part.to(dtype=dtype)
        return _tracked_peak(lambda: task.run(module, meta_inputs))
    call = _TaskCall(module, task)
    state = {name: torch.empty(t.shape, device="meta", dtype=dtype if t.is_floating_point() else t.dtype)
             for name, t in [*call.named_parameters(), *call.named_buffers()]}  # tied names follow (tie_weights)
    return _tracked_peak(lambda: torch.func.functional_call(call, state, (meta_inputs,), tie_weights=True))


def _tracked_peak(run: Callable[[], Any]) -> int:
    with torch.inference_mode(), quiet(), LiveTensorBytes() as tracker:  # quiet: no progress from an estimate
        run()
    return tracker.peak


@dataclass(frozen=True)
class RunMemory:
    """What one run in one dtype needs: parameters, activation peak (``None``: could not be estimated)."""

    num_params: int
    dtype: torch.dtype
    activations: int | None
    activation_note: str = ""

    @property
    def parameter_bytes(self) -> int:
        """Parameters and buffers in ``dtype``."""
        return self.num_params * torch.empty((), dtype=self.dtype).element_size()

    @property
    def total(self) -> int:
        """Parameters plus activations (parameters only when activations are unknown)."""
        return self.parameter_bytes + (self.activations or 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers for the record and the plan, in MB (10^6 bytes)."""
        return {"dtype": dtype_name(self.dtype), "num_params": self.num_params,
                "parameters_mb": self.parameter_bytes / 1e6,
                "activations_mb": None if self.activations is None else self.activations / 1e6,
                "total_mb": self.total / 1e6, "activation_note": self.activation_note}


def run_memory(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor], dtype: torch.dtype) -> RunMemory:
    """Parameters and activation peak of ``task.run`` in ``dtype``; never raises for the activations."""
    try:
        activations, note = activation_bytes(module, task, inputs, dtype), "meta-device run of the task"
    except Exception as exc:  # the task does something meta tensors cannot (e.g. reads a value)
        activations, note = None, f"activations not estimated ({type(exc).__name__}: {str(exc)[:120]})"
    return RunMemory(tensor_count(module), dtype, activations, note)
