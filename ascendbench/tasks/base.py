"""The task interface: what a job uses of a task, with the defaults (docs/extending.md)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping, Sequence

import torch


class Task(ABC):
    """Base class of every task (docs/extending.md). ``output_kind``: ``None`` (tensors only),
    ``"tensor"``, ``"image"`` (``[N, C, H, W]`` in ``value_range``) or ``"video"`` (5-D, in
    ``video_layout``); ``unit``: what :meth:`items_per_call` counts; ``natural_outputs``: picture
    checks judged, else shown; ``video_frames``: frames saved as PNG; ``preset_keys``: the record's
    ``job.sizes``; ``report_metrics``: each report section's metric (``job.primary``)."""

    kind: ClassVar[str] = "task"
    output_kind: ClassVar[str | None] = None
    unit: ClassVar[str] = "calls"
    video_layout: ClassVar[str] = "BCTHW"
    value_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    natural_outputs: ClassVar[bool] = False
    video_frames: ClassVar[Sequence[str | int]] = ("first", "middle", "last")
    video_fps: ClassVar[int] = 24
    preset_keys: ClassVar[tuple[str, ...]] = ("batch_size", "height", "width")
    report_metrics: ClassVar[Mapping[str, str]] = {"error": "mean_rel_err"}

    @abstractmethod
    def make_inputs(self, preset: Mapping[str, Any], seed: int) -> dict[str, torch.Tensor]:
        """The inputs of one call, on the CPU, drawn from ``seed`` on a CPU generator."""

    @abstractmethod
    def run(self, model: Any, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One call of ``model`` on ``inputs`` (already on the model's device and dtype)."""

    def primary_output(self) -> str | None:
        """The output the report leads with: ``output_name`` where the task has one."""
        return getattr(self, "output_name", None)

    def report_declaration(self) -> dict[str, str]:
        """The record's ``job.primary``: ``output`` and the metric of each report section."""
        output = self.primary_output()
        return {**({"output": output} if output else {}), **dict(self.report_metrics)}

    def sizes(self, preset: Mapping[str, Any]) -> dict[str, Any]:
        """The preset sizes this task uses (the record's ``job.sizes``)."""
        return {key: int(preset[key]) for key in self.preset_keys}

    def items_per_call(self, inputs: Mapping[str, torch.Tensor]) -> int:
        """Items (in :attr:`unit`) one call produces, for throughput; one by default."""
        return 1

    def to(self, model: Any, device: torch.device, dtype: torch.dtype) -> Any:
        """``model`` on ``device`` in ``dtype``; a pipeline or a tiled VAE overrides this."""
        model.to(device=device, dtype=dtype)
        return model

    def applied_options(self) -> dict[str, Any]:
        """What the last :meth:`to` switched on beyond device and dtype: ``applied``, if kept."""
        return dict(getattr(self, "applied", None) or {})

    def attach_phase_timer(self, model: Any, timer: Any) -> bool:
        """Register the model's phases on ``timer``; whether the task times phases (not here)."""
        return False

    def output_range(self, name: str, tensor: torch.Tensor) -> tuple[float, float] | None:
        """The range output ``name`` must lie in (images and videos of floats), else ``None``."""
        dims = {"image": 4, "video": 5}.get(self.output_kind or "")
        if dims is None or not tensor.is_floating_point() or tensor.dim() != dims:
            return None
        return (float(self.value_range[0]), float(self.value_range[1]))

    def input_sources(self) -> dict[str, dict[str, Any]]:
        """Input name -> where it came from (e.g. a file and its SHA256), for the record."""
        return {}

    def checks(self, ctx: Any) -> dict[str, dict[str, Any]]:
        """The task's own gates (``ctx``: a :class:`~ascendbench.tasks.checks.CheckContext`)."""
        return {}
