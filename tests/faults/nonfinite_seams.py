"""NaN/Inf seams for tests/faults/test_nonfinite.py: the tiny VAE decode with values planted in one
side.

A job reaches them with ``model=tiny_flux2_decoder model.task._target_=nonfinite_seams.<Class>``
(this directory is on ``PYTHONPATH`` in the faults suite). The reference runs in float64 and the
device run in float32, which is how a seam tells the two apart; inputs on the meta device (the
memory estimate) are left alone.
"""

from __future__ import annotations

from typing import Mapping

import torch

from ascendbench.tasks.vae_decode import VaeDecodeTask

# Share of the reference's elements planted with NaN/Inf (the cached reference held 31 %).
REFERENCE_NONFINITE_SHARE = 0.31


def _plant(image: torch.Tensor, every: int, value: float) -> torch.Tensor:
    """A copy of ``image`` with ``value`` at every ``every``-th flat element (starting at 0)."""
    image = image.clone()  # outside inference mode: a normal tensor we may write into
    image.view(-1)[::every] = value
    return image


class _PlantingDecode(VaeDecodeTask):
    """VAE decode whose outputs pass through :meth:`plant` (``is_reference``: the float64 run)."""

    def run(
        self, model: torch.nn.Module, inputs: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        outputs = super().run(model, inputs)
        image = outputs[self.output_name]
        if image.is_meta:
            return outputs
        return {**outputs, self.output_name: self.plant(image, image.dtype == torch.float64)}

    def plant(self, image: torch.Tensor, is_reference: bool) -> torch.Tensor:
        """The planted output (subclasses)."""
        raise NotImplementedError


class NonfiniteReferenceDecode(_PlantingDecode):
    """The reference (only) gets NaN and Inf in :data:`REFERENCE_NONFINITE_SHARE` of its
    elements."""

    def plant(self, image: torch.Tensor, is_reference: bool) -> torch.Tensor:
        if not is_reference:
            return image
        flat = image.clone().view(-1)
        count = int(round(REFERENCE_NONFINITE_SHARE * flat.numel()))
        flat[:count:2] = float("nan")
        flat[1:count:2] = float("inf")
        return flat.view(image.shape)


class OverflowBothDecode(_PlantingDecode):
    """Both runs overflow everywhere to the same ``+inf`` (NaN in the first element of both)."""

    def plant(self, image: torch.Tensor, is_reference: bool) -> torch.Tensor:
        planted = torch.full_like(image, float("inf"))
        planted.view(-1)[0] = float("nan")
        return planted


class NanOnDeviceOnlyDecode(_PlantingDecode):
    """The device run (only) gets a NaN at every 97th element; the reference stays finite."""

    def plant(self, image: torch.Tensor, is_reference: bool) -> torch.Tensor:
        return image if is_reference else _plant(image, 97, float("nan"))


class Scaled255Decode(_PlantingDecode):
    """The device run returns its image in [0, 255] instead of [-1, 1] (finite, but out of the
    task's range)."""

    def plant(self, image: torch.Tensor, is_reference: bool) -> torch.Tensor:
        return image if is_reference else (image.clamp(-1, 1) + 1) * 127.5 + 10.0


class OverflowLayer(torch.nn.Module):
    """A layer whose output overflows to ``+inf`` in its first half and is NaN in its last element,
    every call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x * 2.0
        flat = out.view(-1)
        flat[: flat.numel() // 2] = float("inf")
        flat[-1] = float("nan")
        return out
