"""ascendbench: prove that a diffusion or video model ported to an accelerator is correct and fast.

One Hydra job composes a model, a device, a dtype, a preset and metrics, runs the model's task on a
CPU reference and on the device, and writes a ``record.json`` that reports are built from.
"""

__version__ = "0.1.0"
