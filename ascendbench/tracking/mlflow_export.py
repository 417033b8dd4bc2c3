"""Records -> MLflow runs, each record at most once: ``report --mlflow`` and the ``+tracking=mlflow`` callback.

Identity: a record is its job directory. The run of a record carries the tag :data:`KEY_TAG` (a hash of the
record's resolved job directory) and, once everything is logged, :data:`DIGEST_TAG` (a hash of the
``record.json`` bytes). Exporting a record looks its key up first:

* a run with the same digest exists -> ``unchanged``: nothing is logged (a second export adds nothing);
* runs with that key exist but with another digest (the job was run again into the same directory, or a run
  was left incomplete) -> ``replaced``: a new run is logged, then the old ones are deleted (MLflow's soft
  delete: ``mlflow gc`` purges them). Params cannot be changed in MLflow, so a record is replaced, not updated;
* no run -> ``created``.

MLflow is imported only when an exporter is made: without it, :class:`~ascendbench.errors.TrackingError` says
how to install it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ascendbench.errors import TrackingError
from ascendbench.fileio import read_regular
from ascendbench.job.record import RECORD_NAME, instant
from ascendbench.report.gather import DRY_RUN, load_row
from ascendbench.tracking.fields import Limits, RunFields, chunks, run_fields

log = logging.getLogger(__name__)

DEFAULT_URI = "sqlite:///mlflow.db"  # MLflow 3's own default store; the ./mlruns file store is refused by it
DEFAULT_EXPERIMENT = "ascendbench"
KEY_TAG = "ascendbench.record_key"
DIGEST_TAG = "ascendbench.record_digest"
JOB_DIR_TAG = "ascendbench.job_dir"
# record status -> the MLflow run's final status; any other ("running") leaves the run RUNNING.
RUN_STATUS = {"ok": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}
JOB_FILES = (RECORD_NAME, "compare.csv")  # artifacts at the top of the job dir, when present
MEDIA = ("*.png", "*.mp4")                # the job's pictures and videos, anywhere under the job dir
INSTALL_HINT = "pip install 'ascendbench[tracking]'"
SQL_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")  # MLflow's database stores (SQLAlchemy + Alembic)


def import_mlflow() -> Any:
    """The ``mlflow`` module, or :class:`TrackingError` saying how to install it.

    MLflow's anonymous usage telemetry is off unless the environment already says otherwise
    (``MLFLOW_DISABLE_TELEMETRY``): benchmark hosts are often air-gapped, and a record export sends nothing else.
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        import mlflow
    except ImportError as exc:
        raise TrackingError(
            f"MLflow is not installed ({exc}), so records cannot be logged as MLflow runs. Install the client with "
            f"`{INSTALL_HINT}` (mlflow-skinny), then run the command again; the records themselves are unaffected."
        ) from exc
    return mlflow


# MLflow's own defaults (120 s a request, 7 retries with backoff factor 2) keep an unreachable server silent for
# minutes. Unless the user set them, a request gets 10 s and one retry: an unreachable store fails within ~25 s.
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
               "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0"}


def bound_http(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Set :data:`HTTP_BOUNDS` in ``environ`` (default ``os.environ``) where the user has not; returns them."""
    env = os.environ if environ is None else environ
    for name, value in HTTP_BOUNDS.items():
        env.setdefault(name, value)
    return {name: env[name] for name in HTTP_BOUNDS}


def resolve_uri(uri: str | None) -> str:
    """The tracking URI: ``uri``, else ``$MLFLOW_TRACKING_URI``, else :data:`DEFAULT_URI`; a relative SQLite
    path is made absolute (against the working directory), so that every process of a sweep uses one database.

    >>> resolve_uri("sqlite:////data/mlflow.db"), resolve_uri("http://tracking:5000")
    ('sqlite:////data/mlflow.db', 'http://tracking:5000')
    """
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/") and len(uri) > len(prefix):
        path, sep, query = uri[len(prefix):].partition("?")
        uri = f"{prefix}{Path(path).resolve()}{sep}{query}"
    return uri


def artifact_root(uri: str, experiment: str) -> str | None:
    """Where a new experiment of a SQLite store keeps its files: ``<database dir>/mlartifacts/<experiment>``
    (MLflow's own default is ``./mlruns`` of whatever directory the run started in). None for other stores."""
    if not uri.startswith("sqlite:////"):
        return None
    database = Path(uri[len("sqlite:///"):].partition("?")[0])
    return (database.parent / "mlartifacts" / re.sub(r"[^\w.-]", "_", experiment)).as_uri()


def _digest(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:20]


def _epoch_ms(stamp: Any) -> int | None:
    """A record's ``timing`` time (``2026-12-01T09:54:36+0000``) in milliseconds, or None."""
    moment = instant(stamp)
    return None if moment == float("-inf") else int(moment * 1000)


def artifact_files(job_dir: Path) -> list[tuple[Path, str | None]]:
    """``(file, artifact directory)`` of the job: :data:`JOB_FILES` and every :data:`MEDIA` file under the job
    dir, in its sub-directory (``images``), leaving out the files of another job's directory nested in it."""
    files = [(job_dir / name, None) for name in JOB_FILES if _own_file(job_dir, job_dir / name)]
    for pattern in MEDIA:
        for path in sorted(job_dir.rglob(pattern)):
            if _own_file(job_dir, path) and not _in_nested_job(path, job_dir):
                folder = path.parent.relative_to(job_dir).as_posix()
                files.append((path, None if folder == "." else folder))
    return files


def _own_file(job_dir: Path, path: Path) -> bool:
    """A regular file of the job itself: not a symbolic link, and inside the job dir once links are resolved
    (``passwd.png -> /etc/passwd`` is never uploaded)."""
    root = job_dir.resolve()
    return path.is_file() and not path.is_symlink() and root in path.resolve().parents


def _in_nested_job(path: Path, job_dir: Path) -> bool:
    """True when ``path`` lies in a directory below ``job_dir`` that holds a record of its own."""
    return any((d / RECORD_NAME).is_file() for d in path.parents if job_dir in d.parents)


@dataclass
class Outcome:
    """What exporting one record did: ``created``, ``replaced``, ``unchanged``, ``skipped`` or ``failed``."""

    record: Path
    action: str
    run_id: str | None = None
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """``created   run <id>  <record>`` and the notes, one per line."""
        run = f"run {self.run_id}" if self.run_id else "no run"
        return "\n".join([f"{self.action:<9} {run}  {self.record}", *(f"    note: {n}" for n in self.notes)])


@dataclass(frozen=True)
class RecordFile:
    """One ``record.json`` as read for export: its path, bytes, identity key and content digest."""

    path: Path
    data: bytes

    @classmethod
    def read(cls, path: Path | str) -> RecordFile:
        """Read the record (``path``: the file or its job directory)."""
        path = Path(path).resolve()
        path = path / RECORD_NAME if path.is_dir() else path
        return cls(path, read_regular(path))  # a FIFO is refused, never waited on

    @property
    def key(self) -> str:
        """The record's identity: a hash of its resolved job directory."""
        return _digest(str(self.path.parent))

    @property
    def digest(self) -> str:
        """A hash of the record's bytes: another digest under the same key means the record changed."""
        return _digest(self.data)


class MlflowExporter:
    """One tracking store and experiment; :meth:`export` logs one record as a run, at most once.

    Args:
        uri: tracking URI; None: ``$MLFLOW_TRACKING_URI``, else :data:`DEFAULT_URI` (see :func:`resolve_uri`).
        experiment: experiment name, created when missing.

    Raises:
        TrackingError: MLflow is not installed, or the URI cannot be used (the message says which and why).
    """

    def __init__(self, uri: str | None = None, experiment: str = DEFAULT_EXPERIMENT) -> None:
        self.mlflow = import_mlflow()
        self.uri = resolve_uri(uri)
        bound_http()
        self.experiment = experiment
        self.client: Any = None
        self.experiment_id = self._connect()
        self.limits = _limits()

    def _connect(self) -> str:
        """Open the store; the experiment's id, creating it (artifacts beside a SQLite database) when missing."""
        missing = missing_sql_packages(self.uri)
        if missing:
            raise TrackingError(
                f"the MLflow tracking URI {self.uri!r} is a database; MLflow's database stores need sqlalchemy and "
                f"alembic, and this environment lacks {' and '.join(missing)} (mlflow-skinny leaves them out). "
                f"Install them with `{INSTALL_HINT}`, or pass a tracking server URI (`--mlflow http://host:5000`).")
        try:
            self.client = self.mlflow.MlflowClient(tracking_uri=self.uri)
            found = self.client.get_experiment_by_name(self.experiment)
            if found is None:
                return self.client.create_experiment(self.experiment, artifact_root(self.uri, self.experiment))
        except Exception as exc:  # MLflow raises MlflowException, SQLAlchemy and OS errors alike for a bad store
            raise TrackingError(_unusable(self.uri, exc)) from exc
        if found.lifecycle_stage != "active":
            raise TrackingError(
                f"the MLflow experiment {self.experiment!r} at {self.uri} is deleted. Restore it "
                f"(`mlflow experiments restore --experiment-id {found.experiment_id}`) or name another one "
                "with --mlflow-experiment / hydra.callbacks.mlflow.experiment.")
        return found.experiment_id

    def export(self, path: Path | str) -> Outcome:
        """Log the record at ``path`` (a ``record.json`` or its job dir) unless its run is already there."""
        record = RecordFile.read(path)
        row = load_row(record.path, record.data)  # the bytes the digest is of, read once
        if row.get("status") == "broken":
            return Outcome(record.path, "skipped", notes=[f"unreadable record: {row.get('error.message')}"])
        if row.get("run") == DRY_RUN:
            return Outcome(record.path, "skipped", notes=["a dry run (dry_run=true) measured nothing"])
        existing = self._runs(record.key)
        same = [run for run in existing if run.data.tags.get(DIGEST_TAG) == record.digest]
        if same:
            self._delete(run for run in existing if run is not same[0])
            return Outcome(record.path, "unchanged", same[0].info.run_id)
        fields = run_fields(json.loads(record.data), row, self.limits)
        run_id = self._log(record, row, fields)
        self._delete(existing)
        return Outcome(record.path, "replaced" if existing else "created", run_id, fields.summary())

    def _runs(self, key: str) -> list[Any]:
        """The experiment's live runs of the record ``key``."""
        return list(self.client.search_runs([self.experiment_id], filter_string=f"tags.`{KEY_TAG}` = '{key}'",
                                            max_results=1000))

    def _delete(self, runs: Iterable[Any]) -> None:
        for run in runs:
            self.client.delete_run(run.info.run_id)

    def _log(self, record: RecordFile, row: dict[str, Any], fields: RunFields) -> str:
        """A new run holding ``fields`` and the job's files; the digest tag is set last, marking it complete."""
        tags = {KEY_TAG: record.key, JOB_DIR_TAG: str(record.path.parent)}
        run = self.client.create_run(self.experiment_id, start_time=_epoch_ms(row.get("timing.started_at")),
                                     tags=tags, run_name=record.path.parent.name)
        run_id = run.info.run_id
        try:
            self._log_fields(run_id, fields, _epoch_ms(row.get("timing.finished_at")))
            for path, folder in artifact_files(record.path.parent):
                self.client.log_artifact(run_id, str(path), folder)
            self.client.set_tag(run_id, DIGEST_TAG, record.digest)
        except BaseException:
            self.client.set_terminated(run_id, "FAILED")  # no digest: the next export replaces it
            raise
        if row.get("status") in RUN_STATUS:
            self.client.set_terminated(run_id, RUN_STATUS[row["status"]], _epoch_ms(row.get("timing.finished_at")))
        return run_id

    def _log_fields(self, run_id: str, fields: RunFields, timestamp_ms: int | None) -> None:
        """Params, tags and metrics in batches within MLflow's limits (100 params or tags, 1000 metrics)."""
        from mlflow.entities import Metric, Param, RunTag

        stamp = timestamp_ms or int(time.time() * 1000)
        for batch in chunks((Param(k, v) for k, v in fields.params.items()), 100):
            self.client.log_batch(run_id, params=batch)
        for batch in chunks((RunTag(k, v) for k, v in fields.tags.items()), 100):
            self.client.log_batch(run_id, tags=batch)
        for batch in chunks((Metric(k, v, stamp, 0) for k, v in fields.metrics.items()), 1000):
            self.client.log_batch(run_id, metrics=batch)


def missing_sql_packages(uri: str) -> list[str]:
    """The packages a database URI (``sqlite:``, ``postgresql:``...) needs that are not installed."""
    if uri.split(":", 1)[0].split("+", 1)[0] not in SQL_SCHEMES:
        return []
    return [name for name in ("sqlalchemy", "alembic") if importlib.util.find_spec(name) is None]


def _limits() -> Limits:
    """The installed client's length limits (older MLflow releases allow 500-character params)."""
    try:
        from mlflow.utils import validation
    except ImportError:
        return Limits(param_value=500, tag_value=5000)
    return Limits(param_value=getattr(validation, "MAX_PARAM_VAL_LENGTH", 500),
                  tag_value=getattr(validation, "MAX_TAG_VAL_LENGTH", 5000))


def _unusable(uri: str, exc: BaseException) -> str:
    """The one-paragraph message of a tracking URI MLflow cannot use."""
    cause = (str(exc).strip().splitlines() or [""])[0][:400].rstrip(". ")
    return (f"the MLflow tracking URI {uri!r} cannot be used: {type(exc).__name__}: {cause}. Pass a database URI "
            f"(`--mlflow sqlite:///mlflow.db`, the default when no URI is given: a file in the working directory), "
            f"a tracking server (`--mlflow http://host:5000`), or set MLFLOW_TRACKING_URI; for the "
            f"`+tracking=mlflow` callback, `hydra.callbacks.mlflow.uri=...`. MLflow 3 refuses the ./mlruns file "
            f"store unless MLFLOW_ALLOW_FILE_STORE=true.")
