"""``dry_run=true``: what a job would do, without loading a model or downloading anything.

The plan says where the weights would come from (a local path, the hub cache, a download, or seeded
random initialisation), the inputs the task would build, the memory the device run and the CPU
reference would need (parameters counted on the ``meta`` device, activations from a meta-device run of
the task: see :mod:`ascendbench.resources`) against the free device and host memory, whether the CPU
reference is already in the baseline cache, and the files the job would write. Every hub lookup runs
with huggingface_hub forced offline, so a dry run never touches the network.

Anything that would make the real job fail (weights required but missing, a pickle checkpoint, inputs
the task cannot build, memory that does not fit) is a *problem*: the plan lists them all and the dry
run fails with :class:`DryRunError`, so ``-m dry_run=true`` shows which jobs of a sweep would fail.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

import torch
from omegaconf import DictConfig

from ascendbench.errors import AscendBenchError, DryRunError
from ascendbench.models.memory import DEFAULT_HEADROOM, available_host_bytes, safetensors_numel, tensor_count
from ascendbench.models.sources import (NotFound, ResolvedSource, files_digest, hub_offline, looks_like_hub_id,
                                        resolve_source)
from ascendbench.resources import RunMemory, baseline_host_bytes, run_memory

_MB = 1e6
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@contextlib.contextmanager
def hub_forced_offline() -> Iterator[None]:
    """huggingface_hub answers from its cache only inside this block (nothing is downloaded)."""
    from huggingface_hub import constants

    saved_env, saved_flag = os.environ.get("HF_HUB_OFFLINE"), constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"], constants.HF_HUB_OFFLINE = "1", True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved_flag
        if saved_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved_env


def _locate(cfg: DictConfig, loader: Any) -> Any:
    """The loader's own resolution when it has one, else :func:`resolve_source` (cache only)."""
    revision = cfg.model.get("revision")
    if hasattr(loader, "resolve"):
        return loader.resolve(cfg.model.source, revision)
    return resolve_source(cfg.model.source, getattr(loader, "subfolder", None), revision,
                          allow_pickle=bool(getattr(loader, "allow_pickle", False)), allow_network=False)


def weights_plan(cfg: DictConfig, loader: Any, problems: list[str]) -> tuple[dict[str, Any], Any]:
    """(the plan's ``weights`` entry, what was found or ``None``)."""
    mode, source, seed = str(cfg.model.weights), cfg.model.source, int(cfg.model.init_seed)
    random_init = {"action": "random-init", "source": source, "init_seed": seed}
    if mode == "random":
        return {**random_init, "reason": "model.weights=random"}, None
    try:
        with hub_forced_offline():
            found = _locate(cfg, loader)
    except AscendBenchError as exc:  # e.g. a pickle checkpoint without model.allow_pickle=true
        problems.append(str(exc))
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
        problems.append(f"model.weights=required but no weights were found for model.source={source!r}: {reason}")
        return {"action": "fail", "source": source, "reason": reason}, None
    return {**random_init, "reason": reason}, None


def meta_model(cfg: DictConfig, loader: Any, found: Any) -> Any:
    """The model as the job would build it, on the ``meta`` device (no storage allocated).

    A loader may provide ``build_meta(found)``; a diffusers loader with a checkpoint directory uses the
    directory's ``config.json``; any other loader runs its own random-init path under ``torch.device("meta")``.
    """
    if hasattr(loader, "build_meta"):
        return loader.build_meta(found)
    if isinstance(found, ResolvedSource) and found.kind == "dir" and hasattr(loader, "class_path"):
        from ascendbench.models.loader import import_class

        cls = import_class(loader.class_path)
        if hasattr(cls, "load_config"):
            config = cls.load_config(str(found.path), subfolder=getattr(loader, "subfolder", None))
            with torch.device("meta"):
                return cls.from_config(config)
    with torch.device("meta"), hub_forced_offline():
        return loader.load(None, "random", int(cfg.model.init_seed), None).module


def free_device_bytes(adapter: Any) -> int:
    """Free memory of the adapter's device (host available memory for the CPU)."""
    if adapter.runtime is None:
        return available_host_bytes()
    return int(adapter.runtime.mem_get_info(adapter.index)[0])


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _memory_line(what: str, need: RunMemory | int, free: int, headroom: float) -> dict[str, Any]:
    total = need.total if isinstance(need, RunMemory) else int(need)
    entry = {"need_mb": total / _MB, "free_mb": free / _MB, "headroom": headroom, "fits": total <= headroom * free}
    if isinstance(need, RunMemory):
        entry.update(need.to_dict())
    entry["what"] = what
    return entry


def memory_plan(cfg: DictConfig, adapter: Any, device_dtype: torch.dtype, precision: torch.dtype | None,
                model: Any, task: Any, inputs: Mapping[str, torch.Tensor], reference_needed: bool,
                problems: list[str]) -> dict[str, Any]:
    """Device run and CPU reference memory against what is free now."""
    headroom = DEFAULT_HEADROOM
    plan: dict[str, Any] = {"num_params": tensor_count(model), "basis": "model built on the meta device"}
    device = run_memory(model, task, inputs, device_dtype)
    plan["device_run"] = _memory_line(f"device run on {adapter.name} in {_name(device_dtype)}", device,
                                      free_device_bytes(adapter), headroom)
    if reference_needed and precision is not None:
        reference = run_memory(model, task, inputs, precision)
        child = str(cfg.baseline.get("process", "child")) == "child"
        plan["cpu_reference"] = _memory_line(f"CPU reference in {_name(precision)}", baseline_host_bytes(reference, child),
                                             available_host_bytes(), headroom)
        plan["cpu_reference"].update(reference.to_dict())
    for key in ("device_run", "cpu_reference"):
        entry = plan.get(key)
        if entry and not entry["fits"]:
            problems.append(f"{entry['what']} needs about {entry['need_mb'] / 1e3:.1f} GB, more than the "
                            f"{headroom:.0%} planned for of the {entry['free_mb'] / 1e3:.1f} GB free: choose a smaller "
                            "preset, batch or dtype (or baseline.reference=float32 for the CPU reference)")
    return plan


def baseline_plan(cfg: DictConfig, precision: torch.dtype | None, weights: Mapping[str, Any],
                  inputs_info: Mapping[str, Any]) -> dict[str, Any]:
    """Reference precision, cache key and whether the cache already holds it."""
    if not cfg.baseline.enabled or precision is None:
        return {"enabled": False, "reason": "baseline.enabled=false (performance-only run)"}
    from ascendbench.baseline.key import cache_key, key_material
    from ascendbench.baseline.store import BaselineStore

    plan: dict[str, Any] = {"enabled": True, "precision": str(precision).replace("torch.", ""),
                            "process": str(cfg.baseline.get("process", "child"))}
    if weights.get("action") == "download":
        return {**plan, "cache_hit": None, "reason": "the weights are not here yet, so the cache key is unknown"}
    identity = ({"kind": "loaded", "digest": weights.get("digest"), "source": weights.get("path")}
                if weights.get("action") == "load" else {"kind": "random-init", "init_seed": weights.get("init_seed")})
    key = cache_key(key_material(cfg, identity, inputs_info, precision))
    store = BaselineStore(cfg.baseline.cache_dir)
    return {**plan, "cache_key": key, "path": str(store.entry(key)),
            "cache_hit": bool(cfg.baseline.get("cache", True)) and store.has_outputs(key)}


def outputs_plan(job_dir: Path, task: Any, inputs: Mapping[str, torch.Tensor], baseline: Mapping[str, Any]) -> list[str]:
    """The files the job would write (paths)."""
    files = ["record.json", "ascendbench.log", "tensors/inputs.safetensors", "tensors/device.safetensors"]
    if baseline.get("enabled"):
        files.append("tensors/reference.safetensors")
    kind = getattr(task, "output_kind", None)
    if kind in ("image", "video"):
        files.append(f"{'images' if kind == 'image' else 'videos'}/... (device{' and reference' * bool(baseline.get('enabled'))})")
    written = [str(Path(job_dir) / f) for f in files]
    if baseline.get("enabled") and baseline.get("cache_hit") is False:
        written.append(f"{baseline['path']}/ (the CPU reference, cached for later jobs)")
    return written


def _safe(what: str, problems: list[str], fn: Any, default: Any = None) -> Any:
    """Run one part of the plan; an error the real job would also hit becomes a problem."""
    try:
        return fn()
    except AscendBenchError as exc:
        problems.append(str(exc))
    except Exception as exc:  # the plan is best effort beyond our own errors: say what could not be estimated
        return {"unavailable": f"{what}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
    return default


def make_plan(cfg: DictConfig, adapter: Any, dtype_name: str, precision: torch.dtype | None, loader: Any,
              task: Any, job_dir: Path) -> dict[str, Any]:
    """The whole plan of one job (see the module docstring); nothing is loaded or downloaded."""
    from ascendbench.tasks import describe

    problems: list[str] = []
    weights, found = weights_plan(cfg, loader, problems)
    inputs = _safe("inputs", problems, lambda: task.make_inputs(cfg.preset, cfg.seed))
    inputs = inputs if isinstance(inputs, Mapping) and all(isinstance(v, torch.Tensor) for v in inputs.values()) else None
    inputs_info = describe(inputs) if inputs else {}
    baseline = _safe("baseline", problems, lambda: baseline_plan(cfg, precision, weights, inputs_info), {}) or {}
    memory: Any = {"unavailable": "no inputs to size the run with"}
    if inputs:
        model = _safe("model on the meta device", problems, lambda: meta_model(cfg, loader, found),
                      {"unavailable": "the model could not be built on the meta device (see the problems)"})
        if model is not None and not isinstance(model, dict):
            need_reference = bool(baseline.get("enabled")) and baseline.get("cache_hit") is not True
            memory = _safe("memory", problems, lambda: memory_plan(cfg, adapter, TORCH_DTYPES[dtype_name], precision,
                                                                    model, task, inputs, need_reference, problems))
        elif isinstance(model, dict):
            memory = model
    if isinstance(found, ResolvedSource) and not found.pickle and isinstance(memory, dict):
        memory["num_params_on_disk"] = safetensors_numel(found.files)
    return {"job": {"model": cfg.model.name, "device": adapter.name, "device_name": adapter.device_name(),
                    "dtype": dtype_name, "preset": cfg.preset.name, "seed": int(cfg.seed)},
            "weights": weights, "inputs": inputs_info, "memory": memory, "baseline": baseline,
            "outputs": outputs_plan(job_dir, task, inputs or {}, baseline), "problems": problems}


def _gb(mb: float | None) -> str:
    return "?" if mb is None else f"{mb / 1e3:.2f} GB"


def _memory_text(entry: Mapping[str, Any]) -> str:
    activations = entry.get("activations_mb")
    parts = f"parameters {_gb(entry.get('parameters_mb'))} + activations {_gb(activations)}"
    if activations is None:
        parts += f" ({entry.get('activation_note')})"
    verdict = "fits" if entry["fits"] else "DOES NOT FIT"
    return f"{entry['what']}: {parts} -> {_gb(entry['need_mb'])} of {_gb(entry['free_mb'])} free: {verdict}"


def format_plan(plan: Mapping[str, Any]) -> str:
    """The plan as a few aligned lines."""
    job, weights, memory, baseline = plan["job"], plan["weights"], plan["memory"], plan["baseline"]
    lines = [f"dry run: {job['model']} on {job['device']} ({job['device_name']}) in {job['dtype']}, "
             f"preset {job['preset']}, seed {job['seed']} -- nothing loaded, nothing downloaded"]
    where = weights.get("path") or weights.get("endpoint") or (
        f"seed {weights['init_seed']}" if weights["action"] == "random-init" else weights.get("source"))
    detail = weights.get("origin") or weights.get("reason") or ""
    lines.append(f"  weights   {weights['action']}: {where} ({detail})"
                 + (f", {len(weights['files'])} file(s), {weights['size_mb']:.1f} MB" if weights.get("files") else ""))
    lines.append("  inputs    " + ("; ".join(f"{k} {v['shape']} {v['dtype']}" for k, v in plan["inputs"].items())
                                   or "not built"))
    if "unavailable" in memory:
        lines.append(f"  memory    not estimated: {memory['unavailable']}")
    else:
        lines.append(f"  memory    {memory['num_params']:,} parameters and buffers ({memory['basis']})")
        lines += [f"            {_memory_text(memory[k])}" for k in ("device_run", "cpu_reference") if k in memory]
    if baseline.get("enabled"):
        state = {True: "cache hit (reused)", False: "cache miss (computed once, then cached)", None: "unknown"}
        lines.append(f"  baseline  {baseline['precision']} reference, {state[baseline.get('cache_hit')]}"
                     + (f": {baseline['path']}" if baseline.get("path") else f" ({baseline.get('reason')})"))
    else:
        lines.append(f"  baseline  {baseline.get('reason') or baseline.get('unavailable', 'n/a')}")
    lines += ["  outputs   " + plan["outputs"][0]] + [f"            {o}" for o in plan["outputs"][1:]]
    lines += [f"  PROBLEM   {p}" for p in plan["problems"]] or ["  problems  none"]
    return "\n".join(lines)


def raise_for_problems(plan: Mapping[str, Any]) -> None:
    """Fail the dry run when the real job would fail."""
    if plan["problems"]:
        raise DryRunError(f"dry run: the job would fail ({len(plan['problems'])} problem(s)): "
                          + " | ".join(plan["problems"]))
