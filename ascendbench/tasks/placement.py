"""Putting a model and its inputs on a device in a dtype -- the seam that lets a "model" be a pipeline.

A ``torch.nn.Module`` moves with ``module.to(device=..., dtype=...)``. A diffusers pipeline is no
module: casting it, moving it or offloading it to the CPU between its components is the task's
business. A task that knows better defines ``to(model, device, dtype) -> model``; the runner and
the baseline call :func:`place`, which uses it when present.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch


def place(task: Any, model: Any, device: torch.device | str, dtype: torch.dtype) -> Any:
    """``task.to(model, device, dtype)`` when the task defines it, else ``model.to(device=, dtype=)``.

    Returns:
        The placed model (the same object for modules and pipelines).
    """
    to = getattr(task, "to", None)
    if to is not None:
        return to(model, torch.device(device), dtype)
    model.to(device=device, dtype=dtype)
    return model


def move_inputs(inputs: Mapping[str, torch.Tensor], device: torch.device | str,
                dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Tensors on ``device``; floating-point ones cast to ``dtype``, the others (ids, seeds) kept."""
    return {k: v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
            for k, v in inputs.items()}
