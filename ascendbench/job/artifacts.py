"""Files a job writes beside its record: tensors as safetensors, images as PNG."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from PIL import Image

from ascendbench.compare.files import save_tensors  # noqa: F401  (the artifacts stage writes tensors with it)


def to_uint8_images(batch: torch.Tensor) -> np.ndarray:
    """``[B, 3, H, W]`` in [-1, 1] -> ``[B, H, W, 3]`` uint8 (clamped, rounded)."""
    pixels = ((batch.detach().to("cpu", torch.float32).clamp(-1, 1) + 1) * 127.5).round()
    return pixels.to(torch.uint8).permute(0, 2, 3, 1).numpy()


def save_images(directory: Path, stem: str, batch: torch.Tensor) -> list[Path]:
    """One PNG per image of a ``[B, 3, H, W]`` batch: ``<stem>_<i>.png``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, image in enumerate(to_uint8_images(batch)):
        path = directory / f"{stem}_{index}.png"
        Image.fromarray(image).save(path)
        paths.append(path)
    return paths


VIDEO_LAYOUTS = {"BCTHW": (0, 2, 3, 4, 1), "BTCHW": (0, 1, 3, 4, 2)}  # -> [B, T, H, W, C]
FRAME_NAMES = {"first": lambda n: 0, "middle": lambda n: (n - 1) // 2, "last": lambda n: n - 1}


def to_uint8_video(video: torch.Tensor, layout: str = "BCTHW",
                   value_range: tuple[float, float] = (-1.0, 1.0)) -> np.ndarray:
    """A 5-D video in ``layout`` with values in ``value_range`` -> ``[B, T, H, W, 3]`` uint8 (clamped, rounded)."""
    low, high = float(value_range[0]), float(value_range[1])
    frames = video.detach().to("cpu", torch.float32).permute(*VIDEO_LAYOUTS[layout])
    pixels = ((frames.clamp(low, high) - low) * (255.0 / (high - low))).round().to(torch.uint8)
    if pixels.shape[-1] == 1:
        pixels = pixels.expand(*pixels.shape[:-1], 3)
    return pixels.numpy()


def frame_indices(count: int, which) -> list[int]:
    """Frame indices from names (``first``, ``middle``, ``last``) and integers (negative from the end).

    >>> frame_indices(9, ["first", "middle", "last", -2, 40])
    [0, 4, 8, 7]
    """
    chosen: list[int] = []
    for item in which:
        if isinstance(item, str):
            index = FRAME_NAMES[item](count)
        else:
            index = int(item) % count if -count <= int(item) < count else None
        if index is not None and index not in chosen:
            chosen.append(index)
    return chosen


@dataclass(frozen=True)
class VideoFormat:
    """How a video tensor is read and written.

    Attributes:
        layout: ``BCTHW`` or ``BTCHW``.
        value_range: the values that map to black and white.
        frames: frames saved as PNG (names ``first``/``middle``/``last`` or indices).
        fps: frame rate of the mp4.
        mp4: also write each video as mp4.
    """

    layout: str = "BCTHW"
    value_range: tuple[float, float] = (-1.0, 1.0)
    frames: tuple[Any, ...] = ("first", "middle", "last")
    fps: int = 24
    mp4: bool = True

    @classmethod
    def of(cls, task: Any) -> VideoFormat:
        """The format a task declares (:class:`ascendbench.tasks.Task` video attributes)."""
        return cls(task.video_layout, tuple(task.value_range), tuple(task.video_frames), int(task.video_fps))


def save_video(directory: Path, stem: str, video: torch.Tensor,
               fmt: VideoFormat = VideoFormat()) -> dict[str, list[Path]]:
    """Chosen frames as PNG (``<stem>_<b>_frame_<t>.png``) and each video as mp4 (``<stem>_<b>.mp4``).

    The mp4 is written by ``diffusers.utils.export_to_video`` (imageio + ffmpeg).
    """
    from diffusers.utils import export_to_video

    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[Path]] = {"png": [], "mp4": []}
    for index, clip in enumerate(to_uint8_video(video, fmt.layout, fmt.value_range)):
        images = [Image.fromarray(frame) for frame in clip]
        for t in frame_indices(len(images), fmt.frames):
            path = directory / f"{stem}_{index}_frame_{t:04d}.png"
            images[t].save(path)
            out["png"].append(path)
        if fmt.mp4:
            path = directory / f"{stem}_{index}.mp4"
            export_to_video(images, str(path), fps=int(fmt.fps))
            out["mp4"].append(path)
    return out


def video_artifacts(job_dir: Path, side: str, outputs: Mapping[str, torch.Tensor], task: Any) -> dict[str, list[str]]:
    """PNG frames and mp4 of every 5-D floating output of a video task, paths relative to ``job_dir``.

    The task says how to read its videos (:meth:`VideoFormat.of`: layout, value range, frames, fps).
    """
    out: dict[str, list[str]] = {}
    for name, video in outputs.items():
        if video.dim() != 5 or not video.is_floating_point():
            continue
        saved = save_video(job_dir / "videos", f"{name}_{side}", video, VideoFormat.of(task))
        out[f"{name}_{side}_png"] = [str(p.relative_to(job_dir)) for p in saved["png"]]
        out[f"{name}_{side}_mp4"] = [str(p.relative_to(job_dir)) for p in saved["mp4"]]
    return out
