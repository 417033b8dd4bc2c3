"""One log line at each start and end of a multirun's jobs (job i of N, ok/failed so far, ETA)."""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import math
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ascendbench.progress import format_seconds

log = logging.getLogger(__name__)

SWEEP_EVENTS = ".progress.jsonl"  # the sweep's start and size, then a line per job start and end


def sweep_overrides(config: DictConfig) -> list[str]:
    """The overrides a basic sweep expands: ``hydra.sweeper.params`` and the command line's."""
    task = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task") or []]
    given = {o.split("=", 1)[0].lstrip("+~") for o in task}
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    return [f"{key}={value}" for key, value in params.items() if key not in given] + task


def sweep_shape(task_overrides: Iterable[str]) -> tuple[int | None, list[str]]:
    """Jobs of a grid sweep over ``task_overrides`` and the keys it varies (``None``: uncounted)."""
    keys: list[str] = []
    try:
        overrides = OverridesParser.create().parse_overrides(list(task_overrides))
        sweeps = [override for override in overrides if override.is_sweep_override()]
        keys = [override.key_or_group for override in sweeps]
        return math.prod(len(list(o.sweep_string_iterator())) for o in sweeps), keys
    except Exception:  # optuna's interval(...), or an override this parser cannot size
        return None, keys


def planned_jobs(config: DictConfig, size: int | None) -> int | None:
    """The grid's ``size``, or an Optuna search's ``n_trials`` (capped at the grid's size)."""
    trials = OmegaConf.select(config, "hydra.sweeper.n_trials")
    if not isinstance(trials, int):
        return size
    sampler = str(OmegaConf.select(config, "hydra.sweeper.sampler._target_") or "")
    return min(trials, size) if sampler.endswith("GridSampler") and size else trials


def _job_status(job_return: Any) -> str:
    """With an objective ``ok`` (a number) or ``did not pass`` (inf), else Hydra's job status."""
    value = getattr(job_return, "return_value", None) if job_return is not None else None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "ok" if math.isfinite(value) else "did not pass"
    failed = getattr(getattr(job_return, "status", None), "name", "") == "FAILED"
    return "failed" if failed else "unknown"


class SweepProgress(Callback):
    """The sweep's progress lines; ``clock``: wall seconds shared by processes (a fake in tests)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._job_started: float | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Write the sweep's start time and size (before any job)."""
        try:
            sweep_dir = Path(str(OmegaConf.select(config, "hydra.sweep.dir")))
            sweep_dir.mkdir(parents=True, exist_ok=True)
            size, keys = sweep_shape(sweep_overrides(config))
            total = planned_jobs(config, size)
            state = {"since": self.clock(), "total": total, "keys": keys}
            (sweep_dir / SWEEP_EVENTS).write_text(json.dumps(state) + "\n")
            log.info("[sweep] %s job(s) to run", "an unknown number of" if total is None else total)
        except Exception:  # progress must never break a sweep
            log.debug("sweep progress: could not start", exc_info=True)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Note this job's start in the shared file; log ``job i of N ... started``."""
        self._job_started = self.clock()
        self._log(config, "started", {"started": self._job_started})

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        """Note this job's end and outcome in the shared file, then log it with the new counts."""
        status = _job_status(job_return)
        started = self._job_started
        took = f" in {format_seconds(self.clock() - started)}" if started is not None else ""
        self._log(config, f"ended {status}{took}", {"ended": self.clock(), "status": status})

    def _log(self, config: DictConfig, event: str, entry: dict[str, Any]) -> None:
        mode = OmegaConf.select(config, "hydra.mode")
        if getattr(mode, "name", str(mode)) != "MULTIRUN":
            return
        events = Path(str(OmegaConf.select(config, "hydra.sweep.dir"))) / SWEEP_EVENTS
        try:
            with open(events, "a") as handle:  # one short O_APPEND write per event
                num = OmegaConf.select(config, "hydra.job.num")
                handle.write(json.dumps({"num": num, **entry}) + "\n")
            log.info(self.line(config, event))
        except Exception:  # progress must never break a sweep
            log.debug("sweep progress: no line", exc_info=True)

    def line(self, config: DictConfig, event: str) -> str:
        """``[sweep] job i of N (name) <event>; k finished (counts), elapsed, ETA``."""
        sweep_dir = Path(str(OmegaConf.select(config, "hydra.sweep.dir")))
        events = [json.loads(line) for line in (sweep_dir / SWEEP_EVENTS).read_text().splitlines()]
        state = events[0] if events and "since" in events[0] else {}
        starts = {e["num"]: e["started"] for e in events if "started" in e}
        ended = {e["num"]: e for e in events if "ended" in e}
        total, num = state.get("total"), OmegaConf.select(config, "hydra.job.num")
        keys = set(state.get("keys") or [])
        task = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task") or []]
        varied = [o for o in task if o.split("=", 1)[0].lstrip("+~") in keys]
        name = (",".join(varied) or OmegaConf.select(config, "hydra.job.override_dirname")
                or "no overrides")
        which = f"job {num + 1 if isinstance(num, int) else '?'}{f' of {total}' if total else ''}"
        counts = Counter(entry["status"] for entry in ended.values())
        ordered = sorted(counts.items(), key=lambda kv: (kv[0] != "ok", kv[0]))  # ok first
        done = ", ".join(f"{n} {s}" for s, n in ordered)
        parts = [f"{len(ended)} finished" + (f" ({done})" if done else "")]
        if "since" in state:
            parts.append(f"elapsed {format_seconds(self.clock() - state['since'])}")
            ends = {n: e["ended"] for n, e in ended.items()}
            if total and (eta := remaining_s(starts, ends, total, self.clock())) is not None:
                parts.append(f"ETA {format_seconds(eta)}")
        return f"[sweep] {which} ({name}) {event}; " + ", ".join(parts)


def remaining_s(starts: Mapping[Any, float], ends: Mapping[Any, float], total: int,
                now: float) -> float | None:
    """Seconds until the last of ``total`` jobs ends, by the mean time of the jobs that ended."""
    took = [ends[n] - starts[n] for n in sorted(ends, key=ends.__getitem__) if n in starts]
    if not took or len(ends) >= total:
        return None
    per_job = statistics.fmean(took[1:] or took)
    moves = sorted([(t, 1) for t in starts.values()] + [(t, -1) for t in ends.values()])
    workers = max([1, *itertools.accumulate(step for _, step in moves)])  # an end sorts first
    free = [max(per_job - (now - starts[n]), 0.0) for n in starts if n not in ends]
    free = sorted(free + [0.0] * (workers - len(free)))  # when each worker is free: a heap
    for _ in range(total - len(starts)):  # each queued job goes to the first worker free
        heapq.heapreplace(free, free[0] + per_job)
    return max(free)
