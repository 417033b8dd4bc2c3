"""What a failed job tells the user, the record and the log; and the memory it gives back.

* :func:`classify` maps an exception to the error the record keeps and its ``reason``: our own
  errors keep theirs, an out-of-memory (``torch.OutOfMemoryError`` on an accelerator, torch_npu's
  ``RuntimeError("NPU out of memory. ...")``, the CPU allocator's failure, ``MemoryError``) becomes
  :class:`DeviceOutOfMemoryError` (``oom``) whose message says what to reduce, anything else is ``unexpected``.
* :func:`console_paragraph` is the one paragraph printed on the console (the traceback goes to the job
  log; :func:`log_traceback` makes sure there is one even without Hydra's file handler).
* :func:`release_memory` frees what a failed job left behind, so the next job of a sweep in the same
  process starts clean.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ascendbench.errors import AscendBenchError, ConfigError, DeviceOutOfMemoryError

log = logging.getLogger(__name__)

CONSOLE_LIMIT = 800  # characters of an unexpected error's message shown on the console
# Function names in a traceback -> the stage the user knows (innermost match wins); used where the job's
# own stage label is not known (the runner passes it).
STAGES = {"measure": "the device run", "get_or_compute": "the CPU reference", "compute_reference": "the CPU reference",
          "load": "model loading", "evaluate": "the metrics", "save_tensors": "saving artifacts"}
_CPU_OOM_MARKERS = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")
# torch_npu built for CANN 8.x raises a plain RuntimeError from its allocators (NPUCachingAllocator.cpp,
# NPUWorkspaceAllocator); only wheels that throw c10::OutOfMemoryError give torch.OutOfMemoryError.
_NPU_OOM_MARKERS = ("NPU out of memory.",)
OOM_HINT = ("Reduce what the device must hold: a smaller preset (`preset=mini`) or `preset.batch_size`, "
            "`preset.height`/`preset.width`/`preset.num_frames`, a half dtype (`dtype=bfloat16`), or the model's "
            "tiling/slicing options; on Ascend, `device.env.PYTORCH_NPU_ALLOC_CONF=expandable_segments:True` "
            "reduces fragmentation. `dry_run=true` prints the memory estimate before anything is loaded.")


def is_oom(exc: BaseException) -> bool:
    """An accelerator or host out-of-memory, whatever class the runtime raised it as."""
    oom_class = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    if isinstance(exc, (oom_class, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in (*_CPU_OOM_MARKERS, *_NPU_OOM_MARKERS))


def stage_of(exc: BaseException) -> str:
    """The job stage an exception came from, from the function names of its traceback."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.name in STAGES:
            return STAGES[frame.name]
    return "the job"


def config_for_record(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config; unresolved where an interpolation is broken (the job then fails on it)."""
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException:
        return OmegaConf.to_container(cfg, resolve=False)


def classify(exc: Exception, device: str | None = None, stage: str | None = None) -> tuple[BaseException, str]:
    """(error to record, reason): ``oom`` for out-of-memory, the error's own reason, or ``unexpected``.

    ``stage`` is the label of the job stage that raised (``the device run``...); without it the stage is
    read from the traceback (:func:`stage_of`)."""
    if isinstance(exc, AscendBenchError):
        return exc, exc.reason
    if isinstance(exc, OmegaConfBaseException):  # a broken interpolation, a missing mandatory value...
        error = ConfigError(f"the configuration cannot be used: {' '.join(str(exc).split())}. Fix the key named "
                            "there on the command line (`--cfg job` prints the composed config).")
        error.__cause__ = exc
        return error, error.reason
    if is_oom(exc):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        error = DeviceOutOfMemoryError(
            f"out of memory on {device or 'the device'} during {stage or stage_of(exc)} "
            f"({type(exc).__module__}.{type(exc).__name__}: {first[:300]}). {OOM_HINT}")
        error.__cause__ = exc
        return error, error.reason
    return exc, "unexpected"


def interrupted(exc: BaseException, stage: str | None = None) -> KeyboardInterrupt:
    """The record's error for Ctrl-C / SIGINT or a terminating signal (SIGTERM): which, where it happened
    (``stage``, else read from the traceback)
    and how to go on."""
    where = stage or stage_of(exc)
    cause = str(exc) if str(exc).startswith("signal ") else "Ctrl-C / SIGINT"  # cli._terminated: "signal SIGTERM"
    return KeyboardInterrupt(f"interrupted ({cause}) during {where}; run the same command again "
                             "to run this job again (finished jobs of a sweep are kept and skipped)")


def console_paragraph(exc: BaseException) -> str:
    """One paragraph: our messages as written, others' with whitespace collapsed and cut short."""
    text = str(exc) if isinstance(exc, AscendBenchError) else " ".join(str(exc).split())
    if len(text) > CONSOLE_LIMIT:
        text = text[:CONSOLE_LIMIT] + " [...]"
    return text or type(exc).__name__


def _job_log_handler(job_dir: Path | None = None) -> logging.FileHandler | None:
    """Hydra's file handler of the job log: one writing inside ``job_dir`` first; null-device ones skipped."""
    handlers = [h for h in logging.getLogger().handlers + logging.getLogger("ascendbench").handlers
                if isinstance(h, logging.FileHandler) and h.baseFilename != os.devnull]
    inside = [h for h in handlers
              if job_dir is not None and Path(job_dir).resolve() in Path(h.baseFilename).resolve().parents]
    return (inside or handlers or [None])[0]


def job_log_path(job_dir: Path | None = None) -> Path | None:
    """The file the job log is written to, if one is configured."""
    handler = _job_log_handler(job_dir)
    return Path(handler.baseFilename) if handler is not None else None


def log_traceback(exc: BaseException, job_dir: Path) -> Path:
    """Put the full traceback in the job log, or in ``<job_dir>/traceback.log`` when the job log would
    not keep it (none configured, or its level above DEBUG)."""
    text = "".join(traceback.format_exception(exc))
    handler = _job_log_handler(job_dir)
    if handler is not None and handler.level <= logging.DEBUG and log.isEnabledFor(logging.DEBUG):
        log.debug("traceback of the failure:\n%s", text)
        return Path(handler.baseFilename)
    fallback = Path(job_dir) / "traceback.log"
    fallback.parent.mkdir(parents=True, exist_ok=True)
    with open(fallback, "a") as handle:
        handle.write(text)
    return fallback


def _empty_accelerator_caches() -> None:
    """``empty_cache`` of every accelerator runtime this process has initialised."""
    runtimes: dict[str, Callable[[], Any]] = {"cuda": lambda: torch.cuda, "npu": lambda: getattr(torch, "npu", None)}
    for name, get in runtimes.items():
        runtime = get() if name != "npu" or "torch_npu" in sys.modules else None
        try:
            if runtime is not None and runtime.is_initialized():
                runtime.empty_cache()
        except Exception as exc:  # a broken runtime must not hide the job's own failure
            log.debug("could not empty the %s cache: %s", name, exc)


def release_memory() -> None:
    """Collect the failed job's objects (tracebacks hold its tensors) and empty device caches."""
    gc.collect()
    _empty_accelerator_caches()
