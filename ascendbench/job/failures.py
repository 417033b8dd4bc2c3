"""What a failed job tells the user, the record and the log; any OOM is DeviceOutOfMemoryError."""

from __future__ import annotations

import gc
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendbench.errors import AscendBenchError, ConfigError, DeviceOutOfMemoryError

log = logging.getLogger(__name__)

CONSOLE_LIMIT = 800  # characters of an unexpected error's message shown on the console
# torch_npu built for CANN 8.x raises a plain RuntimeError from its allocators.
OOM_MARKERS = ("DefaultCPUAllocator: can't allocate memory",
               "DefaultCPUAllocator: not enough memory", "NPU out of memory.")
OOM_HINT = ("Reduce what the device must hold: a smaller preset (`preset=mini`) or "
            "`preset.batch_size`, `preset.height`/`preset.width`/`preset.num_frames`, a half dtype "
            "(`dtype=bfloat16`), or the model's tiling/slicing options; on Ascend, "
            "`device.env.PYTORCH_NPU_ALLOC_CONF=expandable_segments:True` reduces fragmentation. "
            "`dry_run=true` prints the memory estimate before anything is loaded.")


def is_oom(exc: BaseException) -> bool:
    """An accelerator or host out-of-memory, whatever class the runtime raised it as."""
    oom_class = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    if isinstance(exc, (oom_class, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in OOM_MARKERS)


def config_for_record(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config; unresolved where an interpolation is broken (the job fails on it)."""
    try:
        return applied(OmegaConf.to_container(cfg, resolve=True))
    except OmegaConfBaseException:
        return OmegaConf.to_container(cfg, resolve=False)


def applied(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``metric.data_range``, when set, in each evaluator's ``data_range``."""
    metric = config.get("metric")
    if isinstance(metric, dict) and metric.get("data_range") is not None:
        for evaluator in (metric.get("evaluators") or {}).values():
            if isinstance(evaluator, dict) and "data_range" in evaluator:
                evaluator["data_range"] = metric["data_range"]
    return config


def classify(exc: Exception, device: str | None = None,
             stage: str = "the job") -> tuple[BaseException, str]:
    """(error to record, reason): ``oom``, the error's own reason, or ``unexpected``."""
    if isinstance(exc, AscendBenchError):
        return exc, exc.reason
    if isinstance(exc, OmegaConfBaseException):  # a broken interpolation, a missing mandatory value
        error: AscendBenchError = ConfigError(
            f"the configuration cannot be used: {' '.join(str(exc).split())}. Fix the key named "
            "there on the command line (`--cfg job` prints the composed config).")
    elif is_oom(exc):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        error = DeviceOutOfMemoryError(
            f"out of memory on {device or 'the device'} during {stage} "
            f"({type(exc).__module__}.{type(exc).__name__}: {first[:300]}). {OOM_HINT}")
    else:
        return exc, "unexpected"
    error.__cause__ = exc
    return error, error.reason


def interrupted(exc: BaseException, stage: str = "the job") -> KeyboardInterrupt:
    """The record's error for Ctrl-C or a terminating signal: which, where, and how to go on."""
    cause = str(exc) if str(exc).startswith("signal ") else "Ctrl-C / SIGINT"  # "signal SIGTERM"
    return KeyboardInterrupt(f"interrupted ({cause}) during {stage}; run the same "
                             "command again to run this job again (finished jobs of a sweep are "
                             "kept and skipped)")


def console_paragraph(exc: BaseException) -> str:
    """One paragraph: our messages as written, others' with whitespace collapsed and cut short."""
    text = str(exc) if isinstance(exc, AscendBenchError) else " ".join(str(exc).split())
    text = text[:CONSOLE_LIMIT] + " [...]" if len(text) > CONSOLE_LIMIT else text
    return text or type(exc).__name__


def log_traceback(exc: BaseException, job_dir: Path) -> Path:
    """Put the full traceback in the job log, else in ``<job_dir>/traceback.log``."""
    text = "".join(traceback.format_exception(exc))
    handlers = [h for h in logging.getLogger().handlers + logging.getLogger("ascendbench").handlers
                if isinstance(h, logging.FileHandler) and h.baseFilename != os.devnull]
    here = Path(job_dir).resolve()
    inside = [h for h in handlers if here in Path(h.baseFilename).resolve().parents]
    handler = (inside or handlers or [None])[0]
    if handler is not None and handler.level <= logging.DEBUG and log.isEnabledFor(logging.DEBUG):
        log.debug("traceback of the failure:\n%s", text)
        return Path(handler.baseFilename)
    fallback = Path(job_dir) / "traceback.log"
    fallback.parent.mkdir(parents=True, exist_ok=True)
    with open(fallback, "a") as handle:
        handle.write(text)
    return fallback


def release_memory() -> None:
    """Collect the failed job's objects (tracebacks hold its tensors) and empty device caches."""
    gc.collect()
    npu = getattr(torch, "npu", None) if "torch_npu" in sys.modules else None
    for runtime in (torch.cuda, npu):
        try:
            if runtime is not None and runtime.is_initialized():
                runtime.empty_cache()
        except Exception as exc:  # a broken runtime must not hide the job's own failure
            log.debug("could not empty a device cache: %s", exc)
