"""Side-by-side PNGs (``compare.visual``): reference | device | difference heatmap (matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from ascendbench.compare.files import safe_name
from ascendbench.fileio import atomic_path
from ascendbench.metrics.functional.image import frames, resolve_layout


def _display(image: np.ndarray, value_range: Sequence[float]) -> np.ndarray:
    """``[C, H, W]`` values as ``[H, W, 3]`` uint8 colours, ``value_range`` onto 0..255."""
    low, high = float(value_range[0]), float(value_range[1])
    shown = np.clip((np.nan_to_num(image) - low) / (high - low), 0.0, 1.0)
    rgb = np.repeat(shown, 3, axis=0) if shown.shape[0] == 1 else shown
    return np.rint(np.moveaxis(rgb, 0, -1) * 255.0).astype(np.uint8)


def figure(reference: torch.Tensor, device: torch.Tensor, title: str,
           value_range: Sequence[float] = (-1.0, 1.0), colormap: str = "inferno") -> Figure:
    """One ``[C, H, W]`` pair side by side: three images on one matplotlib axes, no pyplot state."""
    ref, dev = (t.detach().to("cpu", torch.float64).numpy() for t in (reference, device))
    with np.errstate(invalid="ignore"):  # inf - inf: equal non-finite values agree (0), others NaN
        delta = np.where((dev == ref) | (np.isnan(dev) & np.isnan(ref)), 0.0, np.abs(dev - ref))
    diff = delta.max(axis=0)
    finite = diff[np.isfinite(diff)]
    top = float(finite.max()) if finite.size else 0.0
    rows, cols = diff.shape
    step = 1.1 * cols  # from one panel's left edge to the next: a tenth of a panel between them
    height = min(8.0, max(2.5, 1.2 + 3.6 * rows / cols))  # panels ~3.6 in wide
    # fixed places, no layout engine: "constrained" layout doubled the time of a picture
    fig = Figure(figsize=(12, round(height, 2)), dpi=100)
    fig.suptitle(title, parse_math=False)
    ax = fig.add_axes((0.01, 0.02, 0.91, 0.98 - 0.75 / height), frame_on=False, xticks=[],
                      yticks=[], xlim=(0, 2 * step + cols), ylim=(rows, 0))  # 0.75 in for titles
    panels = (_display(ref, value_range), _display(dev, value_range),
              np.nan_to_num(diff, nan=top, posinf=top))
    titles = ("baseline (CPU)", "device", f"|device - baseline|, max {top:.3g}")
    for i, (panel, text) in enumerate(zip(panels, titles, strict=True)):
        shown = ax.imshow(panel, cmap=colormap, vmin=0.0, vmax=top or 1.0, interpolation="nearest",
                          extent=(step * i, step * i + cols, rows, 0))
        ax.annotate(text, (step * i + cols / 2, 0), xytext=(0, 6), ha="center",
                    textcoords="offset points", fontsize="large", parse_math=False)
    fig.colorbar(shown, cax=fig.add_axes((0.945, 0.1, 0.012, 0.7)))
    return fig


def side_by_side(reference: torch.Tensor, device: torch.Tensor, path: Path, title: str,
                 value_range: Sequence[float] = (-1.0, 1.0), colormap: str = "inferno") -> Path:
    """Draw one ``[C, H, W]`` pair (:func:`figure`) as a PNG at ``path``, atomically."""
    with atomic_path(path) as tmp:
        # zlib level 1: a third of the encoding time at 256 px and more, files ~3 % larger
        figure(reference, device, title, value_range, colormap).savefig(
            tmp, format="png", pil_kwargs={"compress_level": 1})
    return path


def per_frame_mse(reference: torch.Tensor, device: torch.Tensor, layout: str) -> list[float]:
    """Mean squared error of every frame of the first video (float64, 8 frames at a time)."""
    ref, dev = frames(reference, 0, layout), frames(device, 0, layout)
    values: list[float] = []
    for start in range(0, int(ref.shape[0]), 8):
        diff = dev[start:start + 8].double() - ref[start:start + 8].double()
        values.extend(float(v) for v in diff.square().flatten(1).mean(dim=1))
    return values


def choose_frames(spec: Sequence[Any], total: int, mse: Sequence[float] | None) -> list[int]:
    """Frame numbers from ``first / middle / last / worst`` words and integers (in range, once)."""
    chosen: list[int] = []
    for item in spec:
        if item in ("first", "middle", "last"):
            index = {"first": 0, "middle": total // 2, "last": total - 1}[item]
        elif item == "worst":
            index = int(np.nanargmax(np.nan_to_num(np.asarray(mse), nan=np.inf))) if mse else 0
        else:
            index = int(item) if int(item) >= 0 else total + int(item)
        if 0 <= index < total and index not in chosen:
            chosen.append(index)
    return chosen


def render_output(name: str, reference: torch.Tensor, device: torch.Tensor, directory: Path,
                  options: Mapping[str, Any]) -> list[Path]:
    """PNGs of an image batch or video output in ``directory``, whatever its name; else none."""
    value_range = list(options.get("value_range", (-1.0, 1.0)))
    colormap, layout = str(options.get("colormap", "inferno")), str(options.get("layout", "auto"))
    stem, shape = safe_name(name), tuple(reference.shape)
    if not reference.is_floating_point() or shape != tuple(device.shape):
        return []
    if reference.dim() == 4 and shape[1] in (1, 3):
        return [side_by_side(reference[i], device[i], directory / f"{stem}_{i}_compare.png",
                             f"{name} [image {i}]", value_range, colormap=colormap)
                for i in range(min(shape[0], int(options.get("max_images", 4))))]
    # a 5-D feature map (e.g. of a Conv3d layer) has no colour axis: it is no video
    if reference.dim() != 5 or (layout == "auto" and not {1, 3} & set(shape[1:3])):
        return []
    layout = resolve_layout(shape, layout)
    ref, dev = frames(reference, 0, layout), frames(device, 0, layout)
    spec = list(options.get("frames", ["first", "middle", "last", "worst"]))
    mse = per_frame_mse(reference, device, layout) if "worst" in spec else None
    return [side_by_side(ref[index], dev[index], directory / f"{stem}_frame{index:04d}_compare.png",
                         f"{name} [video 0, frame {index} of {len(ref)}]", value_range,
                         colormap=colormap)
            for index in choose_frames(spec, len(ref), mse)]
