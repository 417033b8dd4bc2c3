"""Memory a run will need, estimated without allocating it, and the refusal of a CPU reference that
would not fit.

Parameters come from :mod:`ascendbench.models.memory` (the model built on the ``meta`` device).
Activations come from running the task itself on ``meta`` tensors under :class:`LiveTensorBytes`, a
dispatch mode that adds up the storage of every tensor an op creates and drops it when the tensor
dies, keeping the peak. Convolutions also hold a transient workspace the op outputs do not show: on
CPU, float64 convolutions unfold their input (im2col: ``C_in/groups x kernel x output positions``),
other dtypes go through oneDNN with about one output-sized buffer. Measured against the peak RSS of a
real FLUX.2-small-decoder decode on this 2-core host: 256 px float32 180 MB estimated vs 293 MB real
(the rest is fixed process overhead), 1024 px float32 2882 vs 2920 MB, 512 px float64 4513 vs 4545 MB.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ascendbench.errors import InsufficientMemoryError
from ascendbench.models.memory import DEFAULT_HEADROOM, available_host_bytes, tensor_count
from ascendbench.precision import dtype_name

_CONV_OPS = {"conv1d": 6, "conv2d": 6, "conv3d": 6, "convolution": 8}  # op name -> index of `groups`
_GB = 1e9


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
    """Meta tensors of the same shapes; floating-point ones in ``dtype``."""
    return {k: torch.empty(v.shape, device="meta", dtype=dtype if v.is_floating_point() else v.dtype)
            for k, v in tensors.items()}


class _TaskCall(torch.nn.Module):
    """``task.run(model, inputs)`` as a module's forward, so that :func:`torch.func.functional_call` can
    swap the model's parameters and buffers for meta tensors during any call the task makes."""

    def __init__(self, model: torch.nn.Module, task: Any) -> None:
        super().__init__()
        self.model = model
        self._task = task

    def forward(self, inputs: Mapping[str, torch.Tensor]) -> Any:
        return self._task.run(self.model, inputs)


def activation_bytes(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                     dtype: torch.dtype) -> int:
    """Peak bytes of ``task.run`` in ``dtype`` beyond the parameters, run on the meta device.

    ``module`` is not touched: a real module is called with meta tensors in place of its parameters and
    buffers (:func:`torch.func.functional_call`), a module already on ``meta`` is cast (which allocates nothing).

    Raises:
        Exception: whatever the task raises on meta tensors (data-dependent code such as ``.item()``).
    """
    meta_inputs = meta_like(inputs, dtype)
    if all(p.is_meta for p in module.parameters()):
        module.to(dtype=dtype)
        return _tracked_peak(lambda: task.run(module, meta_inputs))
    named = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
    state = {f"model.{name}": torch.empty(t.shape, device="meta", dtype=dtype if t.is_floating_point() else t.dtype)
             for name, t in named}
    call = _TaskCall(module, task)
    return _tracked_peak(lambda: torch.func.functional_call(call, state, (meta_inputs,), tie_weights=True))


def _tracked_peak(run: Callable[[], Any]) -> int:
    with torch.inference_mode(), LiveTensorBytes() as tracker:
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


def baseline_host_bytes(reference: RunMemory, child_process: bool) -> int:
    """Host bytes while the reference runs: the reference itself, plus the job's own float32 copy
    of the model that stays in the parent while a child process computes it."""
    parent_copy = reference.num_params * 4 if child_process else 0
    return reference.total + parent_copy


@dataclass(frozen=True)
class HostBudget:
    """How much host memory a CPU reference may plan for.

    Attributes:
        child_process: the reference runs in a child process (the job's float32 copy stays in the parent).
        headroom: the share of the available memory that may be planned for.
        available: bytes available (``None``: measured now).
        what: the workload, as the refusal names it.
    """

    child_process: bool = True
    headroom: float = DEFAULT_HEADROOM
    available: int | None = None
    what: str = "the model"


def check_baseline_memory(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                          precision: torch.dtype, budget: HostBudget = HostBudget()) -> dict[str, Any]:
    """Refuse a CPU reference run that would not fit in host memory, before it allocates anything.

    Returns:
        The record's view: the estimate, the bytes available, and ``fits: True``.

    Raises:
        InsufficientMemoryError: the estimate exceeds ``budget.headroom`` x the available host memory.
    """
    reference = run_memory(module, task, inputs, precision)
    need = baseline_host_bytes(reference, budget.child_process)
    budget = replace(budget, available=available_host_bytes() if budget.available is None else int(budget.available))
    info = {**reference.to_dict(), "host_need_mb": need / 1e6, "host_available_mb": budget.available / 1e6,
            "headroom": budget.headroom, "fits": need <= budget.headroom * budget.available}
    if not info["fits"]:
        raise InsufficientMemoryError(_refusal(reference, need, budget))
    return info


def _refusal(ref: RunMemory, need: int, budget: HostBudget) -> str:
    activations = (f"activations peaking at about {ref.activations / _GB:.1f} GB (estimated on the meta device)"
                   if ref.activations is not None else ref.activation_note)
    copy = f" + the job's own float32 copy {ref.num_params * 4 / _GB:.1f} GB" if budget.child_process else ""
    return (
        f"refusing the CPU reference of {budget.what} in {dtype_name(ref.dtype)}: it needs about {need / _GB:.1f} GB "
        f"of host memory (parameters {ref.num_params:,} x {ref.parameter_bytes // max(ref.num_params, 1)} B = "
        f"{ref.parameter_bytes / _GB:.1f} GB, {activations}{copy}) but {budget.available / _GB:.1f} GB is "
        f"available and at most {budget.headroom:.0%} of it is planned for. Nothing was allocated. Use a smaller "
        "preset (`preset=mini`, or lower `preset.height`/`preset.width`/`preset.num_frames`/`preset.batch_size`), "
        "`baseline.reference=float32` (half the bytes of float64), `baseline.enabled=false` for a "
        "performance-only run, or compute the reference once on a host with more memory (it is cached under "
        "baseline.cache_dir and reused)."
    )


def guard_reference_memory(query: Any) -> dict[str, Any]:
    """The job's check before its CPU reference (a :class:`ascendbench.baseline.ReferenceQuery`): skipped on
    a baseline cache hit or with ``baseline.memory_check=false``; else :func:`check_baseline_memory` (raises
    when it does not fit)."""
    cfg = query.cfg
    if not bool(cfg.baseline.get("memory_check", True)):
        return {"skipped": "baseline.memory_check=false"}
    if query.cached():
        return {"skipped": "the reference is cached; nothing to compute"}
    shapes = ", ".join(f"{name} {list(t.shape)}" for name, t in query.inputs.items())
    # The job's own float32 copy is loaded by now, so it is already out of the available memory: counting it
    # again (as a plan made before the load must) would refuse references that fit.
    budget = HostBudget(child_process=False, what=f"{cfg.model.name} at preset {cfg.preset.name} (inputs {shapes})")
    return check_baseline_memory(query.module, query.task, query.inputs, query.precision, budget)
