"""LPIPS through ``lpips``, strictly offline: no backbone in ``$TORCH_HOME``, no LPIPS (skipped)."""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from functools import lru_cache
from pathlib import Path

import torch

BACKBONES = {"alex": "AlexNet_Weights", "vgg": "VGG16_Weights", "squeeze": "SqueezeNet1_1_Weights"}
MIN_SIDE = {"alex": 31}  # smallest image side accepted, measured with lpips 0.1.4 (30 px fails)
_HASH_IN_NAME = re.compile(r"-([a-f0-9]+)\.")


def _url(net: str) -> str:
    import torchvision.models  # deferred: torchvision takes seconds to import, LPIPS alone needs it

    return getattr(torchvision.models, BACKBONES[net]).IMAGENET1K_V1.url


def backbone_file(net: str) -> Path:
    """Where torchvision looks for the backbone's ImageNet weights."""
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(_url(net))


@lru_cache(maxsize=8)
def _sha256_matches_name(path: Path, size: int, mtime_ns: int) -> bool:
    """Whether the file's SHA256 starts with the hex digits in its name (cached per size, time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 24):
            digest.update(block)
    match = _HASH_IN_NAME.search(path.name)
    return bool(match) and digest.hexdigest().startswith(match.group(1))


def backbone_problem(net: str, version: str, verify_hash: bool = True) -> str | None:
    """Why LPIPS cannot be computed offline right now, or ``None`` when it can (files only)."""
    import lpips  # deferred: lpips imports torchvision (seconds), LPIPS alone needs it

    if net not in BACKBONES:
        return f"LPIPS net={net!r} is not supported; use one of {', '.join(BACKBONES)}"
    linear = Path(lpips.__file__).parent / "weights" / f"v{version}" / f"{net}.pth"
    if not linear.is_file():
        return (f"the lpips package has no calibration weights {linear}; reinstall lpips "
                "(pip install lpips)")
    path = backbone_file(net)
    if not path.is_file():
        return (f"the torchvision ImageNet weights of the LPIPS backbone are not available "
                f"offline: put {path.name} in $TORCH_HOME/hub/checkpoints (here: {path}); it is "
                f"downloadable from {_url(net)}. LPIPS is never computed with a random backbone")
    stat = path.stat()
    if verify_hash and not _sha256_matches_name(path, stat.st_size, stat.st_mtime_ns):
        return (f"{path} does not match the SHA256 prefix in its name, so it is not torchvision's "
                f"pretrained backbone; replace it with the file from {_url(net)}")
    return None


@lru_cache(maxsize=4)
def load_lpips(net: str, version: str, hub_dir: str) -> torch.nn.Module:
    """The LPIPS network in eval mode (cached per ``hub_dir``) once backbone_problem is None."""
    import lpips  # deferred: lpips imports torchvision (seconds), LPIPS alone needs it

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torchvision's 'pretrained is deprecated'
        model = lpips.LPIPS(pretrained=True, net=net, version=version, verbose=False)
    return model.eval()


def lpips_per_image(model: torch.nn.Module, reference: torch.Tensor, device: torch.Tensor,
                    batch: int = 2) -> list[float]:
    """LPIPS per image pair in ``[-1, 1]``, ``batch`` at a time (activations dominate memory)."""
    if reference.shape[1] == 1:
        reference, device = reference.expand(-1, 3, -1, -1), device.expand(-1, 3, -1, -1)
    values: list[float] = []
    with torch.no_grad():
        for start in range(0, int(reference.shape[0]), batch):
            pair = reference[start:start + batch], device[start:start + batch]
            values.extend(float(v) for v in model(pair[0].float(), pair[1].float()).flatten())
    return values
