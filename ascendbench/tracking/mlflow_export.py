"""Records -> MLflow runs, each at most once (:data:`KEY_TAG` the run, :data:`DIGEST_TAG` done)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import sqlite3
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ascendbench.errors import TrackingError
from ascendbench.fileio import read_regular
from ascendbench.job.record import RECORD_NAME, instant
from ascendbench.report.fmt import DRY_RUN
from ascendbench.report.gather import find_records, load_row
from ascendbench.tracking.fields import Limits, RunFields, chunks, run_fields

DEFAULT_URI = "sqlite:///mlflow.db"  # MLflow 3's own default store (it refuses ./mlruns)
DEFAULT_EXPERIMENT = "ascendbench"
KEY_TAG = "ascendbench.record_key"
DIGEST_TAG = "ascendbench.record_digest"
JOB_DIR_TAG = "ascendbench.job_dir"
# record status -> the run's final status; any other ("running") leaves the run RUNNING.
RUN_STATUS = {"ok": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}
JOB_FILES = (RECORD_NAME, "compare.csv")  # artifacts at the top of the job dir, when present
MEDIA = ("*.png", "*.mp4")  # the job's pictures and videos, anywhere under the job dir
INSTALL_HINT = "pip install 'ascendbench[tracking]'"
SQL_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")  # stores that need SQLAlchemy + Alembic
EXIT_SOME_FAILED, EXIT_UNUSABLE = 1, 2  # some record refused; MLflow missing or the URI unusable
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# MLflow's own defaults (120 s a request, 7 retries) keep an unreachable server silent for minutes;
# unless the user set them, a request gets 10 s and one retry (~25 s in all).
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
               "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0"}


def import_mlflow() -> Any:
    """The ``mlflow`` module (telemetry off by default), or TrackingError saying how to install."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        import mlflow  # deferred: an optional dependency, and heavy
    except ImportError as exc:
        raise TrackingError(
            f"MLflow is not installed ({exc}), so records cannot be logged as MLflow runs. Install "
            f"the client with `{INSTALL_HINT}` (mlflow-skinny), then run the command again; the "
            "records themselves are unaffected.") from exc
    return mlflow


def resolve_uri(uri: str | None) -> str:
    """``uri``, else ``$MLFLOW_TRACKING_URI``, else :data:`DEFAULT_URI`; SQLite paths absolute.
    >>> resolve_uri("sqlite:////data/mlflow.db"), resolve_uri("http://tracking:5000")
    ('sqlite:////data/mlflow.db', 'http://tracking:5000')"""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/") and len(uri) > len(prefix):
        path, sep, query = uri[len(prefix):].partition("?")
        uri = f"{prefix}{Path(path).resolve()}{sep}{query}"
    return uri


def artifact_root(uri: str, experiment: str) -> str | None:
    """``<database dir>/mlartifacts/<experiment>`` of a SQLite store (not ./mlruns), else None."""
    if not uri.startswith("sqlite:////"):
        return None
    database = Path(uri[len("sqlite:///"):].partition("?")[0])
    return (database.parent / "mlartifacts" / re.sub(r"[^\w.-]", "_", experiment)).as_uri()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:20]


def _epoch_ms(stamp: Any) -> int | None:
    moment = instant(stamp)  # a record's ``timing`` time in milliseconds, or None
    return None if moment == float("-inf") else int(moment * 1000)


def artifact_files(job_dir: Path) -> list[tuple[Path, str | None]]:
    """``(file, folder)`` of :data:`JOB_FILES` and :data:`MEDIA`: own files only, no links."""
    root = job_dir.resolve()

    def own(path: Path) -> bool:
        return path.is_file() and not path.is_symlink() and root in path.resolve().parents

    files = [(job_dir / name, None) for name in JOB_FILES if own(job_dir / name)]
    for pattern in MEDIA:
        for path in sorted(job_dir.rglob(pattern)):
            nested = any((d / RECORD_NAME).is_file() for d in path.parents if job_dir in d.parents)
            if own(path) and not nested:
                folder = path.parent.relative_to(job_dir).as_posix()
                files.append((path, None if folder == "." else folder))
    return files


@dataclass
class Outcome:
    """What exporting one record did: created, replaced, unchanged, skipped or failed."""

    record: Path
    action: str
    run_id: str | None = None
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """``created   run <id>  <record>`` and the notes, one per line."""
        run = f"run {self.run_id}" if self.run_id else "no run"
        notes = [f"    note: {n}" for n in self.notes]
        return "\n".join([f"{self.action:<9} {run}  {self.record}", *notes])


@dataclass(frozen=True)
class RecordFile:
    """One ``record.json`` as read for export: its path and bytes, its key and digest."""

    path: Path
    data: bytes

    @classmethod
    def read(cls, path: Path | str) -> RecordFile:
        """Read the record (``path``: the file or its job directory; a FIFO is refused)."""
        path = Path(path).resolve()
        path = path / RECORD_NAME if path.is_dir() else path
        return cls(path, read_regular(path))

    @property
    def key(self) -> str:
        """The record's identity: a hash of its resolved job directory."""
        return _digest(str(self.path.parent).encode())

    @property
    def digest(self) -> str:
        """A hash of the record's bytes: another digest under the same key means it changed."""
        return _digest(self.data)


class MlflowExporter:
    """A store and ``experiment`` (made if missing; TrackingError if unusable); export logs once."""

    def __init__(self, uri: str | None = None, experiment: str = DEFAULT_EXPERIMENT) -> None:
        self.mlflow = import_mlflow()
        self.uri, self.experiment = resolve_uri(uri), experiment
        for name, value in HTTP_BOUNDS.items():
            os.environ.setdefault(name, value)
        self.client: Any = None
        self.experiment_id = self._connect()
        try:
            from mlflow.utils import validation  # deferred with mlflow
        except ImportError:
            validation = None  # older releases: 500-character params
        self.limits = Limits(getattr(validation, "MAX_PARAM_VAL_LENGTH", 500),
                             getattr(validation, "MAX_TAG_VAL_LENGTH", 5000))

    def _writable(self) -> None:
        """A SQLite file that cannot be written fails now: MLflow retries it for minutes."""
        if not self.uri.startswith("sqlite:///"):
            return
        path = self.uri[len("sqlite:///"):].partition("?")[0]
        try:
            with contextlib.closing(sqlite3.connect(path, timeout=5)) as database:
                database.execute("BEGIN IMMEDIATE")  # takes the write lock; nothing is written
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):  # another process writing it: writable
                raise TrackingError(
                    f"the MLflow database {path} cannot be written ({exc}). Pass a SQLite file in "
                    "a folder this user can write (`--mlflow sqlite:///$HOME/mlflow.db`) or a "
                    "tracking server (`--mlflow http://host:5000`).") from exc

    def _connect(self) -> str:
        """Open the store; the experiment's id, created (files beside a SQLite file) if missing."""
        self._writable()
        missing = [] if self.uri.split(":", 1)[0].split("+", 1)[0] not in SQL_SCHEMES else [
            name for name in ("sqlalchemy", "alembic") if importlib.util.find_spec(name) is None]
        if missing:
            raise TrackingError(
                f"the MLflow tracking URI {self.uri!r} is a database; MLflow's database stores "
                f"need sqlalchemy and alembic, and this environment lacks {' and '.join(missing)} "
                f"(mlflow-skinny leaves them out). Install them with `{INSTALL_HINT}`, or pass a "
                "tracking server URI (`--mlflow http://host:5000`).")
        try:
            self.client = self.mlflow.MlflowClient(tracking_uri=self.uri)
            found = self.client.get_experiment_by_name(self.experiment)
            if found is None:
                root = artifact_root(self.uri, self.experiment)
                return self.client.create_experiment(self.experiment, root)
        except Exception as exc:  # MlflowException, SQLAlchemy and OS errors alike for a bad store
            cause = (str(exc).strip().splitlines() or [""])[0][:400].rstrip(". ")
            raise TrackingError(
                f"the MLflow tracking URI {self.uri!r} cannot be used: {type(exc).__name__}: "
                f"{cause}. Pass a database URI (`--mlflow sqlite:///mlflow.db`, the default when "
                "no URI is given: a file in the working directory), a tracking server (`--mlflow "
                "http://host:5000`), or set MLFLOW_TRACKING_URI; for the `+tracking=mlflow` "
                "callback, `hydra.callbacks.mlflow.uri=...`. MLflow 3 refuses the ./mlruns file "
                "store unless MLFLOW_ALLOW_FILE_STORE=true.") from exc
        if found.lifecycle_stage != "active":
            raise TrackingError(
                f"the MLflow experiment {self.experiment!r} at {self.uri} is deleted. Restore it "
                f"(`mlflow experiments restore --experiment-id {found.experiment_id}`) or name "
                "another one with --mlflow-experiment / hydra.callbacks.mlflow.experiment.")
        return found.experiment_id

    def export(self, path: Path | str) -> Outcome:
        """Log the record at ``path`` (a ``record.json`` or its job dir) unless its run is there."""
        record = RecordFile.read(path)
        row = load_row(record.path, record.data)  # the bytes the digest is of, read once
        if row.get("status") == "broken":
            return Outcome(record.path, "skipped",
                           notes=[f"unreadable record: {row.get('error.message')}"])
        if row.get("run") == DRY_RUN:
            return Outcome(record.path, "skipped",
                           notes=["a dry run (dry_run=true) measured nothing"])
        existing = list(self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{KEY_TAG}` = '{record.key}'",
            max_results=1000))
        kept = next((r for r in existing if r.data.tags.get(DIGEST_TAG) == record.digest), None)
        if kept is None:
            fields = run_fields(json.loads(record.data), row, self.limits)
            run_id = self._log(record, row, fields)
        for run in existing:  # the other runs of this record: all of them once it is logged anew
            if run is not kept:
                self.client.delete_run(run.info.run_id)
        if kept is not None:
            return Outcome(record.path, "unchanged", kept.info.run_id)
        return Outcome(record.path, "replaced" if existing else "created", run_id, fields.summary())

    def _log(self, record: RecordFile, row: dict[str, Any], fields: RunFields) -> str:
        """A new run holding ``fields`` and the job's files; the digest tag, last, marks it done."""
        from mlflow.entities import Metric, Param, RunTag  # deferred with mlflow

        tags = {KEY_TAG: record.key, JOB_DIR_TAG: str(record.path.parent)}
        run_id = self.client.create_run(self.experiment_id,
                                        start_time=_epoch_ms(row.get("timing.started_at")),
                                        tags=tags, run_name=record.path.parent.name).info.run_id
        finished = _epoch_ms(row.get("timing.finished_at"))
        try:
            stamp = finished or int(time.time() * 1000)
            for batch in chunks((Param(k, v) for k, v in fields.params.items()), 100):
                self.client.log_batch(run_id, params=batch)
            for batch in chunks((RunTag(k, v) for k, v in fields.tags.items()), 100):
                self.client.log_batch(run_id, tags=batch)
            for batch in chunks((Metric(k, v, stamp, 0) for k, v in fields.metrics.items()), 1000):
                self.client.log_batch(run_id, metrics=batch)
            for path, folder in artifact_files(record.path.parent):
                self.client.log_artifact(run_id, str(path), folder)
            self.client.set_tag(run_id, DIGEST_TAG, record.digest)
        except BaseException:
            self.client.set_terminated(run_id, "FAILED")  # no digest: the next export replaces it
            raise
        if row.get("status") in RUN_STATUS:
            self.client.set_terminated(run_id, RUN_STATUS[row["status"]], finished)
        return run_id


def split_uri(value: str | None, paths: Sequence[str]) -> tuple[str | None, list[str]]:
    """``--mlflow VALUE``'s URI and the record paths: a value without a scheme is a path.
    >>> split_uri("multirun", ["outputs"]), split_uri("sqlite:///x.db", []), split_uri("", ["a"])
    ((None, ['multirun', 'outputs']), ('sqlite:///x.db', []), (None, ['a']))"""
    if value and not _SCHEME.match(value):
        return None, [value, *paths]
    return value or None, list(paths)


def run_mlflow(args: Any, settings: Any) -> int:
    """``report --mlflow``: a line per record, a count; exit 0, 1 (some refused) or 2."""
    uri, paths = split_uri(args.mlflow, args.paths)
    records = find_records(paths or list(settings.paths), missing_ok=not paths)
    try:
        exporter = MlflowExporter(uri, args.mlflow_experiment)
    except TrackingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    outcomes = []
    for record in records:
        try:
            outcomes.append(exporter.export(record))
        except Exception as exc:  # one bad record must not stop the others
            outcomes.append(Outcome(record, "failed",
                                    notes=[f"{type(exc).__name__}: {str(exc)[:300]}"]))
        print(f"mlflow: {outcomes[-1].line()}")
    counts = Counter(outcome.action for outcome in outcomes)
    done = ", ".join(f"{counts[a]} {a}"
                     for a in ("created", "replaced", "unchanged", "skipped", "failed"))
    print(f"mlflow: {len(records)} record(s): {done}; experiment {exporter.experiment!r} "
          f"(id {exporter.experiment_id}) at {exporter.uri}")
    return EXIT_SOME_FAILED if counts["failed"] else 0
