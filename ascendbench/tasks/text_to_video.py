"""Text to video: prompt -> a diffusers video pipeline -> frames, seeded by a CPU generator.

Everything the pipeline is called with comes from config: the prompts and further call arguments
from the task, ``height``/``width``/``num_frames``/``steps``/``batch_size`` from the preset (Sulphur-2
seed: mini 256x256x9, balanced 512x320x65, quality 704x480x161, 50 steps), the noise from
``torch.Generator("cpu").manual_seed(seed)`` -- identical on every device -- and ``output_type="pt"``.

The output ``video`` is ``[B, T, C, H, W]`` mapped from the pipeline's [0, 1] frames to [-1, 1] (the
decoder's own range, the convention of every video output in ascendbench), computed in at least
float32.

Denoising steps report progress (:mod:`ascendbench.progress`: a bar on a terminal, a heartbeat line
elsewhere) through the pipeline's ``callback_on_step_end``, except in the bench loop's warm-up and timed
calls (under :func:`ascendbench.progress.quiet`), where no hook is installed; diffusers' own step bars
are off (they carry no job name and would redraw in every timed call).

How the pipeline is placed is configured here too (:meth:`TextToVideoTask.to`): model CPU offload onto
the run's device and VAE slicing/tiling. The attention backend is a patch, not a task option:
``model.patches`` with ``diffusers_attention_backend`` (``_native_npu`` on NPU runs; the CPU reference
always runs PyTorch SDPA).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Sequence

import torch

from ascendbench.errors import ConfigError
from ascendbench.progress import Progress, is_quiet
from ascendbench.tasks.base import Task
from ascendbench.tasks.video_decode import apply_vae_options, video_latent_shape

log = logging.getLogger(__name__)

PRESET_CALL_KEYS = {"height": "height", "width": "width", "num_frames": "num_frames", "steps": "num_inference_steps",
                    "batch_size": "num_videos_per_prompt"}


def _require(package: str, what: str) -> None:
    import importlib.util

    if importlib.util.find_spec(package) is None:
        raise ConfigError(f"{what} needs the {package} package, which is not installed: `pip install {package}` "
                          "(or `pip install ascendbench[pipelines]`), or switch the option off.")


StepCallback = Callable[[Any, int, Any, Dict[str, Any]], Dict[str, Any]]


def step_progress(progress: Progress) -> StepCallback:
    """A diffusers ``callback_on_step_end`` advancing ``progress`` by one step (diffusers' own bars stay off)."""

    def callback(pipe: Any, step_index: int, timestep: Any, callback_kwargs: Dict[str, Any]) -> Dict[str, Any]:
        progress.update(1, timestep=f"{float(timestep):.4g}" if timestep is not None else "n/a")
        return callback_kwargs

    return callback


def chain_step_callbacks(callbacks: Sequence[StepCallback]) -> StepCallback:
    """One ``callback_on_step_end`` calling each of ``callbacks`` in order, each given the previous's kwargs."""
    if len(callbacks) == 1:
        return callbacks[0]

    def chained(pipe: Any, step_index: int, timestep: Any, callback_kwargs: Dict[str, Any]) -> Dict[str, Any]:
        for callback in callbacks:
            callback_kwargs = callback(pipe, step_index, timestep, callback_kwargs)
        return callback_kwargs

    return chained


@dataclass(eq=False)
class TextToVideoTask(Task):
    """Generate a video from the configured prompt with a diffusers text-to-video pipeline.

    A dataclass: its fields are the keys of ``model.task`` (Hydra builds it by ``_target_``).

    Attributes:
        prompt: the prompt.
        negative_prompt: the negative prompt (``None``: none).
        spatial_compression: the VAE's spatial compression (height/width must be multiples).
        temporal_compression: the VAE's temporal compression (frames must be 1 + a multiple).
        call_kwargs: further pipeline call arguments (``guidance_scale``, ``max_sequence_length``,
            ``frame_rate``, ``decode_timestep``...).
        outputs: output name -> attribute of the pipeline output (``{video: frames}``; LTX-2 adds
            ``audio: audio``).
        video_outputs: outputs that are [0, 1] frames, mapped to [-1, 1].
        cpu_offload: ``enable_model_cpu_offload(device=<run device>)`` instead of moving everything.
        vae: ``pipe.vae`` slicing/tiling (see :func:`ascendbench.tasks.video_decode.apply_vae_options`).
    """

    preset_keys = ("batch_size", "height", "width", "num_frames", "steps")
    kind = "text_to_video"
    output_kind = "video"
    report_metrics = {"error": "mean_rel_err", "psnr": "video_psnr_db_mean", "ssim": "video_ssim_mean"}
    unit = "frames"
    video_layout = "BTCHW"
    value_range = (-1.0, 1.0)

    prompt: str
    negative_prompt: str | None = None
    spatial_compression: int = 32
    temporal_compression: int = 8
    call_kwargs: Mapping[str, Any] | None = None
    outputs: Mapping[str, str] | None = None
    video_outputs: Sequence[str] = ("video",)
    cpu_offload: bool = False
    vae: Mapping[str, Any] | None = None
    # State of the run, not configuration: the preset's call sizes, the phase timer, what to() applied.
    vae_options: dict[str, Any] = field(init=False, repr=False)
    applied: dict[str, Any] = field(init=False, repr=False, default_factory=dict)
    _call: dict[str, Any] = field(init=False, repr=False, default_factory=dict)
    _timer: Any = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self.spatial_compression = int(self.spatial_compression)
        self.temporal_compression = int(self.temporal_compression)
        self.call_kwargs = dict(self.call_kwargs or {})
        self.outputs = dict(self.outputs or {"video": "frames"})
        self.video_outputs = tuple(self.video_outputs)
        self.cpu_offload = bool(self.cpu_offload)
        self.vae_options = dict(self.vae or {})

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The generator seed as a tensor (the noise itself is drawn by the pipeline on the CPU).

        The preset's sizes are checked against the VAE's compression and kept for :meth:`run`.
        """
        video_latent_shape(preset, 1, self.spatial_compression, self.temporal_compression)
        self._call = {call: int(preset[key]) for key, call in PRESET_CALL_KEYS.items()}
        return {"seed": torch.tensor([int(seed)], dtype=torch.int64)}

    def to(self, pipe: Any, device: torch.device, dtype: torch.dtype) -> Any:
        """Cast, move (or offload onto ``device``), set the VAE options."""
        pipe.set_progress_bar_config(disable=True)
        pipe.to(dtype=dtype)
        self.applied = {"device": str(device)}
        if self.cpu_offload and device.type != "cpu":
            _require("accelerate", "model.task.cpu_offload=true (enable_model_cpu_offload)")
            pipe.enable_model_cpu_offload(device=device)
            self.applied["cpu_offload"] = True
        else:
            if self.cpu_offload:
                log.info("model.task.cpu_offload ignored on the CPU (nothing to offload to)")
            pipe.to(device)
            self.applied["cpu_offload"] = False
        self.applied["vae"] = apply_vae_options(pipe.vae, self.vae_options)
        log.info("pipeline placed: %s", self.applied)
        return pipe

    def applied_options(self) -> dict[str, Any]:
        """CPU offload and the VAE's slicing/tiling as the last :meth:`to` applied them."""
        return {key: value for key, value in self.applied.items() if key != "device"}

    def attach_phase_timer(self, pipe: Any, timer: Any) -> bool:
        """Per-phase timing: text encoding, each denoising step, VAE decode (always attached)."""
        self._timer = timer
        if getattr(pipe, "text_encoder", None) is not None:
            timer.watch(pipe.text_encoder, "text_encoding")
        timer.watch(pipe.transformer, "denoiser")
        timer.wrap(pipe.vae, "decode", "vae_decode")
        return True

    def primary_output(self) -> str | None:
        """The first video output (``video``): the report leads with it, never with ``audio``."""
        return next((name for name in self.outputs if name in self.video_outputs), next(iter(self.outputs), None))

    def run(self, pipe: Any, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One pipeline call with a fresh CPU generator seeded from ``inputs["seed"]``."""
        if not self._call:
            raise RuntimeError("TextToVideoTask.run() before make_inputs(): the preset sizes are unknown")
        generator = torch.Generator("cpu").manual_seed(int(inputs["seed"].reshape(-1)[0]))
        kwargs = {"prompt": self.prompt, "negative_prompt": self.negative_prompt, **self._call,
                  **self.call_kwargs, **self.pipeline_inputs(inputs), "generator": generator, "output_type": "pt"}
        callbacks = [self._timer.step_callback(starts_with="denoiser")] if self._timer is not None else []
        steps = None if is_quiet() else Progress("denoising", total=self._call.get("num_inference_steps"),
                                                   unit="steps")
        if steps is not None:
            callbacks.append(step_progress(steps))
        if callbacks:
            kwargs["callback_on_step_end"] = chain_step_callbacks(callbacks)
        try:
            with torch.inference_mode():
                result = pipe(**kwargs)
        finally:
            if steps is not None:
                steps.close()
        return {name: self._output(name, getattr(result, attr)) for name, attr in self.outputs.items()}

    def pipeline_inputs(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        """Pipeline call arguments built from ``inputs`` (an image-conditioned task adds ``image``); none here."""
        return {}

    def _output(self, name: str, value: Any) -> torch.Tensor:
        tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
        if name in self.video_outputs:
            wide = tensor.to(torch.promote_types(tensor.dtype, torch.float32))
            return wide * 2 - 1
        return tensor

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Frames generated by one call: ``num_videos_per_prompt x num_frames``."""
        return int(self._call.get("num_videos_per_prompt", 1)) * int(self._call.get("num_frames", 1))
