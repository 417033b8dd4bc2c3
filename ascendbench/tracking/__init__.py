"""Records as MLflow runs: ``report --mlflow`` and ``+tracking=mlflow`` (docs/tracking.md)."""
