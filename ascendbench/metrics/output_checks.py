"""Checks of an image or video output that need no reference: is it a picture at all?

A port can produce a flat brown video, a single colour, black frames or noise with no error and normal
latency (sgl-project/sglang#39386; PKU-YuanGroup/Open-Sora-Plan#230, #301), and NaN/Inf plus the value
range (:mod:`ascendbench.metrics.validate`) pass all of those. Every job whose task outputs images or videos
adds these entries (``<output>/`` prefixed when the job has several outputs), each judged by a rule with its
source; ``model.thresholds.<name>`` overrides a rule as any other:

* ``output_flat_frames`` -- share of frames whose grey-level standard deviation is below 2 of 255 levels;
* ``output_black_white_frames`` -- share of frames whose 99th percentile is below 0.05 (black) or whose 1st
  percentile is above 0.95 (white);
* ``output_spectral_exponent`` -- median, over the frames that are not flat, of the power-spectrum exponent
  (:func:`ascendbench.metrics.functional.output_checks.spectral_exponent`): noise has no spatial structure;
* ``output_frozen_pairs`` (videos) -- share of consecutive frame pairs whose mean change is below half a level;
* ``output_flicker`` (videos) -- the largest outlier score of a frame against its two neighbours
  (:func:`ascendbench.metrics.functional.output_checks.outlier_scores`).

With random-init weights an untrained decoder makes noise, so the entries are computed and reported but not
judged: ``verdict`` is null, ``would_be`` holds what the rule would say and ``not_judged`` why. Where a reference
output exists, it is checked too, and a check its reference does not pass is not judged on the device either:
the model makes that output, not the port (a loaded checkpoint can be untrained as well).
"""

from __future__ import annotations

import statistics
from typing import Any, Iterator, Mapping

import torch

from ascendbench.metrics.functional.output_checks import (
    Changes,
    frame_spread,
    grey,
    outlier_scores,
    spectral_exponent,
)
from ascendbench.metrics.verdict import judge

LEVEL = 1.0 / 255.0  # one level of an 8-bit display
FLAT_STD = 2 * LEVEL
FROZEN_CHANGE = 0.5 * LEVEL
_SHOWN = "8-bit display: "
RULES: dict[str, dict[str, Any]] = {
    "output_flat_frames": {"max": 0.5, "warn": 0.0, "source": _SHOWN + "a frame whose grey levels vary by less "
                           "than 2 of 255 shows as one flat colour (single-colour outputs: Open-Sora-Plan#230, "
                           "sglang#39386); any such frame warns, more than half fails"},
    "output_black_white_frames": {"max": 0.5, "warn": 0.0, "source": _SHOWN + "99% of the pixels below 5% grey "
                                  "(black) or above 95% (white); black outputs with no error: Open-Sora-Plan#301"},
    "output_spectral_exponent": {"min": 1.0, "source": "natural images have power spectra ~1/f^alpha with alpha "
                                 "1.88 +- 0.43 (van der Schaaf & van Hateren 1996, Vision Research 36(17)); "
                                 "below 1.0 (mean - 2 SD) the output has the flat spectrum of noise (alpha 0)"},
    "output_frozen_pairs": {"max": 0.5, "warn": 0.0, "source": _SHOWN + "consecutive frames changing by less "
                            "than half a level on average are the same picture (a frozen video); any such pair "
                            "warns, more than half fails"},
    "output_flicker": {"max": 3.0, "source": "ascendbench's rule on VBench's frame-difference measure (Huang et "
                       "al. 2024): a frame 3x farther from each neighbour than they are from each other is a flash "
                       "or an alternation, not motion (smooth motion scores ~0.5, independent frames ~1)"},
}
NOT_JUDGED = ("random-init weights: an untrained decoder makes noise, so these checks are reported but not "
              "judged (would_be: what the rule says)")
REFERENCE_FAILS = ("the reference output does not pass this check either (reference {verdict}, value {value:.4g}): "
                   "the model makes this output, not the port, so it is reported but not judged")


def clips(tensor: torch.Tensor, layout: str) -> Iterator[list[torch.Tensor]]:
    """``[C, H, W]`` frame views per clip: each image of ``[N, C, H, W]`` alone; each video of a 5-D batch."""
    if tensor.dim() == 4:
        for image in tensor:
            yield [image]
        return
    for video in tensor:
        frames = video.transpose(0, 1) if layout == "BCTHW" else video
        yield list(frames)


class _Tally:
    """Per-frame findings over every clip of one output, folded frame by frame."""

    def __init__(self) -> None:
        self.frames = self.flat = self.black_white = 0
        self.alphas: list[float] = []
        self.high_shares: list[float] = []
        self.pairs = self.frozen = 0
        self.flicker: tuple[float, int, int] | None = None  # (score, clip, frame)

    def frame(self, picture: torch.Tensor) -> None:
        spread = frame_spread(picture)
        self.frames += 1
        self.flat += spread.std < FLAT_STD
        self.black_white += spread.high <= 0.05 or spread.low >= 0.95
        if spread.std >= FLAT_STD:
            spectrum = spectral_exponent(picture)
            self.alphas.append(spectrum.alpha)
            self.high_shares.append(spectrum.high_share)

    def clip(self, index: int, pictures: list[torch.Tensor]) -> None:
        if len(pictures) < 2:
            return
        step = [float((b - a).abs().mean()) for a, b in zip(pictures[:-1], pictures[1:], strict=True)]
        skip = [float((c - a).abs().mean()) for a, c in zip(pictures[:-2], pictures[2:], strict=True)]
        self.pairs += len(step)
        self.frozen += sum(change < FROZEN_CHANGE for change in step)
        for frame, score in enumerate(outlier_scores(Changes(step, skip), floor=LEVEL), start=1):
            if self.flicker is None or score > self.flicker[0]:
                self.flicker = (score, index, frame)


def _tally(tensor: torch.Tensor, value_range: tuple[float, float], layout: str) -> _Tally:
    tally = _Tally()
    for index, frames in enumerate(clips(tensor, layout)):
        pictures = [grey(frame, value_range) for frame in frames]
        for picture in pictures:
            tally.frame(picture)
        tally.clip(index, pictures if len(frames) > 1 and tensor.dim() == 5 else [])
    return tally


def _values(tally: _Tally, video: bool) -> dict[str, dict[str, Any]]:
    values: dict[str, dict[str, Any]] = {
        "output_flat_frames": {"value": tally.flat / tally.frames, "count": tally.flat, "frames": tally.frames},
        "output_black_white_frames": {"value": tally.black_white / tally.frames, "count": tally.black_white,
                                      "frames": tally.frames},
    }
    finite = [a for a in tally.alphas if a == a]
    values["output_spectral_exponent"] = (
        {"value": statistics.median(finite), "min": min(finite), "frames": len(finite),
         "high_frequency_share": statistics.median(tally.high_shares)} if finite else
        {"skipped": "every frame is flat (see output_flat_frames): no spectrum to judge"})
    if video:
        values["output_frozen_pairs"] = ({"value": tally.frozen / tally.pairs, "count": tally.frozen,
                                          "pairs": tally.pairs} if tally.pairs else
                                         {"skipped": "single-frame videos: no consecutive frames"})
        values["output_flicker"] = ({"value": tally.flicker[0], "clip": tally.flicker[1],
                                     "frame": tally.flicker[2]} if tally.flicker else
                                    {"skipped": "fewer than 3 frames: no frame has two neighbours"})
    return values


def _judge(name: str, entry: dict[str, Any], rules: Mapping[str, Any], not_judged: str | None) -> dict[str, Any]:
    if "skipped" in entry:
        return entry
    decided = judge(entry["value"], rules.get(name) or RULES[name])
    if not_judged is None:
        return {**entry, **decided}
    return {**entry, "verdict": None, "threshold": decided["threshold"], "rule": decided["rule"],
            "source": decided["source"], "would_be": decided["verdict"], "not_judged": not_judged}


def check_output(tensor: torch.Tensor, value_range: tuple[float, float], layout: str,
                 rules: Mapping[str, Any] | None = None, judged: bool = True) -> dict[str, dict[str, Any]]:
    """The reference-free entries of one ``[N, C, H, W]`` image batch or 5-D video batch (see the module docstring).

    Args:
        tensor: the output on the CPU.
        value_range: its declared range (mapped to grey levels 0..1).
        layout: ``BCTHW`` or ``BTCHW`` for a video.
        rules: the job's rules; a rule named as an entry replaces the built-in one.
        judged: ``False`` for random-init weights (reported, not judged).
    """
    tally = _tally(tensor, value_range, layout)
    values = _values(tally, video=tensor.dim() == 5)
    return {name: _judge(name, entry, rules or {}, None if judged else NOT_JUDGED) for name, entry in values.items()}


def _against_reference(device: dict[str, dict[str, Any]], reference: dict[str, dict[str, Any]]) -> None:
    """Lift the verdict of every device entry whose check the reference output does not pass (in place)."""
    for name, entry in device.items():
        ref = reference.get(name, {})
        if entry.get("verdict") is not None and ref.get("verdict") not in (None, "PASS"):
            reason = REFERENCE_FAILS.format(verdict=ref["verdict"], value=ref["value"])
            device[name] = {**entry, "verdict": None, "would_be": entry["verdict"], "not_judged": reason,
                            "reference_value": ref["value"]}


def reference_free_checks(outputs: Mapping[str, torch.Tensor], task: Any, weights: Mapping[str, Any] | None,
                          rules: Mapping[str, Any] | None = None,
                          reference: Mapping[str, torch.Tensor] | None = None) -> dict[str, dict[str, Any]]:
    """Entries of every image/video output of a job (``task.output_range`` says which ones; none: ``{}``).

    Args:
        outputs: the device outputs.
        task: the job's task (``output_range``, ``video_layout``).
        weights: the record's ``weights`` (random-init: reported, not judged).
        rules: the job's rules.
        reference: the reference outputs, when there are some: a check they fail is not judged on the device.
    """
    judged = (weights or {}).get("kind") != "random-init"
    checked = {}
    for name, tensor in sorted(outputs.items()):
        bounds = task.output_range(name, tensor)
        if bounds is not None and tensor.dim() in (4, 5):
            value_range = (float(bounds[0]), float(bounds[1]))
            checked[name] = check_output(tensor, value_range, task.video_layout, rules, judged)
            ref = (reference or {}).get(name)
            if judged and ref is not None and tuple(ref.shape) == tuple(tensor.shape):
                _against_reference(checked[name], check_output(ref, value_range, task.video_layout, rules))
    prefix = len(outputs) > 1
    return {(f"{out}/{metric}" if prefix else metric): entry
            for out, entries in checked.items() for metric, entry in entries.items()}
