"""One layer forward: a seeded input -> any ``torch.nn`` module -> its output, run twice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from ascendbench.errors import TaskError
from ascendbench.tasks.base import Task
from ascendbench.tasks.checks import CheckContext, compare_runs, gate
from ascendbench.tasks.inputs import cpu_randn, describe
from ascendbench.tasks.vae_decode import latent_shape


@dataclass(eq=False)
class LayerForwardTask(Task):
    """``outputs[output_name] = module(inputs[input_name])``; fields: ``model.task``'s keys."""

    kind = "layer_forward"
    output_kind = "tensor"

    input_shape: Sequence[int] | None = None
    channels: int | None = None
    spatial_compression: int = 1
    temporal_compression: int | None = None
    input_name: str = "input"
    output_name: str = "output"
    determinism_check: bool = True

    def shape(self, preset: Mapping[str, Any]) -> tuple[int, ...]:
        """The input shape: ``input_shape``, or a latent shaped by the preset."""
        if self.input_shape is not None:
            return tuple(int(d) for d in self.input_shape)
        if self.channels is None:
            raise TaskError(
                "model.task needs either `input_shape` (e.g. [1, 128, 2, 8, 8]) or `channels` "
                "(with spatial_compression and, for video latents, temporal_compression) to shape "
                "the layer's input.")
        temporal = None if self.temporal_compression is None else int(self.temporal_compression)
        return latent_shape(preset, int(self.channels), int(self.spatial_compression), temporal)

    def sizes(self, preset: Mapping[str, Any]) -> dict[str, Any]:
        """The full input shape."""
        return {"input_shape": list(self.shape(preset))}

    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The input, float32 on CPU, from ``torch.Generator(seed)``."""
        return {self.input_name: cpu_randn(self.shape(preset), seed)}

    def run(self, model: Any, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One forward."""
        with torch.inference_mode():
            return {self.output_name: model(inputs[self.input_name])}

    def checks(self, ctx: CheckContext) -> dict[str, Any]:
        """``determinism/second_run_max_abs_diff``: one more device run against the first one."""
        if not self.determinism_check:
            return {}
        moved = ctx.to_device(ctx.inputs)
        again = self.run(ctx.module, moved)[self.output_name].detach().to("cpu")
        diff, agreement = compare_runs(ctx.outputs[self.output_name], again)
        details = {"runs_compared": 2, **agreement,
                   "device_input": describe({"x": moved[self.input_name]})["x"]}
        name = "determinism/second_run_max_abs_diff"
        return {name: gate(name, diff, ctx.rules, details)}
