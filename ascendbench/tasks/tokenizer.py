"""Video tokenizer: a structured clip -> ``model.tokenize`` -> ``model.detokenize``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from ascendbench.errors import TaskError
from ascendbench.models.videoflextok import read_path
from ascendbench.tasks.base import Task
from ascendbench.tasks.checks import CheckContext
from ascendbench.tasks.inputs import cpu_randn, structured_clip
from ascendbench.tasks.tokenizer_gates import tokenizer_gates


@dataclass(eq=False)
class VideoTokenizerTask(Task):
    """Tokenize and detokenize a deterministic structured clip; fields: ``model.task``'s keys."""

    kind = "video_tokenizer"
    output_kind, natural_outputs = "video", True  # a reconstruction of a structured clip
    # the reconstruction PSNR of the loaded weights (gate/control_psnr_db is the random control's)
    report_metrics = {"error": "mean_rel_err", "psnr": "gate/recon_psnr_db"}
    unit = "clips"
    preset_keys = ("batch_size", "height", "width", "num_frames")

    seed = 42  # set by make_inputs; seeds the noise the model draws itself (chunks after the first)

    steps: int
    tokens_per_chunk: Sequence[int]
    codebook_size: int
    resolution: int | None = 256
    chunk_frames: int = 17
    overlap_frames: int = 1
    overlap_tokens: int = 1
    noise_shape: Sequence[int] | None = None
    noise_check: Sequence[str] | None = None
    steps_kwarg: str = "timesteps"
    noise_kwarg: str = "noise_list"
    detokenize: Mapping[str, Any] | None = None
    spatial_multiple: int = 8
    latent_module: str | None = None
    latent_method: str = "encode"

    def __post_init__(self) -> None:
        self.steps = int(self.steps)
        self.tokens_per_chunk = [int(v) for v in self.tokens_per_chunk]
        self.noise_shape = [int(v) for v in self.noise_shape] if self.noise_shape else None
        if self.steps <= 0:
            raise TaskError(f"preset.steps={self.steps}: the flow decoder needs at least one step; "
                            "set e.g. `preset.steps=20` (the seed report's value).")

    def num_chunks(self, frames: int) -> int:
        """Chunks a clip of ``frames`` frames is cut into; a :class:`TaskError` if it won't fit."""
        stride = int(self.chunk_frames) - int(self.overlap_frames)
        if frames < self.chunk_frames or (frames - self.overlap_frames) % stride:
            valid = [self.chunk_frames + k * stride for k in range(4)]
            raise TaskError(
                f"preset.num_frames={frames} does not fit the model's chunks of "
                f"{self.chunk_frames} frames overlapping by {self.overlap_frames}; allowed: "
                f"{', '.join(map(str, valid))}, ... (chunk + k * {stride}). Set e.g. "
                f"`preset.num_frames={valid[0]}`.")
        return (frames - self.chunk_frames) // stride + 1

    def token_shape(self, batch: int, frames: int) -> list[int]:
        """The token tensor shape expected for a batch of clips of ``frames`` frames."""
        t, n = self.tokens_per_chunk
        return [batch, t + (self.num_chunks(frames) - 1) * (t - int(self.overlap_tokens)), n]

    def sizes(self, preset: Mapping[str, Any]) -> dict[str, Any]:
        """Batch, height, width and frames of the clip, and the flow steps of ``detokenize``."""
        return {**super().sizes(preset), "steps": self.steps}

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """``video`` ``[B, 3, T, H, W]`` in ``[-1, 1]`` and, if configured, the flow ``noise``."""
        batch, frames = int(preset["batch_size"]), int(preset["num_frames"])
        height, width = int(preset["height"]), int(preset["width"])
        size = self.resolution
        if size and (height, width) != (int(size), int(size)):
            raise TaskError(
                f"preset.height={height} and preset.width={width}: this tokenizer works at a fixed "
                f"{size}x{size}; set `preset.height={size} preset.width={size}` (its presets vary "
                "the clip length instead).")
        if not size and (height % self.spatial_multiple or width % self.spatial_multiple):
            raise TaskError(f"preset.height={height} and preset.width={width} must be multiples "
                            f"of {self.spatial_multiple} for this tokenizer.")
        self.num_chunks(frames)
        if batch <= 0:
            raise TaskError(f"preset.batch_size={batch} must be positive.")
        self.seed = int(seed)
        inputs = {"video": structured_clip(batch, frames, height, width, seed)}
        if self.noise_shape is not None:
            inputs["noise"] = cpu_randn((batch, *self.noise_shape), int(seed) + 1)
        return inputs

    def tokenize(self, model: Any, video: torch.Tensor) -> torch.Tensor:
        """``model.tokenize(video)`` stacked into one ``[B, t, n]`` int64 tensor."""
        with torch.no_grad():
            tokens = model.tokenize(video)
        return torch.cat([t.reshape(1, *t.shape[1:]) for t in tokens]).long()

    def check_noise(self, model: Any) -> None:
        """``noise_shape`` against the model's values at ``noise_check`` (a TaskError if not)."""
        if not self.noise_check or self.noise_shape is None:
            return
        values = []
        for path in self.noise_check:
            try:
                value = read_path(model, path)
            except KeyError as exc:
                raise TaskError(f"model.task.noise_check={list(self.noise_check)}: {exc.args[0]} "
                                f"on {type(model).__name__}; fix the attribute paths or set "
                                "noise_check: null.") from exc
            values += torch.as_tensor(value).reshape(-1).tolist()
        if values != self.noise_shape:
            raise TaskError(f"model.task.noise_shape={self.noise_shape} does not fit the model: "
                            f"{', '.join(self.noise_check)} give {values}. Set "
                            f"`model.task.noise_shape={values}`.")

    def reconstruct(self, model: Any, tokens: torch.Tensor,
                    noise: torch.Tensor | None) -> torch.Tensor:
        """``model.detokenize`` with the steps and noise, the device's generator seeded."""
        kwargs = {**dict(self.detokenize or {}), self.steps_kwarg: self.steps}
        if noise is not None:
            self.check_noise(model)
            kwargs[self.noise_kwarg] = list(noise.split(1))
        device = tokens.device
        devices = [] if device.type == "cpu" else [device.index or 0]
        with torch.no_grad(), torch.random.fork_rng(devices, device_type=device.type if devices
                                                    else "cuda"):
            torch.manual_seed(self.seed + 2)
            videos = model.detokenize(list(tokens.split(1)), **kwargs)
        return torch.cat(list(videos))

    def primary_output(self) -> str | None:
        """The reconstruction (the tokens are judged by their gates)."""
        return "reconstruction"

    def run(self, model: Any, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Tokenize then detokenize."""
        tokens = self.tokenize(model, inputs["video"])
        return {"tokens": tokens,
                "reconstruction": self.reconstruct(model, tokens, inputs.get("noise"))}

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Clips per call."""
        return int(inputs["video"].shape[0])

    def checks(self, ctx: CheckContext) -> dict[str, dict[str, Any]]:
        """The tokenizer gates (:func:`~ascendbench.tasks.tokenizer_gates.tokenizer_gates`)."""
        return tokenizer_gates(self, ctx)
