"""Hydra callbacks: the end-of-sweep summary and the per-worker card pool.

Both are configured under ``hydra.callbacks`` (``conf/config.yaml`` adds :class:`SweepSummary`;
``hydra/launcher=joblib_cards`` and ``hydra/launcher=slurm_cards`` add :class:`CardPool`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Iterable

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ascendbench.devices.cards import (  # noqa: F401  (card_refusal, release_card: the pool's API here too)
    card_refusal,
    claim_card,
    clear_refusal,
    refuse,
    release_card,
)
from ascendbench.errors import ConfigError, NoFreeCardError
from ascendbench.progress import format_seconds

log = logging.getLogger(__name__)

# Statuses of the records the last multirun of this process wrote (the summary log line; the exit code comes
# from ascendbench.job.launch outcomes).
_LAST_MULTIRUN: dict[str, Any] = {"statuses": []}

VISIBLE_DEVICE_VARIABLES = ("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
SCHEDULER_VARIABLES = ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS")


def multirun_statuses() -> list[str]:
    """Statuses of the records written by the last multirun of this process ([] if none ran)."""
    return list(_LAST_MULTIRUN["statuses"])


def reset_multirun_statuses() -> None:
    """Forget the last multirun's statuses (a new run of the app starts with none)."""
    _LAST_MULTIRUN["statuses"] = []


class SweepSummary(Callback):
    """After a multirun, read every record in the sweep dir into pandas; write summary.csv and summary.md.

    Beside them, ``collect_env.txt``: ``torch.utils.collect_env``'s full report, once per sweep (a job's
    record keeps its own ``env``). It never raises: a broken record becomes a row saying so, a report that
    fails or times out becomes a line saying why, and any other problem is logged.

    Args:
        collect_env_timeout_s: how long the report may take; ``0`` writes no ``collect_env.txt``.
    """

    def __init__(self, collect_env_timeout_s: float = 60.0) -> None:
        self._started = time.time()
        self.progress = SweepProgress()
        self.collect_env_timeout_s = float(collect_env_timeout_s)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Remember when the sweep started (records written after it count for the exit status)."""
        self._started = time.time()
        _LAST_MULTIRUN["statuses"] = []
        self.progress.start(config)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """In a multirun: log ``job i of N`` with the sweep's ok/failed counts and ETA so far."""
        self.progress.job_started(config)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        """In a multirun: log how the job ended, the sweep's ok/failed counts and ETA."""
        self.progress.job_ended(config, job_return)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Write the summary into ``hydra.sweep.dir``; log where it is and how many jobs did not end ok."""
        try:
            from ascendbench.report.summary import write_summary

            frame, csv_path, md_path = write_summary(Path(str(config.hydra.sweep.dir)))
            fresh = [Path(p).stat().st_mtime >= self._started - 1.0 for p in frame["record"]] if len(frame) else []
            _LAST_MULTIRUN["statuses"] = [str(s) for s, new in zip(frame.get("status", []), fresh, strict=False) if new]
            bad = [s for s in _LAST_MULTIRUN["statuses"] if s != "ok"]
            log.info("sweep summary: %s and %s (%d record(s), %d of this run not ok)", md_path, csv_path.name,
                     len(frame), len(bad))
            if objective := OmegaConf.select(config, "objective"):  # an optimisation sweep: name its best trial
                from ascendbench.report.search import append_search

                log.info(append_search(frame, md_path, str(objective), OmegaConf.select(config, "fail_on")))
        except Exception:  # a summary must never turn a finished sweep into a crash
            log.exception("could not write the sweep summary of %s", OmegaConf.select(config, "hydra.sweep.dir"))
        self._write_collect_env(config)

    def _write_collect_env(self, config: DictConfig) -> None:
        """``<sweep dir>/collect_env.txt`` (unless ``collect_env_timeout_s`` is 0); a failure is logged."""
        if self.collect_env_timeout_s <= 0:
            return
        from ascendbench.env import COLLECT_ENV_FILE, collect_env_text
        from ascendbench.fileio import write_atomic

        try:
            path = Path(str(config.hydra.sweep.dir)) / COLLECT_ENV_FILE
            write_atomic(path, collect_env_text(self.collect_env_timeout_s))
            log.info("environment of the sweep (torch.utils.collect_env): %s", path)
        except Exception:  # the environment report is a courtesy: never a crash of a finished sweep
            log.exception("could not write the sweep's %s", COLLECT_ENV_FILE)


# --- sweep progress: "job i of N, ok/failed so far, ETA from finished jobs" -----------------------------------
# State shared by the launcher's processes (joblib workers run on_job_* in their own process): the sweep's start
# and size in <sweep dir>/SWEEP_STATE, one appended line per finished job in <sweep dir>/SWEEP_ENDED.
SWEEP_STATE = ".progress.json"
SWEEP_ENDED = ".progress-ended.jsonl"


def sweep_overrides(config: DictConfig) -> list[str]:
    """The overrides a basic sweep expands: ``hydra.sweeper.params`` (e.g. from a ``+sweep=`` file) and the
    command line's task overrides, which win for the same key.

    >>> sweep_overrides(OmegaConf.create({"hydra": {"sweeper": {"params": {"dtype": "float32,float16"}},
    ...                                              "overrides": {"task": ["preset=mini,balanced"]}}}))
    ['dtype=float32,float16', 'preset=mini,balanced']
    """
    task = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task") or []]
    given = {o.split("=", 1)[0].lstrip("+~") for o in task}
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    return [f"{key}={value}" for key, value in params.items() if key not in given] + task


def sweep_size(task_overrides: Iterable[str]) -> int | None:
    """Jobs of a grid sweep over ``task_overrides`` (the product of the sweep overrides' lengths), or ``None``.

    >>> sweep_size(["dtype=float32,float16", "preset=mini,balanced,quality", "seed=1"])
    6
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        overrides = OverridesParser.create().parse_overrides(list(task_overrides))
        size = 1
        for override in overrides:
            if override.is_sweep_override():
                size *= len(list(override.sweep_string_iterator()))
        return size
    except Exception:  # a sweeper of its own (optuna, ...) or an override this parser cannot size
        return None


def planned_jobs(config: DictConfig, task_overrides: Iterable[str]) -> int | None:
    """Jobs a sweep will run: the grid's size (:func:`sweep_size`), or an Optuna search's ``n_trials`` (capped at
    the grid's size under its grid sampler, as the sweeper caps it)."""
    size = sweep_size(task_overrides)
    trials = OmegaConf.select(config, "hydra.sweeper.n_trials")
    if not isinstance(trials, int):
        return size
    grid = str(OmegaConf.select(config, "hydra.sweeper.sampler._target_") or "").endswith("GridSampler")
    return min(trials, size) if grid and size else trials


def sweep_keys(task_overrides: Iterable[str]) -> list[str]:
    """The keys a sweep varies (``dtype``, ``preset`` ...), or ``[]`` when the overrides cannot be parsed.

    >>> sweep_keys(["dtype=float32,float16", "seed=1", "preset=mini,balanced"])
    ['dtype', 'preset']
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        overrides = OverridesParser.create().parse_overrides(list(task_overrides))
    except Exception:  # an override this parser cannot read: the lines name the job by its number only
        return []
    return [override.key_or_group for override in overrides if override.is_sweep_override()]


def _job_name(config: DictConfig, keys: Iterable[str]) -> str:
    """The job's values of the swept keys, e.g. ``dtype=float16,preset=mini`` (all its overrides without keys)."""
    overrides = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task") or []]
    wanted = set(keys)
    varied = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") in wanted]
    return ",".join(varied) or OmegaConf.select(config, "hydra.job.override_dirname") or "no overrides"


def _multirun(config: DictConfig) -> bool:
    mode = OmegaConf.select(config, "hydra.mode")
    return getattr(mode, "name", str(mode)) == "MULTIRUN"


def _job_status(job_return: Any) -> str:
    """``ok``, ``failed`` ...: what the app returned (with an objective: ``ok`` for a number, ``did not pass``
    for inf), else Hydra's job status."""
    value = getattr(job_return, "return_value", None) if job_return is not None else None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "ok" if math.isfinite(value) else "did not pass"
    status = getattr(job_return, "status", None)
    return "failed" if getattr(status, "name", "") == "FAILED" else "unknown"


class SweepProgress:
    """One log line at each job's start and end of a multirun: job i of N, ok/failed so far, ETA.

    The ETA is the sweep's elapsed time per finished job times the jobs left (so parallel workers are
    accounted for). Lines carry the job's override name, so interleaved workers can be told apart::

        [sweep] job 3 of 6 (dtype=float16,preset=mini) started; 2 finished (2 ok), elapsed 65.0 s, ETA 2 min 10 s

    Args:
        clock: wall clock in seconds (shared by processes: ``time.time``; a fake one in tests).
    """

    def __init__(self, clock: Any = time.time) -> None:
        self.clock = clock
        self._job_started: float | None = None

    @staticmethod
    def _dir(config: DictConfig) -> Path:
        return Path(str(OmegaConf.select(config, "hydra.sweep.dir")))

    def start(self, config: DictConfig) -> None:
        """Write the sweep's start time and size (before any job)."""
        try:
            sweep_dir = self._dir(config)
            sweep_dir.mkdir(parents=True, exist_ok=True)
            overrides = sweep_overrides(config)
            total, keys = planned_jobs(config, overrides), sweep_keys(overrides)
            (sweep_dir / SWEEP_STATE).write_text(json.dumps({"started": self.clock(), "total": total, "keys": keys}))
            (sweep_dir / SWEEP_ENDED).write_text("")
            log.info("[sweep] %s job(s) to run", total if total is not None else "an unknown number of")
        except Exception:  # progress must never break a sweep
            log.debug("sweep progress: could not start", exc_info=True)

    def job_started(self, config: DictConfig) -> None:
        """Log ``job i of N ... started`` with the counts so far."""
        self._job_started = self.clock()
        self._log(config, "started")

    def job_ended(self, config: DictConfig, job_return: Any) -> None:
        """Append this job's outcome to the shared file, then log it with the new counts."""
        if not _multirun(config):
            return
        status = _job_status(job_return)
        seconds = self.clock() - self._job_started if self._job_started is not None else None
        try:
            with open(self._dir(config) / SWEEP_ENDED, "a") as ended:  # one short O_APPEND write per job
                ended.write(json.dumps({"num": OmegaConf.select(config, "hydra.job.num"), "status": status}) + "\n")
        except OSError:
            log.debug("sweep progress: could not note the end of a job", exc_info=True)
        took = f" in {format_seconds(seconds)}" if seconds is not None else ""
        self._log(config, f"ended {status}{took}")

    def _log(self, config: DictConfig, event: str) -> None:
        if not _multirun(config):
            return
        try:
            log.info(self.line(config, event))
        except Exception:  # progress must never break a sweep
            log.debug("sweep progress: no line", exc_info=True)

    def line(self, config: DictConfig, event: str) -> str:
        """``[sweep] job i of N (name) <event>; k finished (counts), elapsed, ETA``."""
        sweep_dir = self._dir(config)
        state = json.loads((sweep_dir / SWEEP_STATE).read_text()) if (sweep_dir / SWEEP_STATE).is_file() else {}
        ended = [json.loads(line) for line in (sweep_dir / SWEEP_ENDED).read_text().splitlines() if line.strip()] \
            if (sweep_dir / SWEEP_ENDED).is_file() else []
        total, num = state.get("total"), OmegaConf.select(config, "hydra.job.num")
        name = _job_name(config, state.get("keys") or [])
        which = f"job {num + 1 if isinstance(num, int) else '?'}" + (f" of {total}" if total else "")
        counts: dict[str, int] = {}
        for entry in ended:
            counts[entry["status"]] = counts.get(entry["status"], 0) + 1
        done = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: (kv[0] != "ok", kv[0])))
        parts = [f"{len(ended)} finished" + (f" ({done})" if done else "")]
        if "started" in state:
            elapsed = self.clock() - state["started"]
            parts.append(f"elapsed {format_seconds(elapsed)}")
            if total and ended and len(ended) < total:
                parts.append(f"ETA {format_seconds(elapsed / len(ended) * (total - len(ended)))}")
        return f"[sweep] {which} ({name}) {event}; " + ", ".join(parts)


def _as_list(cards: Any) -> list[str] | None:
    if cards is None:
        return None
    if isinstance(cards, str):
        return [c.strip() for c in cards.split(",") if c.strip()]
    return [str(c) for c in cards]


class LaunchRefused(SystemExit):
    """A sweep refused before any job runs: the process ends with exit status 1 and the one-paragraph message.
    A ``SystemExit``, because Hydra turns a callback's ordinary exception into a warning and launches the jobs
    anyway (two workers then shared one card)."""


class CardPool(Callback):
    """Give each worker process its own accelerator card, before the device initialises.

    In every job (``on_job_start``, which runs in the worker before the job's code) the process claims
    a free card of ``cards`` and sets ``variables`` (``ASCEND_RT_VISIBLE_DEVICES``, ``CUDA_VISIBLE_DEVICES``)
    to it, so that the job's ``device.index=0`` is that card. A worker keeps its card for all its jobs.
    With ``cards: null`` (Slurm), the card the scheduler assigned is read from ``inherit_from`` and copied
    into the variables that are still unset. The choice is logged and written to ``<job dir>/card.json``.

    Args:
        cards: card ids (list or ``"0,1,2"``), or ``None`` to inherit the scheduler's assignment.
        variables: environment variables set to the card.
        inherit_from: where ``cards: null`` looks for the assigned card, first non-empty wins.
        lock_dir: directory of the per-card lock files; default ``<hydra.sweep.dir>/.cards``. Point
            concurrent sweeps on one host at one shared directory to keep them off each other's cards.
        wait_s: how long a worker waits for a free card before failing with a configuration error.
        lock_name: the lock file's name, ``{card}`` the card id (``npu_card{card}.lock`` with ``lock_dir: /tmp``
            shares the locks of ``flock /tmp/npu_card<N>.lock`` scripts).
    """

    def __init__(self, cards: Any = None, variables: Iterable[str] = VISIBLE_DEVICE_VARIABLES,
                 inherit_from: Iterable[str] = SCHEDULER_VARIABLES, lock_dir: str | None = None,
                 wait_s: float = 60.0, lock_name: str = "card-{card}.lock") -> None:
        if "{card}" not in lock_name or "/" in lock_name:
            raise ConfigError(f"hydra.callbacks.cards.lock_name={lock_name!r} must be a file name holding `{{card}}`, "
                              "e.g. `npu_card{card}.lock` (put the directory in lock_dir).")
        self.cards, self.lock_name = _as_list(cards), lock_name
        self.variables = list(variables)
        self.inherit_from = list(inherit_from)
        self.lock_dir = lock_dir
        self.wait_s = float(wait_s)
        if self.cards is not None and not self.cards:
            raise ConfigError("hydra.callbacks.cards.cards is empty; list the card ids, e.g. `[0,1]`, "
                              "or set it to null to take the card the scheduler assigned.")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse the sweep (:class:`LaunchRefused`) when more jobs would run at once than there are cards."""
        n_jobs = OmegaConf.select(config, "hydra.launcher.n_jobs")
        if self.cards is None or not isinstance(n_jobs, int):
            return
        parallel = (os.cpu_count() or 1) if n_jobs < 0 else n_jobs
        per_job = int(OmegaConf.select(config, "device.world_size") or 1)  # a multi-card job holds N cards
        if parallel * per_job > len(self.cards):
            raise LaunchRefused(
                f"ascendbench: hydra.launcher.n_jobs={n_jobs} runs {parallel} jobs at once, {per_job} card(s) each "
                f"(device.world_size), but the card pool hydra.callbacks.cards.cards={self.cards} has "
                f"{len(self.cards)} card(s); each worker needs its own. Set "
                f"`hydra.launcher.n_jobs={max(1, len(self.cards) // per_job)}` or list more cards."
            )

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Claim (or inherit) this worker's card and export it before the job's code runs (multirun only)."""
        clear_refusal()
        mode = OmegaConf.select(config, "hydra.mode")
        if getattr(mode, "name", str(mode)) == "RUN":  # a single run picks its card with device.index / device.env
            return
        if self.cards is None:
            card = next((os.environ[v] for v in self.inherit_from if os.environ.get(v)), None)
            if card is None:
                log.warning("card pool: no card list and none of %s is set; devices left as they are",
                            self.inherit_from)
                return
            exported = {v: card for v in self.variables if not os.environ.get(v)}
        else:
            lock_dir = Path(self.lock_dir or Path(str(config.hydra.sweep.dir)) / ".cards")
            try:
                count = int(OmegaConf.select(config, "device.world_size") or 1)
                card = claim_card(self.cards, lock_dir, self.wait_s, count=count, lock_name=self.lock_name)
            except NoFreeCardError as exc:  # the job's device stage fails with it (see card_refusal)
                refuse(exc)
                log.error("card pool: %s", exc)
                return
            exported = {v: card for v in self.variables}
        os.environ.update(exported)
        self._note(config, card, exported)

    def _note(self, config: DictConfig, card: str, exported: dict[str, str]) -> None:
        job_dir = Path(str(OmegaConf.select(config, "hydra.runtime.output_dir") or "."))
        info = {"card": card, "exported": exported, "pid": os.getpid(),
                "visible": {v: os.environ.get(v) for v in self.variables}}
        log.info("card pool: job %s runs on card %s (%s)", OmegaConf.select(config, "hydra.job.num"), card,
                 ", ".join(f"{k}={v}" for k, v in info["visible"].items()))
        try:
            (job_dir / "card.json").write_text(json.dumps(info, indent=2))
        except OSError as exc:
            log.warning("card pool: could not write %s: %s", job_dir / "card.json", exc)
