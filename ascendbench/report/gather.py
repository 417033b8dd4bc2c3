"""Records -> rows -> one DataFrame (dotted columns); an unreadable record is a ``broken`` row."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ascendbench.digits import printable
from ascendbench.errors import ReportError
from ascendbench.fileio import read_regular
from ascendbench.job.record import RECORD_NAME, SCHEMA_VERSION
from ascendbench.report.fmt import DRY_RUN, ORDER, present
from ascendbench.report.hidden import hidden_fields

log = logging.getLogger(__name__)

# Row order of every table: sweep order, the record path as a tie-breaker; values not in ORDER
# follow it, alphabetically.
SORT_KEYS = ("job.model", "job.device", "job.preset", "job.batch_size", "size.pixels",
             "job.num_frames", "job.steps", "job.dtype", "record")
# Preset fields a task uses beyond height/width/batch, read from ``config.preset`` when ``job``
# lacks them.
TASK_PRESET_FIELDS = {"TextToVideoTask": ("num_frames", "steps"),
                      "VideoDecodeTask": ("num_frames",),
                      "VideoTokenizerTask": ("num_frames", "steps")}
_SECTIONS = ("error", "job", "weights", "baseline", "bench", "env", "timing", "pipeline",
             "distributed")
_MAPPINGS = ("error", "job", "weights", "baseline", "bench", "env", "timing", "metrics", "inputs",
             "compare", "config", "plan")
INPUT_FIELDS = ("shape", "dtype", "sha256", "mean", "std", "min", "max", "nonfinite")
CONFIG_COLUMN = "config"  # the resolved config as JSON: what tells A/B variants apart
# What tells jobs apart lands in headings, file names and rows: names this tool writes use only
# these characters; anything else is refused before it can become a Markdown heading or HTML tag.
IDENTITY_FIELDS = ("model", "device", "device_requested", "dtype", "dtype_requested", "preset",
                   "task")
_IDENTITY = re.compile(r"[A-Za-z0-9_.:/+@=,-]{1,200}")


def find_records(paths: Iterable[Path | str], missing_ok: bool = False) -> list[Path]:
    """Every ``record.json`` under the given directories (or the given files), sorted, once; one in
    a directory linking outside it is left out (ReportError: a path missing, unless missing_ok)."""
    found: set[Path] = set()
    for path in map(Path, paths):
        if path.is_file():
            found.add(path.resolve())
        elif path.is_dir():
            root = path.resolve()
            for record in path.rglob(RECORD_NAME):
                real = record.resolve()
                if real.is_relative_to(root):
                    found.add(real)
                else:
                    log.warning("left out %s: it is a link to %s, outside %s (a record is read "
                                "only from inside the directory it was found in; pass the file "
                                "itself to read it)", record, real, path)
        elif not missing_ok:
            raise ReportError(
                f"report path {str(path)!r} does not exist. Pass directories that hold job outputs "
                "(e.g. `outputs multirun`) or record.json files: `python -m ascendbench.report "
                "PATH...`.")
    return sorted(found)


def _bounded_int(literal: str) -> int:
    value = int(literal)
    if abs(value) > 1e308:
        raise ValueError(f"the number {literal[:20]}... ({len(literal)} digits) is too large for a "
                         "float")
    return value


def load_row(path: Path, data: bytes | None = None) -> dict[str, Any]:
    """The row of the record at ``path`` (or its bytes); a ``broken`` row if unreadable."""
    path = Path(path)
    try:
        record = _printable(json.loads(read_regular(path) if data is None else data,
                                       parse_int=_bounded_int))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        return _broken(path, f"{type(exc).__name__}: {exc}")
    except RecursionError:
        return _broken(path, "RecursionError: the JSON is nested too deeply to read (not a record "
                             "this tool writes)")
    if problem := malformed(record):
        return _broken(path, problem)
    if isinstance(record.get("schema"), int) and record["schema"] > SCHEMA_VERSION:
        log.warning("%s is a record of schema %s, newer than this ascendbench's %s: shown as read, "
                    "its fields may be misread; report it with a newer ascendbench", path,
                    record["schema"], SCHEMA_VERSION)
    try:
        return record_row(record, path)
    except RecursionError:
        return _broken(path, "RecursionError: a section is nested too deeply to flatten")


def _printable(value: Any) -> Any:
    """The parsed record with every text's control characters escaped (the one cleaning for all)."""
    if isinstance(value, dict):
        return {printable(key): _printable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_printable(item) for item in value]
    return printable(value) if isinstance(value, str) else value


def malformed(record: Any) -> str | None:
    """Why ``record`` is not a record this report can read, or None when it is one."""
    if not isinstance(record, dict) or "status" not in record:
        return "not an ascendbench record (no top-level 'status')"
    wrong = [f"'{key}' is a {type(record[key]).__name__}" for key in _MAPPINGS
             if record.get(key) is not None and not isinstance(record[key], Mapping)]
    if not isinstance(record["status"], str):
        wrong.insert(0, f"'status' is a {type(record['status']).__name__}")
    if wrong:
        return ("malformed record: " + ", ".join(wrong)
                + " (expected a string status and JSON objects)")
    job = record.get("job") or {}
    odd = [key for key in IDENTITY_FIELDS if job.get(key) is not None
           and not (isinstance(job[key], str) and _IDENTITY.fullmatch(job[key]))]
    if odd:
        return (f"malformed record: job.{', job.'.join(odd)} holds characters no name written by "
                "ascendbench has (allowed: letters, digits and _ . : / + @ = , -; at most 200)")
    return None


def _broken(path: Path, reason: str) -> dict[str, Any]:
    return {"record": str(path), "job_dir": str(path.parent), "status": "broken",
            "error.type": "UnreadableRecord", "error.message": reason}


def derived_job_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """``job.num_frames`` / ``job.steps`` from ``config.preset`` when ``job`` lacks them."""
    job, config = record.get("job") or {}, record.get("config") or {}
    preset = config.get("preset") if isinstance(config.get("preset"), Mapping) else {}
    task = str(job.get("task") or "").rsplit(".", 1)[-1]
    values = {name: job.get(name, preset.get(name)) for name in TASK_PRESET_FIELDS.get(task, ())}
    return {f"job.{name}": value for name, value in values.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)}


def record_row(record: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """Flatten one record into a row of scalars with dotted keys (``bench.latency.median_ms``)."""
    config = record.get("config") or {}
    dry = "plan" in record or config.get("dry_run") is True
    row: dict[str, Any] = {"record": str(path), "job_dir": str(Path(path).parent),
                           "status": record.get("status"), "verdict": record.get("verdict"),
                           "run": DRY_RUN if dry else "job"}
    for section in _SECTIONS:
        if isinstance(record.get(section), Mapping):
            flat = flatten(record[section], section)
            if section == "env":  # an explicit null in env means "not present on that host"
                flat = {k: "none" if v is None else v for k, v in flat.items()}
            row.update(flat)
    row.update(derived_job_fields(record))
    metrics = record.get("metrics") or {}
    for name, entry in metrics.items():
        if isinstance(entry, Mapping):
            row.update(flatten(entry, f"metrics.{name}"))
    row.update(hidden_fields(metrics, record.get("compare")))
    inputs = record.get("inputs") if isinstance(record.get("inputs"), Mapping) else {}
    parts = [f"{n}:{e.get('sha256')}" for n, e in sorted(inputs.items()) if isinstance(e, Mapping)]
    row["inputs.digest"] = ("sha256:" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
                            if inputs else None)
    row.update({key: value for name, entry in inputs.items() if isinstance(entry, Mapping)
                for key, value in flatten(entry, f"inputs.{name}").items()
                if key.rsplit(".", 1)[-1] in INPUT_FIELDS})
    warnings = record.get("warnings")
    row["warnings"] = (" | ".join(str(w) for w in warnings) if isinstance(warnings, list)
                       else str(warnings or ""))
    row["artifacts"] = json.dumps(record.get("artifacts") or {}, sort_keys=True)
    row.update(profile_fields(record.get("profile")))
    row.update(ab_fields(record.get("ab")))
    row[CONFIG_COLUMN] = json.dumps(config, sort_keys=True, default=str)
    row["patches"] = json.dumps(record.get("patches") or {}, sort_keys=True, default=str)
    numeric = ("metrics.", "bench.", "hidden.")  # numbers the record may hold as "inf"/"-inf"
    return {k: float(v) if k.startswith(numeric) and v in ("inf", "-inf") else v
            for k, v in row.items()}


def ab_fields(section: Any) -> dict[str, Any]:
    """``ab.verdict``, ``ab.effect``, ``ab.speedup_paired`` of ``ab``, when typed right."""
    decision = section.get("decision") if isinstance(section, Mapping) else None
    if not isinstance(decision, Mapping):
        return {}
    found = {f"ab.{k}": decision[k] for k in ("verdict", "effect")
             if isinstance(decision.get(k), str)}
    speedup = section.get("speedup_paired")
    if isinstance(speedup, (int, float)) and not isinstance(speedup, bool):
        found["ab.speedup_paired"] = float(speedup)
    return found


def flatten(mapping: Mapping[str, Any], prefix: str, lists: bool = False) -> dict[str, Any]:
    """Nested mapping -> ``{prefix.key.sub: scalar}``; lists as JSON (with ``lists``: by index)."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if lists and isinstance(value, list) and value and all(isinstance(v, Mapping)
                                                               for v in value):
            value = dict(enumerate(value))
        if isinstance(value, Mapping):
            flat.update(flatten(value, name, lists))
        elif isinstance(value, (list, tuple)):
            if lists or key != "samples_ms" and all(not isinstance(v, (dict, list)) for v in value):
                flat[name] = json.dumps(list(value))
        else:
            flat[name] = value
    return flat


def records_frame(paths: Iterable[Path | str], missing_ok: bool = False) -> pd.DataFrame:
    """All records under ``paths`` as one DataFrame in sweep order (empty frame if none)."""
    rows = [load_row(p) for p in find_records(paths, missing_ok=missing_ok)]
    if not rows:
        return pd.DataFrame(columns=["record", "job_dir", "status"])
    order = sorted(range(len(rows)), key=lambda i: tuple(_sort_key(k, rows[i]) for k in SORT_KEYS))
    return pd.DataFrame(rows).iloc[order].reset_index(drop=True)


def _sort_key(key: str, row: Mapping[str, Any]) -> tuple:
    """Ranked names first (:data:`ORDER`), then numbers, then text, missing last."""
    value = row.get(key)
    if key == "size.pixels":
        height, width = row.get("job.height"), row.get("job.width")
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool)
                      for v in (height, width))
        value = height * width if numeric else None
    if not present(value):
        return (3, 0.0, "")
    if key in ORDER and value in ORDER[key]:
        return (0, float(ORDER[key].index(value)), "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, float(value), "")
    return (2, 0.0, str(value))

KEY = ("job.model", "job.device", "job.dtype", "job.preset", "job.batch_size", "job.height",
       "job.width", "job.num_frames", "job.steps", "job.seed")


def profile_fields(section: Any) -> dict[str, Any]:
    """A record's ``profile`` as row fields: its numbers as ``profile.<key>``, the table as JSON."""
    if not isinstance(section, Mapping):
        return {}
    fields = {f"profile.{k}": v for k, v in section.items()
              if isinstance(v, (str, int, float, bool)) or v is None}
    if isinstance(section.get("top"), list):
        fields["profile.top"] = json.dumps([r for r in section["top"] if isinstance(r, Mapping)])
    return fields
