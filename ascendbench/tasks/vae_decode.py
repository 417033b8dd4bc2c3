"""VAE decode: a deterministic latent -> the decoder -> images in [-1, 1]."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.errors import TaskError
from ascendbench.tasks.base import Task
from ascendbench.tasks.inputs import cpu_randn


class VaeDecodeTask(Task):
    """Decode a latent drawn from ``torch.Generator(seed)``; shape follows the preset.

    The latent is ``[batch_size, latent_channels, height / spatial_compression,
    width / spatial_compression]``; the output ``output_name`` is ``vae.decode(latent).sample``.

    Args:
        latent_channels: channels of the model's latent space.
        spatial_compression: pixels per latent element along height and width.
        output_name: key of the decoded tensor in the outputs dict.
    """

    kind = "vae_decode"
    output_kind = "image"
    report_metrics = {"error": "mean_rel_err", "psnr": "image_psnr_db", "ssim": "image_ssim"}
    unit = "images"

    def __init__(self, latent_channels: int, spatial_compression: int, output_name: str = "image") -> None:
        self.latent_channels = int(latent_channels)
        self.spatial_compression = int(spatial_compression)
        self.output_name = output_name

    def latent_shape(self, preset: Mapping[str, Any]) -> tuple[int, int, int, int]:
        """Latent shape for a preset; sizes must be multiples of the compression."""
        height, width, batch = int(preset["height"]), int(preset["width"]), int(preset["batch_size"])
        factor = self.spatial_compression
        if height % factor or width % factor or min(height, width, batch) <= 0:
            raise TaskError(
                f"preset.height={height} and preset.width={width} must be positive multiples of the "
                f"model's spatial compression {factor}, and preset.batch_size={batch} positive. "
                f"Choose e.g. `preset.height={max(factor, height // factor * factor)}`."
            )
        return (batch, self.latent_channels, height // factor, width // factor)

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The latent, float32 on CPU."""
        return {"latent": cpu_randn(self.latent_shape(preset), seed)}

    def run(self, model: torch.nn.Module, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Decode; the inputs are already on the model's device and dtype."""
        with torch.inference_mode():
            decoded = model.decode(inputs["latent"]).sample
        return {self.output_name: decoded}

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Images produced by one call (for throughput)."""
        return int(inputs["latent"].shape[0])
