"""The ``+tracking=mlflow`` callback: a run per job record; a failure only warns."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import TrackingError
from ascendbench.job.record import RECORD_NAME
from ascendbench.tracking.mlflow_export import DEFAULT_EXPERIMENT, MlflowExporter

log = logging.getLogger(__name__)


class MlflowTracking(Callback):
    """Log each job's record to MLflow in ``on_job_end`` (``uri``: see ``resolve_uri``)."""

    def __init__(self, uri: str | None = None, experiment: str = DEFAULT_EXPERIMENT) -> None:
        self.uri, self.experiment = uri, experiment
        self._exporter: MlflowExporter | None = None  # one store connection per process
        self._unusable: TrackingError | None = None  # not retried per job (MLflow's retries)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        """Log ``<job dir>/record.json``; never raises."""
        job_dir = Path(str(OmegaConf.select(config, "hydra.runtime.output_dir") or "."))
        record = job_dir / RECORD_NAME
        try:
            if self._exporter is None and self._unusable is None:
                try:
                    self._exporter = MlflowExporter(self.uri, self.experiment)
                except TrackingError as exc:
                    self._unusable = exc
            if self._unusable is not None:
                raise self._unusable
            outcome = self._exporter.export(record)
            log.info("mlflow: %s (experiment %r at %s)", outcome.line(), self.experiment,
                     self._exporter.uri)
        except Exception as exc:  # tracking must never fail a job or touch its record
            log.warning("mlflow tracking: the record %s was not logged: %s: %s. The job and its "
                        "record are unaffected; log it later with `python -m ascendbench.report "
                        "--mlflow [URI] %s`.", record, type(exc).__name__, exc, job_dir)
            log.debug("mlflow tracking failure", exc_info=True)
