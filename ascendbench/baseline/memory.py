"""The CPU reference's memory estimate, and the refusal of one that would not fit, up front."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

import torch

from ascendbench.baseline.bounded import Bounds, bounded_if_float64
from ascendbench.errors import InsufficientMemoryError
from ascendbench.models.memory import DEFAULT_HEADROOM, RunMemory, available_host_bytes, run_memory

Inputs = Mapping[str, torch.Tensor]
# Peak resident memory of `python -m ascendbench.baseline` for a model of negligible size
# (tiny_flux2_decoder: 0.56 GB after importing torch, 1.0 GB peak; torch 2.14 + diffusers 0.42).
CHILD_PROCESS_BYTES = int(1e9)


@dataclass(frozen=True)
class HostBudget:
    """Host memory a reference may plan for: ``headroom`` x ``available`` (None: measured now)."""

    child_process: bool = True
    parent_loaded: bool = False
    headroom: float = DEFAULT_HEADROOM
    available: int | None = None
    what: str = "the model"


def reference_memory(module: torch.nn.Module, task: Any, inputs: Inputs, dtype: torch.dtype,
                     bounds: Bounds | None = None) -> RunMemory:
    """:func:`run_memory` of the CPU reference, a float64 one bounded as it runs."""
    with bounded_if_float64(dtype, bounds):
        memory = run_memory(module, task, inputs, dtype)
    if dtype == torch.float64 and memory.activations is not None:
        note = f"{memory.activation_note}, float64 bounded (tiled convolutions)"
        memory = replace(memory, activation_note=note)
    return memory


def estimate_reference(module: torch.nn.Module, task: Any, inputs: Inputs, precision: torch.dtype,
                       budget: HostBudget = HostBudget()) -> dict[str, Any]:
    """The record's view of a reference in ``precision``: host bytes needed, free, ``fits``."""
    reference = reference_memory(module, task, inputs, precision)
    need = reference.total
    if budget.child_process:
        need += CHILD_PROCESS_BYTES + (0 if budget.parent_loaded else reference.num_params * 4)
    available = available_host_bytes() if budget.available is None else int(budget.available)
    info = {**reference.to_dict(), "host_need_mb": need / 1e6, "host_available_mb": available / 1e6,
            "headroom": budget.headroom, "fits": need <= budget.headroom * available}
    if budget.child_process:
        info["reference_process_mb"] = (CHILD_PROCESS_BYTES + reference.total) / 1e6
    return info


def _refusal(estimates: list[Mapping[str, Any]], budget: HostBudget) -> InsufficientMemoryError:
    needs = []
    for info in estimates:
        activations = info.get("activation_note")
        if info.get("activations_mb") is not None:
            activations = (f"activations peaking at about {info['activations_mb'] / 1e3:.1f} GB "
                           "(estimated on the meta device)")
        needs.append(f"{info['dtype']}: about {info['host_need_mb'] / 1e3:.1f} GB (parameters "
                     f"{info['num_params']:,} = {info['parameters_mb'] / 1e3:.1f} GB, "
                     f"{activations})")
    process = (" in a child process (its imports and, unless loaded already, the job's own float32 "
               "copy included)" if budget.child_process else "")
    available = estimates[-1]["host_available_mb"] / 1e3
    return InsufficientMemoryError(
        f"refusing the CPU reference of {budget.what} in "
        f"{' or '.join(i['dtype'] for i in estimates)}: it needs {'; '.join(needs)} of host "
        f"memory{process}, but {available:.1f} GB is available and at most "
        f"{budget.headroom:.0%} of it is planned for. Nothing was allocated. Use a smaller preset "
        "(`preset=mini`, or lower `preset.height`/`preset.width`/`preset.num_frames`/"
        "`preset.batch_size`), `baseline.reference=float32` (half the bytes of float64), "
        "`baseline.enabled=false` for a performance-only run, or compute the reference once on a "
        "host with more memory (it is cached under baseline.cache_dir and reused).")


def check_baseline_memory(module: torch.nn.Module, task: Any, inputs: Inputs,
                          precision: torch.dtype,
                          budget: HostBudget = HostBudget()) -> dict[str, Any]:
    """:func:`estimate_reference`, or :class:`InsufficientMemoryError` when it does not fit."""
    info = estimate_reference(module, task, inputs, precision, budget)
    if not info["fits"]:
        raise _refusal([info], budget)
    return info


def choose_auto_reference(module: torch.nn.Module, task: Any, inputs: Inputs,
                          budget: HostBudget = HostBudget()) -> tuple[torch.dtype, dict[str, Any]]:
    """``baseline.reference=auto``: float64 where its bounded estimate fits, else float32."""
    f64 = estimate_reference(module, task, inputs, torch.float64, budget)
    if f64["fits"]:
        return torch.float64, {**f64, "choice": "auto: float64, its bounded estimate fits in host "
                                                "memory"}
    f32 = estimate_reference(module, task, inputs, torch.float32, budget)
    if not f32["fits"]:
        raise _refusal([f64, f32], budget)
    reason = (f"auto: float32, because the float64 reference needs about "
              f"{f64['host_need_mb'] / 1e3:.1f} GB even bounded, more than "
              f"{budget.headroom:.0%} of the {f64['host_available_mb'] / 1e3:.1f} GB available; "
              f"float32 needs about {f32['host_need_mb'] / 1e3:.1f} GB")
    return torch.float32, {**f32, "choice": reason, "float64": f64}


def job_budget(query: Any) -> HostBudget:
    """The budget of a job's reference query (its float32 model is loaded already)."""
    cfg = query.cfg
    shapes = ", ".join(f"{name} {list(t.shape)}" for name, t in query.inputs.items())
    return HostBudget(child_process=str(cfg.baseline.get("process", "child")) == "child",
                      parent_loaded=True,
                      what=f"{cfg.model.name} at preset {cfg.preset.name} (inputs {shapes})")


def memory_check_skipped(query: Any) -> str | None:
    """Why the reference needs no memory check (switched off, or cached), else ``None``."""
    if not bool(query.cfg.baseline.get("memory_check", True)):
        return "baseline.memory_check=false"
    return "the reference is cached; nothing to compute" if query.cached() else None


def guard_reference_memory(query: Any) -> dict[str, Any]:
    """The check before computing a job's reference: skipped, or :func:`check_baseline_memory`."""
    skipped = memory_check_skipped(query)
    return {"skipped": skipped} if skipped else check_baseline_memory(
        query.module, query.task, query.inputs, query.precision, job_budget(query))
