"""Side-by-side pictures of an output: baseline | device | |difference| heatmap with a colour bar.

Images (``[N, C, H, W]``, 1 or 3 channels) get one PNG per image (the first ``max_images``); videos
(5-D) one PNG per chosen frame of the first video: ``first``, ``middle``, ``last``, ``worst`` (the frame
with the largest mean squared error) or frame numbers. The heatmap shows the largest absolute
difference over the channels, in the output's own units, coloured by a matplotlib colormap; the picture
is composed as pixels by :mod:`ascendbench.compare.picture` (no matplotlib figure, no pyplot state).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from matplotlib import colormaps

from ascendbench.compare.picture import Picture, draw
from ascendbench.metrics.functional.video import frame_chunks, frame_count, frames, resolve_layout


def _display(image: np.ndarray, value_range: Sequence[float]) -> np.ndarray:
    """``[C, H, W]`` values as ``[H, W, 3]`` uint8 screen colours: ``value_range`` onto 0..255, clipped; one
    channel shown in grey."""
    low, high = float(value_range[0]), float(value_range[1])
    shown = np.clip((np.nan_to_num(image) - low) / (high - low), 0.0, 1.0)
    rgb = np.repeat(shown, 3, axis=0) if shown.shape[0] == 1 else shown
    return np.rint(np.moveaxis(rgb, 0, -1) * 255.0).astype(np.uint8)


def heatmap(diff: np.ndarray, top: float, colormap: str) -> np.ndarray:
    """``[H, W]`` differences as ``[H, W, 3]`` uint8 colours of ``colormap`` from 0 to ``top`` (1 when
    ``top`` is 0); NaN and +inf are shown as ``top``."""
    scale = top if top > 0 else 1.0
    shown = np.clip(np.nan_to_num(diff, nan=top, posinf=top) / scale, 0.0, 1.0)
    return colormaps[colormap](shown, bytes=True)[..., :3]


def compose(reference: torch.Tensor, device: torch.Tensor, title: str, value_range: Sequence[float] = (-1.0, 1.0),
            colormap: str = "inferno") -> Picture:
    """The side-by-side picture of one ``[C, H, W]`` pair: baseline, device, their largest absolute
    difference over the channels (its maximum in the heatmap's title and at the colour bar's top)."""
    ref = reference.detach().to("cpu", torch.float64).numpy()
    dev = device.detach().to("cpu", torch.float64).numpy()
    with np.errstate(invalid="ignore"):  # inf - inf: equal non-finite values agree (0), others are NaN
        delta = np.where((dev == ref) | (np.isnan(dev) & np.isnan(ref)), 0.0, np.abs(dev - ref))
    diff = delta.max(axis=0)
    finite = diff[np.isfinite(diff)]
    top = float(finite.max()) if finite.size else 0.0
    return Picture(images=(_display(ref, value_range), _display(dev, value_range), heatmap(diff, top, colormap)),
                   titles=("baseline (CPU)", "device", f"|device - baseline|, max {top:.3g}"), title=title,
                   colormap=colormap, top=top if top > 0 else 1.0)


def side_by_side(reference: torch.Tensor, device: torch.Tensor, path: Path, title: str,
                 value_range: Sequence[float] = (-1.0, 1.0), colormap: str = "inferno") -> Path:
    """Draw one ``[C, H, W]`` pair (:func:`compose`) as a PNG at ``path``."""
    return draw(compose(reference, device, title, value_range, colormap), path)


def per_frame_mse(reference: torch.Tensor, device: torch.Tensor, layout: str, chunk: int = 8) -> list[float]:
    """Mean squared error of every frame of the first video (float64, chunk by chunk)."""
    values: list[float] = []
    convert = lambda view: view.to(torch.float64)  # noqa: E731
    for _batch, _, ref, dev in frame_chunks(reference[:1], device[:1], layout, chunk, convert):
        values.extend(float(v) for v in ((dev - ref) ** 2).flatten(1).mean(dim=1))
    return values


def choose_frames(spec: Sequence[Any], total: int, mse: Sequence[float] | None) -> list[int]:
    """Frame numbers from ``first / middle / last / worst`` words and integers (deduplicated, in range).

    >>> choose_frames(["first", "middle", "last", "worst", 2], 9, [0.0] * 8 + [1.0])
    [0, 4, 8, 2]
    """
    chosen: list[int] = []
    for item in spec:
        if item == "first":
            index = 0
        elif item == "middle":
            index = total // 2
        elif item == "last":
            index = total - 1
        elif item == "worst":
            index = int(np.nanargmax(np.nan_to_num(np.asarray(mse), nan=np.inf))) if mse else 0
        else:
            index = int(item) if int(item) >= 0 else total + int(item)
        if 0 <= index < total and index not in chosen:
            chosen.append(index)
    return chosen


def render_output(name: str, reference: torch.Tensor, device: torch.Tensor, directory: Path,
                  options: Mapping[str, Any]) -> list[Path]:
    """PNGs of one output; an output that is neither an image batch nor a video gets none."""
    value_range, colormap = list(options.get("value_range", (-1.0, 1.0))), str(options.get("colormap", "inferno"))
    if not reference.is_floating_point() or tuple(reference.shape) != tuple(device.shape):
        return []
    if reference.dim() == 4 and reference.shape[1] in (1, 3):
        count = min(int(reference.shape[0]), int(options.get("max_images", 4)))
        return [side_by_side(reference[i], device[i], directory / f"{name}_{i}_compare.png",
                             f"{name} [image {i}]", value_range=value_range, colormap=colormap) for i in range(count)]
    if reference.dim() == 5 and (options.get("layout", "auto") != "auto" or 1 in reference.shape[1:3]
                                 or 3 in reference.shape[1:3]):  # a 5-D feature map (e.g. a Conv3d layer) is no video
        layout = resolve_layout(tuple(reference.shape), str(options.get("layout", "auto")))
        total = frame_count(tuple(reference.shape), layout)
        spec = list(options.get("frames", ["first", "middle", "last", "worst"]))
        mse = per_frame_mse(reference, device, layout) if "worst" in spec else None
        paths = []
        for index in choose_frames(spec, total, mse):
            ref, dev = frames(reference, 0, index, index + 1, layout)[0], frames(device, 0, index, index + 1, layout)[0]
            paths.append(side_by_side(ref, dev, directory / f"{name}_frame{index:04d}_compare.png",
                                      f"{name} [video 0, frame {index} of {total}]", value_range=value_range,
                                      colormap=colormap))
        return paths
    return []
