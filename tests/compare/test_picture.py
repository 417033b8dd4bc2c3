"""The side-by-side PNG read back: its panels' pixels are the tensors, its heatmap and colour bar their scale."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib import colormaps
from PIL import Image

from ascendbench.compare.picture import layout, ticks
from ascendbench.compare.visual import compose, side_by_side

HEIGHT, WIDTH = 12, 20
WORST = (7, 13)  # the planted largest difference (row, column)


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    ref = torch.rand(3, HEIGHT, WIDTH) * 2 - 1
    dev = ref + 0.01 * torch.rand(3, HEIGHT, WIDTH)
    dev[1, WORST[0], WORST[1]] += 0.5
    dev[2, 0, 0] = ref[2, 0, 0]  # the pixel (0, 0) differs only in channels 0 and 1
    return ref, dev


def _cells(png: np.ndarray, box: tuple[int, int, int, int], shape: tuple[int, int]) -> np.ndarray:
    """The screen colour at the centre of each image pixel's block inside ``box``: ``[H, W, 3]``."""
    left, top, right, bottom = box
    rows = top + ((np.arange(shape[0]) + 0.5) * (bottom - top) / shape[0]).astype(int)
    cols = left + ((np.arange(shape[1]) + 0.5) * (right - left) / shape[1]).astype(int)
    return png[rows][:, cols, :3]


def _expected_colours(tensor: torch.Tensor) -> np.ndarray:
    shown = ((tensor.double().clamp(-1, 1) + 1) / 2 * 255).round().to(torch.uint8)
    return shown.permute(1, 2, 0).numpy()


def test_panels_hold_the_tensors_and_the_heatmap_peaks_where_the_difference_does(tmp_path):
    ref, dev = _pair()
    path = side_by_side(ref, dev, tmp_path / "pair.png", "pair")
    png = np.asarray(Image.open(path).convert("RGB"))
    where = layout(compose(ref, dev, "pair"))
    assert png.shape[1::-1] == where.size
    baseline, device, heat = (_cells(png, box, (HEIGHT, WIDTH)) for box in where.panels)
    assert np.array_equal(baseline, _expected_colours(ref))
    assert np.array_equal(device, _expected_colours(dev))
    assert not np.array_equal(baseline, device)  # the reading tells the two tensors apart
    inferno = colormaps["inferno"]
    brightest = inferno(1.0, bytes=True)[:3]
    diff = (dev.double() - ref.double()).abs().amax(dim=0)
    assert tuple(heat[WORST]) == tuple(brightest)
    assert [tuple(map(int, cell)) for cell in np.argwhere((heat == brightest).all(axis=-1))] == [WORST]
    expected_heat = inferno((diff / diff.max()).numpy(), bytes=True)[..., :3]
    assert np.array_equal(heat, expected_heat)
    left, top, right, bottom = where.bar
    assert tuple(png[top, (left + right) // 2]) == tuple(brightest)
    assert tuple(png[bottom - 1, (left + right) // 2]) == tuple(inferno(0.0, bytes=True)[:3])


def test_titles_and_scale_are_drawn(tmp_path):
    ref, dev = _pair()
    png = np.asarray(Image.open(side_by_side(ref, dev, tmp_path / "pair.png", "pair")).convert("L"))
    where = layout(compose(ref, dev, "pair"))
    title_row = png[: where.panels[0][1] - 24]
    assert (title_row < 100).any(), "the picture's title"
    for left, top, right, _ in where.panels:
        assert (png[top - 20: top - 2, left:right] < 100).any(), "each panel's title"
    bar_right = where.bar[2]
    labels = png[where.bar[1] - 8: where.bar[3] + 8, bar_right + 2:]
    assert (labels < 100).sum() > 20 * len(ticks(0.5)), "tick labels beside the colour bar"
    assert compose(ref, dev, "pair").titles[2].endswith(f"max {float((dev - ref).abs().max()):.3g}")


def test_grey_images_and_non_finite_differences(tmp_path):
    ref = torch.linspace(-1, 1, HEIGHT * WIDTH).reshape(1, HEIGHT, WIDTH)
    dev = ref.clone()
    dev[0, 3, 4] = float("nan")
    dev[0, 5, 6] += 0.25
    path = side_by_side(ref, dev, tmp_path / "grey.png", "grey")
    png = np.asarray(Image.open(path).convert("RGB"))
    picture = compose(ref, dev, "grey")
    baseline, _, heat = (_cells(png, box, (HEIGHT, WIDTH)) for box in layout(picture).panels)
    assert (baseline[..., 0] == baseline[..., 1]).all() and (baseline[..., 1] == baseline[..., 2]).all()
    assert np.array_equal(baseline[..., 0], _expected_colours(ref)[..., 0])
    brightest = tuple(colormaps["inferno"](1.0, bytes=True)[:3])
    assert tuple(heat[3, 4]) == brightest and tuple(heat[5, 6]) == brightest, "NaN shown as the largest value"
    assert picture.titles[2].endswith("max 0.25")


def test_ticks_are_nice_numbers_within_the_scale():
    assert ticks(1.0)[0] == 0.0 and ticks(1.0)[-1] == 1.0
    values = ticks(3.73e-6)
    assert values[0] == 0.0 and values[-1] <= 3.73e-6 and len(values) >= 4
    steps = np.diff(values)
    assert np.allclose(steps, steps[0])
