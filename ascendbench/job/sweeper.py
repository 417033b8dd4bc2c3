"""Hydra's basic sweep, each job's config composed once: the configs composed before any job runs
(a bad value is refused up front) go to the launcher, which would compose every job again."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf


class ComposedConfigs:
    """A config loader that returns each config composed up front once, else composes; other
    processes (joblib, Slurm workers) get the wrapped loader alone."""

    def __init__(self, loader: Any) -> None:
        self.loader, self.composed = loader, {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__.get("loader"), name)  # no loader yet: unpickling

    def __getstate__(self) -> dict[str, Any]:
        return {"loader": self.loader, "composed": {}}

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list) -> DictConfig:
        """The config composed up front for these overrides, else a new one."""
        composed = self.composed.pop(tuple(sweep_overrides), None)
        return composed or self.loader.load_sweep_config(master_config, sweep_overrides)


class ComposeOnceSweeper(Sweeper):
    """Hydra's basic sweeper: the same jobs, order, numbering, batches and ``multirun.yaml``."""

    def __init__(self, max_batch_size: int | None = None, params: dict | None = None) -> None:
        self.max_batch_size, self.params = max_batch_size, params or {}

    def setup(self, *, hydra_context: HydraContext, task_function: Any, config: DictConfig) -> None:
        """The launcher composes through :class:`ComposedConfigs`."""
        self.config, self.loader = config, ComposedConfigs(hydra_context.config_loader)
        self.hydra_context = HydraContext(self.loader, hydra_context.callbacks)
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=self.hydra_context, task_function=task_function, config=config)

    def jobs(self, arguments: list[str]) -> list[list[str]]:
        """Each job's overrides, parsed by Hydra (which refuses an interval): every key's values
        combined, the first key slowest."""
        params = [f"{key}={value}" for key, value in self.params.items()]
        choices = {}
        for override in OverridesParser.create(config_loader=self.loader).parse_overrides(
                [*params, *arguments]):
            key = override.get_key_element()
            if override.is_sweep_override():
                values = list(override.sweep_string_iterator())
            else:
                values = [override.get_value_element_as_str()]
            choices[key] = [f"{key}={value}" for value in values]
        return [list(job) for job in itertools.product(*choices.values())]

    def sweep(self, arguments: list[str]) -> list[Any]:
        """Compose every job of a batch (all of them unless ``max_batch_size``), then launch it."""
        jobs, returns, sweep_dir = self.jobs(arguments), [], Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        size = self.max_batch_size if (self.max_batch_size or 0) > 0 else len(jobs)
        for start in range(0, len(jobs), size):
            batch = jobs[start:start + size]
            self.loader.composed = {
                tuple(job): self.loader.loader.load_sweep_config(self.config, job) for job in batch}
            results = self.launcher.launch(batch, initial_job_idx=start)
            self.loader.composed = {}
            for result in results:
                _ = result.return_value  # raises the job's exception, as Hydra's sweeper does
            returns.append(results)
        return returns
