"""VAE decode: a latent drawn from ``torch.Generator(seed)`` -> the decoder -> images or videos."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.errors import ConfigError, TaskError
from ascendbench.tasks.base import Task
from ascendbench.tasks.inputs import cpu_randn

VAE_OPTION_KEYS = ("enable_slicing", "enable_tiling", "tiling")


def latent_shape(preset: Mapping[str, Any], channels: int, spatial: int,
                 temporal: int | None = None) -> tuple[int, ...]:
    """``[B, C, H / spatial, W / spatial]``, with ``1 + (F - 1) / temporal`` frames after ``C``.
    >>> latent_shape({"height": 256, "width": 256, "num_frames": 9, "batch_size": 1}, 128, 32, 8)
    (1, 128, 2, 8, 8)"""
    height, width, batch = int(preset["height"]), int(preset["width"]), int(preset["batch_size"])
    if height % spatial or width % spatial or min(height, width, batch) <= 0:
        fix_h, fix_w = (max(spatial, size // spatial * spatial) for size in (height, width))
        raise TaskError(
            f"preset.height={height} and preset.width={width} must be positive multiples of the "
            f"model's spatial compression {spatial}, and preset.batch_size={batch} positive. "
            f"Choose e.g. `preset.height={fix_h} preset.width={fix_w}`.")
    if temporal is None:
        return (batch, int(channels), height // spatial, width // spatial)
    frames = int(preset["num_frames"])
    if frames < 1 or (frames - 1) % temporal:
        fixed = 1 + max(0, (frames - 1) // temporal) * temporal
        raise TaskError(
            f"preset.num_frames={frames} must be 1 + a multiple of the model's temporal "
            f"compression {temporal} (1, {1 + temporal}, {1 + 2 * temporal}, ...). Choose e.g. "
            f"`preset.num_frames={fixed}`.")
    return (batch, int(channels), 1 + (frames - 1) // temporal, height // spatial, width // spatial)


def apply_vae_options(vae: Any, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Switch a diffusers VAE's slicing and tiling on or off; what was applied, for the record."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(VAE_OPTION_KEYS))
    if unknown:
        raise ConfigError(f"vae options {unknown} are not known; allowed: "
                          f"{', '.join(VAE_OPTION_KEYS)} (e.g. "
                          "`model.task.vae.enable_tiling=true`).")
    slicing, tiling = bool(options.get("enable_slicing")), bool(options.get("enable_tiling"))
    tiling_args = dict(options.get("tiling") or {})
    (vae.enable_slicing if slicing else vae.disable_slicing)()
    if tiling:
        vae.enable_tiling(**tiling_args)
    else:
        vae.disable_tiling()
    return {"enable_slicing": slicing, "enable_tiling": tiling, "tiling": tiling_args}


class VaeDecodeTask(Task):
    """``vae.decode(latent).sample`` of a ``[batch, latent_channels, H / s, W / s]`` latent."""

    kind = "vae_decode"
    output_kind = "image"
    report_metrics = {"error": "mean_rel_err", "psnr": "image_psnr_db", "ssim": "image_ssim"}
    unit = "images"
    temporal_compression: int | None = None  # video latents: frames compressed by this factor

    def __init__(self, latent_channels: int, spatial_compression: int,
                 output_name: str = "image") -> None:
        self.latent_channels = int(latent_channels)
        self.spatial_compression = int(spatial_compression)
        self.output_name = output_name

    def latent_shape(self, preset: Mapping[str, Any]) -> tuple[int, ...]:
        """The latent's shape for a preset (``[B, C, T, H/s, W/s]`` for a video latent)."""
        return latent_shape(preset, self.latent_channels, self.spatial_compression,
                            self.temporal_compression)

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The latent, float32 on CPU."""
        return {"latent": cpu_randn(self.latent_shape(preset), seed)}

    def run(self, model: Any, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Decode the latent."""
        with torch.inference_mode():
            return {self.output_name: model.decode(inputs["latent"]).sample}

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Images decoded by one call."""
        return int(inputs["latent"].shape[0])


class VideoDecodeTask(VaeDecodeTask):
    """Decode a 5-D latent to ``[B, 3, F, H, W]`` with the VAE's slicing/tiling (``vae``)."""

    kind = "video_decode"
    output_kind = "video"
    report_metrics = {"error": "mean_rel_err", "psnr": "video_psnr_db_mean",
                      "ssim": "video_ssim_mean"}
    unit = "frames"
    preset_keys = ("batch_size", "height", "width", "num_frames")

    def __init__(self, latent_channels: int, spatial_compression: int, temporal_compression: int,
                 output_name: str = "video", vae: Mapping[str, Any] | None = None) -> None:
        super().__init__(latent_channels, spatial_compression, output_name)
        self.temporal_compression = int(temporal_compression)
        self.vae_options = dict(vae or {})
        self.applied: dict[str, Any] = {}

    def to(self, model: Any, device: torch.device, dtype: torch.dtype) -> Any:
        """Move and cast the VAE, then apply the slicing/tiling options."""
        model.to(device=device, dtype=dtype)
        self.applied = {"vae": apply_vae_options(model, self.vae_options)}
        return model

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Frames decoded by one call: ``batch x (1 + (T - 1) x temporal)``."""
        batch, _, latent_frames = inputs["latent"].shape[:3]
        return int(batch) * (1 + (int(latent_frames) - 1) * self.temporal_compression)
