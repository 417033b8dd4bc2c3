"""Resume: a job whose directory already holds an ``ok`` record of the very same config is not re-run.

Re-running a sweep into the same sweep directory therefore only runs the jobs that are missing,
failed, were interrupted or killed (a killed job's record still says ``running``), or whose config
changed. ``resume.force=true`` runs everything again; ``resume.enabled=false`` turns the check off.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendbench.job.record import RECORD_NAME

log = logging.getLogger(__name__)

IGNORED_KEYS = ("resume",)  # how a job is resumed does not change what it computes


def comparable(config: Any) -> Any:
    """The config as plain JSON values without the resume settings, for an equality test."""
    plain = json.loads(json.dumps(config, default=str))
    if isinstance(plain, dict):
        for key in IGNORED_KEYS:
            plain.pop(key, None)
    return plain


def finished_record(cfg: DictConfig, job_dir: Path | str) -> dict[str, Any] | None:
    """The existing record of ``job_dir`` when the job can be skipped, else ``None``.

    A job is skipped when resume is enabled, not forced, and ``<job_dir>/record.json`` has status
    ``ok`` and the same resolved config (ignoring ``resume.*``).
    """
    enabled = OmegaConf.select(cfg, "resume.enabled", default=True)
    if not enabled or OmegaConf.select(cfg, "resume.force", default=False):
        return None
    path = Path(job_dir) / RECORD_NAME
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("status") != "ok":
        return None
    try:
        current = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException:  # a broken interpolation: let the job run and fail with its record
        return None
    if comparable(record.get("config")) != comparable(current):
        log.info("resume: %s is ok but its config differs from this job's; running again", path)
        return None
    log.info("resume: skipped, %s is ok with this same config (resume.force=true runs it again)", path)
    return record
