"""Files a job writes beside its record: tensors as safetensors, images as PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file


def save_tensors(path: Path, tensors: Mapping[str, torch.Tensor]) -> Path:
    """Save tensors (moved to CPU, contiguous, dtype kept) into one safetensors file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}, str(path))
    return path


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
