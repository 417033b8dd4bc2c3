"""Loading the model (weights or seeded random init) and building the task's inputs."""

from __future__ import annotations

from typing import Any

from ascendbench.bench import MemoryDelta
from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.job.job import Job
from ascendbench.job.planning import meta_model, weights_plan
from ascendbench.job.stages.base import Stage, build
from ascendbench.models.digest_check import check_digest
from ascendbench.models.memory import safetensors_numel, tensor_count
from ascendbench.models.sources import ResolvedSource
from ascendbench.progress import Progress
from ascendbench.tasks import describe
from ascendbench.tasks.inputs import summarize


class LoadStage(Stage):
    """``model.loader`` builds the model on the host: loaded weights, or the real architecture randomly
    initialised (``model.weights``), labelled as such."""

    name, label = "load", "model loading"

    def plan(self, job: Job) -> dict[str, Any]:
        """Where the weights would come from and the model on the ``meta`` device; nothing is loaded."""
        job.loader = build(job.cfg.model.loader, "model.loader")
        weights, job.found = weights_plan(job)
        job.add_plan({"weights": weights})
        model = job.attempt("model on the meta device", lambda: meta_model(job),
                            {"unavailable": "the model could not be built on the meta device (see the problems)"})
        if isinstance(model, dict):
            job.add_plan({"memory": model})
            return {}
        job.model = model
        memory: dict[str, Any] = {"num_params": tensor_count(model), "basis": "model built on the meta device"}
        if isinstance(job.found, ResolvedSource) and not job.found.pickle:
            memory["num_params_on_disk"] = safetensors_numel(job.found.files)
        job.add_plan({"memory": memory})
        return {}

    def run(self, job: Job) -> dict[str, Any]:
        """Load; time and host-memory delta of the load are part of the ``weights`` section. With
        ``model.expect_digest``, weights of another digest are refused (:mod:`ascendbench.models.digest_check`)."""
        cfg = job.cfg
        job.loader = build(cfg.model.loader, "model.loader")
        with MemoryDelta(DeviceAdapter("cpu")) as load_memory, Progress("model load", unit="").ticking():  # on the host
            job.loaded = job.loader.load(cfg.model.source, cfg.model.weights, cfg.model.init_seed,
                                         cfg.model.get("revision"))
        job.model = job.loaded.module
        job.weights = {**job.loaded.weights, "load_seconds": job.loaded.load_seconds, "load": load_memory.to_dict()}
        if job.weights["kind"] == "random-init":
            job.warn(f"weights: random-init (seed {job.weights['init_seed']}): {job.weights['reason']}")
        job.record({"weights": job.weights})  # a refused digest still leaves the digest found in the record
        job.weights.update(check_digest(cfg.model.get("expect_digest"), job.weights))
        return {"weights": job.weights}


class InputsStage(Stage):
    """``model.task`` builds its deterministic inputs from the preset and the seed (a CPU generator)."""

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
        job.inputs_info = describe(job.inputs)  # shape, dtype, sha256: also the reference's cache key
        stats = summarize(job.inputs)
        sizes = job.task.sizes(job.cfg.preset)
        used = {key: sizes[key] for key in ("num_frames", "steps") if key in sizes}
        described = {name: {**info, **stats[name]} for name, info in job.inputs_info.items()}
        return {"inputs": with_sources(described, job.task),
                "job": {"sizes": sizes, **used, "primary": job.task.report_declaration()}}


def with_sources(inputs: dict[str, dict[str, Any]], task: Any) -> dict[str, dict[str, Any]]:
    """The record's ``inputs`` with each input's ``source`` (:meth:`Task.input_sources`) where the task gives one."""
    sources = task.input_sources() if task is not None else {}
    return {name: {**info, **({"source": sources[name]} if name in sources else {})} for name, info in inputs.items()}
