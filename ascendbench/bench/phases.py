"""Per-phase timing of one pipeline call: text encoding, each denoising step, VAE decode.

A :class:`PhaseTimer` collects stamps while a call runs and turns them into per-phase durations after
it. Stamps are device events where the device has them, so nothing inside the call waits for the
device and the call's own latency is not disturbed; on the CPU (synchronous) they are host
``perf_counter`` readings. Bookkeeping is per call: :meth:`PhaseTimer.reset` starts a new call and
drops everything of the previous one, so gaps between calls never show up as steps.

Typical use in a text-to-video task (``attach_phase_timer`` is called once by the runner, the bench
resets the timer before every call and reads :meth:`PhaseTimer.result` after it)::

    def attach_phase_timer(self, pipe, timer):
        self._timer = timer
        timer.watch(pipe.text_encoder, "text_encoding")
        timer.watch(pipe.transformer, "denoiser")
        timer.wrap(pipe.vae, "decode", "vae_decode")
        return True

    def run(self, pipe, inputs):
        extra = {}
        if self._timer is not None:
            extra["callback_on_step_end"] = self._timer.step_callback(starts_with="denoiser")
        return {"video": pipe(**inputs, **extra).frames}
"""

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
    """Named phase durations of the current call, in milliseconds.

    Args:
        new_event: factory of timing events with ``record()`` and ``elapsed_time(other)`` in ms (the
            device adapter's ``new_event``); ``None`` or a factory returning ``None`` means host clock.
        clock: host clock in seconds, used when there are no events.
    """

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

    def _elapsed_ms(self, start: Any, end: Any) -> float:
        if self._new_event is None:
            return (end - start) * 1e3
        return float(start.elapsed_time(end))

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
        """Time every call of ``obj.<method>`` (e.g. ``vae.decode``, which is no ``forward``) as ``name``."""
        had_own = method in vars(obj)
        original = getattr(obj, method)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name):
                return original(*args, **kwargs)

        setattr(obj, method, timed)

        def undo() -> None:
            if had_own:
                setattr(obj, method, original)
            else:
                delattr(obj, method)

        handle = _Handle(undo)
        self._handles.append(handle)
        return handle

    def step_callback(self, name: str = "step", starts_with: str | None = None) -> Callable[..., Any]:
        """A diffusers ``callback_on_step_end`` that closes one step span per call.

        Args:
            name: phase name of the steps.
            starts_with: a watched phase (e.g. the denoiser) whose first ``begin`` after the previous
                step starts the next step. Without it a step runs from the previous step's end, and the
                first from the start of the call (so it includes whatever ran before the loop).
        """
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
        """Durations of the current call by phase name, in ms, in the order the phases ended.

        Call it after the device is synchronized (the bench does): events must have completed.
        """
        out: dict[str, list[float]] = {}
        for name, start, end in self._spans:
            out.setdefault(name, []).append(self._elapsed_ms(start, end))
        return out


def summarize_phases(per_call: Sequence[Mapping[str, Sequence[float]]], median_latency_ms: float,
                     cold: Mapping[str, Sequence[float]] | None = None) -> dict[str, dict[str, Any]]:
    """The record's ``bench.phases``: one entry per phase name over the timed calls.

    Per phase: ``calls`` (timed calls where it ran), ``per_call`` (median occurrences per call),
    ``total_median_ms`` (median over calls of the per-call sum), ``share`` (that over the median
    latency), ``median_ms``/``min_ms``/``max_ms`` over single occurrences, ``cold_total_ms`` (sum in
    the cold call) and, for repeated phases such as steps, ``by_index_median_ms`` (median of the
    i-th occurrence across calls: a slow first step shows here).
    """
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
        entry: dict[str, Any] = {
            "calls": len(totals),
            "per_call": float(np.median(counts)),
            "total_median_ms": float(np.median(totals)),
            "share": float(np.median(totals)) / median_latency_ms if median_latency_ms > 0 else None,
            "median_ms": float(np.median(flat)),
            "min_ms": float(min(flat)),
            "max_ms": float(max(flat)),
            "cold_total_ms": float(sum(cold[name])) if cold and cold.get(name) else None,
        }
        if max(counts) > 1:
            depth = min(counts)
            entry["by_index_median_ms"] = [float(np.median([run[i] for run in runs if run])) for i in range(depth)]
        summary[name] = entry
    return summary
