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

A float64 CPU reference runs bounded (:mod:`ascendbench.baseline.bounded`: convolutions in tiles, attention
in query chunks) and :func:`reference_memory` estimates it under the same mode, so the meta run sees the
same tiles. The reference child process also holds its imports (:data:`CHILD_PROCESS_BYTES`).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ascendbench.baseline.bounded import Bounds
from ascendbench.baseline.compute import bounded_if_float64
from ascendbench.errors import InsufficientMemoryError
from ascendbench.models.memory import DEFAULT_HEADROOM, available_host_bytes, tensor_count
from ascendbench.precision import dtype_name
from ascendbench.progress import quiet

_CONV_OPS = {"conv1d": 6, "conv2d": 6, "conv3d": 6, "convolution": 8}  # op name -> index of `groups`
_GB = 1e9
# Peak resident memory of `python -m ascendbench.baseline` for a model of negligible size (tiny_flux2_decoder:
# 0.56 GB after torch is imported, 0.85 GB with diffusers and the model built, 1.0 GB peak) with this
# project's torch 2.14 + diffusers 0.42 wheels, most of it their shared libraries.
CHILD_PROCESS_BYTES = int(1.0 * _GB)


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


def reference_memory(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                     dtype: torch.dtype, bounds: Bounds | None = None) -> RunMemory:
    """:func:`run_memory` of the CPU reference: a float64 one estimated as it runs, bounded (``bounds``:
    the limits, default those of the reference process)."""
    with bounded_if_float64(dtype, bounds):
        memory = run_memory(module, task, inputs, dtype)
    if dtype == torch.float64 and memory.activations is not None:
        memory = replace(memory, activation_note=f"{memory.activation_note}, float64 bounded (tiled convolutions)")
    return memory


def reference_process_bytes(reference: RunMemory) -> int:
    """Peak resident bytes of the reference child process: its imports, the model and the activation peak."""
    return CHILD_PROCESS_BYTES + reference.total


def baseline_host_bytes(reference: RunMemory, child_process: bool, parent_loaded: bool = False) -> int:
    """Host bytes while the reference runs.

    In-process, the job's model is cast in place: the reference itself. In a child process: the child's
    peak (:func:`reference_process_bytes`) plus the job's own float32 copy that stays in the parent, unless
    ``parent_loaded`` (that copy is already out of the available memory when it is measured)."""
    if not child_process:
        return reference.total
    return reference_process_bytes(reference) + (0 if parent_loaded else reference.num_params * 4)


@dataclass(frozen=True)
class HostBudget:
    """How much host memory a CPU reference may plan for.

    Attributes:
        child_process: the reference runs in a child process (with its own imports; the job's float32 copy
            stays in the parent).
        parent_loaded: the job's float32 copy is loaded already (so not counted again).
        headroom: the share of the available memory that may be planned for.
        available: bytes available (``None``: measured now).
        what: the workload, as the refusal names it.
    """

    child_process: bool = True
    parent_loaded: bool = False
    headroom: float = DEFAULT_HEADROOM
    available: int | None = None
    what: str = "the model"


def estimate_reference(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                       precision: torch.dtype, budget: HostBudget = HostBudget()) -> dict[str, Any]:
    """The record's view of a CPU reference in ``precision``: the estimate (bounded in float64), the host bytes
    it needs (``host_need_mb``; ``reference_process_mb``: the child process's own peak) against the bytes
    available, and ``fits``. Never raises for memory."""
    reference = reference_memory(module, task, inputs, precision)
    need = baseline_host_bytes(reference, budget.child_process, budget.parent_loaded)
    available = available_host_bytes() if budget.available is None else int(budget.available)
    info = {**reference.to_dict(), "host_need_mb": need / 1e6, "host_available_mb": available / 1e6,
            "headroom": budget.headroom, "fits": need <= budget.headroom * available}
    if budget.child_process:
        info["reference_process_mb"] = reference_process_bytes(reference) / 1e6
    return info


def check_baseline_memory(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                          precision: torch.dtype, budget: HostBudget = HostBudget()) -> dict[str, Any]:
    """Refuse a CPU reference run that would not fit in host memory, before it allocates anything.

    Returns:
        The record's view (:func:`estimate_reference`) with ``fits: True``.

    Raises:
        InsufficientMemoryError: the estimate exceeds ``budget.headroom`` x the available host memory.
    """
    info = estimate_reference(module, task, inputs, precision, budget)
    if not info["fits"]:
        raise InsufficientMemoryError(_refusal([info], replace(budget, available=int(info["host_available_mb"] * 1e6))))
    return info


def choose_auto_reference(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                          budget: HostBudget = HostBudget()) -> tuple[torch.dtype, dict[str, Any]]:
    """``baseline.reference=auto``: float64 whenever its bounded estimate fits, else float32 when that fits.

    Returns:
        (the chosen dtype, the record's view: the chosen estimate, ``choice`` with the reason and, when
        float64 did not fit, its estimate under ``float64``).

    Raises:
        InsufficientMemoryError: neither fits (the message gives both estimates).
    """
    f64 = estimate_reference(module, task, inputs, torch.float64, budget)
    if f64["fits"]:
        return torch.float64, {**f64, "choice": "auto: float64, its bounded estimate fits in host memory"}
    f32 = estimate_reference(module, task, inputs, torch.float32, budget)
    if not f32["fits"]:
        available = int(f32["host_available_mb"] * 1e6)
        raise InsufficientMemoryError(_refusal([f64, f32], replace(budget, available=available)))
    reason = (f"auto: float32, because the float64 reference needs about {f64['host_need_mb'] / 1e3:.1f} GB even "
              f"bounded, more than {budget.headroom:.0%} of the {f64['host_available_mb'] / 1e3:.1f} GB available; "
              f"float32 needs about {f32['host_need_mb'] / 1e3:.1f} GB")
    return torch.float32, {**f32, "choice": reason, "float64": f64}


def _estimate_text(info: Mapping[str, Any]) -> str:
    activations = (f"activations peaking at about {info['activations_mb'] / 1e3:.1f} GB (estimated on the meta device)"
                   if info.get("activations_mb") is not None else info.get("activation_note"))
    return (f"{info['dtype']}: about {info['host_need_mb'] / 1e3:.1f} GB (parameters {info['num_params']:,} = "
            f"{info['parameters_mb'] / 1e3:.1f} GB, {activations})")


def _refusal(estimates: list[Mapping[str, Any]], budget: HostBudget) -> str:
    dtypes = " or ".join(info["dtype"] for info in estimates)
    process = (" in a child process (its imports and, unless loaded already, the job's own float32 copy included)"
               if budget.child_process else "")
    return (
        f"refusing the CPU reference of {budget.what} in {dtypes}: it needs "
        f"{'; '.join(_estimate_text(info) for info in estimates)} of host memory{process}, but "
        f"{budget.available / _GB:.1f} GB is available and at most {budget.headroom:.0%} of it is planned for. "
        "Nothing was allocated. Use a smaller preset (`preset=mini`, or lower "
        "`preset.height`/`preset.width`/`preset.num_frames`/`preset.batch_size`), `baseline.reference=float32` "
        "(half the bytes of float64), `baseline.enabled=false` for a performance-only run, or compute the "
        "reference once on a host with more memory (it is cached under baseline.cache_dir and reused)."
    )


def job_budget(query: Any, parent_loaded: bool = True) -> HostBudget:
    """The host budget of a job's CPU reference (``query``: a :class:`ascendbench.baseline.ReferenceQuery`)."""
    cfg = query.cfg
    shapes = ", ".join(f"{name} {list(t.shape)}" for name, t in query.inputs.items())
    return HostBudget(child_process=str(cfg.baseline.get("process", "child")) == "child", parent_loaded=parent_loaded,
                      what=f"{cfg.model.name} at preset {cfg.preset.name} (inputs {shapes})")


def memory_check_skipped(query: Any) -> str | None:
    """Why the reference needs no memory check (``baseline.memory_check=false``, or a cache hit), else ``None``."""
    if not bool(query.cfg.baseline.get("memory_check", True)):
        return "baseline.memory_check=false"
    if query.cached():
        return "the reference is cached; nothing to compute"
    return None


def guard_reference_memory(query: Any) -> dict[str, Any]:
    """The job's check before its CPU reference (a :class:`ascendbench.baseline.ReferenceQuery`): skipped on
    a baseline cache hit or with ``baseline.memory_check=false``; else :func:`check_baseline_memory` (raises
    when it does not fit). The job's own float32 copy is loaded by now, so it is already out of the
    available memory: counting it again (as a plan made before the load must) would refuse references that fit."""
    skipped = memory_check_skipped(query)
    if skipped:
        return {"skipped": skipped}
    return check_baseline_memory(query.module, query.task, query.inputs, query.precision, job_budget(query))
