"""Saved outputs read back as named tensors, whatever wrote them: ascendbench, msprobe dumps, seed scripts.

Formats (by suffix, or a directory):

* ``.safetensors`` -- every tensor, by name;
* ``.npy`` -- one array (``allow_pickle=False``), named by the file stem;
* ``.pt`` / ``.pth`` -- ``torch.load(weights_only=True)``: a tensor, or a mapping of names to tensors
  (no pickled code is ever run);
* ``.png`` / ``.jpg`` / ``.jpeg`` / ``.bmp`` -- one image as ``[1, C, H, W]`` float32 in ``[-1, 1]``;
* ``.mp4`` / ``.webm`` / ``.gif`` / ``.avi`` / ``.mov`` -- one video as ``[1, C, T, H, W]`` (BCTHW) in ``[-1, 1]``;
* a directory of image files -- its frames, sorted by name, as one video (a directory holding a single
  ``.safetensors`` file reads that file).

Anything else, or a file that cannot be read, raises :class:`UnusableInput` with the path and the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import torch
from safetensors.torch import save_file

from ascendbench.fileio import atomic_path

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
VIDEO_SUFFIXES = (".mp4", ".webm", ".gif", ".avi", ".mov")


class UnusableInput(Exception):
    """A file that cannot serve as a compared output (missing, unreadable, unknown format, mismatched)."""


def _pixels(frames: np.ndarray) -> torch.Tensor:
    """uint8 ``[..., H, W, C]`` -> float32 in [-1, 1] with channels before height and width."""
    array = frames.astype(np.float32) / 127.5 - 1.0
    if array.ndim == frames.ndim and array.ndim >= 3 and array.shape[-1] in (1, 3, 4):
        array = array[..., :3] if array.shape[-1] == 4 else array
    return torch.from_numpy(np.ascontiguousarray(array))


def _read_image(path: Path) -> dict[str, torch.Tensor]:
    from PIL import Image

    with Image.open(path) as image:
        array = np.asarray(image.convert("RGB"))
    return {path.stem: _pixels(array).permute(2, 0, 1).unsqueeze(0)}


def _video_tensor(frames: list[np.ndarray]) -> torch.Tensor:
    stacked = _pixels(np.stack([np.asarray(f)[..., :3] if np.asarray(f).ndim == 3 else
                                np.repeat(np.asarray(f)[..., None], 3, axis=-1) for f in frames]))
    return stacked.permute(3, 0, 1, 2).unsqueeze(0)  # [T, H, W, C] -> [1, C, T, H, W]


def _read_video(path: Path) -> dict[str, torch.Tensor]:
    import imageio.v3 as iio

    return {path.stem: _video_tensor(list(iio.imread(path, index=None)))}


def _read_frames(path: Path) -> dict[str, torch.Tensor]:
    from PIL import Image

    files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        tensors = sorted(path.glob("*.safetensors"))
        if len(tensors) == 1:
            return _read_safetensors(tensors[0])
        raise UnusableInput(f"{path} holds no image frames ({', '.join(IMAGE_SUFFIXES)}) and not exactly one "
                            ".safetensors file")
    frames = []
    for file in files:
        with Image.open(file) as image:
            frames.append(np.asarray(image.convert("RGB")))
    if len({f.shape for f in frames}) > 1:
        raise UnusableInput(f"the frames in {path} differ in size: {sorted({f.shape for f in frames})}")
    return {path.name: _video_tensor(frames)}


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return dict(load_file(str(path)))


def _read_npy(path: Path) -> dict[str, torch.Tensor]:
    return {path.stem: torch.from_numpy(np.load(path, allow_pickle=False))}


def _read_pt(path: Path) -> dict[str, torch.Tensor]:
    loaded = torch.load(path, map_location="cpu", weights_only=True)
    if torch.is_tensor(loaded):
        return {path.stem: loaded}
    if isinstance(loaded, dict) and loaded and all(torch.is_tensor(v) for v in loaded.values()):
        return {str(k): v for k, v in loaded.items()}
    raise UnusableInput(f"{path} holds {type(loaded).__name__}, not a tensor or a mapping of names to tensors")


READERS: dict[str, Callable[[Path], dict[str, torch.Tensor]]] = {
    ".safetensors": _read_safetensors, ".npy": _read_npy, ".pt": _read_pt, ".pth": _read_pt,
    **{s: _read_image for s in IMAGE_SUFFIXES}, **{s: _read_video for s in VIDEO_SUFFIXES},
}


def read_outputs(path: str | Path) -> dict[str, torch.Tensor]:
    """The named tensors saved at ``path`` (see the module docstring for the formats)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise UnusableInput(f"{path} does not exist")
    reader = _read_frames if path.is_dir() else READERS.get(path.suffix.lower())
    if reader is None:
        raise UnusableInput(f"{path}: unknown format {path.suffix!r}; allowed: {', '.join(sorted(READERS))} "
                            "or a directory of frames")
    try:
        tensors = reader(path)
    except UnusableInput:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure is an unusable input with its cause
        raise UnusableInput(f"{path} cannot be read as {path.suffix or 'a directory'}: "
                            f"{type(exc).__name__}: {exc}") from exc
    if not tensors:
        raise UnusableInput(f"{path} holds no tensors")
    return tensors


def pair_outputs(reference: dict[str, torch.Tensor],
                 candidate: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The two sides under common names: equal name sets, or one tensor on each side (named like the reference).

    Raises:
        UnusableInput: the names differ, a pair differs in shape, or a tensor has no elements.
    """
    if set(reference) != set(candidate):
        if len(reference) == 1 and len(candidate) == 1:
            candidate = {next(iter(reference)): next(iter(candidate.values()))}
        else:
            raise UnusableInput(f"the two sides hold different tensors: reference {sorted(reference)}, "
                                f"candidate {sorted(candidate)}")
    for name in reference:
        if reference[name].numel() == 0 or candidate[name].numel() == 0:
            raise UnusableInput(f"{name}: no elements (shape reference {list(reference[name].shape)}, candidate "
                                f"{list(candidate[name].shape)}); an empty tensor proves nothing, so it is not "
                                "compared: pass the outputs of a run that produced values")
        if tuple(reference[name].shape) != tuple(candidate[name].shape):
            raise UnusableInput(f"{name}: shapes differ, reference {list(reference[name].shape)} vs candidate "
                                f"{list(candidate[name].shape)}")
    return reference, candidate


def save_tensors(path: Path, tensors: Mapping[str, torch.Tensor]) -> Path:
    """Save tensors (moved to CPU, contiguous, dtype kept) into one safetensors file, atomically and with the
    umask's mode (safetensors alone writes 0600); a failed write names the file (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        save_file({k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}, str(tmp))
    return path
