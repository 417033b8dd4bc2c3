"""The ``+tracking=mlflow`` Hydra callback: each job's record logged as an MLflow run when the job ends.

It calls the exporter of ``python -m ascendbench.report --mlflow`` (:class:`MlflowExporter`), so a later
export of the same records adds nothing. Tracking is a courtesy: a failure (MLflow missing, the store
unreachable, a locked database) is one warning line, the traceback goes to the job log, and the job's record,
status and exit code stay as they were; the record can be logged later with the report command.
"""

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
    """Log the record of every job (single run or sweep job) to MLflow in ``on_job_end``.

    Args:
        uri: tracking URI; None: ``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` in the working directory.
        experiment: MLflow experiment name (created when missing).
    """

    def __init__(self, uri: str | None = None, experiment: str = DEFAULT_EXPERIMENT) -> None:
        self.uri = uri
        self.experiment = experiment
        self._exporter: MlflowExporter | None = None  # one store connection per process, made at the first job
        self._unusable: TrackingError | None = None   # MLflow missing or the store unusable: not retried per job

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        """Log ``<job dir>/record.json``; never raises."""
        record = Path(str(OmegaConf.select(config, "hydra.runtime.output_dir") or ".")) / RECORD_NAME
        try:
            outcome = self.exporter().export(record)
            log.info("mlflow: %s (experiment %r at %s)", outcome.line(), self.experiment, self._exporter.uri)
        except Exception as exc:  # tracking must never fail a job or touch its record
            log.warning("mlflow tracking: the record %s was not logged: %s: %s. The job and its record are "
                        "unaffected; log it later with `python -m ascendbench.report --mlflow [URI] %s`.",
                        record, type(exc).__name__, exc, record.parent)
            log.debug("mlflow tracking failure", exc_info=True)

    def exporter(self) -> MlflowExporter:
        """The process's exporter, connected at the first call; a connection that failed once is not retried
        (an unreachable server would otherwise delay every job of a sweep by MLflow's retries)."""
        if self._unusable is not None:
            raise self._unusable
        if self._exporter is None:
            try:
                self._exporter = MlflowExporter(self.uri, self.experiment)
            except TrackingError as exc:
                self._unusable = exc
                raise
        return self._exporter
