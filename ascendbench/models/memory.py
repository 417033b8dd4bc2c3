"""Refuse what cannot fit, before allocating it: parameters x bytes against free memory.

A 9-billion-parameter pipeline randomly initialised in float32 needs 36 GB before its first forward;
on a 24 GB host the kernel would kill the job mid-allocation and leave no readable cause. The loaders
call :func:`check_host_memory` with an estimate computed without allocating anything:

* from the architecture config: the model is built on the ``meta`` device (shapes only, no storage)
  and its parameters and buffers are counted -- :func:`count_meta_params`;
* from weights on disk: the safetensors headers give every tensor's shape -- :func:`safetensors_numel`.

The refusal names the numbers, the config key to change, and the smaller option (the tiny twin).

>>> MemoryEstimate("demo", {"transformer": 2_000_000_000}, "float32").gigabytes
8.0
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import torch

from ascendbench.errors import InsufficientMemoryError

log = logging.getLogger(__name__)

BYTES_PER_ELEMENT = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
}
# Share of the available memory a model's parameters may take; the rest is left for activations,
# the second copy a dtype cast makes, and the rest of the process.
DEFAULT_HEADROOM = 0.8
_GB = 1e9


@dataclass(frozen=True)
class MemoryEstimate:
    """Parameter memory of a model, by part, for one element dtype.

    Attributes:
        what: what is estimated, in words (e.g. ``random-init diffusers.LTX2Pipeline``).
        parts: part name -> element count (parameters and buffers).
        dtype: element dtype the model will be held in (a key of :data:`BYTES_PER_ELEMENT`).
        basis: how the counts were obtained (``architecture config on the meta device``,
            ``safetensors headers``).
    """

    what: str
    parts: Mapping[str, int]
    dtype: str
    basis: str = "architecture config on the meta device"
    notes: tuple[str, ...] = field(default=())

    @property
    def num_params(self) -> int:
        """Elements over all parts."""
        return int(sum(self.parts.values()))

    @property
    def bytes_needed(self) -> int:
        """``num_params`` x bytes per element of ``dtype``."""
        return self.num_params * BYTES_PER_ELEMENT[self.dtype]

    @property
    def gigabytes(self) -> float:
        """``bytes_needed`` in GB (10^9 bytes)."""
        return self.bytes_needed / _GB

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the record (``weights.memory_estimate``)."""
        return {"what": self.what, "num_params": self.num_params, "dtype": self.dtype,
                "bytes": self.bytes_needed, "gb": round(self.gigabytes, 3), "basis": self.basis,
                "parts": dict(self.parts)}


def tensor_count(model: Any) -> int:
    """Elements in the parameters and buffers of a module, or of a pipeline's module components."""
    modules = [model] if isinstance(model, torch.nn.Module) else [
        c for c in getattr(model, "components", {}).values() if isinstance(c, torch.nn.Module)]
    total = 0
    for module in modules:
        total += sum(p.numel() for p in module.parameters()) + sum(b.numel() for b in module.buffers())
    return int(total)


def count_meta_params(build: Callable[[], Any]) -> int:
    """Build a model on the ``meta`` device (no storage) and count its parameters and buffers.

    Args:
        build: zero-argument callable constructing the model (e.g. ``lambda: cls.from_config(cfg)``).
    """
    with torch.device("meta"):
        model = build()
    return tensor_count(model)


def safetensors_numel(paths: Iterable[Path], prefix: str = "") -> int:
    """Elements of the tensors in safetensors files (read from the headers; nothing is loaded).

    Args:
        paths: safetensors files.
        prefix: count only tensors whose name starts with it.
    """
    from safetensors import safe_open

    total = 0
    for path in paths:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                if name.startswith(prefix):
                    shape = handle.get_slice(name).get_shape()
                    total += int(torch.Size(shape).numel())
    return total


_DECLARED_HOST: list[int] = []  # a dry run planning for another machine (dry_run_target.host_memory_gb)


@contextmanager
def declared_host_memory(nbytes: int | None) -> Iterator[None]:
    """Inside, :func:`available_host_bytes` answers ``nbytes`` (``None``: measured as usual): a dry run that
    plans for the machine the job will run on (``dry_run_target.host_memory_gb``), not this one."""
    if nbytes is None:
        yield
        return
    _DECLARED_HOST.append(int(nbytes))
    try:
        yield
    finally:
        _DECLARED_HOST.pop()


def measured_host_bytes() -> int:
    """Host memory available to a new allocation now on this machine (``psutil.virtual_memory().available``)."""
    import psutil

    return int(psutil.virtual_memory().available)


def available_host_bytes() -> int:
    """Host memory available to a new allocation: measured here, or what a dry run declared
    (:func:`declared_host_memory`)."""
    return _DECLARED_HOST[-1] if _DECLARED_HOST else measured_host_bytes()


def check_host_memory(estimate: MemoryEstimate, hint: str, headroom: float = DEFAULT_HEADROOM,
                      available: int | None = None,
                      skip_key: str | None = "model.loader.memory_check=false") -> dict[str, Any]:
    """Raise :class:`InsufficientMemoryError` unless ``estimate`` fits in host memory.

    Args:
        estimate: what the model needs.
        hint: the smaller option to suggest (e.g. ``run `model=tiny_ltx_t2v```).
        headroom: share of the available memory the parameters may take.
        available: bytes available (measured with psutil when ``None``).
        skip_key: the override that turns the check off, named in the refusal (``None``: none).

    Returns:
        The record's view of the check (estimate, available, headroom, ``fits: True``).
    """
    available = available_host_bytes() if available is None else int(available)
    budget = available * float(headroom)
    info = {**estimate.to_dict(), "available_bytes": available, "available_gb": round(available / _GB, 3),
            "headroom": float(headroom), "fits": estimate.bytes_needed <= budget}
    if not info["fits"]:
        raise InsufficientMemoryError(_refusal(estimate, available, headroom, hint, skip_key))
    log.info("memory check: %s needs %.2f GB (%s) of %.2f GB available", estimate.what, estimate.gigabytes,
             f"{estimate.num_params:,} parameters x {BYTES_PER_ELEMENT[estimate.dtype]} B, {estimate.dtype}",
             available / _GB)
    return info


def _refusal(estimate: MemoryEstimate, available: int, headroom: float, hint: str, skip_key: str | None) -> str:
    parts = ", ".join(f"{name} {count / 1e9:.3f}B" for name, count in estimate.parts.items())
    return (
        f"refusing to allocate {estimate.what}: it needs about {estimate.gigabytes:.1f} GB for its "
        f"parameters alone ({estimate.num_params:,} parameters x {BYTES_PER_ELEMENT[estimate.dtype]} bytes "
        f"in {estimate.dtype}; {parts}; counted from the {estimate.basis}), but only "
        f"{available / _GB:.1f} GB of host memory is available and at most {headroom:.0%} of it may go to "
        f"parameters (activations come on top). Nothing was allocated. {hint} Or run on a host with more "
        "memory" + (f"; `{skip_key}` skips this check at the risk of the job being killed by the kernel." if skip_key
                    else ".")
    )
