"""Progress of the phases that can take long: a live bar on a terminal, a heartbeat log line elsewhere.

On a terminal (stderr is a TTY, in the main process) a :class:`Progress` draws a tqdm bar. Anywhere
else -- CI, Slurm logs, parallel joblib workers -- it logs one heartbeat line at most every
``interval_s`` seconds (15 s by default), and nothing for a phase shorter than that. Every line and
every bar carries the current job's name, set once per job by the runner, so that interleaved workers
can be told apart::

    [tiny_flux2_decoder/float32/mini] timing: 37 calls, 12.1 s of 60 s, median 31.2 ms +- 0.4 ms (95% CI)

Typical use::

    progress.job_name("tiny_flux2_decoder/float32/mini")         # once per job (the runner)
    with Progress("denoising", total=50, unit="steps") as bar:
        for step in steps:
            ...
            bar.update(1, timestep=int(t))
    with Progress("model load", unit="").ticking():               # a single blocking call
        model = load()

``ASCENDBENCH_PROGRESS=bar|log|off`` forces the mode. Code that must not be disturbed (the timed calls
of the bench loop) runs under :func:`quiet`: a :class:`Progress` made there does nothing, and
:func:`is_quiet` tells hooks (a pipeline's step callback) not to install themselves at all.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from ascendbench.errors import ConfigError

log = logging.getLogger(__name__)

PROGRESS_ENV = "ASCENDBENCH_PROGRESS"
MODES = ("bar", "log", "off")

# The current job's name (one job at a time per process), the depth of nested quiet() blocks and the
# options of a Progress made without any (see using()).
_STATE: dict[str, Any] = {"job": None, "quiet": 0, "defaults": None}


@dataclass(frozen=True)
class ProgressOptions:
    """How progress is shown (the defaults suit real runs; tests inject a clock and a stream).

    Attributes:
        interval_s: at most one heartbeat line per this many seconds (non-TTY mode).
        refresh_s: smallest interval between two redraws of a bar (TTY mode).
        mode: ``bar``, ``log`` or ``off``; ``None``: ``$ASCENDBENCH_PROGRESS``, else ``bar`` on a TTY.
        stream: where bars and heartbeat lines are written; ``None``: bars on stderr, heartbeats through
            the ``ascendbench.progress`` logger (so they land in the job's log file too).
        clock: monotonic clock in seconds.
    """

    interval_s: float = 15.0
    refresh_s: float = 0.5
    mode: str | None = None
    stream: Any = None
    clock: Callable[[], float] = time.monotonic


def job_name(name: str | None) -> None:
    """Set (or clear, with ``None``) the name every progress line of this process carries."""
    _STATE["job"] = name


def current_job_name() -> str | None:
    """The name set by :func:`job_name`, or ``None``."""
    return _STATE["job"]


def job_label(cfg: Mapping[str, Any]) -> str:
    """A short job name from a composed config: ``<model>/<dtype>/<preset>`` (what a sweep varies most),
    followed by ``#<n>`` (Hydra's job number, from 1) inside a multirun, where jobs may share those three.

    >>> job_label({"model": {"name": "tiny"}, "dtype": {"name": "float32"}, "preset": {"name": "mini"}})
    'tiny/float32/mini'
    """
    parts = [(cfg.get(group) or {}).get("name") for group in ("model", "dtype", "preset")]
    label = "/".join(str(p) for p in parts if p is not None) or "job"
    num = _multirun_job_num()
    return label if num is None else f"{label}#{num + 1}"


def _multirun_job_num() -> int | None:
    """Hydra's ``job.num`` when this process runs a multirun job, else ``None``."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    return int(hydra.job.num) if getattr(hydra.mode, "name", str(hydra.mode)) == "MULTIRUN" else None


@contextmanager
def quiet() -> Iterator[None]:
    """Within the block every new :class:`Progress` is off and :func:`is_quiet` is true (nests)."""
    _STATE["quiet"] += 1
    try:
        yield
    finally:
        _STATE["quiet"] -= 1


@contextmanager
def quiet_logger(name: str) -> Iterator[None]:
    """Within the block the logger ``name`` (and its children) logs errors only; its level is restored after.
    For loops that would otherwise log the same line per round (a patch applied per block, a drift warning per
    round of a check)."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextmanager
def using(options: ProgressOptions) -> Iterator[None]:
    """Within the block a :class:`Progress` made without options uses ``options`` (tests, embedding apps)."""
    previous, _STATE["defaults"] = _STATE["defaults"], options
    try:
        yield
    finally:
        _STATE["defaults"] = previous


def is_quiet() -> bool:
    """True inside :func:`quiet` (hooks then stay out of the measured code entirely)."""
    return _STATE["quiet"] > 0


def resolve_mode(options: ProgressOptions) -> str:
    """``bar``, ``log`` or ``off`` for a new :class:`Progress` (see :class:`ProgressOptions`)."""
    if is_quiet():
        return "off"
    mode = options.mode or os.environ.get(PROGRESS_ENV) or None
    if mode is not None:
        if mode not in MODES:
            raise ConfigError(f"{PROGRESS_ENV}={mode!r} is not a progress mode: it must be one of {list(MODES)} "
                              f"(bar: a live bar, log: a heartbeat line every 15 s, off). Fix or unset it.")
        return mode
    stream = options.stream if options.stream is not None else sys.stderr
    tty = bool(getattr(stream, "isatty", lambda: False)())
    # a worker process (joblib, multiprocessing) shares the terminal with its siblings: bars would collide
    return "bar" if tty and multiprocessing.current_process().name == "MainProcess" else "log"


def format_seconds(value: float) -> str:
    """A duration for people: ``12.1 s``, ``3 min 05 s``, ``1 h 02 min``.

    >>> format_seconds(12.06), format_seconds(185), format_seconds(3720)
    ('12.1 s', '3 min 05 s', '1 h 02 min')
    """
    if value < 100:
        return f"{value:.1f} s"
    minutes, secs = divmod(int(round(value)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class Progress:
    """Progress of one phase: how much is done (of ``total``), time spent (of ``budget_s``), ETA, fields.

    Args:
        label: what the phase is (``timing``, ``denoising``, ``model load``).
        total: number of units when known (an ETA is shown), else ``None``.
        unit: the unit counted (``calls``, ``steps``); ``""`` for a phase only timed (a blocking call).
        budget_s: a time budget shown as ``12.1 s of 60 s`` (the timing loop's ``max_time_s``).
        options: :class:`ProgressOptions`.
    """

    def __init__(self, label: str, total: int | None = None, unit: str = "it", budget_s: float | None = None,
                 options: ProgressOptions | None = None) -> None:
        self.label, self.total, self.unit, self.budget_s = label, total, unit, budget_s
        self.options = options or _STATE["defaults"] or ProgressOptions()
        self.mode = resolve_mode(self.options)
        self.done = 0
        self.fields: dict[str, Any] = {}
        self.lines = 0
        self._start = self.options.clock()
        self._last_line = self._start
        self._lock = threading.Lock()
        self._bar = self._make_bar() if self.mode == "bar" else None

    @property
    def prefix(self) -> str:
        """``[job] label`` (just ``label`` before a job name is set)."""
        job = current_job_name()
        return f"[{job}] {self.label}" if job else self.label

    def _make_bar(self) -> Any:
        from tqdm.auto import tqdm

        budget = f" of {format_seconds(self.budget_s)}" if self.budget_s else ""
        count = "{n_fmt} {unit} " if self.unit else ""  # no unit: a phase timed, not counted (ticking())
        fmt = None if self.total else "{desc}: " + count + "[{elapsed}" + budget + "{postfix}]"
        return tqdm(total=self.total, desc=self.prefix, unit=f" {self.unit}" if self.total else self.unit,
                    file=self.options.stream if self.options.stream is not None else sys.stderr,
                    mininterval=self.options.refresh_s, leave=False, dynamic_ncols=True, bar_format=fmt)

    def elapsed(self) -> float:
        """Seconds since the phase started."""
        return self.options.clock() - self._start

    def update(self, n: int = 1, **fields: Any) -> None:
        """Advance by ``n`` units; ``fields`` (shown as ``name value``) replace those of the last update."""
        if self.mode == "off":
            return
        self.done += n
        self.fields.update(fields)
        if self._bar is not None:
            if fields:
                self._bar.set_postfix_str(self._fields_text(), refresh=False)
            self._bar.update(n)
            return
        self._heartbeat()

    def tick(self) -> None:
        """Show the time spent without advancing (what :meth:`ticking`'s thread calls)."""
        if self._bar is not None:
            self._bar.refresh()
        elif self.mode == "log":
            self._heartbeat()

    def _heartbeat(self) -> None:
        with self._lock:
            now = self.options.clock()
            if now - self._last_line < self.options.interval_s:
                return
            self._last_line = now
            self.lines += 1
        line = self.line()
        if self.options.stream is not None:
            self.options.stream.write(line + "\n")
            self.options.stream.flush()
        else:
            log.info(line)

    def _fields_text(self) -> str:
        return ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in self.fields.items())

    def line(self) -> str:
        """The heartbeat text: ``[job] label: done[/total] unit, elapsed[ of budget][, ETA][, fields]``."""
        elapsed = self.elapsed()
        count = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        parts = [f"{count} {self.unit}".rstrip()] if self.done or self.total else []
        parts.append(format_seconds(elapsed) + (f" of {format_seconds(self.budget_s)}" if self.budget_s else ""))
        if self.total and 0 < self.done < self.total:
            parts.append(f"ETA {format_seconds(elapsed / self.done * (self.total - self.done))}")
        if self.fields:
            parts.append(self._fields_text())
        return f"{self.prefix}: " + ", ".join(parts)

    @contextmanager
    def ticking(self, period_s: float | None = None) -> Iterator["Progress"]:
        """Refresh from a daemon thread while a single blocking call runs; closes the progress at the end.

        Args:
            period_s: seconds between refreshes; default ``refresh_s`` for a bar, ``interval_s`` for lines.
        """
        if self.mode == "off":
            yield self
            return
        period = period_s or (self.options.refresh_s if self._bar is not None else self.options.interval_s)
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(period):
                self.tick()

        thread = threading.Thread(target=loop, name=f"progress:{self.label}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
            self.close()

    def close(self) -> None:
        """Remove the bar (a heartbeat phase writes nothing more); calling it twice is harmless."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["MODES", "PROGRESS_ENV", "Progress", "ProgressOptions", "current_job_name", "format_seconds", "is_quiet",
           "job_label", "job_name", "quiet", "resolve_mode", "using"]
