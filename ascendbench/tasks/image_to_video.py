"""Image to video: a conditioning image + prompt -> a diffusers image-to-video pipeline -> frames.

Everything of :mod:`ascendbench.tasks.text_to_video` holds (preset sizes, CPU generator, ``output_type="pt"``,
outputs mapped to [-1, 1], step progress, per-phase timing, CPU offload, VAE options); one input is added:
the conditioning image, an ``image`` tensor ``[1, 3, H, W]`` of uint8 RGB at the preset's size, handed to the
pipeline as a PIL image (``LTXImageToVideoPipeline``, ``LTX2ImageToVideoPipeline``: both encode it with the
VAE into the first latent frame).

The image comes from ``model.task.image`` (a PNG/JPEG path, resized to the preset's width x height with
Lanczos, as diffusers' own preprocessing does) or, when that is null, is generated from the job's seed: the
first frame of :func:`ascendbench.tasks.clips.structured_clip` (a gradient, a disc and a box), identical on
every host. The record keeps the tensor's SHA256 (``inputs.image.sha256``, part of the reference's cache key)
and where it came from (``inputs.image.source``: the file's path and its own SHA256, or the generator and seed).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from ascendbench.errors import ConfigError
from ascendbench.tasks.clips import structured_clip
from ascendbench.tasks.text_to_video import TextToVideoTask

GENERATED = "ascendbench.tasks.clips.structured_clip, frame 0"


def file_sha256(path: Path) -> str:
    """SHA256 of a file's bytes as ``sha256:<hex>``, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def generated_image(height: int, width: int, seed: int) -> torch.Tensor:
    """A deterministic ``[1, 3, height, width]`` uint8 RGB image drawn from ``seed`` on a CPU generator.

    >>> image = generated_image(16, 24, seed=42)
    >>> tuple(image.shape), image.dtype, bool(torch.equal(image, generated_image(16, 24, seed=42)))
    ((1, 3, 16, 24), torch.uint8, True)
    """
    frame = structured_clip(1, 1, height, width, seed)[:, :, 0]
    return ((frame + 1.0) * 127.5).round().clamp(0, 255).to(torch.uint8)


def read_image(path: Path, height: int, width: int) -> tuple[torch.Tensor, dict[str, Any]]:
    """The image file as a ``[1, 3, height, width]`` uint8 RGB tensor, and its facts for the record.

    Raises:
        ConfigError: the file does not exist or is no image PIL can read.
    """
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise ConfigError(f"model.task.image={path}: no such file. Give the path of a PNG or JPEG image, or "
                          "model.task.image=null for a generated image (seeded by `seed`).")
    try:
        with Image.open(path) as opened:
            fmt, original = opened.format, [opened.width, opened.height]
            rgb = opened.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ConfigError(f"model.task.image={path}: not an image PIL can read ({exc}). Give a PNG or JPEG file, "
                          "or model.task.image=null for a generated image.") from exc
    resized = rgb.size != (width, height)
    if resized:
        rgb = rgb.resize((width, height), Image.Resampling.LANCZOS)
    pixels = torch.from_numpy(np.asarray(rgb, dtype=np.uint8).copy()).permute(2, 0, 1).unsqueeze(0)
    facts = {"kind": "file", "path": str(path), "sha256": file_sha256(path), "size_bytes": path.stat().st_size,
             "format": fmt, "original_size": original, "resized": resized}
    return pixels.contiguous(), facts


def to_pil(image: torch.Tensor) -> Any:
    """The first image of a ``[N, 3, H, W]`` uint8 tensor (any device) as a PIL RGB image."""
    from PIL import Image

    return Image.fromarray(image[0].to("cpu").permute(1, 2, 0).contiguous().numpy())


def check_image_crf(pipe: Any, call_kwargs: Mapping[str, Any]) -> None:
    """Refuse early when the pipeline would re-compress the image with H.264 (LTX-2: ``image_crf``) without PyAV.

    Raises:
        ConfigError: ``image_crf`` is not 0 (null: diffusers' default, 33 for Gemma-3 checkpoints) and ``av``
            is not installed.
    """
    if "image_crf" not in inspect.signature(pipe.__call__).parameters:
        return
    crf = call_kwargs.get("image_crf")
    if crf != 0 and importlib.util.find_spec("av") is None:
        raise ConfigError(f"model.task.call_kwargs.image_crf={crf}: {type(pipe).__name__} re-compresses the "
                          "conditioning image with H.264 (as in training), which needs PyAV, not installed: "
                          "`pip install av`, or model.task.call_kwargs.image_crf=0 to skip the re-compression.")


def float32_posterior_sample(dist: Any, generator: torch.Generator | None = None) -> torch.Tensor:
    """``dist.sample(generator)`` of a diffusers ``DiagonalGaussianDistribution`` with the noise drawn in float32.

    diffusers draws it in the VAE's dtype: from the same CPU generator, float32, float64 and bfloat16 give
    different numbers (and leave the generator in different states for the latent noise drawn after).
    """
    from diffusers.utils.torch_utils import randn_tensor

    params = dist.parameters
    noise = randn_tensor(dist.mean.shape, generator=generator, device=params.device, dtype=torch.float32)
    return dist.mean + dist.std * noise.to(params.dtype)


def float32_encode_noise(vae: Any) -> bool:
    """Make ``vae.encode``'s posterior sample draw its noise in float32 (:func:`float32_posterior_sample`).

    Idempotent (placing the pipeline twice wraps once). Returns whether ``vae.encode`` is now wrapped.
    """
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
    """Generate a video from a conditioning image and the prompt with a diffusers image-to-video pipeline.

    A dataclass: its fields are the keys of ``model.task`` -- those of
    :class:`~ascendbench.tasks.text_to_video.TextToVideoTask` plus the image.

    Attributes:
        image: path of the conditioning image (PNG/JPEG); ``None``: generated from the job's seed.
        float32_encode_noise: draw the noise of the VAE's posterior sample (LTX-Video encodes the image with
            ``latent_dist.sample(generator)``) in float32 like every other noise, so that the device run and
            its reference in another dtype see the same numbers (:func:`float32_encode_noise`).
    """

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
            pixels, self._source = read_image(Path(self.image).expanduser().resolve(), height, width)
        return {**inputs, "image": pixels}

    def input_sources(self) -> dict[str, dict[str, Any]]:
        """``image``: the file's path and SHA256 (or the generator and seed) of the last :meth:`make_inputs`."""
        return {"image": dict(self._source)} if self._source else {}

    def pipeline_inputs(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        """``image``: the conditioning image as a PIL image (the pipeline preprocesses it on the host)."""
        return {"image": to_pil(inputs["image"])}

    def to(self, pipe: Any, device: torch.device, dtype: torch.dtype) -> Any:
        """As for text to video, after checking that the pipeline can preprocess the image (PyAV for LTX-2)."""
        check_image_crf(pipe, self.call_kwargs)
        pipe = super().to(pipe, device, dtype)
        self.applied["float32_encode_noise"] = bool(self.float32_encode_noise) and float32_encode_noise(pipe.vae)
        return pipe

    def attach_phase_timer(self, pipe: Any, timer: Any) -> bool:
        """The text-to-video phases plus ``vae_encode`` (the conditioning image into the first latent frame)."""
        super().attach_phase_timer(pipe, timer)
        timer.wrap(pipe.vae, "encode", "vae_encode")
        return True
