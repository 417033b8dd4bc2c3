"""The device adapter: everything a job needs from a device, behind one small object.

Configured by ``conf/device/*.yaml`` (``_target_`` = :class:`DeviceAdapter` or :func:`auto_select`).
Per-type behaviour comes from the lookup tables in :mod:`ascendbench.devices.runtime` and below.
"""

from __future__ import annotations

import logging
import os
import platform
import resource
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import torch

from ascendbench.backend_autoload import autoload_facts
from ascendbench.devices.envdirs import ensure_env_dirs
from ascendbench.devices.npu_options import apply_internal_format, apply_precision_mode, cube_cores, select_card
from ascendbench.devices.npusmi import npu_smi_facts
from ascendbench.devices.platform_config import platform_figures
from ascendbench.devices.runtime import ALLOWED_DEVICES, load_runtime, probe
from ascendbench.errors import ConfigError, DeviceUnavailableError

log = logging.getLogger(__name__)

_MB = 1024.0 * 1024.0


def _set_cuda_hf32(runtime: Any, allow: bool) -> dict[str, bool]:
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow
    return {"cuda.matmul.allow_tf32": allow, "cudnn.allow_tf32": allow}


def _set_npu_hf32(runtime: Any, allow: bool) -> dict[str, bool]:
    runtime.matmul.allow_hf32 = allow
    runtime.conv.allow_hf32 = allow
    return {"npu.matmul.allow_hf32": allow, "npu.conv.allow_hf32": allow}


# Reduced-precision float32 (TF32 on CUDA, HF32 on Ascend) changes float32 results; off by default.
_HF32_SWITCHES: dict[str, Callable[[Any, bool], dict[str, bool]]] = {
    "cuda": _set_cuda_hf32,
    "npu": _set_npu_hf32,
}


def _set_cuda_deterministic(runtime: Any, on: bool) -> dict[str, Any]:
    torch.backends.cudnn.deterministic = on
    if on:
        torch.backends.cudnn.benchmark = False
    return {"cudnn.deterministic": on, "cudnn.benchmark": torch.backends.cudnn.benchmark}


# Per-type extras of device.deterministic (torch.use_deterministic_algorithms covers every type, and
# torch_npu honours it for NPU kernels); env vars must be set before the runtime initialises.
_DETERMINISTIC_SWITCHES: dict[str, Callable[[Any, bool], dict[str, Any]]] = {
    "cuda": _set_cuda_deterministic,
}
_DETERMINISTIC_ENV: dict[str, dict[str, str]] = {
    "cuda": {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"},  # required by deterministic cuBLAS (CUDA >= 10.2)
}


def _npu_jit_compile(runtime: Any, jit_compile: bool | None) -> bool | None:
    """NPU operator compile mode: set it when given, and report the mode in force (None if unknown)."""
    if jit_compile is not None:
        runtime.set_compile_mode(jit_compile=bool(jit_compile))
    probe_mode = getattr(runtime, "is_jit_compile_false", None)
    return None if probe_mode is None else not probe_mode()


# Device types with an operator compile mode (torch_npu: jit_compile=True compiles operators online,
# False uses prebuilt binaries; the first call's cost depends on it).
_COMPILE_MODES: dict[str, Callable[[Any, bool | None], bool | None]] = {
    "npu": _npu_jit_compile,
}


def _npu_chip_options(adapter: "DeviceAdapter") -> dict[str, Any]:
    chip = str(adapter.runtime.get_device_name(adapter.index))
    return {"precision_mode": apply_precision_mode(adapter.runtime, chip, adapter.precision_mode),
            "allow_internal_format": apply_internal_format(adapter.runtime, adapter.allow_internal_format),
            "cube_core_num": cube_cores(adapter.runtime, adapter.index),
            "platform_config": platform_figures(chip),
            "npu_smi": npu_smi_facts(adapter.index)}


# Device types with chip options of their own (devices/npu_options.py: ACL_PRECISION_MODE, internal formats).
_CHIP_OPTIONS: dict[str, Callable[["DeviceAdapter"], dict[str, Any]]] = {
    "npu": _npu_chip_options,
}


@dataclass(eq=False)
class DeviceAdapter:
    """A device of type ``cpu``, ``cuda`` or ``npu``: timing sync, events, memory and identity.

    A dataclass whose fields are the keys of ``conf/device/*.yaml``; building it applies the settings
    (environment, reduced-precision switches, determinism, threads, compile mode) and loads the
    device runtime. ``DeviceAdapter("cpu")`` is the host with every setting at its default.

    Attributes:
        name: device type (``cpu``, ``cuda``, ``npu``).
        index: device ordinal for accelerators.
        env: environment variables set before the device runtime initialises
            (e.g. ``PYTORCH_NPU_ALLOC_CONF``); ``null`` values are left alone.
        allow_hf32: allow TF32/HF32 reduced-precision float32 matmul and convolution.
        requested: what the user asked for (``auto`` when this adapter was chosen automatically).
        deterministic: ``torch.use_deterministic_algorithms`` (warn-only) plus the device's extras
            (cuDNN deterministic, ``CUBLAS_WORKSPACE_CONFIG``); ``false`` switches them off explicitly.
        threads: CPU threads for torch (``torch.set_num_threads``); ``None`` keeps torch's default.
        jit_compile: NPU operator compile mode (``torch.npu.set_compile_mode``); ``None`` keeps the
            chip's default (prebuilt binary kernels on Atlas A2). After building: the mode in force.
        record_env: environment variables whose values the record keeps (set or not).
        env_dirs: (set while building, ``npu`` only) the directories ``ASCEND_CACHE_PATH``,
            ``ASCEND_WORK_PATH`` and ``ASCEND_PROCESS_LOG_PATH`` name, created before ``torch_npu``
            is imported when missing (devices/envdirs.py).
        peak: peak TFLOP/s table and user override (``device.peak``), used for MFU.
        precision_mode: NPU ``ACL_PRECISION_MODE``; ``None`` sets ``must_keep_origin_dtype`` on chips below
            Ascend910B1 (whose default runs float32 in float16) and keeps the default elsewhere.
        allow_internal_format: ``torch.npu.config.allow_internal_format``; ``None`` keeps the chip default.
        chip_options: (set while building) what :mod:`ascendbench.devices.npu_options` set, and the AI-core count.
        world_size, parallel, dist: ranks of a multi-card job, its parallel mode and rendezvous
            (read by :mod:`ascendbench.job.distributed`; the adapter of each rank is one card).
        compile, compile_options: the graph-mode variant (read by :mod:`ascendbench.graph`).

    Raises:
        ConfigError: ``name`` is not a known device type.
        DeviceUnavailableError: the device runtime is missing or shows no device.
    """

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
    world_size: int = 1
    parallel: str = "none"
    dist: Mapping[str, Any] | None = None
    compile: str = "none"
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
        name = self.name
        if name not in ALLOWED_DEVICES or name == "auto":
            raise ConfigError(
                f"device.name={name!r} is not a device type; allowed: cpu, cuda, npu "
                f"(or the option device=auto). Fix the override, e.g. `device=cpu`."
            )
        self.index = int(self.index)
        self.requested = self.requested or name
        deterministic_env = _DETERMINISTIC_ENV.get(name, {}) if self.deterministic else {}
        self.import_order = _import_order(name)
        self.env_set = _apply_env({**deterministic_env, **(self.env or {})})
        self.env_dirs = ensure_env_dirs() if name == "npu" else {}
        fresh = _loading_npu(name)
        self.runtime = None if name == "cpu" else load_runtime(name)
        _NPU_IMPORT["after_device_env"] |= fresh
        if self.runtime is not None:  # before events, the compile-mode probe and the name: they use the current card
            select_card(self.runtime, self.index)
        chip_options = _CHIP_OPTIONS.get(name)
        self.chip_options = chip_options(self) if chip_options else {}
        self.allow_hf32 = bool(self.allow_hf32)
        self.precision_switches = self._set_hf32(self.allow_hf32)
        self.deterministic = bool(self.deterministic)
        self.deterministic_switches = self._set_deterministic(self.deterministic)
        if self.threads is not None:
            torch.set_num_threads(int(self.threads))
        compile_mode = _COMPILE_MODES.get(name)
        self.jit_compile = compile_mode(self.runtime, self.jit_compile) if compile_mode else None
        self.record_env = [str(k) for k in self.record_env]

    def _set_deterministic(self, on: bool) -> dict[str, Any]:
        torch.use_deterministic_algorithms(on, warn_only=True)
        switches: dict[str, Any] = {"torch.use_deterministic_algorithms": on, "warn_only": True}
        extra = _DETERMINISTIC_SWITCHES.get(self.name)
        return {**switches, **(extra(self.runtime, on) if extra else {})}

    def _set_hf32(self, allow: bool) -> dict[str, bool]:
        setter = _HF32_SWITCHES.get(self.name)
        return setter(self.runtime, allow) if setter else {}

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
        self.rss_reset_ok = _reset_host_peak_rss()
        if self.runtime is not None:
            self.runtime.reset_peak_memory_stats(self.index)

    def peak_memory_mb(self) -> dict[str, Any]:
        """Peak memory since :meth:`reset_peak_memory`, in MiB, with the scope it was measured in.

        ``peak_rss_mb`` is the host process's peak resident set; on the CPU it also stands in for the
        device figures (``peak_allocated_mb``/``peak_reserved_mb``), and ``scope`` says so.
        """
        rss = host_peak_rss_mb()
        window = ("since reset_peak_memory" if self.rss_reset_ok
                  else "process lifetime (the peak-RSS mark could not be reset)")
        if self.runtime is None:
            return {"peak_allocated_mb": rss, "peak_reserved_mb": rss, "peak_rss_mb": rss,
                    "scope": "cpu device: no allocator statistics; device figures are the host process peak RSS",
                    "rss_window": window}
        return {
            "peak_allocated_mb": self.runtime.max_memory_allocated(self.index) / _MB,
            "peak_reserved_mb": self.runtime.max_memory_reserved(self.index) / _MB,
            "peak_rss_mb": rss,
            "scope": f"{self.name}:{self.index} caching allocator",
            "rss_window": window,
        }

    def memory_allocated_mb(self) -> float | None:
        """Memory held by tensors on the device now, in MiB (``None`` on the CPU: no allocator)."""
        if self.runtime is None:
            return None
        return self.runtime.memory_allocated(self.index) / _MB

    def device_name(self) -> str:
        """Human-readable name of the device (the CPU model on CPU)."""
        if self.runtime is None:
            return cpu_model_name()
        return str(self.runtime.get_device_name(self.index))

    def total_memory_gb(self) -> float | None:
        """The device's memory capacity in GiB (host RAM on the CPU); ``None`` when the runtime cannot say."""
        try:
            if self.runtime is None:
                import psutil

                return psutil.virtual_memory().total / 2**30
            return self.runtime.get_device_properties(self.index).total_memory / 2**30
        except Exception:  # noqa: BLE001 - a fake or partial runtime: the capacity is unknown, not an error
            return None

    def info(self) -> dict[str, Any]:
        """What the record keeps about the device and its settings."""
        return {
            "type": self.name,
            "index": self.index,
            "requested": self.requested,
            "name": self.device_name(),
            "total_memory_gb": self.total_memory_gb(),
            "torch_device": "cpu" if self.runtime is None else f"{self.name}:{self.index}",
            "precision_switches": self.precision_switches,
            "env_set": self.env_set,
            "env_dirs": self.env_dirs,
            "cpu_threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "deterministic": self.deterministic,
            "deterministic_switches": self.deterministic_switches,
            "jit_compile": self.jit_compile,
            "set_device": None if self.runtime is None else self.index,
            "chip_options": self.chip_options,
            "import_order": self.import_order,
            "env_observed": {key: os.environ.get(key) for key in self.record_env},
        }


def auto_select(order: Iterable[str] = ("npu", "cuda", "cpu"), name: str = "auto", **kwargs: Any) -> DeviceAdapter:
    """``device=auto``: the first available device type in ``order``; the choice is logged.

    ``device.env`` and the ``ASCEND_*`` directories are applied before the first probe: probing npu imports
    torch_npu, which reads them at import, and torch_npu <= 2.5.1 caches ``device_count()`` (``lru_cache`` on
    ``torch_npu/npu/utils.py:63-64`` in 2.5.1, ``:37-38`` in 2.1.0.post8), so ASCEND_RT_VISIBLE_DEVICES set later
    would not be seen.

    Raises:
        DeviceUnavailableError: none of the listed types is available.
    """
    _apply_env(kwargs.get("env") or {})  # before any probe imports a runtime (torch_npu reads env at import)
    if "npu" in order:
        ensure_env_dirs()
    reasons = []
    for name in order:
        fresh = _loading_npu(name)
        usable, why = probe(name)
        _NPU_IMPORT["after_device_env"] |= fresh and sys.modules.get("torch_npu") is not None
        if usable:
            log.info("device=auto chose %s (%s)", name, "; ".join(reasons) or "first in order")
            return DeviceAdapter(name, requested="auto", **kwargs)
        reasons.append(f"{name}: {why}")
    raise DeviceUnavailableError(
        f"device=auto found none of {list(order)} usable: {'; '.join(reasons)}. "
        "Add cpu to device.order or choose a device explicitly, e.g. `device=cpu`."
    )


_NPU_IMPORT = {"after_device_env": False}  # set once an adapter (or device=auto's probe) imported torch_npu itself


def _loading_npu(name: str) -> bool:
    """True when loading ``name`` now is what imports torch_npu (so it sees the env just applied)."""
    return name == "npu" and sys.modules.get("torch_npu") is None


def _import_order(name: str) -> dict[str, Any]:
    """Whether torch_npu was imported before any adapter applied ``device.env`` (then it never saw it)."""
    if name != "npu":
        return {}
    early = sys.modules.get("torch_npu") is not None and not _NPU_IMPORT["after_device_env"]
    if early:
        log.warning("torch_npu was imported before device.env and the ASCEND_* directories were applied (torch "
                    "imported before ascendbench with TORCH_DEVICE_BACKEND_AUTOLOAD on, or an explicit import): "
                    "settings torch_npu reads at import may not be in force")
    return {"torch_npu_imported_before_device_env": early, **autoload_facts()}


def _apply_env(env: Mapping[str, Any]) -> dict[str, str]:
    applied = {}
    for key, value in env.items():
        if value is None:
            continue
        os.environ[str(key)] = str(value)
        applied[str(key)] = str(value)
    return applied


def _reset_host_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark of this process (Linux ``clear_refs`` 5); best effort."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        log.debug("cannot reset the peak RSS mark; host peak memory covers the process lifetime")
        return False


def _proc_status_mb(field: str) -> float:
    """A memory field of ``/proc/self/status`` in MiB (``ru_maxrss`` where there is no /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def host_rss_mb() -> float:
    """Current resident set of this process in MiB (``VmRSS``)."""
    return _proc_status_mb("VmRSS")


def host_peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (``VmHWM``)."""
    return _proc_status_mb("VmHWM")


def cpu_model_name() -> str:
    """The CPU model string (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
