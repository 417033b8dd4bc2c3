"""Shared fixtures: tiny offline models saved like real checkpoints, config composition, CLI runs.

Nothing here touches the network: every model is built in code, seeded, and written with
``save_pretrained`` / safetensors into a temporary directory, then loaded back through the same
loaders users hit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterable

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

# The tiny FLUX.2-style decoder used across the tests: the same class as flux2_small_decoder.
TINY_FLUX2_ARCH = dict(
    down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
    up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
    block_out_channels=[8, 16],
    decoder_block_out_channels=[8, 16],
    layers_per_block=1,
    latent_channels=4,
    norm_num_groups=4,
    sample_size=32,
)
# Overrides that make a CLI job of the tiny model take about a second.
TINY_RUN = ["preset.height=32", "preset.width=32", "preset.warmup=0", "preset.iters=2", "device=cpu"]


def build_tiny_flux2(seed: int = 0):
    """A seeded tiny ``AutoencoderKLFlux2`` (float32, eval mode)."""
    from diffusers import AutoencoderKLFlux2

    torch.manual_seed(seed)
    return AutoencoderKLFlux2(**TINY_FLUX2_ARCH).eval()


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """True when two modules hold the same tensors under the same names."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.fixture
def tiny_flux2_loader():
    """A DiffusersLoader for the tiny FLUX.2-style decoder architecture."""
    from ascendbench.models import DiffusersLoader

    return DiffusersLoader("diffusers.AutoencoderKLFlux2", architecture=TINY_FLUX2_ARCH)


@pytest.fixture(scope="session", autouse=True)
def _isolated_baseline_cache(tmp_path_factory):
    """Keep cached CPU references of the tests (in-process and CLI subprocesses) out of ~/.cache."""
    previous = os.environ.get("ASCENDBENCH_CACHE")
    os.environ["ASCENDBENCH_CACHE"] = str(tmp_path_factory.mktemp("ascendbench-cache"))
    yield
    if previous is None:
        os.environ.pop("ASCENDBENCH_CACHE", None)
    else:
        os.environ["ASCENDBENCH_CACHE"] = previous


@pytest.fixture(scope="session")
def tiny_flux2_dir(tmp_path_factory) -> Path:
    """A diffusers-format directory (config.json + safetensors) of the tiny decoder."""
    path = tmp_path_factory.mktemp("tiny_flux2")
    build_tiny_flux2().save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture
def compose_cfg():
    """Compose the app config with overrides, as the CLI would (Hydra state cleared afterwards)."""

    def _compose(overrides: Iterable[str] = ()):
        GlobalHydra.instance().clear()
        with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
            return compose(config_name="config", overrides=list(overrides))

    yield _compose
    GlobalHydra.instance().clear()


def run_cli(args: Iterable[str], cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``python -m ascendbench ARGS`` in a subprocess, offline, in ``cwd``."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "ascendbench", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli(tmp_path):
    """``cli(*overrides)`` runs one job with ``hydra.run.dir=<tmp>/job`` and returns (result, job_dir)."""

    def _run(*overrides: str, env: dict | None = None, job_dir: Path | None = None):
        job_dir = job_dir or tmp_path / "job"
        result = run_cli([*overrides, f"hydra.run.dir={job_dir}"], cwd=tmp_path, env=env)
        return result, job_dir

    return _run
