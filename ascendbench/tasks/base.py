"""The task interface, declared once: what a job uses of a task, with the defaults most tasks keep.

A task turns a preset and a seed into CPU inputs and runs the model on them::

    inputs = task.make_inputs(cfg.preset, cfg.seed)         # CPU, float32 tensors (ids stay integers)
    model = task.to(model, device, dtype)                    # placement (pipelines offload, VAEs tile)
    timed = task.attach_phase_timer(model, timer)            # True when the task reports phases
    outputs = task.run(model, move_inputs(inputs, device, dtype))
    throughput = task.items_per_call(inputs) / seconds       # in task.unit per second
    gates = task.checks(ctx)                                 # the task's own gates ({} for most)

The video attributes tell the artifact writer how to read 5-D outputs (``output_kind == "video"``).
Subclasses set the class attributes and implement :meth:`make_inputs` and :meth:`run`; they override
the rest only where they differ. Tasks with many options are dataclasses whose fields are the keys of
``model.task`` in ``conf/model/*.yaml`` (Hydra builds them by ``_target_``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping, Sequence

import torch

from ascendbench.tasks.checks import CheckContext


class Task(ABC):
    """Base class of every task (see the module docstring for how a job uses it).

    Class attributes:
        kind: short task name (``vae_decode``, ``text_to_video``...).
        output_kind: what the outputs are for the artifacts: ``None`` (tensors only), ``"tensor"``,
            ``"image"`` (``[N, C, H, W]`` in ``value_range``), ``"video"`` (5-D in ``video_layout``).
        unit: what :meth:`items_per_call` counts (``images``, ``frames``, ``clips``, ``calls``).
        video_layout: axis order of video outputs, ``BCTHW`` (VAE decoders) or ``BTCHW`` (pipelines).
        value_range: the value range of image and video outputs (clamped to it when saved).
        video_frames: frames saved as PNG per video (``first``/``middle``/``last`` or indices).
        video_fps: frame rate of the saved mp4 files.
        preset_keys: the preset sizes the task uses (the record's ``job.sizes``; others are ignored).
        report_metrics: the metric that answers each report section (``error``: the error plot and the
            dtype ranking; ``psnr``, ``ssim``: the per-resolution table), as a metric name of the primary
            output (:meth:`primary_output`) or a full name with ``/``; recorded as ``job.primary``.
    """

    kind: ClassVar[str] = "task"
    output_kind: ClassVar[str | None] = None
    unit: ClassVar[str] = "calls"
    video_layout: ClassVar[str] = "BCTHW"
    value_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    video_frames: ClassVar[Sequence[str | int]] = ("first", "middle", "last")
    video_fps: ClassVar[int] = 24
    preset_keys: ClassVar[tuple[str, ...]] = ("batch_size", "height", "width")
    report_metrics: ClassVar[Mapping[str, str]] = {"error": "mean_rel_err"}

    def primary_output(self) -> str | None:
        """The output the report leads with: ``output_name`` where the task has one."""
        return getattr(self, "output_name", None)

    def report_declaration(self) -> dict[str, str]:
        """The record's ``job.primary``: ``output`` and the metric per report section (never chosen by name order)."""
        output = self.primary_output()
        return {**({"output": output} if output else {}), **dict(self.report_metrics)}

    def sizes(self, preset: Mapping[str, Any]) -> dict[str, Any]:
        """The sizes this task takes from the preset (the record's ``job.sizes``): :attr:`preset_keys`."""
        return {key: int(preset[key]) for key in self.preset_keys}

    @abstractmethod
    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The inputs of one call, on the CPU, drawn deterministically from ``seed`` (a CPU generator)."""

    @abstractmethod
    def run(self, model: Any, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One call of ``model`` on ``inputs`` (already on the model's device and dtype): named outputs."""

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Items (in :attr:`unit`) one call produces, for throughput; one by default."""
        return 1

    def to(self, model: Any, device: torch.device, dtype: torch.dtype) -> Any:
        """Put ``model`` on ``device`` in ``dtype`` and return it; by default ``model.to(device=, dtype=)``.

        A task whose model is no module (a diffusers pipeline) or needs more (VAE tiling, CPU offload)
        overrides this; the device run and the CPU reference both go through it.
        """
        model.to(device=device, dtype=dtype)
        return model

    def applied_options(self) -> dict[str, Any]:
        """What the last :meth:`to` switched on or off beyond device and dtype, for the record's ``pipeline``.

        ``cpu_offload`` (bool) and ``vae`` (:func:`~ascendbench.tasks.video_decode.apply_vae_options`' answer)
        where a task sets them; none by default.
        """
        return {}

    def attach_phase_timer(self, model: Any, timer: Any) -> bool:
        """Register the model's phases on ``timer`` (a :class:`~ascendbench.bench.phases.PhaseTimer`).

        Returns:
            Whether the task times phases; ``False`` by default (no per-phase timing, no timer kept).
        """
        return False

    def output_range(self, name: str, tensor: torch.Tensor) -> tuple[float, float] | None:
        """The range output ``name`` must lie in, for the output validation; ``None``: no declared range.

        By default :attr:`value_range` for the floating-point outputs shaped like the task's
        :attr:`output_kind` (4-D for ``image``, 5-D for ``video``); others (audio, latents, layer
        outputs, token ids) have none.
        """
        dims = {"image": 4, "video": 5}.get(self.output_kind or "")
        if dims is None or not tensor.is_floating_point() or tensor.dim() != dims:
            return None
        return (float(self.value_range[0]), float(self.value_range[1]))

    def input_sources(self) -> dict[str, dict[str, Any]]:
        """Where inputs came from, after :meth:`make_inputs`: input name -> facts for the record; none by default.

        A task reading an input from a file says so here (its path and the file's own SHA256); the record
        keeps it as ``inputs.<name>.source``, next to the tensor's shape and SHA256.
        """
        return {}

    def checks(self, ctx: CheckContext) -> dict[str, dict[str, Any]]:
        """The task's own gates as metric entries (see :mod:`ascendbench.tasks.checks`); none by default."""
        return {}
