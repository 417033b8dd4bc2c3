"""The environment a job ran in: interpreter, libraries, host."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import socket
import sys
from typing import Any

import torch

import ascendbench

LIBRARIES = ("torch", "torch_npu", "diffusers", "transformers", "safetensors", "hydra-core",
             "numpy", "lpips", "scikit-image", "huggingface_hub")


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """Installed versions by distribution name (``None`` when not installed); nothing is imported."""
    versions = {}
    for name in names:
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return versions


def environment() -> dict[str, Any]:
    """Host, interpreter and library facts for the record."""
    return {
        "ascendbench": ascendbench.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_cuda": torch.version.cuda,
        "torch_cann": getattr(torch.version, "cann", None),
        "libraries": library_versions(),
        "hf_endpoint": os.environ.get("HF_ENDPOINT"),
        "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE"),
    }
