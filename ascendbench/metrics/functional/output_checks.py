"""Pure per-frame statistics of an image or video output, for the checks that need no reference.

Every frame is read as grey levels in ``[0, 1]`` (the task's value range mapped there, channels averaged),
one frame at a time in float32, so a 161-frame 704x480 video never needs a float64 copy of itself.

* :func:`frame_spread` -- standard deviation and the 1st / 99th percentiles of a frame (flat, black, white);
* :func:`spectral_exponent` -- the exponent ``alpha`` of the radially averaged power spectrum
  ``P(f) ~ 1 / f**alpha``, fitted in log-log over 2 cycles per frame to 0.4 cycles per pixel, and the
  share of the power above 0.25 cycles per pixel. Natural images have ``alpha`` near 2 (van der Schaaf &
  van Hateren 1996, Vision Research 36(17): 1.88 +- 0.43 over 276 images; Field 1987, JOSA A 4(12));
  white noise has 0;
* :func:`frame_changes` -- the mean absolute change between frames one and two apart (VBench's temporal
  flickering score is the mean absolute difference of consecutive frames: Huang et al. 2024, CVPR).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def grey(frame: torch.Tensor, value_range: tuple[float, float]) -> torch.Tensor:
    """``[C, H, W]`` in ``value_range`` -> ``[H, W]`` float32 grey levels in ``[0, 1]`` (clamped).

    >>> grey(torch.ones(3, 2, 2), (-1.0, 1.0)).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    low, high = value_range
    scaled = (frame.detach().to(torch.float32) - low) / max(high - low, 1e-12)
    return scaled.clamp(0.0, 1.0).mean(dim=0)


@dataclass(frozen=True)
class Spread:
    """Standard deviation and the 1st / 99th percentiles of one grey frame."""

    std: float
    low: float
    high: float


def frame_spread(frame: torch.Tensor) -> Spread:
    """:class:`Spread` of an ``[H, W]`` grey frame (percentiles of at most 65536 evenly strided pixels).

    >>> frame_spread(torch.zeros(4, 4))
    Spread(std=0.0, low=0.0, high=0.0)
    """
    flat = frame.reshape(-1)
    sample = flat[:: max(1, flat.numel() // 65536)]
    low, high = torch.quantile(sample, torch.tensor([0.01, 0.99])).tolist()
    return Spread(float(flat.std(unbiased=False)), float(low), float(high))


@dataclass(frozen=True)
class Spectrum:
    """Power-spectrum exponent ``alpha`` (``P ~ f**-alpha``) and the share of power above 0.25 cycles/pixel."""

    alpha: float
    high_share: float


def _radial(height: int, width: int) -> torch.Tensor:
    fy = torch.fft.fftfreq(height).reshape(-1, 1)
    fx = torch.fft.rfftfreq(width).reshape(1, -1)
    return torch.sqrt(fy * fy + fx * fx)


def spectral_exponent(frame: torch.Tensor, bins: int = 12) -> Spectrum:
    """``alpha`` of an ``[H, W]`` grey frame by a least-squares line through log mean power per log-spaced band.

    The mean is removed and a Hann window applied before the FFT (no edge leakage into high frequencies).
    A frame without variation has no spectrum: ``alpha`` is NaN.

    >>> abs(spectral_exponent(torch.rand(64, 64, generator=torch.Generator().manual_seed(0))).alpha) < 0.5
    True
    """
    height, width = frame.shape
    window = torch.outer(torch.hann_window(height, periodic=False), torch.hann_window(width, periodic=False))
    centred = (frame - frame.mean()) * window
    power = torch.fft.rfft2(centred).abs().pow(2)
    radius = _radial(height, width)
    total = float(power[radius > 0].sum())
    if total <= 0.0:
        return Spectrum(float("nan"), float("nan"))
    high_share = float(power[radius > 0.25].sum()) / total
    edges = torch.logspace(math.log10(2.0 / min(height, width)), math.log10(0.4), bins + 1)
    xs, ys = [], []
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        band = (radius >= lo) & (radius < hi)
        if bool(band.any()):
            mean_power = float(power[band].mean())
            if mean_power > 0.0:
                xs.append(math.log(math.sqrt(lo * hi)))
                ys.append(math.log(mean_power))
    if len(xs) < 3:
        return Spectrum(float("nan"), high_share)
    x, y = torch.tensor(xs, dtype=torch.float64), torch.tensor(ys, dtype=torch.float64)
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    return Spectrum(-slope, high_share)


@dataclass(frozen=True)
class Changes:
    """Mean absolute grey change between consecutive frames (``step``) and frames two apart (``skip``)."""

    step: list[float]
    skip: list[float]


def frame_changes(frames: list[torch.Tensor]) -> Changes:
    """:class:`Changes` of a clip of ``[H, W]`` grey frames.

    >>> frame_changes([torch.zeros(2, 2), torch.ones(2, 2), torch.zeros(2, 2)])
    Changes(step=[1.0, 1.0], skip=[0.0])
    """
    step = [float((b - a).abs().mean()) for a, b in zip(frames[:-1], frames[1:], strict=True)]
    skip = [float((c - a).abs().mean()) for a, c in zip(frames[:-2], frames[2:], strict=True)]
    return Changes(step, skip)


def outlier_scores(changes: Changes, floor: float) -> list[float]:
    """For each interior frame, how much more it differs from both neighbours than they differ from each other.

    ``min(d(t-1, t), d(t, t+1)) / max(d(t-1, t+1), floor)``: about 0.5 for smooth motion (the neighbours are
    two steps apart), about 1 for independent frames, large for a frame that jumps away and back (a flash,
    or frames alternating between two pictures).

    >>> outlier_scores(Changes([0.2, 0.2], [0.0]), floor=0.01)
    [20.0]
    """
    return [min(changes.step[t], changes.step[t + 1]) / max(changes.skip[t], floor) for t in range(len(changes.skip))]
