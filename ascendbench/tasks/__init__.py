"""Tasks: deterministic inputs from a preset and seed, and ``run(model, inputs) -> outputs``."""

from ascendbench.tasks.inputs import cpu_randn, describe, tensor_sha256
from ascendbench.tasks.vae_decode import VaeDecodeTask

__all__ = ["VaeDecodeTask", "cpu_randn", "describe", "tensor_sha256"]
