"""Loading the model (weights or seeded random init) and building the task's inputs; a dry run
looks in the hub cache only and builds the model on the ``meta`` device."""

from __future__ import annotations

from typing import Any

import torch
from huggingface_hub import constants

from ascendbench.bench.memory import MemoryDelta
from ascendbench.config.targets import build
from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.errors import AscendBenchError, InsufficientMemoryError
from ascendbench.job.job import Job
from ascendbench.job.stages.base import Stage
from ascendbench.models import sources
from ascendbench.models.base import ModelLoader, locate
from ascendbench.models.memory import declared_host_memory, safetensors_numel, tensor_count
from ascendbench.progress import Progress
from ascendbench.tasks.inputs import describe, summarize


def weights_plan(job: Job) -> tuple[dict[str, Any], Any]:
    """(the plan's ``weights`` entry, what was found or ``None``); a refusal is a problem."""
    cfg = job.cfg
    mode, source, seed = str(cfg.model.weights), cfg.model.source, int(cfg.model.init_seed)
    random_init = {"action": "random-init", "source": source, "init_seed": seed}
    if mode == "random":
        return {**random_init, "reason": "model.weights=random"}, None
    try:
        with sources.hub_forced_offline():
            found = locate(job.loader, source, cfg.model.get("revision"))
    except AscendBenchError as exc:  # e.g. a pickle checkpoint without model.allow_pickle=true
        job.problems.append(str(exc))
        return {"action": "refused", "source": source, "reason": str(exc)}, None
    files = tuple(getattr(found, "files", ()) or ())
    path = getattr(found, "path", None)
    if path is not None and not isinstance(found, sources.NotFound):
        size = sum(f.stat().st_size for f in files if f.is_file())
        return {"action": "load", "source": source, "path": str(path),
                "origin": getattr(found, "origin", "local"), "files": [f.name for f in files],
                "size_mb": size / 1e6,
                "digest": sources.files_digest(files) if files else None}, found
    reason = getattr(found, "reason", "not found")
    if sources.looks_like_hub_id(str(source or "")) and not sources.hub_offline():
        fallback = "random-init" if mode == "auto" else "the job fails"
        return {"action": "download", "source": source, "endpoint": constants.ENDPOINT,
                "reason": f"not in the hub cache {constants.HF_HUB_CACHE}: the job would download "
                          f"it (if that fails: {fallback})"}, None
    if mode == "required":
        job.problems.append(f"model.weights=required but no weights were found for "
                            f"model.source={source!r}: {reason}")
        return {"action": "fail", "source": source, "reason": reason}, None
    return {**random_init, "reason": reason}, None


def _on_meta(loader: Any, found: Any, seed: int) -> Any:
    if isinstance(loader, ModelLoader):
        return loader.build_meta(found, seed)
    with torch.device("meta"), sources.hub_forced_offline():
        return loader.load(None, "random", seed, None).module


def meta_model(job: Job) -> Any:
    """The model as the job would build it, on the ``meta`` device. A model the job would refuse
    to allocate is a problem, and still built on meta so that the rest can be planned."""
    loader, seed = job.loader, int(job.cfg.model.init_seed)
    try:
        return _on_meta(loader, job.found, seed)
    except InsufficientMemoryError as refusal:
        job.problems.append(str(refusal))
        if not getattr(loader, "memory_check", False):  # a check that cannot be switched off:
            with declared_host_memory(1 << 62):          # a meta build allocates nothing anyway
                return _on_meta(loader, job.found, seed)
        loader.memory_check = False
        try:
            return _on_meta(loader, job.found, seed)
        finally:
            loader.memory_check = True


class LoadStage(Stage):
    """``model.loader`` builds the model on the host: loaded weights, or the real architecture
    randomly initialised (``model.weights``), labelled as such."""

    name, label = "load", "model loading"

    def plan(self, job: Job) -> dict[str, Any]:
        """Where the weights would come from and the model on the ``meta`` device."""
        job.loader = build(job.cfg.model.loader, "model.loader")
        weights, job.found = weights_plan(job)
        job.add_plan({"weights": weights})
        unbuilt = {"unavailable": "the model could not be built on the meta device (see the "
                                  "problems)"}
        model = job.attempt("model on the meta device", lambda: meta_model(job), unbuilt)
        if isinstance(model, dict):
            job.add_plan({"memory": model})
            return {}
        job.model = model
        memory = {"num_params": tensor_count(model), "basis": "model built on the meta device"}
        parts = {name: tensor_count(part) for name, part in  # a pipeline: each component's size
                 (getattr(model, "components", None) or {}).items()
                 if isinstance(part, torch.nn.Module)}
        if parts:
            size = job.precision.dtype.itemsize if job.precision else 4
            memory["components"] = {name: {"num_params": count, "gb": round(count * size / 1e9, 3)}
                                    for name, count in parts.items()}
        if isinstance(job.found, sources.ResolvedSource) and not job.found.pickle:
            memory["num_params_on_disk"] = safetensors_numel(job.found.files)
        job.add_plan({"memory": memory})
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Load, timing it and its host-memory delta; weights of another digest than
        ``model.expect_digest`` are refused."""
        cfg = job.cfg
        job.loader = build(cfg.model.loader, "model.loader")
        with MemoryDelta(DeviceAdapter("cpu")) as load_memory:  # on the host
            with Progress("model load", unit="").ticking():
                loaded = job.loader.load(cfg.model.source, cfg.model.weights, cfg.model.init_seed,
                                         cfg.model.get("revision"))
        job.model = loaded.module
        described = repr(job.model)  # a layer says its shape: Conv3d(128, 1024, ...)
        module = type(job.model).__module__ + "." + type(job.model).__qualname__
        job.weights = {**loaded.weights, "load_seconds": loaded.load_seconds,
                       "load": load_memory.to_dict(),
                       "module": described if len(described) <= 200 else module}
        if job.weights["kind"] == "random-init":
            job.warn(f"weights: random-init (seed {job.weights['init_seed']}): "
                     f"{job.weights['reason']}")
        job.record({"weights": job.weights})  # a refused digest still leaves the digest found
        job.weights.update(sources.check_digest(cfg.model.get("expect_digest"), job.weights))
        return {"weights": job.weights}


def with_sources(inputs: dict[str, dict[str, Any]], task: Any) -> dict[str, dict[str, Any]]:
    """The record's ``inputs`` with each input's ``source`` where the task gives one."""
    given = task.input_sources() if task is not None else {}
    return {name: {**info, **({"source": given[name]} if name in given else {})}
            for name, info in inputs.items()}


class InputsStage(Stage):
    """``model.task`` builds its deterministic inputs from the preset and the seed."""

    name, label = "inputs", "building the inputs"

    def plan(self, job: Job) -> dict[str, Any]:
        """The inputs are built (they are small); a task that cannot build them is a problem."""
        job.task = build(job.cfg.model.task, "model.task")
        job.attempt("inputs", lambda: self.run(job))
        job.add_plan({"inputs": with_sources(job.inputs_info, job.task)})
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Build the task and its inputs."""
        job.task = job.task or build(job.cfg.model.task, "model.task")
        job.inputs = job.task.make_inputs(job.cfg.preset, job.cfg.seed)
        job.inputs_info = describe(job.inputs)  # shape, dtype, sha256: also the reference's key
        stats = summarize(job.inputs)
        sizes = job.task.sizes(job.cfg.preset)
        used = {key: sizes[key] for key in ("num_frames", "steps") if key in sizes}
        described = {name: {**info, **stats[name]} for name, info in job.inputs_info.items()}
        return {"inputs": with_sources(described, job.task),
                "job": {"sizes": sizes, **used, "primary": job.task.report_declaration()}}
