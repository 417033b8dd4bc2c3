"""Shared fixtures: tiny offline models saved like real checkpoints, composed configs, CLI runs.

Fixtures only; the builders they use live in ``tests/helpers`` (``from helpers import ...``).
Nothing here touches the network: every model is built in code, seeded, and written with
``save_pretrained`` / safetensors into a temporary directory, then loaded back through the same
loaders users hit.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Iterable

import pytest
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, open_dict

from helpers import TINY_FLUX2_ARCH, TINY_RUN, build_tiny_flux2, compose_config, run_app

# The job of ``cfg_tiny``: the tiny decoder on CPU, its reference in this process, no FLOP count.
TINY_JOB = [
    "model=tiny_flux2_decoder",
    *TINY_RUN,
    "bench.flops.enabled=false",
    "baseline.process=in-process",
]


@pytest.fixture
def tiny_flux2_loader():
    """A DiffusersLoader for the tiny FLUX.2-style decoder architecture."""
    from ascendbench.models.loader import DiffusersLoader

    return DiffusersLoader("diffusers.AutoencoderKLFlux2", architecture=TINY_FLUX2_ARCH)


@pytest.fixture(scope="session", autouse=True)
def _isolated_baseline_cache(tmp_path_factory):
    """Keep cached CPU references of the tests (in-process and CLI subprocesses) out of ~/.cache.

    Per pytest process: each xdist worker has its own ``tmp_path_factory`` and so its own cache.
    """
    previous = os.environ.get("ASCENDBENCH_CACHE")
    os.environ["ASCENDBENCH_CACHE"] = str(tmp_path_factory.mktemp("ascendbench-cache"))
    yield
    if previous is None:
        os.environ.pop("ASCENDBENCH_CACHE", None)
    else:
        os.environ["ASCENDBENCH_CACHE"] = previous


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test leaves os.environ as it found it: an in-process job applies ``device.env``
    (ASCEND_* dirs, visible devices) to the process, which must not leak into the next test's
    subprocesses."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="session")
def tiny_flux2_dir(tmp_path_factory) -> Path:
    """A diffusers-format directory (config.json + safetensors) of the tiny decoder."""
    path = tmp_path_factory.mktemp("tiny_flux2")
    build_tiny_flux2().save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture
def compose_cfg():
    """``compose_cfg(overrides)``: the app config composed as the CLI would (Hydra state cleared
    afterwards)."""

    def _compose(overrides: Iterable[str] = ()):
        return compose_config(overrides)

    yield _compose
    GlobalHydra.instance().clear()


@pytest.fixture(scope="module")
def cfg_tiny_module() -> DictConfig:
    """``TINY_JOB`` composed once per test module (copy it: see ``cfg_tiny``)."""
    return compose_config(TINY_JOB)


@pytest.fixture
def cfg_tiny(cfg_tiny_module, tmp_path) -> DictConfig:
    """A copy of the composed tiny job for one test, its baseline cache in ``tmp_path/cache``.

    Run it with ``helpers.run_job(cfg_tiny, tmp_path / "job")``; change a value with ``open_dict``.
    """
    cfg = copy.deepcopy(cfg_tiny_module)
    with open_dict(cfg):
        cfg.baseline.cache_dir = str(tmp_path / "cache")
    return cfg


@pytest.fixture
def cli(tmp_path):
    """``cli(*overrides, env=None, job_dir=None)`` runs one job of ``python -m ascendbench`` in this
    process (``helpers.run_app``, cwd ``tmp_path``, job dir ``<tmp>/job``) and returns
    ``(result, job_dir)``."""

    def _run(*overrides: str, env: dict | None = None, job_dir: Path | None = None):
        result = run_app(overrides, cwd=tmp_path, env=env, out_dir=job_dir or tmp_path / "job")
        return result, result.job_dir

    return _run


def pytest_collection_modifyitems(config, items):
    """Subprocess tests (``slow``) first: the two xdist workers then end on short tests and finish
    together."""
    items.sort(
        key=lambda item: item.get_closest_marker("slow") is None
    )  # a stable sort keeps the rest in order
