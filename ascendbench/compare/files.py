"""Saved outputs read back as named tensors: safetensors, npy, pt, images, videos, frame folders."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Callable, Mapping

import imageio.v3 as iio
import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file, save_file

from ascendbench.fileio import atomic_path

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
VIDEO_SUFFIXES = (".mp4", ".webm", ".gif", ".avi", ".mov")


class UnusableInput(Exception):
    """A file that cannot serve as a compared output (missing, unreadable, unknown, mismatched)."""


def safe_name(name: str) -> str:
    """``name`` as one file name: itself when plain, else safe characters and a digest."""
    safe = re.sub(r"[^A-Za-z0-9_.#-]+", "_", name).strip("._") or "output"
    if safe == name and len(name) <= 80:
        return name
    return f"{safe[:60]}_{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def _video(frames: list[np.ndarray]) -> torch.Tensor:
    """uint8 ``[H, W, C]`` (or grey ``[H, W]``) frames -> ``[1, 3, T, H, W]`` in ``[-1, 1]``."""
    rgb = [f[..., :3] if f.ndim == 3 else np.repeat(f[..., None], 3, axis=-1) for f in frames]
    pixels = torch.from_numpy(np.stack(rgb).astype(np.float32) / 127.5 - 1.0)
    return pixels.permute(3, 0, 1, 2).unsqueeze(0)


def _image_array(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def _read_frames(path: Path) -> dict[str, torch.Tensor]:
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        tensors = sorted(path.glob("*.safetensors"))
        if len(tensors) == 1:
            return dict(load_file(str(tensors[0])))
        raise UnusableInput(f"{path} holds no image frames ({', '.join(IMAGE_SUFFIXES)}) and not "
                            "exactly one .safetensors file")
    frames = [_image_array(file) for file in files]
    if len({f.shape for f in frames}) > 1:
        sizes = sorted({f.shape for f in frames})
        raise UnusableInput(f"the frames in {path} differ in size: {sizes}")
    return {path.name: _video(frames)}


def _read_pt(path: Path) -> dict[str, torch.Tensor]:
    loaded = torch.load(path, map_location="cpu", weights_only=True)
    if torch.is_tensor(loaded):
        return {path.stem: loaded}
    if isinstance(loaded, dict) and loaded and all(torch.is_tensor(v) for v in loaded.values()):
        return {str(k): v for k, v in loaded.items()}
    raise UnusableInput(f"{path} holds {type(loaded).__name__}, not a tensor or a mapping of names "
                        "to tensors")


READERS: dict[str, Callable[[Path], dict[str, torch.Tensor]]] = {
    ".safetensors": lambda path: dict(load_file(str(path))),
    ".npy": lambda path: {path.stem: torch.from_numpy(np.load(path, allow_pickle=False))},
    ".pt": _read_pt, ".pth": _read_pt,
    **dict.fromkeys(IMAGE_SUFFIXES,
                    lambda path: {path.stem: _video([_image_array(path)])[:, :, 0]}),
    **dict.fromkeys(VIDEO_SUFFIXES,
                    lambda path: {path.stem: _video([*iio.imread(path, index=None)])}),
}


def read_outputs(path: str | Path) -> dict[str, torch.Tensor]:
    """The named tensors saved at ``path``; UnusableInput if missing, unknown, unreadable, empty."""
    path = Path(path).expanduser()
    if not path.exists():
        raise UnusableInput(f"{path} does not exist")
    reader = _read_frames if path.is_dir() else READERS.get(path.suffix.lower())
    if reader is None:
        raise UnusableInput(f"{path}: unknown format {path.suffix!r}; allowed: "
                            f"{', '.join(sorted(READERS))} or a directory of frames")
    try:
        tensors = reader(path)
    except UnusableInput:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure is an unusable input
        raise UnusableInput(f"{path} cannot be read as {path.suffix or 'a directory'}: "
                            f"{type(exc).__name__}: {exc}") from exc
    if not tensors:
        raise UnusableInput(f"{path} holds no tensors")
    return tensors


Tensors = dict[str, torch.Tensor]


def pair_outputs(reference: Tensors, candidate: Tensors) -> tuple[Tensors, Tensors]:
    """The two sides under common names; UnusableInput where names or shapes differ, or empty."""
    if set(reference) != set(candidate):
        if len(reference) != 1 or len(candidate) != 1:
            raise UnusableInput(f"the two sides hold different tensors: reference "
                                f"{sorted(reference)}, candidate {sorted(candidate)}")
        candidate = {next(iter(reference)): next(iter(candidate.values()))}
    for name in reference:
        ref, cand = list(reference[name].shape), list(candidate[name].shape)
        if reference[name].numel() == 0 or candidate[name].numel() == 0:
            raise UnusableInput(f"{name}: no elements (shape reference {ref}, candidate {cand}); "
                                "an empty tensor proves nothing, so it is not compared: pass the "
                                "outputs of a run that produced values")
        if ref != cand:
            raise UnusableInput(f"{name}: shapes differ, reference {ref} vs candidate {cand}")
        eight = sorted({str(t.dtype) for t in (reference[name], candidate[name])
                        if t.is_floating_point() and t.element_size() == 1})
        if eight:  # no dtype config has rules for them; the float32 ones would judge them
            raise UnusableInput(f"{name} is {', '.join(eight)}, a float8 dtype without verdict "
                                "rules: cast both outputs to bfloat16 or float32 first")
    return reference, candidate


def save_tensors(path: Path, tensors: Mapping[str, torch.Tensor],
                 metadata: dict[str, str] | None = None) -> Path:
    """Save tensors (on the CPU, contiguous) in one safetensors file, atomically, umask's mode."""
    with atomic_path(path) as tmp:
        plain = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
        save_file(plain, str(tmp), metadata=metadata)
    return path
