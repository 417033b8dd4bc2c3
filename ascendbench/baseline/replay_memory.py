"""The replay process's memory plan, its precision and the check of its measured peak::

    module need = s x parameters + max(s x inputs + activation peak, s x outputs + device outputs)
    process     = imports + max over modules (module need)"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

import torch

from ascendbench.baseline import replay_modules
from ascendbench.baseline.bounded import bounded_if_float64
from ascendbench.baseline.memory import CHILD_PROCESS_BYTES
from ascendbench.baseline.store import header_tensors
from ascendbench.compare.capture import CallRecorder, call_file, decode
from ascendbench.compare.select import named_modules
from ascendbench.errors import InsufficientMemoryError
from ascendbench.models.memory import (
    DEFAULT_HEADROOM,
    LiveTensorBytes,
    activation_bytes,
    available_host_bytes,
)
from ascendbench.progress import quiet

PRECISIONS = {"float64": torch.float64, "float32": torch.float32}
# A measured peak above this multiple of the plan is an under-estimate: the plan counts tensors, the
# process also holds the allocator's free lists (the tiny twins measure 0.8-1.05x their plan).
RSS_SLACK = 1.25
Plan = dict[str, Any]
Calls = list[Mapping[str, Any]]
Tensors = Mapping[str, torch.Tensor]


def _bytes(call: Mapping[str, Any], tensors: Tensors, part: str, size: int | None) -> int:
    """Bytes of a call's ``in`` or ``out`` tensors, floats at ``size`` (``None``: as stored)."""
    prefix = f"{call['key']}/{part}/"
    return sum(t.numel() * (size if size and t.is_floating_point() else t.element_size())
               for name, t in tensors.items() if name.startswith(prefix))


def _module_need(module: torch.nn.Module, calls: Calls, tensors: Tensors,
                 precision: str) -> dict[str, Any]:
    dtype = PRECISIONS[precision]
    size = dtype.itemsize
    sizes = [(_bytes(c, tensors, "in", size), _bytes(c, tensors, "out", size), c) for c in calls]
    inputs, outputs, largest = max(sizes, key=lambda found: found[0] + found[1])
    params = sum(t.numel() for t in [*module.parameters(), *module.buffers()])

    def tensor(name: str) -> torch.Tensor:
        value = tensors[name]
        return value.to(dtype) if value.is_floating_point() else value

    try:
        module.to(dtype)
        args, kwargs = decode(largest["args"], tensor), decode(largest["kwargs"], tensor)
        with torch.inference_mode(), quiet(), bounded_if_float64(dtype), \
                LiveTensorBytes() as tracker:
            module(*args, **kwargs)
        peak, note = tracker.peak, f"meta {precision} run" + (", bounded" if size == 8 else "")
    except Exception as exc:  # a module meta tensors cannot run: its tensors still count
        peak, note = 0, f"activation peak not estimated ({type(exc).__name__}: {str(exc)[:120]})"
    need = size * params + max(inputs + peak, outputs + _bytes(largest, tensors, "out", None))
    return {"num_params": int(params), "calls": len(calls), "call": largest["key"],
            "inputs_mb": inputs / 1e6, "outputs_mb": outputs / 1e6,
            "activation_peak_mb": peak / 1e6, "need_mb": need / 1e6, "note": note}


def process_plan(modules: Mapping[str, Callable[[], torch.nn.Module]], calls: Calls,
                 tensors: Tensors, precision: str) -> Plan:
    """Each module's need in ``precision`` (``modules``: name -> builder), and the process's."""
    per_module = []
    for name, build in modules.items():
        mine = [c for c in calls if c["module"] == name]
        need = {"calls": 0, "need_mb": 0.0}
        if mine:
            need = _module_need(build(), mine, tensors, precision)
        per_module.append({"name": name, **need})
    largest = max(per_module, key=lambda m: m["need_mb"])
    return {"precision": precision, "per_module": per_module, "largest_module": largest,
            "child_imports_mb": CHILD_PROCESS_BYTES / 1e6,
            "reference_process_mb": CHILD_PROCESS_BYTES / 1e6 + largest["need_mb"]}


def choose_precision(setting: str, plan_in: Callable[[str], Plan], available: int) -> Plan:
    """The plan in ``baseline.replay.precision`` (``auto``: float64 if it fits), with why."""
    def fits(plan: Plan) -> bool:
        return plan["reference_process_mb"] * 1e6 <= DEFAULT_HEADROOM * available

    first = plan_in("float64" if setting == "auto" else setting)
    if setting != "auto":
        return {**first, "choice": f"baseline.replay.precision={setting}", "fits": fits(first)}
    if fits(first):
        why = "auto: float64 (the largest module with its call fits in host memory)"
        return {**first, "choice": why, "fits": True}
    second = plan_in("float32")
    why = (f"auto: float32, because in float64 the process needs about "
           f"{first['reference_process_mb'] / 1e3:.1f} GB (largest module "
           f"{first['largest_module']['name']}), more than {DEFAULT_HEADROOM:.0%} of the "
           f"{available / 1e9:.1f} GB available; float32 halves the tensors")
    return {**second, "fits": fits(second), "choice": why}


def recorded_plan(specs: list[replay_modules.ModuleSpec], calls_dir: str, calls: Calls,
                  setting: str) -> Plan:
    """The process's plan on the recorded shapes; refused before it starts if it does not fit."""
    tensors = {k: t for c in calls for k, t in header_tensors(call_file(calls_dir, c)).items()}
    builders = {s.name: (lambda spec=s: replay_modules.meta_module(vars(spec))) for s in specs}
    available = available_host_bytes()
    memory = choose_precision(setting, lambda p: process_plan(builders, calls, tensors, p),
                              available)
    memory["host_available_mb"] = available / 1e6
    if not memory["fits"]:
        raise InsufficientMemoryError(
            f"the replay reference process needs about {memory['reference_process_mb'] / 1e3:.1f} "
            f"GB in {memory['precision']} (largest module {memory['largest_module']['name']} with "
            f"its recorded call, plus imports), more than {DEFAULT_HEADROOM:.0%} of the "
            f"{available / 1e9:.1f} GB available ({memory['choice']}). Nothing was started. Replay "
            "smaller modules (baseline.replay.layers, e.g. a block's resnets), lower the preset "
            "sizes, or free host memory.")
    return memory


def memory_check(plan: Plan, results: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Each module's measured peak RSS against its plan (``under_estimated``: over RSS_SLACK x)."""
    planned = {m["name"]: plan["child_imports_mb"] + m["need_mb"] for m in plan["per_module"]
               if m.get("calls")}
    rows = [{"module": r["module"], "planned_mb": planned[r["module"]],
             "measured_peak_rss_mb": r["peak_rss_mb"],
             "ratio": r["peak_rss_mb"] / planned[r["module"]]}
            for r in results if r.get("peak_rss_mb") is not None and r["module"] in planned]
    rule = (f"measured peak RSS <= {RSS_SLACK} x planned (imports + module need; the plan counts "
            "tensors only, the process also holds the allocator's free lists)")
    if not rows:
        return {"rule": rule, "modules": [], "under_estimated": [],
                "skipped": "no peak RSS measured (the process reads /proc/self/status; not on "
                           "this system)"}
    return {"rule": rule, "modules": rows, "planned_mb": plan["reference_process_mb"],
            "under_estimated": [r["module"] for r in rows if r["ratio"] > RSS_SLACK],
            "measured_peak_rss_mb": max(r["measured_peak_rss_mb"] for r in rows)}


class _EnoughShapes(Exception):
    """The meta run met a replayed module a second time: a denoising loop repeats its shapes."""


@contextmanager
def _meta_run_hooks(model: Any, modules: Mapping[str, torch.nn.Module]) -> Iterator[None]:
    """Stop the meta run at a module's second call; sdpa runs ``eager`` (its mask reads values)."""
    seen: set[str] = set()

    def hook(name: str) -> Callable[..., None]:
        def stop(module: torch.nn.Module, args: tuple) -> None:
            if name in seen:
                raise _EnoughShapes(name)
            seen.add(name)
        return stop

    handles = [m.register_forward_pre_hook(hook(name)) for name, m in modules.items()]
    switched = [m.config for m in named_modules(model).values()
                if getattr(getattr(m, "config", None), "_attn_implementation", None) == "sdpa"]
    for config in switched:
        config._attn_implementation = "eager"
    try:
        yield
    finally:
        for config in switched:
            config._attn_implementation = "sdpa"
        for handle in handles:
            handle.remove()


def _dropped(calls: Calls, cap_mb: float) -> list[str]:
    """The calls the job's cap on recorded bytes would drop, in completion order."""
    dropped, kept = [], 0
    for call in calls:
        if kept + call["nbytes"] > cap_mb * (1 << 20):
            dropped.append(call["key"])
        else:
            kept += call["nbytes"]
    return dropped


def plan_replay(model: Any, task: Any, inputs: Tensors, cfg: Any, dtype: torch.dtype,
                available: int) -> Plan:
    """The dry run's plan: the sampled calls recorded in a meta run, each module on its largest."""
    settings, patterns = replay_modules.replay_settings(cfg), replay_modules.replay_patterns(cfg)
    specs = replay_modules.module_specs(model, patterns)
    named = named_modules(model)
    hooked = {s.name: named[s.name] for s in specs}
    recorder, stopped = CallRecorder(hooked, settings["calls"], 1 << 62, keep=False), None
    try:
        with _meta_run_hooks(model, hooked):
            activation_bytes(model, task, inputs, dtype)
    except _EnoughShapes:
        stopped = "the second call of a replayed module (the shapes of one step are known)"
    except Exception as exc:  # data-dependent code (a scheduler's .item()) ends a meta run
        stopped = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    finally:
        recorder.close()
    calls = recorder.manifest()["calls"]
    if not calls:
        raise RuntimeError(f"the meta run of the task recorded no call of the replayed modules "
                           f"({stopped})")
    recorded = sum(t.numel() * t.element_size() for t in recorder.tensors.values())
    if stopped:  # the other sampled calls of a module have the shapes of its first
        recorded *= len(set(settings["calls"]))
    builders = {name: (lambda module=module: module) for name, module in hooked.items()}
    memory = choose_precision(settings["precision"], lambda p: process_plan(
        builders, calls, recorder.tensors, p), available)
    meta_run = "complete" if stopped is None else (
        f"stopped by {stopped} after the first calls; the other sampled calls are counted with "
        "the first call's shapes")
    return {"mode": "replay", **memory, "patterns": patterns, "modules": len(specs),
            "calls": len(calls), "sampled_calls": settings["calls"], "recorded_mb": recorded / 1e6,
            "job_held_call_mb": max(c["nbytes"] for c in calls) / 1e6, "meta_run": meta_run,
            "host_available_mb": available / 1e6, "headroom": DEFAULT_HEADROOM,
            "dropped": _dropped(calls, settings["max_capture_mb"]),
            "unreplayable": recorder.unreplayable}


def plan_lines(entry: Mapping[str, Any] | None) -> list[str]:
    """The dry run's printed lines of a replay plan (``[]`` when there is none)."""
    pad, gb = " " * 12, 1e3
    if not entry:
        return []
    if "unavailable" in entry:
        return [f"{pad}replay reference not estimated: {entry['unavailable']}"]
    largest, cut = entry["largest_module"], entry.get("dropped") or []
    lines = [f"{pad}replay: {len(cut)} call(s) beyond baseline.replay.max_capture_mb would not "
             f"be recorded, so not replayed: {', '.join(cut[:6])} (raise it: the calls go to "
             "disk)"] if cut else []
    beside = ""
    if entry.get("job_holds_mb"):
        beside = f" beside the job's own {entry['job_holds_mb'] / gb:.2f} GB (its model on the CPU)"
    elif entry.get("planned_alone"):
        beside = f" ({entry['planned_alone']})"
    here = ""
    if "fits_this_host" in entry:
        here = (f" (this host: {entry['this_host_available_mb'] / gb:.1f} GB free, "
                f"{'fits' if entry['fits_this_host'] else 'does not fit'})")
    return lines + [
        f"{pad}replay reference ({entry['precision']}, {entry['modules']} modules, "
        f"{entry['calls']} calls recorded at {entry['recorded_mb'] / gb:.2f} GB on disk, the job "
        f"holding one call of at most {entry['job_held_call_mb'] / gb:.2f} GB at a time; "
        f"{entry['choice']}): largest module {largest['name']} ({largest['num_params']:,} "
        f"parameters, {largest.get('need_mb', 0) / gb:.2f} GB with its call and activations) + "
        f"imports {entry['child_imports_mb'] / gb:.1f} GB -> "
        f"{entry['reference_process_mb'] / gb:.2f} GB of {entry['host_available_mb'] / gb:.1f} GB "
        f"free{beside}: {'fits' if entry['fits'] else 'DOES NOT FIT'}{here}"]
