"""Video VAE decode: a deterministic 5-D latent -> the decoder -> a video in [-1, 1].

The latent follows the preset: ``F`` frames at ``H x W`` become ``T = 1 + (F - 1) / temporal``
latent frames at ``H / spatial x W / spatial`` (causal video VAEs keep the first frame on its own).
The LTX-Video / LTX-2 VAE (32x spatial, 8x temporal, 128 channels) at the mini preset
``256 x 256 x 9`` decodes the latent ``[1, 128, 2, 8, 8]`` of the seed report.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ascendbench.errors import ConfigError, TaskError
from ascendbench.tasks.inputs import cpu_randn
from ascendbench.tasks.vae_decode import VaeDecodeTask

VAE_OPTION_KEYS = ("enable_slicing", "enable_tiling", "tiling")


def video_latent_shape(preset: Mapping[str, Any], channels: int, spatial: int,
                       temporal: int) -> tuple[int, int, int, int, int]:
    """``[batch, channels, 1 + (F - 1) / temporal, H / spatial, W / spatial]`` for a preset.

    >>> video_latent_shape({"height": 256, "width": 256, "num_frames": 9, "batch_size": 1}, 128, 32, 8)
    (1, 128, 2, 8, 8)
    """
    height, width = int(preset["height"]), int(preset["width"])
    frames, batch = int(preset["num_frames"]), int(preset["batch_size"])
    if height % spatial or width % spatial or min(height, width, batch) <= 0:
        fix_h, fix_w = max(spatial, height // spatial * spatial), max(spatial, width // spatial * spatial)
        raise TaskError(
            f"preset.height={height} and preset.width={width} must be positive multiples of the model's "
            f"spatial compression {spatial}, and preset.batch_size={batch} positive. Choose e.g. "
            f"`preset.height={fix_h} preset.width={fix_w}`."
        )
    if frames < 1 or (frames - 1) % temporal:
        fixed = 1 + max(0, (frames - 1) // temporal) * temporal
        raise TaskError(
            f"preset.num_frames={frames} must be 1 + a multiple of the model's temporal compression "
            f"{temporal} (1, {1 + temporal}, {1 + 2 * temporal}, ...). Choose e.g. `preset.num_frames={fixed}`."
        )
    return (batch, int(channels), 1 + (frames - 1) // temporal, height // spatial, width // spatial)


def apply_vae_options(vae: Any, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Switch a diffusers video VAE's slicing and tiling on or off as configured.

    Args:
        vae: the VAE (``enable_slicing``/``enable_tiling`` and their ``disable_`` twins).
        options: ``enable_slicing`` (bool), ``enable_tiling`` (bool), ``tiling`` (keyword arguments of
            ``enable_tiling``, e.g. ``tile_sample_min_height``).

    Returns:
        What was applied, for the record.
    """
    options = dict(options or {})
    unknown = sorted(set(options) - set(VAE_OPTION_KEYS))
    if unknown:
        raise ConfigError(
            f"vae options {unknown} are not known; allowed: {', '.join(VAE_OPTION_KEYS)} "
            "(e.g. `model.task.vae.enable_tiling=true`)."
        )
    slicing, tiling = bool(options.get("enable_slicing")), bool(options.get("enable_tiling"))
    (vae.enable_slicing if slicing else vae.disable_slicing)()
    if tiling:
        vae.enable_tiling(**dict(options.get("tiling") or {}))
    else:
        vae.disable_tiling()
    return {"enable_slicing": slicing, "enable_tiling": tiling, "tiling": dict(options.get("tiling") or {})}


class VideoDecodeTask(VaeDecodeTask):
    """Decode a 5-D latent drawn from ``torch.Generator(seed)``; the output is ``[B, 3, F, H, W]``.

    Args:
        latent_channels: channels of the latent space.
        spatial_compression: pixels per latent element along height and width.
        temporal_compression: frames per latent frame after the first.
        output_name: key of the decoded video in the outputs dict.
        vae: slicing/tiling options (see :func:`apply_vae_options`), applied wherever the model is placed.
    """

    kind = "video_decode"
    output_kind = "video"
    report_metrics = {"error": "mean_rel_err", "psnr": "video_psnr_db_mean", "ssim": "video_ssim_mean"}
    unit = "frames"
    video_layout = "BCTHW"
    value_range = (-1.0, 1.0)
    preset_keys = ("batch_size", "height", "width", "num_frames")

    def __init__(self, latent_channels: int, spatial_compression: int, temporal_compression: int,
                 output_name: str = "video", vae: Mapping[str, Any] | None = None) -> None:
        super().__init__(latent_channels, spatial_compression, output_name)
        self.temporal_compression = int(temporal_compression)
        self.vae_options = dict(vae or {})
        self.applied: dict[str, Any] = {}  # what the last to() applied

    def latent_shape(self, preset: Mapping[str, Any]) -> tuple[int, ...]:
        """``[B, C, T, H/s, W/s]`` for the preset (see :func:`video_latent_shape`)."""
        return video_latent_shape(preset, self.latent_channels, self.spatial_compression, self.temporal_compression)

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The latent, float32 on CPU."""
        return {"latent": cpu_randn(self.latent_shape(preset), seed)}

    def to(self, model: torch.nn.Module, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
        """Move and cast the VAE, then apply the slicing/tiling options (same on reference and device)."""
        model.to(device=device, dtype=dtype)
        self.applied = {"vae": apply_vae_options(model, self.vae_options)}
        return model

    def applied_options(self) -> dict[str, Any]:
        """The slicing/tiling the last :meth:`to` applied (``{"vae": ...}``)."""
        return dict(self.applied)

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Frames decoded by one call: ``batch x (1 + (T - 1) x temporal)``."""
        batch, _, latent_frames = inputs["latent"].shape[:3]
        return int(batch) * (1 + (int(latent_frames) - 1) * self.temporal_compression)
