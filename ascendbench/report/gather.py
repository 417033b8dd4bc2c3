"""Records -> rows -> one pandas DataFrame (one row per ``record.json``, dotted column names).

A record that cannot be read becomes a row with ``status: broken`` and the reason, so that nothing
found on disk silently disappears from a summary or a report: unreadable JSON, a number too large for a
float, nesting too deep to walk, or a section of the wrong type (``metrics`` that is a string).
A dry run keeps the status its record states (``ok``) and is labelled ``run: dry-run``: it measured
nothing, so the tables never show it as a measured job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ascendbench.errors import ReportError
from ascendbench.fileio import read_regular
from ascendbench.job.record import RECORD_NAME
from ascendbench.report.fmt import present
from ascendbench.report.hidden import hidden_fields
from ascendbench.report.profile import profile_fields

log = logging.getLogger(__name__)

# Row order of every table: sweep order (presets mini, balanced, quality; then batch, size, dtype), the
# record path as a tie-breaker. Values not in an order table follow it, alphabetically.
SORT_KEYS = ("job.model", "job.device", "job.preset", "job.batch_size", "size.pixels", "job.num_frames",
             "job.steps", "job.dtype", "record")
ORDER = {"job.preset": ("mini", "balanced", "quality"), "job.dtype": ("float32", "float16", "bfloat16")}
# Preset fields a task uses beyond height/width/batch, by task class (the record's ``job.task``), for records
# whose ``job`` section does not carry them: read from the record's resolved ``config.preset``.
TASK_PRESET_FIELDS = {"TextToVideoTask": ("num_frames", "steps"), "VideoDecodeTask": ("num_frames",),
                      "VideoTokenizerTask": ("num_frames", "steps")}
# Record fields whose numbers may arrive as the strings "inf"/"-inf" (see record._jsonable).
_NUMERIC_PREFIXES = ("metrics.", "bench.", "hidden.")
_SKIPPED_LISTS = ("samples_ms",)
_MAPPING_SECTIONS = ("error", "job", "weights", "baseline", "bench", "env", "timing", "metrics", "inputs",
                     "compare", "config", "plan")
INPUT_FIELDS = ("shape", "dtype", "sha256", "mean", "std", "min", "max", "nonfinite")
DRY_RUN = "dry-run"
# The resolved config as JSON text: what tells A/B variants apart (report.variants); not in records/summary.csv.
CONFIG_COLUMN = "config"


def find_records(paths: Iterable[Path | str], missing_ok: bool = False) -> list[Path]:
    """Every ``record.json`` under the given directories (or the given files), sorted, no duplicates.

    A ``record.json`` found in a directory is data: one that is a link to a file outside that directory (planted
    by whoever can write there, pointing at a file of the user running the report) is left out with a warning,
    never read, tabled or uploaded. A record file named on the command line is the user's own choice and read.

    Args:
        paths: directories searched recursively, or record files.
        missing_ok: skip paths that do not exist (the defaults ``outputs/``, ``multirun/``).

    Raises:
        ReportError: a path does not exist and ``missing_ok`` is false.
    """
    found: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.add(path.resolve())
        elif path.is_dir():
            found.update(_confined_records(path))
        elif not missing_ok:
            raise ReportError(
                f"report path {str(path)!r} does not exist. Pass directories that hold job outputs "
                "(e.g. `outputs multirun`) or record.json files: `python -m ascendbench.report PATH...`."
            )
    return sorted(found)


def _confined_records(folder: Path) -> list[Path]:
    """The ``record.json`` files under ``folder`` whose real path stays inside it (links resolved)."""
    root, kept = folder.resolve(), []
    for path in folder.rglob(RECORD_NAME):
        real = path.resolve()
        if real.is_relative_to(root):
            kept.append(real)
        else:
            log.warning("left out %s: it is a link to %s, outside %s (a record is read only from inside the "
                        "directory it was found in; pass the file itself to read it)", path, real, folder)
    return kept


def load_row(path: Path, data: bytes | None = None) -> dict[str, Any]:
    """One row for the record at ``path`` (its bytes ``data`` when the caller already read them); an unreadable
    or malformed record gives a ``broken`` row saying why."""
    path = Path(path)
    try:
        record = json.loads(read_regular(path) if data is None else data, parse_int=_bounded_int)  # no FIFO wait
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        return _broken(path, f"{type(exc).__name__}: {exc}")
    except RecursionError:
        return _broken(path, "RecursionError: the JSON is nested too deeply to read (not a record this tool writes)")
    problem = malformed(record)
    if problem:
        return _broken(path, problem)
    try:
        return record_row(record, path)
    except RecursionError:
        return _broken(path, "RecursionError: a section is nested too deeply to flatten")


def _bounded_int(literal: str) -> int:
    """JSON integers as Python ints, refusing those no float can hold (``10**400``)."""
    value = int(literal)
    if abs(value) > 1e308:
        raise ValueError(f"the number {literal[:20]}... ({len(literal)} digits) is too large for a float")
    return value


def malformed(record: Any) -> str | None:
    """Why ``record`` is not a record this report can read, or None when it is one."""
    if not isinstance(record, dict) or "status" not in record:
        return "not an ascendbench record (no top-level 'status')"
    wrong = [f"'{key}' is a {type(record[key]).__name__}" for key in _MAPPING_SECTIONS
             if record.get(key) is not None and not isinstance(record[key], Mapping)]
    if not isinstance(record["status"], str):
        wrong.insert(0, f"'status' is a {type(record['status']).__name__}")
    if wrong:
        return "malformed record: " + ", ".join(wrong) + " (expected a string status and JSON objects)"
    return _odd_identity(record.get("job") or {})


# What tells jobs apart lands in headings, file names, filters and table rows: the words this tool writes there
# (config group names, dtypes, ``npu:0``, task classes) use only these characters; anything else is not a record
# this tool wrote, and is refused before it can become a Markdown heading or an HTML tag.
IDENTITY_FIELDS = ("model", "device", "device_requested", "dtype", "dtype_requested", "preset", "task")
_IDENTITY = re.compile(r"[A-Za-z0-9_.:/+@=,-]{1,200}")


def _odd_identity(job: Mapping[str, Any]) -> str | None:
    odd = [key for key in IDENTITY_FIELDS
           if job.get(key) is not None and not (isinstance(job[key], str) and _IDENTITY.fullmatch(job[key]))]
    if not odd:
        return None
    return (f"malformed record: job.{', job.'.join(odd)} holds characters no name written by ascendbench has "
            "(allowed: letters, digits and _ . : / + @ = , -; at most 200)")


def _broken(path: Path, reason: str) -> dict[str, Any]:
    return {"record": str(path), "job_dir": str(path.parent), "status": "broken",
            "error.type": "UnreadableRecord", "error.message": reason}


def is_dry_run(record: Mapping[str, Any]) -> bool:
    """True for the record of a ``dry_run=true`` job (it carries a ``plan`` and measured nothing)."""
    config = record.get("config") or {}
    return "plan" in record or config.get("dry_run") is True


def derived_job_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """``job.num_frames`` / ``job.steps`` from ``config.preset`` for tasks that use them, when ``job`` lacks them."""
    job, config = record.get("job") or {}, record.get("config") or {}
    preset = config.get("preset") if isinstance(config.get("preset"), Mapping) else {}
    task = str(job.get("task") or "").rsplit(".", 1)[-1]
    fields = {}
    for name in TASK_PRESET_FIELDS.get(task, ()):
        value = job.get(name, preset.get(name))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            fields[f"job.{name}"] = value
    return fields


def record_row(record: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """Flatten one record into a row of scalars with dotted keys (``bench.latency.median_ms``)."""
    row: dict[str, Any] = {"record": str(path), "job_dir": str(Path(path).parent),
                           "status": record.get("status"), "verdict": record.get("verdict"),
                           "run": DRY_RUN if is_dry_run(record) else "job"}
    for section in ("error", "job", "weights", "baseline", "bench", "env", "timing", "pipeline", "distributed"):
        value = record.get(section)
        if isinstance(value, Mapping):
            flat = flatten(value, section)
            if section == "env":  # an explicit null in env means "not present on that host"
                flat = {k: "none" if v is None else v for k, v in flat.items()}
            row.update(flat)
    row.update(derived_job_fields(record))
    metrics = record.get("metrics") or {}
    for name, entry in metrics.items():
        if isinstance(entry, Mapping):
            row.update(flatten(entry, f"metrics.{name}"))
    row.update(hidden_fields(metrics, record.get("compare")))
    row["inputs.digest"] = inputs_digest(record.get("inputs"))
    row.update(input_fields(record.get("inputs")))
    warnings = record.get("warnings")
    row["warnings"] = " | ".join(str(w) for w in warnings) if isinstance(warnings, list) else str(warnings or "")
    row["artifacts"] = json.dumps(record.get("artifacts") or {}, sort_keys=True)
    row.update(profile_fields(record.get("profile")))  # profile.* numbers, profile.top as JSON text
    row.update(ab_fields(record.get("ab")))  # bench.ab=unpatched: the verdict, not the two sides' samples
    row[CONFIG_COLUMN] = json.dumps(record.get("config") or {}, sort_keys=True, default=str)
    row["patches"] = json.dumps(record.get("patches") or {}, sort_keys=True, default=str)
    return {key: _number(key, value) for key, value in row.items()}


def ab_fields(section: Any) -> dict[str, Any]:
    """``ab.verdict``, ``ab.effect`` (text) and ``ab.speedup_paired`` (a number) of the record's ``ab`` section, those
    of the right type only (a record is data); the sides' own sections stay in the record."""
    decision = section.get("decision") if isinstance(section, Mapping) else None
    if not isinstance(decision, Mapping):
        return {}
    found = {f"ab.{k}": decision.get(k) for k in ("verdict", "effect") if isinstance(decision.get(k), str)}
    speedup = section.get("speedup_paired")
    if isinstance(speedup, (int, float)) and not isinstance(speedup, bool):
        found["ab.speedup_paired"] = float(speedup)
    return found


def flatten(mapping: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Nested mapping -> ``{prefix.key.sub: scalar}``; lists of scalars become JSON text."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}.{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name))
        elif isinstance(value, (list, tuple)):
            if key not in _SKIPPED_LISTS and all(not isinstance(v, (dict, list)) for v in value):
                flat[name] = json.dumps(list(value))
        else:
            flat[name] = value
    return flat


def _number(key: str, value: Any) -> Any:
    if isinstance(value, str) and key.startswith(_NUMERIC_PREFIXES) and value in ("inf", "-inf"):
        return math.inf if value == "inf" else -math.inf
    return value


def input_fields(inputs: Any) -> dict[str, Any]:
    """``inputs.<name>.<field>`` for each input's shape, dtype, SHA256 and statistics (the layer seed's first
    lines: the latent's shape, dtype, mean/std/min/max); its first/last values stay in the record."""
    if not isinstance(inputs, Mapping):
        return {}
    return {key: value for name, entry in inputs.items() if isinstance(entry, Mapping)
            for key, value in flatten(entry, f"inputs.{name}").items() if key.rsplit(".", 1)[-1] in INPUT_FIELDS}


def inputs_digest(inputs: Any) -> str | None:
    """One digest over the inputs' SHA256s: equal digests mean the jobs saw identical inputs."""
    if not isinstance(inputs, Mapping) or not inputs:
        return None
    parts = [f"{name}:{entry.get('sha256')}" for name, entry in sorted(inputs.items()) if isinstance(entry, Mapping)]
    return "sha256:" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def records_frame(paths: Iterable[Path | str], missing_ok: bool = False) -> pd.DataFrame:
    """All records under ``paths`` as one DataFrame, rows in a stable order (empty frame if none)."""
    rows = [load_row(p) for p in find_records(paths, missing_ok=missing_ok)]
    return rows_frame(rows)


def rows_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows -> DataFrame in sweep order (:data:`SORT_KEYS`, :data:`ORDER`); missing values are ``None``/``NaN``."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=["record", "job_dir", "status"])
    pixels = [_pixels(r) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: tuple(_sort_key(k, pixels[i] if k == "size.pixels"
                                                                   else rows[i].get(k)) for k in SORT_KEYS))
    return frame.iloc[order].reset_index(drop=True)


def _pixels(row: Mapping[str, Any]) -> Any:
    height, width = row.get("job.height"), row.get("job.width")
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (height, width))
    return height * width if numeric else None


def _sort_key(key: str, value: Any) -> tuple:
    """Ranked names first (in :data:`ORDER`), then numbers, then text, missing last; mixed types never fail."""
    if not present(value):
        return (3, 0.0, "")
    if key in ORDER and value in ORDER[key]:
        return (0, float(ORDER[key].index(value)), "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, float(value), "")
    return (2, 0.0, str(value))
