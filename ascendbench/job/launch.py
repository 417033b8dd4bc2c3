"""One launch of the CLI: where its jobs go, who may write there, and what its exit status counts.

* :func:`job_subdir` (resolver ``ascendbench.subdir``, ``hydra.sweep.subdir``): a sweep job's directory is
  named by its overrides, readable (``dtype=float16,preset=mini``) and unique whatever is swept: overrides
  left out of the name (``model.source``...), a path separator or a name too long add a short hash of the
  job's overrides, so that two jobs never share a directory and a rerun of the same sweep finds its records.
* :func:`launch_token` (resolver ``ascendbench.launch``, cached per launch): a short random id, part of the
  default sweep dir (two sweeps started in the same second get two dirs) and of every job's environment
  (``ASCENDBENCH_LAUNCH``), so that a job run in a worker process (joblib, Slurm) reports its outcome to
  the launch that started it (:func:`note_outcome`), and no other sweep's.
* :class:`LaunchGuard`: before a single run, checks and claims its directory (:mod:`ascendbench.job.claim`);
  before a sweep, checks the sweep dir; after it, collects the outcomes of this launch's jobs.
"""

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
MAX_NAME_BYTES = 240  # readable part of a sweep job's directory name (file systems allow 255 bytes)
NOT_IDENTITY = ("resume.force", "resume.enabled", "tracking")  # how a job is resumed or tracked, not what it computes
_OUTCOMES: list[dict[str, Any]] = []  # outcomes of the jobs of this process's last multirun


class RefusedDirectory(SystemExit):
    """A job or sweep directory refused before Hydra writes anything there: the process ends with exit status 1
    and the one-paragraph message. A ``SystemExit``: Hydra turns a callback's ordinary exception into a
    warning and goes on, which would write into the refused directory."""


def launch_token() -> str:
    """A short random id of this launch (6 hex digits)."""
    return secrets.token_hex(3)


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def job_subdir(readable: str, overrides: Any) -> str:
    """The directory name of a sweep job: ``readable`` (Hydra's ``override_dirname``), plus ``_<hash>`` of the
    job's overrides when ``readable`` leaves one out, holds a path separator or is too long.

    >>> job_subdir("dtype=float16", ["dtype=float16"])
    'dtype=float16'
    >>> job_subdir("", ["model.source=/ckpt/a"])
    'job_5c209877'
    """
    identity = sorted(str(o) for o in (overrides or []) if _override_key(str(o)) not in NOT_IDENTITY)
    safe = str(readable).replace(os.sep, "_").replace("\0", "_")
    if os.altsep:
        safe = safe.replace(os.altsep, "_")
    short = _shortened(safe)
    hidden = [o for o in identity if o not in str(readable)]
    if not hidden and short == str(readable) and short:
        return short
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:8]
    return f"{short.rstrip(',') or 'job'}_{digest}"


def _shortened(name: str) -> str:
    """``name`` when it fits :data:`MAX_NAME_BYTES`; else its shortest overrides (comma-separated items) that
    fit, in their order: the long values go (the hash tells those jobs apart), ``seed=1`` stays readable."""
    if len(name.encode()) <= MAX_NAME_BYTES:
        return name
    items = name.split(",")
    kept, used = set(), 0
    for index in sorted(range(len(items)), key=lambda i: len(items[i].encode())):
        size = len(items[index].encode()) + 1
        if used + size > MAX_NAME_BYTES:
            break
        kept.add(index)
        used += size
    return ",".join(items[i] for i in sorted(kept))


def register_resolvers() -> None:
    """Register ``ascendbench.launch`` and ``ascendbench.subdir`` (idempotent)."""
    OmegaConf.register_new_resolver("ascendbench.launch", launch_token, use_cache=True, replace=True)
    OmegaConf.register_new_resolver("ascendbench.subdir", job_subdir, replace=True)


def _token(config: DictConfig | None = None) -> str | None:
    node = config.hydra if config is not None else HydraConfig.get()
    return OmegaConf.select(node, f"job.env_set.{TOKEN_VARIABLE}") or os.environ.get(TOKEN_VARIABLE)


def _outcomes_dir(sweep_dir: str | Path, token: str) -> Path:
    return Path(sweep_dir) / OUTCOMES_DIR / f"launch-{token}"


def note_outcome(status: str, job_dir: Path, **more: Any) -> None:
    """In a sweep job (whatever process runs it): leave its gated status (and ``more``, e.g. its ``objective``
    value) for the launch that started it."""
    hydra = HydraConfig.get()
    if getattr(hydra.mode, "name", str(hydra.mode)) != "MULTIRUN" or not (token := _token()):
        return
    path = _outcomes_dir(hydra.sweep.dir, token) / f"{hydra.job.num}.json"
    try:
        write_atomic(path, json.dumps({"status": status, "job_dir": str(job_dir), "pid": os.getpid(), **more}))
    except AscendBenchError as exc:
        log.error("the outcome of this job could not be left for the sweep's exit status: %s", exc)


def launch_outcomes() -> list[dict[str, Any]]:
    """The outcomes of the jobs of this process's last multirun (``[]`` if none ran)."""
    return list(_OUTCOMES)


def reset_outcomes() -> None:
    """Forget the last multirun's outcomes (a new run of the app starts with none)."""
    _OUTCOMES.clear()


def _read_outcomes(directory: Path) -> list[dict[str, Any]]:
    outcomes = []
    for path in sorted(directory.glob("*.json")):
        try:
            outcomes.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            outcomes.append({"status": "unknown", "job_dir": str(path), "error": str(exc)})
    return outcomes


def _refused(exc: AscendBenchError) -> RefusedDirectory:
    return RefusedDirectory(f"ascendbench: {exc}")


class LaunchGuard(Callback):
    """Check and claim the run dir before a single run; check the sweep dir before a sweep; after a sweep,
    collect the outcomes its jobs left (:func:`launch_outcomes`), wherever they ran."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse (one paragraph, nothing written) a run dir that is unusable or held by another process."""
        try:
            job_dir = check_job_dir(os.path.abspath(str(config.hydra.run.dir)), "hydra.run.dir")
            claim(job_dir)
        except AscendBenchError as exc:
            raise _refused(exc) from None

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Give the run dir back (the job itself releases it as it ends; this covers Hydra failing first)."""
        release(os.path.abspath(str(config.hydra.run.dir)))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse an unusable sweep dir; fix this launch's token before any job is composed."""
        reset_outcomes()
        _token(config)  # resolved here, in the launching process: its cached value reaches every job
        try:
            check_job_dir(os.path.abspath(str(config.hydra.sweep.dir)), "hydra.sweep.dir")
        except AscendBenchError as exc:
            raise _refused(exc) from None

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Collect the outcomes of this launch's jobs (and remove them: they served their purpose)."""
        token = _token(config)
        if not token:
            return
        directory = _outcomes_dir(str(config.hydra.sweep.dir), token)
        _OUTCOMES[:] = _read_outcomes(directory)
        with contextlib.suppress(OSError):
            shutil.rmtree(directory)
            directory.parent.rmdir()  # only when no other launch's outcomes are left there
