"""Text (or image) to video: a diffusers video pipeline called with everything from config."""

from __future__ import annotations

import functools
import importlib.util
import inspect
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image, UnidentifiedImageError

from ascendbench.errors import ConfigError
from ascendbench.models.sources import file_sha256
from ascendbench.progress import Progress, is_quiet
from ascendbench.tasks.base import Task
from ascendbench.tasks.inputs import cpu_randn, structured_clip
from ascendbench.tasks.vae_decode import apply_vae_options, latent_shape

log = logging.getLogger(__name__)

GENERATED = "ascendbench.tasks.inputs.structured_clip, frame 0"


@dataclass(eq=False)
class TextToVideoTask(Task):
    """Generate a video from the configured prompt; fields: ``model.task``'s keys."""

    preset_keys = ("batch_size", "height", "width", "num_frames", "steps")
    kind = "text_to_video"
    output_kind, natural_outputs = "video", True
    report_metrics = {"error": "mean_rel_err", "psnr": "video_psnr_db_mean",
                      "ssim": "video_ssim_mean"}
    unit = "frames"
    video_layout = "BTCHW"
    # preset key -> pipeline call argument
    call_keys = {"height": "height", "width": "width", "num_frames": "num_frames",
                 "steps": "num_inference_steps", "batch_size": "num_videos_per_prompt"}

    prompt: str
    negative_prompt: str | None = None
    spatial_compression: int = 32
    temporal_compression: int = 8
    call_kwargs: Mapping[str, Any] | None = None
    outputs: Mapping[str, str] | None = None
    video_outputs: Sequence[str] = ("video",)
    cpu_offload: bool = False
    vae: Mapping[str, Any] | None = None
    # State of the run, not configuration: what to() applied, the preset's call sizes, the timer.
    applied: dict[str, Any] = field(init=False, repr=False, default_factory=dict)
    _call: dict[str, Any] = field(init=False, repr=False, default_factory=dict)
    _timer: Any = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self.spatial_compression = int(self.spatial_compression)
        self.temporal_compression = int(self.temporal_compression or 0)
        self.call_kwargs = dict(self.call_kwargs or {})
        self.outputs = dict(self.outputs or {"video": "frames"})
        self.video_outputs = tuple(self.video_outputs)
        self.cpu_offload = bool(self.cpu_offload)

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The generator seed as a tensor; the preset's sizes checked against the VAE and kept."""
        latent_shape(preset, 1, self.spatial_compression, self.temporal_compression or None)
        self._call = {call: int(preset[key]) for key, call in self.call_keys.items()}
        return {"seed": torch.tensor([int(seed)], dtype=torch.int64)}

    def to(self, pipe: Any, device: torch.device, dtype: torch.dtype) -> Any:
        """Cast, move (or offload onto ``device``), set the VAE options."""
        pipe.set_progress_bar_config(disable=True)
        pipe.to(dtype=dtype)
        offload = self.cpu_offload and device.type != "cpu"
        if offload:
            if importlib.util.find_spec("accelerate") is None:
                raise ConfigError(
                    "model.task.cpu_offload=true (enable_model_cpu_offload) needs the accelerate "
                    "package, which is not installed: `pip install accelerate` (or `pip install "
                    "ascendbench[pipelines]`), or switch the option off.")
            pipe.enable_model_cpu_offload(device=device)
        else:
            pipe.to(device)
        self.applied = {"cpu_offload": offload, "vae": apply_vae_options(pipe.vae, self.vae)}
        log.info("pipeline placed on %s: %s", device, self.applied)
        return pipe

    def attach_phase_timer(self, pipe: Any, timer: Any) -> bool:
        """Per-phase timing: text encoding, each denoising step, VAE decode."""
        self._timer = timer
        if getattr(pipe, "text_encoder", None) is not None:
            timer.watch(pipe.text_encoder, "text_encoding")
        timer.watch(pipe.transformer, "denoiser")
        timer.wrap(pipe.vae, "decode", "vae_decode")
        return True

    def primary_output(self) -> str | None:
        """The first video output (``video``): the report leads with it, never with ``audio``."""
        videos = [name for name in self.outputs if name in self.video_outputs]
        return (videos or list(self.outputs) or [None])[0]

    def run(self, pipe: Any, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One pipeline call with a fresh CPU generator seeded from ``inputs["seed"]``."""
        if not self._call:
            raise RuntimeError("TextToVideoTask.run() before make_inputs(): the preset sizes are "
                               "unknown")
        generator = torch.Generator("cpu").manual_seed(int(inputs["seed"].reshape(-1)[0]))
        negative = {"negative_prompt": self.negative_prompt} if self.negative_prompt else {}
        kwargs = {"prompt": self.prompt, **negative, **self._call, **self.call_kwargs,
                  **self.pipeline_inputs(inputs), "generator": generator, "output_type": "pt"}
        timed = self._timer.step_callback(starts_with="denoiser") if self._timer else None
        steps = None if is_quiet() else Progress("denoising", unit="steps",
                                                 total=self._call.get("num_inference_steps"))

        def on_step(pipe: Any, index: int, timestep: Any, values: dict[str, Any]) -> dict:
            values = timed(pipe, index, timestep, values) if timed else values
            if steps is not None:
                steps.update(1, timestep="n/a" if timestep is None else f"{float(timestep):.4g}")
            return values

        if timed or steps is not None:
            kwargs["callback_on_step_end"] = on_step
        try:
            with torch.inference_mode():
                result = pipe(**kwargs)
        finally:
            if steps is not None:
                steps.close()
        return {name: self._output(name, getattr(result, attr))
                for name, attr in self.outputs.items()}

    def pipeline_inputs(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        """Pipeline call arguments built from ``inputs`` (none; image to video adds the image)."""
        return {}

    def _output(self, name: str, value: Any) -> torch.Tensor:
        tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
        if name in self.video_outputs:
            return tensor.to(torch.promote_types(tensor.dtype, torch.float32)) * 2 - 1
        return tensor

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Frames (images) generated by one call: ``num_videos_per_prompt x num_frames``."""
        calls = int(self._call.get(self.call_keys["batch_size"], 1))
        return calls * int(self._call.get("num_frames", 1))


def generated_image(height: int, width: int, seed: int) -> torch.Tensor:
    """A deterministic ``[1, 3, height, width]`` uint8 RGB image drawn from ``seed``.
    >>> image = generated_image(16, 24, seed=42)
    >>> tuple(image.shape), image.dtype
    ((1, 3, 16, 24), torch.uint8)"""
    frame = structured_clip(1, 1, height, width, seed)[:, :, 0]
    return ((frame + 1.0) * 127.5).round().clamp(0, 255).to(torch.uint8)


def read_image(path: Path, height: int, width: int) -> tuple[torch.Tensor, dict[str, Any]]:
    """The image file as a ``[1, 3, H, W]`` uint8 RGB tensor and its facts (ConfigError)."""
    if not path.is_file():
        raise ConfigError(f"model.task.image={path}: no such file. Give the path of a PNG or JPEG "
                          "image, or model.task.image=null for a generated image (seeded by "
                          "`seed`).")
    try:
        with Image.open(path) as opened:
            fmt, original, rgb = opened.format, [opened.width, opened.height], opened.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ConfigError(f"model.task.image={path}: not an image PIL can read ({exc}). Give a PNG "
                          "or JPEG file, or model.task.image=null for a generated image.") from exc
    resized = rgb.size != (width, height)
    if resized:
        rgb = rgb.resize((width, height), Image.Resampling.LANCZOS)
    pixels = torch.from_numpy(np.asarray(rgb, dtype=np.uint8).copy()).permute(2, 0, 1)[None]
    return pixels.contiguous(), {
        "kind": "file", "path": str(path), "sha256": "sha256:" + file_sha256(path),
        "size_bytes": path.stat().st_size, "format": fmt, "original_size": original,
        "resized": resized}


def to_pil(image: torch.Tensor) -> Any:
    """The first image of a ``[N, 3, H, W]`` uint8 tensor (any device) as a PIL RGB image."""
    return Image.fromarray(image[0].to("cpu").permute(1, 2, 0).contiguous().numpy())


def check_image_crf(pipe: Any, call_kwargs: Mapping[str, Any]) -> None:
    """Refuse early a pipeline that would re-compress the image (``image_crf``) without PyAV."""
    if "image_crf" not in inspect.signature(pipe.__call__).parameters:
        return
    crf = call_kwargs.get("image_crf")
    if crf != 0 and importlib.util.find_spec("av") is None:
        raise ConfigError(
            f"model.task.call_kwargs.image_crf={crf}: {type(pipe).__name__} re-compresses the "
            "conditioning image with H.264 (as in training), which needs PyAV, not installed: "
            "`pip install av`, or model.task.call_kwargs.image_crf=0 to skip the re-compression.")


def float32_posterior_sample(dist: Any, generator: torch.Generator | None = None) -> torch.Tensor:
    """``dist.sample(generator)`` of a ``DiagonalGaussianDistribution``, the noise in float32."""
    noise = randn_tensor(dist.mean.shape, generator=generator, device=dist.parameters.device,
                         dtype=torch.float32)
    return dist.mean + dist.std * noise.to(dist.parameters.dtype)


def float32_encode_noise(vae: Any) -> bool:
    """Make ``vae.encode``'s posterior noise float32 (once); whether ``vae.encode`` is wrapped."""
    original = vae.encode
    if getattr(original, "_float32_noise", False):
        return True

    @functools.wraps(original)
    def encode(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        dist = getattr(out, "latent_dist", None)
        if dist is not None and hasattr(dist, "std"):
            dist.sample = functools.partial(float32_posterior_sample, dist)
        return out

    encode._float32_noise = True  # type: ignore[attr-defined]
    vae.encode = encode
    return True


@dataclass(eq=False)
class ImageToVideoTask(TextToVideoTask):
    """Generate a video from a conditioning image and the prompt (LTX(2)ImageToVideoPipeline)."""

    kind = "image_to_video"

    image: str | None = None
    float32_encode_noise: bool = True
    _source: dict[str, Any] = field(init=False, repr=False, default_factory=dict)

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The generator seed and the conditioning image at the preset's height x width."""
        inputs = super().make_inputs(preset, seed)
        height, width = int(preset["height"]), int(preset["width"])
        if self.image is None:
            pixels = generated_image(height, width, seed)
            self._source = {"kind": "generated", "generator": GENERATED, "seed": int(seed)}
        else:
            path = Path(self.image).expanduser().resolve()
            pixels, self._source = read_image(path, height, width)
        return {**inputs, "image": pixels}

    def input_sources(self) -> dict[str, dict[str, Any]]:
        """``image``: the file's path and SHA256, or the generator and seed."""
        return {"image": dict(self._source)} if self._source else {}

    def pipeline_inputs(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        """``image``: the conditioning image as a PIL image (the pipeline preprocesses it)."""
        return {"image": to_pil(inputs["image"])}

    def to(self, pipe: Any, device: torch.device, dtype: torch.dtype) -> Any:
        """As for text to video, after checking that the pipeline can take the image."""
        check_image_crf(pipe, self.call_kwargs)
        pipe = super().to(pipe, device, dtype)
        self.applied["float32_encode_noise"] = bool(self.float32_encode_noise) and \
            float32_encode_noise(pipe.vae)
        return pipe

    def attach_phase_timer(self, pipe: Any, timer: Any) -> bool:
        """The text-to-video phases plus ``vae_encode`` (the image into the first latent frame)."""
        super().attach_phase_timer(pipe, timer)
        timer.wrap(pipe.vae, "encode", "vae_encode")
        return True


@dataclass(eq=False)
class TextToImageTask(TextToVideoTask):
    """Generate images from the prompt (``Flux2KleinPipeline``): ``[N, 3, H, W]`` in [-1, 1]."""

    preset_keys = ("batch_size", "height", "width", "steps")
    kind, output_kind, unit = "text_to_image", "image", "images"
    report_metrics = {"error": "mean_rel_err", "psnr": "image_psnr_db", "ssim": "image_ssim"}
    call_keys = {"height": "height", "width": "width", "steps": "num_inference_steps",
                 "batch_size": "num_images_per_prompt"}

    video_outputs: Sequence[str] = ("image",)
    latent_channels: int = 128

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The seed and the initial noise ``[B, C, H / s, W / s]`` drawn from it in float32."""
        shape = latent_shape(preset, self.latent_channels, self.spatial_compression)
        return {**super().make_inputs(preset, seed), "latents": cpu_randn(shape, seed)}

    def pipeline_inputs(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        """``latents``: the initial noise."""
        return {"latents": inputs["latents"]}
