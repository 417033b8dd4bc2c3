"""The CPU reference's memory: its estimate (bounded in float64), the host bytes it needs, and the refusal of a
reference that would not fit, before it allocates anything.

A float64 CPU reference runs bounded (:mod:`ascendbench.baseline.bounded`: convolutions in tiles, attention
in query chunks) and :func:`reference_memory` estimates it under the same mode, so the meta run
(:mod:`ascendbench.models.memory`) sees the same tiles. The reference child process also holds its
imports (:data:`CHILD_PROCESS_BYTES`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

import torch

from ascendbench.baseline.bounded import Bounds
from ascendbench.baseline.compute import bounded_if_float64
from ascendbench.errors import InsufficientMemoryError
from ascendbench.models.memory import DEFAULT_HEADROOM, RunMemory, available_host_bytes, run_memory

_GB = 1e9
# Peak resident memory of `python -m ascendbench.baseline` for a model of negligible size (tiny_flux2_decoder:
# 0.56 GB after torch is imported, 0.85 GB with diffusers and the model built, 1.0 GB peak) with this
# project's torch 2.14 + diffusers 0.42 wheels, most of it their shared libraries.
CHILD_PROCESS_BYTES = int(1.0 * _GB)


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
