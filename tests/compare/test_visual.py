"""Side-by-side PNGs of images and video frames, read back: panels, heatmap, names from data."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image
from safetensors.torch import save_file

from ascendbench.compare.__main__ import main
from ascendbench.compare.visual import (
    choose_frames,
    figure,
    per_frame_mse,
    render_output,
    side_by_side,
)

OPTIONS = {"max_images": 2, "frames": ["first", "last", "worst"], "layout": "auto",
           "value_range": [-1, 1]}
HEIGHT, WIDTH = 12, 20
BLOCK = (slice(3, 6), slice(4, 9))  # rows, columns where the device differs by 0.2
WORST = (7, 13)  # the planted largest difference


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    ref = torch.rand(3, HEIGHT, WIDTH, generator=torch.Generator().manual_seed(0)) * 1.6 - 0.8
    dev = ref.clone()
    dev[(slice(None), *BLOCK)] += 0.2
    dev[1, WORST[0], WORST[1]] += 0.5
    return ref, dev


def _panels(ref: torch.Tensor, dev: torch.Tensor, png: np.ndarray) -> list[np.ndarray]:
    """The screen colour at the centre of each tensor pixel, per panel (``[H, W, 3]`` each), at the
    boxes matplotlib gives the three images of the same figure."""
    fig = figure(ref, dev, "pair")
    FigureCanvasAgg(fig).draw()
    cells = []
    for image in fig.axes[0].images:  # the box on screen, whichever way the extent runs
        box = image.get_window_extent()
        left, bottom, width, height = box.xmin, box.ymin, abs(box.width), abs(box.height)
        top = png.shape[0] - bottom - height
        rows = (top + (np.arange(HEIGHT) + 0.5) * height / HEIGHT).astype(int)
        cols = (left + (np.arange(WIDTH) + 0.5) * width / WIDTH).astype(int)
        cells.append(png[rows][:, cols, :3])
    return cells


def _titles(ref: torch.Tensor, dev: torch.Tensor) -> list[str]:
    """The panels' titles, left to right."""
    return [text.get_text() for text in figure(ref, dev, "pair").axes[0].texts]


def test_a_valid_png_whose_panels_differ_where_the_tensors_differ(tmp_path):
    ref, dev = _pair()
    path = side_by_side(ref, dev, tmp_path / "pair.png", "pair")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        image.verify()
    png = np.asarray(Image.open(path).convert("RGB"))
    assert png.shape[:2] == (336, 1200), "12 in wide at 100 dpi, height from the images' aspect"
    baseline, device, heat = _panels(ref, dev, png)
    expected = ((ref.double() + 1) / 2 * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
    assert np.array_equal(baseline, expected), "the baseline panel shows the reference's colours"
    differs = np.zeros((HEIGHT, WIDTH), dtype=bool)
    differs[BLOCK] = differs[WORST] = True
    assert ((baseline != device).any(axis=-1) == differs).all(), "device differs only there"
    inferno = colormaps["inferno"]
    dark, bright = tuple(inferno(0.0, bytes=True)[:3]), tuple(inferno(1.0, bytes=True)[:3])
    assert (heat[~differs] == dark).all() and not (heat[differs] == dark).all(axis=-1).any()
    assert [tuple(c) for c in np.argwhere((heat == bright).all(axis=-1))] == [WORST]
    assert _titles(ref, dev) == ["baseline (CPU)", "device", "|device - baseline|, max 0.5"]


def test_grey_images_and_non_finite_differences(tmp_path):
    ref = torch.linspace(-1, 1, HEIGHT * WIDTH).reshape(1, HEIGHT, WIDTH)
    dev = ref.clone()
    dev[0, 3, 4] = float("nan")
    dev[0, 5, 6] += 0.25
    path = side_by_side(ref, dev, tmp_path / "grey.png", "grey")
    png = np.asarray(Image.open(path).convert("RGB"))
    baseline, _, heat = _panels(ref, dev, png)
    assert (baseline[..., 0] == baseline[..., 1]).all()
    assert (baseline[..., 1] == baseline[..., 2]).all()
    bright = tuple(colormaps["inferno"](1.0, bytes=True)[:3])
    assert tuple(heat[3, 4]) == bright, "NaN shown as the largest value"
    assert tuple(heat[5, 6]) == bright
    assert _titles(ref, dev)[2].endswith("max 0.25")


def test_one_png_per_image(tmp_path):
    ref = torch.rand(3, 3, 24, 32) * 2 - 1
    paths = render_output("image", ref, ref + 0.01, tmp_path, OPTIONS)
    assert [p.name for p in paths] == ["image_0_compare.png", "image_1_compare.png"]


def test_video_frames_include_the_worst_one(tmp_path):
    ref = torch.rand(1, 3, 6, 16, 16) * 2 - 1
    dev = ref.clone()
    dev[0, :, 2] += 0.5
    assert max(range(6), key=per_frame_mse(ref, dev, "BCTHW").__getitem__) == 2
    paths = render_output("video", ref, dev, tmp_path, OPTIONS)
    assert [p.name for p in paths] == ["video_frame0000_compare.png", "video_frame0005_compare.png",
                                       "video_frame0002_compare.png"]


def test_non_image_outputs_get_no_picture(tmp_path):
    ids = torch.zeros(2, 5, dtype=torch.long)
    assert render_output("tokens", ids, ids, tmp_path, OPTIONS) == []
    assert render_output("hidden", torch.zeros(2, 7), torch.zeros(2, 7), tmp_path, OPTIONS) == []
    activations = torch.zeros(1, 64, 2, 4, 4)  # 5-D, but no colour axis: no video
    assert render_output("conv", activations, activations, tmp_path, OPTIONS) == []


def test_choose_frames_accepts_words_and_numbers():
    assert choose_frames(["first", "middle", "last"], 9, None) == [0, 4, 8]
    assert choose_frames([3, -1, 100], 9, None) == [3, 8]
    assert choose_frames(["worst", "first"], 9, [0.0] * 8 + [1.0]) == [8, 0]


def test_a_tensor_name_from_data_never_writes_outside_the_output_dir(tmp_path):
    image = torch.rand(1, 3, 16, 16) * 2 - 1
    save_file({"../../x": image}, tmp_path / "ref.safetensors")
    save_file({"../../x": image + 0.01}, tmp_path / "cand.safetensors")
    out = tmp_path / "a" / "b" / "out"
    assert main([str(tmp_path / "ref.safetensors"), str(tmp_path / "cand.safetensors"),
                 "--out", str(out), "--pictures"]) in (0, 1)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.png"))
    assert len(written) == 1 and written[0].parent == out.relative_to(tmp_path), written
    assert written[0].name.startswith("x_") and written[0].name.endswith("_0_compare.png")
    assert render_output(".", image, image, out, OPTIONS)[0].parent == out
