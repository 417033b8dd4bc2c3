"""A fault planted on the device run: a registered patch that scales and shifts one module's
output."""

from __future__ import annotations

from typing import Any

import torch

from ascendbench.compare.select import named_modules
from ascendbench.patches.registry import Patch, register_patch


@register_patch("planted_output_fault")
class PlantedOutputFault(Patch):
    """A fault planted on the device: one module's (first) output tensor scaled and shifted."""

    def __init__(self, module: str, scale: float = 3.0, shift: float = 0.5) -> None:
        self.module, self.scale, self.shift = module, scale, shift
        self.handle: Any = None

    def apply(self, target: Any) -> dict[str, Any]:
        def hook(module: torch.nn.Module, args: tuple, output: Any) -> Any:
            if isinstance(output, tuple):
                return (output[0] * self.scale + self.shift, *output[1:])
            return output * self.scale + self.shift

        self.handle = named_modules(target)[self.module].register_forward_hook(hook)
        return {"module": self.module, "scale": self.scale, "shift": self.shift}

    def restore(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None


def planted_fault(module: str) -> str:
    """The ``model.patches`` override planting the fault on ``module`` (device run only, on the CPU
    device)."""
    return f"model.patches=[{{name:planted_output_fault,module:{module},devices:[cpu]}}]"


@register_patch("planted_forward_fault")
class PlantedForwardFault(PlantedOutputFault):
    """A fault planted inside one module's forward (hooks on the module, msprobe's among them,
    see the faulty output), output scaled and shifted."""

    def apply(self, target: Any) -> dict[str, Any]:
        module = named_modules(target)[self.module]
        forward = module.forward
        module.forward = lambda *args, **kwargs: forward(*args, **kwargs) * self.scale + self.shift
        self.handle = module
        return {"module": self.module, "scale": self.scale, "shift": self.shift}

    def restore(self) -> None:
        if self.handle is not None:
            del self.handle.forward
            self.handle = None
