"""``dry_run=true``: what a job would do, without loading a model or downloading anything.

The plan says where the weights would come from (a local path, the hub cache, a download, or seeded
random initialisation), the inputs the task would build, the memory the device run and the CPU
reference would need (parameters counted on the ``meta`` device, activations from a meta-device run of
the task: see :mod:`ascendbench.job.resources`) against the free device and host memory, whether the CPU
reference is already in the baseline cache, and the files the job would write. Every hub lookup runs
with huggingface_hub forced offline, so a dry run never touches the network.

Why the dry run imports the model's library (diffusers) while ``--help``, ``--version`` and ``--cfg`` import
nothing of it: the memory plan is not a parameter count. The activations of the device run and of the CPU
reference come from running the task on the ``meta`` device, which needs the model's class; so do the
``compare.layers`` patterns (checked against the model's module tree), the replay reference's plan and
``baseline.reference=auto``'s choice of precision. A parameter count from the safetensors header alone
(``num_params_on_disk``, read without diffusers) would drop all of these -- the parts that tell a user
whether the job fits -- and a random-init model has no header to read. What the dry run does not import:
the drawing and summary libraries (matplotlib, pandas), which only a real job's artifacts need.

Anything that would make the real job fail (weights required but missing, a pickle checkpoint, inputs
the task cannot build, memory that does not fit) is a *problem*: the plan lists them all and the dry
run fails with :class:`DryRunError`, so ``-m dry_run=true`` shows which jobs of a sweep would fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch

from ascendbench.errors import AscendBenchError, ConfigError, DryRunError, InsufficientMemoryError
from ascendbench.job.job import Job
from ascendbench.job.resources import RunMemory
from ascendbench.models.base import ModelLoader, hub_forced_offline, locate
from ascendbench.models.memory import DEFAULT_HEADROOM, available_host_bytes, declared_host_memory
from ascendbench.models.sources import (
    NotFound,
    files_digest,
    hub_offline,
    looks_like_hub_id,
)

_MB = 1e6


def _locate(job: Job) -> Any:
    """The loader's own lookup of ``model.source`` (cache only: the callers force the hub offline)."""
    return locate(job.loader, job.cfg.model.source, job.cfg.model.get("revision"))


def weights_plan(job: Job) -> tuple[dict[str, Any], Any]:
    """(the plan's ``weights`` entry, what was found or ``None``); a refusal is a problem of the job."""
    cfg = job.cfg
    mode, source, seed = str(cfg.model.weights), cfg.model.source, int(cfg.model.init_seed)
    random_init = {"action": "random-init", "source": source, "init_seed": seed}
    if mode == "random":
        return {**random_init, "reason": "model.weights=random"}, None
    try:
        with hub_forced_offline():
            found = _locate(job)
    except AscendBenchError as exc:  # e.g. a pickle checkpoint without model.allow_pickle=true
        job.problems.append(str(exc))
        return {"action": "refused", "source": source, "reason": str(exc)}, None
    files = tuple(getattr(found, "files", ()) or ())
    path = getattr(found, "path", None)
    if path is not None and not isinstance(found, NotFound):
        size = sum(f.stat().st_size for f in files if f.is_file())
        return {"action": "load", "source": source, "path": str(path), "origin": getattr(found, "origin", "local"),
                "files": [f.name for f in files], "size_mb": size / _MB,
                "digest": files_digest(files) if files else None}, found
    reason = getattr(found, "reason", "not found")
    if looks_like_hub_id(str(source or "")) and not hub_offline():
        from huggingface_hub import constants

        plan = {"action": "download", "source": source, "endpoint": constants.ENDPOINT,
                "reason": f"not in the hub cache {constants.HF_HUB_CACHE}: the job would download it "
                          f"(if that fails: {'random-init' if mode == 'auto' else 'the job fails'})"}
        return plan, None
    if mode == "required":
        job.problems.append(f"model.weights=required but no weights were found for model.source={source!r}: {reason}")
        return {"action": "fail", "source": source, "reason": reason}, None
    return {**random_init, "reason": reason}, None


def meta_model(job: Job) -> Any:
    """The model as the job would build it, on the ``meta`` device (no storage allocated): the loader's
    :meth:`~ascendbench.models.base.ModelLoader.build_meta`, or, for a loader outside that interface, its
    random-init path under ``torch.device("meta")``. A model the job would refuse to allocate is a problem of
    the plan, and is still built on meta so that the rest (the replay reference) can be planned."""
    loader, seed = job.loader, int(job.cfg.model.init_seed)
    try:
        return _on_meta(loader, job.found, seed)
    except InsufficientMemoryError as refusal:
        job.problems.append(str(refusal))
        if not getattr(loader, "memory_check", False):  # a loader whose check cannot be turned off: a meta
            with declared_host_memory(1 << 62):          # build allocates nothing, so it is not held to it
                return _on_meta(loader, job.found, seed)
        loader.memory_check = False
        try:
            return _on_meta(loader, job.found, seed)
        finally:
            loader.memory_check = True


def _on_meta(loader: Any, found: Any, seed: int) -> Any:
    if isinstance(loader, ModelLoader):
        return loader.build_meta(found, seed)
    with torch.device("meta"), hub_forced_offline():
        return loader.load(None, "random", seed, None).module


def declared_target(cfg: Any) -> dict[str, int | None]:
    """``dry_run_target``: the declared free ``host`` and ``device`` bytes of the machine a dry run plans for
    (``None``: measured here).

    Raises:
        ConfigError: a declared size that is not a positive number of GB.
    """
    target = cfg.get("dry_run_target") or {}
    declared: dict[str, int | None] = {}
    for part in ("host", "device"):
        value = target.get(f"{part}_memory_gb")
        if value is not None and not float(value) > 0:
            raise ConfigError(f"dry_run_target.{part}_memory_gb={value!r} is not allowed: give the free memory of "
                              f"the machine the job will run on in GB (a positive number, e.g. 256), or null to "
                              "plan with the memory measured on this host")
        declared[part] = None if value is None else int(float(value) * 1e9)
    return declared


def free_host_bytes() -> int:
    """Host memory available now (what a CPU reference may plan for); a dry run's declared host memory
    inside :func:`ascendbench.models.memory.declared_host_memory`."""
    return available_host_bytes()


def free_device_bytes(adapter: Any, cfg: Any = None) -> int:
    """Free memory of the adapter's device (host available memory for the CPU); a dry run's
    ``dry_run_target.device_memory_gb`` for an accelerator when declared."""
    if adapter.runtime is None:
        return free_host_bytes()
    declared = declared_target(cfg)["device"] if cfg is not None else None
    return declared if declared is not None else int(adapter.runtime.mem_get_info(adapter.index)[0])


def memory_line(job: Job, what: str, need: RunMemory | int, free: int) -> dict[str, Any]:
    """A plan's memory entry: what is needed against what is free; one that does not fit the headroom is
    a problem of the job."""
    total = need.total if isinstance(need, RunMemory) else int(need)
    entry = {"need_mb": total / _MB, "free_mb": free / _MB, "headroom": DEFAULT_HEADROOM,
             "fits": total <= DEFAULT_HEADROOM * free}
    if isinstance(need, RunMemory):
        entry.update(need.to_dict())
    entry["what"] = what
    if not entry["fits"]:
        job.problems.append(
            f"{what} needs about {entry['need_mb'] / 1e3:.1f} GB, more than the {DEFAULT_HEADROOM:.0%} planned for "
            f"of the {entry['free_mb'] / 1e3:.1f} GB free: choose a smaller preset, batch or dtype (or "
            "baseline.reference=float32 for the CPU reference)")
    return entry


def outputs_plan(job: Job) -> list[str]:
    """The files the job would write (paths)."""
    baseline = job.plan.get("baseline") or {}
    files = ["record.json", "ascendbench.log", "tensors/inputs.safetensors", "tensors/device.safetensors"]
    replay = baseline.get("mode") == "replay"
    if replay:  # no whole-model reference outputs: the recorded calls and the per-module results
        files += ["replay/calls/<n>.safetensors (a file per recorded call)", "replay/manifest.json",
                  "replay/results.json", "replay_child.log"]
    elif baseline.get("enabled"):
        files.append("tensors/reference.safetensors")
    kind = job.task.output_kind if job.task is not None else None
    if kind in ("image", "video"):
        both = " and reference" * bool(baseline.get("enabled") and not replay)
        files.append(f"{'images' if kind == 'image' else 'videos'}/... (device{both})")
    written = [str(Path(job.dir) / f) for f in files]
    if baseline.get("enabled") and baseline.get("cache_hit") is False and not replay:
        written.append(f"{baseline['path']}/ (the CPU reference, cached for later jobs)")
    return written


def _gb(mb: float | None) -> str:
    return "?" if mb is None else f"{mb / 1e3:.2f} GB"


def _memory_text(entry: Mapping[str, Any]) -> str:
    activations = entry.get("activations_mb")
    parts = f"parameters {_gb(entry.get('parameters_mb'))} + activations {_gb(activations)}"
    if activations is None:
        parts += f" ({entry.get('activation_note')})"
    if entry.get("reference_process_mb") is not None:  # a child process: its imports, the job's own float32 copy
        parts += " + the reference process's imports and the job's float32 copy"
    verdict = "fits" if entry["fits"] else "DOES NOT FIT"
    return f"{entry['what']}: {parts} -> {_gb(entry['need_mb'])} of {_gb(entry['free_mb'])} free: {verdict}"


def _weights_text(weights: Mapping[str, Any]) -> str:
    if not weights:
        return "not planned (see the problems)"
    where = weights.get("path") or weights.get("endpoint") or (
        f"seed {weights.get('init_seed')}" if weights.get("action") == "random-init" else weights.get("source"))
    detail = weights.get("origin") or weights.get("reason") or ""
    files = f", {len(weights['files'])} file(s), {weights['size_mb']:.1f} MB" if weights.get("files") else ""
    return f"{weights.get('action')}: {where} ({detail}){files}"


def _memory_lines(memory: Mapping[str, Any]) -> list[str]:
    lines = []
    if "num_params" in memory:
        lines.append(f"  memory    {memory['num_params']:,} parameters and buffers ({memory['basis']})")
    if "unavailable" in memory:
        lines.append(f"  memory    not estimated: {memory['unavailable']}")
    for key in ("device_run", "cpu_reference"):
        entry = memory.get(key) or {}
        if "unavailable" in entry:
            lines.append(f"            {key.replace('_', ' ')} not estimated: {entry['unavailable']}")
        elif entry:  # a multi-card job: one line per rank (and the host's, on the CPU)
            ranks = [*entry.get("per_rank", []), *([entry["host"]] if entry.get("host") else [])]
            lines.extend(f"            {_memory_text(e)}" for e in ranks or [entry])
    from ascendbench.baseline.replay_memory import plan_lines  # the replay reference's plan, when there is one

    lines += plan_lines(memory.get("replay_reference"))
    return lines or ["  memory    not estimated"]


def _source_text(source: Mapping[str, Any]) -> str:
    """Where a saved reference (``baseline.source``) comes from, for the plan."""
    if not source.get("kind"):
        return f"saved run {source.get('given')}: not usable (see the problems)"
    if source["kind"] == "tensors":
        return f"saved outputs {source['tensors']} (no CPU reference computed; {source['limitation']})"
    return (f"saved run of {source.get('device')} {source.get('dtype')} on {source.get('host')}: {source['tensors']} "
            f"(no CPU reference computed; record {source.get('record')}, checked: {', '.join(source['checked'])})")


def _baseline_text(baseline: Mapping[str, Any]) -> str:
    if baseline.get("source"):
        return _source_text(baseline["source"])
    if baseline.get("mode") == "replay":
        return f"replay reference (per module, {baseline.get('precision')}): {baseline.get('reason')}"
    if baseline.get("enabled"):
        state = {True: "cache hit (reused)", False: "cache miss (computed once, then cached)", None: "unknown"}
        return (f"{baseline['precision']} reference, {state[baseline.get('cache_hit')]}"
                + (f": {baseline['path']}" if baseline.get("path") else f" ({baseline.get('reason')})"))
    return str(baseline.get("reason") or baseline.get("unavailable", "n/a"))


def _count(problems: int) -> str:
    return "ok" if not problems else f"{problems} problem{'s' * (problems > 1)}"


def format_plan(plan: Mapping[str, Any]) -> str:
    """The plan as a few aligned lines (parts a failed stage could not plan are said to be missing)."""
    job = plan.get("job") or {}
    lines = [f"dry run: {job.get('model')} on {job.get('device')} ({job.get('device_name')}) in {job.get('dtype')}, "
             f"preset {job.get('preset')}, seed {job.get('seed')} -- nothing loaded, nothing downloaded",
             f"  weights   {_weights_text(plan.get('weights') or {})}",
             "  inputs    " + ("; ".join(f"{k} {v['shape']} {v['dtype']}"
                                         for k, v in (plan.get("inputs") or {}).items()) or "not built")]
    if plan.get("target"):
        lines.append("  target    planned for the machine declared in dry_run_target ("
                     + ", ".join(f"{k.removesuffix('_memory_gb')} {v:.1f} GB free" for k, v in plan["target"].items())
                     + "), not this host's measured memory")
    lines += _memory_lines(plan.get("memory") or {})
    lines.append(f"  baseline  {_baseline_text(plan.get('baseline') or {})}")
    outputs = plan.get("outputs") or ["not planned"]
    lines += ["  outputs   " + outputs[0]] + [f"            {o}" for o in outputs[1:]]
    by_stage = plan.get("problems_by_stage") or {}
    if by_stage:  # which part of the job would fail: the device side and the reference are told apart
        lines.append("  stages    " + ", ".join(f"{name} {_count(n)}" for name, n in by_stage.items()))
    lines += [f"  PROBLEM   {p}" for p in plan.get("problems", [])] or ["  problems  none"]
    return "\n".join(lines)


def raise_for_problems(plan: Mapping[str, Any]) -> None:
    """Fail the dry run when the real job would fail."""
    if plan["problems"]:
        raise DryRunError(f"dry run: the job would fail ({len(plan['problems'])} problem(s)): "
                          + " | ".join(plan["problems"]))
