"""Resume: a job whose directory holds an ``ok`` record of the same config is not run again."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendbench.config.targets import build
from ascendbench.fileio import read_regular
from ascendbench.job.failures import applied
from ascendbench.job.record import RECORD_NAME, SCHEMA_VERSION
from ascendbench.metrics.verdict import as_number, judge, worst
from ascendbench.models.base import locate
from ascendbench.models.sources import files_digest, hub_forced_offline

log = logging.getLogger(__name__)

IGNORED_KEYS = ("resume", "objective")  # how a job is resumed or reports to a search


def comparable(config: Any) -> Any:
    """The config as plain JSON values without the resume settings, for an equality test."""
    plain = json.loads(json.dumps(config, default=str))
    return {k: v for k, v in plain.items() if k not in IGNORED_KEYS} if isinstance(
        plain, dict) else plain


def weights_files(cfg: DictConfig) -> tuple[Path, ...]:
    """The weight files ``model.source`` resolves to now (local paths and the hub cache only)."""
    if str(cfg.model.weights) == "random":
        return ()
    loader = build(cfg.model.loader, "model.loader")
    with hub_forced_offline():
        found = locate(loader, cfg.model.source, cfg.model.get("revision"))
    return tuple(sorted(getattr(found, "files", ()) or ()))


def files_stat(files: tuple[Path, ...]) -> list[list[Any]]:
    """``[path, size, mtime_ns]`` of each file: the cheap first check that weights are the same."""
    return [[str(path), Path(path).stat().st_size, Path(path).stat().st_mtime_ns] for path in files]


def weights_change(cfg: DictConfig, record: dict[str, Any]) -> str | None:
    """Why the weights at ``model.source`` are not those the record ran with, or ``None``."""
    weights = record.get("weights") if isinstance(record.get("weights"), dict) else {}
    files = weights_files(cfg)
    if weights.get("kind") != "loaded":
        return (f"weights are now found at model.source ({len(files)} file(s)); the record ran "
                "random-init") if files else None
    if not files:
        return "the weights the record loaded are no longer found at model.source"
    if weights.get("files_stat") == files_stat(files):
        return None
    digest = files_digest(files)
    if digest == weights.get("digest"):
        return None
    return (f"the weights at model.source changed (digest {digest} now, {weights.get('digest')} "
            "in the record)")


def rejudged(name: str, entry: dict[str, Any]) -> str | None:
    """Why a metric entry not marked FAIL fails its own ``<=``/``>=`` rule (None: it holds up)."""
    op, bound = str(entry.get("rule")).partition(" ")[0], as_number(entry.get("threshold"))
    if op not in ("<=", ">=") or bound is None or entry.get("verdict") == "FAIL":
        return None
    value, key = entry.get("value"), "max" if op == "<=" else "min"
    if "not_judged" in entry or judge(value, {key: bound})["verdict"] == "PASS":
        return None
    held = "no value (NaN)" if as_number(value) is None else f"{value!r}, beyond {op} {bound:g}"
    return f"its metric {name!r} says {entry.get('verdict')} but holds {held}"


def untrustworthy(record: dict[str, Any], dry_run: bool = False) -> str | None:
    """Why an ``ok`` record does not hold up (schema, dry run, metrics, verdict, outputs)."""
    if record.get("schema") != SCHEMA_VERSION:
        return f"it is of schema {record.get('schema')!r}, this ascendbench writes {SCHEMA_VERSION}"
    if "plan" in record and not dry_run:
        return "it is a dry run's record (a plan; nothing was measured)"
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
    metrics = {k: m for k, m in metrics.items() if isinstance(m, dict)}
    if why := next(filter(None, (rejudged(k, m) for k, m in metrics.items())), None):
        return why
    derived = worst(m.get("verdict") for m in metrics.values())
    claimed = record.get("verdict")
    if claimed != derived and not (claimed is None and derived == "PASS"):
        return f"its verdict {claimed!r} is not the one its metrics give ({derived!r})"
    outputs = record.get("outputs")
    if "plan" not in record and (not isinstance(outputs, dict) or not outputs):
        return "it holds no outputs"
    return None


def finished_record(cfg: DictConfig, job_dir: Path | str) -> dict[str, Any] | None:
    """The existing ``ok`` record of ``job_dir`` when the job can be skipped, else ``None``."""
    if not OmegaConf.select(cfg, "resume.enabled", default=True) or OmegaConf.select(
            cfg, "resume.force", default=False):
        return None
    path = Path(job_dir) / RECORD_NAME
    try:
        record = json.loads(read_regular(path))  # a FIFO planted as record.json is refused
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("resume: %s cannot be read (%s: %.200s); running the job again", path,
                    type(exc).__name__, exc)
        return None
    if not isinstance(record, dict) or record.get("status") != "ok":
        return None
    try:
        current = applied(OmegaConf.to_container(cfg, resolve=True))
    except OmegaConfBaseException:  # a broken interpolation: the job runs and fails with its record
        return None
    if comparable(record.get("config")) != comparable(current):
        log.info("resume: %s is ok but its config differs from this job's; running again", path)
        return None
    try:
        change = weights_change(cfg, record)
    except Exception as exc:  # e.g. a loader that cannot be built: the job runs and reports it
        text = " ".join(str(exc).split())[:200]
        change = f"its weights cannot be checked ({type(exc).__name__}: {text})"
    change = change or untrustworthy(record, bool(cfg.get("dry_run", False)))
    if change is not None:
        log.info("resume: %s is ok but %s; running again", path, change)
        return None
    log.info("resume: skipped, %s is ok with this same config and weights (resume.force=true runs "
             "it again)", path)
    return record
