"""Per-phase timing of a pipeline call by device events stamped inside it (no waits)."""

from __future__ import annotations

import functools
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np


class _Handle:
    """Undoes one :meth:`PhaseTimer.watch` or :meth:`PhaseTimer.wrap` (``remove()``)."""

    def __init__(self, undo: Callable[[], None]) -> None:
        self._undo: Callable[[], None] | None = undo

    def remove(self) -> None:
        """Remove the hooks or the wrapper; calling it twice is harmless."""
        if self._undo is not None:
            self._undo()
            self._undo = None


class PhaseTimer:
    """Phase durations (ms) of the current call, from device events, else the host ``clock``."""

    def __init__(self, new_event: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        probe = new_event() if new_event is not None else None
        self._new_event = new_event if probe is not None else None
        self.clock = clock
        self.uses_events = self._new_event is not None
        self._handles: list[_Handle] = []
        self.reset()

    @classmethod
    def for_adapter(cls, adapter: Any) -> "PhaseTimer":
        """A timer on ``adapter``'s events (host clock on the CPU)."""
        return cls(new_event=adapter.new_event)

    def reset(self) -> None:
        """Start a new call: forget every stamp of the previous one."""
        self._spans: list[tuple[str, Any, Any]] = []
        self._open: dict[str, list[Any]] = {}
        self._origin = self._stamp()
        self._step_start: Any = None
        self._last_step_end: Any = None
        self._step_start_phase: str | None = None

    def _stamp(self) -> Any:
        if self._new_event is None:
            return self.clock()
        event = self._new_event()
        event.record()
        return event


    def begin(self, name: str) -> None:
        """Open phase ``name`` (phases may nest and repeat)."""
        stamp = self._stamp()
        self._open.setdefault(name, []).append(stamp)
        if name == self._step_start_phase and self._step_start is None:
            self._step_start = stamp

    def end(self, name: str) -> None:
        """Close the innermost open phase ``name``; an ``end`` without ``begin`` is ignored."""
        stack = self._open.get(name)
        if stack:
            self._spans.append((name, stack.pop(), self._stamp()))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """``with timer.phase("vae_decode"): ...`` times the block."""
        self.begin(name)
        try:
            yield
        finally:
            self.end(name)

    def watch(self, module: Any, name: str) -> _Handle:
        """Time every forward of ``module`` (a ``torch.nn.Module``) as phase ``name``."""
        pre = module.register_forward_pre_hook(lambda *_: self.begin(name))
        post = module.register_forward_hook(lambda *_: self.end(name))
        handle = _Handle(lambda: (pre.remove(), post.remove()))
        self._handles.append(handle)
        return handle

    def wrap(self, obj: Any, method: str, name: str) -> _Handle:
        """Time every call of ``obj.<method>`` (e.g. ``vae.decode``, not a ``forward``)."""
        had_own = method in vars(obj)
        original = getattr(obj, method)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name):
                return original(*args, **kwargs)

        setattr(obj, method, timed)
        handle = _Handle(lambda: setattr(obj, method, original) if had_own
                         else delattr(obj, method))
        self._handles.append(handle)
        return handle

    def step_callback(self, name: str = "step",
                      starts_with: str | None = None) -> Callable[..., Any]:
        """A ``callback_on_step_end`` closing a ``name`` span per step (from ``begin``)."""
        self._step_start_phase = starts_with

        def callback(pipe: Any, step_index: int, timestep: Any, callback_kwargs: Any) -> Any:
            end = self._stamp()
            start = self._step_start if starts_with else self._last_step_end
            self._spans.append((name, start if start is not None else self._origin, end))
            self._step_start, self._last_step_end = None, end
            return callback_kwargs

        return callback

    def remove_hooks(self) -> None:
        """Remove every hook and wrapper this timer installed."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def result(self) -> dict[str, list[float]]:
        """Durations (ms) of the call by phase, in the order they ended (after a sync)."""
        out: dict[str, list[float]] = {}
        for name, start, end in self._spans:
            out.setdefault(name, []).append((end - start) * 1e3 if self._new_event is None else
                                            float(start.elapsed_time(end)))
        return out


def summarize_phases(per_call: Sequence[Mapping[str, Sequence[float]]], median_latency_ms: float,
                     cold: Mapping[str, Sequence[float]] | None = None) -> dict[str, Any]:
    """The record's ``bench.phases``: one entry per phase name over the timed calls."""
    names: list[str] = []
    for call in per_call:
        names += [n for n in call if n not in names]
    summary = {}
    for name in names:
        runs = [list(call.get(name, ())) for call in per_call]
        flat = [v for run in runs for v in run]
        if not flat:
            continue
        totals = [sum(run) for run in runs if run]
        counts = [len(run) for run in runs if run]
        total = float(np.median(totals))
        entry: dict[str, Any] = {
            "calls": len(totals), "per_call": float(np.median(counts)), "total_median_ms": total,
            "share": total / median_latency_ms if median_latency_ms > 0 else None,
            "median_ms": float(np.median(flat)), "min_ms": min(flat), "max_ms": max(flat),
            "cold_total_ms": float(sum(cold[name])) if cold and cold.get(name) else None}
        if max(counts) > 1:
            entry["by_index_median_ms"] = [float(np.median([run[i] for run in runs if run]))
                                           for i in range(min(counts))]
        summary[name] = entry
    return summary
