"""One layer forward: a deterministic input -> any ``torch.nn`` module -> its output.

The module usually comes from :class:`ascendbench.models.layer.SafetensorsLayerLoader` (one layer's
tensors read straight out of a checkpoint by name prefix). The input is drawn from a CPU generator;
its shape is given outright (``input_shape``) or follows the preset like a latent (``channels`` with
``spatial_compression`` and, for video latents, ``temporal_compression``): the LTX-Video VAE's
``decoder.conv_in`` at the mini preset gets the seed's latent ``[1, 128, 2, 8, 8]``.

Besides the comparison with the CPU reference, the task checks determinism: after the timed runs it
calls the layer once more on the device with the same input and records the largest difference to
the first call (the seed's "second run diff 0.0"), with the input as the device saw it (shape, dtype,
SHA256).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from ascendbench.errors import TaskError
from ascendbench.tasks.base import Task
from ascendbench.tasks.checks import CheckContext, compare_runs, gate
from ascendbench.tasks.inputs import cpu_randn, describe
from ascendbench.tasks.video_decode import video_latent_shape


@dataclass(eq=False)
class LayerForwardTask(Task):
    """``outputs[output_name] = module(inputs[input_name])`` on a seeded input.

    A dataclass: its fields are the keys of ``model.task`` (Hydra builds it by ``_target_``).

    Attributes:
        input_shape: the input's full shape; when ``None`` it follows the preset (next arguments).
        channels: channels of a preset-shaped latent input.
        spatial_compression: pixels per latent element along height and width.
        temporal_compression: frames per latent frame (``None``: a 4-D image latent).
        input_name: key of the input (``latent`` for a VAE layer).
        output_name: key of the output.
        determinism_check: run once more on the device after timing and compare with the first call.
    """

    kind = "layer_forward"
    output_kind = "tensor"
    unit = "calls"

    input_shape: Sequence[int] | None = None
    channels: int | None = None
    spatial_compression: int = 1
    temporal_compression: int | None = None
    input_name: str = "input"
    output_name: str = "output"
    determinism_check: bool = True

    def __post_init__(self) -> None:
        self.input_shape = tuple(int(d) for d in self.input_shape) if self.input_shape is not None else None
        self.spatial_compression = int(self.spatial_compression)
        self.determinism_check = bool(self.determinism_check)

    def shape(self, preset: Mapping[str, Any]) -> tuple[int, ...]:
        """The input shape: ``input_shape``, or a latent shaped by the preset."""
        if self.input_shape is not None:
            return self.input_shape
        if self.channels is None:
            raise TaskError(
                "model.task needs either `input_shape` (e.g. [1, 128, 2, 8, 8]) or `channels` (with "
                "spatial_compression and, for video latents, temporal_compression) to shape the layer's input."
            )
        if self.temporal_compression is not None:
            return video_latent_shape(preset, self.channels, self.spatial_compression, int(self.temporal_compression))
        height, width, batch = int(preset["height"]), int(preset["width"]), int(preset["batch_size"])
        factor = self.spatial_compression
        if height % factor or width % factor:
            raise TaskError(f"preset.height={height} and preset.width={width} must be multiples of {factor}.")
        return (batch, int(self.channels), height // factor, width // factor)

    def sizes(self, preset: Mapping[str, Any]) -> dict[str, Any]:
        """The full input shape (from ``input_shape`` or the preset)."""
        return {"input_shape": list(self.shape(preset))}

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The input, float32 on CPU, from ``torch.Generator(seed)``."""
        return {self.input_name: cpu_randn(self.shape(preset), seed)}

    def run(self, model: torch.nn.Module, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One forward; the inputs are already on the model's device and dtype."""
        with torch.inference_mode():
            return {self.output_name: model(inputs[self.input_name])}

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """One call per call (throughput in calls/s, as the seed's "inferences per second")."""
        return 1

    def checks(self, ctx: CheckContext) -> dict[str, Any]:
        """``determinism/second_run_max_abs_diff``: one more device run against the first one."""
        if not self.determinism_check:
            return {}
        moved = ctx.to_device(ctx.inputs)
        again = self.run(ctx.module, moved)[self.output_name].detach().to("cpu")
        first = ctx.outputs[self.output_name]
        diff, agreement = compare_runs(first, again)  # identical inf/NaN in the same places agree
        details = {"runs_compared": 2, **agreement,
                   "device_input": describe({self.input_name: moved[self.input_name]})[self.input_name]}
        name = "determinism/second_run_max_abs_diff"
        return {name: gate(name, diff, ctx.rules, details)}
