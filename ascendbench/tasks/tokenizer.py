"""Video tokenizer: a structured clip -> ``tokenize`` -> ``detokenize`` with N flow steps.

The model is anything with videoflextok's API (``VideoFlexTokFromHub``)::

    tokens_list = model.tokenize(video)                       # video [B, 3, T, H, W] in [-1, 1]
    videos_list = model.detokenize(tokens_list, timesteps=N, noise_list=[...], guidance_scale=...)

Inputs are the clip (:func:`ascendbench.tasks.clips.structured_clip`) and the flow decoder's starting
noise, both drawn on a CPU generator, so every device decodes from the same noise. Outputs are
``tokens`` ``[B, t, n]`` (int64) and ``reconstruction`` ``[B, 3, T, H, W]``. The gates the seed report
checked by hand are the task's :meth:`VideoTokenizerTask.checks` (see
:mod:`ascendbench.tasks.tokenizer_gates`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import torch

from ascendbench.errors import TaskError
from ascendbench.tasks.base import Task
from ascendbench.tasks.checks import CheckContext
from ascendbench.tasks.clips import structured_clip
from ascendbench.tasks.inputs import cpu_randn


def _ints(value: Any) -> list[int]:
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


@contextmanager
def _seeded_rng(device: torch.device, seed: int) -> Iterator[None]:
    """Seed the global generators of ``device`` for the block and restore them afterwards.

    upstream's chunked decoder draws the noise of every chunk after the first itself (only the first
    takes ``noise_list``); seeding makes that noise the same on every call on a device (not across
    device types, whose generators differ).
    """
    devices = [] if device.type == "cpu" else [device.index or 0]
    with torch.random.fork_rng(devices=devices, device_type=device.type if devices else "cuda"):
        torch.manual_seed(seed)
        yield


@dataclass(eq=False)
class VideoTokenizerTask(Task):
    """Tokenize and detokenize a deterministic structured clip.

    A dataclass: its fields are the keys of ``model.task`` (Hydra builds it by ``_target_``).

    Attributes:
        steps: flow-matching steps of ``detokenize`` (usually ``${preset.steps}``).
        resolution: the model's fixed square resolution (``None``: any multiple of ``spatial_multiple``).
        chunk_frames: frames per chunk the model tokenizes at once.
        overlap_frames: frames shared by consecutive chunks.
        tokens_per_chunk: token grid of one chunk, ``[t, n]`` (e.g. ``[5, 256]``).
        overlap_tokens: token rows shared by consecutive chunks (removed from all but the first).
        codebook_size: number of token ids (ids must lie in ``[0, codebook_size)``).
        noise_shape: per-clip flow noise ``[C, t, h, w]`` of one chunk; ``None``: the model draws it.
        noise_check: attribute paths of the model whose values, flattened, must equal ``noise_shape``
            (e.g. ``[video_tokenizer.pipeline.out_channels, vae_video_sizes]``); checked before decoding.
        steps_kwarg, noise_kwarg: ``detokenize`` argument names for the steps and the noise list.
        detokenize: further ``detokenize`` keyword arguments (guidance scale...).
        spatial_multiple: height/width must be multiples of this when ``resolution`` is ``None``.
        latent_module: attribute path of the model's VAE (e.g. ``video_tokenizer.vae``) whose
            ``latent_method`` output is replayed for the encoder+FSQ determinism gate; ``None``: no such gate.
        latent_method: the VAE method producing the latents (``encode``).
    """

    kind = "video_tokenizer"
    output_kind = "video"
    # the reconstruction PSNR of the loaded weights (gate/control_psnr_db is the random-init control's)
    report_metrics = {"error": "mean_rel_err", "psnr": "gate/recon_psnr_db"}
    unit = "clips"

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
        self.codebook_size = int(self.codebook_size)
        self.resolution = int(self.resolution) if self.resolution else None
        self.chunk_frames, self.overlap_frames = int(self.chunk_frames), int(self.overlap_frames)
        self.overlap_tokens = int(self.overlap_tokens)
        self.noise_shape = [int(v) for v in self.noise_shape] if self.noise_shape else None
        self.noise_check = list(self.noise_check or [])
        self.detokenize = dict(self.detokenize or {})
        self.spatial_multiple = int(self.spatial_multiple)
        if self.steps <= 0:
            raise TaskError(f"preset.steps={self.steps}: the flow decoder needs at least one step; "
                            "set e.g. `preset.steps=20` (the seed report's value).")

    # -- sizes ---------------------------------------------------------------------------------
    def num_chunks(self, frames: int) -> int:
        """Chunks a clip of ``frames`` frames is cut into; a :class:`TaskError` if it does not fit."""
        stride = self.chunk_frames - self.overlap_frames
        if frames < self.chunk_frames or (frames - self.overlap_frames) % stride:
            valid = [self.chunk_frames + k * stride for k in range(4)]
            raise TaskError(
                f"preset.num_frames={frames} does not fit the model's chunks of {self.chunk_frames} frames "
                f"overlapping by {self.overlap_frames}; allowed: {', '.join(map(str, valid))}, ... "
                f"(chunk + k * {stride}). Set e.g. `preset.num_frames={valid[0]}`."
            )
        return (frames - self.chunk_frames) // stride + 1

    def token_shape(self, batch: int, frames: int) -> list[int]:
        """The token tensor shape expected for a batch of clips of ``frames`` frames."""
        t, n = self.tokens_per_chunk
        chunks = self.num_chunks(frames)
        return [batch, t + (chunks - 1) * (t - self.overlap_tokens), n]

    def _check_size(self, height: int, width: int) -> None:
        if self.resolution is not None and (height, width) != (self.resolution, self.resolution):
            raise TaskError(
                f"preset.height={height} and preset.width={width}: this tokenizer works at a fixed "
                f"{self.resolution}x{self.resolution}; set `preset.height={self.resolution} "
                f"preset.width={self.resolution}` (its presets vary the clip length instead)."
            )
        if self.resolution is None and (height % self.spatial_multiple or width % self.spatial_multiple):
            raise TaskError(f"preset.height={height} and preset.width={width} must be multiples of "
                            f"{self.spatial_multiple} for this tokenizer.")

    def sizes(self, preset: Mapping[str, Any]) -> dict[str, Any]:
        """Batch, height, width and frames of the clip, and the flow steps of ``detokenize``."""
        keys = ("batch_size", "height", "width", "num_frames")
        return {**{key: int(preset[key]) for key in keys}, "steps": self.steps}

    # -- the task ------------------------------------------------------------------------------
    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """``video`` ``[B, 3, T, H, W]`` in ``[-1, 1]`` and, if configured, the flow ``noise``."""
        batch, frames = int(preset["batch_size"]), int(preset["num_frames"])
        height, width = int(preset["height"]), int(preset["width"])
        self._check_size(height, width)
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
        """Compare ``noise_shape`` with the model's values at ``noise_check``; a :class:`TaskError` if they differ."""
        if not self.noise_check or self.noise_shape is None:
            return
        from ascendbench.models.expect import read_path

        try:
            values = [v for path in self.noise_check for v in _ints(read_path(model, path))]
        except KeyError as exc:
            raise TaskError(f"model.task.noise_check={self.noise_check}: {exc.args[0]} on "
                            f"{type(model).__name__}; fix the attribute paths or set noise_check: null.") from exc
        if values != self.noise_shape:
            raise TaskError(
                f"model.task.noise_shape={self.noise_shape} does not fit the model: {', '.join(self.noise_check)} "
                f"give {values}. Set `model.task.noise_shape={values}`."
            )

    def reconstruct(self, model: Any, tokens: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        """``model.detokenize`` with the steps, the noise and ``detokenize``'s arguments -> ``[B, 3, T, H, W]``."""
        kwargs = {**self.detokenize, self.steps_kwarg: self.steps}
        if noise is not None:
            self.check_noise(model)
            kwargs[self.noise_kwarg] = list(noise.split(1))
        with torch.no_grad(), _seeded_rng(tokens.device, self.seed + 2):
            videos = model.detokenize(list(tokens.split(1)), **kwargs)
        return torch.cat(list(videos))

    def primary_output(self) -> str | None:
        """The reconstruction (the tokens are judged by their gates)."""
        return "reconstruction"

    def run(self, model: Any, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Tokenize then detokenize; inputs are already on the model's device and dtype."""
        tokens = self.tokenize(model, inputs["video"])
        return {"tokens": tokens, "reconstruction": self.reconstruct(model, tokens, inputs.get("noise"))}

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Clips per call (for throughput)."""
        return int(inputs["video"].shape[0])

    def checks(self, ctx: CheckContext) -> dict[str, dict[str, Any]]:
        """The tokenizer gates; see :func:`ascendbench.tasks.tokenizer_gates.tokenizer_gates`."""
        from ascendbench.tasks.tokenizer_gates import tokenizer_gates

        return tokenizer_gates(self, ctx)
