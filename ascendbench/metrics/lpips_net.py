"""LPIPS (Zhang et al., 2018) through the ``lpips`` package, strictly offline.

``lpips.LPIPS(net="alex", version="0.1")`` needs two sets of weights: its linear calibration layers,
shipped inside the ``lpips`` package, and the torchvision ImageNet backbone, which torchvision reads from
``$TORCH_HOME/hub/checkpoints/<file>`` or else downloads. ascendbench never lets it download and never
builds the network without its pretrained backbone: :func:`backbone_problem` looks for the file first
(and by default checks its SHA256 against the prefix torchvision puts in the file name), and when
anything is missing the metric is recorded as skipped with that reason.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import warnings
from functools import lru_cache
from pathlib import Path

import torch

# net -> (torchvision weights enum, smallest image side the network accepts; None: not measured).
# AlexNet: 31 px measured with lpips 0.1.4 (30 px fails in its fifth slice).
BACKBONES: dict[str, tuple[str, int | None]] = {
    "alex": ("AlexNet_Weights", 31),
    "vgg": ("VGG16_Weights", None),
    "squeeze": ("SqueezeNet1_1_Weights", None),
}
_HASH_IN_NAME = re.compile(r"-([a-f0-9]+)\.")
_VERIFIED: dict[tuple[str, int, int], bool] = {}


def backbone_file(net: str) -> Path:
    """Where torchvision looks for the backbone's ImageNet weights (``torch.hub.get_dir()/checkpoints``)."""
    enum_name, _ = BACKBONES[net]
    weights = getattr(importlib.import_module("torchvision.models"), enum_name).IMAGENET1K_V1
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(weights.url)


def linear_weights_file(net: str, version: str) -> Path:
    """The calibration layers shipped inside the ``lpips`` package."""
    import lpips

    return Path(lpips.__file__).parent / "weights" / f"v{version}" / f"{net}.pth"


def _sha256_matches_name(path: Path) -> bool:
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        match = _HASH_IN_NAME.search(path.name)
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while block := handle.read(1 << 24):
                digest.update(block)
        _VERIFIED[key] = bool(match) and digest.hexdigest().startswith(match.group(1))
    return _VERIFIED[key]


def backbone_problem(net: str, version: str, verify_hash: bool = True) -> str | None:
    """Why LPIPS cannot be computed offline right now, or ``None`` when it can.

    Nothing is downloaded: this only looks at files.
    """
    if net not in BACKBONES:
        return f"LPIPS net={net!r} is not supported; use one of {', '.join(BACKBONES)}"
    linear = linear_weights_file(net, version)
    if not linear.is_file():
        return f"the lpips package has no calibration weights {linear}; reinstall lpips (pip install lpips)"
    path = backbone_file(net)
    if not path.is_file():
        return (f"the torchvision ImageNet weights of the LPIPS backbone are not available offline: "
                f"put {path.name} in $TORCH_HOME/hub/checkpoints (here: {path}); it is downloadable from "
                f"{_url(net)}. LPIPS is never computed with a random backbone")
    if verify_hash and not _sha256_matches_name(path):
        return (f"{path} does not match the SHA256 prefix in its name, so it is not torchvision's "
                f"pretrained backbone; replace it with the file from {_url(net)}")
    return None


def _url(net: str) -> str:
    enum_name, _ = BACKBONES[net]
    return getattr(importlib.import_module("torchvision.models"), enum_name).IMAGENET1K_V1.url


def min_side(net: str) -> int | None:
    """Smallest image side the backbone accepts (None where not measured)."""
    return BACKBONES.get(net, ("", None))[1]


@lru_cache(maxsize=4)
def load_lpips(net: str, version: str, hub_dir: str) -> torch.nn.Module:
    """The LPIPS network in eval mode on CPU; call only after :func:`backbone_problem` returned None.

    ``hub_dir`` is part of the cache key so that a changed ``$TORCH_HOME`` loads again.
    """
    import lpips

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torchvision's 'pretrained is deprecated'
        model = lpips.LPIPS(pretrained=True, net=net, version=version, verbose=False)
    return model.eval()


def lpips_per_image(model: torch.nn.Module, reference: torch.Tensor, device: torch.Tensor,
                    batch: int = 2) -> list[float]:
    """LPIPS distance of each image pair of two ``[N, C, H, W]`` batches already in ``[-1, 1]``.

    Grey images (one channel) are repeated to three channels; ``batch`` pairs go through the network
    at a time (its activations dominate the memory).
    """
    if reference.shape[1] == 1:
        reference, device = reference.expand(-1, 3, -1, -1), device.expand(-1, 3, -1, -1)
    values: list[float] = []
    with torch.no_grad():
        for start in range(0, int(reference.shape[0]), max(1, int(batch))):
            stop = start + max(1, int(batch))
            distances = model(reference[start:stop].to(torch.float32), device[start:stop].to(torch.float32))
            values.extend(float(v) for v in distances.flatten())
    return values
