"""One launch of the CLI: its jobs' directories, the launch guard, and its jobs' outcomes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import AscendBenchError
from ascendbench.fileio import write_atomic
from ascendbench.job.claim import check_job_dir, claim, release

log = logging.getLogger(__name__)

TOKEN_VARIABLE = "ASCENDBENCH_LAUNCH"
OUTCOMES_DIR = ".ascendbench"
MAX_NAME_BYTES = 240  # readable part of a sweep job's directory name (file systems allow 255)
NOT_IDENTITY = ("resume.force", "resume.enabled", "tracking")  # how a job runs, not what it does
_OUTCOMES: list[dict[str, Any]] = []  # outcomes of the jobs of this process's last multirun


class LaunchRefused(SystemExit):
    """A run or sweep refused before anything runs (a SystemExit: Hydra would only warn)."""


def _shortened(name: str) -> str:
    """``name`` if it fits :data:`MAX_NAME_BYTES`, else the shortest overrides that fit."""
    if len(name.encode()) <= MAX_NAME_BYTES:
        return name
    items = name.split(",")
    kept, used = set(), 0
    for index in sorted(range(len(items)), key=lambda i: len(items[i].encode())):
        used += len(items[index].encode()) + 1
        if used > MAX_NAME_BYTES:
            break
        kept.add(index)
    return ",".join(items[i] for i in sorted(kept))


def job_subdir(readable: str, overrides: Any) -> str:
    """A sweep job's directory name: ``readable`` plus ``_<hash>`` of its overrides if needed."""
    identity = sorted(str(o) for o in overrides or []
                      if str(o).split("=", 1)[0].lstrip("+~") not in NOT_IDENTITY)
    safe = str(readable).replace(os.sep, "_").replace("\0", "_")
    if os.altsep:
        safe = safe.replace(os.altsep, "_")
    short = _shortened(safe)
    if short and short == str(readable) and all(o in short for o in identity):  # nothing hidden
        return short
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:8]
    return f"{short.rstrip(',') or 'job'}_{digest}"


def register_resolvers() -> None:
    """Register ``ascendbench.launch`` (6 random hex digits per launch), ``ascendbench.subdir``."""
    OmegaConf.register_new_resolver("ascendbench.launch", lambda: secrets.token_hex(3),
                                    use_cache=True, replace=True)
    OmegaConf.register_new_resolver("ascendbench.subdir", job_subdir, replace=True)


def _token(config: DictConfig | None = None) -> str | None:
    node = config.hydra if config is not None else HydraConfig.get()
    return OmegaConf.select(node, f"job.env_set.{TOKEN_VARIABLE}") or os.environ.get(TOKEN_VARIABLE)


def _outcomes_dir(sweep_dir: str | Path, token: str) -> Path:
    return Path(sweep_dir) / OUTCOMES_DIR / f"launch-{token}"


def note_outcome(status: str, job_dir: Path, **more: Any) -> None:
    """In a sweep job: leave its gated status (and ``more``) for the launch that started it."""
    hydra = HydraConfig.get()
    if getattr(hydra.mode, "name", str(hydra.mode)) != "MULTIRUN" or not (token := _token()):
        return
    path = _outcomes_dir(hydra.sweep.dir, token) / f"{hydra.job.num}.json"
    outcome = {"status": status, "job_dir": str(job_dir), "pid": os.getpid(), **more}
    try:
        write_atomic(path, json.dumps(outcome))
    except AscendBenchError as exc:
        log.error("the outcome of this job could not be left for the sweep's exit status: %s", exc)


def launch_outcomes() -> list[dict[str, Any]]:
    """The outcomes of the jobs of this process's last multirun, handed over once (else ``[]``)."""
    outcomes, _OUTCOMES[:] = list(_OUTCOMES), []
    return outcomes


class LaunchGuard(Callback):
    """Check and claim the run or sweep dir before it runs; after a sweep, collect its outcomes."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse (one paragraph, nothing written) a run dir unusable or held by another process."""
        _claim_or_refuse(config.hydra.run.dir, "hydra.run.dir")

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Give the run dir back (the job releases it itself; this covers Hydra failing first)."""
        release(os.path.abspath(str(config.hydra.run.dir)))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse a sweep dir unusable or held by another launch; fix this launch's token."""
        _token(config)  # resolved here, in the launching process: its cached value reaches all
        _claim_or_refuse(config.hydra.sweep.dir, "hydra.sweep.dir")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Collect the outcomes of this launch's jobs, then remove them (their purpose served)."""
        release(os.path.abspath(str(config.hydra.sweep.dir)))
        if not (token := _token(config)):
            return
        directory = _outcomes_dir(str(config.hydra.sweep.dir), token)
        _OUTCOMES[:] = []
        for path in sorted(directory.glob("*.json")):
            try:
                _OUTCOMES.append(json.loads(path.read_text()))
            except (OSError, ValueError) as exc:
                _OUTCOMES.append({"status": "unknown", "job_dir": str(path), "error": str(exc)})
        with contextlib.suppress(OSError):
            shutil.rmtree(directory)
            directory.parent.rmdir()  # only when no other launch's outcomes are left there


def _claim_or_refuse(directory: str, key: str) -> None:
    try:
        claim(check_job_dir(os.path.abspath(str(directory)), key), key)
    except AscendBenchError as exc:
        raise LaunchRefused(f"ascendbench: {exc}") from None

