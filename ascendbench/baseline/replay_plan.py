"""The dry run's plan of a replay reference: its memory, from the model on the ``meta`` device.

The task runs once on meta tensors in the device dtype with a :class:`ascendbench.compare.capture.CallRecorder`
keeping the (meta) inputs and outputs of the sampled calls: their bytes are what the device run records (to
disk, one call at a time). Then each replayed module runs alone on meta copies of its largest recorded call in
the replay precision, bounded as the reference process runs it: :mod:`ascendbench.baseline.replay_memory` has
the formula, and chooses float64 or float32 under ``baseline.replay.precision=auto``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import torch

from ascendbench.baseline.replay import replay_settings
from ascendbench.baseline.replay_memory import choose_precision, process_plan
from ascendbench.baseline.replay_modules import module_specs, replay_patterns
from ascendbench.compare.capture import CallRecorder
from ascendbench.compare.select import named_modules
from ascendbench.models.memory import DEFAULT_HEADROOM, activation_bytes


class _EnoughShapes(Exception):
    """Raised by the meta run once every replayed module has run once: later calls repeat the shapes."""


class _StopAtSecondCall:
    """Ends the meta run at the second call of any replayed module (a denoising loop repeats its shapes)."""

    def __init__(self, modules: Mapping[str, torch.nn.Module]) -> None:
        self.seen: set[str] = set()
        self._handles = [m.register_forward_pre_hook(self._hook(name)) for name, m in modules.items()]

    def _hook(self, name: str):
        def hook(module: torch.nn.Module, args: tuple) -> None:
            if name in self.seen:
                raise _EnoughShapes(name)
            self.seen.add(name)
        return hook

    def close(self) -> None:
        """Remove the hooks."""
        for handle in self._handles:
            handle.remove()


@contextmanager
def eager_attention(model: Any) -> Iterator[None]:
    """transformers components with ``sdpa`` attention switched to ``eager`` for the meta run: the sdpa mask's
    shortcut reads a value (``.all()``), which meta tensors do not have; eager builds the same shapes."""
    switched = []
    parts = model.components.values() if hasattr(model, "components") else [model]
    for part in parts:
        for module in part.modules() if isinstance(part, torch.nn.Module) else []:
            config = getattr(module, "config", None)
            if getattr(config, "_attn_implementation", None) == "sdpa":
                config._attn_implementation = "eager"
                switched.append(config)
    try:
        yield
    finally:
        for config in switched:
            config._attn_implementation = "sdpa"


def plan_replay(model: Any, task: Any, inputs: Mapping[str, torch.Tensor], cfg: Any, dtype: torch.dtype,
                available: int) -> dict[str, Any]:
    """The replay's plan: modules, the largest one, recorded bytes, the process peak and whether it fits.

    Args:
        model: the model on the meta device (or real; it is not changed except cast on meta).
        task: the job's task.
        inputs: the job's inputs.
        cfg: the job config (``baseline.replay``, ``compare.layers``, the model's ``replay_layers``).
        dtype: the device dtype (what the device run records).
        available: host bytes available.
    """
    settings = replay_settings(cfg)
    patterns = replay_patterns(cfg)
    specs = module_specs(model, patterns)
    named = named_modules(model)
    recorder = CallRecorder({s.name: named[s.name] for s in specs}, settings["calls"], 1 << 62, keep=False)
    stop = _StopAtSecondCall({s.name: named[s.name] for s in specs})
    stopped = None
    try:
        with eager_attention(model):
            activation_bytes(model, task, inputs, dtype)
    except _EnoughShapes:
        stopped = "the second call of a replayed module (the shapes of one step are known)"
    except Exception as exc:  # data-dependent code (a scheduler's .item()) ends a meta run, after the first calls
        stopped = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    finally:
        recorder.close()
        stop.close()
    manifest = recorder.manifest()
    if not manifest["calls"]:
        raise RuntimeError(f"the meta run of the task recorded no call of the replayed modules ({stopped})")
    recorded = sum(t.numel() * t.element_size() for t in recorder.tensors.values())
    if stopped:  # the other sampled calls of a module have the shapes of its first (a block's, step after step)
        recorded *= len(set(settings["calls"]))
    builders = {s.name: (lambda name=s.name: named[name]) for s in specs}
    memory = choose_precision(settings["precision"],
                              lambda precision: process_plan(builders, manifest["calls"], recorder.tensors, precision),
                              available)
    largest_call = max(c["nbytes"] for c in manifest["calls"])
    dropped, kept = [], 0  # the job's cap on the recorded bytes, in completion order as CallRecorder applies it
    for call in manifest["calls"]:
        if kept + call["nbytes"] > settings["max_capture_mb"] * (1 << 20):
            dropped.append(call["key"])
        else:
            kept += call["nbytes"]
    return {"mode": "replay", **memory, "patterns": patterns, "modules": len(specs), "calls": len(manifest["calls"]),
            "sampled_calls": settings["calls"], "recorded_mb": recorded / 1e6, "job_held_call_mb": largest_call / 1e6,
            "meta_run": "complete" if stopped is None else (
                f"stopped by {stopped} after the first calls; the other sampled calls are counted with the first "
                "call's shapes"),
            "host_available_mb": available / 1e6, "headroom": DEFAULT_HEADROOM, "dropped": dropped,
            "unreplayable": manifest["unreplayable"]}


def plan_lines(entry: Mapping[str, Any] | None) -> list[str]:
    """The dry run's printed lines of a replay plan (``[]`` when there is none)."""
    if not entry:
        return []
    if "unavailable" in entry:
        return [f"            replay reference not estimated: {entry['unavailable']}"]
    largest = entry["largest_module"]
    cut = entry.get("dropped") or []
    dropped = [f"            replay: {len(cut)} call(s) beyond baseline.replay.max_capture_mb would not be recorded, "
               f"so not replayed: {', '.join(cut[:6])} (raise it: the calls go to disk)"] if cut else []
    return dropped + [
            f"            replay reference ({entry['precision']}, {entry['modules']} modules, {entry['calls']} calls "
            f"recorded at {entry['recorded_mb'] / 1e3:.2f} GB on disk, the job holding one call of at most "
            f"{entry['job_held_call_mb'] / 1e3:.2f} GB at a time; {entry['choice']}): "
            f"largest module {largest['name']} ({largest['num_params']:,} "
            f"parameters, {largest.get('need_mb', 0) / 1e3:.2f} GB with its call and activations) + imports "
            f"{entry['child_imports_mb'] / 1e3:.1f} GB -> {entry['reference_process_mb'] / 1e3:.2f} GB of "
            f"{entry['host_available_mb'] / 1e3:.1f} GB free"
            + (f" beside the job's own {entry['job_holds_mb'] / 1e3:.2f} GB (its model on the CPU)"
               if entry.get("job_holds_mb") else f" ({entry['planned_alone']})" if entry.get("planned_alone") else "")
            + f": {'fits' if entry['fits'] else 'DOES NOT FIT'}"
            + ("" if "fits_this_host" not in entry else
               f" (this host: {entry['this_host_available_mb'] / 1e3:.1f} GB free, "
               f"{'fits' if entry['fits_this_host'] else 'does not fit'})")]
