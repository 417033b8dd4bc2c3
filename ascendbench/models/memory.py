"""Memory a model run will need, estimated without allocating it (``meta`` device, safetensors
headers), and the refusal of what cannot fit.
>>> MemoryEstimate("demo", {"transformer": 2_000_000_000}, "float32").gigabytes
8.0"""

from __future__ import annotations

import functools
import logging
import math
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import psutil
import torch
from safetensors import safe_open
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ascendbench.errors import InsufficientMemoryError
from ascendbench.precision import dtype_name
from ascendbench.progress import quiet

log = logging.getLogger(__name__)

# Share of the available memory the parameters may take; the rest is for activations, the copy a
# dtype cast makes, and the process itself.
DEFAULT_HEADROOM = 0.8
_CONV_OPS = {"conv1d": 6, "conv2d": 6, "conv3d": 6, "convolution": 8}  # op -> index of `groups`
_DECLARED_HOST: list[int] = []  # a dry run planning for another machine (dry_run_target)


def module_components(model: Any) -> dict[str, torch.nn.Module]:
    """The modules holding a model's tensors: ``model``, or a pipeline's module components."""
    if isinstance(model, torch.nn.Module):
        return {"model": model}
    components = getattr(model, "components", None) or {}
    return {name: c for name, c in components.items() if isinstance(c, torch.nn.Module)}


def tensor_count(model: Any, buffers: bool = True) -> int:
    """Elements of the parameters (and buffers) of a module or a pipeline's module components."""
    modules = module_components(model).values()
    return sum(t.numel() for module in modules
               for t in (*module.parameters(), *(module.buffers() if buffers else ())))


def count_meta_params(build: Callable[[], Any]) -> int:
    """Parameters and buffers of the model ``build()`` constructs on the ``meta`` device."""
    with torch.device("meta"):
        return tensor_count(build())


def safetensors_numel(paths: Iterable[Path], prefix: str = "") -> int:
    """Elements of the tensors named ``prefix...`` in safetensors files, read from the headers."""
    total = 0
    for path in paths:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                if name.startswith(prefix):
                    total += math.prod(handle.get_slice(name).get_shape())
    return total


@dataclass(frozen=True)
class MemoryEstimate:
    """Parameter memory of a model: element counts by part, the dtype held in, how counted."""

    what: str
    parts: Mapping[str, int]
    dtype: str
    basis: str = "architecture config on the meta device"

    @property
    def num_params(self) -> int:
        """Elements over all parts."""
        return int(sum(self.parts.values()))

    @property
    def bytes_needed(self) -> int:
        """``num_params`` x bytes per element of ``dtype``."""
        return self.num_params * getattr(torch, self.dtype).itemsize

    @property
    def gigabytes(self) -> float:
        """``bytes_needed`` in GB (10^9 bytes)."""
        return self.bytes_needed / 1e9

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the record."""
        return {"what": self.what, "num_params": self.num_params, "dtype": self.dtype,
                "bytes": self.bytes_needed, "gb": round(self.gigabytes, 3), "basis": self.basis,
                "parts": dict(self.parts)}


@contextmanager
def declared_host_memory(nbytes: int | None) -> Iterator[None]:
    """Inside, :func:`available_host_bytes` answers ``nbytes`` (``None``: measured)."""
    _DECLARED_HOST.extend([] if nbytes is None else [int(nbytes)])
    try:
        yield
    finally:
        if nbytes is not None:
            _DECLARED_HOST.pop()


def measured_host_bytes() -> int:
    """Host memory available to a new allocation on this machine now."""
    return int(psutil.virtual_memory().available)


def available_host_bytes() -> int:
    """Host memory available: measured here, or what a dry run declared."""
    return _DECLARED_HOST[-1] if _DECLARED_HOST else measured_host_bytes()


def check_host_memory(estimate: MemoryEstimate, hint: str, available: int | None = None,
                      skip_key: str | None = "model.loader.memory_check=false") -> dict[str, Any]:
    """The record's view of the check; InsufficientMemoryError unless ``estimate`` fits."""
    available = available_host_bytes() if available is None else int(available)
    headroom = DEFAULT_HEADROOM
    fits = estimate.bytes_needed <= available * float(headroom)
    info = {**estimate.to_dict(), "available_bytes": available, "fits": fits,
            "available_gb": round(available / 1e9, 3), "headroom": float(headroom)}
    per = f"{estimate.num_params:,} parameters x {getattr(torch, estimate.dtype).itemsize} bytes"
    if not info["fits"]:
        parts = ", ".join(f"{name} {count / 1e9:.3f}B" for name, count in estimate.parts.items())
        skip = (f"; `{skip_key}` skips this check at the risk of the job being killed by the "
                "kernel." if skip_key else ".")
        raise InsufficientMemoryError(
            f"refusing to allocate {estimate.what}: it needs about {estimate.gigabytes:.1f} GB for "
            f"its parameters alone ({per} in {estimate.dtype}; {parts}; counted from the "
            f"{estimate.basis}), but only {available / 1e9:.1f} GB of host memory is available "
            f"and at most {headroom:.0%} of it may go to parameters (activations come on top). "
            f"Nothing was allocated. {hint} Or run on a host with more memory{skip}")
    log.info("memory check: %s needs %.2f GB (%s) of %.2f GB available", estimate.what,
             estimate.gigabytes, per, available / 1e9)
    return info


class LiveTensorBytes(TorchDispatchMode):
    """Peak bytes of the tensors the ops under this mode create, plus CPU conv workspaces."""

    def __init__(self) -> None:
        super().__init__()
        self._live: dict[int, list[int]] = {}  # storage id -> [bytes, tensors alive]
        self.current = self.peak = 0

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] == 0:
                self.current -= entry[0]
                del self._live[key]

    def _track(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        entry = self._live.get(storage._cdata)
        if entry is None:
            entry = self._live[storage._cdata] = [storage.nbytes(), 0]
            self.current += entry[0]
            self.peak = max(self.peak, self.current)
        entry[1] += 1
        weakref.finalize(tensor, self._release, storage._cdata)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        groups_at = _CONV_OPS.get(func.overloadpacket.__name__)
        if groups_at is not None and isinstance(out, torch.Tensor):
            x, weight, out_bytes = args[0], args[1], out.untyped_storage().nbytes()
            groups = int(args[groups_at]) if len(args) > groups_at else 1
            workspace = 2 * out_bytes
            if x.dtype == torch.float64:
                unfolded = (x.shape[1] // groups) * math.prod(weight.shape[2:]) * x.shape[0]
                workspace = unfolded * math.prod(out.shape[2:]) * x.element_size() + out_bytes
            self.peak = max(self.peak, self.current + workspace)
        for item in tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor):
                self._track(item)
        return out


class _TaskCall(torch.nn.Module):
    """``task.run(model, inputs)`` as a forward, for :func:`torch.func.functional_call`."""

    def __init__(self, model: Any, task: Any) -> None:
        super().__init__()
        self.parts = torch.nn.ModuleDict(module_components(model))
        self._call = (model, task)  # a tuple: not registered as a submodule a second time

    def forward(self, inputs: Mapping[str, torch.Tensor]) -> Any:
        model, task = self._call
        return task.run(model, inputs)


def activation_bytes(module: Any, task: Any, inputs: Mapping[str, torch.Tensor],
                     dtype: torch.dtype) -> int:
    """Peak bytes of ``task.run`` in ``dtype`` beyond the parameters, run on the meta device."""
    meta_inputs = {k: torch.empty(v.shape, device="meta", dtype=dtype) if v.is_floating_point()
                   else v for k, v in inputs.items()}
    parts = module_components(module)
    if all(p.is_meta for part in parts.values() for p in part.parameters()):
        for part in parts.values():
            part.to(dtype=dtype)
        call = functools.partial(task.run, module, meta_inputs)
    else:
        wrapped = _TaskCall(module, task)
        state = {name: torch.empty(t.shape, device="meta",
                                   dtype=dtype if t.is_floating_point() else t.dtype)
                 for name, t in [*wrapped.named_parameters(), *wrapped.named_buffers()]}
        call = functools.partial(torch.func.functional_call, wrapped, state, (meta_inputs,),
                                 tie_weights=True)
    with torch.inference_mode(), quiet(), LiveTensorBytes() as tracker:  # quiet: no progress bars
        call()
    return tracker.peak


@dataclass(frozen=True)
class RunMemory:
    """What one run in one dtype needs: parameters, activation peak (``None``: not estimated)."""

    num_params: int
    dtype: torch.dtype
    activations: int | None
    activation_note: str = ""

    @property
    def parameter_bytes(self) -> int:
        """Parameters and buffers in ``dtype``."""
        return self.num_params * self.dtype.itemsize

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


def run_memory(module: Any, task: Any, inputs: Mapping[str, torch.Tensor],
               dtype: torch.dtype) -> RunMemory:
    """Parameters and activation peak of ``task.run`` in ``dtype``; never raises for activations."""
    try:
        activations = activation_bytes(module, task, inputs, dtype)
        note = "meta-device run of the task"
    except Exception as exc:  # the task does something meta tensors cannot (e.g. reads a value)
        activations = None
        note = f"activations not estimated ({type(exc).__name__}: {str(exc)[:120]})"
    return RunMemory(tensor_count(module), dtype, activations, note)
