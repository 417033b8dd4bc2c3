"""A side-by-side picture drawn as pixels: three panels, their titles, a colour bar with its scale.

matplotlib's figure machinery (axes, transforms, the Agg renderer) costs about 80 ms for a 64x64 picture,
most of a cached sweep job's compare stage; the picture is three images at one scale, so it is composed here
with numpy and PIL: each panel's image scaled by nearest neighbour to :data:`PANEL` pixels on its longer side
(every image pixel a block of screen pixels, none blended), framed; the text in matplotlib's DejaVu Sans
(PIL's own font where that file is missing); the colour bar's ticks the "nice" numbers matplotlib's
``MaxNLocator`` picks for a colour bar's axis. Which pixel holds what is given by :func:`layout`, so a
caller (or a test) can read the panels back out of the PNG.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from matplotlib import colormaps, get_data_path
from matplotlib.ticker import MaxNLocator
from PIL import Image, ImageDraw, ImageFont

PANEL = 300  # pixels on the longer side of each panel
MARGIN, GAP, BAR_WIDTH, TICK = 12, 20, 16, 4  # pixels
TITLE_SIZE, LABEL_SIZE = 14, 12  # font sizes, pixels (10 and 9 points at 100 dpi)
TITLE_ROW, LABEL_ROW = 28, 22  # heights of the picture's title row and the panels' title row
Box = tuple[int, int, int, int]  # left, top, right, bottom (right and bottom excluded)


@dataclass(frozen=True)
class Picture:
    """What one side-by-side picture shows: three ``[H, W, 3]`` uint8 images and their words, and the scale
    of the third (the heatmap): ``colormap`` from 0 (bottom of the bar) to ``top`` (its top)."""

    images: Sequence[np.ndarray]
    titles: Sequence[str]
    title: str
    colormap: str
    top: float


@dataclass(frozen=True)
class Layout:
    """Where the parts of a picture lie, in pixels: the canvas ``size`` (width, height), the boxes of the
    three panels' images and of the colour bar's gradient (frames drawn just outside them)."""

    size: tuple[int, int]
    panels: tuple[Box, Box, Box]
    bar: Box


@functools.lru_cache(maxsize=None)
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """matplotlib's DejaVu Sans at ``size`` pixels (loaded once per process), else PIL's default font."""
    try:
        return ImageFont.truetype(str(Path(get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"), size)
    except OSError:
        return ImageFont.load_default(size)


def panel_size(height: int, width: int) -> tuple[int, int]:
    """(width, height) of a panel showing an ``height`` x ``width`` image: :data:`PANEL` on the longer side."""
    if width >= height:
        return PANEL, max(1, round(PANEL * height / max(width, 1)))
    return max(1, round(PANEL * width / height)), PANEL


def ticks(top: float) -> list[float]:
    """The colour bar's tick values between 0 and ``top``, as matplotlib's colour bars choose them."""
    values = MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]).tick_values(0.0, top)
    return [float(v) for v in values if -1e-12 * top <= v <= top * (1 + 1e-12)]


def _labels(top: float) -> list[tuple[float, str]]:
    return [(value, f"{value:.2g}") for value in ticks(top)]


def layout(picture: Picture) -> Layout:
    """The boxes of ``picture``'s panels and colour bar, and the canvas size."""
    height, width = picture.images[0].shape[:2]
    panel_w, panel_h = panel_size(height, width)
    label_font = font(LABEL_SIZE)
    slots = [max(panel_w, int(label_font.getlength(text)) + 4) for text in picture.titles]
    top_y = MARGIN // 2 + TITLE_ROW + LABEL_ROW
    panels, x = [], MARGIN
    for slot in slots:
        left = x + (slot - panel_w) // 2
        panels.append((left, top_y, left + panel_w, top_y + panel_h))
        x += slot + GAP
    bar = (x, top_y, x + BAR_WIDTH, top_y + panel_h)
    label_w = max(int(label_font.getlength(text)) for _, text in _labels(picture.top))
    right = bar[2] + TICK + 3 + label_w + MARGIN
    right = max(right, int(font(TITLE_SIZE).getlength(picture.title)) + 2 * MARGIN)
    bottom = top_y + panel_h + MARGIN + LABEL_SIZE // 2
    return Layout(size=(right, bottom), panels=(panels[0], panels[1], panels[2]), bar=bar)


def _paste(canvas: Image.Image, image: np.ndarray, box: Box) -> None:
    shown = Image.fromarray(np.ascontiguousarray(image), "RGB").resize((box[2] - box[0], box[3] - box[1]),
                                                                        Image.Resampling.NEAREST)
    canvas.paste(shown, box[:2])


def _colour_bar(canvas: Image.Image, draw: ImageDraw.ImageDraw, picture: Picture, box: Box) -> None:
    height = box[3] - box[1]
    column = colormaps[picture.colormap](np.linspace(1.0, 0.0, height), bytes=True)[:, :3]
    canvas.paste(Image.fromarray(np.repeat(column[:, None, :], box[2] - box[0], axis=1), "RGB"), box[:2])
    draw.rectangle((box[0] - 1, box[1] - 1, box[2], box[3]), outline="black")
    for value, text in _labels(picture.top):
        y = box[3] - 1 - round(value / picture.top * (height - 1))
        draw.line((box[2], y, box[2] + TICK, y), fill="black")
        draw.text((box[2] + TICK + 3, y), text, fill="black", font=font(LABEL_SIZE), anchor="lm")


def draw(picture: Picture, path: Path) -> Path:
    """Write ``picture`` as a PNG at ``path`` (parent folders made) laid out as :func:`layout` says."""
    where = layout(picture)
    canvas = Image.new("RGB", where.size, "white")
    pen = ImageDraw.Draw(canvas)
    pen.text((where.size[0] // 2, MARGIN // 2 + TITLE_ROW // 2), picture.title, fill="black", font=font(TITLE_SIZE),
             anchor="mm")
    for image, text, box in zip(picture.images, picture.titles, where.panels, strict=True):
        _paste(canvas, image, box)
        pen.rectangle((box[0] - 1, box[1] - 1, box[2], box[3]), outline="black")
        pen.text(((box[0] + box[2]) // 2, box[1] - 6), text, fill="black", font=font(LABEL_SIZE), anchor="mb")
    _colour_bar(canvas, pen, picture, where.bar)
    path.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(path)
    return path
