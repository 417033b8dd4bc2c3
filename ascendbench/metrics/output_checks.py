"""Checks needing no reference: NaN/Inf, value range, and whether a picture is a picture at all."""

from __future__ import annotations

import math
import statistics
from types import SimpleNamespace
from typing import Any, Mapping, NamedTuple, Sequence

import torch

from ascendbench.metrics.functional.image import frames
from ascendbench.metrics.functional.nonfinite import first_index
from ascendbench.metrics.verdict import judge, unjudged

CHUNK = 1 << 22
LEVEL = 1.0 / 255.0  # one level of an 8-bit display
FLAT_STD, FROZEN_CHANGE = 2 * LEVEL, 0.5 * LEVEL
_SHOWN = "8-bit display: "
RULES: dict[str, dict[str, Any]] = {
    "output_nonfinite": {"max": 0, "source": "built in: a device output with NaN/Inf always fails "
        "(output validation, with or without a reference)"},
    "reference_nonfinite": {"max": 0, "source": "built in: a reference with NaN/Inf cannot vouch "
        "for the device output; check the reference run (baseline.reference, the model's CPU path) "
        "before judging the device"},
    "reference_identical": {"max": 0, "source": "built in: a reference in a higher precision than "
        "the device run cannot equal its output bit for bit; one that does was not computed "
        "independently (a replaced cache entry or saved run): delete it and run again"},
    "output_out_of_range_ratio": {"max": 0.5, "warn": 0.05, "source": "built in: decoders "
        "overshoot their value range a little (clamped when saved); more than half of the elements "
        "outside it is a scale or offset error. Override with "
        "model.thresholds.output_out_of_range_ratio"},
    "output_flat_frames": {"max": 0.5, "warn": 0.0, "source": _SHOWN + "a frame whose grey levels "
        "vary by less than 2 of 255 shows as one flat colour (single-colour outputs: "
        "Open-Sora-Plan#230, sglang#39386); any such frame warns, more than half fails"},
    "output_black_white_frames": {"max": 0.5, "warn": 0.0, "source": _SHOWN + "99% of the pixels "
        "below 5% grey (black) or above 95% (white); black outputs with no error: "
        "Open-Sora-Plan#301"},
    "output_spectral_exponent": {"min": 1.0, "source": "natural images have power spectra "
        "~1/f^alpha with alpha 1.88 +- 0.43 (van der Schaaf & van Hateren 1996, Vision Research "
        "36(17)); below 1.0 (mean - 2 SD) the output has the flat spectrum of noise (alpha 0)"},
    "output_frozen_pairs": {"max": 0.5, "warn": 0.0, "source": _SHOWN + "consecutive frames "
        "changing by less than half a level on average are the same picture (a frozen video); any "
        "such pair warns, more than half fails"},
    "output_flicker": {"max": 3.0, "source": "ascendbench's rule on VBench's frame-difference "
        "measure (Huang et al. 2024): a frame 3x farther from each neighbour than they are from "
        "each other is a flash or an alternation, not motion (smooth motion scores ~0.5, "
        "independent frames ~1)"},
}
NOT_JUDGED = ("random-init weights: an untrained decoder makes noise, so these checks are reported "
              "but not judged (would_be: what the rule says)")
NOT_NATURAL = ("input not natural for these checks (made for pictures from prompts, images or "
               "video; not random latents decoded): reported, not judged (would_be: the rule's)")
REFERENCE_FAILS = ("the reference output does not pass this check either (reference {verdict}, "
                   "value {value:.4g}): the model makes this output, not the port, so it is "
                   "reported but not judged")
MIN_IDENTICAL_NUMEL = 16  # a handful of elements (or a constant) may legitimately agree exactly


def inspect(tensor: torch.Tensor, value_range: Sequence[float] | None = None,
            chunk_elements: int = CHUNK) -> SimpleNamespace:
    """``numel``, ``nonfinite``, ``first_nonfinite``, ``out_of_range``, finite ``low``/``high``."""
    flat = tensor.detach().reshape(-1)
    found = SimpleNamespace(numel=tensor.numel(), nonfinite=0, first_nonfinite=None,
                            out_of_range=0, low=None, high=None)
    for start in range(0, flat.numel(), int(chunk_elements)):
        chunk = flat[start:start + int(chunk_elements)]
        finite = torch.isfinite(chunk)
        bad = int(chunk.numel() - int(finite.sum()))
        if bad and found.first_nonfinite is None:
            found.first_nonfinite = first_index(~finite, tuple(tensor.shape), start)
        found.nonfinite += bad
        kept = chunk[finite] if bad else chunk
        if not kept.numel():
            continue
        low, high = float(kept.min()), float(kept.max())
        found.low = low if found.low is None else min(found.low, low)
        found.high = high if found.high is None else max(found.high, high)
        if value_range is not None:
            found.out_of_range += int(((kept < value_range[0]) | (kept > value_range[1])).sum())
    return found


def _entry(value: float, rule: Mapping[str, Any], **details: Any) -> dict[str, Any]:
    return {"value": float(value), **details, **judge(value, rule)}


def _nonfinite(metric: str, found: SimpleNamespace) -> dict[str, Any]:
    fraction = found.nonfinite / found.numel if found.numel else 0.0
    return _entry(found.nonfinite, RULES[metric], fraction=fraction,
                  first_index=found.first_nonfinite, numel=found.numel)


def _prefixed(entries: Mapping[str, Mapping[str, Any]], several: bool) -> dict[str, Any]:
    return {(f"{out}/{metric}" if several else metric): entry
            for out, found in entries.items() for metric, entry in found.items()}


def validate_reference(reference: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    """``reference_nonfinite`` of every floating-point reference output."""
    found = {out: {"reference_nonfinite": _nonfinite("reference_nonfinite", inspect(tensor))}
             for out, tensor in sorted(reference.items()) if tensor.is_floating_point()}
    return _prefixed(found, len(reference) > 1)


def _identical(ref: torch.Tensor, out: torch.Tensor, device_dtype: torch.dtype) -> bool:
    if (not ref.is_floating_point() or ref.shape != out.shape or out.numel() < MIN_IDENTICAL_NUMEL
            or ref.dtype.itemsize <= device_dtype.itemsize):
        return False
    flat = out.reshape(-1)
    return bool((flat != flat[0]).any()) and torch.equal(ref.double(), out.double())


def identical_reference(reference: Mapping[str, torch.Tensor], outputs: Mapping[str, torch.Tensor],
                        device_dtype: torch.dtype) -> dict[str, dict[str, Any]]:
    """``reference_identical`` (FAIL): a finer reference equal to every float output; else {}."""
    pairs = [(name, reference[name], out) for name, out in sorted(outputs.items())
             if name in reference and out.is_floating_point()]
    if not pairs or not all(_identical(ref, out, device_dtype) for _, ref, out in pairs):
        return {}
    names = [name for name, _, _ in pairs]
    return {"reference_identical": _entry(1, RULES["reference_identical"], outputs=names)}


class Spectrum(NamedTuple):
    """Power-spectrum exponent (``P ~ f**-alpha``) and the power share above 0.25 cycles/pixel."""

    alpha: float
    high_share: float


def grey(frame: torch.Tensor, value_range: tuple[float, float]) -> torch.Tensor:
    """``[C, H, W]`` in ``value_range`` -> ``[H, W]`` float32 grey levels in ``[0, 1]``."""
    low, high = value_range
    scaled = (frame.detach().to(torch.float32) - low) / max(high - low, 1e-12)
    return scaled.clamp(0.0, 1.0).mean(dim=0)


def spectral_exponent(frame: torch.Tensor, bins: int = 12) -> Spectrum:
    """``alpha`` of an ``[H, W]`` grey frame's power spectrum (natural ~2, noise 0, flat NaN)."""
    height, width = frame.shape
    window = torch.outer(torch.hann_window(height, periodic=False),
                         torch.hann_window(width, periodic=False))
    power = torch.fft.rfft2((frame - frame.mean()) * window).abs().pow(2)
    fy, fx = torch.fft.fftfreq(height).reshape(-1, 1), torch.fft.rfftfreq(width).reshape(1, -1)
    radius = torch.sqrt(fy * fy + fx * fx)
    total = float(power[radius > 0].sum())
    if total <= 0.0:
        return Spectrum(float("nan"), float("nan"))
    high_share = float(power[radius > 0.25].sum()) / total
    edges = torch.logspace(math.log10(2.0 / min(height, width)), math.log10(0.4), bins + 1).tolist()
    xs, ys = [], []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        band = power[(radius >= lo) & (radius < hi)]
        if band.numel() and float(band.mean()) > 0.0:
            xs.append(math.log(math.sqrt(lo * hi)))
            ys.append(math.log(float(band.mean())))
    if len(xs) < 3:
        return Spectrum(float("nan"), high_share)
    x, y = torch.tensor(xs, dtype=torch.float64), torch.tensor(ys, dtype=torch.float64)
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    return Spectrum(-slope, high_share)


class _Tally:
    """Per-frame findings over every clip of one output."""

    def __init__(self) -> None:
        self.frames = self.flat = self.black_white = self.pairs = self.frozen = 0
        self.spectra: list[Spectrum] = []  # of the frames that are not flat
        self.flicker: tuple[float, int, int] | None = None  # (score, clip, frame)

    def frame(self, picture: torch.Tensor) -> None:
        flat = picture.reshape(-1)
        sample = flat[:: max(1, flat.numel() // 65536)]  # percentiles of at most 65536 pixels
        low, high = torch.quantile(sample, torch.tensor([0.01, 0.99])).tolist()
        std = float(flat.std(unbiased=False))
        self.frames += 1
        self.flat += std < FLAT_STD
        self.black_white += high <= 0.05 or low >= 0.95
        if std >= FLAT_STD:
            self.spectra.append(spectral_exponent(picture))

    def clip(self, index: int, pictures: list[torch.Tensor]) -> None:
        step = [float((b - a).abs().mean()) for a, b in zip(pictures, pictures[1:], strict=False)]
        skip = [float((c - a).abs().mean()) for a, c in zip(pictures, pictures[2:], strict=False)]
        self.pairs += len(step)
        self.frozen += sum(change < FROZEN_CHANGE for change in step)
        # per interior frame min(d(t-1, t), d(t, t+1)) / max(d(t-1, t+1), a level): ~0.5 smooth
        scores = [min(step[t], step[t + 1]) / max(skip[t], LEVEL) for t in range(len(skip))]
        for frame, score in enumerate(scores, start=1):
            if self.flicker is None or score > self.flicker[0]:
                self.flicker = (score, index, frame)

    def values(self, video: bool) -> dict[str, dict[str, Any]]:
        finite = [s.alpha for s in self.spectra if s.alpha == s.alpha]
        values: dict[str, dict[str, Any]] = {
            "output_flat_frames": {"value": self.flat / self.frames, "count": self.flat,
                                   "frames": self.frames},
            "output_black_white_frames": {"value": self.black_white / self.frames,
                                          "count": self.black_white, "frames": self.frames},
            "output_spectral_exponent": {
                "value": statistics.median(finite), "min": min(finite), "frames": len(finite),
                "high_frequency_share": statistics.median(s.high_share for s in self.spectra),
            } if finite else {
                "skipped": "every frame is flat (see output_flat_frames): no spectrum to judge"},
        }
        if not video:
            return values
        values["output_frozen_pairs"] = (
            {"value": self.frozen / self.pairs, "count": self.frozen, "pairs": self.pairs}
            if self.pairs else {"skipped": "single-frame videos: no consecutive frames"})
        values["output_flicker"] = (
            {"value": self.flicker[0], "clip": self.flicker[1], "frame": self.flicker[2]}
            if self.flicker else {"skipped": "fewer than 3 frames: no frame has two neighbours"})
        return values


def check_output(tensor: torch.Tensor, value_range: tuple[float, float], layout: str,
                 rules: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The judged picture checks of an ``[N, C, H, W]`` or 5-D (``layout``) batch."""
    tally, rules = _Tally(), rules or {}
    for index in range(int(tensor.shape[0])):  # an image alone, or a video's frames
        clip = [tensor[index]] if tensor.dim() == 4 else list(frames(tensor, index, layout))
        pictures = [grey(frame, value_range) for frame in clip]
        for picture in pictures:
            tally.frame(picture)
        if len(pictures) > 1:
            tally.clip(index, pictures)
    entries = tally.values(video=tensor.dim() == 5)
    for name, entry in entries.items():
        if "skipped" not in entry:
            entry.update(judge(entry["value"], rules.get(name) or RULES[name]))
    return entries


def _against_reference(device: dict[str, Any], reference: dict[str, Any]) -> None:
    for name, entry in device.items():
        ref = reference.get(name, {})
        if entry.get("verdict") is not None and ref.get("verdict") not in (None, "PASS"):
            reason = REFERENCE_FAILS.format(verdict=ref["verdict"], value=ref["value"])
            device[name] = {**unjudged(entry, reason), "reference_value": ref["value"]}


def output_checks(outputs: Mapping[str, torch.Tensor], task: Any, weights: Mapping[str, Any] | None,
                  rules: Mapping[str, Any] | None = None,
                  reference: Mapping[str, torch.Tensor] | None = None) -> dict[str, dict[str, Any]]:
    """``output_nonfinite``, ``output_out_of_range_ratio``, the picture checks: judged or shown."""
    rules, random = rules or {}, (weights or {}).get("kind") == "random-init"
    natural = getattr(task, "natural_outputs", False)
    reason = NOT_JUDGED if random else None if natural else NOT_NATURAL
    range_rule = rules.get("output_out_of_range_ratio") or RULES["output_out_of_range_ratio"]
    checked: dict[str, dict[str, Any]] = {}
    for name, tensor in sorted(outputs.items()):
        if not tensor.is_floating_point():
            continue
        bounds = task.output_range(name, tensor)
        bounds = None if bounds is None else (float(bounds[0]), float(bounds[1]))
        found = inspect(tensor, bounds)
        checked[name] = {"output_nonfinite": _nonfinite("output_nonfinite", found)}
        if bounds is None:
            continue
        finite = found.numel - found.nonfinite
        checked[name]["output_out_of_range_ratio"] = _entry(
            found.out_of_range / finite if finite else 0.0, range_rule, count=found.out_of_range,
            value_range=list(bounds), min=found.low, max=found.high)
        if tensor.dim() in (4, 5):
            pictures = check_output(tensor, bounds, task.video_layout, rules)
            ref = (reference or {}).get(name)
            if not reason and ref is not None and tuple(ref.shape) == tuple(tensor.shape):
                _against_reference(pictures, check_output(ref, bounds, task.video_layout, rules))
            checked[name].update(pictures)
        checked[name].update({
            check: unjudged(entry, reason) for check, entry in checked[name].items()
            if reason and check != "output_nonfinite" and "skipped" not in entry})
    return _prefixed(checked, len(outputs) > 1)
