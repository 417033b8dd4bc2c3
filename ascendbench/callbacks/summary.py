"""After a multirun: the sweep's records in ``summary.csv`` and ``summary.md``, and collect_env."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ascendbench.fileio import write_atomic

log = logging.getLogger(__name__)


class SweepSummary(Callback):
    """Write the sweep's summary and, once per sweep, ``torch.utils.collect_env``'s report."""

    def __init__(self, collect_env_timeout_s: float = 60.0) -> None:
        self._started = time.time()  # Hydra makes its callbacks as the sweep starts: the log line
        self.collect_env_timeout_s = float(collect_env_timeout_s)  # counts the records after it

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Write the summary into ``hydra.sweep.dir``; log where, and how many jobs were not ok."""
        # deferred: pandas, the report and torch load only when a sweep ends
        from ascendbench.env import COLLECT_ENV_FILE, collect_env_text
        from ascendbench.report.search import append_search
        from ascendbench.report.summary import write_summary

        sweep_dir = Path(str(OmegaConf.select(config, "hydra.sweep.dir")))
        try:
            frame, csv_path, md_path = write_summary(sweep_dir)
            statuses = frame.get("status", []) if len(frame) else []
            fresh = [s for s, p in zip(statuses, frame.get("record", []), strict=False)
                     if Path(p).stat().st_mtime >= self._started - 1.0]
            log.info("sweep summary: %s and %s (%d record(s), %d of this run not ok)", md_path,
                     csv_path.name, len(frame), sum(str(s) != "ok" for s in fresh))
            if objective := OmegaConf.select(config, "objective"):  # a search: name its best trial
                log.info(append_search(frame, md_path, str(objective),
                                       OmegaConf.select(config, "fail_on")))
        except Exception:  # a summary must never turn a finished sweep into a crash
            log.exception("could not write the sweep summary of %s", sweep_dir)
        if self.collect_env_timeout_s <= 0:
            return
        try:
            path = sweep_dir / COLLECT_ENV_FILE
            write_atomic(path, collect_env_text(self.collect_env_timeout_s))
            log.info("environment of the sweep (collect_env): %s", path)
        except Exception:  # the environment report is a courtesy: never a crash of a finished sweep
            log.exception("could not write the sweep's %s", COLLECT_ENV_FILE)
