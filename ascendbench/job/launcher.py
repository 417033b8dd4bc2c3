"""Hydra's basic launcher running the config its sweeper composed (composed once per job)."""

from __future__ import annotations

import contextlib
import gc
import logging
import pickle
from pathlib import Path
from typing import Any, Sequence

from hydra.core.utils import configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext
from omegaconf import DictConfig, open_dict

log = logging.getLogger(__name__)


class ComposedConfigs:
    """The sweeper's config loader, keeping each job config it composes for :meth:`take`."""

    def __init__(self, loader: Any) -> None:
        self.loader, self.composed = loader, {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__.get("loader"), name)  # .get: no loader while copied

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list) -> DictConfig:
        """Compose a job's config (the sweeper's check of a batch) and keep it, as bytes."""
        config = self.loader.load_sweep_config(master_config, sweep_overrides)
        with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError):  # else anew
            self.composed[tuple(sweep_overrides)] = pickle.dumps(config)
        return config

    def take(self, master_config: DictConfig, overrides: Sequence[str]) -> DictConfig:
        """The config kept for these overrides (given out once), else a new one."""
        if (kept := self.composed.pop(tuple(overrides), None)) is not None:
            return pickle.loads(kept)  # bytes this process made above, never read from a file
        return self.loader.load_sweep_config(master_config, list(overrides))


class ComposeOnceLauncher(Launcher):
    """Hydra's basic launcher: the jobs one after the other in this process, the same lines."""

    def setup(self, *, hydra_context: HydraContext, task_function: Any, config: DictConfig) -> None:
        """Wrap the loader of the sweeper's context, which the sweeper composes the batch with."""
        if not isinstance(hydra_context.config_loader, ComposedConfigs):
            hydra_context.config_loader = ComposedConfigs(hydra_context.config_loader)
        self.hydra_context, self.task_function, self.config = hydra_context, task_function, config

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
        """Run each job with the config composed for it, numbered from ``initial_job_idx``."""
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs locally")
        runs = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            config = self.hydra_context.config_loader.take(self.config, overrides)
            with open_dict(config):
                config.hydra.job.id = config.hydra.job.num = idx
            runs.append(run_job(hydra_context=self.hydra_context, task_function=self.task_function,
                                config=config, job_dir_key="hydra.sweep.dir",
                                job_subdir_key="hydra.sweep.subdir"))
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
            del config
            # The job's garbage collected, what survives (the modules it imported, caches) frozen:
            # the collector's full passes, every few jobs and twice at exit, no longer walk
            # torch's and the libraries' ~0.5 million objects (0.3 s each on this host). No job
            # config is alive here (those waiting are bytes): frozen, its cycles would never go.
            gc.collect()
            gc.freeze()
        return runs
