"""Putting a model and its inputs on a device in a dtype -- the seam that lets a "model" be a pipeline.

A ``torch.nn.Module`` moves with ``module.to(device=..., dtype=...)`` (:meth:`Task.to`'s default). A
diffusers pipeline is no module: casting it, moving it or offloading it to the CPU between its
components is the task's business, so a task that knows better overrides ``to(model, device, dtype)``.
The runner and the baseline call :func:`place`.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.tasks.base import Task


def place(task: Task, model: Any, device: torch.device | str, dtype: torch.dtype) -> Any:
    """``task.to(model, torch.device(device), dtype)``: the model on ``device`` in ``dtype``.

    Returns:
        The placed model (the same object for modules and pipelines).
    """
    return task.to(model, torch.device(device), dtype)


def move_inputs(inputs: Mapping[str, torch.Tensor], device: torch.device | str,
                dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Tensors on ``device``; floating-point ones cast to ``dtype``, the others (ids, seeds) kept."""
    return {k: v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
            for k, v in inputs.items()}
