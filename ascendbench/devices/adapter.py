"""The device adapter: what a job needs from a device; per-type behaviour in lookup tables."""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import resource
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import psutil
import torch

from ascendbench.backend_autoload import autoload_facts
from ascendbench.devices.envdirs import ensure_env_dirs
from ascendbench.devices.npu import chip_options
from ascendbench.devices.runtime import ALLOWED_DEVICES, load_runtime, probe
from ascendbench.errors import ConfigError, DeviceUnavailableError

log = logging.getLogger(__name__)

_MB = 1024.0 * 1024.0
# Env vars the device's deterministic mode needs, set before its runtime initialises.
DETERMINISTIC_ENV = {"cuda": {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}}  # deterministic cuBLAS
_NPU_IMPORT = {"after_device_env": False}  # set once ascendbench itself imported torch_npu
# the environment each device runtime of this process started with: it reads device.env once
_STARTED_WITH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _setup_cuda(adapter: DeviceAdapter) -> None:
    allow, on = adapter.allow_hf32, adapter.deterministic
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = allow
    adapter.precision_switches = {"cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                                  "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32}
    torch.backends.cudnn.deterministic = on
    if on:
        torch.backends.cudnn.benchmark = False
    adapter.deterministic_switches.update({"cudnn.deterministic": on,
                                           "cudnn.benchmark": torch.backends.cudnn.benchmark})


def _setup_npu(adapter: DeviceAdapter) -> None:
    """Chip options, HF32 off unless allowed, the operator compile mode (reported as in force)."""
    runtime, allow = adapter.runtime, adapter.allow_hf32
    adapter.chip_options = chip_options(runtime, adapter.index, {
        "precision_mode": adapter.precision_mode,
        "allow_internal_format": adapter.allow_internal_format})
    runtime.matmul.allow_hf32 = runtime.conv.allow_hf32 = allow
    # read back: what is in force (torch_npu's getters read the option set in the runtime)
    adapter.precision_switches = {"npu.matmul.allow_hf32": runtime.matmul.allow_hf32,
                                  "npu.conv.allow_hf32": runtime.conv.allow_hf32}
    cube = getattr(runtime.matmul, "cube_math_type", None)  # torch_npu >= 2.9; None when unset
    if cube is not None:  # it can override allow_hf32 for matmuls
        adapter.precision_switches["npu.matmul.cube_math_type"] = getattr(cube, "name", str(cube))
    if adapter.jit_compile is not None:
        runtime.set_compile_mode(jit_compile=bool(adapter.jit_compile))
    compile_probe = getattr(runtime, "is_jit_compile_false", None)
    adapter.jit_compile = None if compile_probe is None else not compile_probe()


# Device type -> the settings it has beyond torch's own (reduced-precision float32, determinism
# extras, chip options, compile mode), applied once its runtime is loaded and its card selected.
SETUP: dict[str, Callable[[DeviceAdapter], None]] = {"cuda": _setup_cuda, "npu": _setup_npu}


@dataclass(eq=False)
class DeviceAdapter:
    """A ``cpu``, ``cuda`` or ``npu`` device: sync, events, memory (``conf/device/*.yaml``)."""

    name: str
    index: int = 0
    env: Mapping[str, Any] | None = None
    allow_hf32: bool = False
    requested: str | None = None
    deterministic: bool = False
    threads: int | None = None
    jit_compile: bool | None = None
    record_env: Iterable[str] = ()
    peak: Mapping[str, Any] | None = None
    precision_mode: str | None = None
    allow_internal_format: bool | None = None
    world_size: int = 1  # ranks of a multi-card job (ascendbench.job.distributed)
    parallel: str = "none"
    dist: Mapping[str, Any] | None = None
    compile: str = "none"  # the graph-mode variant (ascendbench.graph)
    compile_options: Mapping[str, Any] | None = None
    # Set while building: what was applied, and the device runtime (None on the CPU).
    runtime: Any = field(init=False, repr=False, default=None)
    env_set: dict[str, str] = field(init=False, repr=False, default_factory=dict)
    env_dirs: dict[str, str] = field(init=False, repr=False, default_factory=dict)
    precision_switches: dict[str, bool] = field(init=False, repr=False, default_factory=dict)
    deterministic_switches: dict[str, Any] = field(init=False, repr=False, default_factory=dict)
    rss_reset_ok: bool | None = field(init=False, repr=False, default=None)
    chip_options: dict[str, Any] = field(init=False, repr=False, default_factory=dict)
    import_order: dict[str, Any] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in ALLOWED_DEVICES or self.name == "auto":
            raise ConfigError(f"device.name={self.name!r} is not a device type; allowed: cpu, "
                              "cuda, npu (or the option device=auto). Fix the override, e.g. "
                              "`device=cpu`.")
        self.index, self.requested = int(self.index), self.requested or self.name
        self.allow_hf32, self.deterministic = bool(self.allow_hf32), bool(self.deterministic)
        self.record_env = [str(k) for k in self.record_env]
        deterministic_env = DETERMINISTIC_ENV.get(self.name, {}) if self.deterministic else {}
        self.import_order = _import_order(self.name)
        self.env_set = _apply_env({**deterministic_env, **(self.env or {})})
        self.env_dirs = ensure_env_dirs() if self.name == "npu" else {}
        fresh = _loading_npu(self.name)
        self.runtime = None if self.name == "cpu" else load_runtime(self.name)
        _NPU_IMPORT["after_device_env"] |= fresh
        _check_in_force(self.runtime, self.env_set)
        if self.runtime is not None:  # the card first: events, the compile-mode probe, the name
            self.runtime.set_device(self.index)
        torch.use_deterministic_algorithms(self.deterministic, warn_only=True)
        self.deterministic_switches = {"torch.use_deterministic_algorithms": self.deterministic,
                                       "warn_only": True}
        if self.name in SETUP:
            SETUP[self.name](self)
        if self.threads is not None:
            torch.set_num_threads(int(self.threads))

    @property
    def torch_device(self) -> torch.device:
        """The ``torch.device`` tensors and modules are moved to."""
        return torch.device("cpu") if self.runtime is None else torch.device(self.name, self.index)

    def synchronize(self) -> None:
        """Wait until all work queued on the device has finished (no-op on CPU)."""
        if self.runtime is not None:
            self.runtime.synchronize(self.index)

    def new_event(self) -> Any | None:
        """A timing event of the device runtime, or ``None`` where the device has none (CPU)."""
        return None if self.runtime is None else self.runtime.Event(enable_timing=True)

    def reset_peak_memory(self) -> None:
        """Start a new peak-memory window: the device allocator's peaks and the host's peak RSS."""
        try:  # the kernel's peak-RSS mark of this process (Linux ``clear_refs`` 5); best effort
            Path("/proc/self/clear_refs").write_text("5")
            self.rss_reset_ok = True
        except OSError:
            self.rss_reset_ok = False
        if self.runtime is not None:
            self.runtime.reset_peak_memory_stats(self.index)

    def peak_memory_mb(self) -> dict[str, Any]:
        """Peak memory (MiB) since the reset and its scope (on the CPU: the host's peak RSS)."""
        rss = _proc_status_mb("VmHWM")  # the peak resident set
        window = ("since reset_peak_memory" if self.rss_reset_ok
                  else "process lifetime (the peak-RSS mark could not be reset)")
        if self.runtime is None:
            return {"peak_allocated_mb": rss, "peak_reserved_mb": rss, "peak_rss_mb": rss,
                    "scope": "cpu device: no allocator statistics; device figures are the host "
                             "process peak RSS", "rss_window": window}
        return {"peak_allocated_mb": self.runtime.max_memory_allocated(self.index) / _MB,
                "peak_reserved_mb": self.runtime.max_memory_reserved(self.index) / _MB,
                "peak_rss_mb": rss, "scope": f"{self.name}:{self.index} caching allocator",
                "rss_window": window}

    def memory_allocated_mb(self) -> float | None:
        """Memory held by tensors on the device now, in MiB (``None`` on the CPU)."""
        return None if self.runtime is None else self.runtime.memory_allocated(self.index) / _MB

    def device_name(self) -> str:
        """Human-readable name of the device (the CPU model on CPU)."""
        return cpu_model_name() if self.runtime is None else str(
            self.runtime.get_device_name(self.index))

    def total_memory_gb(self) -> float | None:
        """The device's memory in GiB (host RAM on the CPU); ``None`` when the runtime can't say."""
        try:
            if self.runtime is None:
                return psutil.virtual_memory().total / 2**30
            return self.runtime.get_device_properties(self.index).total_memory / 2**30
        except Exception:  # noqa: BLE001 - a fake or partial runtime: unknown, not an error
            return None

    def info(self) -> dict[str, Any]:
        """What the record keeps about the device and its settings (``env.device``)."""
        return {
            "type": self.name, "index": self.index, "requested": self.requested,
            "name": self.device_name(), "total_memory_gb": self.total_memory_gb(),
            "torch_device": "cpu" if self.runtime is None else f"{self.name}:{self.index}",
            "precision_switches": self.precision_switches, "env_set": self.env_set,
            "env_dirs": self.env_dirs, "cpu_threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(), "deterministic": self.deterministic,
            "deterministic_switches": self.deterministic_switches, "jit_compile": self.jit_compile,
            "set_device": None if self.runtime is None else self.index,
            "chip_options": self.chip_options, "import_order": self.import_order,
            "env_observed": {key: os.environ.get(key) for key in self.record_env}}


def auto_select(order: Iterable[str] = ("npu", "cuda", "cpu"), name: str = "auto",
                **kwargs: Any) -> DeviceAdapter:
    """``device=auto``: the first available type in ``order`` (logged), else an error."""
    _apply_env(kwargs.get("env") or {})
    if "npu" in order:
        ensure_env_dirs()
    reasons = []
    for kind in order:
        fresh = _loading_npu(kind)
        usable, why = probe(kind)
        _NPU_IMPORT["after_device_env"] |= fresh and sys.modules.get("torch_npu") is not None
        if usable:
            log.info("device=auto chose %s (%s)", kind, "; ".join(reasons) or "first in order")
            return DeviceAdapter(kind, requested="auto", **kwargs)
        reasons.append(f"{kind}: {why}")
    raise DeviceUnavailableError(
        f"device=auto found none of {list(order)} usable: {'; '.join(reasons)}. Add cpu to "
        "device.order or choose a device explicitly, e.g. `device=cpu`.")


def _loading_npu(name: str) -> bool:
    """True when loading ``name`` now imports torch_npu (so it sees the env just applied)."""
    return name == "npu" and sys.modules.get("torch_npu") is None


def _import_order(name: str) -> dict[str, Any]:
    if name != "npu":
        return {}
    early = sys.modules.get("torch_npu") is not None and not _NPU_IMPORT["after_device_env"]
    if early:
        log.warning("torch_npu was imported before device.env and the ASCEND_* directories were "
                    "applied (torch imported before ascendbench with TORCH_DEVICE_BACKEND_AUTOLOAD "
                    "on, or an explicit import): settings torch_npu reads at import may not be in "
                    "force")
    return {"torch_npu_imported_before_device_env": early, **autoload_facts()}


def _check_in_force(runtime: Any, env: Mapping[str, str]) -> None:
    """A ``device.env`` value the runtime did not start with cannot apply (it reads them once)."""
    if runtime is None:
        return
    started = _STARTED_WITH.setdefault(runtime, dict(os.environ))
    changed = [f"{k}={v} (started with {started.get(k, 'unset')})" for k, v in env.items()
               if started.get(k) != v]
    for key in (k for k, v in env.items() if started.get(k) != v):  # as the runtime has it
        if key in started:
            os.environ[key] = started[key]
        else:
            del os.environ[key]
    if changed:
        raise ConfigError(
            f"device.env: {'; '.join(changed)}: the device runtime of this process started "
            "earlier with other values and reads them once, so this job would record a setting "
            "not in force. Run each value in its own process: one command per value (`for v in "
            "True False; do python -m ascendbench ... device.env.KEY=...$v; done`).")


def _apply_env(env: Mapping[str, Any]) -> dict[str, str]:
    applied = {str(key): str(value) for key, value in env.items() if value is not None}
    os.environ.update(applied)
    return applied


def _proc_status_mb(key: str) -> float:
    """A memory field of ``/proc/self/status`` in MiB (``ru_maxrss`` where there is no /proc)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def host_rss_mb() -> float:
    """Current resident set of this process in MiB (``VmRSS``)."""
    return _proc_status_mb("VmRSS")


def cpu_model_name() -> str:
    """The CPU model string (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()
