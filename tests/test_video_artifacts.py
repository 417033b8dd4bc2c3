"""Video artifacts: chosen frames as PNG and each video as mp4 (diffusers' export_to_video)."""

from __future__ import annotations

from types import SimpleNamespace

import imageio.v3 as iio
import numpy as np
import torch
from PIL import Image

from ascendbench.job.stages.artifacts import (
    frame_indices,
    save_video,
    to_uint8_video,
    video_artifacts,
)
from ascendbench.tasks.vae_decode import VideoDecodeTask


def test_layouts_and_ranges_map_to_the_same_pixels():
    video = torch.rand(1, 3, 5, 8, 16) * 2 - 1  # BCTHW in [-1, 1]
    a = to_uint8_video(video, "BCTHW", (-1.0, 1.0))
    b = to_uint8_video((video.permute(0, 2, 1, 3, 4) + 1) / 2, "BTCHW", (0.0, 1.0))
    assert a.shape == (1, 5, 8, 16, 3) and a.dtype == np.uint8
    assert np.abs(a.astype(int) - b.astype(int)).max() <= 1
    assert to_uint8_video(torch.full((1, 1, 2, 4, 4),
                                     3.0)).max() == 255, "clamped; grey becomes RGB"


def test_frame_choice():
    assert frame_indices(161, ["first", "middle", "last"]) == [0, 80, 160]
    assert frame_indices(1, ["first", "last", 5]) == [0]


def test_png_frames_and_a_playable_mp4(tmp_path):
    video = torch.linspace(-1, 1, 9).reshape(1, 1, 9, 1, 1).expand(2, 3, 9, 32, 32)
    video_format = SimpleNamespace(video_layout="BCTHW", value_range=(-1.0, 1.0),
                                   video_frames=("first", "last"), video_fps=8)  # a task's
    saved = save_video(tmp_path, "video_device", video, video_format)
    assert [p.name for p in saved["png"]] == ["video_device_0_frame_0000.png",
                                              "video_device_0_frame_0008.png",
                                              "video_device_1_frame_0000.png",
                                              "video_device_1_frame_0008.png"]
    assert np.asarray(Image.open(saved["png"][1])).min() == 255
    frames = iio.imread(saved["mp4"][0], index=None)
    assert frames.shape[0] == 9 and frames.shape[1:3] == (32, 32)
    assert frames[0].mean() < 30
    assert frames[-1].mean() > 225, "the brightness ramp survives encoding"


def test_video_artifacts_skip_what_is_not_a_video(tmp_path):
    class Clip(VideoDecodeTask):
        video_layout, value_range, video_frames = "BTCHW", (-1.0, 1.0), ["middle"]

    outputs = {"video": torch.zeros(1, 3, 3, 16, 16), "audio": torch.zeros(1, 2, 50)}
    out = video_artifacts(tmp_path, "reference", outputs, Clip(4, 2, 2))
    assert out == {"video_reference_png": ["videos/video_reference_0_frame_0001.png"],
                   "video_reference_mp4": ["videos/video_reference_0.mp4"]}
