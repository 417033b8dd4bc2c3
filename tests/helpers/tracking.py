"""Runs of an MLflow store read back through MLflow's own client (the tracking tests' checks)."""

from __future__ import annotations


def read_runs(uri: str, experiment: str = "ascendbench") -> list:
    """The experiment's live runs, through MLflow's client (``[]`` when the experiment does not
    exist)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id]) if found else []


def artifact_paths(uri: str, run_id: str, folder: str | None = None) -> set[str]:
    """Every artifact file of the run, as paths relative to its artifact root."""
    from mlflow import MlflowClient

    client, paths = MlflowClient(tracking_uri=uri), set()
    for entry in client.list_artifacts(run_id, folder):
        paths |= artifact_paths(uri, run_id, entry.path) if entry.is_dir else {entry.path}
    return paths
