"""Side-by-side PNGs of images and video frames."""

from __future__ import annotations

import torch
from PIL import Image

from ascendbench.compare.visual import choose_frames, per_frame_mse, render_output

OPTIONS = {"max_images": 2, "frames": ["first", "last", "worst"], "layout": "auto", "value_range": [-1, 1]}


def test_one_png_per_image_with_three_panels(tmp_path):
    ref = torch.rand(3, 3, 24, 32) * 2 - 1
    paths = render_output("image", ref, ref + 0.01, tmp_path, OPTIONS)
    assert [p.name for p in paths] == ["image_0_compare.png", "image_1_compare.png"]
    width, height = Image.open(paths[0]).size
    assert width > 2.5 * height, "baseline | device | heatmap side by side"


def test_video_frames_include_the_worst_one(tmp_path):
    ref = torch.rand(1, 3, 6, 16, 16) * 2 - 1
    dev = ref.clone()
    dev[0, :, 2] += 0.5
    assert max(range(6), key=per_frame_mse(ref, dev, "BCTHW").__getitem__) == 2
    paths = render_output("video", ref, dev, tmp_path, OPTIONS)
    assert [p.name for p in paths] == ["video_frame0000_compare.png", "video_frame0005_compare.png",
                                       "video_frame0002_compare.png"]


def test_non_image_outputs_get_no_picture(tmp_path):
    assert render_output("tokens", torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 5, dtype=torch.long),
                         tmp_path, OPTIONS) == []
    assert render_output("hidden", torch.zeros(2, 7), torch.zeros(2, 7), tmp_path, OPTIONS) == []


def test_choose_frames_accepts_words_and_numbers():
    assert choose_frames(["first", "middle", "last"], 9, None) == [0, 4, 8]
    assert choose_frames([3, -1, 100], 9, None) == [3, 8]
