"""The app config composed as the CLI composes it, and the job run on it without the CLI around
it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

# Imported here, with the whole job, before any test runs: a module imported first inside a
# test that patches e.g. ``safetensors.torch.load_file`` would keep the patched function for the
# rest of the session.
from ascendbench.job.runner import run_job as _package_run_job

CONFIG_MODULE = "ascendbench.conf"


def compose_config(overrides: Iterable[str] = (), return_hydra_config: bool = False) -> DictConfig:
    """Compose ``config.yaml`` of ``ascendbench.conf`` with ``overrides`` (Hydra's state cleared
    after).

    Args:
        overrides: command-line style overrides, e.g. ``["model=tiny_flux2_decoder",
            "device=cpu"]``.
        return_hydra_config: keep the ``hydra`` node (sweeper params, launcher, callbacks).
    """
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            return compose(
                config_name="config",
                overrides=list(overrides),
                return_hydra_config=return_hydra_config,
            )
    finally:
        GlobalHydra.instance().clear()


def run_job(cfg: DictConfig, job_dir: Path, *args: Any, **kwargs: Any) -> dict:
    """The package's ``run_job(cfg, job_dir)``: one job in this process; returns its record."""
    return _package_run_job(cfg, job_dir, *args, **kwargs)


def ltx_single_file_layout(model: str, root: Path) -> Path:
    """The tiny LTX pipeline ``model`` as users get LTX-Video, under ``root``: one single file
    (``weights/<model>.safetensors``), a config directory (``config/``) and the full diffusers save
    with the T5 (``full/``); returns ``root``."""
    import shutil

    from hydra.utils import instantiate

    from ascendbench.models.ltx_layout import save_ltx_single_file

    loader = instantiate(compose_config([f"model={model}"]).model.loader)
    pipe = loader.load(None, "random", 42).module
    pipe.save_pretrained(root / "full")
    save_ltx_single_file(pipe, root / "weights" / f"{model}.safetensors")
    shutil.copytree(root / "full", root / "config", ignore=shutil.ignore_patterns("*.safetensors"))
    return root


def release_card() -> None:
    """Give this test process's cards back (a worker process simply exits)."""
    from ascendbench.devices import cards

    for lock in cards._CLAIM.pop("lock", None) or []:
        lock.release(force=True)
    cards._CLAIM.clear()
