"""Experiment tracking: records logged as MLflow runs (``python -m ascendbench.report --mlflow``, and live with
the ``+tracking=mlflow`` Hydra callback). MLflow is imported only when a run is logged. See docs/tracking.md."""

from ascendbench.tracking.fields import Limits, RunFields, run_fields
from ascendbench.tracking.mlflow_export import DEFAULT_EXPERIMENT, DEFAULT_URI, MlflowExporter, Outcome, resolve_uri

__all__ = ["DEFAULT_EXPERIMENT", "DEFAULT_URI", "Limits", "MlflowExporter", "Outcome", "RunFields", "resolve_uri",
           "run_fields"]
