"""One job, stage by stage; every stage's result lands in the record as soon as it is known.

    device -> dtype -> model -> task inputs -> CPU reference -> device bench -> metrics -> artifacts
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Mapping

import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ascendbench.artifacts import save_images, save_tensors, video_artifacts
from ascendbench.baseline import get_or_compute, reference_dtype
from ascendbench.bench import MemoryDelta, tensor_bytes_mb
from ascendbench.bench.measure import attach_phase_timer, measure
from ascendbench.compare import accuracy_artifacts
from ascendbench.confdir import load_option
from ascendbench.devices import DeviceAdapter
from ascendbench.env import environment
from ascendbench.errors import AscendBenchError, ConfigError
from ascendbench.failures import (classify, config_for_record, console_paragraph, interrupted, log_traceback,
                                  release_memory)
from ascendbench.metrics import merge_rules, worst
from ascendbench.patches import patches_applied
from ascendbench.plan import format_plan, make_plan, raise_for_problems
from ascendbench.record import RecordWriter
from ascendbench.resources import guard_reference_memory
from ascendbench.resume import finished_record
from ascendbench.summary import print_summary
from ascendbench.tasks import describe, move_inputs, place
from ascendbench.tasks.checks import CheckContext
from ascendbench.validate import check_types

log = logging.getLogger(__name__)


class _EmptyKeepInFloat32Filter(logging.Filter):
    """Drop diffusers' warning about modules to keep in float32 when that list is empty."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("There are modules in") or ": []." not in record.getMessage()


logging.getLogger("diffusers.models.modeling_utils").addFilter(_EmptyKeepInFloat32Filter())

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
HALF_ON_CPU = (
    "dtype={dtype} on cpu: half-precision convolutions on CPUs without AVX512-BF16/AMX run about 170x "
    "slower than float32 (measured on a 2-core AVX2 host: one 384-channel 3x3 conv at 32x32 took 22 ms "
    "in float32, 3.8 s in bfloat16, 4.3 s in float16); use a tiny model or dtype=float32 on CPU"
)


def build(node: DictConfig, key: str, **kwargs: Any) -> Any:
    """``instantiate`` a config node; our own errors pass through, others name the config key."""
    try:
        return instantiate(node, **kwargs)
    except InstantiationException as exc:
        if isinstance(exc.__cause__, AscendBenchError):
            raise exc.__cause__ from None
        raise ConfigError(
            f"{key} could not be built from _target_={node.get('_target_')!r}: {exc}. Check the keys "
            f"under {key} against the signature of its _target_ (`--cfg job` prints them)."
        ) from exc


def resolve_dtype(dtype_cfg: DictConfig, device_type: str) -> DictConfig:
    """The dtype option in force: ``auto`` becomes the device's choice, loaded from its own file."""
    name = dtype_cfg.name
    if name == "auto":
        chosen = OmegaConf.select(dtype_cfg, f"by_device.{device_type}")
        resolved = load_option("dtype", chosen)
        log.info("dtype=auto chose %s for device %s", chosen, device_type)
        return resolved
    if name not in TORCH_DTYPES:
        raise ConfigError(
            f"dtype.name={name!r} is not supported; allowed: {', '.join(TORCH_DTYPES)} or auto. "
            "Choose the option on the command line, e.g. `dtype=float16`."
        )
    return dtype_cfg


def run_job(cfg: DictConfig, job_dir: Path) -> dict[str, Any]:
    """Run one composed job and return its final record (also written to ``job_dir``)."""
    if (previous := finished_record(cfg, job_dir)) is not None:  # resume: ok record, same config
        return previous
    writer = RecordWriter(job_dir, config_for_record(cfg))
    writer.update(env=environment())
    try:
        check_types(cfg)
        _execute(cfg, Path(job_dir), writer)
    except KeyboardInterrupt as exc:
        writer.finish("interrupted", interrupted(exc), reason="interrupted")
        log.error("job interrupted; record (status interrupted): %s", writer.path)
        raise
    except Exception as exc:  # own errors keep their reason, out-of-memory -> oom, anything else 'unexpected'
        _fail(writer, *classify(exc, (writer.data.get("job") or {}).get("device")))
    if writer.data["status"] == "failed":
        release_memory()  # out of the except block: the traceback no longer holds the job's tensors
    return writer.data


def _fail(writer: RecordWriter, exc: BaseException, reason: str) -> None:
    log_path = log_traceback(exc, writer.job_dir)
    writer.finish("failed", exc, reason=reason)
    log.error("job failed (%s, reason %s): %s\n  record: %s\n  full log with traceback: %s", type(exc).__name__,
              reason, console_paragraph(exc), writer.path, log_path)


def _execute(cfg: DictConfig, job_dir: Path, writer: RecordWriter) -> None:
    adapter = build(cfg.device, "device")
    dtype_cfg = resolve_dtype(cfg.dtype, adapter.name)
    device_dtype = TORCH_DTYPES[dtype_cfg.name]
    writer.update(job=_job_fields(cfg, adapter, dtype_cfg))
    writer.data["env"]["device"] = adapter.info()
    if adapter.name == "cpu" and device_dtype != torch.float32:
        log.warning(HALF_ON_CPU.format(dtype=dtype_cfg.name))
        writer.warn(HALF_ON_CPU.format(dtype=dtype_cfg.name))
    if cfg.dry_run:
        _dry_run(cfg, adapter, dtype_cfg, writer)
        writer.finish("ok")
        return

    loader = build(cfg.model.loader, "model.loader")
    with MemoryDelta(DeviceAdapter("cpu")) as load_memory:  # the load happens on the host: time and RSS delta
        loaded = loader.load(cfg.model.source, cfg.model.weights, cfg.model.init_seed, cfg.model.get("revision"))
    writer.update(weights={**loaded.weights, "load_seconds": loaded.load_seconds, "load": load_memory.to_dict()})
    if loaded.weights["kind"] == "random-init":
        writer.warn(f"weights: random-init (seed {loaded.weights['init_seed']}): {loaded.weights['reason']}")

    task = build(cfg.model.task, "model.task")
    inputs = task.make_inputs(cfg.preset, cfg.seed)
    writer.update(inputs=describe(inputs))

    patches = cfg.model.get("patches")  # model.patches: applied around each run, restored after it
    with patches_applied(_reference_patches(cfg, patches), loaded.module, "cpu") as applied:
        writer.update(patches={"reference": (applied or _UNPATCHED_CHILD) if patches else applied})
        reference = _reference(cfg, loaded.module, task, inputs, device_dtype, writer)
    with patches_applied(patches, loaded.module, adapter.name) as applied:
        writer.update(patches={**writer.data["patches"], "device": applied})
        device_outputs, bench = _device_run(cfg, loaded.module, task, inputs, adapter, device_dtype)
        checks = _task_checks(cfg, dtype_cfg, task, loader, loaded, inputs, device_outputs, adapter, device_dtype)
    writer.update(bench=bench)

    if reference is not None or checks:
        metrics = _evaluate(cfg, dtype_cfg, reference, device_outputs) if reference is not None else writer.data["metrics"]
        metrics = {**metrics, **checks}
        writer.update(metrics=metrics, verdict=worst(m.get("verdict") for m in metrics.values()))
    writer.update(artifacts=_save_artifacts(job_dir, task, inputs, reference, device_outputs, cfg.get("artifacts")))
    accuracy_artifacts(cfg, job_dir, writer, loaded.module, task, inputs, adapter, dtype_cfg, reference, device_outputs)
    writer.finish("ok")
    print_summary(writer.data, writer.path)


_UNPATCHED_CHILD = [{"skipped": "the CPU reference runs the model's own (upstream) code in a clean child "
                               "process; model.patches apply to the device run only"}]


def _reference_patches(cfg: DictConfig, patches: Any) -> Any:
    """Patches of the in-process reference run; none for the child process, which rebuilds the model."""
    return patches if cfg.baseline.get("process") == "in-process" else None


def _task_checks(cfg: DictConfig, dtype_cfg: DictConfig, task: Any, loader: Any, loaded: Any,
                 inputs: Mapping[str, torch.Tensor], outputs: Mapping[str, torch.Tensor], adapter: Any,
                 dtype: torch.dtype) -> dict[str, Any]:
    """The task's own gates (``task.checks``, e.g. the tokenizer's), as metrics; ``{}`` for other tasks."""
    if not hasattr(task, "checks"):
        return {}
    plain = lambda node: OmegaConf.to_container(node, resolve=True) if node is not None else None  # noqa: E731
    rules = merge_rules(plain(dtype_cfg.get("thresholds")), plain(cfg.model.get("thresholds")))

    @contextmanager
    def control():  # the same architecture, randomly initialised and patched like the model
        twin = loader.load(cfg.model.source, "random", cfg.model.init_seed, cfg.model.get("revision")).module
        with patches_applied(cfg.model.get("patches"), twin, adapter.name):
            yield twin

    ctx = CheckContext(loaded.module, adapter.torch_device, dtype, inputs, outputs, loaded.weights, rules, control)
    return task.checks(ctx)


def _job_fields(cfg: DictConfig, adapter: Any, dtype_cfg: DictConfig) -> dict[str, Any]:
    return {
        "model": cfg.model.name,
        "task": OmegaConf.select(cfg, "model.task._target_"),
        "device": adapter.name,
        "device_requested": cfg.device.name,
        "dtype": dtype_cfg.name,
        "dtype_requested": cfg.dtype.name,
        "preset": cfg.preset.name,
        "seed": int(cfg.seed),
        "batch_size": int(cfg.preset.batch_size),
        "height": int(cfg.preset.height),
        "width": int(cfg.preset.width),
    }


def _dry_run(cfg: DictConfig, adapter: Any, dtype_cfg: DictConfig, writer: RecordWriter) -> None:
    """Print the resolved config and the plan (:mod:`ascendbench.plan`), keep the plan in the record;
    nothing is loaded or downloaded. Fails when the real job would fail."""
    precision = reference_dtype(cfg.baseline.reference, TORCH_DTYPES[dtype_cfg.name]) if cfg.baseline.enabled else None
    plan = make_plan(cfg, adapter, dtype_cfg.name, precision, build(cfg.model.loader, "model.loader"),
                     build(cfg.model.task, "model.task"), writer.job_dir)
    writer.update(plan=plan)
    print(OmegaConf.to_yaml(cfg, resolve=True))
    print(format_plan(plan), flush=True)
    raise_for_problems(plan)


def _reference(cfg: DictConfig, module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
               device_dtype: torch.dtype, writer: RecordWriter) -> dict[str, torch.Tensor] | None:
    """The CPU reference outputs (a :class:`ascendbench.baseline.Baseline`: a dict with ``info`` and
    ``layers``), from the baseline cache or a clean child process; ``None`` for a performance-only run."""
    if not cfg.baseline.enabled:
        writer.update(baseline={"skipped": "baseline.enabled=false (performance-only run)"})
        writer.update(metrics={"accuracy": {"skipped": "no CPU reference (baseline.enabled=false): performance-only run"}})
        return None
    precision = reference_dtype(cfg.baseline.reference, device_dtype)
    writer.update(resources={"reference": guard_reference_memory(  # refuse before a host OOM kill
        cfg, module, task, inputs, precision, writer.data["weights"], writer.data["inputs"])})
    baseline = get_or_compute(cfg, module, task, inputs, precision, writer.data["weights"], writer.data["inputs"],
                              writer.job_dir)
    writer.update(baseline=baseline.info)
    writer.data["job"]["reference_dtype"] = baseline.info["precision"]
    return baseline


def _device_run(cfg: DictConfig, module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                adapter: Any, dtype: torch.dtype) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    device, dtype_name = adapter.torch_device, str(dtype).replace("torch.", "")
    log.info("device run on %s in %s ...", device, dtype_name)
    with MemoryDelta(adapter) as placement:
        module = place(task, module, device, dtype)  # task.to() when defined: pipelines, VAE options
    moved = move_inputs(inputs, device, dtype)
    timer = attach_phase_timer(task, module, adapter) if cfg.bench.enabled and cfg.bench.phases else None
    result, bench = measure(lambda: task.run(module, moved), adapter, cfg.bench, dtype_name,
                            task.items_per_call(inputs), task.unit, phase_timer=timer)
    bench["placement"] = {**placement.to_dict(), "module_mb": tensor_bytes_mb(module)}
    outputs = {k: v.detach().to("cpu") for k, v in result.first_outputs.items()}
    return outputs, bench


def _evaluate(cfg: DictConfig, dtype_cfg: DictConfig, reference: Mapping[str, torch.Tensor],
              device_outputs: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Record entries of the metric option's evaluators; rules: dtype < model < metric < evaluator."""
    suite = build(cfg.metric, "metric")
    plain = lambda node: OmegaConf.to_container(node, resolve=True) if node is not None else None  # noqa: E731
    rules = merge_rules(plain(dtype_cfg.get("thresholds")), plain(cfg.model.get("thresholds")))
    tolerances = {k: float(dtype_cfg[k]) for k in ("small_value", "small_value_atol") if dtype_cfg.get(k) is not None}
    return suite.evaluate(reference, device_outputs, rules, atol=float(dtype_cfg.atol), rtol=float(dtype_cfg.rtol),
                          **tolerances)


def _save_artifacts(job_dir: Path, task: Any, inputs: Mapping[str, torch.Tensor],
                    reference: Mapping[str, torch.Tensor] | None,
                    device_outputs: Mapping[str, torch.Tensor], settings: Any = None) -> dict[str, Any]:
    """Tensors (bounded by ``artifacts.max_tensor_mb``), PNGs and mp4s; paths relative to ``job_dir``."""
    settings = settings or {}
    rel = lambda p: str(Path(p).relative_to(job_dir))  # noqa: E731
    artifacts: dict[str, Any] = {}
    tensor_sets = {"inputs": inputs, "device_outputs": device_outputs, "reference_outputs": reference}
    skipped = _tensor_budget_problem({k: v for k, v in tensor_sets.items() if v is not None}, settings)
    if skipped:
        artifacts["tensors_skipped"] = skipped
        log.warning("tensors not saved: %s", skipped)
    else:
        files = {"inputs": "inputs", "device_outputs": "device", "reference_outputs": "reference"}
        for key, tensors in tensor_sets.items():
            if tensors is not None:
                artifacts[key] = rel(save_tensors(job_dir / "tensors" / f"{files[key]}.safetensors", tensors))
    if settings.get("media", True):
        try:
            artifacts.update(_media(job_dir, task, reference, device_outputs, rel))
        except (OSError, RuntimeError, ValueError, AttributeError, ImportError) as exc:  # a missing encoder
            log_traceback(exc, job_dir)
            artifacts["media_skipped"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            log.warning("pictures/videos not written (%s); the metrics and tensors are unaffected",
                        artifacts["media_skipped"])
    return artifacts


def _media(job_dir: Path, task: Any, reference: Mapping[str, torch.Tensor] | None,
           device_outputs: Mapping[str, torch.Tensor], rel: Any) -> dict[str, Any]:
    """PNGs of decoded images; chosen video frames as PNG and each video as mp4."""
    artifacts: dict[str, Any] = {}
    if task.output_kind == "image":
        for name, batch in device_outputs.items():
            artifacts[f"{name}_device_png"] = [rel(p) for p in save_images(job_dir / "images", f"{name}_device", batch)]
            if reference is not None:
                artifacts[f"{name}_reference_png"] = [rel(p) for p in save_images(job_dir / "images", f"{name}_reference", reference[name])]
    if task.output_kind == "video":  # chosen frames as PNG and each video as mp4, device and reference
        artifacts.update(video_artifacts(job_dir, "device", device_outputs, task))
        if reference is not None:
            artifacts.update(video_artifacts(job_dir, "reference", reference, task))
    return artifacts


def _tensor_budget_problem(tensor_sets: Mapping[str, Mapping[str, torch.Tensor]], settings: Any) -> str | None:
    """Why the compared tensors are not written (switched off, or over ``artifacts.max_tensor_mb``), else None."""
    if not settings.get("tensors", True):
        return "artifacts.tensors=false"
    limit = settings.get("max_tensor_mb")
    total_mb = sum(t.numel() * t.element_size() for ts in tensor_sets.values() for t in ts.values()) / 2**20
    if limit is not None and total_mb > float(limit):
        return (f"{total_mb:.0f} MiB of tensors exceed artifacts.max_tensor_mb={limit}; raise it to keep them "
                "(metrics are in the record either way)")
    return None
