"""``python -m ascendbench.report --mlflow [URI] [paths...]``: every record found logged as an MLflow run.

Prints one line per record (``created``, ``replaced``, ``unchanged``, ``skipped``, ``failed``) and a count.
Exit status: 0 when every record was logged or was already there, 1 when MLflow refused some record (the
others are logged), 2 when MLflow is missing or the URI cannot be used (nothing is logged).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from ascendbench.errors import TrackingError
from ascendbench.report.gather import find_records
from ascendbench.tracking.mlflow_export import MlflowExporter, Outcome

EXIT_SOME_FAILED = 1
EXIT_UNUSABLE = 2
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def split_uri(value: str | None, paths: Sequence[str]) -> tuple[str | None, list[str]]:
    """``--mlflow VALUE``'s URI and the record paths: a value without a scheme (``multirun/``) is a path.

    >>> split_uri("multirun", ["outputs"]), split_uri("sqlite:///x.db", []), split_uri("", ["a"])
    ((None, ['multirun', 'outputs']), ('sqlite:///x.db', []), (None, ['a']))
    """
    if value and not _SCHEME.match(value):
        return None, [value, *paths]
    return value or None, list(paths)


def export_one(exporter: MlflowExporter, record: Path) -> Outcome:
    """Export one record; an error MLflow or the file system raises for it becomes a ``failed`` outcome."""
    try:
        return exporter.export(record)
    except Exception as exc:  # one bad record must not stop the others: reported, and the exit status says so
        return Outcome(record, "failed", notes=[f"{type(exc).__name__}: {str(exc)[:300]}"])


def run_mlflow(args: Any, settings: Any) -> int:
    """The ``--mlflow`` mode of ``python -m ascendbench.report`` (``args``: its parsed options)."""
    uri, paths = split_uri(args.mlflow, args.paths)
    records = find_records(paths or list(settings.paths), missing_ok=not paths)
    try:
        exporter = MlflowExporter(uri, args.mlflow_experiment)
    except TrackingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    outcomes = [export_one(exporter, record) for record in records]
    for outcome in outcomes:
        print(f"mlflow: {outcome.line()}")
    counts = Counter(outcome.action for outcome in outcomes)
    done = ", ".join(f"{counts[a]} {a}" for a in ("created", "replaced", "unchanged", "skipped", "failed"))
    print(f"mlflow: {len(records)} record(s): {done}; experiment {exporter.experiment!r} "
          f"(id {exporter.experiment_id}) at {exporter.uri}")
    return EXIT_SOME_FAILED if counts["failed"] else 0
