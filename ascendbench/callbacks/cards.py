"""The card pool of ``hydra/launcher=joblib_cards`` and ``slurm_cards``: a card per worker."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ascendbench.devices.cards import claim_card, clear_refusal, refuse
from ascendbench.errors import ConfigError, NoFreeCardError
from ascendbench.fileio import write_atomic
from ascendbench.job.launch import LaunchRefused

log = logging.getLogger(__name__)

VISIBLE_DEVICE_VARIABLES = ("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
SCHEDULER_VARIABLES = ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "SLURM_STEP_GPUS",
                       "SLURM_JOB_GPUS")


class CardPool(Callback):
    """Before each multirun job, in its worker, claim a free card and set ``variables`` to it."""

    def __init__(self, cards: Any = None, variables: Iterable[str] = VISIBLE_DEVICE_VARIABLES,
                 inherit_from: Iterable[str] = SCHEDULER_VARIABLES, lock_dir: str | None = None,
                 wait_s: float = 60.0, lock_name: str = "card-{card}.lock") -> None:
        if "{card}" not in lock_name or "/" in lock_name:
            raise ConfigError(f"hydra.callbacks.cards.lock_name={lock_name!r} must be a file name "
                              "holding `{card}`, e.g. `npu_card{card}.lock` (put the directory in "
                              "lock_dir).")
        if isinstance(cards, str):
            cards = [c.strip() for c in cards.split(",") if c.strip()]
        self.cards = None if cards is None else [str(c) for c in cards]
        if self.cards is not None and not self.cards:
            raise ConfigError("hydra.callbacks.cards.cards is empty; list the card ids, e.g. "
                              "`[0,1]`, or set it to null to take the card the scheduler assigned.")
        self.variables, self.inherit_from = list(variables), list(inherit_from)
        self.lock_dir, self.wait_s, self.lock_name = lock_dir, float(wait_s), lock_name

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse the sweep when more jobs would run at once than there are cards."""
        n_jobs = OmegaConf.select(config, "hydra.launcher.n_jobs")
        if self.cards is None or not isinstance(n_jobs, int):
            return
        parallel = (os.cpu_count() or 1) if n_jobs < 0 else n_jobs
        per_job = int(OmegaConf.select(config, "device.world_size") or 1)  # N cards per job
        if parallel * per_job > len(self.cards):
            raise LaunchRefused(
                f"ascendbench: hydra.launcher.n_jobs={n_jobs} runs {parallel} jobs at once, "
                f"{per_job} card(s) each (device.world_size), but the card pool "
                f"hydra.callbacks.cards.cards={self.cards} has {len(self.cards)} card(s); each "
                f"worker needs its own. Set `hydra.launcher.n_jobs="
                f"{max(1, len(self.cards) // per_job)}` or list more cards.")

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Claim (or inherit) this worker's card and export it before the job's code runs."""
        clear_refusal()
        mode = OmegaConf.select(config, "hydra.mode")
        if getattr(mode, "name", str(mode)) == "RUN":  # a single run picks its card itself
            return
        if self.cards is None:
            card = next((os.environ[v] for v in self.inherit_from if os.environ.get(v)), None)
            if card is None:
                log.warning("card pool: no card list and none of %s is set; devices left as they "
                            "are", self.inherit_from)
                return
            exported = {v: card for v in self.variables if not os.environ.get(v)}
        else:
            lock_dir = Path(self.lock_dir or Path(str(config.hydra.sweep.dir)) / ".cards")
            try:
                card = claim_card(self.cards, lock_dir, self.wait_s, lock_name=self.lock_name,
                                  count=int(OmegaConf.select(config, "device.world_size") or 1))
            except NoFreeCardError as exc:  # the job's device stage fails with it (card_refusal)
                refuse(exc)
                log.error("card pool: %s", exc)
                return
            exported = {v: card for v in self.variables}
        os.environ.update(exported)
        job_dir = Path(str(OmegaConf.select(config, "hydra.runtime.output_dir") or "."))
        visible = {v: os.environ.get(v) for v in self.variables}
        num = OmegaConf.select(config, "hydra.job.num")
        log.info("card pool: job %s runs on card %s (%s)", num, card,
                 ", ".join(f"{k}={v}" for k, v in visible.items()))
        info = {"card": card, "exported": exported, "pid": os.getpid(), "visible": visible}
        try:
            write_atomic(job_dir / "card.json", json.dumps(info, indent=2))
        except OSError as exc:  # OutputWriteError too
            log.warning("card pool: could not write %s: %s", job_dir / "card.json", exc)
