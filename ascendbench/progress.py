"""Progress of the long phases: a tqdm bar on a terminal, else a log line every 15 s at most."""

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

from hydra.core.hydra_config import HydraConfig
from tqdm.auto import tqdm

from ascendbench.errors import ConfigError

log = logging.getLogger(__name__)

PROGRESS_ENV = "ASCENDBENCH_PROGRESS"
MODES = ("bar", "log", "off")
# The current job's name, the depth of nested quiet() blocks, the options a Progress made
# without options uses (tests set them).
_STATE: dict[str, Any] = {"job": None, "quiet": 0, "defaults": None}


@dataclass(frozen=True)
class ProgressOptions:
    """Progress display: a heartbeat per ``interval_s`` off a TTY, else a bar per ``refresh_s``."""

    interval_s: float = 15.0
    refresh_s: float = 0.5
    mode: str | None = None
    stream: Any = None
    clock: Callable[[], float] = time.monotonic


def job_name(name: str | None) -> None:
    """Set (or clear, with ``None``) the name every progress line of this process carries."""
    _STATE["job"] = name


def job_label(cfg: Mapping[str, Any]) -> str:
    """``<model>/<dtype>/<preset>``, with ``#<n>`` (Hydra's job number from 1) in a multirun."""
    parts = [(cfg.get(group) or {}).get("name") for group in ("model", "dtype", "preset")]
    label = "/".join(str(p) for p in parts if p is not None) or "job"
    if not HydraConfig.initialized():
        return label
    hydra = HydraConfig.get()
    multirun = getattr(hydra.mode, "name", str(hydra.mode)) == "MULTIRUN"
    return f"{label}#{int(hydra.job.num) + 1}" if multirun else label


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
    """Within the block the logger ``name`` logs errors only; its level is restored after."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


def is_quiet() -> bool:
    """True inside :func:`quiet` (hooks then stay out of the measured code entirely)."""
    return _STATE["quiet"] > 0


def _mode(options: ProgressOptions) -> str:
    if is_quiet():
        return "off"
    mode = options.mode or os.environ.get(PROGRESS_ENV) or None
    if mode is not None:
        if mode not in MODES:
            raise ConfigError(f"{PROGRESS_ENV}={mode!r} is not a progress mode: it must be one of "
                              f"{list(MODES)} (bar: a live bar, log: a heartbeat line every 15 s, "
                              "off). Fix or unset it.")
        return mode
    stream = options.stream if options.stream is not None else sys.stderr
    tty = bool(getattr(stream, "isatty", lambda: False)())
    # a worker process shares the terminal with its siblings: bars would collide
    return "bar" if tty and multiprocessing.current_process().name == "MainProcess" else "log"


def format_seconds(value: float) -> str:
    """A duration for people: ``12.1 s``, ``3 min 05 s``, ``1 h 02 min``."""
    if value < 100:
        return f"{value:.1f} s"
    minutes, secs = divmod(int(round(value)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class Progress:
    """Progress of one phase (``label``): units done of ``total``, time spent of ``budget_s``."""

    def __init__(self, label: str, total: int | None = None, unit: str = "it",
                 budget_s: float | None = None, options: ProgressOptions | None = None) -> None:
        self.label, self.total, self.unit, self.budget_s = label, total, unit, budget_s
        self.options = options or _STATE["defaults"] or ProgressOptions()
        self.mode = _mode(self.options)
        self.done = 0
        self.fields: dict[str, Any] = {}
        self._start = self._last_line = self._updated = self.options.clock()
        self._first: tuple[float, int] | None = None  # when the first update came, done after it
        self._lock = threading.Lock()
        self._bar = self._make_bar() if self.mode == "bar" else None

    @property
    def prefix(self) -> str:
        """``[job] label`` (just ``label`` before a job name is set)."""
        return f"[{_STATE['job']}] {self.label}" if _STATE["job"] else self.label

    def _make_bar(self) -> Any:
        budget = f" of {format_seconds(self.budget_s)}" if self.budget_s else ""
        count = "{n_fmt} {unit} " if self.unit else ""  # no unit: a phase timed, not counted
        fmt = None if self.total else "{desc}: " + count + "[{elapsed}" + budget + "{postfix}]"
        stream = self.options.stream if self.options.stream is not None else sys.stderr
        unit = f" {self.unit}" if self.total else self.unit
        return tqdm(total=self.total, desc=self.prefix, unit=unit, file=stream, leave=False,
                    mininterval=self.options.refresh_s, dynamic_ncols=True, bar_format=fmt)

    def update(self, n: int = 1, **fields: Any) -> None:
        """Advance by ``n`` units; ``fields`` (shown as ``name value``) replace the earlier ones."""
        if self.mode == "off":
            return
        self.done += n
        self.fields.update(fields)
        if n:
            self._updated = self.options.clock()
            self._first = self._first or (self._updated, self.done)
        if self._bar is None:
            self._heartbeat()
            return
        if fields:
            self._bar.set_postfix_str(self._fields_text(), refresh=False)
        self._bar.update(n)

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
        if self.options.stream is None:
            log.info(self.line())
            return
        self.options.stream.write(self.line() + "\n")
        self.options.stream.flush()

    def _fields_text(self) -> str:
        return ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in self.fields.items())

    def line(self) -> str:
        """``[job] label: done[/total] unit, elapsed[ of budget][, ETA][, fields]``."""
        now = self.options.clock()
        elapsed = now - self._start
        count = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        parts = [f"{count} {self.unit}".rstrip()] if self.done or self.total else []
        budget = f" of {format_seconds(self.budget_s)}" if self.budget_s else ""
        parts.append(format_seconds(elapsed) + budget)
        if self.total and self._first and self._first[1] < self.done < self.total:
            # from the first update on (before it: a warm-up, units done unseen); counts down
            per_unit = (self._updated - self._first[0]) / (self.done - self._first[1])
            eta = per_unit * (self.total - self.done) - (now - self._updated)
            parts.append(f"ETA {format_seconds(max(eta, 0.0))}")
        if self.fields:
            parts.append(self._fields_text())
        return f"{self.prefix}: " + ", ".join(parts)

    @contextmanager
    def ticking(self, period_s: float | None = None) -> Iterator[Progress]:
        """Refresh from a daemon thread while one blocking call runs; closes the progress after."""
        if self.mode == "off":
            yield self
            return
        bar = self._bar is not None
        period = period_s or (self.options.refresh_s if bar else self.options.interval_s)
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

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
